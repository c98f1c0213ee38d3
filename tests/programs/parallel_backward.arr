// Backward passes that run on the pool of threads (codegen/src/parallel.rs)
// and scalar reductions of backward loops summed in index order
// (ir/src/passes/reductions.rs): a weight read by every iteration of a map
// (its cotangent a sum), a map whose backward loop adds into its operand's
// own rows (a loop of effects) and into rows of another array (not its own:
// serial), lse's fused backward loops, maxima and minima whose zeros of
// both signs tie in different lanes of the vectorised fold (and of one
// element), and a backward loop adding into two rows of a cotangent.
// test: weighted [[0.5, -1.25, 2.0, 0.75], 1.5, 3000]
// test: weighted [[0.5, -1.25], -0.5, 7]
// test: gathered [[0.5, -1.25, 2.0], 0.75, 3001]
// test: lse_ties [[2.0, -1.0, 2.0, 0.5], 2500]
// test: zero_ties [[1.5], 20, 3, 12]
// test: zero_ties [[1.5], 20, 12, 3]
// test: zero_ties [[1.5], 20, 17, 2]
// test: zero_ties [[1.5], 9, 8, 1]
// test: zero_ties [[1.5], 1, 0, 5]
// test: row_pairs [[[0.5, -1.0], [2.0, 0.25], [1.5, -0.5], [0.75, 1.0], [-2.0, 0.5]], [1.0, -0.5, 2.0, 0.25, 1.5]]
def weighted(x: [n]f64, w: f64, reps: i64) -> f64 =
  let y = for i < n * reps => x[i % n] * cos(f64(i))
  let z = for i < n * reps => w * y[i] * y[i]
  in sum(z) + sum(for i < n * reps => z[i] * 0.5 - w)
def gathered(x: [n]f64, w: f64, reps: i64) -> f64 =
  let y = for i < n * reps => w * x[(i * 7) % n] + x[i % n]
  in sum(for i < n * reps => y[i] * y[(i + 1) % (n * reps)])
def lse_ties(x: [n]f64, reps: i64) -> f64 =
  let y = for i < n * reps => x[i % n]
  let m = maximum(y)
  in m + log(sum(for i < n * reps => exp(y[i] - m)))
// 1 / (1 + exp(-1 / z)) is 1.0 for z = +0.0 and 0.0 for z = -0.0.
def zero_ties(x: [k]f64, n: i64, pos: i64, neg: i64) -> f64 =
  let y = for i < n => if i == pos then 0.0 else if i == neg then -0.0 else -1.0 - f64(i % 3)
  let z = for i < n => y[i] * -1.0
  in x[0] * (1.0 / (1.0 + exp(-1.0 / maximum(y))) + 2.0 / (1.0 + exp(-1.0 / minimum(z))))
// The backward loop adds into the rows i and i - 1 of the cotangent of w:
// not a loop of effects (two iterations add into one row).
def row_pairs(w: [n][k]f64, y: [n]f64) -> f64 =
  sum(for i < n => sum(w[i]) * (if i == 0 then 0.0 else sum(w[i - 1])) * y[i])
