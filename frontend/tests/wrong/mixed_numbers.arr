def scaled(x: [n]f64, k: i64) -> [n]f64 = x * k
def mean(x: [n]f64) -> f64 = sum(x) / n
