// Reverse over reverse: gradients of definitions that run `grad` or `vjp`
// inside (a gradient penalty, a meta-learning step, per-row gradients, a
// gradient-descent loop, an integer parameter of the inner definition), by
// the operators' own reverse rule; a `jvp` of a definition containing a
// `grad` (reverse of forward over reverse), by forward columns.
// test: penalty [[1.5, -0.3, 0.7, 2.0]]
// test: weighted [[1.5, -0.3, 0.7], 0.8]
// test: step [[0.5, -0.25, 1.0], [[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]], 0.1]
// test: per_row [[[0.5, 1.0], [-0.3, 0.2], [1.1, -0.7]]]
// test: looped [[0.5, -0.4, 0.9], 3]
// test: mixed [[0.4, 0.6, 1.3], 3]
// test: hv [[0.5, -0.4, 0.9]]
// test: counted [[0.5, -0.4, 0.9], 1.5]
def rosen(x: [n]f64) -> f64 =
  sum(for i < n - 1 => 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2)
def penalty(x: [n]f64) -> f64 = sum(grad(rosen, x) ** 2)
def field(x: [n]f64, s: f64) -> [n]f64 = sin(x) * s + x * x[0]
def weighted(x: [n]f64, w: f64) -> f64 =
  let (y, c) = vjp(field, (x, w), x * w)
  in sum(y * c.0) + c.1 * w
def loss(w: [m]f64, a: [k][m]f64) -> f64 =
  sum(for i < k => log(1.0 + exp(dot(a[i], w)))) + 0.5 * dot(w, w)
def step(w: [m]f64, a: [k][m]f64, lr: f64) -> f64 =
  let g = grad(loss, (w, a))
  in loss(w - g.0 * lr, a)
def energy(p: [d]f64) -> f64 = sum(p * p * p) / 3.0 + p[0] * p[1]
def per_row(x: [k][d]f64) -> f64 = sum(for i < k => sum(grad(energy, x[i]) * x[i]))
def looped(x: [n]f64, iters: i64) -> f64 =
  let z = loop z = x for t < iters do z - grad(rosen, z) * 0.001
  in sum(z * z)
def powsum(x: [n]f64, p: i64) -> f64 = sum(for i < n => x[i] ** f64(p))
def mixed(x: [n]f64, p: i64) -> f64 =
  let g = grad(powsum, (x, p))
  in sum(g.0 * x) + f64(g.1)
def dros(x: [n]f64) -> [n]f64 = grad(rosen, x)
def hv(x: [n]f64) -> f64 = sum(jvp(dros, x, x).1 * x)
def cubes(x: [n]f64, s: f64) -> (f64, i64, [n]f64) = (sum(x * x * x) * s, n, sin(x) * s)
def counted(x: [n]f64, s: f64) -> f64 =
  let (y, c) = vjp(cubes, (x, s), (s, 3, x))
  in y.0 * sum(c.0 * x) + f64(y.1) * c.1 + sum(y.2 * x)
