// The program of scripts/sanitize.sh and scripts/valgrind.sh (driver.c
// calls every export: values, derivatives, run-time errors, threads).
def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])
def get(x: [n]f64, i: i64) -> f64 = x[i]
def add(x: [n]f64, y: [m]f64) -> [n]f64 = x + y
def count(k: i64) -> f64 = sum(for i < k => 1.0)
def divide(a: i64, b: i64) -> i64 = a / b
def top(x: [n]f64) -> f64 = maximum(x)
def window(x: [n]f64, lo: i64, hi: i64) -> f64 = sum(x[lo:hi])
def matvec(a: [n][m]f64, v: [m]f64) -> [n]f64 = for i < n => dot(a[i], v)
def tape(x: [n]f64, k: i64) -> f64 = loop s = 0.0 for i < k do sin(s + x[i % n]) * 1.5
def grow(x: f64) -> f64 =
  let (s, c) = loop (s, c) = (x, 0) while c < 50 && s < 1e6 do (s * 1.1 + 0.1, c + 1)
  in s
def g(x: [n]f64) -> f64 = sum(exp(x)) * dot(x, x)
def dg(x: [n]f64) -> [n]f64 = grad(g, x)
def fixed(p: [3]f64) -> [3]f64 = [p[1] * p[2], sin(p[0]) * p[2], p[0] * p[1]]
def mixed(p: (f64, [2]f64), k: i64, flag: bool) -> (f64, [2]f64, i64) =
  let s = if flag then p.0 * p.1[0] else p.0 + p.1[1]
  in (s * f64(k), p.1 * s, k + 1)
def rows(x: [n]f64) -> [n][2]f64 = for i < n => [x[i] * x[i], sin(x[i]) * x[0]]
// A parallel map (scalar rows, independent iterations) whose errors come
// from one iteration: the first bad index in order is the one reported.
def gather(x: [n]f64, idx: [m]i64) -> [m]f64 = for i < m => x[idx[i]] * x[idx[i]] + f64(i)
// A parallel maximum and a parallel sum (blocks of 4096 elements shared
// out among the threads), and its gradient.
def lse(x: [n]f64) -> f64 =
  let m = maximum(x)
  in m + log(sum(for i < n => exp(x[i] - m)))
