// GradBench `gmm` (evals/gmm/README.md): the log posterior of a Gaussian
// mixture model with a Wishart prior on the precision matrices, and its
// gradient with respect to alpha, mu, q and l.
//
// Shapes (K components, D dimensions, N points):
//   alpha: [K]     unnormalised log mixture weights
//   mu:    [K][D]  component means
//   q:     [K][D]  logs of the diagonal of the factor Q_k
//   l:     [K][D(D-1)/2]  the strictly lower part of Q_k, column by column:
//                  Q_k[r, c] (r > c) is l[k, c*(2D - c - 1)/2 + (r - c - 1)]
//   x:     [N][D]  data points (constant)
//   gamma: f64     precision of the Wishart prior (constant)
//   m:     i64     additional degrees of freedom of the prior (constant)
// The precision matrix of component k is Q_k^T Q_k.
//
//   objective: gmm_objective (primal)
//   jacobian:  gmm_objective differentiated in reverse mode at the boundary,
//              arrayad run gmm.arr gmm_objective --grad --wrt alpha,mu,q,l
//              (gmm_jacobian computes the same gradient inside the program)

// Stable logsumexp: max(v) + log(sum(exp(v - max(v)))).
def logsumexp(v: [n]f64) -> f64 =
  let mx = maximum(v)
  in mx + log(sum(exp(v - mx)))

// log of the multivariate gamma function:
//   log Gamma_p(a) = p(p-1)/4 log(pi) + sum_{j=1..p} lgamma(a + (1 - j)/2)
def log_gamma_p(a: f64, p: i64) -> f64 =
  let pi = 3.141592653589793
  in 0.25 * f64(p) * f64(p - 1) * log(pi)
     + sum(for j < p => lgamma(a - 0.5 * f64(j)))

// The log of the Wishart normalising constant of one component,
//   C = n D (log gamma - 1/2 log 2) - log Gamma_D(n/2),  with n = D + m + 1.
def log_wishart_constant(d: i64, gamma: f64, m: i64) -> f64 =
  let nw = d + m + 1
  in f64(nw) * f64(d) * (log(gamma) - 0.5 * log(2.0)) - log_gamma_p(0.5 * f64(nw), d)

// Q (x - mu) for a lower-triangular Q given by its diagonal qdiag [D] and its
// strictly lower part unpacked into the rows of lower [D][D] (lower[r, c] for
// c < r; the rest is never read): row r is qdiag[r] xc[r] + lower[r][0:r] . xc[0:r].
def qtimesx(qdiag: [d]f64, lower: [d][d]f64, xc: [d]f64) -> [d]f64 =
  for r < d => qdiag[r] * xc[r] + dot(lower[r][0:r], xc[0:r])

def gmm_objective(alpha: [K]f64, mu: [K][D]f64, q: [K][D]f64, l: [K][D * (D - 1) / 2]f64,
                  x: [N][D]f64, gamma: f64, m: i64) -> f64 =
  let pi = 3.141592653589793
  // The diagonals of the Q_k, [K][D], and their log determinants sum(q_k), [K].
  let qdiags = exp(q)
  let sum_qs = for k < K => sum(q[k])
  // The strictly lower parts of the Q_k unpacked into dense [K][D][D] rows
  // (zero on and above the diagonal, never read there).
  let lower_qs = for k < K, r < D, c < D =>
    if c < r then l[k, c * (2 * D - c - 1) / 2 + r - c - 1] else 0.0
  // Likelihood: sum over the points of logsumexp over the components of
  //   beta[i, k] = alpha_k + sum(q_k) - 1/2 |Q_k (x_i - mu_k)|^2.
  let slse = sum(for i < N =>
    logsumexp(for k < K =>
      let qx = qtimesx(qdiags[k], lower_qs[k], x[i] - mu[k])
      in alpha[k] + sum_qs[k] - 0.5 * dot(qx, qx)))
  // Wishart prior: K C - sum_k (gamma^2/2 |Q_k|_F^2 - m sum(q_k)).
  let frobenius = for k < K => dot(qdiags[k], qdiags[k]) + dot(l[k], l[k])
  let prior = f64(K) * log_wishart_constant(D, gamma, m)
              - sum(0.5 * gamma * gamma * frobenius - f64(m) * sum_qs)
  in -(f64(N) * f64(D) * 0.5 * log(2.0 * pi))
     + slse
     - f64(N) * logsumexp(alpha)
     + prior

// The gradient with respect to alpha, mu, q and l, computed inside the
// program (LANGUAGE.md section 10); the same as --grad --wrt alpha,mu,q,l.
def gmm_jacobian(alpha: [K]f64, mu: [K][D]f64, q: [K][D]f64, l: [K][D * (D - 1) / 2]f64,
                 x: [N][D]f64, gamma: f64, m: i64)
                -> ([K]f64, [K][D]f64, [K][D]f64, [K][D * (D - 1) / 2]f64) =
  let (dalpha, dmu, dq, dl, _, _, _) = grad(gmm_objective, (alpha, mu, q, l, x, gamma, m))
  in (dalpha, dmu, dq, dl)
