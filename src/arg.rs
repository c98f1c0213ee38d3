//! Borrowed arguments of the host API.

use arrayad_ir::{ArrayData, ArrayValue, Value};

/// One argument (or tangent, or cotangent) of a call, borrowed from the
/// caller.
///
/// Arguments are the *leaves* of the source parameters, flattened left to
/// right as in the C ABI: a parameter of type `(f64, [n]f64)` takes two
/// arguments. Arrays are row-major and rectangular: `data.len()` must be the
/// product of `shape`, and `shape.len()` must be the rank of the parameter.
///
/// ```
/// use arrayad::Arg;
/// let m = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let a = Arg::Array { data: &m, shape: &[2, 3] }; // a [2][3]f64 argument
/// let v = Arg::Vector(&m[..3]);                     // a [3]f64 argument
/// let s = Arg::from(2.5);                           // an f64 argument
/// # let _ = (a, v, s);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<'a> {
    /// An `f64` scalar.
    F64(f64),
    /// An `i64` scalar.
    I64(i64),
    /// A `bool` scalar.
    Bool(bool),
    /// A rank-1 `f64` array.
    Vector(&'a [f64]),
    /// An `f64` array of any rank (`shape.len() >= 1`).
    Array {
        /// Elements, row-major.
        data: &'a [f64],
        /// Extent of each axis.
        shape: &'a [usize],
    },
    /// An `i64` array of any rank.
    I64Array {
        /// Elements, row-major.
        data: &'a [i64],
        /// Extent of each axis.
        shape: &'a [usize],
    },
    /// A `bool` array of any rank.
    BoolArray {
        /// Elements, row-major.
        data: &'a [bool],
        /// Extent of each axis.
        shape: &'a [usize],
    },
    /// A value owned elsewhere, e.g. a result of an earlier call.
    Value(&'a Value),
}

impl From<f64> for Arg<'_> {
    fn from(x: f64) -> Self {
        Arg::F64(x)
    }
}

impl From<i64> for Arg<'_> {
    fn from(x: i64) -> Self {
        Arg::I64(x)
    }
}

impl From<bool> for Arg<'_> {
    fn from(x: bool) -> Self {
        Arg::Bool(x)
    }
}

impl<'a> From<&'a [f64]> for Arg<'a> {
    fn from(x: &'a [f64]) -> Self {
        Arg::Vector(x)
    }
}

impl<'a> From<&'a Vec<f64>> for Arg<'a> {
    fn from(x: &'a Vec<f64>) -> Self {
        Arg::Vector(x)
    }
}

impl<'a> From<&'a Value> for Arg<'a> {
    fn from(x: &'a Value) -> Self {
        Arg::Value(x)
    }
}

impl Arg<'_> {
    /// Copies the argument into a [`Value`], checking that the data length
    /// matches the shape. `Err` holds the reason.
    pub(crate) fn to_value(self) -> Result<Value, String> {
        fn array<T: Clone>(data: &[T], shape: &[usize], wrap: fn(Vec<T>) -> ArrayData) -> Result<Value, String> {
            if shape.is_empty() {
                return Err("an array needs a shape of rank 1 or more".into());
            }
            let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
            if count != Some(data.len()) {
                return Err(format!(
                    "the array has {} elements but its shape {:?} needs {}",
                    data.len(),
                    shape,
                    count.map_or_else(|| "more than fit in memory".to_string(), |c| c.to_string())
                ));
            }
            Ok(Value::Array(ArrayValue { shape: shape.to_vec(), data: wrap(data.to_vec()) }))
        }
        match self {
            Arg::F64(x) => Ok(Value::F64(x)),
            Arg::I64(x) => Ok(Value::I64(x)),
            Arg::Bool(x) => Ok(Value::Bool(x)),
            Arg::Vector(d) => array(d, &[d.len()], ArrayData::F64),
            Arg::Array { data, shape } => array(data, shape, ArrayData::F64),
            Arg::I64Array { data, shape } => array(data, shape, ArrayData::I64),
            Arg::BoolArray { data, shape } => array(data, shape, ArrayData::Bool),
            Arg::Value(v) => match v {
                Value::Array(a) => {
                    let count = a.shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
                    if a.shape.is_empty() || count != Some(a.data.len()) {
                        return Err(format!("the array value has {} elements but shape {:?}", a.data.len(), a.shape));
                    }
                    Ok(v.clone())
                }
                _ => Ok(v.clone()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_check_their_shape() {
        let d = [1.0, 2.0, 3.0];
        assert!(Arg::Array { data: &d, shape: &[3] }.to_value().is_ok());
        assert!(Arg::Array { data: &d, shape: &[2, 2] }.to_value().is_err());
        assert!(Arg::Array { data: &d, shape: &[] }.to_value().is_err());
        assert!(Arg::Array { data: &d, shape: &[usize::MAX, 2] }.to_value().is_err());
        let v = Arg::Vector(&d).to_value().unwrap();
        assert_eq!(v.f64_elements(), Some(&d[..]));
    }
}
