//! The math functions of the language that compiled code calls rather than
//! computes inline (`exp` and `tanh` it computes inline:
//! [`crate::inline_math`]): one
//! typed table of their C symbols, arities and values,
//! read by the interpreter (which must agree with compiled code bit for
//! bit), both code generators and the runtime's symbol table.
//!
//! The C library (`libm`) provides all of them except `lgamma` (the
//! runtime's thread-safe `arrayad_lgamma`, which calls `lgamma_r`) and
//! `digamma` (the runtime's `arrayad_digamma`, mirrored operation for
//! operation by [`crate::interp::ops::digamma`]).

use crate::program::{BinOp, UnOp};

/// A math function called through its C symbol.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum MathFn {
    Log,
    Sin,
    Cos,
    Tan,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Log1p,
    Expm1,
    Erf,
    /// `ln |Γ(x)|` (`arrayad_lgamma`).
    Lgamma,
    /// ψ(x) = (ln Γ)′(x) (`arrayad_digamma`).
    Digamma,
    /// ψ^(n)(x) (`arrayad_polygamma(n, x)`).
    Polygamma,
    /// `pow(x, y)`.
    Pow,
    /// `atan2(y, x)`.
    Atan2,
}

impl MathFn {
    /// Every math function.
    pub const ALL: [MathFn; 17] = [
        MathFn::Log,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tan,
        MathFn::Sinh,
        MathFn::Cosh,
        MathFn::Asin,
        MathFn::Acos,
        MathFn::Atan,
        MathFn::Log1p,
        MathFn::Expm1,
        MathFn::Erf,
        MathFn::Lgamma,
        MathFn::Digamma,
        MathFn::Polygamma,
        MathFn::Pow,
        MathFn::Atan2,
    ];

    /// The C symbol compiled code calls.
    pub fn symbol(self) -> &'static str {
        match self {
            MathFn::Log => "log",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Sinh => "sinh",
            MathFn::Cosh => "cosh",
            MathFn::Asin => "asin",
            MathFn::Acos => "acos",
            MathFn::Atan => "atan",
            MathFn::Log1p => "log1p",
            MathFn::Expm1 => "expm1",
            MathFn::Erf => "erf",
            MathFn::Lgamma => "arrayad_lgamma",
            MathFn::Digamma => "arrayad_digamma",
            MathFn::Polygamma => "arrayad_polygamma",
            MathFn::Pow => "pow",
            MathFn::Atan2 => "atan2",
        }
    }

    /// The number of `f64` arguments (1 or 2); the result is one `f64`.
    pub fn arity(self) -> usize {
        match self {
            MathFn::Pow | MathFn::Atan2 | MathFn::Polygamma => 2,
            _ => 1,
        }
    }

    /// True for the functions of the C library (`libm`), false for the
    /// runtime's own.
    pub fn in_libm(self) -> bool {
        !matches!(self, MathFn::Lgamma | MathFn::Digamma | MathFn::Polygamma)
    }

    /// The function a unary operation calls, if it calls one.
    pub fn of_unary(op: UnOp) -> Option<MathFn> {
        Some(match op {
            UnOp::Log => MathFn::Log,
            UnOp::Sin => MathFn::Sin,
            UnOp::Cos => MathFn::Cos,
            UnOp::Tan => MathFn::Tan,
            UnOp::Sinh => MathFn::Sinh,
            UnOp::Cosh => MathFn::Cosh,
            UnOp::Asin => MathFn::Asin,
            UnOp::Acos => MathFn::Acos,
            UnOp::Atan => MathFn::Atan,
            UnOp::Log1p => MathFn::Log1p,
            UnOp::Expm1 => MathFn::Expm1,
            UnOp::Erf => MathFn::Erf,
            UnOp::Lgamma => MathFn::Lgamma,
            UnOp::Digamma => MathFn::Digamma,
            UnOp::Exp
            | UnOp::Tanh
            | UnOp::Neg
            | UnOp::Not
            | UnOp::Sqrt
            | UnOp::Abs
            | UnOp::Floor
            | UnOp::Ceil
            | UnOp::ToF64
            | UnOp::ToI64
            | UnOp::Sign => return None,
        })
    }

    /// The function an `f64` binary operation calls, if it calls one.
    pub fn of_binary(op: BinOp) -> Option<MathFn> {
        match op {
            BinOp::Pow => Some(MathFn::Pow),
            BinOp::Atan2 => Some(MathFn::Atan2),
            BinOp::Polygamma => Some(MathFn::Polygamma),
            _ => None,
        }
    }

    /// The value at `x` (and `y` for the binary ones), as compiled code
    /// computes it: the same C functions (Rust's `f64` methods call
    /// `libm`).
    pub fn eval(self, x: f64, y: f64) -> f64 {
        use crate::interp::ops;
        match self {
            MathFn::Log => x.ln(),
            MathFn::Sin => x.sin(),
            MathFn::Cos => x.cos(),
            MathFn::Tan => x.tan(),
            MathFn::Sinh => x.sinh(),
            MathFn::Cosh => x.cosh(),
            MathFn::Asin => x.asin(),
            MathFn::Acos => x.acos(),
            MathFn::Atan => x.atan(),
            MathFn::Log1p => x.ln_1p(),
            MathFn::Expm1 => x.exp_m1(),
            MathFn::Erf => ops::erf(x),
            MathFn::Lgamma => ops::lgamma(x),
            MathFn::Digamma => ops::digamma(x),
            MathFn::Polygamma => ops::polygamma(x, y),
            MathFn::Pow => x.powf(y),
            MathFn::Atan2 => x.atan2(y),
        }
    }
}
