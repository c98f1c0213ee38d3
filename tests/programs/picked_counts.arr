// Comprehensions over a count picked by a branch, the array's extent or 0
// (as ir::passes::gather writes the fast and the checked versions of a
// loop of packed index arithmetic): a map of rows whose bodies loop, run
// two points at a time and split out into chunk functions that compute
// the count and its pairs again (codegen/src/parallel), and the backward
// pass of each, whose points' rows are known in bounds from the count
// (codegen/src/lower: `zero_or`); both branches of the pick.
// test: picked [[[1.0, 2.0], [3.0, -1.0], [0.5, 0.25], [2.0, 2.0], [-1.0, 0.5]], 1.5]
// test: picked [[[1.0, 2.0], [3.0, -1.0], [0.5, 0.25], [2.0, 2.0], [-1.0, 0.5]], -1.5]
// test: picked [[[1.0, 2.0], [3.0, -1.0], [0.5, 0.25], [2.0, 2.0]], 0.5]
// test: picked_rows [[[1.0, 2.0, 0.5], [3.0, -1.0, 1.0], [0.5, 0.25, -2.0]], [0.5, -1.0, 2.0], 2]
// test: picked_rows [[[1.0, 2.0, 0.5], [3.0, -1.0, 1.0], [0.5, 0.25, -2.0]], [0.5, -1.0, 2.0], 0]
def picked(x: [n][m]f64, s: f64) -> f64 =
  let c = if s > 0.0 then n else 0
  let rows = for i < c => sum(for j < m => x[i, j] * x[i, j] * s)
  in sum(rows) + f64(c)
def picked_rows(x: [n][m]f64, w: [m]f64, k: i64) -> f64 =
  let c = if k > 0 then 0 else n
  let d = if k > 0 then n else 0
  let a = for i < c => sum(for j < m => exp(x[i, j] * w[j]))
  let b = for i < d => sum(for j < m => x[i, j] * w[j] * x[i, j])
  in sum(a) * 0.5 + sum(b)
