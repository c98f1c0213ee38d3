//! Compiled modules: [`Module`] (one source file) and its [`Options`].

use crate::engine::{derive, guard, Backend, Engine, Kind};
use crate::error::Error;
use crate::function::Function;
use arrayad_codegen::TargetOptions;
use arrayad_ir::{FuncId, Program};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// How [`Module::compile_with`] compiles a source file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Cranelift JIT (the default), LLVM JIT (feature `llvm`) or the
    /// reference interpreter.
    pub backend: Backend,
    /// The CPU to compile for and the float policy (LLVM: `cpu` and
    /// `fast_math`; see [`TargetOptions`]). The JIT compiles for this
    /// machine: `triple` must be `None` (or the host's).
    pub target: TargetOptions,
    /// Reverse mode checkpoints every counted loop (O(sqrt(n)) memory for a
    /// loop of n iterations, one more run of its body; see
    /// [`arrayad_ad::AdOptions`]).
    pub checkpoint: bool,
    /// The parameters a [`Function`] differentiates unless told otherwise
    /// ([`Function::with_wrt`]; LANGUAGE.md section 6, `--wrt`): `None`
    /// differentiates every parameter with `f64` parts; otherwise only
    /// parameters of these names are active, in every definition. A name
    /// that matches no parameter of any definition is an [`Error::Usage`].
    pub wrt: Option<Vec<String>>,
    /// The most bytes of arena and tape memory one call may hold (for the
    /// interpreter: of arrays and tape alive in the call); a call that
    /// would need more fails with [`crate::ErrorKind::OutOfMemory`] at the
    /// allocating statement. `None`: `$ARRAYAD_MAX_MEMORY` (bytes, or with
    /// a suffix K, M, G or T), else half of the physical memory.
    pub max_memory: Option<u64>,
}

impl Options {
    /// The default options with `backend`.
    pub fn backend(backend: Backend) -> Options {
        Options { backend, ..Options::default() }
    }

    /// These options with LLVM's fast-math flags on or off
    /// ([`TargetOptions::fast_math`]).
    pub fn with_fast_math(mut self, on: bool) -> Options {
        self.target.fast_math = on;
        self
    }

    /// These options with the memory limit of a call set to `bytes`
    /// ([`Options::max_memory`]).
    pub fn with_max_memory(mut self, bytes: u64) -> Options {
        self.max_memory = Some(bytes);
        self
    }

    /// These options with the default active parameters set to `names`.
    pub fn with_wrt<S: AsRef<str>>(mut self, names: &[S]) -> Options {
        self.wrt = Some(names.iter().map(|s| s.as_ref().to_string()).collect());
        self
    }

    /// These options with checkpointing of counted loops on or off
    /// ([`Options::checkpoint`]).
    pub fn with_checkpoint(mut self, on: bool) -> Options {
        self.checkpoint = on;
        self
    }
}

/// A compiled source file: every definition with its primal and, compiled
/// on first use, its derivatives.
///
/// The code of each definition is generated on first use (the AD
/// transformation and the compilation run once per definition, kind of
/// code and set of differentiated parameters, then the machine code is
/// reused by every call); [`Module::precompile`] does all of it up front,
/// [`Function::precompile`] one entry point. A `Module` is a cheap handle
/// (`Arc` inside): clone it, keep it, send it to other threads
/// (`Send + Sync`); calls share no mutable state.
#[derive(Clone)]
pub struct Module {
    pub(crate) inner: Arc<Inner>,
}

/// What a [`Module`] holds.
pub(crate) struct Inner {
    pub program: Arc<Program>,
    pub options: Options,
    pub defs: Vec<Def>,
}

