//! `arrayad.Module`: a compiled source file, its definitions by name.

use crate::errors::{self, guarded, to_py};
use crate::function::Function;
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList, PyString, PyTuple};

/// A compiled ``.arr`` program (made by :func:`arrayad.compile`).
///
/// Its definitions are :class:`Function` objects: ``m.f`` or ``m["f"]``
/// (``m["f"]`` also for a definition whose name is an attribute of the
/// module, such as ``file``). ``"f" in m``, ``len(m)`` and ``iter(m)`` (the
/// names, in source order) work as for a mapping.
#[pyclass(frozen, module = "arrayad", name = "Module")]
pub struct Module {
    inner: arrayad::Module,
    names: Vec<String>,
    functions: Vec<Py<Function>>,
    backend: &'static str,
}

impl Module {
    pub(crate) fn new(py: Python<'_>, inner: arrayad::Module, backend: &'static str) -> PyResult<Module> {
        let mut names = Vec::new();
        let mut functions = Vec::new();
        for f in inner.functions() {
            names.push(f.name().to_string());
            functions.push(Py::new(py, Function::new(f))?);
        }
        Ok(Module { inner, names, functions, backend })
    }

    fn find(&self, name: &str) -> Option<&Py<Function>> {
        self.names.iter().position(|n| n == name).map(|k| &self.functions[k])
    }

    fn unknown(&self, py: Python<'_>, name: &str) -> PyErr {
        errors::unknown_function(
            py,
            format!(
                "no definition `{name}` in {} (it defines: {})",
                self.inner.program().file,
                if self.names.is_empty() { "nothing".to_string() } else { self.names.join(", ") }
            ),
        )
    }
}

#[pymethods]
impl Module {
    /// The definition called ``name``; ``UnknownFunctionError`` (a
    /// ``KeyError``) if there is none.
    fn __getitem__(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<Function>> {
        let Ok(name) = name.cast::<PyString>() else {
            return Err(errors::argument(
                py,
                format!(
                    "definitions are looked up by name (a str), got {}",
                    name.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ),
            ));
        };
        let name = name.to_string();
        self.find(&name).map(|f| f.clone_ref(py)).ok_or_else(|| self.unknown(py, &name))
    }

    /// ``m.f``: the definition called ``f``; ``UnknownFunctionError`` (an
    /// ``AttributeError``) if there is none.
    fn __getattr__(&self, py: Python<'_>, name: String) -> PyResult<Py<Function>> {
        self.find(&name).map(|f| f.clone_ref(py)).ok_or_else(|| self.unknown(py, &name))
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        name.cast::<PyString>().map(|s| self.find(&s.to_string()).is_some()).unwrap_or(false)
    }

    fn __len__(&self) -> usize {
        self.names.len()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        PyIterator::from_object(PyTuple::new(py, &self.names)?.as_any())
    }

    fn __dir__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let object = py.import("builtins")?.getattr("object")?;
        let list = object.call_method1("__dir__", (slf,))?.cast_into::<PyList>()?;
        for n in &slf.get().names {
            list.append(n)?;
        }
        Ok(list)
    }

    /// The names of the definitions, in source order.
    #[getter]
    fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.names)
    }

    /// The definitions, in source order.
    #[getter]
    fn functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.functions.iter().map(|f| f.clone_ref(py)))
    }

    /// The source file's name as messages show it.
    #[getter]
    fn file(&self) -> String {
        self.inner.program().file.clone()
    }

    /// The backend: ``"cranelift"``, ``"llvm"`` or ``"interp"``.
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    /// Differentiates and compiles the value, jvp, vjp and Jacobian code of
    /// every definition now (for the default ``wrt``) rather than on first
    /// use.
    fn precompile(&self, py: Python<'_>) -> PyResult<()> {
        guarded(py, || {
            let inner = &self.inner;
            py.detach(|| inner.precompile()).map_err(|e| to_py(py, e))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<arrayad.Module {} ({}): {}>",
            self.inner.program().file,
            self.backend,
            if self.names.is_empty() { "no definitions".to_string() } else { self.names.join(", ") }
        )
    }
}
