def mean(x: [n]f64, n: i64) -> f64 = sum(x) / f64(n)
