// ADBench LSTM (shared/data/adbench/README.md, "LSTM"): the loss of a
// character-level language model of l stacked, elementwise LSTM layers of
// width b over a sequence of c characters.
//
//   main:  [l][8][b] per layer the weights W_f, W_i, W_o, W_c, then the
//                    biases B_f, B_i, B_o, B_c (forget, input, output gate,
//                    candidate)
//   extra: [3][b]    the input weight, the output weight, the output bias
//   state: [l][2][b] per layer the initial hidden state, then the cell state
//   seq:   [c][b]    the sequence
//
// ADBench differentiates the loss with respect to main and extra:
//   arrayad build examples/lstm.arr -o liblstm.so --export lstm --wrt main,extra

def sigmoid(x: [b]f64) -> [b]f64 = 1.0 / (1.0 + exp(-x))

// One layer, one step: the new hidden and cell states. (ADBench's quirk:
// the forget and output gates read the layer input z, the input gate and
// the candidate the previous hidden state h.)
def cell(p: [8][b]f64, h: [b]f64, s: [b]f64, z: [b]f64) -> ([b]f64, [b]f64) =
  let f = sigmoid(z * p[0] + p[4])
  let i = sigmoid(h * p[1] + p[5])
  let o = sigmoid(z * p[2] + p[6])
  let g = tanh(h * p[3] + p[7])
  let s2 = s * f + i * g
  in (o * tanh(s2), s2)

// All layers, one step: the new state and the last layer's output.
def step(main: [l][8][b]f64, state: [l][2][b]f64, x: [b]f64) -> ([l][2][b]f64, [b]f64) =
  loop (st, z) = (state, x) for k < l do
    let (h2, s2) = cell(main[k], st[k][0], st[k][1], z)
    in (for r < l => if r == k then [h2, s2] else st[r], h2)

def lstm(main: [l][8][b]f64, extra: [3][b]f64, state: [l][2][b]f64, seq: [c][b]f64) -> f64 =
  let (st, total) = loop (st, total) = (state, 0.0) for t < c - 1 do
    let (st2, h) = step(main, st, seq[t] * extra[0])
    let y = h * extra[1] + extra[2]
    // ADBench's normaliser: log(sum(exp(y)) + 2), no shift by the maximum.
    let lse = log(sum(exp(y)) + 2.0)
    in (st2, total + dot(seq[t + 1], y - lse))
  in -total / (f64(c - 1) * f64(b))
