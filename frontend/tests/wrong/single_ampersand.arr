def inside(x: f64) -> bool = x > 0.0 & x < 1.0
