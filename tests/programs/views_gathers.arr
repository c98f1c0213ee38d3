// Views in reverse mode: slices of slices, rows of rows, slices of rows used as
// values and indexed further, gathers with repeated indices and an index taken
// from a loop state, dot of slices of different rows, sums of rank 2 and 3,
// array literals of views, maximum/minimum with ties inside a loop.
// test: slsl [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]
// test: rowrow [[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]]
// test: slrow [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]]
// test: viewelem [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]
// test: gather [[1.0, 2.0, 3.0], [0, 2, 2, 1, 2], 2.0]
// test: dotrows [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.5, 0.1, -2.0]]]
// test: sum3 [[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]]
// test: lits [[1.0, 2.0, 3.0], 0.5]
// test: ties [[1.0, 3.0, 3.0, -1.0], 0.5]
def slsl(v: [n]f64) -> f64 =
  let s = v[1:5]
  let t = s[1:3]
  let u = t[0:1]
  in sum(t * s[0:2]) + u[0] * v[2] + sum(s)
def rowrow(a: [n][m][k]f64) -> f64 =
  let r = a[1]
  let rr = r[0]
  in rr[1] * a[1][0][0] + sum(r[1]) + dot(a[0][1], rr)
def slrow(a: [n][m]f64) -> [2][2]f64 =
  let s = a[1:3]
  let r = s[1]
  let t = r[0:2]
  in [t, s[0][1:3] * t[1]]
def viewelem(a: [n][m]f64) -> [n][m]f64 =
  let r = a[0]
  in for i < n => a[i] * r + r[i]
def gather(v: [n]f64, idx: [k]i64, c: f64) -> f64 =
  let (g, jj) = loop (acc, j) = (0.0, 0) for i < k do (acc + v[idx[j]] * v[idx[i]] * c, (j + idx[i]) % k)
  in g + sum(for i < k => v[idx[i]])
def dotrows(a: [n][m]f64) -> f64 =
  dot(a[0][0:2], a[1][1:3]) + dot(a[2], a[0]) + dot(a[1], a[1])
def sum3(a: [n][m][k]f64) -> [k]f64 =
  let s = sum(a)
  let t = sum(s)
  in t + sum(a[1])[0]
def lits(v: [n]f64, c: f64) -> [3][3]f64 =
  let r = v[0:3]
  in [r, [c, c, c], v * c]
def ties(v: [n]f64, c: f64) -> f64 =
  loop acc = 0.0 for i < 3 do acc + maximum(v) * c + minimum(v * c) + max(v[1], v[2]) + min(c, 0.5)
