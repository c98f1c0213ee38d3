//! Plain-Rust reference of the ADBench GMM objective and of its gradient.
//!
//! Shared by integration tests with `mod gmm_reference;` (std only, no dependency on
//! the compiler crates). It provides:
//!
//! - [`read_gmm`]: a reader of ADBench GMM input files (format in
//!   `shared/data/adbench/README.md`);
//! - [`generate_gmm`]: the same deterministic generator as `examples/gmm/gen_gmm.c`
//!   (splitmix64 + Box-Muller), so `generate_gmm(d, k, n, seed)` equals
//!   `read_gmm` of the output of `gen_gmm d k n seed` bit for bit;
//! - [`format_gmm`]: writes an input back in the ADBench format (round-trips exactly);
//! - [`gmm_objective`]: the objective with plain loops, in the same operation order as
//!   `shared/bench/adbench_objectives.h` (`gmm_objective`);
//! - [`gmm_gradient`]: the objective and its hand-derived gradient with respect to
//!   `alphas`, `means` and `icf` (concatenated in that order, each row-major).
//!
//! Layout conventions (all row-major): `alphas: [k]`, `means: [k][d]`,
//! `icf: [k][d(d+1)/2]`, `x: [n][d]`. For component `k`, `icf[k][0..d]` are the logs of
//! the diagonal of the lower-triangular factor `Q_k`, and `icf[k][d..]` its strictly
//! lower entries stored column by column:
//! `Q_k[r][c]` (r > c) is `icf[k][d + c*(2d - c - 1)/2 + (r - c - 1)]`.

#![allow(dead_code)]
// plain index loops on purpose: they mirror the C reference loop for loop
#![allow(clippy::needless_range_loop)]

use std::path::Path;

/// `PI` used by the reference (the same double as the C reference's 3.14159265358979323846).
pub const PI: f64 = std::f64::consts::PI;

/// One GMM problem instance (ADBench layout, row-major vectors).
#[derive(Clone, Debug, PartialEq)]
pub struct GmmInput {
    /// Dimension of the points.
    pub d: usize,
    /// Number of mixture components.
    pub k: usize,
    /// Number of points.
    pub n: usize,
    /// `[k]` unnormalised log mixture weights.
    pub alphas: Vec<f64>,
    /// `[k][d]` means.
    pub means: Vec<f64>,
    /// `[k][d(d+1)/2]` inverse-covariance factor parameters.
    pub icf: Vec<f64>,
    /// `[n][d]` data points.
    pub x: Vec<f64>,
    /// Wishart gamma.
    pub gamma: f64,
    /// Wishart m.
    pub m: i64,
}

impl GmmInput {
    /// `d(d+1)/2`, the number of icf entries per component.
    pub fn icf_size(&self) -> usize {
        self.d * (self.d + 1) / 2
    }

    /// Length of the gradient: `k (1 + d + d(d+1)/2)`.
    pub fn gradient_len(&self) -> usize {
        self.k * (1 + self.d + self.icf_size())
    }
}

/// Offset, inside one component's icf row, of the strictly lower entry `Q[r][c]`
/// (`r > c`) in the column-by-column storage.
pub fn lower_index(d: usize, r: usize, c: usize) -> usize {
    debug_assert!(r > c && r < d);
    d + c * (2 * d - c - 1) / 2 + (r - c - 1)
}

// ------------------------------------------------------------------------------------
// Reading and writing the ADBench format
// ------------------------------------------------------------------------------------

struct Tokens<'a> {
    iter: std::str::SplitWhitespace<'a>,
    path: String,
}

