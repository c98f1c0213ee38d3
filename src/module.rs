//! Compiled modules: [`Module`] (one source file) and its [`Options`].

use crate::engine::{derive, guard, Backend, Engine, Kind};
use crate::error::Error;
use crate::function::Function;
use arrayad_codegen::TargetOptions;
use arrayad_ir::{FuncId, Program};
use std::sync::{Arc, OnceLock};

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
    /// The parameters to differentiate (LANGUAGE.md section 6, `--wrt`):
    /// `None` differentiates every parameter with `f64` parts; otherwise
    /// only parameters of these names are active, in every definition. A
    /// name that matches no parameter of any definition is an
    /// [`Error::Usage`].
    pub wrt: Option<Vec<String>>,
    /// The most bytes of arena and tape memory one call of compiled code
    /// may hold; a call that would need more fails with
    /// [`crate::ErrorKind::OutOfMemory`] at the allocating statement.
    /// `None`: `$ARRAYAD_MAX_MEMORY` (bytes, or with a suffix K, M, G or T),
    /// else half of the physical memory. The interpreter has no limit.
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

    /// These options with the active parameters set to `names`.
    pub fn with_wrt<S: AsRef<str>>(mut self, names: &[S]) -> Options {
        self.wrt = Some(names.iter().map(|s| s.as_ref().to_string()).collect());
        self
    }
}

/// A compiled source file: every definition with its primal, jvp and vjp
/// (and the many-row vjp of its Jacobian).
///
/// The code of each definition is generated on first use (the AD
/// transformation and the Cranelift compilation run once per definition
/// and kind, then the machine code is reused by every call);
/// [`Module::precompile`] does all of it up front. A `Module` is
/// `Send + Sync`: share it between threads with `&` or `Arc`; calls do not
/// share mutable state.
pub struct Module {
    pub(crate) program: Arc<Program>,
    pub(crate) options: Options,
    pub(crate) defs: Vec<Def>,
}

/// One definition of a module and its lazily built code.
pub(crate) struct Def {
    /// Its id in the program.
    pub id: FuncId,
    /// Which IR params (flattened leaves) are differentiated.
    pub active: Vec<bool>,
    /// The IR of the primal, jvp, vjp and many-row vjp, from one run of the
    /// pipeline on first use of any derivative.
    pub derived: OnceLock<Result<arrayad_ad::Derivatives, Error>>,
    /// The primal IR alone, while no derivative has been asked for.
    pub primal: OnceLock<Result<arrayad_ir::Function, Error>>,
    /// The jvp, vjp or many-row vjp alone (indexed by
    /// [`arrayad_ad::Which`]), when asked for before `derived` (a gradient
    /// needs no jvp and no many-row vjp).
    pub one: [OnceLock<Result<arrayad_ir::Function, Error>>; 3],
    /// The primal, jvp, vjp and many-row vjp code, indexed by [`Kind`].
    pub code: [OnceLock<Result<Engine, Error>>; 5],
    /// The Hessian-vector product IR, from `derived` on first use.
    pub hvp: OnceLock<Result<arrayad_ir::Function, Error>>,
}

impl Module {
    /// Compiles `source` (the contents of a file called `file_name`, used
    /// in messages) for the Cranelift JIT with every parameter with `f64`
    /// parts differentiated.
    ///
    /// Errors: [`Error::Compile`] with rendered diagnostics.
    pub fn compile(file_name: &str, source: &str) -> Result<Module, Error> {
        Module::compile_with(file_name, source, Options::default())
    }

