# a Python-style comment
def f(x: f64) -> f64 = x * x
