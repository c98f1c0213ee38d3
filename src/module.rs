//! Compiled modules: [`Module`] (one source file) and its [`Options`].

use crate::driver::{self, Def};
use crate::engine::{Backend, Kind};
use crate::error::Error;
use crate::function::Function;
use arrayad_ad::Which;
use arrayad_codegen::TargetOptions;
use arrayad_ir::{FuncId, Program};
use std::path::Path;
use std::sync::Arc;

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
    /// The code of the value and of the derivatives calls definitions of
    /// at least this many statements (with their own calls inlined or
    /// kept) called from two places or more, instead of inlining them
    /// (`arrayad_ir::passes::inline::KeptCalls`); `None`:
    /// [`arrayad_ir::passes::inline::KEEP_CALLS_ABOVE`]; a kept call
    /// weighs [`arrayad_ir::passes::inline::KEPT_CALL_WEIGHT`] statements.
    /// Only the reverse mode (vjp, Jacobian rows, hvp) of a definition
    /// running reverse mode inside inlines every call.
    pub keep_calls_above: Option<u64>,
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

    /// These options with every call flushing subnormal numbers to zero
    /// on or off ([`TargetOptions::flush_subnormals`]; the interpreter
    /// ignores it).
    pub fn with_flush_subnormals(mut self, on: bool) -> Options {
        self.target.flush_subnormals = on;
        self
    }

    /// These options with definitions of at least `statements` statements
    /// kept as calls in the primal's code ([`Options::keep_calls_above`]).
    pub fn with_keep_calls_above(mut self, statements: u64) -> Options {
        self.keep_calls_above = Some(statements);
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
    /// The definitions kept as calls (`crate::driver::kept_calls`), decided
    /// on first use.
    pub kept: std::sync::OnceLock<arrayad_ir::passes::inline::KeptCalls>,
    /// The program as kept calls' code sees it
    /// (`arrayad_codegen::CalledProgram`), made on first use.
    pub called: std::sync::OnceLock<Arc<arrayad_codegen::CalledProgram>>,
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
        let program = driver::load(file_name, source)?;
        Module::with_program(program, options)
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
        let (name, source) = driver::read_source(path.as_ref())?;
        Module::compile_with(&name, &source, options)
    }

    /// Wraps an already compiled program.
    ///
    /// Errors: [`Error::Usage`] for a `wrt` name that matches no parameter
    /// of any definition.
    pub fn from_program(program: Program, options: Options) -> Result<Module, Error> {
        Module::with_program(driver::expand(program)?, options)
    }

    /// A module of `program`, whose derivative operators are expanded.
    fn with_program(program: Program, options: Options) -> Result<Module, Error> {
        driver::check_wrt(&program, None, options.wrt.as_deref())?;
        driver::check_memory_environment()?;
        let defs = (0..program.funcs.len())
            .map(|i| {
                let id = FuncId(i as u32);
                let active = arrayad_ad::active_leaves(&program.func(id).signature, options.wrt.as_deref());
                Def::new(&program, id, active)
            })
            .collect();
        Ok(Module {
            inner: Arc::new(Inner {
                program: Arc::new(program),
                options,
                defs,
                kept: std::sync::OnceLock::new(),
                called: std::sync::OnceLock::new(),
            }),
        })
    }

    /// The definition called `name`, differentiating the module's default
    /// active parameters ([`Options::wrt`]).
    ///
    /// Errors: [`Error::Usage`] naming the definitions there are.
    pub fn function(&self, name: &str) -> Result<Function, Error> {
        driver::find(&self.inner.program, name).map(|id| self.function_at(id.0 as usize))
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

    /// Differentiates and compiles the primal, jvp, vjp, vector jvp and
    /// many-row vjp (for [`Function::jacobian`]) of every definition now, for the default
    /// active parameters, instead of at their first call.
    ///
    /// Errors: the first failure ([`Error::Internal`] for a bug of the AD
    /// or of code generation).
    pub fn precompile(&self) -> Result<(), Error> {
        for f in self.functions() {
            // Every derivative from one linearisation.
            let lanes = self.inner.has_lanes(f.index, &f.active)?;
            let mut wanted = vec![Which::Jvp, Which::Vjp, Which::VjpRows];
            wanted.extend(lanes.then_some(Which::JvpLanes));
            self.inner.derive_together(f.index, &f.active, &wanted)?;
            for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::Hvp && (lanes || *k != Kind::JvpLanes)) {
                f.engine(kind)?;
            }
        }
        Ok(())
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
