// Pearlmutter & Siskind's charged particle (GradBench `particle`): nested
// derivatives through an unbounded while loop.
//
// A particle starts at (0, 8) with velocity (0.75, 0) in the field of two
// unit charges at (10, 10 - w) and (10, 0), potential p(x; w). Naive Euler
// steps (dt = 0.1) under the force -grad_x p run while the particle stays
// above the x axis; linear interpolation gives where it lands, x(t_f). A
// gradient descent over w minimises x0(t_f)^2, differentiating through the
// whole simulation (and through the gradient inside each step).
//
// Four variants, as GradBench names them: the first letter is the mode of
// the descent's derivative (f: jvp, r: grad), the second that of the force
// inside the simulation. From w = 0 each returns 0.2071918746486116.
//
//   "ff", "fr", "rf", "rr": particle_ff(w0) ... particle_rr(w0), primal
//                           w0: f64, the input's `w` -> the final w (the output)
//
//   arrayad run tools/gradbench/evals/particle.arr particle_rr --args '[0.0]'

def p(x: [2]f64, w: f64) -> f64 =
  1.0 / sqrt((x[0] - 10.0) ** 2 + (x[1] - (10.0 - w)) ** 2) + 1.0 / sqrt((x[0] - 10.0) ** 2 + x[1] ** 2)

// The acceleration -grad_x p, by reverse mode or by two forward passes.
def accel_r(x: [2]f64, w: f64) -> [2]f64 = -(grad(p, (x, w)).0)
def accel_f(x: [2]f64, w: f64) -> [2]f64 =
  [-(jvp(p, (x, w), ([1.0, 0.0], 0.0)).1), -(jvp(p, (x, w), ([0.0, 1.0], 0.0)).1)]

// x0(t_f)^2 after the Euler integration, with the force by either mode.
def euler_r(w: f64) -> f64 =
  let (x, xdot, _) = loop (x, xdot, go) = ([0.0, 8.0], [0.75, 0.0], true) while go do
    let x_new = x + 0.1 * xdot
    in if x_new[1] > 0.0 then (x_new, xdot + 0.1 * accel_r(x, w), true) else (x, xdot, false)
  let x_t_f = x + (-x[1] / xdot[1]) * xdot
  in x_t_f[0] ** 2

def euler_f(w: f64) -> f64 =
  let (x, xdot, _) = loop (x, xdot, go) = ([0.0, 8.0], [0.75, 0.0], true) while go do
    let x_new = x + 0.1 * xdot
    in if x_new[1] > 0.0 then (x_new, xdot + 0.1 * accel_f(x, w), true) else (x, xdot, false)
  let x_t_f = x + (-x[1] / xdot[1]) * xdot
  in x_t_f[0] ** 2

// The derivative of the objective with respect to w, four ways.
def d_ff(w: f64) -> f64 = jvp(euler_f, w, 1.0).1
def d_fr(w: f64) -> f64 = jvp(euler_r, w, 1.0).1
def d_rf(w: f64) -> f64 = grad(euler_f, w)
def d_rr(w: f64) -> f64 = grad(euler_r, w)

// GradBench's descent: step eta * g from eta = 1e-5; double eta after 10
// improving steps, halve it after a failed one; stop when |g| or the step
// is at most 1e-5. One definition per variant (the language is
// first-order); the objective and its derivative are the variant's.
def particle_ff(w0: f64) -> f64 =
  (loop (w, fw, gw, eta, i, go) = (w0, euler_f(w0), d_ff(w0), 1e-5, 0, true) while go do
    if abs(gw) <= 1e-5 then (w, fw, gw, eta, i, false)
    else if i == 10 then (w, fw, gw, 2.0 * eta, 0, true)
    else
      let w2 = w - eta * gw
      in if abs(w - w2) <= 1e-5 then (w, fw, gw, eta, i, false)
         else
           let f2 = euler_f(w2)
           in if f2 < fw then (w2, f2, d_ff(w2), eta, i + 1, true) else (w, fw, gw, eta / 2.0, 0, true)).0

def particle_fr(w0: f64) -> f64 =
  (loop (w, fw, gw, eta, i, go) = (w0, euler_r(w0), d_fr(w0), 1e-5, 0, true) while go do
    if abs(gw) <= 1e-5 then (w, fw, gw, eta, i, false)
    else if i == 10 then (w, fw, gw, 2.0 * eta, 0, true)
    else
      let w2 = w - eta * gw
      in if abs(w - w2) <= 1e-5 then (w, fw, gw, eta, i, false)
         else
           let f2 = euler_r(w2)
           in if f2 < fw then (w2, f2, d_fr(w2), eta, i + 1, true) else (w, fw, gw, eta / 2.0, 0, true)).0

def particle_rf(w0: f64) -> f64 =
  (loop (w, fw, gw, eta, i, go) = (w0, euler_f(w0), d_rf(w0), 1e-5, 0, true) while go do
    if abs(gw) <= 1e-5 then (w, fw, gw, eta, i, false)
    else if i == 10 then (w, fw, gw, 2.0 * eta, 0, true)
    else
      let w2 = w - eta * gw
      in if abs(w - w2) <= 1e-5 then (w, fw, gw, eta, i, false)
         else
           let f2 = euler_f(w2)
           in if f2 < fw then (w2, f2, d_rf(w2), eta, i + 1, true) else (w, fw, gw, eta / 2.0, 0, true)).0

def particle_rr(w0: f64) -> f64 =
  (loop (w, fw, gw, eta, i, go) = (w0, euler_r(w0), d_rr(w0), 1e-5, 0, true) while go do
    if abs(gw) <= 1e-5 then (w, fw, gw, eta, i, false)
    else if i == 10 then (w, fw, gw, 2.0 * eta, 0, true)
    else
      let w2 = w - eta * gw
      in if abs(w - w2) <= 1e-5 then (w, fw, gw, eta, i, false)
         else
           let f2 = euler_r(w2)
           in if f2 < fw then (w2, f2, d_rr(w2), eta, i + 1, true) else (w, fw, gw, eta / 2.0, 0, true)).0
