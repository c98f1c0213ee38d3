// Pearlmutter & Siskind's saddle point (GradBench `saddle`): a descent
// that differentiates through another descent.
//
//   min over p1 of max over p of (p1_0^2 + p1_1^2) - (p_0^2 + p_1^2)
//
// both by GradBench's descent from (1, 1): the outer objective is the
// inner maximum, so its gradient goes through the inner descent (a while
// loop with data-dependent control flow) and through the gradients inside
// it. Four variants, as GradBench names them: the first letter is the mode
// of the outer derivative (f: jvp, r: grad), the second that of the inner
// one. As GradBench's evals/saddle asks, step 2 (the argmax at the final
// p1) uses the mode of the outer derivative. Each returns [p1, p] =
// [r1, r2]: every coordinate is 8.246324826140356e-06.
//
//   "ff", "fr", "rf", "rr": saddle_ff(start) ... saddle_rr(start), primal
//                           start: [2]f64, the input's `start`
//                           -> [2][2]f64, flattened row-major into the
//                              output's 4 numbers (x then y)
//
//   arrayad run tools/gradbench/evals/saddle.arr saddle_rr --args '[[1.0, 1.0]]'

def cost(p1: [2]f64, p: [2]f64) -> f64 = (p1[0] ** 2 + p1[1] ** 2) - (p[0] ** 2 + p[1] ** 2)

// The inner problem maximises cost(p1, .): it minimises its negation.
def neg_cost(p: [2]f64, p1: [2]f64) -> f64 = -cost(p1, p)
def inner_grad_r(p: [2]f64, p1: [2]f64) -> [2]f64 = grad(neg_cost, (p, p1)).0
def inner_grad_f(p: [2]f64, p1: [2]f64) -> [2]f64 =
  [jvp(neg_cost, (p, p1), ([1.0, 0.0], [0.0, 0.0])).1, jvp(neg_cost, (p, p1), ([0.0, 1.0], [0.0, 0.0])).1]

// GradBench's descent (step eta * g from eta = 1e-5; double eta after 10
// improving steps, halve it after a failed one; stop when |g| or the step
// is at most 1e-5) on the inner objective, with its gradient by either mode.
def argmax_r(p1: [2]f64, start: [2]f64) -> [2]f64 =
  (loop (x, fx, gx, eta, i, go) = (start, neg_cost(start, p1), inner_grad_r(start, p1), 1e-5, 0, true) while go do
    if sqrt(dot(gx, gx)) <= 1e-5 then (x, fx, gx, eta, i, false)
    else if i == 10 then (x, fx, gx, 2.0 * eta, 0, true)
    else
      let x2 = x - eta * gx
      let d = x - x2
      in if sqrt(dot(d, d)) <= 1e-5 then (x, fx, gx, eta, i, false)
         else
           let f2 = neg_cost(x2, p1)
           in if f2 < fx then (x2, f2, inner_grad_r(x2, p1), eta, i + 1, true) else (x, fx, gx, eta / 2.0, 0, true)).0
def argmax_f(p1: [2]f64, start: [2]f64) -> [2]f64 =
  (loop (x, fx, gx, eta, i, go) = (start, neg_cost(start, p1), inner_grad_f(start, p1), 1e-5, 0, true) while go do
    if sqrt(dot(gx, gx)) <= 1e-5 then (x, fx, gx, eta, i, false)
    else if i == 10 then (x, fx, gx, 2.0 * eta, 0, true)
    else
      let x2 = x - eta * gx
      let d = x - x2
      in if sqrt(dot(d, d)) <= 1e-5 then (x, fx, gx, eta, i, false)
         else
           let f2 = neg_cost(x2, p1)
           in if f2 < fx then (x2, f2, inner_grad_f(x2, p1), eta, i + 1, true) else (x, fx, gx, eta / 2.0, 0, true)).0

// The outer objective: the inner maximum (cost at the inner argmax).
def max_r(p1: [2]f64, start: [2]f64) -> f64 = cost(p1, argmax_r(p1, start))
def max_f(p1: [2]f64, start: [2]f64) -> f64 = cost(p1, argmax_f(p1, start))

// Its gradient with respect to p1, through the inner descent, four ways.
def outer_ff(p1: [2]f64, start: [2]f64) -> [2]f64 =
  [jvp(max_f, (p1, start), ([1.0, 0.0], [0.0, 0.0])).1, jvp(max_f, (p1, start), ([0.0, 1.0], [0.0, 0.0])).1]
