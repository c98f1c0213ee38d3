//! Arguments from `ndarray` arrays and results as `ndarray` views (cargo
//! feature `ndarray`).
//!
//! ```
//! use arrayad::{Arg, Module};
//! use ndarray::array;
//! let m = Module::compile("n.arr", "def f(a: [n][m]f64) -> [m]f64 = sum(a * a)")?;
//! let a = array![[1.0, 2.0], [3.0, 4.0]];
//! let out = m.function("f")?.call(&[Arg::ndarray(&a)?])?;
//! assert_eq!(arrayad::ndarray_view(&out[0]).unwrap(), array![10.0, 20.0].into_dyn());
//! # Ok::<(), arrayad::Error>(())
//! ```

use crate::{Arg, Error};
use arrayad_ir::{ArrayData, Value};
use ndarray::{ArrayBase, ArrayViewD, Data, Dimension, IxDyn};

/// The element types of arrays a call takes.
pub trait Element: Sized {
    /// The argument of these elements and shape.
    fn arg<'a>(data: &'a [Self], shape: &'a [usize]) -> Arg<'a>;
}

impl Element for f64 {
    fn arg<'a>(data: &'a [f64], shape: &'a [usize]) -> Arg<'a> {
        Arg::Array { data, shape }
    }
}

impl Element for i64 {
    fn arg<'a>(data: &'a [i64], shape: &'a [usize]) -> Arg<'a> {
        Arg::I64Array { data, shape }
    }
}

impl Element for bool {
    fn arg<'a>(data: &'a [bool], shape: &'a [usize]) -> Arg<'a> {
        Arg::BoolArray { data, shape }
    }
}

impl<'a> Arg<'a> {
    /// An argument borrowing an `ndarray` array of `f64`, `i64` or `bool`
    /// (no copy).
    ///
    /// Errors: [`Error::InvalidArgument`] unless the array is contiguous
    /// and row-major (`as_standard_layout()` makes one that is).
    pub fn ndarray<A: Element + 'a, S: Data<Elem = A>, D: Dimension>(a: &'a ArrayBase<S, D>) -> Result<Arg<'a>, Error> {
        let data = a.as_slice().ok_or_else(|| {
            Error::InvalidArgument(
                "the ndarray argument is not contiguous and row-major: pass `a.as_standard_layout()`".into(),
            )
        })?;
        Ok(A::arg(data, a.shape()))
    }
}

/// An `f64` result (or gradient) as an `ndarray` view of any rank (a
/// scalar is a 0-dimensional view); `None` for `i64` and `bool` values.
pub fn ndarray_view(v: &Value) -> Option<ArrayViewD<'_, f64>> {
    match v {
        Value::F64(x) => ArrayViewD::from_shape(IxDyn(&[]), std::slice::from_ref(x)).ok(),
        Value::Array(a) => match &a.data {
            ArrayData::F64(d) => ArrayViewD::from_shape(IxDyn(&a.shape), d).ok(),
            _ => None,
        },
        _ => None,
    }
}
