// Triangular nests: indices bounded by enclosing loops' indices (`c < r <
// n`), whose bounds checks code generation drops (`known_in_bounds` in
// codegen/src/lower/expr.rs), in sums, comprehensions and packed storage,
// and their derivatives.
// test: lower_sums [[1.0, -2.0, 3.0, 0.5]]
// test: packed [[0.5, -1.0, 2.0, 1.5], [1.0, 2.0, -3.0, 4.0, 0.25, 6.0]]
// test: three_deep [[1.0, 2.0, -0.5, 3.0, 0.75]]
// test: rows_below [[[1.0, 2.0, 3.0], [4.0, -5.0, 6.0], [7.0, 8.0, 0.5]]]
// test: cube_rows [[[[1.0, 2.0, -1.0], [3.0, -1.0, 0.5]], [[0.5, 4.0, 2.0], [-2.0, 1.5, 1.0]]], [1.0, -0.5, 2.0], 3]
// test: cube_rows [[[[1.0, 2.0, -1.0], [3.0, -1.0, 0.5]], [[0.5, 4.0, 2.0], [-2.0, 1.5, 1.0]]], [1.0, -0.5, 2.0], 1]
// test: cube_maps [[[[1.0, 2.0, -1.0], [3.0, -1.0, 0.5]], [[0.5, 4.0, 2.0], [-2.0, 1.5, 1.0]]], [1.0, -0.5, 2.0], 3]
def lower_sums(x: [n]f64) -> [n]f64 = for r < n => sum(for c < r => x[c] * x[r])
// Q x for the lower-triangular Q given by its diagonal (exp of x) and its
// strictly lower part packed column by column, as GMM's icf.
def packed(x: [d]f64, l: [d * (d - 1) / 2]f64) -> f64 =
  let qx = for r < d =>
    exp(x[r]) * x[r] + sum(for c < r => l[c * (2 * d - c - 1) / 2 + r - c - 1] * x[c])
  in dot(qx, qx)
def three_deep(x: [n]f64) -> f64 =
  sum(for r < n => sum(for c < r => sum(for e < c => x[e] * x[c] - x[r])))
def rows_below(a: [n][n]f64) -> [n]f64 =
  for r < n => sum(for c < r => a[r, c] * a[c, r]) + maximum(for c < r + 1 => a[c, c])
// Rows of a cube read along their last axis in sums and comprehensions
// (and added into by the backward loops): code generation computes each row's address
// before the loop over `c` (`Lower::hoist_loop_rows`) and checks `c`
// alone, which runs past the rows' extent when `m > e` (tests/differential.rs,
// `rows_read_along_a_loop_fail_as_the_interpreter_does`).
def cube_rows(l: [k][d][e]f64, x: [e]f64, m: i64) -> f64 =
  sum(for a < k => sum(for r < d => x[r + 1] * sum(for c < m => l[a, r, c] * x[c])))
def cube_maps(l: [k][d][e]f64, x: [e]f64, m: i64) -> f64 =
  sum(for a < k => sum(for r < d => let row = for c < m => exp(l[a, r, c]) * x[c] in dot(row, row)))
