// Indexing, multi-index, row views, slices, gathers with repeated indices,
// sum of rank 1 and rank 2, dot, length, array literals.
// test: f [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [0.5, -0.5, 2.0], [0, 2, 2, 1, 0]]
// test: lit [1.5, -2.0]
// test: slices [[1.0, 2.0, 3.0, 4.0, 5.0]]
def f(a: [n][m]f64, w: [m]f64, idx: [k]i64) -> f64 =
  let rows = sum(a)
  let g = for i < k => w[idx[i]] * a[1, idx[i]]
  let r = a[0]
  in dot(rows, w) + sum(g) + dot(r, w) * f64(length(idx)) + a[1][2]
def lit(x: f64, y: f64) -> [2][3]f64 =
  let row = [x, y, x * y]
  in [row, [1, 2, x]]
def slices(v: [n]f64) -> f64 =
  let s = v[1:4]
  let t = s[0:2]
  in sum(s * s) + dot(t, t) * v[n - 1]
