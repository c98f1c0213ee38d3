def f(x: f64, v: [n]f64) -> [2]f64 = [x, true]
def g() -> [0]f64 = []
def h(v: [n]f64) -> [2][n]f64 = [v, 1.0]
