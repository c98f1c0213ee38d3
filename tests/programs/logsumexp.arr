// Numerically stable logsumexp and softmax.
// test: lse [[1.0, 2.0, 3.0, -1.0]]
// test: softmax [[1.0, 2.0, 3.0, -1.0]]
def lse(v: [n]f64) -> f64 = let m = maximum(v) in m + log(sum(exp(v - m)))
def softmax(v: [n]f64) -> [n]f64 = let l = lse(v) in exp(v - l)
