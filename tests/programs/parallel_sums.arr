// Sums, maxima and minima over several blocks of 4096 elements, which run
// on the pool of threads (codegen/src/parallel.rs): parallel sums of
// comprehensions (the block sums added in order), the maxima and minima of
// blocks, a dot product of long comprehensions, ties of signed zeros in
// different blocks (the first one wins), a NaN (it wins), and a summed
// body that allocates (not a parallel sum: its rows are made).
// test: long_sum [[0.5, -1.25, 2.0, 0.75], 2500]
// test: long_sum [[0.5, -1.25, 2.0], 1365]
// test: lse [[0.5, -1.25, 2.0, 0.75], 3000]
// test: dot_long [[0.5, -1.0, 2.0], 3001]
// test: signed_zeros [[1.5], 9000, 100, 5000]
// test: signed_zeros [[1.5], 9000, 5000, 100]
// test: with_nan [[1.0, 2.0, 3.0], 9000, 8500]
// test: with_nan [[1.0, 2.0, 3.0], 9000, 9000]
// test: allocating [[0.5, -1.25, 2.0], 3000]
def long_sum(x: [n]f64, reps: i64) -> f64 =
  sum(for i < n * reps => sin(x[i % n] * f64(i + 1) * 0.001))
def lse(x: [n]f64, reps: i64) -> f64 =
  let y = for i < n * reps => x[i % n] * cos(f64(i))
  let m = maximum(y)
  in m + log(sum(for i < n * reps => exp(y[i] - m)))
def dot_long(x: [n]f64, reps: i64) -> f64 =
  let a = for i < n * reps => x[i % n] * 0.5 + f64(i % 7)
  let b = for i < n * reps => x[(i + 1) % n] - 0.25
  in dot(a, b)
// 1 / (1 + exp(-1 / z)) is 1.0 for z = +0.0 and 0.0 for z = -0.0.
def signed_zeros(x: [k]f64, n: i64, pos: i64, neg: i64) -> f64 =
  let y = for i < n => if i == pos then 0.0 else if i == neg then -0.0 else -1.0 - f64(i % 3)
  let z = for i < n => y[i] * -1.0
  in x[0] * (1.0 / (1.0 + exp(-1.0 / maximum(y))) + 2.0 / (1.0 + exp(-1.0 / minimum(z))))
def with_nan(x: [n]f64, m: i64, k: i64) -> f64 =
  let y = for i < m => if i == k then log(-1.0) else f64(i % 97)
  let top = maximum(y)
  let bottom = minimum(y)
  in (if top == top then top else -1.0) * x[0] + (if bottom == bottom then bottom else 0.5)
def allocating(x: [n]f64, reps: i64) -> f64 =
  sum(for i < n * reps => let t = for j < i % 4 + 2 => x[(i + j) % n] in t[0] * t[1] - t[i % 2] * 0.5)
