//! The math functions compiled inline ([`arrayad_ir::inline_math`]):
//! the same operations, in the same order and from the same constants, as
//! the interpreter's functions there, so that every backend gives their
//! bits. Float arithmetic goes through [`Emitter::float_strict`], which
//! `--fast-math` never reassociates: `(t + 1.5 * 2^52) - 1.5 * 2^52` is a
//! rounding, not a no-op.
//!
//! Straight-line code without calls or branches: LLVM's loop vectoriser
//! takes a loop that applies it, and Cranelift keeps the loop's values in
//! registers (a call would clobber every float register). The loops of
//! `pairs.rs` compute it on pairs of elements ([`Lanes::Pair`]), lane by
//! lane ([`Emitter::lanewise_pairs`]): every loop they run on Cranelift,
//! which has no vectoriser, and LLVM's sums, whose chains of scalar
//! operations its SLP vectoriser packs two lanes wide at most.

use super::emit::{Conv, Emitter, FloatCC, FloatOp, FloatUnary, IntOp, Ty};
use arrayad_ir::inline_math::{
    EXP_CLAMP_HI, EXP_CLAMP_LO, EXP_INV_LN2, EXP_LN2_HI, EXP_LN2_LO, EXP_P, EXP_SHIFTER, EXP_SPLIT_BIAS,
    F64_EXPONENT_BIAS, TANH_P, TANH_Q, TANH_SMALL,
};

/// Whether the values are single `f64`s or pairs of them
/// ([`Emitter::lanewise_pairs`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Lanes {
    One,
    Pair,
}

impl Lanes {
    /// The `f64` constant `x`, once or in every lane.
    fn f<E: Emitter>(self, b: &mut E, x: f64) -> E::Value {
        match self {
            Lanes::One => b.fconst(x),
            Lanes::Pair => b.const_pair(x),
        }
    }

    /// The `i64` constant `x`, once or in every lane.
    fn i<E: Emitter>(self, b: &mut E, x: i64) -> E::Value {
        match self {
            Lanes::One => b.iconst(Ty::I64, x),
            Lanes::Pair => b.const_int_pair(x),
        }
    }
}

/// Horner's rule from `p` on: `p = p * s + c` for each of `coefficients`
/// in turn (the products and sums the interpreter's `a + s * (..)`
/// computes: both are commutative in IEEE arithmetic).
fn horner<E: Emitter>(b: &mut E, lanes: Lanes, s: E::Value, mut p: E::Value, coefficients: &[f64]) -> E::Value {
    for &coefficient in coefficients {
        let ps = b.float_strict(FloatOp::Mul, p, s);
        let c = lanes.f(b, coefficient);
        p = b.float_strict(FloatOp::Add, ps, c);
    }
    p
}

