//! Python values to borrowed arrayad arguments, and results to Python.
//!
//! Arguments: a numpy array of the parameter's dtype and rank that is
//! C-contiguous and aligned is read where it is (a readonly borrow, no copy);
//! anything else (a list, another dtype that converts safely, a strided
//! view, a Fortran-ordered array) is converted once with
//! `numpy.ascontiguousarray`. Results: scalars become Python floats, ints
//! and bools; arrays become numpy arrays that own the result's buffer (no
//! second copy).

use crate::errors;
use arrayad::{ArrayData, Scalar, SrcType, Value};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{Element, IntoPyArray, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyList, PyTuple};

/// One argument leaf held for the duration of a call: a scalar, or a
/// readonly borrow of a numpy array (the caller's, or a converted copy).
pub(crate) enum Leaf<'py> {
    F64(f64),
    I64(i64),
    Bool(bool),
    F64s(PyReadonlyArrayDyn<'py, f64>),
    I64s(PyReadonlyArrayDyn<'py, i64>),
    Bools(PyReadonlyArrayDyn<'py, bool>),
}

impl Leaf<'_> {
    /// The borrowed argument (no copy of the elements).
    pub(crate) fn arg(&self) -> arrayad::Arg<'_> {
        use arrayad::Arg;
        // Every held array is C-contiguous and aligned (checked when it was
        // taken), so `as_slice` cannot fail; an empty slice stands in if it
        // ever did (and the call then reports the wrong element count).
        match self {
            Leaf::F64(x) => Arg::F64(*x),
            Leaf::I64(x) => Arg::I64(*x),
            Leaf::Bool(x) => Arg::Bool(*x),
            Leaf::F64s(a) => Arg::Array { data: a.as_slice().unwrap_or(&[]), shape: a.shape() },
            Leaf::I64s(a) => Arg::I64Array { data: a.as_slice().unwrap_or(&[]), shape: a.shape() },
            Leaf::Bools(a) => Arg::BoolArray { data: a.as_slice().unwrap_or(&[]), shape: a.shape() },
        }
    }

    /// The number of elements (1 for a scalar).
    pub(crate) fn len(&self) -> usize {
        match self {
            Leaf::F64s(a) => a.len(),
            Leaf::I64s(a) => a.len(),
            Leaf::Bools(a) => a.len(),
            _ => 1,
        }
    }
}

/// numpy's name of an element type.
pub(crate) fn dtype_name(s: Scalar) -> &'static str {
    match s {
        Scalar::F64 => "float64",
        Scalar::I64 => "int64",
        Scalar::Bool => "bool",
    }
}

/// `a float64 array of rank 2`, `an int64 scalar`.
pub(crate) fn describe_leaf(elem: Scalar, rank: usize) -> String {
    let article = if elem == Scalar::I64 { "an" } else { "a" };
    if rank == 0 {
        format!("{article} {} scalar", dtype_name(elem))
    } else {
        format!("{article} {} array of rank {rank}", dtype_name(elem))
    }
}

/// The element type and rank of a leaf type (not a tuple).
pub(crate) fn leaf_of(ty: &SrcType) -> (Scalar, usize) {
    match ty {
        SrcType::Scalar(s) => (*s, 0),
        SrcType::Array { elem, dims } => (*elem, dims.len()),
        // Callers pass leaves only.
        SrcType::Tuple(_) => (Scalar::F64, 0),
    }
}

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NUMPY.get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind())).map(|m| m.bind(py))
}

/// What a Python value is, for messages: `int64 rank 2`, `str`.
fn describe_value(obj: &Bound<'_, PyAny>) -> String {
    if let Ok(a) = obj.cast::<numpy::PyUntypedArray>() {
        let dtype = obj.getattr("dtype").and_then(|d| d.getattr("name")).map(|n| n.to_string());
        return format!("{} rank {}", dtype.as_deref().unwrap_or("?"), a.ndim());
    }
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "an object".into())
}

