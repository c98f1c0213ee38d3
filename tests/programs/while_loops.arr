// While loops (LANGUAGE.md section 3): scalar and array states, tuple
// states with an integer counter, a loop that runs zero times, nested
// while and counted loops, a while loop inside a comprehension, and
// derivatives through the recorded trip count.
// test: grow [1.3]
// test: grow [150.0]
// test: newton [2.0]
// test: halve [[3.0, 4.0, -1.0]]
// test: counted [[0.5, -1.5], 0.7]
// test: nested [[0.3, 0.9, 1.7]]
// test: rows [[[1.0, 2.0], [0.1, 0.2], [3.0, -4.0]]]
def grow(x: f64) -> f64 = loop y = x while y < 100.0 do y * 1.5 + sin(y)
def newton(a: f64) -> f64 = loop x = a while abs(x * x - a) > 1e-12 * a do 0.5 * (x + a / x)
def halve(x: [n]f64) -> [n]f64 = loop y = x while sum(y * y) > 1.0 do y * 0.5 + 0.01 * sin(y)
def counted(x: [n]f64, s: f64) -> f64 =
  let (y, k, acc) = loop (y, k, acc) = (x, 0, 0.0) while k < 5 && acc < 100.0 do
    (y * s + exp(-y), k + 1, acc + dot(y, y))
  in sum(y) * acc + f64(k)
def nested(x: [n]f64) -> f64 =
  loop t = 0.0 while t < 10.0 do
    t + 1.0 + sum(loop z = x * t for i < 2 do z * 0.5 + cos(z))
def rows(a: [n][m]f64) -> [n]f64 =
  for i < n => loop v = a[i, 0] while abs(v) < 50.0 do v * 2.0 + a[i, 1]
