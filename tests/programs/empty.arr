// Empty arrays and zero-trip loops and builds in both modes.
// test: emptyv [[], 0.5]
// test: emptyrows [[[], []], 0.5]
// test: emptyrows [[], 0.5]
// test: zeroloop [[1.0, 2.0], 0.5, 0]
// test: zeroloop2 [[[1.0, 2.0]], 0.5, 0]
// test: zerobuild [[1.0, 2.0], 0.5, []]
def emptyv(v: [n]f64, c: f64) -> (f64, [n]f64) = (sum(v * c) + c, v * c)
def emptyrows(a: [n][m]f64, c: f64) -> (f64, [m]f64, [n][m]f64) = (sum(sum(a)) + c, sum(a) * c, a * c)
def zeroloop(v: [n]f64, c: f64, k: i64) -> ([n]f64, f64) =
  loop (s, t) = (v, c) for i < k do (s * t, t * 2.0)
def zeroloop2(a: [n][m]f64, c: f64, k: i64) -> f64 =
  let r = loop s = a for i < k do for j < n => s[j] * c
  in sum(for i < k => sum(r[0]))
def zerobuild(v: [n]f64, c: f64, ks: [k]i64) -> f64 =
  let b = for i < k => v * c
  in sum(for i < k => sum(b[i])) + c
