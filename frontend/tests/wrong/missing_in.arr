// A let chain that never reaches its body.
def loss(x: [n]f64, w: [n]f64) -> f64 =
  let r = x * w
  let s = sum(r)
