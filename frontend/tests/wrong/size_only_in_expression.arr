def drop_first(x: [n+1]f64) -> [n]f64 = x[1:]
