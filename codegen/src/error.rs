//! The error type of code generation.

/// Why code generation, object emission or linking failed.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// The IR contains something the code generator does not handle.
    #[error("codegen: unsupported IR in `{func}`: {message}")]
    Unsupported {
        /// The function.
        func: String,
        /// What is unsupported.
        message: String,
    },
    /// The IR is malformed in a way the verifier should have caught.
    #[error("codegen: malformed IR in `{func}`: {message}")]
    Malformed {
        /// The function.
        func: String,
        /// What is wrong.
        message: String,
    },
    /// Cranelift rejected the generated code or the module.
    #[error("codegen: cranelift: {0}")]
    Cranelift(String),
    /// LLVM rejected the generated code (its verifier) or failed to
    /// optimise or emit it: an internal error naming the function.
    #[error("codegen: LLVM, in `{func}`: {message}")]
    Llvm {
        /// The function (`(module)` for module-wide steps).
        func: String,
        /// What went wrong.
        message: String,
    },
    /// The backend is not part of this build (LLVM without the cargo
    /// feature `llvm`): [`crate::NO_LLVM`].
    #[error("{0}")]
    Unavailable(&'static str),
    /// The host or target is not supported (e.g. not 64-bit).
    #[error("codegen: unsupported target: {0}")]
    Target(String),
    /// An exported interface cannot be expressed in C.
    #[error("codegen: C ABI: {0}")]
    Abi(String),
    /// Writing files or running the C compiler failed.
    #[error("codegen: {0}")]
    Link(String),
}

impl CodegenError {
    pub(crate) fn malformed(func: &str, message: impl Into<String>) -> CodegenError {
        CodegenError::Malformed { func: func.to_string(), message: message.into() }
    }
}

impl From<cranelift_module::ModuleError> for CodegenError {
    fn from(e: cranelift_module::ModuleError) -> Self {
        CodegenError::Cranelift(format!("{e:?}"))
    }
}
