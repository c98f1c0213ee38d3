//! Types of IR values: scalars and rectangular row-major arrays of scalars.
//!
//! Tuples do not exist in the IR: the frontend flattens them into several
//! variables (multi-result statements, multi-parameter functions).

use std::fmt;

/// Element type of a scalar or an array.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Scalar {
    /// IEEE-754 double; the only differentiable type.
    F64,
    /// 64-bit two's complement integer, wrapping arithmetic.
    I64,
    /// Boolean.
    Bool,
}

/// The type of an IR variable: a scalar (`rank == 0`) or an array of `rank`
/// dimensions whose extents are known only at run time.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Type {
    /// Element type.
    pub elem: Scalar,
    /// Number of dimensions; 0 for a scalar.
    pub rank: u8,
}

impl Type {
    /// `f64` scalar.
    pub const F64: Type = Type { elem: Scalar::F64, rank: 0 };
    /// `i64` scalar.
    pub const I64: Type = Type { elem: Scalar::I64, rank: 0 };
    /// `bool` scalar.
    pub const BOOL: Type = Type { elem: Scalar::Bool, rank: 0 };

    /// A scalar type.
    pub fn scalar(elem: Scalar) -> Type {
        Type { elem, rank: 0 }
    }
    /// An array type of the given rank (`rank >= 1`).
    pub fn array(elem: Scalar, rank: u8) -> Type {
        Type { elem, rank }
    }
    /// True for rank 0.
    pub fn is_scalar(self) -> bool {
        self.rank == 0
    }
    /// True for arrays.
    pub fn is_array(self) -> bool {
        self.rank > 0
    }
    /// True when values of this type carry a derivative (f64 scalars and arrays).
    pub fn is_differentiable(self) -> bool {
        self.elem == Scalar::F64
    }
    /// The type of one row (`rank - 1`), or the element for rank 1.
    pub fn row(self) -> Type {
        Type { elem: self.elem, rank: self.rank.saturating_sub(1) }
    }
    /// The type with one more leading dimension.
    pub fn lift(self) -> Type {
        Type { elem: self.elem, rank: self.rank + 1 }
    }
    /// The same shape with `f64` elements (the type of a tangent or cotangent).
    pub fn with_elem(self, elem: Scalar) -> Type {
        Type { elem, rank: self.rank }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scalar::F64 => "f64",
            Scalar::I64 => "i64",
            Scalar::Bool => "bool",
        })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for _ in 0..self.rank {
            f.write_str("[]")?;
        }
        write!(f, "{}", self.elem)
    }
}
