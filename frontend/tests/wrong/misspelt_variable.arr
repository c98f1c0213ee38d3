def loss(weights: [n]f64, inputs: [n]f64) -> f64 =
  sum(wieghts * inputs)
