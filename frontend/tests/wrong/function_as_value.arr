def sq(x: f64) -> f64 = x * x
def f(x: f64) -> f64 = sq * 2.0 + exp
