// GradBench `ode` (cmpad's an_ode): s steps of 4th-order Runge-Kutta from
// t = 0 to t = 2 on the linear ODE
//
//   y_0'(t) = x_0,   y_i'(t) = x_i y_{i-1}(t)  (i > 0),   y(0) = 0
//
// as GradBench's cpp/gradbench/evals/ode.hpp does it.
//
//   "primal":   ode(x, s)                    x: [n]f64, s: i64 (the input's `x`, `s`)
//                                            -> y(2): [n]f64, the output list
//   "gradient": the gradient of ode_last, x active (`--grad --wrt x`): the
//               gradient of the last element of y(2) with respect to x
//
//   arrayad run tools/gradbench/evals/ode.arr ode_last --args '[[1, 2, 3], 10]' --grad --wrt x

// The right-hand side z = f(x, y): z_0 = x_0, z_i = x_i y_{i-1}.
def ode_fun(x: [n]f64, y: [n]f64) -> [n]f64 =
  for i < n => if i == 0 then x[0] else x[i] * y[i - 1]

def ode(x: [n]f64, s: i64) -> [n]f64 =
  let tf = 2.0
  let h = tf / f64(s)
  let y0 = for i < n => 0.0
  in loop y = y0 for step < s do
    let k1 = ode_fun(x, y)
    let k2 = ode_fun(x, y + h * k1 / 2.0)
    let k3 = ode_fun(x, y + h * k2 / 2.0)
    let k4 = ode_fun(x, y + h * k3)
    in y + h * (k1 + 2.0 * k2 + 2.0 * k3 + k4) / 6.0

// The last element of the solution, whose gradient GradBench asks for.
def ode_last(x: [n]f64, s: i64) -> f64 =
  let y = ode(x, s)
  in y[n - 1]
