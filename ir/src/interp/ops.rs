//! Scalar semantics of [`UnOp`], [`BinOp`] and the reductions (LANGUAGE.md
//! sections 3-5), shared by the interpreter and the AD oracles so that every
//! evaluator of the IR computes bit-identical primal values.
//!
//! `f64` arithmetic is IEEE-754; the math functions are those of the C
//! library (`libm`), which Rust's `std` calls for `exp`, `ln`, `sin`, ...,
//! and which [`erf`] and [`lgamma`] call directly.

use crate::math::MathFn;
use crate::program::{BinOp, UnOp};
use crate::types::Scalar;

/// A scalar value.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Prim {
    /// `f64`.
    F64(f64),
    /// `i64`.
    I64(i64),
    /// `bool`.
    Bool(bool),
}

impl Prim {
    /// The element type.
    pub fn elem(self) -> Scalar {
        match self {
            Prim::F64(_) => Scalar::F64,
            Prim::I64(_) => Scalar::I64,
            Prim::Bool(_) => Scalar::Bool,
        }
    }
}

/// Why a scalar operation failed.
#[derive(Clone, PartialEq, Debug)]
pub enum OpError {
    /// `i64` division or remainder by zero; the dividend.
    DivisionByZero(BinOp, i64),
    /// Operands of types the operation does not accept (IR that does not
    /// verify).
    IllTyped(String),
}

mod libm {
    use std::os::raw::c_int;
    extern "C" {
        pub fn erf(x: f64) -> f64;
        pub fn lgamma_r(x: f64, sign: *mut c_int) -> f64;
    }
}

/// The number of elements of an array of the extents `shape` (each at
/// least 0), as `reshape` compares it with its array's: 0 when an extent is
/// 0, however large the others; `None` when the product overflows `i64`.
pub fn element_count(shape: &[usize]) -> Option<i64> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1i64, |p, &n| p.checked_mul(i64::try_from(n).ok()?))
}

/// The error function, from the C library.
pub fn erf(x: f64) -> f64 {
    // SAFETY: `erf` is a pure function of its argument (C99, libm).
    unsafe { libm::erf(x) }
}

/// `ln |Gamma(x)|`, from the C library (`lgamma_r`, the thread-safe
/// variant of `lgamma`, which computes the same value).
pub fn lgamma(x: f64) -> f64 {
    let mut sign: std::os::raw::c_int = 0;
    // SAFETY: `lgamma_r` writes the sign of Gamma(x) through the pointer,
    // which points to a live local.
    unsafe { libm::lgamma_r(x, &mut sign) }
}

/// The sign of an `f64`: 1.0 if `x > 0`, -1.0 if `x < 0`, otherwise `x`
/// itself (±0 and NaN map to themselves).
pub fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// The digamma function ψ = (ln Γ)′, operation for operation as the
/// runtime's `arrayad_digamma`: the reflection formula
/// ψ(x) = ψ(1 − x) − π / tan(πx) for x < 0.5, the recurrence
/// ψ(x) = ψ(x + 1) − 1/x up to x ≥ 10, then the asymptotic series
/// ln x − 1/(2x) − Σ B₂ₖ / (2k x²ᵏ) to k = 7. Poles (0, −1, −2, ...) and
/// −∞ give NaN, +∞ gives +∞.
pub fn digamma(x: f64) -> f64 {
    use std::f64::consts::PI;
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return f64::INFINITY;
    }
    if x <= 0.0 && x.floor() == x {
        return f64::NAN;
    }
    if x < 0.5 {
        // 1 - x >= 0.5: no further reflection.
        return digamma(1.0 - x) - PI / (PI * x).tan();
    }
    let mut x = x;
    let mut r = 0.0;
    while x < 10.0 {
        r -= 1.0 / x;
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    let t = f
        * (-1.0 / 12.0
            + f * (1.0 / 120.0
                + f * (-1.0 / 252.0
                    + f * (1.0 / 240.0 + f * (-1.0 / 132.0 + f * (691.0 / 32760.0 + f * (-1.0 / 12.0)))))));
    r + x.ln() - 0.5 / x + t
}

/// The Bernoulli numbers B_2, B_4, ..., B_20 of the asymptotic series of
/// [`polygamma`].
const BERNOULLI: [f64; 10] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
    -3617.0 / 510.0,
    43867.0 / 798.0,
    -174611.0 / 330.0,
];

