// Gathers the optimiser reads once before the comprehension that repeats
// them (`arrayad_ir::passes::gather`): packed triangular storage read per
// point as in `examples/gmm_packed.arr`, a strided read, and a gather over
// two nested comprehensions; and reads it leaves alone (indices that use
// the point index, or none computed).
// test: packed_points [[[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], [[1.0, 2.0, -3.0], [0.5, -0.5, 4.0], [2.0, 1.0, 0.5], [-1.0, 3.0, 0.25]]]
// test: strided [[1.0, -2.0, 3.0, 0.5, -1.5, 2.5], [0.5, -1.0, 2.0]]
// test: two_axes [[1.0, 2.0, -1.0, 0.5, 3.0, -2.0], [[0.5, 1.0, -1.0], [2.0, -0.5, 0.25]]]
// test: left_alone [[1.0, 2.0, -1.0, 0.5], [[0.5, 1.0], [2.0, -0.5]]]
def packed_points(l: [k][t]f64, x: [n][d]f64) -> f64 =
  sum(for i < n =>
    let xc = x[i]
    in sum(for j < k =>
      sum(for r < d => xc[r] * sum(for c < r => l[j, c * (2 * d - c - 1) / 2 + r - c - 1] * xc[c]))))
def strided(a: [m2]f64, x: [n]f64) -> [n]f64 =
  for i < n => sum(for j < m2 / 2 => a[2 * j + 1] * x[i] - a[2 * j])
def two_axes(a: [p]f64, x: [n][q]f64) -> [n][2]f64 =
  for i < n => for j < 2 => sum(for c < q => a[j * q + c] * x[i, c] * x[i, c])
def left_alone(a: [p]f64, x: [n][q]f64) -> [n]f64 =
  for i < n => sum(for c < q => a[i + c] * x[i, c]) + sum(for c < q => a[c] * x[i, c])
