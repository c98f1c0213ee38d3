// The calls of bench/calls.sh: what a call costs beside its arithmetic.

// A map with a large result (destination passing: computed in the
// caller's buffer).
def scale(x: [p]f64) -> [p]f64 = for i < p => x[i] * 2.0 + 1.0

// A reduction: eight partial sums in a fixed order (vectorised), against a
// sequential C loop.
def dot2(x: [p]f64, z: [p]f64) -> f64 = sum(x * z)

// Log-sum-exp (GradBench's lse): a maximum and a sum of a map, both
// parallel on several threads, and its gradient.
def lse(x: [p]f64) -> f64 =
  let m = maximum(x)
  in m + log(sum(for i < p => exp(x[i] - m)))

// A gradient as large as its input.
def norm2(x: [p]f64) -> f64 = sum(x * x)

// A Jacobian with many more rows than columns (forward mode, several
// columns per pass of the vector jvp): seven damped oscillators, 28
// parameters, one residual per sample (samples in microseconds, `i64`, so
// that only `p` is differentiated).
def fit(p: [28]f64, us: [m]i64) -> [m]f64 =
  for i < m =>
    let t = f64(us[i]) * 1e-6
    in sum(for j < 7 => p[4 * j] * exp(-p[4 * j + 1] * t) * cos(p[4 * j + 2] * t + p[4 * j + 3]))
