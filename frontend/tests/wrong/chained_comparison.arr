def between(x: f64) -> bool = 0.0 < x < 1.0