/// One definition of a module and its lazily built code.
pub(crate) struct Def {
    /// Its id in the program.
    pub id: FuncId,
    /// Which IR params (flattened leaves) are differentiated by default
    /// ([`Options::wrt`]).
    pub default_active: Arc<[bool]>,
    /// How its arguments are checked ([`crate::shapes::ArgPlan`]).
    pub plan: crate::shapes::ArgPlan,
    /// The names of its argument leaves ([`Function::arg_names`]).
    pub arg_names: Arc<[String]>,
    /// The prepared primal (its size checked first), shared by every
    /// active set.
    pub primal: OnceLock<Result<arrayad_ir::Function, Error>>,
    /// The primal's code.
    pub primal_code: OnceLock<Result<Engine, Error>>,
    /// The derivatives for the default active set.
    pub default: Derived,
    /// The derivatives for other active sets ([`Function::with_wrt`]).
    pub others: Mutex<HashMap<Arc<[bool]>, Arc<Derived>>>,
}

/// The derivatives of a definition for one set of active parameters.
#[derive(Default)]
pub(crate) struct Derived {
    /// The IR of the primal, jvp, vjp and many-row vjp, from one run of the
    /// pipeline on first use of any derivative.
    pub all: OnceLock<Result<arrayad_ad::Derivatives, Error>>,
    /// The jvp, vjp or many-row vjp alone (indexed by
    /// [`arrayad_ad::Which`]), when asked for before `all` (a gradient needs
    /// no jvp and no many-row vjp).
    pub one: [OnceLock<Result<arrayad_ir::Function, Error>>; 3],
    /// The jvp, vjp, many-row vjp and Hessian-vector product code, indexed
    /// by [`Kind`] (the primal's slot unused: see [`Def::primal_code`]).
    pub code: [OnceLock<Result<Engine, Error>>; 5],
    /// The Hessian-vector product IR, from `all` on first use.
    pub hvp: OnceLock<Result<arrayad_ir::Function, Error>>,
}

impl Module {
    /// Compiles `source` (the contents of a file called `file_name`, used
    /// in messages) for the Cranelift JIT with every parameter with `f64`
    /// parts differentiated.
    ///
    /// Errors: [`Error::Compile`] with the diagnostics.
    pub fn compile(file_name: &str, source: &str) -> Result<Module, Error> {
        Module::compile_with(file_name, source, Options::default())
    }

    /// Compiles `source` with `options`.
    ///
    /// Errors: [`Error::Compile`] with the diagnostics; [`Error::Usage`]
    /// for a `wrt` name that matches no parameter.
    pub fn compile_with(file_name: &str, source: &str, options: Options) -> Result<Module, Error> {
        let program = guard(|| arrayad_frontend::compile(file_name, source).map_err(Error::from))?;
        Module::from_program(program, options)
    }