def outer_fr(p1: [2]f64, start: [2]f64) -> [2]f64 =
  [jvp(max_r, (p1, start), ([1.0, 0.0], [0.0, 0.0])).1, jvp(max_r, (p1, start), ([0.0, 1.0], [0.0, 0.0])).1]
def outer_rf(p1: [2]f64, start: [2]f64) -> [2]f64 = grad(max_f, (p1, start)).0
def outer_rr(p1: [2]f64, start: [2]f64) -> [2]f64 = grad(max_r, (p1, start)).0

// The outer descent and the inner argmax at its result: [r1, r2].
def argmin_ff(start: [2]f64) -> [2]f64 =
  (loop (x, fx, gx, eta, i, go) = (start, max_f(start, start), outer_ff(start, start), 1e-5, 0, true) while go do
    if sqrt(dot(gx, gx)) <= 1e-5 then (x, fx, gx, eta, i, false)
    else if i == 10 then (x, fx, gx, 2.0 * eta, 0, true)
    else
      let x2 = x - eta * gx
      let d = x - x2
      in if sqrt(dot(d, d)) <= 1e-5 then (x, fx, gx, eta, i, false)
         else
           let f2 = max_f(x2, start)
           in if f2 < fx then (x2, f2, outer_ff(x2, start), eta, i + 1, true) else (x, fx, gx, eta / 2.0, 0, true)).0
def saddle_ff(start: [2]f64) -> [4]f64 =
  let r1 = argmin_ff(start)
  in concat(r1, argmax_f(r1, start))

def argmin_fr(start: [2]f64) -> [2]f64 =
  (loop (x, fx, gx, eta, i, go) = (start, max_r(start, start), outer_fr(start, start), 1e-5, 0, true) while go do
    if sqrt(dot(gx, gx)) <= 1e-5 then (x, fx, gx, eta, i, false)
    else if i == 10 then (x, fx, gx, 2.0 * eta, 0, true)
    else
      let x2 = x - eta * gx
      let d = x - x2
      in if sqrt(dot(d, d)) <= 1e-5 then (x, fx, gx, eta, i, false)
         else
           let f2 = max_r(x2, start)
           in if f2 < fx then (x2, f2, outer_fr(x2, start), eta, i + 1, true) else (x, fx, gx, eta / 2.0, 0, true)).0
def saddle_fr(start: [2]f64) -> [4]f64 =
  let r1 = argmin_fr(start)
  in concat(r1, argmax_f(r1, start))

def argmin_rf(start: [2]f64) -> [2]f64 =
  (loop (x, fx, gx, eta, i, go) = (start, max_f(start, start), outer_rf(start, start), 1e-5, 0, true) while go do
    if sqrt(dot(gx, gx)) <= 1e-5 then (x, fx, gx, eta, i, false)
    else if i == 10 then (x, fx, gx, 2.0 * eta, 0, true)
    else
      let x2 = x - eta * gx
      let d = x - x2
      in if sqrt(dot(d, d)) <= 1e-5 then (x, fx, gx, eta, i, false)
         else
           let f2 = max_f(x2, start)
           in if f2 < fx then (x2, f2, outer_rf(x2, start), eta, i + 1, true) else (x, fx, gx, eta / 2.0, 0, true)).0
def saddle_rf(start: [2]f64) -> [4]f64 =
  let r1 = argmin_rf(start)
  in concat(r1, argmax_r(r1, start))

def argmin_rr(start: [2]f64) -> [2]f64 =
  (loop (x, fx, gx, eta, i, go) = (start, max_r(start, start), outer_rr(start, start), 1e-5, 0, true) while go do
    if sqrt(dot(gx, gx)) <= 1e-5 then (x, fx, gx, eta, i, false)
    else if i == 10 then (x, fx, gx, 2.0 * eta, 0, true)
    else
      let x2 = x - eta * gx
      let d = x - x2
      in if sqrt(dot(d, d)) <= 1e-5 then (x, fx, gx, eta, i, false)
         else
           let f2 = max_r(x2, start)
           in if f2 < fx then (x2, f2, outer_rr(x2, start), eta, i + 1, true) else (x, fx, gx, eta / 2.0, 0, true)).0
def saddle_rr(start: [2]f64) -> [4]f64 =
  let r1 = argmin_rr(start)
  in concat(r1, argmax_r(r1, start))
