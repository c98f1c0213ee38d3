//! The code generators at module level: [`CodegenBackend`] turns a set of
//! IR functions into JIT code or an object file, beside the lowering's
//! per-instruction [`Emitter`](crate::lower::emit::Emitter) (as rustc's
//! `CodegenBackend` sits beside its `BuilderMethods`). [`generator`] is the
//! one place that knows which backends this build has: adding a backend
//! is a variant of [`Backend`], an `Emitter` and an implementation of this
//! trait.

use crate::calls::Callees;
use crate::error::CodegenError;
use crate::target::{Backend, TargetOptions};
use arrayad_ir::Function;

/// Per compiled function, in order: its entry address and, when asked
/// for, its backend IR.
pub(crate) type Entries = Vec<(*const u8, Option<String>)>;

/// The owner of a JIT module's executable memory: dropping it frees the
/// code ([`crate::JitModule`] drops it only when no call can run).
pub(crate) type JitCode = Box<dyn std::any::Any>;

/// A code generator for whole modules.
pub(crate) trait CodegenBackend: Sync {
    /// Compiles `funcs` (verified IR; its calls go to `callees`:
    /// [`crate::CallTarget::Address`]) into executable memory
    /// for this machine (`options.cpu` and `options.fast_math` as the
    /// backend honours them): the code's owner, and per function its entry
    /// address and, with `keep_ir`, its backend IR (formatting it costs
    /// about as much as a fast compile: only `emit` and
    /// `Function::backend_ir` ask for it).
    fn compile_jit(
        &self,
        options: &TargetOptions,
        file: &str,
        funcs: &[&Function],
        callees: &Callees,
        keep_ir: bool,
    ) -> Result<(JitCode, Entries), CodegenError>;

    /// The object files (ELF, position-independent, hidden symbols) of
    /// `funcs`, each under its symbol name (their calls go to `callees`,
    /// functions of the same link by symbol), for `options.triple`: one, or
    /// one per code generator where a backend hands some functions to
    /// another (LLVM's size budget, `llvm/mod.rs`).
    fn compile_object(
        &self,
        options: &TargetOptions,
        file: &str,
        funcs: &[(String, &Function)],
        callees: &Callees,
    ) -> Result<Vec<Vec<u8>>, CodegenError>;
}

/// The code generator of `backend`.
///
/// Errors: [`CodegenError::Unavailable`] for LLVM in a build without the
/// `llvm` feature.
pub(crate) fn generator(backend: Backend) -> Result<&'static dyn CodegenBackend, CodegenError> {
    match backend {
        Backend::Cranelift => Ok(&crate::clif::Cranelift),
        #[cfg(feature = "llvm")]
        Backend::Llvm => Ok(&crate::llvm::Llvm),
        #[cfg(not(feature = "llvm"))]
        Backend::Llvm => Err(CodegenError::Unavailable(crate::NO_LLVM)),
    }
}
