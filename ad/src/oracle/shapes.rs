//! Checks and constructors of tangent and cotangent values: `f64` values of
//! the shape of a primal value.

use arrayad_ir::{ArrayData, ArrayValue, ErrorKind, RuntimeError, Value};

/// Checks that `v` is an `f64` value of the shape of `like`, which must have
/// `f64` elements; `what` names `v` in the error.
pub(crate) fn check_like(v: &Value, like: &Value, what: &str) -> Result<(), RuntimeError> {
    let bad = |detail: String| RuntimeError::new(ErrorKind::InvalidArgument, format!("{what}: {detail}"));
    match (v, like) {
        (Value::F64(_), Value::F64(_)) => Ok(()),
        (Value::Array(a), Value::Array(l)) if matches!(l.data, ArrayData::F64(_)) => {
            if !matches!(a.data, ArrayData::F64(_)) {
                return Err(bad("not an f64 array".into()));
            }
            if a.shape != l.shape || a.data.len() != l.data.len() {
                return Err(bad(format!(
                    "shape {:?} ({} elements) where {:?} is expected",
                    a.shape,
                    a.data.len(),
                    l.shape
                )));
            }
            Ok(())
        }
        (_, Value::F64(_) | Value::Array(ArrayValue { data: ArrayData::F64(_), .. })) => {
            Err(bad(format!("a value of type {} where {} is expected", v.ty(), like.ty())))
        }
        _ => Err(bad(format!("given for a value of type {}, which has no f64 part", like.ty()))),
    }
}

/// The `f64` value of the shape of `like` with elements `xs` (row-major), or
/// `None` if `like` has no `f64` elements.
pub(crate) fn f64_value_like(like: &Value, xs: Vec<f64>) -> Option<Value> {
    match like {
        Value::F64(_) => xs.first().map(|x| Value::F64(*x)),
        Value::Array(ArrayValue { shape, data: ArrayData::F64(_) }) => {
            Some(Value::Array(ArrayValue { shape: shape.clone(), data: ArrayData::F64(xs) }))
        }
        _ => None,
    }
}
