def relu(x: f64) -> f64 = if x then x else 0.0
def count(x: [n]f64) -> i64 = loop (k, i) = (0, 0) while i do (k + 1, i + 1)