    /// Compiles `source` with `options`.
    ///
    /// Errors: [`Error::Compile`] with rendered diagnostics;
    /// [`Error::Usage`] for a `wrt` name that matches no parameter.
    pub fn compile_with(file_name: &str, source: &str, options: Options) -> Result<Module, Error> {
        let program = guard(|| Ok(arrayad_frontend::compile(file_name, source)?))?;
        Module::from_program(program, options)
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
                    active,
                    derived: OnceLock::new(),
                    primal: OnceLock::new(),
                    one: Default::default(),
                    code: Default::default(),
                    hvp: OnceLock::new(),
                }
            })
            .collect();
        Ok(Module { program: Arc::new(program), options, defs })
    }

    /// The definition called `name`.
    ///
    /// Errors: [`Error::Usage`] naming the definitions there are.
    pub fn function(&self, name: &str) -> Result<Function<'_>, Error> {
        match self.program.find(name) {
            Some(id) => Ok(Function { module: self, index: id.0 as usize }),
            None => {
                let names: Vec<&str> =
                    self.program.definitions().map(|id| self.program.func(id).name.as_str()).collect();
                Err(Error::Usage(format!(
                    "no definition `{name}` in {} (it defines: {})",
                    self.program.file,
                    if names.is_empty() { "nothing".to_string() } else { names.join(", ") }
                )))
            }
        }
    }

    /// Every definition, in source order.
    pub fn functions(&self) -> impl Iterator<Item = Function<'_>> {
        self.program.definitions().map(move |id| Function { module: self, index: id.0 as usize })
    }

    /// The compiled program (IR), e.g. to print it.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The options the module was compiled with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Differentiates and compiles the primal, jvp, vjp and many-row vjp
    /// (for [`Function::jacobian`]) of every definition now instead of at
    /// their first call.
    ///
    /// Errors: the first failure ([`Error::Internal`] for a bug of the AD
    /// or of code generation).
    pub fn precompile(&self) -> Result<(), Error> {
        for index in 0..self.defs.len() {
            // Every derivative from one run of the pipeline.
            self.derived(index)?;
            for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::Hvp) {
                self.engine(index, kind)?;
            }
        }
        Ok(())
    }

    /// The code of `kind` of definition `index`, built on first use.
    pub(crate) fn engine(&self, index: usize, kind: Kind) -> Result<&Engine, Error> {
        let def = &self.defs[index];
        def.code[kind as usize]
            .get_or_init(|| {
                crate::engine::compiling(|| {
                    let ir = self.ir(index, kind)?;
                    Engine::build(&self.program, def.id, ir, &self.options)
                })
            })
            .as_ref()
            .map_err(|e| e.clone())
    }

    /// The prepared primal of definition `index` (its size checked first).
    fn prepared(&self, index: usize) -> Result<&arrayad_ir::Function, Error> {
        let def = &self.defs[index];
        let p = def.primal.get_or_init(|| {
            guard(|| {
                arrayad_ad::check_size(&self.program, def.id)?;
                Ok(arrayad_ad::prepare(&self.program, def.id))
            })
        });
        p.as_ref().map_err(|e| e.clone())
    }

    /// Every derivative of definition `index`, from one run of the
    /// pipeline.
    fn derived(&self, index: usize) -> Result<&arrayad_ad::Derivatives, Error> {
        let def = &self.defs[index];
        let d = def.derived.get_or_init(|| match def.primal.get() {
            Some(Ok(p)) => guard(|| Ok(arrayad_ad::derive_prepared(p.clone(), &def.active, self.ad_options())?)),
            _ => derive(&self.program, def.id, &def.active, self.ad_options()),
        });
        d.as_ref().map_err(|e| e.clone())
    }

    fn ad_options(&self) -> arrayad_ad::AdOptions {
        arrayad_ad::AdOptions { checkpoint: self.options.checkpoint }
    }

    /// The IR of `kind` of definition `index` (`None`: the primal on the
    /// interpreter, which runs the program as written). The primal alone
    /// is only prepared; any derivative runs the whole pipeline once.
    fn ir(&self, index: usize, kind: Kind) -> Result<Option<&arrayad_ir::Function>, Error> {
        let def = &self.defs[index];
        if kind == Kind::Primal {
            if self.options.backend == Backend::Interp {
                return Ok(None);
            }
            if let Some(Ok(d)) = def.derived.get() {
                return Ok(Some(&d.primal));
            }
            return self.prepared(index).map(Some);
        }
        let which = match kind {
            Kind::Jvp => Some(arrayad_ad::Which::Jvp),
            Kind::Vjp => Some(arrayad_ad::Which::Vjp),
            Kind::VjpRows => Some(arrayad_ad::Which::VjpRows),
            _ => None,
        };
        if let (Some(which), None) = (which, def.derived.get()) {
            // One derivative alone, from the prepared primal.
            let one = def.one[which as usize].get_or_init(|| {
                let p = self.prepared(index)?;
                guard(|| Ok(arrayad_ad::derive_one(p, &def.active, self.ad_options(), which)?))
            });
            return one.as_ref().map(Some).map_err(|e| e.clone());
        }
        let d = self.derived(index)?;
        match kind.of(d) {
            Some(f) => Ok(Some(f)),
            None => {
                let h = def.hvp.get_or_init(|| guard(|| Ok(arrayad_ad::hvp(d, &def.active)?)));
                h.as_ref().map(Some).map_err(|e| e.clone())
            }
        }
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.program.definitions().map(|id| self.program.func(id).name.as_str()).collect();
        f.debug_struct("Module")
            .field("file", &self.program.file)
            .field("functions", &names)
            .field("options", &self.options)
            .finish()
    }
}
