// GradBench `lse`: LogSumExp with the max-shift trick,
//
//   lse(x) = a + log(sum_i exp(x_i - a)),   a = max_i x_i
//
// written with its primitive elements (a maximum and a sum) so that the
// gradient (the softmax of x) comes from reverse mode.
//
//   "primal":   lse(x)                       x: [n]f64, the input's `x`
//   "gradient": the gradient of lse, x active (`--grad --wrt x`)
//
//   arrayad run tools/gradbench/evals/lse.arr lse --args '[[0.5, 0.25, 1.0]]' --grad --wrt x

def lse(x: [n]f64) -> f64 =
  let a = maximum(x)
  in a + log(sum(exp(x - a)))
