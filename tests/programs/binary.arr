// Binary operators and builtins, with integer-literal typing and broadcasting.
// test: f [1.5, 0.7]
// test: g [[1.0, 2.0, 3.0], [0.5, -1.0, 2.5]]
// test: h [2.0, 3.0]
def f(x: f64, y: f64) -> f64 =
  x * y - x / y + x ** 2 + pow(y, x) + atan2(y, x) + min(x, y) * max(x, y) + 2 * x - 1 + -x ** 2
def g(a: [n]f64, b: [n]f64) -> [n]f64 = a * b + 2 * a - b / 3 + pow(a, 2) + max(a, b) - min(a, 0.5)
def h(x: f64, y: f64) -> (f64, f64) = (x * y, x + y * y)
