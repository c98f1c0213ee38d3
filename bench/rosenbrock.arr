// The Rosenbrock function of n variables, for the Hessian-vector product
// benchmark (bench/nested.sh).
def rosen(x: [n]f64) -> f64 =
  sum(for i < n - 1 => 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2)
// A gradient penalty (reverse over reverse, bench/nested.sh): its gradient
// is one forward-over-reverse pass of `rosen` per call of `grad`.
def rosen_penalty(x: [n]f64) -> f64 = sum(grad(rosen, x) ** 2)
// The Hessian-vector product by reverse over reverse (the vjp of the
// gradient), against `rosen_hvp` (forward over reverse).
def drosen(x: [n]f64) -> [n]f64 = grad(rosen, x)
def rosen_hvp_by_vjp(x: [n]f64, v: [n]f64) -> [n]f64 = vjp(drosen, x, v).1
