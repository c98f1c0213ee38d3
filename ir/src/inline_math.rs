//! The math functions that compiled code computes inline rather than calls
//! (those it calls are in [`crate::math`]): `exp` and `tanh`, written with
//! `+ - * /`, `abs`, comparisons, selects and integer operations on the bits
//! of an `f64`, so that LLVM's loop vectoriser takes them and Cranelift runs
//! them without a call (a call clobbers every float register).
//!
//! Every backend must give the bits of the functions here, so the code
//! generators (`codegen/src/lower/inline_math.rs`) emit the same
//! operations in the same order, from the same constants, without fused
//! multiply-adds and without fast-math flags (the range reduction's
//! rounding is its meaning). The interpreter and constant folding call
//! these functions.
//!
//! The algorithms:
//!
//! - `exp` is fdlibm's `e_exp.c` (Sun Microsystems, 1993; FreeBSD's `exp`,
//!   Java's `StrictMath.exp`), branch-free, with a more exact last sum:
//!   error below 1 ulp, 0.62 at most in tests (glibc's, which compiled code
//!   called before, is within 0.502 ulp);
//! - `tanh` is Cephes' `tanh.c` (S. L. Moshier, 1984): a rational function
//!   below 0.625 in magnitude, `1 - 2 / (e^2|x| + 1)` above, with this
//!   module's `exp`: within 2 ulp of glibc's `tanh` (itself within 2 ulp).

/// Inputs above this are clamped to it: `exp` of it overflows to +inf,
/// as it does of every input above `709.782712893384`.
pub const EXP_CLAMP_HI: f64 = 710.0;
/// Inputs below this are clamped to it: `exp` of it rounds to +0, as it
/// does of every input below `-745.1332191019412`.
pub const EXP_CLAMP_LO: f64 = -746.0;
/// 1.5 * 2^52: adding it to a float below 2^51 in magnitude rounds the
/// sum's low bits to the nearest integer, which its low mantissa bits then
/// hold in two's complement.
pub const EXP_SHIFTER: f64 = 6_755_399_441_055_744.0;
/// 1 / ln 2 (fdlibm's `invln2`, 0x3ff71547652b82fe).
pub const EXP_INV_LN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
/// The high part of ln 2 (fdlibm's `ln2HI`, 0x3fe62e42fee00000): its low
/// 21 bits are zero, so `k * EXP_LN2_HI` is exact for every `|k| < 2^21`.
pub const EXP_LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
/// ln 2 - [`EXP_LN2_HI`] (fdlibm's `ln2LO`, 0x3dea39ef35793c76).
pub const EXP_LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// fdlibm's `P1` .. `P5`: a Remez polynomial of degree 5 in `r^2` for
/// `R(r^2) = r (e^r + 1) / (e^r - 1)` on `|r| <= ln 2 / 2` (error below
/// 2^-59), highest power last.
pub const EXP_P: [f64; 5] = [
    f64::from_bits(0x3fc5_5555_5555_553e),
    f64::from_bits(0xbf66_c16c_16be_bd93),
    f64::from_bits(0x3f11_566a_af25_de2c),
    f64::from_bits(0xbebb_bd41_c5d2_6bf1),
    f64::from_bits(0x3e66_3769_72be_a4d0),
];
/// The exponent bias of an `f64`: the bits of `2^j` are `(j + 1023) << 52`.
pub const F64_EXPONENT_BIAS: i64 = 1023;
/// Added to `k` (at least -1076) before halving it by a logical shift:
/// `k1 = ((k + 2048) >>> 1) - 1024` is `floor(k / 2)`, without the
/// arithmetic shift of 64-bit lanes, which x86-64 has only with AVX-512.
pub const EXP_SPLIT_BIAS: i64 = 2048;

