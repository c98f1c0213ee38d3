//! The executable code of one definition: its primal, jvp, vjp or many-row
//! vjp (Jacobians), either JIT-compiled (Cranelift or LLVM) or run by the
//! reference interpreter.

use crate::driver::guard;
use crate::error::Error;
use crate::module::Options;
use arrayad_codegen::{ArgRef, JitModule, ResultRef};
use arrayad_ir::{interp, ArrayData, ArrayValue, FuncId, Function, Program, Value};
use std::sync::Arc;

/// The code generator or interpreter that runs a module's functions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Cranelift, JIT-compiled in process (the default): compiles fast.
    #[default]
    Cranelift,
    /// LLVM at `-O3` for this CPU, JIT-compiled in process (MCJIT): compiles
    /// slower, runs faster. Only when arrayad is built with the cargo
    /// feature `llvm`; otherwise compiling with it is an [`Error::Usage`].
    Llvm,
    /// The reference interpreter of the IR: slow, obviously right.
    Interp,
}

impl Backend {
    /// The code generator of a compiling backend (`None` for the
    /// interpreter).
    pub fn codegen(self) -> Option<arrayad_codegen::Backend> {
        match self {
            Backend::Cranelift => Some(arrayad_codegen::Backend::Cranelift),
            Backend::Llvm => Some(arrayad_codegen::Backend::Llvm),
            Backend::Interp => None,
        }
    }
}

/// Which code of a definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The primal: params -> results.
    Primal = 0,
    /// Forward mode: params ++ tangents -> results ++ tangents.
    Jvp = 1,
    /// Reverse mode: params ++ cotangents -> results ++ cotangents.
    Vjp = 2,
    /// Reverse mode for many cotangent rows after one forward pass (dense
    /// Jacobians): params ++ stacked cotangents -> results ++ stacked
    /// cotangents.
    VjpRows = 3,
    /// Forward over reverse (one f64 result): params ++ tangents -> value ++
    /// gradient ++ Hessian-vector product (`arrayad_ad::hvp`).
    Hvp = 4,
    /// Vector forward mode: params ++ [`arrayad_ad::jvp_lane_count`] sets of
    /// tangents -> results ++ that many sets of tangents
    /// (`arrayad_ad::jvp_lanes`).
    JvpLanes = 5,
}

impl Kind {
    /// Every kind, in index order.
    pub const ALL: [Kind; 6] = [Kind::Primal, Kind::Jvp, Kind::Vjp, Kind::VjpRows, Kind::Hvp, Kind::JvpLanes];

    /// A word for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Primal => "primal",
            Kind::Jvp => "jvp",
            Kind::Vjp => "vjp",
            Kind::VjpRows => "many-row vjp",
            Kind::Hvp => "Hessian-vector product",
            Kind::JvpLanes => "vector jvp",
        }
    }
}

/// Compiled (or interpretable) code of one kind of one definition.
pub(crate) enum Engine {
    /// Machine code in its own JIT module.
    Jit { module: Box<JitModule>, name: String },
    /// IR for the interpreter: function `func` of `program`, run within a
    /// memory limit of `max_memory` bytes as compiled code is.
    Interp { program: Arc<Program>, func: FuncId, max_memory: u64 },
}

impl Engine {
    /// Prepares the code of `kind` of definition `id` on the backend of
    /// `options` from its IR `f` (`None` for the primal on the interpreter,
    /// which runs the program as written), whose calls go to `callees`
    /// (compiled code that outlives this engine).
    pub fn build(
        program: &Arc<Program>,
        id: FuncId,
        f: Option<&Function>,
        options: &Options,
        callees: &arrayad_codegen::Callees,
    ) -> Result<Engine, Error> {
        let target = &options.target;
        let max_memory = options.max_memory.unwrap_or_else(arrayad_runtime::OwnedCtx::default_limit);
        match (options.backend.codegen(), f) {
            // The interpreter runs the primal on the program as written
            // (calls and all): the reference the compiled code is tested against.
            (None, None) => Ok(Engine::Interp { program: program.clone(), func: id, max_memory }),
            (None, Some(f)) => {
                let p = Program { file: program.file.clone(), funcs: vec![f.clone()] };
                Ok(Engine::Interp { program: Arc::new(p), func: FuncId(0), max_memory })
            }
            (Some(cg), Some(f)) => {
                let name = f.name.clone();
                let module = guard(|| {
                    let mut m =
                        JitModule::compile_calling(cg, target, &program.file, std::slice::from_ref(f), callees)?;
                    m.set_max_memory(options.max_memory);
                    Ok(m)
                })?;
                Ok(Engine::Jit { module: Box::new(module), name })
            }
            (Some(_), None) => Err(Error::Internal("compiled code without IR".into())),
        }
    }

