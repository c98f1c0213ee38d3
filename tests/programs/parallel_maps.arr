// Comprehensions that run on the pool of threads (codegen/src/parallel.rs):
// maps of scalar rows, a map updated after it (`with`) while still read,
// one returned, a heavy map whose rows are summed, a map over the rows of a
// matrix whose extents the chunk binds again, and a map of i64 rows.
// test: updated [[1.0, -2.0, 3.0, 0.5, 2.5], 2]
// test: returned [[1.0, -2.0, 3.0, 0.5, 2.5], 4]
// test: summed_heavy [[0.5, -1.0, 2.0, 1.5], [[1.0, 2.0], [-0.5, 0.25], [3.0, -1.0], [0.5, 0.5]]]
// test: row_sums [[[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]], [0.5, -1.0, 2.0]]
// test: counted [[0.5, -1.0, 2.0, 1.5, -0.25, 3.0]]
def updated(x: [n]f64, k: i64) -> f64 =
  let a = for i < n => x[i] * 2.0 + sin(x[i])
  let b = a with [k] = 0.0
  let c = for i < n => a[i] * b[i]
  in c[0] + c[n - 1] + b[k] + a[k]
def returned(x: [n]f64, k: i64) -> [n]f64 =
  let a = for i < n => x[i] * x[(i + k) % n]
  in a with [k] = -1.0
def summed_heavy(x: [n]f64, w: [n][m]f64) -> f64 =
  sum(for i < n => let t = for j < m => w[i, j] * x[i] in exp(t[0]) + sum(t) * x[i])
def row_sums(a: [n][m]f64, v: [m]f64) -> [n]f64 =
  for r < n => dot(a[r], v) + sum(for c < m => a[r, c] * v[c] / 2.0)
def counted(x: [n]f64) -> f64 =
  let k = for i < n => if x[i] > 0.0 then i else 0 - i
  in sum(for i < n => f64(k[i]) * x[i])