/// `e^x`, as every backend computes it.
///
/// The steps (codegen mirrors them one for one):
///
/// 1. `x` is clamped to [`EXP_CLAMP_LO`] ..= [`EXP_CLAMP_HI`] (NaN passes).
/// 2. `k = round(x / ln 2)`: `t = x * EXP_INV_LN2 + EXP_SHIFTER` rounds it
///    (ties to even); `k = bits(t) - bits(EXP_SHIFTER)` as an integer,
///    `kf = t - EXP_SHIFTER` as a float (both exact). `k` lies in
///    `-1076 ..= 1024`.
/// 3. `r = hi - lo` with `hi = x - kf * EXP_LN2_HI` (exact) and
///    `lo = kf * EXP_LN2_LO`, so `|r| <= ln 2 / 2` (plus rounding).
/// 4. `y = e^r = 1 + r + q` by fdlibm's rational form: `c = r - r^2
///    P(r^2)`, `q = r c / (2 - c)`. fdlibm sums it as `1 - ((lo - q) -
///    hi)`, which rounds twice at the result's scale; here
///    `s = 1 + hi` and its rounding error `s_error = (1 - s) + hi` (exact:
///    Dekker's Fast2Sum, `|hi| < 1`), then `y = s + (s_error + (q - lo))`
///    rounds once at that scale.
/// 5. `y * 2^k` as `(y * 2^k1) * 2^k2` with `k1 = floor(k / 2)`
///    ([`EXP_SPLIT_BIAS`]) and `k2 = k - k1`, both normal powers of two:
///    the first product is exact,
///    the second rounds once, to a subnormal, zero or infinity where the
///    result is one.
/// 6. NaN in, the same NaN out.
///
/// Error below 1 ulp (fdlibm's bound; the summation of step 4 brings the
/// largest error found against 40-digit values from 0.81 ulp to 0.62, and
/// `exp(1.0)` to the double nearest e). `exp_is_within_one_ulp_of_libm`
/// tests it against the C library's.
pub fn exp(x: f64) -> f64 {
    let xc = if x > EXP_CLAMP_HI { EXP_CLAMP_HI } else { x };
    let xc = if xc < EXP_CLAMP_LO { EXP_CLAMP_LO } else { xc };
    let t = xc * EXP_INV_LN2 + EXP_SHIFTER;
    let k = (t.to_bits() as i64).wrapping_sub(EXP_SHIFTER.to_bits() as i64);
    let kf = t - EXP_SHIFTER;
    let hi = xc - kf * EXP_LN2_HI;
    let lo = kf * EXP_LN2_LO;
    let r = hi - lo;
    let rr = r * r;
    let [p1, p2, p3, p4, p5] = EXP_P;
    let p = p1 + rr * (p2 + rr * (p3 + rr * (p4 + rr * p5)));
    let c = r - rr * p;
    let q = (r * c) / (2.0 - c);
    let s = 1.0 + hi;
    let s_error = (1.0 - s) + hi;
    let y = s + (s_error + (q - lo));
    let k1 = ((k.wrapping_add(EXP_SPLIT_BIAS) as u64) >> 1) as i64 - EXP_SPLIT_BIAS / 2;
    let k2 = k.wrapping_sub(k1);
    let s1 = f64::from_bits((k1.wrapping_add(F64_EXPONENT_BIAS) << 52) as u64);
    let s2 = f64::from_bits((k2.wrapping_add(F64_EXPONENT_BIAS) << 52) as u64);
    let e = y * s1 * s2;
    if x.is_nan() {
        x
    } else {
        e
    }
}

/// Below this magnitude, `tanh` is Cephes' rational function; from it on,
/// `1 - 2 / (e^2|x| + 1)`.
pub const TANH_SMALL: f64 = 0.625;
/// Cephes' numerator `P(s) = (P0 s + P1) s + P2` of `tanh` below
/// [`TANH_SMALL`] (`s = x^2`).
pub const TANH_P: [f64; 3] = [-9.643_991_794_250_522e-1, -9.928_772_310_019_186e1, -1.614_687_684_417_084_5e3];
/// Cephes' monic denominator `Q(s) = ((s + Q0) s + Q1) s + Q2`.
pub const TANH_Q: [f64; 3] = [1.128_116_784_916_329_3e2, 2.235_488_390_601_004_5e3, 4.844_063_053_251_255e3];

