// The calls of bench/calls.sh: what a call costs beside its arithmetic.

// A map with a large result (destination passing: computed in the
// caller's buffer).
def scale(x: [p]f64) -> [p]f64 = for i < p => x[i] * 2.0 + 1.0

// A reduction: eight partial sums in a fixed order (vectorised), against a
// sequential C loop.
def dot2(x: [p]f64, z: [p]f64) -> f64 = sum(x * z)

// A gradient as large as its input.
def norm2(x: [p]f64) -> f64 = sum(x * x)
