//! The executable code of one definition: its primal, jvp, vjp or many-row
//! vjp (Jacobians), either
//! JIT-compiled by Cranelift or run by the reference interpreter.

use crate::error::Error;
use arrayad_codegen::JitModule;
use arrayad_ir::{interp, FuncId, Function, Program, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The code generator or interpreter that runs a module's functions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Cranelift, JIT-compiled in process (the default).
    #[default]
    Cranelift,
    /// The reference interpreter of the IR: slow, obviously right.
    Interp,
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
}

impl Kind {
    /// Every kind, in index order.
    pub const ALL: [Kind; 4] = [Kind::Primal, Kind::Jvp, Kind::Vjp, Kind::VjpRows];
}

impl Kind {
    /// A word for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Primal => "primal",
            Kind::Jvp => "jvp",
            Kind::Vjp => "vjp",
            Kind::VjpRows => "many-row vjp",
        }
    }
}

/// Compiled (or interpretable) code of one kind of one definition.
pub(crate) enum Engine {
    /// Machine code in its own JIT module.
    Jit { module: Box<JitModule>, name: String },
    /// IR for the interpreter: function `func` of `program`.
    Interp { program: Arc<Program>, func: FuncId },
}

/// The IR function of `kind` for definition `id`: the optimised, inlined
/// primal ([`arrayad_ad::prepare`]), or its jvp, vjp or many-row vjp
/// ([`arrayad_ad::vjp_rows`]) with the IR params
/// marked in `active` differentiated.
pub(crate) fn ir_function(program: &Program, id: FuncId, kind: Kind, active: &[bool]) -> Result<Function, Error> {
    guard(|| match kind {
        Kind::Primal => Ok(arrayad_ad::prepare(program, id)),
        Kind::Jvp => Ok(arrayad_ad::jvp(program, id, active)?),
        Kind::Vjp => Ok(arrayad_ad::vjp(program, id, active)?),
        Kind::VjpRows => Ok(arrayad_ad::vjp_rows(program, id, active)?),
    })
}

impl Engine {
    /// Prepares the code of `kind` for definition `id` on `backend`.
    pub fn build(
        program: &Arc<Program>,
        id: FuncId,
        kind: Kind,
        active: &[bool],
        backend: Backend,
    ) -> Result<Engine, Error> {
        match (backend, kind) {
            // The interpreter runs the primal on the program as written
            // (calls and all): the reference the compiled code is tested against.
            (Backend::Interp, Kind::Primal) => Ok(Engine::Interp { program: program.clone(), func: id }),
            (Backend::Interp, _) => {
                let f = ir_function(program, id, kind, active)?;
                let p = Program { file: program.file.clone(), funcs: vec![f] };
                Ok(Engine::Interp { program: Arc::new(p), func: FuncId(0) })
            }
            (Backend::Cranelift, _) => {
                let f = ir_function(program, id, kind, active)?;
                let name = f.name.clone();
                let module = Box::new(guard(|| Ok(JitModule::compile(&program.file, std::slice::from_ref(&f))?))?);
                Ok(Engine::Jit { module, name })
            }
        }
    }

    /// Runs the code on IR-level arguments (flattened leaves).
    pub fn run(&self, args: &[Value]) -> Result<Vec<Value>, Error> {
        guard(|| match self {
            Engine::Jit { module, name } => Ok(module.call(name, args)?),
            Engine::Interp { program, func } => Ok(interp::run(program, *func, args)?),
        })
    }

    /// The Cranelift IR text of the compiled function, if JIT-compiled.
    pub fn clif(&self) -> Option<String> {
        match self {
            Engine::Jit { module, name } => module.clif(name),
            Engine::Interp { .. } => None,
        }
    }
}

/// Runs `f`, turning a panic (a bug in arrayad) into [`Error::Internal`].
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(Error::Internal(format!("panic: {}", panic_message(&*payload)))),
    }
}

/// The message of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
