//! Run-time values of the interpreter: scalars, and arrays as views (offset
//! and shape) of shared, reference-counted storage.
//!
//! `Index` with fewer indices than the rank and `Slice` give views that
//! share the storage of their parent (LANGUAGE.md section 3: "a row view"),
//! so that `AccAdd` through a view of an accumulator updates the parent.
//! Views are always contiguous: a row block of a row-major array.

use super::ops::Prim;
use crate::types::{Scalar, Type};
use crate::value::{ArrayData, ArrayValue, Value};
use std::cell::RefCell;
use std::rc::Rc;

/// The elements of a storage buffer.
#[derive(Clone, Debug)]
pub(crate) enum Data {
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl Data {
    /// Empty data of an element type, with room for `cap` elements, or
    /// `None` if that cannot be allocated.
    /// Beyond the run's memory limit ([`super::meter`]) it cannot.
    pub fn with_capacity(elem: Scalar, cap: usize) -> Option<Data> {
        fn vec<T>(cap: usize) -> Option<Vec<T>> {
            let bytes = u64::try_from(cap).ok()?.checked_mul(std::mem::size_of::<T>() as u64)?;
            if !super::meter::fits(bytes) {
                return None;
            }
            let mut v = Vec::new();
            v.try_reserve_exact(cap).ok()?;
            Some(v)
        }
        Some(match elem {
            Scalar::F64 => Data::F64(vec(cap)?),
            Scalar::I64 => Data::I64(vec(cap)?),
            Scalar::Bool => Data::Bool(vec(cap)?),
        })
    }

    /// The bytes of storage held (its capacity).
    pub fn bytes(&self) -> u64 {
        let (cap, size) = match self {
            Data::F64(v) => (v.capacity(), std::mem::size_of::<f64>()),
            Data::I64(v) => (v.capacity(), std::mem::size_of::<i64>()),
            Data::Bool(v) => (v.capacity(), std::mem::size_of::<bool>()),
        };
        (cap as u64).saturating_mul(size as u64)
    }

    pub fn elem(&self) -> Scalar {
        match self {
            Data::F64(_) => Scalar::F64,
            Data::I64(_) => Scalar::I64,
            Data::Bool(_) => Scalar::Bool,
        }
    }

    /// Appends a scalar; false if its type differs.
    pub fn push(&mut self, x: Prim) -> bool {
        match (self, x) {
            (Data::F64(v), Prim::F64(x)) => v.push(x),
            (Data::I64(v), Prim::I64(x)) => v.push(x),
            (Data::Bool(v), Prim::Bool(x)) => v.push(x),
            _ => return false,
        }
        true
    }

    /// Appends `other[range]`; false if the types differ.
    pub fn extend_from(&mut self, other: &Data, range: std::ops::Range<usize>) -> bool {
        match (self, other) {
            (Data::F64(v), Data::F64(w)) => v.extend_from_slice(&w[range]),
            (Data::I64(v), Data::I64(w)) => v.extend_from_slice(&w[range]),
            (Data::Bool(v), Data::Bool(w)) => v.extend_from_slice(&w[range]),
            _ => return false,
        }
        true
    }

    /// A copy of `self[start..start + len]` (in bounds), or `None` if it
    /// cannot be allocated.
    pub fn copy_range(&self, start: usize, len: usize) -> Option<Data> {
        let mut out = Data::with_capacity(self.elem(), len)?;
        out.extend_from(self, start..start + len);
        Some(out)
    }

    /// Sets element `i` (in bounds); false if the type differs.
    pub fn set(&mut self, i: usize, x: Prim) -> bool {
        match (self, x) {
            (Data::F64(v), Prim::F64(x)) => v[i] = x,
            (Data::I64(v), Prim::I64(x)) => v[i] = x,
            (Data::Bool(v), Prim::Bool(x)) => v[i] = x,
            _ => return false,
        }
        true
    }

    /// Copies `other[from..from + len]` to `self[to..to + len]` (in
    /// bounds); false if the types differ.
    pub fn copy_within_from(&mut self, to: usize, other: &Data, from: usize, len: usize) -> bool {
        match (self, other) {
            (Data::F64(v), Data::F64(w)) => v[to..to + len].copy_from_slice(&w[from..from + len]),
            (Data::I64(v), Data::I64(w)) => v[to..to + len].copy_from_slice(&w[from..from + len]),
            (Data::Bool(v), Data::Bool(w)) => v[to..to + len].copy_from_slice(&w[from..from + len]),
            _ => return false,
        }
        true
    }

    fn get(&self, i: usize) -> Prim {
        match self {
            Data::F64(v) => Prim::F64(v[i]),
            Data::I64(v) => Prim::I64(v[i]),
            Data::Bool(v) => Prim::Bool(v[i]),
        }
    }

    fn slice(&self, range: std::ops::Range<usize>) -> ArrayData {
        match self {
            Data::F64(v) => ArrayData::F64(v[range].to_vec()),
            Data::I64(v) => ArrayData::I64(v[range].to_vec()),
            Data::Bool(v) => ArrayData::Bool(v[range].to_vec()),
        }
    }
}

/// A storage buffer. `accumulator` marks buffers made by `ZerosLike`, the
/// only ones `AccAdd` may write. Its bytes count against the run's memory
/// limit while it lives ([`super::meter`]).
#[derive(Debug)]
pub(crate) struct Buffer {
    pub data: RefCell<Data>,
    pub accumulator: bool,
    /// The bytes counted for it.
    bytes: u64,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        super::meter::release(self.bytes);
    }
}

