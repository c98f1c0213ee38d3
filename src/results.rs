//! Results of calls: per-parameter values reachable by position or by name
//! ([`ParamValues`]), and the copying of borrowed results into caller
//! buffers.

use crate::arg::Out;
use crate::error::Error;
use arrayad_codegen::{Dest, ResultRef};
use arrayad_ir::{Scalar, Value};
use smallvec::SmallVec;
use std::ops::Index;
use std::sync::Arc;

/// One optional value per argument leaf of a definition (a gradient, a
/// cotangent, a Hessian-vector product): `None` for a leaf that is not
/// differentiated. Index by position (`g[0]`) or look up by the leaf's name
/// (`g.get("x")`, `g.f64s("p.1")`: the names of
/// [`crate::Function::arg_names`]).
///
/// ```
/// # use arrayad::{Arg, Module};
/// let m = Module::compile("m.arr", "def f(x: [n]f64, k: i64) -> f64 = sum(x * x) * f64(k)")?;
/// let g = m.function("f")?.grad(&[Arg::Vector(&[1.0, 2.0]), Arg::I64(3)])?;
/// assert_eq!(g.gradient.f64s("x"), Some(&[6.0, 12.0][..]));
/// assert_eq!(g.gradient.shape("x"), Some(&[2][..]));
/// assert!(g.gradient.get("k").is_none());
/// # Ok::<(), arrayad::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ParamValues {
    names: Arc<[String]>,
    values: Vec<Option<Value>>,
}

impl ParamValues {
    pub(crate) fn new(names: Arc<[String]>, values: Vec<Option<Value>>) -> ParamValues {
        ParamValues { names, values }
    }

    /// The value of the leaf called `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<&Value> {
        let k = self.names.iter().position(|n| n == name)?;
        self.values.get(k)?.as_ref()
    }

    /// The `f64` elements (row-major; one for a scalar) of the leaf called
    /// `name`, if it has a value.
    pub fn f64s(&self, name: &str) -> Option<&[f64]> {
        match self.get(name)? {
            Value::F64(x) => Some(std::slice::from_ref(x)),
            v => v.f64_elements(),
        }
    }

    /// The shape of the leaf called `name` (`[]` for a scalar), if it has a
    /// value.
    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        match self.get(name)? {
            Value::Array(a) => Some(&a.shape),
            _ => Some(&[]),
        }
    }

    /// The names of the leaves, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The values, one per leaf, in order.
    pub fn as_slice(&self) -> &[Option<Value>] {
        &self.values
    }

    /// Number of leaves.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when the definition has no parameters.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `(name, value)` of every leaf, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&Value>)> {
        self.names.iter().map(String::as_str).zip(self.values.iter().map(Option::as_ref))
    }

    /// The values, one per leaf.
    pub fn into_vec(self) -> Vec<Option<Value>> {
        self.values
    }
}

impl Index<usize> for ParamValues {
    type Output = Option<Value>;

    fn index(&self, k: usize) -> &Option<Value> {
        &self.values[k]
    }
}

/// The output buffers offered as the memory of the results (for
/// [`crate::engine::Engine::run_into`]): for each output in order, an
/// array buffer with its size and element type, or `None` for a scalar.
/// The compiled function takes a buffer only for an array result of its
/// element type and size.
pub(crate) fn destinations(outs: &mut [Out<'_>], more: &mut [&mut [f64]]) -> SmallVec<[Option<Dest>; 8]> {
    fn buffer<T>(o: &mut [T], elem: Scalar) -> Option<Dest> {
        Some(Dest { ptr: o.as_mut_ptr().cast(), bytes: std::mem::size_of_val(o), elem })
    }
    let mut table: SmallVec<[Option<Dest>; 8]> = outs
        .iter_mut()
        .map(|out| match out {
            Out::F64s(o) => buffer(o, Scalar::F64),
            Out::I64s(o) => buffer(o, Scalar::I64),
            Out::Bools(o) => buffer(o, Scalar::Bool),
            Out::F64(_) | Out::I64(_) | Out::Bool(_) => None,
        })
        .collect();
    table.extend(more.iter_mut().map(|o| buffer(o, Scalar::F64)));
    table
}

/// Whether a result already lies in its output buffer (computed there by
/// destination passing): nothing to copy.
pub(crate) fn in_place<T>(data: &[T], out: &[T]) -> bool {
    std::ptr::eq(data.as_ptr(), out.as_ptr())
}

/// Copies borrowed results (described as `what`: `result`) into caller
/// outputs, one each, of matching type and length (a result already in
/// its output, by destination passing, is not copied).
pub(crate) fn copy_into(func: &str, what: &str, rs: &[ResultRef<'_>], outs: &mut [Out<'_>]) -> Result<(), Error> {
    if rs.len() != outs.len() {
        return Err(Error::InvalidArgument(format!(
            "`{func}` has {} {what} leaves, so it needs {} outputs, got {}",
            rs.len(),
            rs.len(),
            outs.len()
        )));
    }
    for (k, (r, out)) in rs.iter().zip(outs.iter_mut()).enumerate() {
        let ok = match (r, out) {
            (ResultRef::F64(x), Out::F64(o)) => {
                **o = *x;
                true
            }
            (ResultRef::I64(x), Out::I64(o)) => {
                **o = *x;
                true
            }
            (ResultRef::Bool(x), Out::Bool(o)) => {
                **o = *x;
                true
            }
            (ResultRef::F64s { data, .. }, Out::F64s(o)) if o.len() == data.len() => {
                if !in_place(data, o) {
                    o.copy_from_slice(data);
                }
                true
            }
            (ResultRef::I64s { data, .. }, Out::I64s(o)) if o.len() == data.len() => {
                if !in_place(data, o) {
                    o.copy_from_slice(data);
                }
                true
            }
            (ResultRef::Bools { data, .. }, Out::Bools(o)) if o.len() == data.len() => {
                if !in_place(data, o) {
                    o.copy_from_slice(data);
                }
                true
            }
            _ => false,
        };
        if !ok {
            let v = r.to_value();
            return Err(Error::InvalidArgument(format!(
                "{what} {k} of `{func}` is {}, which output {k} cannot hold (wrong type or length)",
                crate::shapes::describe_arg(&arrayad_codegen::ArgRef::of(&v))
            )));
        }
    }
    Ok(())
}
