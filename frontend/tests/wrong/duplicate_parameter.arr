def f(x: f64, y: f64, x: f64) -> f64 = x + y