/// An array: a contiguous view of a buffer. Invariant: `off + len() <=
/// buffer length` and `shape` is non-empty.
#[derive(Clone, Debug)]
pub(crate) struct Array {
    pub buf: Rc<Buffer>,
    pub off: usize,
    pub shape: Vec<usize>,
}

impl Array {
    /// A fresh array owning `data` (whose length is the product of `shape`).
    pub fn new(shape: Vec<usize>, data: Data, accumulator: bool) -> Array {
        let bytes = data.bytes();
        super::meter::add(bytes);
        Array { buf: Rc::new(Buffer { data: RefCell::new(data), accumulator, bytes }), off: 0, shape }
    }

    /// A fresh array holding a copy of an argument.
    pub fn from_value(a: &ArrayValue) -> Array {
        let data = match &a.data {
            ArrayData::F64(v) => Data::F64(v.clone()),
            ArrayData::I64(v) => Data::I64(v.clone()),
            ArrayData::Bool(v) => Data::Bool(v.clone()),
        };
        // Arguments are the caller's memory, as the compiled code reads
        // them in place: not counted against the run's limit.
        Array {
            buf: Rc::new(Buffer { data: RefCell::new(data), accumulator: false, bytes: 0 }),
            off: 0,
            shape: a.shape.clone(),
        }
    }

    /// Number of elements (the product of the shape).
    pub fn len(&self) -> usize {
        size(&self.shape)
    }

    /// Number of elements of one row block at `axis` (product of the
    /// extents after `axis`).
    pub fn stride(&self, axis: usize) -> usize {
        self.shape.get(axis + 1..).map_or(1, size)
    }

    pub fn elem(&self) -> Scalar {
        self.buf.data.borrow().elem()
    }

    pub fn ty(&self) -> Type {
        Type::array(self.elem(), self.shape.len() as u8)
    }

    /// The element at flat position `i` of the view (`i < len()`).
    pub fn get(&self, i: usize) -> Prim {
        self.buf.data.borrow().get(self.off + i)
    }

    /// The view `[off + start, off + start + len)` with `shape`.
    pub fn view(&self, start: usize, shape: Vec<usize>) -> Array {
        Array { buf: self.buf.clone(), off: self.off + start, shape }
    }

    /// The elements of the view, appended to `out`; false if the element
    /// types differ.
    pub fn append_to(&self, out: &mut Data) -> bool {
        out.extend_from(&self.buf.data.borrow(), self.off..self.off + self.len())
    }

    /// The elements of an `f64` view, copied.
    pub fn f64_elements(&self) -> Option<Vec<f64>> {
        match &*self.buf.data.borrow() {
            Data::F64(v) => Some(v[self.off..self.off + self.len()].to_vec()),
            _ => None,
        }
    }

    /// A copy of the view as a caller-visible value.
    pub fn to_value(&self) -> ArrayValue {
        ArrayValue { shape: self.shape.clone(), data: self.buf.data.borrow().slice(self.off..self.off + self.len()) }
    }
}

/// The number of elements of an array of extents `dims`. It cannot
/// overflow for the shape of a view: either an extent is 0, or the product
/// is at most the length of the buffer the view lies in.
pub(crate) fn size(dims: &[usize]) -> usize {
    if dims.contains(&0) {
        0
    } else {
        dims.iter().fold(1usize, |n, &d| n.saturating_mul(d))
    }
}

/// A run-time value: a scalar or an array.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    Prim(Prim),
    Arr(Array),
}

impl Val {
    pub fn from_value(v: &Value) -> Val {
        match v {
            Value::F64(x) => Val::Prim(Prim::F64(*x)),
            Value::I64(x) => Val::Prim(Prim::I64(*x)),
            Value::Bool(x) => Val::Prim(Prim::Bool(*x)),
            Value::Array(a) => Val::Arr(Array::from_value(a)),
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Val::Prim(Prim::F64(x)) => Value::F64(*x),
            Val::Prim(Prim::I64(x)) => Value::I64(*x),
            Val::Prim(Prim::Bool(x)) => Value::Bool(*x),
            Val::Arr(a) => Value::Array(a.to_value()),
        }
    }

    pub fn ty(&self) -> Type {
        match self {
            Val::Prim(p) => Type::scalar(p.elem()),
            Val::Arr(a) => a.ty(),
        }
    }
}
