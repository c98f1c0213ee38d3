//! Run-time values exchanged with callers: arguments and results of the
//! reference interpreter, of JIT-compiled functions and of the JSON interface.

use crate::program::{ErrorKind, Loc};
use crate::types::{Scalar, Type};
use std::fmt;

/// The elements of an array, row-major.
#[derive(Clone, PartialEq, Debug)]
pub enum ArrayData {
    /// `f64` elements.
    F64(Vec<f64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `bool` elements.
    Bool(Vec<bool>),
}

impl ArrayData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            ArrayData::F64(v) => v.len(),
            ArrayData::I64(v) => v.len(),
            ArrayData::Bool(v) => v.len(),
        }
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The element type.
    pub fn elem(&self) -> Scalar {
        match self {
            ArrayData::F64(_) => Scalar::F64,
            ArrayData::I64(_) => Scalar::I64,
            ArrayData::Bool(_) => Scalar::Bool,
        }
    }
}

/// A rectangular, row-major array.
#[derive(Clone, PartialEq, Debug)]
pub struct ArrayValue {
    /// Extent of each axis (length = rank >= 1).
    pub shape: Vec<usize>,
    /// `shape.iter().product()` elements, row-major.
    pub data: ArrayData,
}

impl ArrayValue {
    /// An `f64` array; `None` if `data.len()` is not the product of `shape`.
    pub fn f64(shape: Vec<usize>, data: Vec<f64>) -> Option<ArrayValue> {
        (shape.iter().product::<usize>() == data.len() && !shape.is_empty())
            .then_some(ArrayValue { shape, data: ArrayData::F64(data) })
    }
    /// The type of this array.
    pub fn ty(&self) -> Type {
        Type::array(self.data.elem(), self.shape.len() as u8)
    }
}

/// A scalar or an array.
#[derive(Clone, PartialEq, Debug)]
pub enum Value {
    /// `f64`.
    F64(f64),
    /// `i64`.
    I64(i64),
    /// `bool`.
    Bool(bool),
    /// An array.
    Array(ArrayValue),
}

impl Value {
    /// The IR type of the value.
    pub fn ty(&self) -> Type {
        match self {
            Value::F64(_) => Type::F64,
            Value::I64(_) => Type::I64,
            Value::Bool(_) => Type::BOOL,
            Value::Array(a) => a.ty(),
        }
    }
    /// A zero value of the same shape with `f64` elements (a zero tangent
    /// or cotangent); `None` for scalars that are not `f64`.
    pub fn zero_tangent(&self) -> Value {
        match self {
            Value::Array(a) => {
                Value::Array(ArrayValue { shape: a.shape.clone(), data: ArrayData::F64(vec![0.0; a.data.len()]) })
            }
            _ => Value::F64(0.0),
        }
    }
    /// The `f64` elements of an `f64` scalar or array, row-major.
    pub fn f64_elements(&self) -> Option<&[f64]> {
        match self {
            Value::F64(x) => Some(std::slice::from_ref(x)),
            Value::Array(ArrayValue { data: ArrayData::F64(v), .. }) => Some(v),
            _ => None,
        }
    }
    /// The scalar `f64`, if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::F64(x) => Some(*x),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::F64(x) => write!(f, "{x:?}"),
            Value::I64(x) => write!(f, "{x}"),
            Value::Bool(x) => write!(f, "{x}"),
            Value::Array(a) => {
                fn go(f: &mut fmt::Formatter<'_>, a: &ArrayValue, axis: usize, off: usize) -> fmt::Result {
                    let n = a.shape[axis];
                    let stride: usize = a.shape[axis + 1..].iter().product();
                    f.write_str("[")?;
                    for i in 0..n {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        if axis + 1 == a.shape.len() {
                            match &a.data {
                                ArrayData::F64(v) => write!(f, "{:?}", v[off + i])?,
                                ArrayData::I64(v) => write!(f, "{}", v[off + i])?,
                                ArrayData::Bool(v) => write!(f, "{}", v[off + i])?,
                            }
                        } else {
                            go(f, a, axis + 1, off + i * stride)?;
                        }
                    }
                    f.write_str("]")
                }
                go(f, a, 0, 0)
            }
        }
    }
}

/// A run-time error of a call (LANGUAGE.md section 5).
#[derive(Clone, PartialEq, Debug)]
pub struct RuntimeError {
    /// The kind (its code is the C ABI error code).
    pub kind: ErrorKind,
    /// The full message, starting with `FILE:LINE:COL: ` where known.
    pub message: String,
}

impl RuntimeError {
    /// An error at a source location of `file`.
    pub fn at(kind: ErrorKind, file: &str, loc: Loc, detail: impl fmt::Display) -> RuntimeError {
        RuntimeError { kind, message: format!("{}:{}:{}: {}: {}", file, loc.line, loc.col, kind.describe(), detail) }
    }
    /// An error without a source location (bad arguments from a caller).
    pub fn new(kind: ErrorKind, detail: impl fmt::Display) -> RuntimeError {
        RuntimeError { kind, message: format!("{}: {}", kind.describe(), detail) }
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuntimeError {}
