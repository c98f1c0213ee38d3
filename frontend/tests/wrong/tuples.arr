def f(p: (f64, [n]f64)) -> f64 =
  let (a, b, c) = p in a + p.2
