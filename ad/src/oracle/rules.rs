//! The derivative rules of the primitives (LANGUAGE.md section 6), as the
//! partial derivatives of each result with respect to each operand at the
//! operands' values. Forward mode forms `sum c_i dx_i` from them, reverse mode
//! binds the Delta `Add (Scale c_1 u_1) (Scale c_2 u_2)` (Krawiec et al. 2022,
//! Fig. 9, the translations of `+R` and `xR`; section 8 for other primitives).

use super::special::trigamma;
use arrayad_ir::interp::ops;
use arrayad_ir::{BinOp, ReduceOp, UnOp};
use std::f64::consts::FRAC_2_SQRT_PI;

/// `dy/dx` of `y = op(x)` for `f64` `x` and `y`, or `None` when the rule is
/// "zero derivative, no Delta" (`floor`, `ceil`, conversions, `sign`).
pub(crate) fn unary_partial(op: UnOp, x: f64, y: f64) -> Option<f64> {
    use UnOp::*;
    Some(match op {
        Neg => -1.0,
        Exp => y,
        Log => 1.0 / x,
        // sqrt'(0) = +inf.
        Sqrt => 1.0 / (2.0 * y),
        Sin => x.cos(),
        Cos => -x.sin(),
        Tan => 1.0 + y * y,
        Tanh => 1.0 - y * y,
        Sinh => x.cosh(),
        Cosh => x.sinh(),
        Asin => 1.0 / (1.0 - x * x).sqrt(),
        Acos => -1.0 / (1.0 - x * x).sqrt(),
        Atan => 1.0 / (1.0 + x * x),
        Log1p => 1.0 / (1.0 + x),
        Expm1 => y + 1.0,
        Erf => FRAC_2_SQRT_PI * arrayad_ir::inline_math::exp(-(x * x)),
        Lgamma => ops::digamma(x),
        // abs'(x) = sign(x), abs'(0) = 0.
        Abs => ops::sign(x),
        Digamma => trigamma(x),
        Floor | Ceil | ToF64 | ToI64 | Sign | Not => return None,
    })
}

/// `(dy/dx, dy/dz)` of `y = x op z` for `f64` operands, or `None` for the
/// operations without derivative (comparisons, logic, integer-only ones).
pub(crate) fn binary_partials(op: BinOp, x: f64, z: f64, y: f64) -> Option<(f64, f64)> {
    use BinOp::*;
    Some(match op {
        Add => (1.0, 1.0),
        Sub => (1.0, -1.0),
        Mul => (z, x),
        // d(x/z) = dx / z - (x/z) / z dz.
        Div => (1.0 / z, -(y / z)),
        // d(x^z)/dx = 0 where z == 0; d(x^z)/dz = 0 where x == 0.
        Pow => {
            let cx = if z == 0.0 { 0.0 } else { z * x.powf(z - 1.0) };
            let cz = if x == 0.0 { 0.0 } else { y * x.ln() };
            (cx, cz)
        }
        // y = atan2(x, z): dy = (z dx - x dz) / (x^2 + z^2).
        Atan2 => {
            let den = x * x + z * z;
            (z / den, -x / den)
        }
        // y = polygamma(x, z) (x the whole-number order): dy/dz is the next
        // polygamma; the order is a constant.
        Polygamma => (0.0, ops::polygamma(x + 1.0, z)),
        // The operand strictly chosen gets 1; a tie (or NaN) splits 1/2 each.
        Max => {
            if x > z {
                (1.0, 0.0)
            } else if z > x {
                (0.0, 1.0)
            } else {
                (0.5, 0.5)
            }
        }
        Min => {
            if x < z {
                (1.0, 0.0)
            } else if z < x {
                (0.0, 1.0)
            } else {
                (0.5, 0.5)
            }
        }
        Rem | Eq | Ne | Lt | Le | Gt | Ge | And | Or => return None,
    })
}

/// The partial derivatives of `maximum`/`minimum` (`op`) of `xs`, whose value
/// is `result`: `1/count` at each of the `count` positions holding the
/// extreme, 0 elsewhere (all 0 when none does, e.g. with a NaN). `Sum` has 1
/// everywhere.
pub(crate) fn reduce_partials(op: ReduceOp, xs: &[f64], result: f64) -> Vec<f64> {
    if op == ReduceOp::Sum {
        return vec![1.0; xs.len()];
    }
    let count = xs.iter().filter(|&&x| x == result).count();
    let share = 1.0 / count as f64;
    xs.iter().map(|&x| if x == result { share } else { 0.0 }).collect()
}