    /// Reads and compiles the `.arr` file at `path` (named as given in
    /// messages) with the default options.
    ///
    /// Errors: as [`Module::from_file_with`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Module, Error> {
        Module::from_file_with(path, Options::default())
    }

    /// Reads and compiles the `.arr` file at `path` (named as given in
    /// messages) with `options`.
    ///
    /// Errors: [`Error::Io`] when the file cannot be read (a file that is
    /// not UTF-8 is a compile error at its first bad byte); otherwise as
    /// [`Module::compile_with`].
    pub fn from_file_with(path: impl AsRef<Path>, options: Options) -> Result<Module, Error> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| Error::Io(format!("cannot read {name}: {e}")))?;
        match String::from_utf8(bytes) {
            Ok(source) => Module::compile_with(&name, &source, options),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let source = String::from_utf8_lossy(e.as_bytes()).into_owned();
                let d = arrayad_frontend::Diagnostics::single(
                    &name,
                    &source,
                    arrayad_frontend::codes::Code::NotUtf8,
                    at..at + 1,
                    "the file is not valid UTF-8",
                );
                Err(Error::from(d))
            }
        }
    }

    /// Wraps an already compiled program.
    ///
    /// Errors: [`Error::Usage`] for a `wrt` name that matches no parameter
    /// of any definition.
    pub fn from_program(program: Program, options: Options) -> Result<Module, Error> {
        let program = guard(|| Ok(arrayad_ad::expand_derivatives(&program)?))?;
        if let Some(wrt) = &options.wrt {
            for name in wrt {
                let known = program.funcs.iter().any(|f| f.signature.params.iter().any(|p| &p.name == name));
                if !known {
                    return Err(Error::Usage(format!(
                        "--wrt `{name}` matches no parameter of any definition in {}",
                        program.file
                    )));
                }
            }
        }
        let defs = (0..program.funcs.len())
            .map(|i| {
                let id = FuncId(i as u32);
                let active = arrayad_ad::active_leaves(&program.func(id).signature, options.wrt.as_deref());
                Def {
                    id,
                    plan: crate::shapes::ArgPlan::new(&program.func(id).signature),
                    arg_names: crate::shapes::param_leaves(&program.func(id).signature)
                        .into_iter()
                        .map(|l| l.name)
                        .collect(),
                    default_active: active.into(),
                    primal: OnceLock::new(),
                    primal_code: OnceLock::new(),
                    default: Derived::default(),
                    others: Mutex::new(HashMap::new()),
                }
            })
            .collect();
        Ok(Module { inner: Arc::new(Inner { program: Arc::new(program), options, defs }) })
    }

    /// The definition called `name`, differentiating the module's default
    /// active parameters ([`Options::wrt`]).
    ///
    /// Errors: [`Error::Usage`] naming the definitions there are.
    pub fn function(&self, name: &str) -> Result<Function, Error> {
        match self.inner.program.find(name) {
            Some(id) => Ok(self.function_at(id.0 as usize)),
            None => {
                let names: Vec<&str> =
                    self.inner.program.definitions().map(|id| self.inner.program.func(id).name.as_str()).collect();
                Err(Error::Usage(format!(
                    "no definition `{name}` in {} (it defines: {})",
                    self.inner.program.file,
                    if names.is_empty() { "nothing".to_string() } else { names.join(", ") }
                )))
            }
        }
    }

    fn function_at(&self, index: usize) -> Function {
        Function { module: self.clone(), index, active: self.inner.defs[index].default_active.clone() }
    }

    /// Every definition, in source order.
    pub fn functions(&self) -> impl Iterator<Item = Function> + '_ {
        self.inner.program.definitions().map(move |id| self.function_at(id.0 as usize))
    }

    /// The compiled program (IR), e.g. to print it.
    pub fn program(&self) -> &Program {
        &self.inner.program
    }

    /// The options the module was compiled with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Differentiates and compiles the primal, jvp, vjp and many-row vjp
    /// (for [`Function::jacobian`]) of every definition now, for the default
    /// active parameters, instead of at their first call.
    ///
    /// Errors: the first failure ([`Error::Internal`] for a bug of the AD
    /// or of code generation).
    pub fn precompile(&self) -> Result<(), Error> {
        for f in self.functions() {
            // Every derivative from one run of the pipeline.
            f.derived()?;
            for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::Hvp) {
                f.engine(kind)?;
            }
        }
        Ok(())
    }

    pub(crate) fn ad_options(&self) -> arrayad_ad::AdOptions {
        arrayad_ad::AdOptions { checkpoint: self.inner.options.checkpoint }
    }
}

impl Def {
    /// The derivatives of the active set `active` (created on first use).
    pub(crate) fn derived_for(&self, active: &Arc<[bool]>) -> Arc<Derived> {
        // A poisoned lock only means another thread panicked while
        // inserting; the map is still consistent.
        let mut others = self.others.lock().unwrap_or_else(|p| p.into_inner());
        others.entry(active.clone()).or_default().clone()
    }
}

/// Every IR function of definition `id` with the IR params marked in
/// `active` differentiated, from its prepared primal when there is one.
pub(crate) fn derive_all(
    program: &Program,
    def: &Def,
    primal: Option<&arrayad_ir::Function>,
    active: &[bool],
    opts: arrayad_ad::AdOptions,
) -> Result<arrayad_ad::Derivatives, Error> {
    match primal {
        Some(p) => guard(|| Ok(arrayad_ad::derive_prepared(p.clone(), active, opts)?)),
        None => derive(program, def.id, active, opts),
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = &self.inner.program;
        let names: Vec<&str> = p.definitions().map(|id| p.func(id).name.as_str()).collect();
        f.debug_struct("Module")
            .field("file", &p.file)
            .field("functions", &names)
            .field("options", &self.inner.options)
            .finish()
    }
}
