def sum(x: [n]f64) -> f64 = loop s = 0.0 for i < n do s + x[i]