impl<'a> Tokens<'a> {
    fn next(&mut self, what: &str) -> Result<&'a str, String> {
        self.iter.next().ok_or_else(|| format!("{}: unexpected end of file while reading {}", self.path, what))
    }

    fn size(&mut self, what: &str) -> Result<usize, String> {
        let tok = self.next(what)?;
        match tok.parse::<usize>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("{}: {} must be a positive integer, found '{}'", self.path, what, tok)),
        }
    }

    fn int(&mut self, what: &str) -> Result<i64, String> {
        let tok = self.next(what)?;
        tok.parse::<i64>().map_err(|_| format!("{}: {} must be an integer, found '{}'", self.path, what, tok))
    }

    fn real(&mut self, what: &str) -> Result<f64, String> {
        let tok = self.next(what)?;
        tok.parse::<f64>().map_err(|_| format!("{}: {} must be a number, found '{}'", self.path, what, tok))
    }

    fn reals(&mut self, count: usize, what: &str) -> Result<Vec<f64>, String> {
        let mut v = Vec::with_capacity(count);
        for i in 0..count {
            v.push(self.real(&format!("{} (value {} of {})", what, i + 1, count))?);
        }
        Ok(v)
    }
}

/// Read an ADBench GMM input file (`d k n`, alphas, means, icf, points, `gamma m`).
/// Tokens are whitespace separated; line breaks carry no meaning. Anything but
/// whitespace after `gamma m` is an error.
pub fn read_gmm(path: &Path) -> Result<GmmInput, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {}", path.display(), e))?;
    let mut t = Tokens { iter: text.split_whitespace(), path: path.display().to_string() };
    let d = t.size("d (dimension)")?;
    let k = t.size("K (number of components)")?;
    let n = t.size("n (number of points)")?;
    let icf_size = d
        .checked_add(1)
        .and_then(|d1| d1.checked_mul(d))
        .map(|x| x / 2)
        .ok_or_else(|| format!("{}: d = {} is too large", t.path, d))?;
    let too_large = || format!("{}: problem size d={} K={} n={} is too large", t.path, d, k, n);
    let kd = k.checked_mul(d).ok_or_else(too_large)?;
    let kt = k.checked_mul(icf_size).ok_or_else(too_large)?;
    let nd = n.checked_mul(d).ok_or_else(too_large)?;
    let alphas = t.reals(k, "alphas")?;
    let means = t.reals(kd, "means")?;
    let icf = t.reals(kt, "icf")?;
    let x = t.reals(nd, "x (points)")?;
    let gamma = t.real("Wishart gamma")?;
    let m = t.int("Wishart m")?;
    if let Some(extra) = t.iter.next() {
        return Err(format!("{}: unexpected data after 'gamma m': '{}'", t.path, extra));
    }
    Ok(GmmInput { d, k, n, alphas, means, icf, x, gamma, m })
}

/// Write `input` in the ADBench text format (one alpha per line, one mean / icf row /
/// point per line). `{:?}` prints the shortest decimal that round-trips, so
/// `read_gmm` of the written text gives back exactly the same numbers.
pub fn format_gmm(input: &GmmInput) -> String {
    fn row(out: &mut String, v: &[f64]) {
        let items: Vec<String> = v.iter().map(|x| format!("{:?}", x)).collect();
        out.push_str(&items.join(" "));
        out.push('\n');
    }
    let (d, k, t) = (input.d, input.k, input.icf_size());
    let mut out = format!("{} {} {}\n", d, k, input.n);
    for a in &input.alphas {
        out.push_str(&format!("{:?}\n", a));
    }
    for c in 0..k {
        row(&mut out, &input.means[c * d..(c + 1) * d]);
    }
    for c in 0..k {
        row(&mut out, &input.icf[c * t..(c + 1) * t]);
    }
    for i in 0..input.n {
        row(&mut out, &input.x[i * d..(i + 1) * d]);
    }
    out.push_str(&format!("{:?} {}\n", input.gamma, input.m));
    out
}

// ------------------------------------------------------------------------------------
// Deterministic generator (identical to examples/gmm/gen_gmm.c)
// ------------------------------------------------------------------------------------

/// splitmix64 + Box-Muller, exactly as in `examples/gmm/gen_gmm.c`.
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in the open interval (0, 1).
    pub fn uniform01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / 9007199254740992.0)
    }

    /// Standard normal (Box-Muller, cosine branch; two uniforms per call).
    pub fn normal01(&mut self) -> f64 {
        let u1 = self.uniform01();
        let u2 = self.uniform01();
        (-2.0 * u1.ln()).sqrt() * (2.0 * PI * u2).cos()
    }
}

