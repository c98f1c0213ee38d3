def f(x: [n]i64, m: [n][n]f64, b: [n]bool) -> f64 =
  maximum(x) + dot(m, m) + sum(b) + exp(x[0]) + length(1.0)