/// The leaves of a value of source type `ty`, appended to `out`. `what`
/// names the value in messages (``argument `x` of `f` ``); `name` is the
/// leaf's name (`x`, `p.0`).
pub(crate) fn flatten<'py>(
    obj: &Bound<'py, PyAny>,
    ty: &SrcType,
    what: &dyn Fn(&str) -> String,
    name: &str,
    out: &mut Vec<Leaf<'py>>,
) -> PyResult<()> {
    match ty {
        SrcType::Tuple(ts) => {
            let py = obj.py();
            let items: Vec<Bound<'py, PyAny>> = if let Ok(t) = obj.cast::<PyTuple>() {
                t.iter().collect()
            } else if let Ok(l) = obj.cast::<PyList>() {
                l.iter().collect()
            } else {
                return Err(errors::argument(
                    py,
                    format!(
                        "{}: expected a tuple of {} values ({ty}), got {}",
                        what(name),
                        ts.len(),
                        describe_value(obj)
                    ),
                ));
            };
            if items.len() != ts.len() {
                return Err(errors::argument(
                    py,
                    format!(
                        "{}: expected a tuple of {} values ({ty}), got {} values",
                        what(name),
                        ts.len(),
                        items.len()
                    ),
                ));
            }
            for (k, (item, t)) in items.iter().zip(ts).enumerate() {
                flatten(item, t, what, &format!("{name}.{k}"), out)?;
            }
            Ok(())
        }
        SrcType::Scalar(s) => {
            out.push(scalar(obj, *s, &|| what(name))?);
            Ok(())
        }
        SrcType::Array { elem, dims } => {
            out.push(array(obj, *elem, dims.len(), &|| what(name))?);
            Ok(())
        }
    }
}

/// A scalar leaf of element type `elem`.
pub(crate) fn scalar<'py>(obj: &Bound<'py, PyAny>, elem: Scalar, what: &dyn Fn() -> String) -> PyResult<Leaf<'py>> {
    let py = obj.py();
    // The common cases first.
    match elem {
        Scalar::F64 => {
            if let Ok(f) = obj.cast_exact::<PyFloat>() {
                return Ok(Leaf::F64(f.value()));
            }
        }
        Scalar::Bool => {
            if let Ok(b) = obj.cast_exact::<PyBool>() {
                return Ok(Leaf::Bool(b.is_true()));
            }
        }
        Scalar::I64 => {}
    }
    let wrong =
        |got: String| errors::argument(py, format!("{}: expected {}, got {got}", what(), describe_leaf(elem, 0)));
    // A numpy array: only of rank 0, and of a dtype that converts safely.
    if let Ok(a) = obj.cast::<numpy::PyUntypedArray>() {
        if a.ndim() != 0 || !can_cast(py, obj, elem)? {
            return Err(wrong(describe_value(obj)));
        }
        return scalar(&obj.call_method0("item")?, elem, what);
    }
    let is_float = obj.is_instance_of::<PyFloat>();
    let is_bool = obj.is_instance_of::<PyBool>() || is_numpy_bool(obj);
    match elem {
        Scalar::F64 => {
            // Floats, ints, bools and numpy scalars (anything with __float__
            // or __index__), but not strings or complex numbers.
            if is_str_like(obj) {
                return Err(wrong(describe_value(obj)));
            }
            obj.extract::<f64>().map(Leaf::F64).map_err(|_| wrong(describe_value(obj)))
        }
        Scalar::I64 => {
            // Integers (anything with __index__), not floats.
            if is_float || is_str_like(obj) {
                return Err(wrong(describe_value(obj)));
            }
            match obj.extract::<i64>() {
                Ok(x) => Ok(Leaf::I64(x)),
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => Err(errors::argument(
                    py,
                    format!(
                        "{}: expected {}, got an integer that does not fit in 64 bits",
                        what(),
                        describe_leaf(elem, 0)
                    ),
                )),
                Err(_) => Err(wrong(describe_value(obj))),
            }
        }
        Scalar::Bool => {
            if !is_bool {
                return Err(wrong(describe_value(obj)));
            }
            obj.is_truthy().map(Leaf::Bool)
        }
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> Option<String> {
    obj.get_type().name().ok().map(|n| n.to_string())
}

fn is_numpy_bool(obj: &Bound<'_, PyAny>) -> bool {
    matches!(type_name(obj).as_deref(), Some("bool_") | Some("bool"))
        && obj.get_type().module().map(|m| m == "numpy").unwrap_or(false)
}

fn is_str_like(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>()
}

/// Whether numpy converts `obj`'s dtype to `elem` without losing
/// information in kind: any integer, bool or float to float64 (`same_kind`),
/// integers and bools to int64 only where `safe`, bool to bool.
fn can_cast(py: Python<'_>, obj: &Bound<'_, PyAny>, elem: Scalar) -> PyResult<bool> {
    let np = numpy(py)?;
    let dtype = obj.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let ok = match elem {
        Scalar::F64 => {
            matches!(kind.as_str(), "f" | "i" | "u" | "b") && {
                np.call_method1("can_cast", (&dtype, np.getattr("float64")?, "same_kind"))?.is_truthy()?
            }
        }
        Scalar::I64 => {
            matches!(kind.as_str(), "i" | "u" | "b") && {
                np.call_method1("can_cast", (&dtype, np.getattr("int64")?, "safe"))?.is_truthy()?
            }
        }
        Scalar::Bool => kind == "b",
    };
    Ok(ok)
}

/// An array leaf of element type `elem` and rank `rank`.
pub(crate) fn array<'py>(
    obj: &Bound<'py, PyAny>,
    elem: Scalar,
    rank: usize,
    what: &dyn Fn() -> String,
) -> PyResult<Leaf<'py>> {
    match elem {
        Scalar::F64 => typed_array::<f64>(obj, elem, rank, what).map(Leaf::F64s),
        Scalar::I64 => typed_array::<i64>(obj, elem, rank, what).map(Leaf::I64s),
        Scalar::Bool => typed_array::<bool>(obj, elem, rank, what).map(Leaf::Bools),
    }
}

