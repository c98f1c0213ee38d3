//! The one error type of the host API and the command line.

pub use arrayad_frontend::Diagnostics;
use arrayad_ir::{ErrorKind, RuntimeError};

/// Why compiling or calling an arrayad program failed.
///
/// The command line maps each variant to its exit status
/// ([`Error::exit_code`]): compile errors 1, usage errors and bad arguments 2,
/// run-time errors 3, internal errors 70.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The source does not compile: the diagnostics, each with its
    /// `FILE:LINE:COL` ([`Diagnostics::entries`]); displayed rendered (for
    /// each error an `error: MESSAGE` line, a `FILE:LINE:COL` line, the
    /// source line and a caret line).
    #[error("{0}")]
    Compile(Diagnostics),
    /// The request itself is wrong: an unknown function, a `--wrt` name that
    /// matches no parameter, `grad` of a function whose result is not a
    /// single `f64`, a backend that cannot do what was asked, ...
    #[error("{0}")]
    Usage(String),
    /// An argument, tangent or cotangent does not fit the signature: wrong
    /// count, element type or rank, a ragged or malformed array, malformed
    /// JSON. (Sizes that disagree with each other or with a literal
    /// dimension are run-time [`ErrorKind::SizeMismatch`] errors instead,
    /// as LANGUAGE.md section 5 says.)
    #[error("{0}")]
    InvalidArgument(String),
    /// A run-time error of the program (LANGUAGE.md section 5); the message
    /// starts with `FILE:LINE:COL: ` and names the kind and the values.
    #[error("{0}")]
    Runtime(RuntimeError),
    /// Reading or writing a file (or running the C compiler) failed.
    #[error("{0}")]
    Io(String),
    /// An internal error of differentiation or code generation: a bug of
    /// arrayad, not of the program.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The exit status of the command line for this error: 1 compile error,
    /// 2 usage error (including bad arguments and unusable files), 3 run-time
    /// error, 70 internal error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Compile(_) => 1,
            Error::Usage(_) | Error::InvalidArgument(_) | Error::Io(_) => 2,
            Error::Runtime(e) if e.kind == ErrorKind::InvalidArgument => 2,
            Error::Runtime(_) => 3,
            Error::Internal(_) => 70,
        }
    }

    /// The run-time error kind, for [`Error::Runtime`].
    pub fn runtime_kind(&self) -> Option<ErrorKind> {
        match self {
            Error::Runtime(e) => Some(e.kind),
            _ => None,
        }
    }
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Error {
        Error::Runtime(e)
    }
}

impl From<Diagnostics> for Error {
    fn from(d: Diagnostics) -> Error {
        Error::Compile(d)
    }
}

impl From<arrayad_ad::AdError> for Error {
    fn from(e: arrayad_ad::AdError) -> Error {
        match e {
            arrayad_ad::AdError::Unsupported(m) | arrayad_ad::AdError::TooLarge(m) => Error::Usage(m),
            other => Error::Internal(other.to_string()),
        }
    }
}

impl From<arrayad_codegen::CodegenError> for Error {
    fn from(e: arrayad_codegen::CodegenError) -> Error {
        use arrayad_codegen::CodegenError as C;
        match e {
            C::Link(m) => Error::Io(format!("building the shared library failed: {m}")),
            C::Abi(m) => Error::Usage(format!("cannot export to C: {m}")),
            C::Target(m) => Error::Usage(format!("unsupported target: {m}")),
            C::Unavailable(m) => Error::Usage(m.to_string()),
            other => Error::Internal(other.to_string()),
        }
    }
}

/// A warning about a program that compiles and runs, but not as asked:
/// today, a loop that checkpointing leaves taped
/// ([`crate::Function::checkpoint_warnings`]). Displayed as
/// `FILE:LINE:COL: warning: MESSAGE`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// The source file's name.
    pub file: String,
    /// 1-based line of the construct warned about.
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
    /// What happens and why.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: warning: {}", self.file, self.line, self.col, self.message)
    }
}
