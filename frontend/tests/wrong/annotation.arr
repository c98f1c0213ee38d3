def f(x: [n]f64) -> f64 =
  let m: [n][n]f64 = for i < n => x[i]
  in sum(flatten(m))
