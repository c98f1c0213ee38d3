// Loop states in reverse mode: tuples mixing arrays, scalars and integers,
// states swapped, passed through, ignored or duplicated, zero-trip loops,
// loops in builds in loops, states whose extents change from one iteration
// to the next (their cotangents must be shaped like the incoming state, not
// like the carrier), and a tangent computed inside a branch that does not
// escape it (the backward pass must not read tangents the forward pass
// lacks).
// test: swap [1.5, -0.5, 3]
// test: swaparr [[0.5, 1.5], [2.0, -1.0], [0.5, 0.25], 0.5, 4]
// test: pass [[1.0, 2.0, 3.0], 0.5, 4]
// test: pass [[1.0, 2.0, 3.0], 0.5, 0]
// test: mixed [[0.5, 1.5], 1.2, 3]
// test: ignore [[0.5, 1.5], 1.2, 3]
// test: dup [[1.0, 2.0], 0.5, 3]
// test: nested [[0.5, 1.5, -0.3], [[1.0, 2.0], [0.5, -1.0], [0.1, 0.2]], 2]
// test: nested [[0.5, 1.5, -0.3], [[1.0, 2.0], [0.5, -1.0], [0.1, 0.2]], 0]
// test: rowpass [[[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]], 0.7, 3]
// test: viewpass [[[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]], 0.7, 3]
// test: shrink [[1.0, 2.0, 3.0], 0.5]
// test: grow [[1.0, 2.0, 3.0], 0.5]
// test: swapsz [[1.0, 2.0, 3.0], [0.5, -1.0], 0.5, 3]
// test: rowshape [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 0.5]
// test: deadtan [[0.3, -0.7, 1.1], 0.8, 0]
// test: deadtan [[0.3, -0.7, 1.1], 0.2, 2]
def swap(x: f64, y: f64, n: i64) -> (f64, f64) =
  loop (a, b) = (x, y) for i < n do (b, a)
def swaparr(x: [m]f64, y: [m]f64, z: [m]f64, c: f64, n: i64) -> f64 =
  let (a, b, d, e) = loop (a, b, d, e) = (x, y, z, c) for i < n do (d, a, b, e * a[0] + b[1] * c)
  in sum(a) + 2.0 * sum(b) + 3.0 * sum(d) + e
def pass(v: [m]f64, c: f64, n: i64) -> ([m]f64, f64) =
  loop (s, acc) = (v, c) for i < n do (s, acc * c + s[i % m] * s[(i + 1) % m])
def mixed(v: [m]f64, c: f64, n: i64) -> f64 =
  let (s, t, k) = loop (s, t, k) = (v, c, 0) for i < n do (s * t, t + sum(s), k + 1)
  in sum(s) + t * f64(k)
def ignore(v: [m]f64, c: f64, n: i64) -> (f64, [m]f64) =
  loop (a, s) = (c, v) for i < n do (c * f64(i), s + a)
def dup(v: [m]f64, c: f64, n: i64) -> f64 =
  let (a, b) = loop (a, b) = (v, v * c) for i < n do (a, a)
  in sum(a) + sum(b) * 3.0
def nested(v: [m]f64, a: [m][k]f64, n: i64) -> f64 =
  let r = loop s = v for t < n do
    let b = for i < m =>
      let (p, q) = loop (p, q) = (s[i], 0) for j < k do
        (if a[i, j] > 0.0 then p * a[i, j] + s[(i + q) % m] else p - a[i, j], q + 1)
      in p
    in for i < m => b[i] * 0.5 + maximum(b)
  in sum(r) + minimum(r)
def rowpass(a: [m][k]f64, c: f64, n: i64) -> [m][k]f64 =
  for i < m =>
    let (s, t) = loop (s, t) = (a[i], a[(i + 1) % m] * c) for j < n do (s, t * s)
    in s + t
def viewpass(a: [m][k]f64, c: f64, n: i64) -> f64 =
  let (s, r) = loop (s, r) = (a[0], a[1]) for j < n do (r, s * c)
  in sum(s) + sum(a[0]) + 2.0 * sum(r)
def shrink(v: [m]f64, c: f64) -> f64 = sum(loop s = v for i < 2 do s[0:2 - i] * c)
def grow(v: [m]f64, c: f64) -> f64 =
  sum(loop s = v[0:1] for i < 2 do for j < length(s) + 1 => s[j % length(s)] * c)
def swapsz(x: [m]f64, y: [k]f64, c: f64, n: i64) -> f64 =
  let (a, b) = loop (a, b) = (x, y) for i < n do (b * c, a)
  in sum(a) + 2.0 * sum(b) + a[0] * b[1]
def rowshape(a: [m][k]f64, c: f64) -> [m]f64 =
  for r < m =>
    let s = loop s = a[r] for i < 2 do (if i == 0 then s[0:2] else (for j < length(s) + 1 => s[j % length(s)] * c))
    in sum(s)
def deadtan(v: [m]f64, c: f64, n: i64) -> f64 =
  let z = for j < m => f64(j)
  let x = if c > 0.5 then (let (a, b) = loop (a, b) = (z, v) for i < n do (a, b * c) in a) else z
  in sum(x * v)
