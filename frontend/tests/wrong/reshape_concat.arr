def f(x: [n]f64, k: [n]i64) -> f64 =
  sum(flatten(reshape(x, (2.0, n)))) + sum(concat(x, k))
