// Every unary math builtin, scalar and elementwise.
// test: f [0.3]
// test: g [[0.1, 0.4, 0.7]]
def f(x: f64) -> f64 =
  exp(x) + log(x + 2) + sqrt(x + 1) + sin(x) + cos(x) + tan(x) + tanh(x) + sinh(x) + cosh(x)
  + asin(x) + acos(x) + atan(x) + log1p(x) + expm1(x) + erf(x) + lgamma(x + 1.5) + abs(x - 1)
  + floor(x * 3) + ceil(x * 3)

def g(v: [n]f64) -> [n]f64 = exp(v) * sin(v) + sqrt(v) - tanh(v) / (1 + abs(v)) + lgamma(v + 1) + erf(v)
