def total(x: [n]f64) -> f64 = loop s = 0.0 for i < n do s + i
def first_index(x: [n]f64) -> i64 = loop k = 0.0 for i < n do i