/// The polygamma function ψ^(n)(x), the n-th derivative of digamma (`n`
/// a whole number as an `f64`; `n = 0` is [`digamma`]): the recurrence
/// ψ^(n)(x) = ψ^(n)(x + 1) + (-1)^(n+1) n! / x^(n+1) up to x >= 20 + n,
/// then the asymptotic series (Abramowitz & Stegun 6.4.11) to the B_20
/// term. NaN at the poles (0, -1, ...), for an `n` that is not a whole
/// number in 0..=100, and for x below -10^7. The runtime
/// (`arrayad_polygamma`) does the same operations in the same order: keep
/// the two in sync.
pub fn polygamma(n: f64, x: f64) -> f64 {
    if n == 0.0 {
        return digamma(x);
    }
    if !(1.0..=100.0).contains(&n) || n.floor() != n || x.is_nan() || x < -1e7 || (x <= 0.0 && x.floor() == x) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    let k = n as i32;
    let mut fact = 1.0;
    for i in 2..=k {
        fact *= i as f64;
    }
    let sign = if k % 2 == 1 { 1.0 } else { -1.0 };
    let mut x = x;
    let mut acc = 0.0;
    while x < 20.0 + n {
        acc += fact / x.powf(n + 1.0);
        x += 1.0;
    }
    let mut s = fact / n / x.powf(n) + fact / (2.0 * x.powf(n + 1.0));
    for (j, b) in BERNOULLI.iter().enumerate() {
        let two_j = 2.0 * (j as f64 + 1.0);
        // (2j + n - 1)! / (2j)!
        let mut c = 1.0;
        let mut i = two_j + 1.0;
        while i <= two_j + n - 1.0 {
            c *= i;
            i += 1.0;
        }
        s += b * c / x.powf(two_j + n);
    }
    sign * (acc + s)
}

/// `min` of two `f64`: NaN if either operand is NaN, else the smaller (the
/// first one when they compare equal, e.g. `min(0.0, -0.0) = 0.0`).
pub fn min_f64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b < a {
        b
    } else {
        a
    }
}

/// `max` of two `f64`: NaN if either operand is NaN, else the larger (the
/// first one when they compare equal).
pub fn max_f64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

/// A math function `f64 -> f64` (including `Neg`, `Abs`, `Floor`, `Ceil`;
/// `Exp` and `Tanh` are [`crate::inline_math`]'s, as compiled code computes
/// them);
/// `None` for the operations that are not of that type.
pub fn math(op: UnOp, x: f64) -> Option<f64> {
    use UnOp::*;
    if let Some(f) = MathFn::of_unary(op) {
        return Some(f.eval(x, 0.0));
    }
    Some(match op {
        Exp => crate::inline_math::exp(x),
        Tanh => crate::inline_math::tanh(x),
        Neg => -x,
        Sqrt => x.sqrt(),
        Abs => x.abs(),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Sign => sign(x),
        _ => return None,
    })
}

/// A unary operation on a scalar.
///
/// `ToI64` truncates toward zero, saturating, NaN -> 0 (Rust's `as`); `i64`
/// negation wraps.
pub fn unary(op: UnOp, x: Prim) -> Result<Prim, OpError> {
    Ok(match (op, x) {
        (UnOp::Neg, Prim::I64(i)) => Prim::I64(i.wrapping_neg()),
        (UnOp::Not, Prim::Bool(b)) => Prim::Bool(!b),
        (UnOp::ToF64, Prim::I64(i)) => Prim::F64(i as f64),
        (UnOp::ToF64, Prim::F64(v)) => Prim::F64(v),
        (UnOp::ToI64, Prim::F64(v)) => Prim::I64(v as i64),
        (UnOp::ToI64, Prim::I64(i)) => Prim::I64(i),
        (op, Prim::F64(v)) => match math(op, v) {
            Some(r) => Prim::F64(r),
            None => return Err(ill_typed_unary(op, x)),
        },
        _ => return Err(ill_typed_unary(op, x)),
    })
}

fn ill_typed_unary(op: UnOp, x: Prim) -> OpError {
    OpError::IllTyped(format!("{} of {}", op.name(), x.elem()))
}

