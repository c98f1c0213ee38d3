// Several independent mistakes: every one is reported, in source order.
def a(x: f64) -> f64 = x + true
def b(x: [n]f64) -> f64 = sum(x) + y
def c(x: [n]f64) -> [n]f64 = x * 2
def d(x: f64) -> i64 = x
