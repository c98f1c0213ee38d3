// Branches and loops that move arrays without touching their elements
// (a state passed through in one branch, states swapped or ignored, loops
// nested in loops passing a state on): their backward passes must not cost
// O(size) per iteration, so the cotangents of such values are materialised
// lazily; these cases check the values along every path.
// test: a1 [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0], 0.7, 4]
// test: a2 [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0], 0.7, 4]
// test: a3 [[[1.0, -2.0], [3.0, 0.5]], [0.5, 0.25], 0.7, 3]
// test: a4 [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0], 0.7, 5]
// test: a5 [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0], 0.7, 5]
// test: a6 [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0], 0.7, 4]
// test: a7 [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0], 0.7, 4]
// test: a8 [[1.0, -2.0, 3.0], [0.5, 0.25, -1.0], 0.7, 4]
// test: ifpass [[1.0, -2.0, 3.0], [0.5, 0.5, 0.1], 0.5, 5]
// test: ifinbuild [[[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]], [0.1, 0.2], 0.7]
// test: passif [[1.0, -2.0, 3.0], 0.5, 4]
// test: innerpass [[1.0, -2.0, 3.0], 0.5, 4]
def a1(v: [m]f64, w: [m]f64, c: f64, n: i64) -> [m]f64 =
  loop s = v for i < n do
    if i % 2 == 0 then s else (if s[0] > 0.0 then w * c else (let t = s[1:m] in for j < m => t[j % (m - 1)] * c + s[j]))
def a2(v: [m]f64, w: [m]f64, c: f64, n: i64) -> f64 =
  let (s, t) = loop (s, t) = (v, w) for i < n do
    let x = if i % 3 == 0 then t else s
    let y = for r < 2 => if r == 0 then x else s
    in (y[1], y[0] * c)
  in sum(s) + 2.0 * sum(t)
def a3(a: [k][m]f64, w: [m]f64, c: f64, n: i64) -> [k][m]f64 =
  loop s = a for i < n do
    for r < k => if s[r, 0] > 0.0 then s[r] else (if r == 0 then w else s[r] * c)
def a4(v: [m]f64, w: [m]f64, c: f64, n: i64) -> f64 =
  let (s, acc) = loop (s, acc) = (v, 0.0) for i < n do
    let (ip, iq) = loop (p, q) = (s, w) for j < 2 do (if j == 0 then q else p, p)
    in (if i % 2 == 0 then ip else s, acc + sum(iq) * c)
  in acc + sum(s)
def a5(v: [m]f64, w: [m]f64, c: f64, n: i64) -> f64 =
  let (s, t, u) = loop (s, t, u) = (v, w, v) for i < n do
    (if c > 0.0 then t else s, if i == 2 then u * c else s, [s[0], t[0], u[0]] * 2.0)
  in sum(s) + sum(t) * 3.0 + sum(u)
def a6(v: [m]f64, w: [m]f64, c: f64, n: i64) -> f64 =
  let r = for b < 2 =>
    let s = loop s = (if b == 0 then v else w) for i < n do (if s[i % m] > 0.0 then s else s * c)
    in sum(s) * f64(b + 1)
  in sum(r)
def a7(v: [m]f64, w: [m]f64, c: f64, n: i64) -> [2][m]f64 =
  loop s = [v, w] for i < n do (if i % 2 == 0 then [s[1], s[0]] else s)
def a8(v: [m]f64, w: [m]f64, c: f64, n: i64) -> f64 =
  let s = loop s = v for i < n do
    let x = if i == 1 then s else w
    in for j < m => x[j] + f64(i) * c
  in sum(s)
def ifpass(v: [m]f64, w: [m]f64, c: f64, n: i64) -> [m]f64 =
  loop s = v for i < n do
    let x = if s[i % m] > 0.0 then s else w * c
    let y = if c > 0.0 then x * s[0] else x
    in y
def ifinbuild(a: [m][k]f64, w: [k]f64, c: f64) -> [m][k]f64 =
  for i < m =>
    let r = a[i] * c
    let x = if r[0] > 1.0 then r else (if r[1] > 0.0 then w else a[i])
    in x
def passif(v: [m]f64, c: f64, n: i64) -> f64 =
  let s = loop s = v for i < n do if s[i % m] > 2.0 then s * c else s
  in sum(s)
def innerpass(v: [m]f64, c: f64, n: i64) -> f64 =
  let (s, acc) = loop (s, acc) = (v, 0.0) for i < n do
    let r = loop t = s for j < 2 do t
    in (r, acc + r[i % m] * c)
  in acc