/// A binary operation on two scalars of the same type.
///
/// `i64`: `+ - *` wrap; `/` truncates and `%` has the sign of the dividend,
/// both failing on a zero divisor; `i64::MIN / -1` wraps to `i64::MIN` and
/// `i64::MIN % -1` is 0. `f64`: IEEE; `pow` is `powf`, `atan2(y, x)` is
/// `y.atan2(x)`, `min`/`max` per [`min_f64`]/[`max_f64`].
pub fn binary(op: BinOp, a: Prim, b: Prim) -> Result<Prim, OpError> {
    use BinOp::*;
    Ok(match (a, b) {
        (Prim::F64(x), Prim::F64(y)) => match op {
            Add => Prim::F64(x + y),
            Sub => Prim::F64(x - y),
            Mul => Prim::F64(x * y),
            Div => Prim::F64(x / y),
            Pow => Prim::F64(MathFn::Pow.eval(x, y)),
            Atan2 => Prim::F64(MathFn::Atan2.eval(x, y)),
            Polygamma => Prim::F64(MathFn::Polygamma.eval(x, y)),
            Min => Prim::F64(min_f64(x, y)),
            Max => Prim::F64(max_f64(x, y)),
            Eq => Prim::Bool(x == y),
            Ne => Prim::Bool(x != y),
            Lt => Prim::Bool(x < y),
            Le => Prim::Bool(x <= y),
            Gt => Prim::Bool(x > y),
            Ge => Prim::Bool(x >= y),
            Rem | And | Or => return Err(ill_typed_binary(op, a)),
        },
        (Prim::I64(x), Prim::I64(y)) => match op {
            Add => Prim::I64(x.wrapping_add(y)),
            Sub => Prim::I64(x.wrapping_sub(y)),
            Mul => Prim::I64(x.wrapping_mul(y)),
            Div | Rem if y == 0 => return Err(OpError::DivisionByZero(op, x)),
            Div => Prim::I64(x.wrapping_div(y)),
            Rem => Prim::I64(x.wrapping_rem(y)),
            Min => Prim::I64(x.min(y)),
            Max => Prim::I64(x.max(y)),
            Eq => Prim::Bool(x == y),
            Ne => Prim::Bool(x != y),
            Lt => Prim::Bool(x < y),
            Le => Prim::Bool(x <= y),
            Gt => Prim::Bool(x > y),
            Ge => Prim::Bool(x >= y),
            Pow | Atan2 | Polygamma | And | Or => return Err(ill_typed_binary(op, a)),
        },
        (Prim::Bool(x), Prim::Bool(y)) => match op {
            And => Prim::Bool(x && y),
            Or => Prim::Bool(x || y),
            Eq => Prim::Bool(x == y),
            Ne => Prim::Bool(x != y),
            _ => return Err(ill_typed_binary(op, a)),
        },
        _ => return Err(OpError::IllTyped(format!("{} of {} and {}", op.name(), a.elem(), b.elem()))),
    })
}

fn ill_typed_binary(op: BinOp, a: Prim) -> OpError {
    OpError::IllTyped(format!("{} of {}", op.name(), a.elem()))
}

/// The number of partial sums of an `f64` `sum` ([`sum_f64`]).
pub const SUM_LANES: usize = 8;

/// The number of elements in a block of a long `f64` `sum` ([`sum_f64`]):
/// a multiple of [`SUM_LANES`].
pub const SUM_BLOCK: usize = 4096;
const _: () = assert!(SUM_BLOCK.is_multiple_of(SUM_LANES), "blocks hold whole rounds of the partial sums");

/// `sum` of `f64`s in the language's fixed order (docs/src/reference,
/// "Order of summation"): the elements are cut into blocks of
/// [`SUM_BLOCK`] (the last one shorter), each block is summed by
/// [`sum_f64_block`], and the block sums are added left to right. A sum of
/// at most one block is its block's sum. Blocks are what threads share
/// out, so a sum is the same bits on any number of threads, and every
/// backend computes exactly this.
pub fn sum_f64(xs: &[f64]) -> f64 {
    let mut blocks = xs.chunks(SUM_BLOCK).map(sum_f64_block);
    match blocks.next() {
        Some(first) => blocks.fold(first, |s, b| s + b),
        None => 0.0,
    }
}