/// `tanh(x)`, as every backend computes it.
///
/// The steps (codegen mirrors them one for one):
///
/// 1. Below [`TANH_SMALL`] in magnitude: `s = x * x`,
///    `x + (x * s) * (P(s) / Q(s))` ([`TANH_P`], [`TANH_Q`]).
/// 2. From it on: `t = 1 - 2 / (exp(|x| + |x|) + 1)` with [`exp`] (1 from
///    about 19 on, and at infinity), and `-t` for negative `x`.
/// 3. A zero or a NaN in, the same out (the sum of step 1 is `+0` at
///    `-0`).
///
/// Within 2 ulp of the C library's `tanh` (`tanh_is_within_two_ulps_of_libm`).
pub fn tanh(x: f64) -> f64 {
    let a = x.abs();
    let s = x * x;
    let [p0, p1, p2] = TANH_P;
    let [q0, q1, q2] = TANH_Q;
    let p = (p0 * s + p1) * s + p2;
    let q = ((s + q0) * s + q1) * s + q2;
    let small = x + (x * s) * (p / q);
    let t = 1.0 - 2.0 / (exp(a + a) + 1.0);
    let large = if x < 0.0 { -t } else { t };
    let r = if a < TANH_SMALL { small } else { large };
    // (`-0 + (-0 * 0) * (P / Q)` is +0.)
    if x == 0.0 || x.is_nan() {
        x
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed sequence of floats in [0, 1) from `seed` (a 64-bit LCG: no
    /// dependency).
    fn uniform(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// The distance in units in the last place between two finite floats
    /// of the same sign, or infinities.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64).abs_diff(b.to_bits() as i64)
    }

    #[test]
    fn exp_special_values() {
        assert_eq!(exp(0.0).to_bits(), 1f64.to_bits());
        assert_eq!(exp(-0.0).to_bits(), 1f64.to_bits());
        // (fdlibm's own summation gives one ulp above.)
        assert_eq!(exp(1.0), std::f64::consts::E);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp(709.79), f64::INFINITY);
        assert_eq!(exp(f64::MAX), f64::INFINITY);
        assert_eq!(exp(-746.0).to_bits(), 0);
        assert_eq!(exp(-f64::MAX).to_bits(), 0);
        let nan = f64::from_bits(0x7ff8_0000_dead_beef);
        assert_eq!(exp(nan).to_bits(), nan.to_bits());
        // The largest finite and the smallest subnormal results.
        assert!(exp(709.782712893384).is_finite());
        assert_eq!(exp(-745.1332191019411).to_bits(), 1);
        assert_eq!(exp(-745.1332191019412).to_bits(), 0);
        assert_eq!(exp(1e-300), 1.0);
        assert_eq!(exp(-1e-300), 1.0);
    }

    #[test]
    fn tanh_special_values() {
        assert_eq!(tanh(0.0).to_bits(), 0f64.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0f64).to_bits());
        assert_eq!(tanh(5e-324).to_bits(), 1);
        assert_eq!(tanh(1e-300), 1e-300);
        assert_eq!(tanh(-1e-10), -1e-10);
        assert_eq!(tanh(20.0), 1.0);
        assert_eq!(tanh(-20.0), -1.0);
        assert_eq!(tanh(f64::INFINITY), 1.0);
        assert_eq!(tanh(f64::NEG_INFINITY), -1.0);
        assert_eq!(tanh(f64::MAX), 1.0);
        let nan = f64::from_bits(0xfff8_0000_0bad_cafe);
        assert_eq!(tanh(nan).to_bits(), nan.to_bits());
    }

    #[test]
    fn tanh_is_within_two_ulps_of_libm() {
        let mut next = uniform(0x1234_5678_9abc_def1);
        let mut worst = 0;
        for i in 0..300_000 {
            let u = next();
            let x = match i % 3 {
                0 => (u - 0.5) * 2.0 * TANH_SMALL,
                1 => (u - 0.5) * 50.0,
                _ => (u - 0.5) * 1e-4,
            };
            let d = ulps(tanh(x), x.tanh());
            assert!(d <= 2, "tanh({x:e}) = {:e}, libm {:e}: {d} ulps", tanh(x), x.tanh());
            worst = worst.max(d);
        }
        assert!(worst <= 2);
    }

    #[test]
    fn exp_is_within_one_ulp_of_libm() {
        // Inputs spread over the whole range, the subnormal results'
        // included.
        let mut next = uniform(0x9e37_79b9_7f4a_7c15);
        let mut worst = 0;
        let mut same = 0;
        for i in 0..400_000 {
            let u = next();
            let x = match i % 4 {
                0 => -746.0 + u * 1456.0,
                1 => -1.0 + 2.0 * u,
                2 => -745.2 + u * 37.0,
                _ => (u - 0.5) * 1e-6,
            };
            let (ours, libm) = (exp(x), x.exp());
            if libm == 0.0 || libm.is_infinite() {
                assert_eq!(ours, libm, "exp({x:e})");
                continue;
            }
            let d = ulps(ours, libm);
            same += usize::from(d == 0);
            assert!(d <= 1, "exp({x:e}) = {ours:e}, libm {libm:e}: {d} ulps");
            worst = worst.max(d);
        }
        assert!(worst <= 1);
        // glibc's `exp` is within 0.502 ulp, so the two agree where both
        // round to nearest (98.9% of a sample like this one, where fdlibm's
        // summation agreed for 95%).
        assert!(same > 390_000, "exp: only {same} of 400000 equal to libm's bits");
    }
}
