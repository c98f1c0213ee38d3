def f(x: f64) -> f64 = x
def g(x: f64) -> f64 = f(x)
def f(x: [n]f64) -> f64 = sum(x)
