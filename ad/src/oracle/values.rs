//! Dual values: every `f64` scalar, alone or inside an array, is paired with
//! a derivative `D` (a tangent in forward mode, a Delta in reverse mode:
//! Krawiec et al. 2022, Fig. 9, `D{R} = R x Delta`). `i64` and `bool` values
//! carry none.
//!
//! Arrays are views (offset and shape) of immutable, reference-counted
//! storage, so that indexing a row is O(1) as in the compiled code.

use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::value::{ArrayData, ArrayValue, Value};
use std::rc::Rc;

/// The number of elements of an array of extents `dims` (0 if any extent
/// is 0, saturating otherwise).
fn size(dims: &[usize]) -> usize {
    if dims.contains(&0) {
        0
    } else {
        dims.iter().fold(1usize, |n, &d| n.saturating_mul(d))
    }
}

/// A dual value.
#[derive(Clone, Debug)]
pub(crate) enum DVal<D> {
    F64(f64, D),
    I64(i64),
    Bool(bool),
    Arr(DArr<D>),
}

/// The elements of an array, row-major; `f64` elements with their
/// derivatives.
#[derive(Debug)]
pub(crate) enum Store<D> {
    F64 { x: Vec<f64>, d: Vec<D> },
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl<D> Store<D> {
    fn elem(&self) -> Scalar {
        match self {
            Store::F64 { .. } => Scalar::F64,
            Store::I64(_) => Scalar::I64,
            Store::Bool(_) => Scalar::Bool,
        }
    }
}

/// An array: a contiguous view of a store (invariant: `off + len() <= store
/// length`, `shape` non-empty).
#[derive(Debug)]
pub(crate) struct DArr<D> {
    pub store: Rc<Store<D>>,
    pub off: usize,
    pub shape: Vec<usize>,
}

impl<D> Clone for DArr<D> {
    fn clone(&self) -> Self {
        DArr { store: self.store.clone(), off: self.off, shape: self.shape.clone() }
    }
}

impl<D: Clone> DArr<D> {
    pub fn new(shape: Vec<usize>, store: Store<D>) -> DArr<D> {
        DArr { store: Rc::new(store), off: 0, shape }
    }

    /// Number of elements; it cannot overflow (see
    /// [`DArr::stride`]).
    pub fn len(&self) -> usize {
        size(&self.shape)
    }

    pub fn range(&self) -> std::ops::Range<usize> {
        self.off..self.off + self.len()
    }

    /// Number of elements of one row block at `axis`. Products of extents
    /// of a view cannot overflow: either an extent is 0, or the product is
    /// at most the length of the store the view lies in.
    pub fn stride(&self, axis: usize) -> usize {
        self.shape.get(axis + 1..).map_or(1, size)
    }

    pub fn ty(&self) -> Type {
        Type::array(self.store.elem(), self.shape.len() as u8)
    }

    /// The element at flat position `i` of the view.
    pub fn get(&self, i: usize) -> DVal<D> {
        let k = self.off + i;
        match &*self.store {
            Store::F64 { x, d } => DVal::F64(x[k], d[k].clone()),
            Store::I64(v) => DVal::I64(v[k]),
            Store::Bool(v) => DVal::Bool(v[k]),
        }
    }

    pub fn view(&self, start: usize, shape: Vec<usize>) -> DArr<D> {
        DArr { store: self.store.clone(), off: self.off + start, shape }
    }
}

impl<D: Clone> DVal<D> {
    pub fn ty(&self) -> Type {
        match self {
            DVal::F64(..) => Type::F64,
            DVal::I64(_) => Type::I64,
            DVal::Bool(_) => Type::BOOL,
            DVal::Arr(a) => a.ty(),
        }
    }

