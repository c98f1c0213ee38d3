// The body is a vector: the quadratic form needs a dot product with x.
def quad_form(x: [n]f64, a: [n][n]f64) -> f64 = for i < n => dot(a[i], x)
