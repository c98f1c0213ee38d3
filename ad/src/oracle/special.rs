//! Special functions the derivative rules need: digamma (the derivative of
//! `lgamma`) and trigamma (the derivative of digamma).

use std::f64::consts::PI;

/// The digamma function ψ = (ln Γ)′, the derivative of `lgamma`: the
/// reflection formula for x < 0.5, the recurrence ψ(x) = ψ(x + 1) − 1/x up
/// to x ≥ 6, then the asymptotic series; NaN at the poles (0, −1, −2, ...).
///
/// It is the interpreter's [`arrayad_ir::interp::ops::digamma`], which
/// follows the runtime's `arrayad_digamma` operation for operation, so that
/// the oracles and the compiled code use the same values (relative accuracy
/// about 2e-13).
pub fn digamma(x: f64) -> f64 {
    arrayad_ir::interp::ops::digamma(x)
}

/// The trigamma function ψ′, the derivative of [`digamma`]: the reflection
/// formula ψ′(x) = π² / sin²(πx) − ψ′(1 − x) for x < 0.5, the recurrence
/// ψ′(x) = ψ′(x + 1) + 1/x² up to x ≥ 10, then the asymptotic series
/// 1/x + 1/(2x²) + Σ B₂ₖ / x²ᵏ⁺¹; NaN at the poles (0, −1, −2, ...).
pub fn trigamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x <= 0.0 && x.floor() == x {
        return f64::NAN;
    }
    if x < 0.5 {
        // sin²(πx) has period 1: reduce first for accuracy at large |x|.
        let s = (PI * (x - x.floor())).sin();
        return PI * PI / (s * s) - trigamma(1.0 - x);
    }
    let mut x = x;
    let mut r = 0.0;
    while x < 10.0 {
        r += 1.0 / (x * x);
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    // Bernoulli numbers B2..B14: 1/6, -1/30, 1/42, -1/30, 5/66, -691/2730, 7/6.
    let series = f
        * (1.0 / 6.0
            + f * (-1.0 / 30.0
                + f * (1.0 / 42.0 + f * (-1.0 / 30.0 + f * (5.0 / 66.0 + f * (-691.0 / 2730.0 + f * (7.0 / 6.0)))))));
    r + (1.0 + 0.5 / x + series) / x
}