    /// The dual of a caller's value; `deriv(k)` is the derivative of its
    /// `k`-th `f64` element (row-major).
    pub fn from_value(v: &Value, mut deriv: impl FnMut(usize) -> D) -> DVal<D> {
        match v {
            Value::F64(x) => DVal::F64(*x, deriv(0)),
            Value::I64(x) => DVal::I64(*x),
            Value::Bool(x) => DVal::Bool(*x),
            Value::Array(a) => {
                let store = match &a.data {
                    ArrayData::F64(x) => Store::F64 { x: x.clone(), d: (0..x.len()).map(deriv).collect() },
                    ArrayData::I64(v) => Store::I64(v.clone()),
                    ArrayData::Bool(v) => Store::Bool(v.clone()),
                };
                DVal::Arr(DArr::new(a.shape.clone(), store))
            }
        }
    }

    /// The primal value.
    pub fn primal(&self) -> Value {
        match self {
            DVal::F64(x, _) => Value::F64(*x),
            DVal::I64(x) => Value::I64(*x),
            DVal::Bool(x) => Value::Bool(*x),
            DVal::Arr(a) => {
                let r = a.range();
                let data = match &*a.store {
                    Store::F64 { x, .. } => ArrayData::F64(x[r].to_vec()),
                    Store::I64(v) => ArrayData::I64(v[r].to_vec()),
                    Store::Bool(v) => ArrayData::Bool(v[r].to_vec()),
                };
                Value::Array(ArrayValue { shape: a.shape.clone(), data })
            }
        }
    }

    /// The derivatives of the `f64` elements (row-major), if the value has
    /// `f64` elements.
    pub fn derivs(&self) -> Option<Vec<D>> {
        match self {
            DVal::F64(_, d) => Some(vec![d.clone()]),
            DVal::Arr(a) => match &*a.store {
                Store::F64 { d, .. } => Some(d[a.range()].to_vec()),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Collects rows into a fresh store (array literals, `for` bodies).
pub(crate) struct RowStore<D> {
    store: Store<D>,
}

impl<D: Clone> RowStore<D> {
    /// An empty store for elements of type `elem`.
    pub fn new(elem: Scalar) -> RowStore<D> {
        let store = match elem {
            Scalar::F64 => Store::F64 { x: Vec::new(), d: Vec::new() },
            Scalar::I64 => Store::I64(Vec::new()),
            Scalar::Bool => Store::Bool(Vec::new()),
        };
        RowStore { store }
    }

    /// Reserves room for `n` more elements; false if that cannot be
    /// allocated.
    pub fn reserve(&mut self, n: usize) -> bool {
        match &mut self.store {
            Store::F64 { x, d } => x.try_reserve_exact(n).is_ok() && d.try_reserve_exact(n).is_ok(),
            Store::I64(v) => v.try_reserve_exact(n).is_ok(),
            Store::Bool(v) => v.try_reserve_exact(n).is_ok(),
        }
    }

    /// Appends a scalar or the elements of an array; false if the element
    /// types differ.
    pub fn push(&mut self, v: &DVal<D>) -> bool {
        match (&mut self.store, v) {
            (Store::F64 { x, d }, DVal::F64(xv, dv)) => {
                x.push(*xv);
                d.push(dv.clone());
            }
            (Store::I64(s), DVal::I64(v)) => s.push(*v),
            (Store::Bool(s), DVal::Bool(v)) => s.push(*v),
            (s, DVal::Arr(a)) => {
                let r = a.range();
                match (s, &*a.store) {
                    (Store::F64 { x, d }, Store::F64 { x: ax, d: ad }) => {
                        x.extend_from_slice(&ax[r.clone()]);
                        d.extend_from_slice(&ad[r]);
                    }
                    (Store::I64(s), Store::I64(v)) => s.extend_from_slice(&v[r]),
                    (Store::Bool(s), Store::Bool(v)) => s.extend_from_slice(&v[r]),
                    _ => return false,
                }
            }
            _ => return false,
        }
        true
    }

    pub fn finish(self, shape: Vec<usize>) -> DArr<D> {
        DArr::new(shape, self.store)
    }
}
