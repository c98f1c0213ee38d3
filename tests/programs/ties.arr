// Non-differentiable points: ties of min/max split 1/2, maximum splits
// nofd
// evenly, abs'(0) = 0, pow at x = 0.
// test: f [2.0, 2.0]
// test: g [[1.0, 3.0, 3.0, 3.0]]
// test: h [0.0]
// test: p [0.0, 2.0]
def f(x: f64, y: f64) -> f64 = max(x, y) + 3 * min(x, y)
def g(v: [n]f64) -> f64 = maximum(v) + 2 * minimum(v)
def h(x: f64) -> f64 = abs(x)
def p(x: f64, y: f64) -> f64 = x ** y
