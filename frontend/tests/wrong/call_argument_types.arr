def affine(a: [m][n]f64, x: [n]f64, b: [m]f64) -> [m]f64 = for i < m => dot(a[i], x) + b[i]
def loss(a: [m][n]f64, x: [n]f64, k: i64) -> f64 = sum(affine(a, x, k))
