def pick(x: [n]f64, first: bool) -> f64 = if first then x[0] else x