fn typed_array<'py, T: Element>(
    obj: &Bound<'py, PyAny>,
    elem: Scalar,
    rank: usize,
    what: &dyn Fn() -> String,
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    let py = obj.py();
    // Zero copy: the caller's array, read where it is.
    if let Ok(a) = obj.cast::<PyArrayDyn<T>>() {
        if a.ndim() == rank && a.is_c_contiguous() && (a.is_aligned() || a.len() == 0) {
            if let Ok(r) = a.try_readonly() {
                return Ok(r);
            }
        }
    }
    // Anything else is converted once.
    let np = numpy(py)?;
    let as_array = np.call_method1("asarray", (obj,)).map_err(|e| {
        errors::argument(
            py,
            format!(
                "{}: expected {}, got {} that numpy cannot convert ({e})",
                what(),
                describe_leaf(elem, rank),
                describe_value(obj)
            ),
        )
    })?;
    let a = as_array.cast::<numpy::PyUntypedArray>()?;
    if a.ndim() != rank || !can_cast(py, &as_array, elem)? {
        // A list or array is described by what numpy made of it, anything
        // else (a str, None, a number) by its type.
        let sequence = obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() || obj.is(&as_array);
        let got = describe_value(if sequence { &as_array } else { obj });
        return Err(errors::argument(py, format!("{}: expected {}, got {got}", what(), describe_leaf(elem, rank))));
    }
    let converted = np
        .call_method1("ascontiguousarray", (&as_array, np.getattr(dtype_name(elem))?))?
        .cast_into::<PyArrayDyn<T>>()?;
    converted.try_readonly().map_err(|e| errors::internal(py, format!("cannot borrow a converted argument: {e}")))
}

// ---- results ----------------------------------------------------------------

/// A result leaf as a Python value: a float, int or bool for a scalar, a
/// numpy array owning the result's buffer for an array.
pub(crate) fn value_to_py(py: Python<'_>, v: Value) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        Value::F64(x) => PyFloat::new(py, x).into_any(),
        Value::I64(x) => x.into_pyobject(py)?.into_any(),
        Value::Bool(x) => PyBool::new(py, x).to_owned().into_any(),
        Value::Array(a) => match a.data {
            ArrayData::F64(d) => owned_array(py, &a.shape, d)?,
            ArrayData::I64(d) => owned_array(py, &a.shape, d)?,
            ArrayData::Bool(d) => owned_array(py, &a.shape, d)?,
        },
    })
}

fn owned_array<'py, T: Element>(py: Python<'py>, shape: &[usize], data: Vec<T>) -> PyResult<Bound<'py, PyAny>> {
    let a = ArrayD::from_shape_vec(IxDyn(shape), data)
        .map_err(|e| errors::internal(py, format!("a result of shape {shape:?} has the wrong length: {e}")))?;
    Ok(a.into_pyarray(py).into_any())
}

/// Values (leaves, in order, `None` for a missing one) shaped like `ty`: a
/// tuple type becomes a Python tuple of its components.
pub(crate) fn structure<'py>(
    py: Python<'py>,
    ty: &SrcType,
    leaves: &mut impl Iterator<Item = Option<Value>>,
) -> PyResult<Bound<'py, PyAny>> {
    match ty {
        SrcType::Tuple(ts) => {
            let items = ts.iter().map(|t| structure(py, t, leaves)).collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, items)?.into_any())
        }
        _ => match leaves.next().flatten() {
            Some(v) => value_to_py(py, v),
            None => Ok(py.None().into_bound(py)),
        },
    }
}
