// Conditionals whose branches yield atoms, which code generation lowers
// as selects (on Cranelift, on pairs of lanes in sums, comprehensions and
// backward loops): the mask of a maximum's ties, NaN tests (`!=` is true
// of NaN, the other comparisons false), literal and variable branches,
// counts with a last element alone and counts of several blocks of 4096,
// and bool and i64 results.
// nofd
// test: lse_ties [[1.0, 3.0, 3.0, -2.0, 3.0], 1]
// test: lse_ties [[1.0, 3.0, 3.0, -2.0, 3.0], 1001]
// test: nan_mask [[1.0, 2.5, 3.0, 4.0, 0.5, 7.0, 2.0], 2.5, 1]
// test: nan_mask [[1.0, 2.5, 3.0, 4.0, 0.5, 7.0, 2.0], 2.5, 700]
// test: clipped [[1.0, -2.0, 3.5, 0.25, -0.75], 0.5, 3]
// test: clipped [[1.0, -2.0, 3.5, 0.25, -0.75], 0.5, 1001]
// test: scalar_selects [2.0, 3]
// test: scalar_selects [0.5, 3]
def lse_ties(x: [k]f64, reps: i64) -> f64 =
  let v = for i < k * reps => x[i % k]
  let m = maximum(v)
  in m + log(sum(exp(v - m)))
def nan_mask(x: [k]f64, t: f64, reps: i64) -> f64 =
  let zero = 0.0
  let y = for i < k * reps => if i % 5 == 3 then zero / zero else x[i % k] * t
  let nans = sum(for i < k * reps => if y[i] != y[i] then 1.0 else 0.0)
  let above = sum(for i < k * reps => if y[i] > t then y[i] else t)
  let below = sum(for i < k * reps => if y[i] <= t then -0.0 else 2.0)
  in nans + above + below
def clipped(x: [k]f64, t: f64, reps: i64) -> f64 =
  let y = for i < k * reps => x[i % k] * f64(i % 3 + 1)
  let c = for i < k * reps =>
    let a = y[i]
    let b = t * a
    in if a >= t then a else b
  in sum(for i < k * reps => c[i] * c[i])
def scalar_selects(x: f64, n: i64) -> f64 =
  let b = x > 1.0
  let j = if b then n else 0
  let c = if b then true else false
  in if c then x * f64(j) else x
