def axpy(a: f64, x: [n]f64, y: [n]f64) -> [n]f64 = a * x + y
def f(x: [n]f64) -> [n]f64 = axpy(2.0, x)
