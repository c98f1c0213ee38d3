//! arrayad's errors as the Python exceptions of `arrayad._errors` (a pure
//! Python module, so that the classes have the bases, attributes and
//! docstrings a Python user expects), and panics caught at the boundary.

use pyo3::call::PyCallArgs;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The module that defines the exception classes.
fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    ERRORS.get_or_try_init(py, || Ok::<_, PyErr>(py.import("arrayad._errors")?.unbind())).map(|m| m.bind(py))
}

/// An exception of class `class` (of `arrayad._errors`) made with `args`.
fn make<'py>(py: Python<'py>, class: &str, args: impl PyCallArgs<'py>) -> PyErr {
    let made = errors_module(py).and_then(|m| m.getattr(class)).and_then(|c| c.call1(args));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        // The module itself failed (it cannot: it is part of the package).
        Err(e) => e,
    }
}

/// `arrayad.UsageError(message)`.
pub(crate) fn usage(py: Python<'_>, message: impl Into<String>) -> PyErr {
    make(py, "UsageError", (message.into(),))
}

/// `arrayad.ArgumentError(message)`.
pub(crate) fn argument(py: Python<'_>, message: impl Into<String>) -> PyErr {
    make(py, "ArgumentError", (message.into(),))
}

/// `arrayad.UnknownFunctionError(message)`.
pub(crate) fn unknown_function(py: Python<'_>, message: impl Into<String>) -> PyErr {
    make(py, "UnknownFunctionError", (message.into(),))
}

/// `arrayad.InternalError(message)`.
pub(crate) fn internal(py: Python<'_>, message: impl Into<String>) -> PyErr {
    make(py, "InternalError", (format!("internal error: {}", message.into()),))
}

/// The Python exception of an arrayad error.
pub(crate) fn to_py(py: Python<'_>, e: arrayad::Error) -> PyErr {
    use arrayad::Error as E;
    match e {
        E::Compile(d) => {
            let items = d.items().into_iter().map(|i| (i.file, i.line, i.col, i.code, i.message, i.notes));
            match PyList::new(py, items) {
                Ok(list) => make(py, "CompileError", (d.to_string(), list)),
                Err(e) => e,
            }
        }
        E::Usage(m) => usage(py, m),
        E::InvalidArgument(m) => argument(py, m),
        E::Runtime(r) => {
            let made = errors_module(py)
                .and_then(|m| m.getattr("_runtime_error"))
                .and_then(|f| f.call1((r.kind.code(), r.message)));
            match made {
                Ok(exc) => PyErr::from_value(exc),
                Err(e) => e,
            }
        }
        E::Io(m) => PyOSError::new_err(m),
        E::Internal(m) => make(py, "InternalError", (format!("internal error: {m}"),)),
        other => make(py, "Error", (other.to_string(),)),
    }
}

/// Runs `f`, turning a panic (a bug of the bindings or of arrayad) into
/// `arrayad.InternalError` rather than PyO3's `PanicException` (a
/// `BaseException` that `except Exception` does not catch).
pub(crate) fn guarded<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(internal(py, format!("panic: {}", arrayad::panic_message(&*payload)))),
    }
}
