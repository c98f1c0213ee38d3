//! Comparing values: NaN-aware, with a relative tolerance.

use arrayad_ir::{ArrayData, Value};

/// A deterministic pseudo-random sequence (splitmix64), as in the tests.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// `a` and `b` are equal, both NaN, or within `rel` relative to the larger
/// magnitude (at least 1).
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

/// The f64 elements of a value (none for other types).
pub fn f64s(v: &Value) -> Vec<f64> {
    v.f64_elements().map(|s| s.to_vec()).unwrap_or_default()
}

/// `None` if the two lists of values have the same types and shapes, equal
/// i64 and bool elements and close f64 elements; otherwise what differs.
pub fn agree(a: &[Value], b: &[Value], rel: f64) -> Option<String> {
    agree_with(a, b, rel, false)
}

/// [`agree`], where `lenient` also accepts any pair of f64 elements of
/// which one is not finite.
pub fn agree_with(a: &[Value], b: &[Value], rel: f64, lenient: bool) -> Option<String> {
    let close = |p: f64, q: f64| close(p, q, rel) || (lenient && !(p.is_finite() && q.is_finite()));
    if a.len() != b.len() {
        return Some(format!("{} values vs {}", a.len(), b.len()));
    }
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        if x.ty() != y.ty() {
            return Some(format!("value {k}: type {:?} vs {:?}", x.ty(), y.ty()));
        }
        match (x, y) {
            (Value::F64(p), Value::F64(q)) => {
                if !close(*p, *q) {
                    return Some(format!("value {k}: {p:e} vs {q:e}"));
                }
            }
            (Value::Array(p), Value::Array(q)) => {
                if p.shape != q.shape {
                    return Some(format!("value {k}: shape {:?} vs {:?}", p.shape, q.shape));
                }
                match (&p.data, &q.data) {
                    (ArrayData::F64(u), ArrayData::F64(w)) => {
                        if let Some((i, (s, t))) = u.iter().zip(w).enumerate().find(|(_, (s, t))| !close(**s, **t)) {
                            return Some(format!("value {k} element {i}: {s:e} vs {t:e}"));
                        }
                    }
                    (u, w) => {
                        if u != w {
                            return Some(format!("value {k}: {u:?} vs {w:?}"));
                        }
                    }
                }
            }
            (p, q) => {
                if p != q {
                    return Some(format!("value {k}: {p:?} vs {q:?}"));
                }
            }
        }
    }
    None
}

/// The inner product of the f64 elements of two lists of values, and the
/// sum of the magnitudes of its terms (the scale of its rounding error).
pub fn dot(a: &[Value], b: &[Value]) -> (f64, f64) {
    let mut sum = 0.0;
    let mut scale = 0.0;
    for (x, y) in a.iter().zip(b) {
        for (p, q) in f64s(x).iter().zip(f64s(y)) {
            sum += p * q;
            scale += (p * q).abs();
        }
    }
    (sum, scale)
}
