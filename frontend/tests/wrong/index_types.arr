def f(x: [n]f64, t: f64) -> f64 = x[t] + x[n / 2.0]
