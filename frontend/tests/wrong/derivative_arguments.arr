def loss(w: [n]f64, x: [n]f64) -> f64 = dot(w, x)
def f(w: [n]f64, x: [n]f64) -> f64 =
  let (v, t) = jvp(loss, (w, x), (w, 1.0)) in
  let (u, ct) = vjp(loss, (w, x), [1.0]) in
  v + t + u
