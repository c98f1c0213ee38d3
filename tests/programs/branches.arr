// if inside loops and builds: array results, one branch depending on the
// active input, both branches returning the same variable, conditions on a
// loop state; bool and integer-array loop states.
// test: ifloop [[0.5, -1.5, 2.0], 1.3]
// test: ifarr [[0.5, -1.5, 2.0], 1.3]
// test: ifarr [[0.5, -1.5, 2.0], -1.3]
// test: onebranch [[0.5, -1.5, 2.0], 1.3]
// test: samevar [[0.5, -1.5, 2.0], 1.3]
// test: condstate [[0.5, -1.5, 2.0], 0.3]
// test: ifbuild [[[0.5, -1.5], [2.0, 0.1]], 1.3]
// test: ifboth [[0.5, -1.5, 2.0], 1.3]
// test: boolstate [[1.0, -2.0, 3.0], 0.5]
// test: intarr [[1.0, -2.0, 3.0], [1, 2, 0], 0.5]
// test: nestedif [[1.0, -2.0, 3.0], 0.5]
// test: constres [[1.0, -2.0, 3.0], 0.5]
// test: cond_on_state [[1.0, -2.0, 3.0], 0.5]
def ifloop(v: [m]f64, c: f64) -> f64 =
  loop acc = 0.0 for i < m do if v[i] > 0.0 then acc + v[i] * c else acc * c
def ifarr(v: [m]f64, c: f64) -> [m]f64 =
  if c > 0.0 then for i < m => v[i] * c else v
def onebranch(v: [m]f64, c: f64) -> f64 =
  loop acc = 1.0 for i < m do if i % 2 == 0 then acc * v[i] else 2.0
def samevar(v: [m]f64, c: f64) -> f64 =
  let w = v * c
  let r = for i < m => if v[i] > 0.0 then w else w
  let s = if c > 1.0 then w else w
  in sum(sum(r)) + sum(s)
def condstate(v: [m]f64, c: f64) -> f64 =
  loop acc = c for i < m do if acc > 0.5 then acc * 0.5 + v[i] else acc * v[i] + 1.0
def ifbuild(a: [m][k]f64, c: f64) -> [m][k]f64 =
  for i < m => if a[i, 0] > 0.0 then a[i] * c else for j < k => c
def ifboth(v: [m]f64, c: f64) -> f64 =
  let w = exp(v) * c
  let t = sum(w)
  let r = for i < m => if v[i] > 0.0 then w[i] * t else t - w[i]
  in sum(r) + (if t > 0.0 then t * t else w[0])
def boolstate(v: [m]f64, c: f64) -> f64 =
  let (b, x) = loop (b, x) = (true, c) for i < m do (!b, if b then x * v[i] else x + v[i])
  in x
def intarr(v: [m]f64, idx: [m]i64, c: f64) -> f64 =
  let (p, x) = loop (p, x) = (idx, c) for i < m do (for j < m => p[(j + 1) % m], x * v[p[0]] + 1)
  in x
def nestedif(v: [m]f64, c: f64) -> [m]f64 =
  for i < m =>
    if v[i] > 0.0 then (if c > 0.0 then v[i] * c else c) else (if v[i] < -1.0 then sum(v) else v[i] * v[i])
def constres(v: [m]f64, c: f64) -> ([m]f64, f64, [2]f64) = (for i < m => 1.0, 3.0, [2.0, f64(m)])
def cond_on_state(v: [m]f64, c: f64) -> f64 =
  let (s, x) = loop (s, x) = (v, c) for i < 4 do
    if sum(s) > x then (s * 0.5, x + s[0]) else (s + x, x * 2.0)
  in sum(s) + x
