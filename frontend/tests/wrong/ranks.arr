def shift(x: [n]f64, m: [k][n]f64) -> [k][n]f64 = m - x
def less(x: [n]f64, y: [n]f64) -> bool = x < y
