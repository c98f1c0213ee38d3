// Tuple results mixing arrays and scalars, and residuals taped in builds,
// loops and branches: the many-row vjp of a dense Jacobian runs the forward
// pass once and replays its tape for every row.
// test: split [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
// test: taped [[0.3, -0.8, 1.1, 0.4], 0.7]
// test: damped [[0.9, 0.5, 2.0, 0.1, -0.4, 0.3, 1.5, -0.2, 0.7, 0.8, 3.0, 0.6, 1.1, 0.2, 0.5, -0.9, 0.3, 1.2, 2.5, 0.4], [3, 10, 40, 77, 120, 161]]
def split(x: [n]f64, w: [n]f64) -> ([2]f64, f64, [n]f64) =
  ([x[0] * w[1], sin(x[1]) + w[0]], sum(exp(x) * w), for i < n => cos(x[i]) * w[i])
def taped(v: [n]f64, c: f64) -> ([n]f64, f64) =
  let r = for i < n => if v[i] > 0.0 then exp(v[i] * c) else sin(v[i]) * c
  let s = loop acc = c for i < n do tanh(acc * v[i]) + acc
  in (r, s)
// Literal extents: the vector jvp has a lane per column (20), and the sum
// over j < 5 of the value and the 20 tangents is one fused loop.
def damped(p: [20]f64, us: [m]i64) -> [m]f64 =
  for i < m =>
    let t = f64(us[i]) * 1e-2
    in sum(for j < 5 => p[4 * j] * exp(-p[4 * j + 1] * t) * cos(p[4 * j + 2] * t + p[4 * j + 3]))
