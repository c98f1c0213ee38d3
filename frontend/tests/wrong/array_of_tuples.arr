def pairs(x: [n]f64) -> [n](f64, f64) = for i < n => (x[i], 2.0 * x[i])
