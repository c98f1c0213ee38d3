//! `arrayad._arrayad`: the native part of the Python package `arrayad`.
//!
//! It wraps the Rust host API (`arrayad::Module`, `arrayad::Function`):
//! compiling (with the GIL released), calls of a definition's value and
//! derivatives on numpy arrays read in place (readonly borrows kept alive
//! while the GIL is released for the compiled call), and results as numpy
//! arrays that own the result buffers. The pure Python part
//! (`python/arrayad/__init__.py`) adds `compile`, `grad`,
//! `value_and_grad` and the exception classes.

mod convert;
mod errors;
mod function;
mod module;

use errors::{guarded, to_py};
use pyo3::prelude::*;

/// The backends this build can compile with.
#[pyfunction]
fn backends() -> Vec<&'static str> {
    let mut b = vec!["cranelift"];
    if cfg!(feature = "llvm") {
        b.push("llvm");
    }
    b.push("interp");
    b
}

/// The threads of parallel maps (`arrayad::num_threads`).
#[pyfunction]
fn num_threads() -> usize {
    arrayad::num_threads()
}

/// Sets the threads of parallel maps; `None` restores the default
/// (`arrayad::set_num_threads`).
#[pyfunction]
#[pyo3(signature = (n=None))]
fn set_num_threads(n: Option<usize>) {
    arrayad::set_num_threads(n)
}

#[allow(clippy::too_many_arguments)]
fn options(
    py: Python<'_>,
    backend: &str,
    wrt: Option<Vec<String>>,
    checkpoint: bool,
    max_memory: Option<u64>,
    fast_math: bool,
    keep_calls_above: Option<u64>,
    flush_subnormals: bool,
) -> PyResult<(arrayad::Options, &'static str)> {
    let (b, name) = match backend {
        "cranelift" => (arrayad::Backend::Cranelift, "cranelift"),
        "interp" => (arrayad::Backend::Interp, "interp"),
        "llvm" if cfg!(feature = "llvm") => (arrayad::Backend::Llvm, "llvm"),
        "llvm" => {
            return Err(errors::usage(
                py,
                "this build of arrayad has no LLVM backend: reinstall it with \
                 MATURIN_PEP517_ARGS=\"--features llvm\" pip install ./python (LLVM 19, Debian's llvm-19-dev)",
            ))
        }
        other => {
            return Err(errors::usage(
                py,
                format!("unknown backend `{other}` (this build has: {})", backends().join(", ")),
            ))
        }
    };
    let mut o = arrayad::Options::backend(b)
        .with_checkpoint(checkpoint)
        .with_fast_math(fast_math)
        .with_flush_subnormals(flush_subnormals);
    o.wrt = wrt;
    o.max_memory = max_memory;
    o.keep_calls_above = keep_calls_above;
    Ok((o, name))
}

/// Compiles `source` (named `name` in messages).
#[pyfunction]
#[pyo3(signature = (name, source, backend, wrt, checkpoint, max_memory, fast_math, keep_calls_above, flush_subnormals))]
#[allow(clippy::too_many_arguments)]
fn compile_source(
    py: Python<'_>,
    name: String,
    source: String,
    backend: &str,
    wrt: Option<Vec<String>>,
    checkpoint: bool,
    max_memory: Option<u64>,
    fast_math: bool,
    keep_calls_above: Option<u64>,
    flush_subnormals: bool,
) -> PyResult<module::Module> {
    guarded(py, || {
        let (opts, backend) =
            options(py, backend, wrt, checkpoint, max_memory, fast_math, keep_calls_above, flush_subnormals)?;
        let m = py.detach(|| arrayad::Module::compile_with(&name, &source, opts)).map_err(|e| to_py(py, e))?;
        module::Module::new(py, m, backend)
    })
}

/// Reads and compiles the file at `path`.
#[pyfunction]
#[pyo3(signature = (path, backend, wrt, checkpoint, max_memory, fast_math, keep_calls_above, flush_subnormals))]
#[allow(clippy::too_many_arguments)]
fn compile_file(
    py: Python<'_>,
    path: std::path::PathBuf,
    backend: &str,
    wrt: Option<Vec<String>>,
    checkpoint: bool,
    max_memory: Option<u64>,
    fast_math: bool,
    keep_calls_above: Option<u64>,
    flush_subnormals: bool,
) -> PyResult<module::Module> {
    guarded(py, || {
        let (opts, backend) =
            options(py, backend, wrt, checkpoint, max_memory, fast_math, keep_calls_above, flush_subnormals)?;
        let m = py.detach(|| arrayad::Module::from_file_with(&path, opts)).map_err(|e| to_py(py, e))?;
        module::Module::new(py, m, backend)
    })
}

#[pymodule]
fn _arrayad(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The LLVM backend compiles as the `arrayad` command does, with the
    // remainders of vectorised loops vectorised too. The option is
    // process-wide for the LLVM library that sets it, and this extension
    // links its own LLVM statically and exports none of its symbols, so
    // another package's LLVM in the same process (numba's llvmlite) keeps
    // its own options.
    #[cfg(feature = "llvm")]
    arrayad::llvm_vectorise_epilogues();
    m.add_class::<module::Module>()?;
    m.add_class::<function::Function>()?;
    m.add_function(wrap_pyfunction!(backends, m)?)?;
    m.add_function(wrap_pyfunction!(num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(compile_source, m)?)?;
    m.add_function(wrap_pyfunction!(compile_file, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
