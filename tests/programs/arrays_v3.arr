// LANGUAGE.md section 11: functional update (element, row, chained, in a
// loop state), size arithmetic in types, flatten, reshape, concat, sign,
// argmin and argmax.
// test: upd [[1.0, 2.0, 3.0], 1.5]
// test: rows [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [0.5, -1.5]]
// test: prefix [[1.0, -2.0, 0.5, 3.0]]
// test: flat [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]
// test: shaped [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]]]
// test: joined [[1.0, 2.0], [[3.0, 4.0], [5.0, 6.0]], [-1.0, 0.5]]
// test: signs [[1.5, -2.0, 3.0]]
// test: extremes [[3.0, -1.0, 4.0, -1.5, 5.0, 9.0, 2.0, 8.0]]
// test: packed [[0.5, -0.25, 1.0], [1.0, 2.0, 3.0]]
def upd(a: [n]f64, x: f64) -> [n]f64 = a with [1] = x * a[0]
def rows(a: [n][m]f64, r: [m]f64) -> f64 =
  let b = a with [0] = r * a[2] with [1, 1] = sin(r[0])
  in sum(flatten(b * b))
def prefix(x: [n]f64) -> [n]f64 =
  loop acc = x for i < n do
    acc with [i] = (if i > 0 then acc[i - 1] * x[i] else exp(x[0]))
def flat(a: [n][m]f64) -> [n * m]f64 = flatten(a) * exp(a[0, 1])
def shaped(v: [n * m]f64, w: [n][m]f64) -> [m][n]f64 =
  let a = reshape(v, (n, m)) * w
  let t = reshape(flatten(a), (m, n))
  in t * t
def joined(a: [n]f64, b: [k][2]f64, c: [2]f64) -> [n + 2 * k + 2]f64 =
  concat(concat(a * a, flatten(b)), sin(c))
def signs(x: [n]f64) -> f64 = sum(sign(x) * x * x) + sign(x[1])
def extremes(x: [n]f64) -> f64 =
  let i = argmax(x)
  let j = argmin(x)
  in x[i] * x[j] + f64(i * 10 + j)
def packed(l: [d * (d - 1) / 2]f64, q: [d]f64) -> f64 =
  let t: [d]f64 = exp(q)
  in sum(for i < d => t[i] * t[i]) + dot(l, l) * f64(d)
// In-place updates and the cases that must copy: a parameter as the initial
// state (read again in the body), an array read after its update (directly
// and through a row view), two states started from one array.
// test: doubling [[1.0, 2.0, 3.0]]
// test: kept [[1.0, 2.0, 3.0]]
// test: viewed [[[1.0, 2.0], [3.0, 4.0]]]
// test: twins [[1.0, 2.0, 3.0]]
// test: rebound [[1.0, 2.0, 3.0]]
def doubling(x: [n]f64) -> [n]f64 =
  loop acc = x for i < n do acc with [i] = acc[i] * 2.0 + x[n - 1 - i]
def kept(x: [n]f64) -> f64 =
  let a = for i < n => x[i] * x[i]
  let b = a with [0] = 10.0 * x[1]
  in a[0] + b[0] + sum(a)
def viewed(m: [n][k]f64) -> f64 =
  let a = m * 2.0
  let r = a[1]
  let b = a with [1] = r * r
  in sum(r) + sum(flatten(b))
def twins(x: [n]f64) -> ([n]f64, [n]f64) =
  let a = x * 1.0
  in loop (p, q) = (a, a) for i < n do (p with [i] = p[i] * q[i], q with [n - 1 - i] = q[i] + p[i])
def rebound(x: [n]f64) -> [n]f64 =
  let a = x * 3.0
  let a = a with [0] = a[1] * a[2]
  let a = a with [1] = a[0] + 1.0
  in a with [2] = exp(a[1] * 0.1)
// An array yielded by a branch or a loop that does not run aliases what it
// read: updating that afterwards copies.
// test: branchy [[1.0, 2.0, 3.0], 1]
// test: branchy [[1.0, 2.0, 3.0], 0]
// test: zero_trips [[1.0, 2.0, 3.0]]
def branchy(x: [n]f64, k: i64) -> f64 =
  let a = x * 2.0
  let y = if k > 0 then a else x
  let b = a with [0] = 100.0
  in sum(y) + sum(b)
def zero_trips(x: [n]f64) -> f64 =
  let a = x * 2.0
  let r = loop acc = a for i < 0 do acc with [0] = 5.0
  let b = a with [1] = 7.0
  in sum(r) * 10.0 + sum(b)
