def loss(w: [n]f64, x: [n]f64) -> f64 = dot(w, x) ** 2.0
def pred(w: [n]f64, x: [n]f64) -> [n]f64 = w * x
def konst() -> f64 = 1.0
def f(w: [n]f64, x: [n]f64) -> f64 =
  sum(grad(loss, w)) + sum(grad(pred, (w, x)).0) + grad(exp, 1.0) + grad(konst, 1.0) + grad(los, (w, x))
