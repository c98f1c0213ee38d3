def f(x: f64) -> f64 = exp((x + 1.0) * 2.0
