// Calls and sharing: a helper called with different shapes, helpers returning
// tuples, nested helpers, one array returned twice, a parameter returned
// directly, results not depending on the active parameters, values shared
// by a loop and both branches of an if.
// test: many [[1.0, 2.0, 3.0], [[0.5, 1.5], [2.5, -1.0]], 0.7]
// test: tup [[1.0, 2.0, 3.0], 0.7]
// test: nest [[1.0, 2.0, 3.0], 0.7]
// test: same [[1.0, 2.0, 3.0], 0.7]
// test: direct [[1.0, 2.0, 3.0], 0.7]
// test: noactive [[1.0, 2.0, 3.0], 0.7, 3]
// test: intonly [[1.0, 2.0, 3.0], 3]
// test: share [[1.0, 2.0, 3.0], 0.7]
def norm(v: [n]f64) -> f64 = sqrt(dot(v, v))
def scale(v: [n]f64, c: f64) -> [n]f64 = v * c
def stats(v: [n]f64) -> (f64, [n]f64, f64) =
  let m = sum(v) / f64(n)
  in (m, v - m, maximum(v))
def outer(v: [n]f64, w: [m]f64) -> [n][m]f64 = for i < n, j < m => v[i] * w[j]
def many(v: [n]f64, a: [k][k]f64, c: f64) -> f64 =
  norm(v) + norm(a[0]) + norm(scale(a[1], c)) + sum(for i < k => norm(a[i] * v[i])) + norm(sum(outer(v, a[0])))
def tup(v: [n]f64, c: f64) -> (f64, [n]f64) =
  let (m, d, mx) = stats(v * c)
  let (m2, d2, mx2) = stats(d)
  in (m + mx * m2 + mx2, d2 * m)
def inner(v: [n]f64) -> f64 = norm(scale(v, 2.0)) * sum(v)
def mid(v: [n]f64, c: f64) -> [n]f64 = scale(v, inner(v) * c)
def nest(v: [n]f64, c: f64) -> f64 = inner(mid(v, c)) + inner(mid(v[0:2], c))
def same(v: [n]f64, c: f64) -> ([n]f64, [n]f64, f64, f64) =
  let w = v * c
  in (w, w, c, c)
def direct(v: [n]f64, c: f64) -> ([n]f64, f64, [n]f64) = (v, c, v)
def noactive(v: [n]f64, c: f64, k: i64) -> (i64, [n]f64) = (k * 2, for i < n => f64(i))
def intonly(v: [n]f64, k: i64) -> f64 = f64(k) * 2.0
def share(v: [n]f64, c: f64) -> f64 =
  let e = exp(v * c)
  let s = sum(e)
  let r = loop acc = s for i < n do if e[i] > 2.0 then acc * s + e[i] else acc - s * e[i]
  in r + (if s > 3.0 then s * e[0] else e[1] / s)