/// The sum of one block of [`sum_f64`]: with `m = 8 * (n / 8)`, element
/// `i < m` is added into partial sum `i % 8` (each a left fold from `0.0`
/// in index order), the partials are combined as
/// `((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7))`
/// ([`combine_partial_sums`]; `0.0` when `m = 0`), and the elements from
/// `m` on are added to that from left to right.
/// Fewer than eight elements are summed left to right from `0.0`; the
/// eight partial sums are independent (vectorisable) chains. The result is
/// never `-0.0`.
pub fn sum_f64_block(xs: &[f64]) -> f64 {
    let m = xs.len() / SUM_LANES * SUM_LANES;
    let mut partial = [0.0; SUM_LANES];
    for (i, x) in xs[..m].iter().enumerate() {
        partial[i % SUM_LANES] += x;
    }
    let head = if m == 0 { 0.0 } else { combine_partial_sums(partial) };
    xs[m..].iter().fold(head, |s, x| s + x)
}

/// The fixed tree that combines the partial sums of [`sum_f64`], halving:
/// `((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7))`, the order in which
/// a vector of partial sums is reduced by adding its halves.
pub fn combine_partial_sums(mut p: [f64; SUM_LANES]) -> f64 {
    let mut len = SUM_LANES;
    while len > 1 {
        len /= 2;
        for k in 0..len {
            p[k] += p[k + len];
        }
    }
    p[0]
}

/// `sum` of `i64`s, wrapping (0 for none).
pub fn sum_i64(xs: impl IntoIterator<Item = i64>) -> i64 {
    xs.into_iter().fold(0, i64::wrapping_add)
}

/// `maximum`: NaN if any element is NaN, else the largest; `None` when
/// empty.
pub fn maximum(xs: impl IntoIterator<Item = f64>) -> Option<f64> {
    xs.into_iter().fold(None, |m, x| Some(m.map_or(x, |m| max_f64(m, x))))
}

/// `minimum`: NaN if any element is NaN, else the smallest; `None` when
/// empty.
pub fn minimum(xs: impl IntoIterator<Item = f64>) -> Option<f64> {
    xs.into_iter().fold(None, |m, x| Some(m.map_or(x, |m| min_f64(m, x))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-13 * (1.0 + b.abs())
    }

    #[test]
    fn long_sums_add_the_sums_of_their_blocks_left_to_right() {
        let xs: Vec<f64> =
            (0..10_000).map(|i| ((i * 7919) % 1000) as f64 * 1e-3 + 1e10 * ((i % 3) as f64 - 1.0)).collect();
        let (a, b, c) = (&xs[..4096], &xs[4096..8192], &xs[8192..]);
        let blocked = (sum_f64_block(a) + sum_f64_block(b)) + sum_f64_block(c);
        assert_eq!(sum_f64(&xs).to_bits(), blocked.to_bits());
        // One block, and the block's own order: eight partial sums.
        assert_eq!(sum_f64(a).to_bits(), sum_f64_block(a).to_bits());
        let mut p = [0.0; SUM_LANES];
        for (i, x) in a.iter().enumerate() {
            p[i % SUM_LANES] += x;
        }
        assert_eq!(sum_f64(a).to_bits(), combine_partial_sums(p).to_bits());
        // Empty and all-negative-zero sums are +0.0.
        assert_eq!(sum_f64(&[]).to_bits(), 0.0f64.to_bits());
        assert_eq!(sum_f64(&[-0.0; 5000]).to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn polygamma_matches_closed_forms() {
        let pi = std::f64::consts::PI;
        let zeta3 = 1.202_056_903_159_594_3;
        // psi^(n)(1) = (-1)^(n+1) n! zeta(n + 1)
        assert!(close(polygamma(1.0, 1.0), pi * pi / 6.0), "{}", polygamma(1.0, 1.0));
        assert!(close(polygamma(2.0, 1.0), -2.0 * zeta3), "{}", polygamma(2.0, 1.0));
        assert!(close(polygamma(3.0, 1.0), pi.powi(4) / 15.0), "{}", polygamma(3.0, 1.0));
        // psi'(1/2) = pi^2 / 2; the recurrence below zero: psi'(-1/2) = psi'(1/2) + 4
        assert!(close(polygamma(1.0, 0.5), pi * pi / 2.0));
        assert!(close(polygamma(1.0, -0.5), pi * pi / 2.0 + 4.0));
        // large x: psi'(x) ~ 1/x
        assert!(close(polygamma(1.0, 1e6), 1.0 / 1e6 + 0.5 / 1e12));
        assert_eq!(polygamma(0.0, 2.5), digamma(2.5));
        for bad in [polygamma(1.0, 0.0), polygamma(1.0, -3.0), polygamma(1.5, 2.0), polygamma(-1.0, 2.0)] {
            assert!(bad.is_nan());
        }
    }
}
