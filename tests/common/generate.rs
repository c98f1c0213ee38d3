//! A generator of random well-typed programs (source text) over an array
//! `x: [n]f64` and a scalar `y: f64`, mixing every expression form: lets
//! with sharing, `if`, `for`, `loop`, `sum`, `dot`, triangular nests
//! (`for j < i`, `for j < i + 1` inside a loop over `i`), indexing (in
//! bounds by construction) and smooth math functions with safe domains.

use super::{Case, Rng};

struct Gen {
    rng: Rng,
    fresh: usize,
}

impl Gen {
    fn name(&mut self, p: &str) -> String {
        self.fresh += 1;
        format!("{p}{}", self.fresh)
    }

    /// A scalar f64 expression; `scalars` are f64 names in scope, `ints`
    /// are i64 index names in scope (each in 0..n).
    fn scalar(&mut self, depth: u32, scalars: &[String], ints: &[String]) -> String {
        let leaf = depth == 0 || self.rng.below(4) == 0;
        if leaf {
            return match self.rng.below(4) {
                0 => format!("{:.3}", self.rng.unit() * 2.0),
                1 if !ints.is_empty() => {
                    let i = &ints[self.rng.below(ints.len() as u64) as usize];
                    match self.rng.below(3) {
                        0 => format!("x[{i}]"),
                        c => format!("x[({i} + {c}) % n]"),
                    }
                }
                _ => scalars[self.rng.below(scalars.len() as u64) as usize].clone(),
            };
        }
        let d = depth - 1;
        match self.rng.below(18) {
            0 => format!("({} + {})", self.scalar(d, scalars, ints), self.scalar(d, scalars, ints)),
            1 => format!("({} - {})", self.scalar(d, scalars, ints), self.scalar(d, scalars, ints)),
            2 | 3 => format!("({} * {})", self.scalar(d, scalars, ints), self.scalar(d, scalars, ints)),
            4 => {
                let b = self.scalar(d, scalars, ints);
                format!("({} / (1.5 + {b} * {b}))", self.scalar(d, scalars, ints))
            }
            5 => {
                let f = ["sin", "cos", "tanh", "atan"][self.rng.below(4) as usize];
                format!("{f}({})", self.scalar(d, scalars, ints))
            }
            6 => format!("exp(tanh({}))", self.scalar(d, scalars, ints)),
            7 => {
                let a = self.scalar(d, scalars, ints);
                let f = ["log", "sqrt"][self.rng.below(2) as usize];
                format!("{f}(1 + {a} * {a})")
            }
            8 => {
                let f = ["max", "min"][self.rng.below(2) as usize];
                format!("{f}({}, {})", self.scalar(d, scalars, ints), self.scalar(d, scalars, ints))
            }
            9 => format!(
                "(if {} > {} then {} else {})",
                self.scalar(d, scalars, ints),
                self.scalar(d, scalars, ints),
                self.scalar(d, scalars, ints),
                self.scalar(d, scalars, ints)
            ),
            10 => {
                let j = self.name("j");
                let mut ints2 = ints.to_vec();
                ints2.push(j.clone());
                format!("sum(for {j} < n => {})", self.scalar(d, scalars, &ints2))
            }
            11 => {
                let v = self.name("v");
                let e = self.scalar(d, scalars, ints);
                let mut sc = scalars.to_vec();
                sc.push(v.clone());
                format!("(let {v} = {e} in {v} * {})", self.scalar(d, &sc, ints))
            }
            12 => {
                let s = self.name("s");
                let j = self.name("j");
                let init = self.scalar(d, scalars, ints);
                let mut sc = scalars.to_vec();
                sc.push(s.clone());
                let mut ints2 = ints.to_vec();
                ints2.push(j.clone());
                let step = self.scalar(d, &sc, &ints2);
                format!("(loop {s} = {init} for {j} < 3 do 0.5 * {s} + tanh({step}))")
            }
            13 => {
                let j = self.name("j");
                let mut ints2 = ints.to_vec();
                ints2.push(j.clone());
                format!("dot(x, for {j} < n => {})", self.scalar(d, scalars, &ints2))
            }
            14 => {
                let j = self.name("j");
                let mut ints2 = ints.to_vec();
                ints2.push(j.clone());
                format!("maximum(for {j} < n => {})", self.scalar(d, scalars, &ints2))
            }
            // Triangular nests: an index below an enclosing one (or up to
            // it), whose bounds checks code generation drops.
            15 | 16 if !ints.is_empty() => {
                let i = ints[self.rng.below(ints.len() as u64) as usize].clone();
                let j = self.name("j");
                let mut ints2 = ints.to_vec();
                ints2.push(j.clone());
                let body = self.scalar(d, scalars, &ints2);
                match self.rng.below(2) {
                    0 => format!("sum(for {j} < {i} => {body})"),
                    _ => format!("maximum(for {j} < {i} + 1 => {body})"),
                }
            }
            _ => format!("{} ** 2", self.scalar(d, scalars, ints)),
        }
    }
}

/// The generated program and case for `seed`.
pub fn program(seed: u64) -> Case {
    let mut g = Gen { rng: Rng(seed.wrapping_mul(0x2545F4914F6CDD1D) ^ 0xabcdef), fresh: 0 };
    let scalars = vec!["y".to_string()];
    let body = g.scalar(4, &scalars, &[]);
    let k = g.name("k");
    let arr = g.scalar(3, &scalars, std::slice::from_ref(&k));
    let source = format!(
        "def f(x: [n]f64, y: f64) -> (f64, [n]f64) =\n  let a = {body}\n  let b = for {k} < n => {arr}\n  in (a + sum(b), b)\n"
    );
    let x: Vec<f64> = (0..4).map(|_| g.rng.unit() * 1.5).collect();
    let y = g.rng.unit();
    Case {
        file: format!("generated{seed}.arr"),
        source,
        func: "f".into(),
        args: serde_json::json!([x, y]),
        finite_differences: true,
    }
}
