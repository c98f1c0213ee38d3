// Backward nests the optimiser interchanges (`arrayad_ir::passes::interchange`)
// and residuals stacked by index (`arrayad_ad`, `reverse/rules/build.rs`):
// per point, a logsumexp over components whose backward loop adds into
// every component's rows (rewritten with the components outer, then run on
// the pool of threads), and per point and component a triangular product
// read through row views and slices, as GMM's.
// test: mixture [[0.5, -0.25, 1.0], [[0.1, 0.2], [-0.5, 1.0], [2.0, -1.0]], [[1.0, 0.5], [0.0, -1.0], [1.5, 2.0], [-0.5, 0.25]]]
// test: mixture [[0.5], [[0.1, 0.2]], [[1.0, 0.5]]]
// test: triangular [[[[0.5, 0.0, 0.0], [1.0, -0.5, 0.0], [0.25, 2.0, 1.5]], [[1.0, 0.0, 0.0], [-1.0, 0.5, 0.0], [0.75, -0.25, 2.0]]], [[1.0, 0.5, -1.0], [0.0, -1.0, 2.0], [1.5, 2.0, 0.5]]]
def mixture(w: [k]f64, mu: [k][d]f64, x: [n][d]f64) -> f64 =
  sum(for i < n =>
    let terms = for j < k => w[j] - 0.5 * sum(for c < d => (x[i, c] - mu[j, c]) * (x[i, c] - mu[j, c]))
    let m = maximum(terms)
    in m + log(sum(for j < k => exp(terms[j] - m))))
def triangular(l: [k][d][d]f64, x: [n][d]f64) -> f64 =
  sum(for i < n =>
    sum(for j < k =>
      let q = for r < d => l[j, r, r] * x[i, r] + dot(l[j, r][0:r], x[i][0:r])
      in exp(-0.5 * dot(q, q))))
