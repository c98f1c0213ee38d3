def f(b: bool, x: f64, i: i64) -> f64 = -b + x % 2.0 + (i ** 2)
