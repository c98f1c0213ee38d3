def f(x: [n]f64, m: [n][n]f64, s: f64) -> f64 =
  let a = x with [0] = 1 in
  let b = m with [0] = 1.0 in
  let c = s with [0] = 1.0 in
  sum(a) + sum(flatten(b)) + c
