// ADBench GMM objective, written with the packed index arithmetic of the ADBench
// format in its inner loop (as most users write it), instead of the dense
// unpacked factor of examples/gmm.arr; the same function of the same inputs
// (shared/data/adbench/README.md).
//
//   alphas: [K]    unnormalised log mixture weights
//   means:  [K][D] component means
//   icf:    [K][T] T = D(D+1)/2; per component the D logs of the diagonal of the
//                  lower-triangular factor Q_k, then its strictly lower entries stored
//                  column by column: Q_k[r, c] (r > c) is
//                  icf[k, D + c*(2*D - c - 1)/2 + (r - c - 1)]
//   x:      [N][D] data points (a constant in ADBench)
//
//   arrayad build examples/gmm_packed.arr -o libgmm.so --wrt alphas,means,icf

// Stable logsumexp: max(v) + log(sum(exp(v - max(v)))).
def logsumexp(v: [n]f64) -> f64 =
  let mx = maximum(v)
  in mx + log(sum(exp(v - mx)))

// log of the multivariate gamma function:
//   log Gamma_p(a) = p(p-1)/4 log(pi) + sum_{j=1..p} lgamma(a + (1 - j)/2)
// (with j = jj + 1, the argument is a - jj/2 for jj = 0..p-1).
def log_gamma_p(a: f64, p: i64) -> f64 =
  let pi = 3.141592653589793
  in 0.25 * f64(p) * f64(p - 1) * log(pi) + sum(for jj < p => lgamma(a - 0.5 * f64(jj)))

// The Wishart normalising constant C(d, gamma, m) = nw d (log gamma - 1/2 log 2)
// - log Gamma_d(nw/2), with nw = d + m + 1.
def log_wishart_constant(d: i64, gamma: f64, m: i64) -> f64 =
  let nw = d + m + 1
  in f64(nw) * f64(d) * (log(gamma) - 0.5 * log(2.0)) - log_gamma_p(0.5 * f64(nw), d)

def gmm(alphas: [K]f64, means: [K][D]f64, icf: [K][T]f64, x: [N][D]f64,
        wishart_gamma: f64, wishart_m: i64) -> f64 =
  let pi = 3.141592653589793
  // Per component: the diagonal of Q_k and log det Q_k = sum of the diagonal logs.
  let qdiags = for k < K, j < D => exp(icf[k, j])
  let sum_qs = for k < K => sum(icf[k][0:D])
  let slse = sum(for i < N =>
    let terms = for k < K =>
      let xc = x[i] - means[k]
      // qx = Q_k xc: row r is exp(q_r) xc[r] plus the packed strictly lower part.
      let qx = for r < D =>
        qdiags[k, r] * xc[r]
        + sum(for c < r => icf[k, D + c * (2 * D - c - 1) / 2 + r - c - 1] * xc[c])
      in alphas[k] + sum_qs[k] - 0.5 * dot(qx, qx)
    in logsumexp(terms))
  let prior = sum(for k < K =>
    let lower = icf[k][D:T]
    in 0.5 * wishart_gamma * wishart_gamma * (dot(qdiags[k], qdiags[k]) + dot(lower, lower))
       - f64(wishart_m) * sum_qs[k])
  let n = f64(N)
  let d = f64(D)
  in -(n * d * 0.5 * log(2 * pi))
     + slse
     - n * logsumexp(alphas)
     + prior
     - f64(K) * log_wishart_constant(D, wishart_gamma, wishart_m)
