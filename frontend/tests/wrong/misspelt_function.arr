def norm2(x: [n]f64) -> f64 = dot(x, x)
def loss(x: [n]f64) -> f64 = sqrt(nrom2(x)) + logg(2.0)
