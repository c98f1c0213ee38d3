// L2-regularised logistic regression: the mean negative log-likelihood of
// the labels y under P(y_i | x_i) = sigmoid(x_i . beta), plus lam/2 |beta|^2.
//
//   gradient  X^T (sigmoid(X beta) - y) / n + lam beta
//   Hessian   X^T diag(s (1 - s)) X / n + lam I,  s = sigmoid(X beta)

def logistic_loss(beta: [d]f64, x: [n][d]f64, y: [n]bool, lam: f64) -> f64 =
  let nll = sum(for i < n =>
    let z = dot(x[i], beta)
    // log(1 + exp(z)) - y z, without overflow for large |z|
    in max(z, 0.0) + log1p(exp(-abs(z))) - (if y[i] then z else 0.0))
  in nll / f64(n) + 0.5 * lam * dot(beta, beta)

// The predicted probabilities.
def predict(beta: [d]f64, x: [n][d]f64) -> [n]f64 =
  for i < n => 1.0 / (1.0 + exp(-dot(x[i], beta)))