/// `e^x` of an `f64` value or pair: [`arrayad_ir::inline_math::exp`], step
/// by step (its documentation numbers the steps).
pub(crate) fn exp<E: Emitter>(b: &mut E, lanes: Lanes, x: E::Value) -> E::Value {
    use FloatOp::{Add, Div, Mul, Sub};
    // 1. Clamp (NaN passes: its comparisons are false).
    let hi_bound = lanes.f(b, EXP_CLAMP_HI);
    let above = b.fcmp(FloatCC::Gt, x, hi_bound);
    let xc = b.select(above, hi_bound, x);
    let lo_bound = lanes.f(b, EXP_CLAMP_LO);
    let below = b.fcmp(FloatCC::Lt, xc, lo_bound);
    let xc = b.select(below, lo_bound, xc);
    // 2. k = round(x / ln 2), as an integer and as a float.
    let inv_ln2 = lanes.f(b, EXP_INV_LN2);
    let shifter = lanes.f(b, EXP_SHIFTER);
    let scaled = b.float_strict(Mul, xc, inv_ln2);
    let t = b.float_strict(Add, scaled, shifter);
    let t_bits = b.convert(Conv::F64Bits, t);
    let shifter_bits = lanes.i(b, EXP_SHIFTER.to_bits() as i64);
    let k = b.int(IntOp::Sub, t_bits, shifter_bits);
    let kf = b.float_strict(Sub, t, shifter);
    // 3. r = hi - lo = x - k ln 2.
    let ln2_hi = lanes.f(b, EXP_LN2_HI);
    let k_ln2_hi = b.float_strict(Mul, kf, ln2_hi);
    let hi = b.float_strict(Sub, xc, k_ln2_hi);
    let ln2_lo = lanes.f(b, EXP_LN2_LO);
    let lo = b.float_strict(Mul, kf, ln2_lo);
    let r = b.float_strict(Sub, hi, lo);
    // 4. y = e^r.
    let rr = b.float_strict(Mul, r, r);
    let [p1, p2, p3, p4, p5] = EXP_P;
    let p5 = lanes.f(b, p5);
    let p = horner(b, lanes, rr, p5, &[p4, p3, p2, p1]);
    let rr_p = b.float_strict(Mul, rr, p);
    let c = b.float_strict(Sub, r, rr_p);
    let two = lanes.f(b, 2.0);
    let r_c = b.float_strict(Mul, r, c);
    let two_c = b.float_strict(Sub, two, c);
    let q = b.float_strict(Div, r_c, two_c);
    let one = lanes.f(b, 1.0);
    let s = b.float_strict(Add, one, hi);
    let one_s = b.float_strict(Sub, one, s);
    let s_error = b.float_strict(Add, one_s, hi);
    let q_lo = b.float_strict(Sub, q, lo);
    let tail = b.float_strict(Add, s_error, q_lo);
    let y = b.float_strict(Add, s, tail);
    // 5. y * 2^k1 * 2^k2 (shift amounts are single `i64`s, also for
    // pairs).
    let split_bias = lanes.i(b, EXP_SPLIT_BIAS);
    let biased_k = b.int(IntOp::Add, k, split_bias);
    let one_i = b.iconst(Ty::I64, 1);
    let half = b.int(IntOp::UShr, biased_k, one_i);
    let half_bias = lanes.i(b, EXP_SPLIT_BIAS / 2);
    let k1 = b.int(IntOp::Sub, half, half_bias);
    let k2 = b.int(IntOp::Sub, k, k1);
    let bias = lanes.i(b, F64_EXPONENT_BIAS);
    let fifty_two = b.iconst(Ty::I64, 52);
    let mut e = y;
    for kj in [k1, k2] {
        let biased = b.int(IntOp::Add, kj, bias);
        let bits = b.int(IntOp::Shl, biased, fifty_two);
        let scale = b.convert(Conv::BitsF64, bits);
        e = b.float_strict(Mul, e, scale);
    }
    // 6. NaN in, the same NaN out.
    let nan = b.fcmp(FloatCC::Uno, x, x);
    b.select(nan, x, e)
}

/// `tanh(x)` of an `f64` value or pair: [`arrayad_ir::inline_math::tanh`],
/// step by step.
pub(crate) fn tanh<E: Emitter>(b: &mut E, lanes: Lanes, x: E::Value) -> E::Value {
    use FloatOp::{Add, Div, Mul, Sub};
    let a = b.float_unary(FloatUnary::Abs, x);
    // 1. x + (x s) (P(s) / Q(s)).
    let s = b.float_strict(Mul, x, x);
    let [p0, p1, p2] = TANH_P;
    let [q0, q1, q2] = TANH_Q;
    let p0 = lanes.f(b, p0);
    let p = horner(b, lanes, s, p0, &[p1, p2]);
    // Q is monic: its first step is s + Q0.
    let q0 = lanes.f(b, q0);
    let s_q0 = b.float_strict(Add, s, q0);
    let q = horner(b, lanes, s, s_q0, &[q1, q2]);
    let xs = b.float_strict(Mul, x, s);
    let ratio = b.float_strict(Div, p, q);
    let correction = b.float_strict(Mul, xs, ratio);
    let small = b.float_strict(Add, x, correction);
    // 2. 1 - 2 / (e^2|x| + 1), negated for negative x.
    let two_a = b.float_strict(Add, a, a);
    let e = exp(b, lanes, two_a);
    let one = lanes.f(b, 1.0);
    let e1 = b.float_strict(Add, e, one);
    let two = lanes.f(b, 2.0);
    let q = b.float_strict(Div, two, e1);
    let t = b.float_strict(Sub, one, q);
    let minus_t = b.float_unary(FloatUnary::Neg, t);
    let zero = lanes.f(b, 0.0);
    let negative = b.fcmp(FloatCC::Lt, x, zero);
    let large = b.select(negative, minus_t, t);
    let bound = lanes.f(b, TANH_SMALL);
    let is_small = b.fcmp(FloatCC::Lt, a, bound);
    let r = b.select(is_small, small, large);
    // 3. A zero or a NaN in, the same out.
    let is_zero = b.fcmp(FloatCC::Eq, x, zero);
    let is_nan = b.fcmp(FloatCC::Uno, x, x);
    let keep = b.int(IntOp::Or, is_zero, is_nan);
    b.select(keep, x, r)
}
