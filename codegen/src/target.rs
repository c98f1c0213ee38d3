//! What code is generated for: the backend, the target machine and the
//! floating-point policy.

use crate::error::CodegenError;

/// A code generator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Cranelift: fast compilation, no vectorisation (the default).
    #[default]
    Cranelift,
    /// LLVM at `-O3` with vectorisation (cargo feature `llvm`).
    Llvm,
}

impl Backend {
    /// The backends this build of arrayad has, Cranelift first.
    pub fn available() -> Vec<Backend> {
        [Backend::Cranelift, Backend::Llvm].into_iter().filter(|b| b.check_available().is_ok()).collect()
    }

    /// Whether this build has the backend.
    ///
    /// Errors: [`CodegenError::Unavailable`], saying how to get it.
    pub fn check_available(self) -> Result<(), CodegenError> {
        crate::backend::generator(self).map(|_| ())
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cranelift => "cranelift",
            Backend::Llvm => "llvm",
        }
    }
}

/// How code is generated: for which machine, and with which float
/// semantics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TargetOptions {
    /// The target triple (`x86_64-unknown-linux-gnu`,
    /// `aarch64-unknown-linux-gnu`); `None` for the host. Only object files
    /// (shared libraries) can be built for another machine; the JIT runs on
    /// the host.
    pub triple: Option<String>,
    /// The CPU to select instructions for (an LLVM CPU name such as
    /// `skylake-avx512`, `x86-64-v3`, `neoverse-n1`, or `generic` for a
    /// portable library); `None` for the host's CPU when compiling for the
    /// host, `generic` otherwise. Cranelift compiles for the host's
    /// features when none is named (or `native`), else for the baseline of
    /// the target's architecture (it cannot select features by CPU name).
    pub cpu: Option<String>,
    /// Allows the LLVM backend to reassociate floating-point arithmetic
    /// (reductions are vectorised and summed in a different order; results
    /// change in the last bits), to contract multiply-adds and to assume no
    /// NaNs or infinities are produced where that enables an optimisation.
    /// Off by default: IEEE semantics, results bit-identical to the
    /// interpreter. Ignored by Cranelift.
    pub fast_math: bool,
    /// Every call flushes subnormal numbers (below 2.2e-308 in magnitude)
    /// to zero, as results and as operands, on its thread and on the
    /// threads of its parallel maps, and gives the caller back its own mode
    /// when it returns: MXCSR's FTZ and DAZ bits on x86-64, FPCR.FZ on
    /// AArch64. Both backends, JIT code and shared libraries. Arithmetic
    /// that meets subnormal numbers runs at full speed (on many x86-64
    /// CPUs each such operation otherwise takes a microcode assist of
    /// about a hundred cycles: a GMM gradient whose cotangents underflow
    /// ran 2.6x faster); results differ from IEEE's only where a value
    /// would be subnormal. Off by default.
    pub flush_subnormals: bool,
}

/// A target triple, checked.
pub(crate) fn parse_triple(triple: &str) -> Result<target_lexicon::Triple, CodegenError> {
    use std::str::FromStr;
    let t = target_lexicon::Triple::from_str(triple)
        .map_err(|e| CodegenError::Target(format!("`{triple}` is not a target triple: {e}")))?;
    if t.pointer_width().map(|w| w.bits()) != Ok(64) {
        return Err(CodegenError::Target(format!("`{triple}`: only 64-bit targets are supported")));
    }
    match t.architecture {
        target_lexicon::Architecture::X86_64 | target_lexicon::Architecture::Aarch64(_) => Ok(t),
        a => Err(CodegenError::Target(format!(
            "`{triple}`: the architecture {a} is not supported (x86_64 and aarch64 are)"
        ))),
    }
}

impl TargetOptions {
    /// The options for the host with `fast_math` off.
    pub fn host() -> TargetOptions {
        TargetOptions::default()
    }

    /// True when compiling for another machine than this one.
    pub fn is_cross(&self) -> bool {
        match &self.triple {
            None => false,
            Some(t) => match parse_triple(t) {
                Ok(t) => {
                    let host = target_lexicon::Triple::host();
                    t.architecture != host.architecture || t.operating_system != host.operating_system
                }
                Err(_) => true,
            },
        }
    }
}
