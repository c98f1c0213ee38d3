// if, for (nested, multi-index), loop with scalar, tuple and array states,
// integer arithmetic, conversions, calls between definitions.
// test: f [[0.5, 1.5, -0.25, 2.0], 0.8]
// test: power [1.1, 7]
// test: mat [[[1.0, 2.0], [3.0, 4.0]], [[0.5, -1.0], [2.0, 0.25]]]
def sq(x: f64) -> f64 = x * x
def f(x: [n]f64, c: f64) -> f64 =
  let y = for i < n => if x[i] > 0 && i % 2 == 0 then sq(x[i]) * c else c - x[i]
  let z = for i < n, j < 3 => x[i] * f64(j + 1) + c
  let (s, p) = loop (s, p) = (0.0, 1.0) for i < n do (s + y[i], p * (1 + x[i] * c / 4))
  let st = loop st = x for t < 3 do st * c + 1
  in s + p + sum(sum(z)) + sum(st) + f64(i64(c * 10.0) / 3)
def power(x: f64, k: i64) -> f64 = loop acc = 1.0 for i < k do acc * x
def mat(a: [n][n]f64, b: [n][n]f64) -> [n][n]f64 =
  for i < n, j < n => sum(for k < n => a[i, k] * b[k, j])
