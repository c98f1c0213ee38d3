// A first arrayad program.
//
//   arrayad run examples/quickstart.arr f --args '[[1, 2, 3], [0.5, -1, 2]]' --grad
//   arrayad build examples/quickstart.arr -o libquickstart.so
//
// In C, `f` becomes
//   int32_t f(int64_t n, const double *x, const double *w, double *out0);
// and its gradient
//   int32_t f_grad(int64_t n, const double *x, const double *w,
//                  double *value, double *d_x, double *d_w);

// A weighted sum plus a nonlinear term: df/dx = w + exp(x[0]) e_0, df/dw = x.
def f(x: [n]f64, w: [n]f64) -> f64 =
  sum(x * w) + exp(x[0])

// Mean and (population) variance of a vector, returned as a tuple.
def mean_var(x: [n]f64) -> (f64, f64) =
  let mean = sum(x) / f64(n)
  let dev = x - mean
  in (mean, dot(dev, dev) / f64(n))
