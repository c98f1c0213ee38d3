//! Borrowed arguments of the host API.

use arrayad_codegen::ArgRef;
use arrayad_ir::Value;
use smallvec::SmallVec;

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

impl<'a> Arg<'a> {
    /// The borrowed argument of compiled code (`len` holds the extent of a
    /// [`Arg::Vector`]).
    fn to_ref<'s>(self, len: &'s [usize; 1]) -> ArgRef<'s>
    where
        'a: 's,
    {
        match self {
            Arg::F64(x) => ArgRef::F64(x),
            Arg::I64(x) => ArgRef::I64(x),
            Arg::Bool(x) => ArgRef::Bool(x),
            Arg::Vector(data) => ArgRef::F64s { data, shape: len },
            Arg::Array { data, shape } => ArgRef::F64s { data, shape },
            Arg::I64Array { data, shape } => ArgRef::I64s { data, shape },
            Arg::BoolArray { data, shape } => ArgRef::Bools { data, shape },
            Arg::Value(v) => ArgRef::of(v),
        }
    }
}

/// Calls `f` with `args` as borrowed arguments of compiled code (no copy of
/// their elements).
pub(crate) fn with_refs<R>(args: &[Arg<'_>], f: impl FnOnce(&[ArgRef<'_>]) -> R) -> R {
    let lens: SmallVec<[[usize; 1]; 8]> =
        args.iter().map(|a| [if let Arg::Vector(d) = a { d.len() } else { 0 }]).collect();
    let refs: SmallVec<[ArgRef<'_>; 8]> = args.iter().zip(&lens).map(|(a, l)| a.to_ref(l)).collect();
    f(&refs)
}

/// Where [`crate::Function::call_into`] (and the other `_into` calls) write
/// one result leaf: a scalar, or a buffer of the leaf's element count
/// (row-major), overwritten.
#[derive(Debug)]
pub enum Out<'a> {
    /// An `f64` scalar.
    F64(&'a mut f64),
    /// An `i64` scalar.
    I64(&'a mut i64),
    /// A `bool` scalar.
    Bool(&'a mut bool),
    /// An `f64` array of any rank.
    F64s(&'a mut [f64]),
    /// An `i64` array of any rank.
    I64s(&'a mut [i64]),
    /// A `bool` array of any rank.
    Bools(&'a mut [bool]),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_borrowed_with_their_shapes() {
        let d = [1.0, 2.0, 3.0];
        let args = [Arg::Vector(&d), Arg::Array { data: &d, shape: &[3, 1] }, Arg::from(2.5)];
        with_refs(&args, |refs| {
            assert_eq!(refs[0], ArgRef::F64s { data: &d, shape: &[3] });
            assert_eq!(refs[1].shape(), &[3, 1]);
            assert_eq!(refs[2], ArgRef::F64(2.5));
            // No copy: the same memory.
            if let ArgRef::F64s { data, .. } = refs[0] {
                assert_eq!(data.as_ptr(), d.as_ptr());
            }
        });
    }
}
