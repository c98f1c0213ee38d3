// GradBench `hello`: the smallest eval, for testing the host's protocol glue.
//
//   "square": square(x)                        x: the input number
//   "double": the gradient of square at x, either by reverse mode at the
//             boundary (grad of `square`, x active) or by `double` below,
//             which takes the same derivative inside the program.
//
//   arrayad run tools/gradbench/evals/hello.arr square --args '[3.0]' --grad

def square(x: f64) -> f64 = x * x

// d/dx x^2 = 2x, by reverse mode inside the program.
def double(x: f64) -> f64 = grad(square, x)
