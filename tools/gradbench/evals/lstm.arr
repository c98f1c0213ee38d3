// GradBench `lstm` (evals/lstm/README.md, cpp/gradbench/evals/lstm.hpp): the
// loss of a character-level language model of l stacked LSTM layers of width
// b (ADBench's quirk: every weight matrix is diagonal, so the layers work
// elementwise) over a sequence of c characters of b bits.
//
// The entry points take GradBench's layout:
//   main_params:  [2l][4b]  rows 2k and 2k+1 are layer k's weights and biases
//                           of the forget gate, input gate, output gate and
//                           candidate; viewed as [l][8][b] (the same numbers
//                           row-major)
//   extra_params: [3][b]    the input weight, the output weight, the output bias
//   state:        [2l][b]   per layer the initial hidden state, then the cell
//                           state; viewed as [l][2][b]
//   sequence:     [c][b]    the characters, one bit per element
//
//   objective: lstm_objective (primal)
//   jacobian:  lstm_jacobian (primal; the gradient is taken inside it): the
//              gradient with respect to main_params and extra_params,
//              flattened row-major and concatenated, [8lb + 3b]

def sigmoid(x: [b]f64) -> [b]f64 = 1.0 / (1.0 + exp(-x))

// One layer, one step: the new hidden and cell states from the layer's
// parameters p, its hidden and cell states h and s and its input z. (The
// forget and output gates read the input z, the input gate and the
// candidate the previous hidden state h.)
def cell(p: [8][b]f64, h: [b]f64, s: [b]f64, z: [b]f64) -> ([b]f64, [b]f64) =
  let forget = sigmoid(z * p[0] + p[4])
  let ingate = sigmoid(h * p[1] + p[5])
  let outgate = sigmoid(z * p[2] + p[6])
  let change = tanh(h * p[3] + p[7])
  let s2 = s * forget + ingate * change
  in (outgate * tanh(s2), s2)

// One step through all layers: the new states and the prediction [b] for
// the next character, from the current one x. Layer k reads the hidden state
// layer k - 1 has just computed (layer 0 reads x times the input weight).
def predict(main: [l][8][b]f64, extra: [3][b]f64, state: [l][2][b]f64, x: [b]f64) -> ([l][2][b]f64, [b]f64) =
  let (st, h) = loop (st, z) = (state, x * extra[0]) for k < l do
    let (h2, s2) = cell(main[k], st[k][0], st[k][1], z)
    in (st with [k] = [h2, s2], h2)
  in (st, h * extra[1] + extra[2])

// The mean over the c - 1 predicted characters and their b bits of the
// log-probability ynorm = ypred - log(sum(exp(ypred)) + 2) of the actual bits
// of the next character, negated.
def loss(main: [l][8][b]f64, extra: [3][b]f64, state: [l][2][b]f64, sequence: [c][b]f64) -> f64 =
  let (_, total) = loop (st, total) = (state, 0.0) for t < c - 1 do
    let (st2, ypred) = predict(main, extra, st, sequence[t])
    // GradBench's (and ADBench's) normaliser: log(sum(exp(y)) + 2), unshifted.
    let lse = log(sum(exp(ypred)) + 2.0)
    in (st2, total + dot(sequence[t + 1], ypred - lse))
  in -total / (f64(c - 1) * f64(b))

def lstm_objective(main_params: [l2][b4]f64, extra_params: [3][b]f64, state: [l2][b]f64,
                   sequence: [c][b]f64) -> f64 =
  let l = l2 / 2
  in loss(reshape(main_params, (l, 8, b)), extra_params, reshape(state, (l, 2, b)), sequence)

// The gradient with respect to main_params and extra_params (LANGUAGE.md
// section 10), in GradBench's output form.
def lstm_jacobian(main_params: [l2][b4]f64, extra_params: [3][b]f64, state: [l2][b]f64,
                  sequence: [c][b]f64) -> [l2 * b4 + 3 * b]f64 =
  let (dmain, dextra, _, _) = grad(lstm_objective, (main_params, extra_params, state, sequence))
  in concat(flatten(dmain), flatten(dextra))
