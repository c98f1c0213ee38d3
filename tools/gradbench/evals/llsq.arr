// GradBench `llsq` (cmpad's llsq_obj): a linear least-squares objective
//
//   y(x) = 1/2 sum_{i<n} (s_i - x_0 - x_1 t_i - x_2 t_i^2 - ... - x_{m-1} t_i^{m-1})^2
//   t_i  = -1 + i * 2 / (n - 1),   s_i = sign(t_i)
//
//   "primal":   llsq(x, n)                   x: [m]f64, n: i64 (the input's `x`, `n`)
//   "gradient": the gradient of llsq, x active (`--grad --wrt x`)
//
//   arrayad run tools/gradbench/evals/llsq.arr llsq --args '[[0.1, 0.2, 0.3], 16]' --grad --wrt x

// The grid point t_i of n points evenly spaced on [-1, 1].
def grid(i: i64, n: i64) -> f64 = -1.0 + f64(i) * 2.0 / f64(n - 1)

def llsq(x: [m]f64, n: i64) -> f64 =
  let sq = for i < n =>
    let ti = grid(i, n)
    // the residual s_i - sum_j x_j t_i^j, with t_i^j kept as a running power
    let (r, _) = loop (r, mul) = (sign(ti), 1.0) for j < m do (r - x[j] * mul, mul * ti)
    in r * r
  in sum(sq) / 2.0