/// Generate a GMM input: alphas ~ N(0,1), means ~ U(0,1), icf ~ N(0,1), x ~ N(0,1),
/// gamma = 1, m = 0, drawn in file order from splitmix64 seeded with `seed`.
/// Same numbers as `gen_gmm d k n seed` (whose default seed is 42).
pub fn generate_gmm(d: usize, k: usize, n: usize, seed: u64) -> GmmInput {
    let t = d * (d + 1) / 2;
    let mut rng = SplitMix64::new(seed);
    let alphas = (0..k).map(|_| rng.normal01()).collect();
    let means = (0..k * d).map(|_| rng.uniform01()).collect();
    let icf = (0..k * t).map(|_| rng.normal01()).collect();
    let x = (0..n * d).map(|_| rng.normal01()).collect();
    GmmInput { d, k, n, alphas, means, icf, x, gamma: 1.0, m: 0 }
}

// ------------------------------------------------------------------------------------
// Objective
// ------------------------------------------------------------------------------------

/// Stable logsumexp: `max(v) + log(sum(exp(v - max(v))))`.
pub fn logsumexp(v: &[f64]) -> f64 {
    let mx = v.iter().copied().fold(v[0], f64::max);
    let s: f64 = v.iter().map(|&a| (a - mx).exp()).sum();
    s.ln() + mx
}

/// log of the multivariate gamma function:
/// `log Gamma_p(a) = p(p-1)/4 log(pi) + sum_{j=1..p} lgamma(a + (1-j)/2)`.
pub fn log_gamma_p(a: f64, p: usize) -> f64 {
    let mut out = 0.25 * (p as f64) * ((p as f64) - 1.0) * PI.ln();
    for j in 1..=p {
        out += lgamma(a + 0.5 * (1.0 - j as f64));
    }
    out
}

/// `log|Gamma(x)|` from the platform libm (the same function C's `lgamma` is).
pub fn lgamma(x: f64) -> f64 {
    extern "C" {
        fn lgamma(x: f64) -> f64;
    }
    // SAFETY: libm's lgamma is a pure function of one double (it writes the global
    // `signgam`, which nothing here reads).
    unsafe { lgamma(x) }
}

/// The Wishart normalising constant `C(d, gamma, m)` of the README:
/// `N d (log gamma - 1/2 log 2) - log Gamma_d(N/2)` with `N = d + m + 1`.
pub fn wishart_constant(d: usize, gamma: f64, m: i64) -> f64 {
    let nw = d as i64 + m + 1;
    (nw as f64) * (d as f64) * (gamma.ln() - 0.5 * 2f64.ln()) - log_gamma_p(0.5 * nw as f64, d)
}

/// The ADBench GMM objective (README formula), with plain loops in the order of
/// `gmm_objective` in `shared/bench/adbench_objectives.h`:
///
/// ```text
/// f = - n d/2 log(2 pi)
///     + sum_i logsumexp_k( alpha_k + sum_j q_kj - 1/2 |Q_k (x_i - mu_k)|^2 )
///     - n logsumexp(alpha)
///     + sum_k [ 1/2 gamma^2 (sum_j exp(q_kj)^2 + sum_lower L_k^2) - m sum_j q_kj ]
///     - K C(d, gamma, m)
/// ```
pub fn gmm_objective(inp: &GmmInput) -> f64 {
    let (d, k, n) = (inp.d, inp.k, inp.n);
    let t = inp.icf_size();
    let mut qdiag = vec![0.0; k * d];
    let mut sum_q = vec![0.0; k];
    for c in 0..k {
        let mut s = 0.0;
        for j in 0..d {
            let q = inp.icf[c * t + j];
            s += q;
            qdiag[c * d + j] = q.exp();
        }
        sum_q[c] = s;
    }

    let mut xc = vec![0.0; d];
    let mut qx = vec![0.0; d];
    let mut term = vec![0.0; k];
    let mut slse = 0.0;
    for i in 0..n {
        let xi = &inp.x[i * d..(i + 1) * d];
        for c in 0..k {
            let mu = &inp.means[c * d..(c + 1) * d];
            let lt = &inp.icf[c * t + d..(c + 1) * t];
            let qd = &qdiag[c * d..(c + 1) * d];
            for j in 0..d {
                xc[j] = xi[j] - mu[j];
                qx[j] = qd[j] * xc[j];
            }
            // strictly lower part of Q_k, stored column by column
            let mut li = 0;
            for col in 0..d {
                for row in col + 1..d {
                    qx[row] += lt[li] * xc[col];
                    li += 1;
                }
            }
            let mut sq = 0.0;
            for j in 0..d {
                sq += qx[j] * qx[j];
            }
            term[c] = inp.alphas[c] + sum_q[c] - 0.5 * sq;
        }
        slse += logsumexp(&term);
    }

    let lse_alpha = logsumexp(&inp.alphas);
    let constant = -(n as f64) * (d as f64) * 0.5 * (2.0 * PI).ln();

    let wc = wishart_constant(d, inp.gamma, inp.m);
    let mut prior = 0.0;
    for c in 0..k {
        let mut fro = 0.0;
        for j in 0..d {
            fro += qdiag[c * d + j] * qdiag[c * d + j];
        }
        for j in d..t {
            fro += inp.icf[c * t + j] * inp.icf[c * t + j];
        }
        prior += 0.5 * inp.gamma * inp.gamma * fro - (inp.m as f64) * sum_q[c];
    }
    prior -= (k as f64) * wc;

    constant + slse - (n as f64) * lse_alpha + prior
}

