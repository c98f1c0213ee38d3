// Every expression form of the language, for lowering tests.

def helper(p: (f64, [n]f64), k: i64) -> ([n]f64, (f64, i64)) = (p.1, (p.0, k))

def all_forms(a: [n][m]f64, v: [m]f64, w: [m]i64, x: f64, i: i64, c: bool) -> (f64, [n]f64, i64) =
  let s = x * 2 + -x ** 2 - x / 3.0
  let t = (s, i)
  let (u, _) = t
  let b = c && x < 1 || !(i == 2) && i % 2 != 0 && x >= 0 && x <= 1 && x > -1
  let row = a[0]
  let e = a[i, 0]
  let sl = v[1:m]
  let arr = [x, s, 1]
  let rows = [v, v]
  let m2 = for r < n, q < m => a[r, q] * v[q] + 1
  let cols = sum(m2)
  let lp = loop (acc, k) = (0.0, 0) for j < m do (acc + v[j] * f64(w[j]), k + 1)
  let h = helper((x, v), i)
  let conv = f64(i) + f64(i64(x))
  let maths = exp(x) + log(x) + sqrt(x) + sin(x) + cos(x) + tan(x) + tanh(x) + sinh(x) + cosh(x)
              + asin(x) + acos(x) + atan(x) + log1p(x) + expm1(x) + erf(x) + lgamma(x) + abs(x)
              + floor(x) + ceil(x) + pow(x, 2) + atan2(x, 1) + min(x, 0) + max(x, 0)
  let red = sum(v) + maximum(v) + minimum(v) + dot(v, v) + f64(length(v) + sum(w))
  let ew = exp(v) * v - 1 + row / 2
  let ifv = if b then (u, 1) else (e, 2)
  in (ifv.0 + lp.0 + h.1.0 + conv + maths + red + sum(ew) + sum(sl) + sum(arr) + sum(rows[1]) + sum(cols),
      for r < n => sum(a[r]) + x,
      lp.1 + ifv.1 + h.1.1)
