// Numerically stable logsumexp and softmax.
//
//   arrayad run examples/logsumexp.arr logsumexp --args '[[1000, 1001, 1002]]' --grad
//   arrayad run examples/logsumexp.arr softmax --args '[[1, 2, 3]]' --jacobian
//
// The gradient of logsumexp is the softmax; the Jacobian of softmax is
// diag(s) - s s^T.

// log(sum(exp(v))) without overflow: shift by the maximum first.
def logsumexp(v: [n]f64) -> f64 =
  let mx = maximum(v)
  in mx + log(sum(exp(v - mx)))

// softmax(v)[i] = exp(v[i] - logsumexp(v)), also stable for large entries.
def softmax(v: [n]f64) -> [n]f64 =
  let lse = logsumexp(v)
  in exp(v - lse)
