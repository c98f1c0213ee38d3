def count(x: [n]f64) -> f64 = n