// ------------------------------------------------------------------------------------
// Gradient (derived by hand)
// ------------------------------------------------------------------------------------

/// The objective and its gradient with respect to `alphas` (k), `means` (k*d) and
/// `icf` (k*d(d+1)/2), concatenated in that order (row-major), derived by hand.
///
/// Derivation. For point i and component k write
///
/// ```text
/// xc  = x_i - mu_k                          (d)
/// z   = Q_k xc                              (d; z_r = e^{q_r} xc_r + sum_{c<r} L_rc xc_c)
/// b_k = alpha_k + sum_j q_kj - 1/2 |z|^2    (the logsumexp argument)
/// L_i = logsumexp_k b_k,   w_ik = exp(b_k - L_i)   (softmax weights, sum_k w_ik = 1)
/// ```
///
/// where `q_kj` are the diagonal logs and `L_rc` (r > c) the strictly lower entries of
/// `Q_k`. The constants `-n d/2 log(2 pi)` and `-K C` have zero derivative. Since
/// `d logsumexp(b) / d b_k = w_k` (the stable form's max shift cancels), the chain
/// rule over the point term gives `sum_i w_ik * d b_k / d theta` for every parameter
/// theta of component k:
///
/// - alphas: `d b_k / d alpha_k = 1`, and `-n logsumexp(alpha)` contributes
///   `-n softmax(alpha)_k`:
///   `df/dalpha_k = sum_i w_ik - n exp(alpha_k - logsumexp(alpha))`.
/// - means: `d(-1/2 |Q(x - mu)|^2)/d mu = Q^T Q (x - mu) = Q^T z`:
///   `df/dmu_k = sum_i w_ik Q_k^T z_ik`, with
///   `(Q^T z)_c = e^{q_c} z_c + sum_{r>c} L_rc z_r`.
/// - diagonal logs: `d b_k / d q_kj = 1 - z_j e^{q_kj} xc_j` (from `log det Q = sum q`
///   and `dz_j/dq_kj = e^{q_kj} xc_j`); the Wishart prior adds
///   `d/dq [1/2 gamma^2 e^{2q} - m q] = gamma^2 e^{2 q_kj} - m`:
///   `df/dq_kj = sum_i w_ik (1 - z_j e^{q_kj} xc_j) + gamma^2 e^{2 q_kj} - m`.
/// - strictly lower entries: `dz_r/dL_rc = xc_c`, so `d b_k / d L_rc = -z_r xc_c`; the
///   prior adds `d/dL [1/2 gamma^2 L^2] = gamma^2 L_rc`:
///   `df/dL_rc = -sum_i w_ik z_r xc_c + gamma^2 L_rc`.
///
/// Returns `(f, gradient)`, with `f` computed in the same pass (equal to
/// [`gmm_objective`] up to rounding).
pub fn gmm_gradient(inp: &GmmInput) -> (f64, Vec<f64>) {
    let (d, k, n) = (inp.d, inp.k, inp.n);
    let t = inp.icf_size();
    let g2 = inp.gamma * inp.gamma;
    let mf = inp.m as f64;

    let mut qdiag = vec![0.0; k * d];
    let mut sum_q = vec![0.0; k];
    for c in 0..k {
        for j in 0..d {
            let q = inp.icf[c * t + j];
            sum_q[c] += q;
            qdiag[c * d + j] = q.exp();
        }
    }

    let mut g_alpha = vec![0.0; k];
    let mut g_mean = vec![0.0; k * d];
    let mut g_icf = vec![0.0; k * t];

    // per point: xc and z of every component are kept for the backward step
    let mut xcs = vec![0.0; k * d];
    let mut zs = vec![0.0; k * d];
    let mut b = vec![0.0; k];
    let mut qtz = vec![0.0; d];
    let mut slse = 0.0;
    for i in 0..n {
        let xi = &inp.x[i * d..(i + 1) * d];
        // forward: b_k, xc, z
        for c in 0..k {
            let mu = &inp.means[c * d..(c + 1) * d];
            let row = &inp.icf[c * t..(c + 1) * t];
            let xc = &mut xcs[c * d..(c + 1) * d];
            let z = &mut zs[c * d..(c + 1) * d];
            for j in 0..d {
                xc[j] = xi[j] - mu[j];
                z[j] = qdiag[c * d + j] * xc[j];
            }
            for col in 0..d {
                for r in col + 1..d {
                    z[r] += row[lower_index(d, r, col)] * xc[col];
                }
            }
            let sq: f64 = z.iter().map(|v| v * v).sum();
            b[c] = inp.alphas[c] + sum_q[c] - 0.5 * sq;
        }
        let lse = logsumexp(&b);
        slse += lse;
        // backward: softmax weights w_ik
        for c in 0..k {
            let w = (b[c] - lse).exp();
            let xc = &xcs[c * d..(c + 1) * d];
            let z = &zs[c * d..(c + 1) * d];
            let qd = &qdiag[c * d..(c + 1) * d];
            let gi = &mut g_icf[c * t..(c + 1) * t];
            g_alpha[c] += w;
            // Q^T z
            for col in 0..d {
                let mut s = qd[col] * z[col];
                for r in col + 1..d {
                    s += inp.icf[c * t + lower_index(d, r, col)] * z[r];
                }
                qtz[col] = s;
            }
            for j in 0..d {
                g_mean[c * d + j] += w * qtz[j];
                gi[j] += w * (1.0 - z[j] * qd[j] * xc[j]);
            }
            for col in 0..d {
                for r in col + 1..d {
                    gi[lower_index(d, r, col)] -= w * z[r] * xc[col];
                }
            }
        }
    }

    // -n logsumexp(alphas)
    let lse_alpha = logsumexp(&inp.alphas);
    for c in 0..k {
        g_alpha[c] -= (n as f64) * (inp.alphas[c] - lse_alpha).exp();
    }

    // Wishart prior
    let mut prior = 0.0;
    for c in 0..k {
        let mut fro = 0.0;
        for j in 0..d {
            let e = qdiag[c * d + j];
            fro += e * e;
            g_icf[c * t + j] += g2 * e * e - mf;
        }
        for j in d..t {
            let l = inp.icf[c * t + j];
            fro += l * l;
            g_icf[c * t + j] += g2 * l;
        }
        prior += 0.5 * g2 * fro - mf * sum_q[c];
    }
    prior -= (k as f64) * wishart_constant(d, inp.gamma, inp.m);

    let constant = -(n as f64) * (d as f64) * 0.5 * (2.0 * PI).ln();
    let f = constant + slse - (n as f64) * lse_alpha + prior;

    let mut grad = g_alpha;
    grad.extend_from_slice(&g_mean);
    grad.extend_from_slice(&g_icf);
    (f, grad)
}