    /// The entry address of compiled code, for the calls of code compiled
    /// after it (`None` on the interpreter).
    pub fn entry_address(&self) -> Option<usize> {
        match self {
            Engine::Jit { module, name } => module.entry_address(name),
            Engine::Interp { .. } => None,
        }
    }

    /// Runs the code on IR-level arguments (flattened leaves, borrowed) and
    /// gives `f` the results, borrowed from the call's memory.
    pub fn run<R>(&self, args: &[ArgRef<'_>], f: impl FnOnce(&[ResultRef<'_>]) -> R) -> Result<R, Error> {
        guard(|| match self {
            Engine::Jit { module, name } => Ok(module.call_with(name, args, f)?),
            Engine::Interp { program, func, max_memory } => {
                let values: Vec<Value> = args.iter().map(to_value).collect();
                let out = interp::run_with_limit(program, *func, &values, Some(*max_memory))?;
                let refs: Vec<ResultRef<'_>> = out.iter().map(result_ref).collect();
                Ok(f(&refs))
            }
        })
    }

    /// [`Engine::run`] offering buffers of the caller as the memory of the
    /// array results (destination passing, compiled code only: the
    /// interpreter ignores them): `dest` as for
    /// [`arrayad_codegen::JitModule::call_with_dest`], built by
    /// [`crate::results::destinations`] from `&mut` buffers, which no
    /// argument can alias.
    pub fn run_into<R>(
        &self,
        args: &[ArgRef<'_>],
        dest: &[Option<arrayad_codegen::Dest>],
        f: impl FnOnce(&[ResultRef<'_>]) -> R,
    ) -> Result<R, Error> {
        guard(|| match self {
            // SAFETY: the buffers of `dest` come from exclusive borrows the
            // caller holds over the call, distinct from the arguments'
            // shared borrows and from each other.
            Engine::Jit { module, name } => Ok(unsafe { module.call_with_dest(name, args, dest, f) }?),
            Engine::Interp { .. } => self.run(args, f),
        })
    }

    /// [`Engine::run`] with the results copied into values.
    pub fn run_values(&self, args: &[ArgRef<'_>]) -> Result<Vec<Value>, Error> {
        self.run(args, |rs| rs.iter().map(ResultRef::to_value).collect())
    }
}

/// A copy of a borrowed argument as a value (for the interpreter).
pub(crate) fn to_value(a: &ArgRef<'_>) -> Value {
    let arr = |shape: &[usize], data: ArrayData| Value::Array(ArrayValue { shape: shape.to_vec(), data });
    match *a {
        ArgRef::F64(x) => Value::F64(x),
        ArgRef::I64(x) => Value::I64(x),
        ArgRef::Bool(x) => Value::Bool(x),
        ArgRef::F64s { data, shape } => arr(shape, ArrayData::F64(data.to_vec())),
        ArgRef::I64s { data, shape } => arr(shape, ArrayData::I64(data.to_vec())),
        ArgRef::Bools { data, shape } => arr(shape, ArrayData::Bool(data.to_vec())),
    }
}

/// A value as a borrowed result.
fn result_ref(v: &Value) -> ResultRef<'_> {
    match v {
        Value::F64(x) => ResultRef::F64(*x),
        Value::I64(x) => ResultRef::I64(*x),
        Value::Bool(x) => ResultRef::Bool(*x),
        Value::Array(a) => match &a.data {
            ArrayData::F64(d) => ResultRef::F64s { data: d, shape: &a.shape },
            ArrayData::I64(d) => ResultRef::I64s { data: d, shape: &a.shape },
            ArrayData::Bool(d) => ResultRef::Bools { data: d, shape: &a.shape },
        },
    }
}
