//! A generator of well-typed programs driven by the fuzz bytes (each byte a
//! choice; when the bytes run out every choice is the first, which is
//! always a leaf, so generation terminates).
//!
//! It extends the generator of the differential tests
//! (`tests/common/generate.rs`) from one shape of program to typed
//! expressions over `f64`, `i64`, `bool`, `[n]f64`, `[2]f64` and
//! `[n][2]f64`: `let` (with tuple patterns), `if`, `for` comprehensions
//! (one and two indices), counted `loop`s with scalar, array and tuple
//! states, `while` loops (bounded by a counter in their condition), the
//! builtins (math functions on safe domains, `sum`, `maximum`, `minimum`,
//! `dot`, `length`, conversions, `min`/`max`/`atan2`/`**`), indexing and
//! slices, calls of generated helper definitions and the derivative
//! operators `grad`, `jvp` and `vjp` of them (helpers may use the
//! operators on earlier helpers: nested derivatives).
//!
//! Indices are in bounds by construction (loop indices, clamps), except a
//! rare raw index that exercises the run-time error path; loops have small
//! literal trip counts, so every program runs in milliseconds.

use arbitrary::Unstructured;
use arrayad_ir::{ArrayData, ArrayValue, Value};
use std::fmt::Write;

/// A generated program and the arguments of its definition `f`.
pub struct Case {
    /// The source text.
    pub source: String,
    /// The arguments of `f` (IR leaves).
    pub args: Vec<Value>,
    /// A seed for tangents and cotangents.
    pub seed: u64,
    /// Whether to compare the Jacobians too.
    pub jacobian: bool,
}

/// The fuzz bytes as a stream of choices.
struct Choices<'a> {
    u: Unstructured<'a>,
}

impl Choices<'_> {
    /// A choice in `0..n` (0 once the bytes run out).
    fn below(&mut self, n: u32) -> u32 {
        if n <= 1 {
            0
        } else {
            self.u.int_in_range(0..=n - 1).unwrap_or(0)
        }
    }
    /// True with probability `k / n` (false once the bytes run out).
    fn chance(&mut self, k: u32, n: u32) -> bool {
        n - 1 - self.below(n) < k
    }
    fn byte(&mut self) -> u8 {
        self.u.arbitrary::<u8>().unwrap_or(0)
    }
}

/// The types of generated expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    F,
    I,
    B,
    /// `[n]f64`
    A,
    /// `[2]f64`
    V,
    /// `[n][2]f64`
    M,
}

impl Ty {
    fn src(self) -> &'static str {
        match self {
            Ty::F => "f64",
            Ty::I => "i64",
            Ty::B => "bool",
            Ty::A => "[n]f64",
            Ty::V => "[2]f64",
            Ty::M => "[n][2]f64",
        }
    }
    fn needs_n(self) -> bool {
        matches!(self, Ty::A | Ty::M)
    }
}

/// The range of an `i64` index variable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// `0..n`
    N,
    /// `0..k`
    Lit(u32),
}

/// The signature of a helper definition.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sig {
    /// `(x: [n]f64, y: f64) -> f64`
    XyF,
    /// `(x: [n]f64, y: f64) -> [n]f64`
    XyA,
    /// `(y: f64) -> f64`
    YF,
    /// `(v: [2]f64) -> f64`
    VF,
}

struct Helper {
    name: String,
    sig: Sig,
}

/// The names in scope.
#[derive(Clone, Default)]
struct Scope {
    vars: Vec<(String, Ty)>,
    idx: Vec<(String, Bound)>,
    /// Whether the size variable `n` is bound.
    has_n: bool,
    /// The helpers this definition may call (the earlier ones).
    helpers: usize,
}

impl Scope {
    fn with(&self, name: &str, ty: Ty) -> Scope {
        let mut s = self.clone();
        s.vars.push((name.to_string(), ty));
        s
    }
    fn with_index(&self, name: &str, b: Bound) -> Scope {
        let mut s = self.with(name, Ty::I);
        s.idx.push((name.to_string(), b));
        s
    }
    fn of(&self, ty: Ty) -> Vec<&str> {
        self.vars.iter().filter(|(_, t)| *t == ty).map(|(n, _)| n.as_str()).collect()
    }
}

const CONSTS: [&str; 12] = ["1.0", "0.5", "-1.0", "2.0", "0.0", "-0.25", "1.5", "3.0", "0.001", "-2.5", "0.1", "7.0"];

/// Smooth unary functions of any argument (`{}` is the argument).
const UNARY: [&str; 16] = [
    "sin({})",
    "cos({})",
    "tanh({})",
    "atan({})",
    "erf({})",
    "exp(tanh({}))",
    "sinh(tanh({}))",
    "cosh(tanh({}))",
    "expm1(tanh({}))",
    "asin(0.9 * tanh({}))",
    "acos(0.9 * tanh({}))",
    "tan(tanh({}))",
    "abs({})",
    "floor({})",
    "ceil({})",
    "-({})",
];

/// Unary functions of `t` on safe domains (`t` is let-bound).
const UNARY_T: [&str; 5] =
    ["log(1.0 + {t} * {t})", "sqrt(1.0 + {t} * {t})", "log1p({t} * {t})", "lgamma(1.5 + {t} * {t})", "({t} * {t})"];

struct Gen<'a> {
    c: Choices<'a>,
    fresh: usize,
    helpers: Vec<Helper>,
}

fn paren(s: String) -> String {
    format!("({s})")
}

impl Gen<'_> {
    fn name(&mut self, p: &str) -> String {
        self.fresh += 1;
        format!("{p}{}", self.fresh)
    }

    fn pick<'s>(&mut self, xs: &[&'s str]) -> &'s str {
        xs[self.c.below(xs.len() as u32) as usize]
    }

    /// A helper of signature `sig` among those `s` may call.
    fn helper(&mut self, s: &Scope, sigs: &[Sig]) -> Option<(String, Sig)> {
        let ok: Vec<usize> = (0..s.helpers).filter(|&k| sigs.contains(&self.helpers[k].sig)).collect();
        if ok.is_empty() {
            return None;
        }
        let k = ok[self.c.below(ok.len() as u32) as usize];
        Some((self.helpers[k].name.clone(), self.helpers[k].sig))
    }

    /// An expression of type `ty`.
    fn expr(&mut self, ty: Ty, s: &Scope, d: u32) -> String {
        match ty {
            Ty::F => self.f64e(s, d),
            Ty::I => self.inte(s, d),
            Ty::B => self.boole(s, d),
            Ty::A => self.arre(s, d),
            Ty::V => self.vece(s, d),
            Ty::M => self.mate(s, d),
        }
    }

    /// A type that can be built in `s`.
    fn any_type(&mut self, s: &Scope) -> Ty {
        let all = [Ty::F, Ty::A, Ty::F, Ty::I, Ty::V, Ty::B, Ty::M];
        let t = all[self.c.below(all.len() as u32) as usize];
        if t.needs_n() && !s.has_n {
            Ty::F
        } else {
            t
        }
    }

    /// An index into an axis of extent `n`.
    fn index_n(&mut self, s: &Scope, d: u32) -> String {
        let ours: Vec<&str> = s.idx.iter().filter(|(_, b)| *b == Bound::N).map(|(n, _)| n.as_str()).collect();
        match self.c.below(16) {
            0..=7 if !ours.is_empty() => {
                let i = self.pick(&ours).to_string();
                match self.c.below(3) {
                    0 => i,
                    1 => format!("(n - 1 - {i})"),
                    _ => format!("(({i} + {}) % n)", self.c.below(3)),
                }
            }
            8 => "0".into(),
            // Rarely unchecked: a run-time error when out of bounds.
            9 if self.c.chance(1, 4) => self.inte(s, d.min(1)),
            _ => format!("min(max({}, 0), n - 1)", self.inte(s, d.min(1))),
        }
    }

    /// An index into an axis of literal extent `k`.
    fn index_lit(&mut self, k: u32, s: &Scope, d: u32) -> String {
        let ours: Vec<&str> =
            s.idx.iter().filter(|(_, b)| matches!(b, Bound::Lit(j) if *j <= k)).map(|(n, _)| n.as_str()).collect();
        match self.c.below(8) {
            0..=2 => self.c.below(k).to_string(),
            3..=5 if !ours.is_empty() => self.pick(&ours).to_string(),
            _ => format!("min(max({}, 0), {})", self.inte(s, d.min(1)), k - 1),
        }
    }

    /// A loop trip count: a literal or `n`.
    fn trip(&mut self, s: &Scope) -> (String, Bound) {
        if s.has_n && self.c.chance(1, 3) {
            ("n".into(), Bound::N)
        } else {
            let k = self.c.below(4);
            (k.to_string(), Bound::Lit(k))
        }
    }

    fn f64_leaf(&mut self, s: &Scope, d: u32) -> String {
        let fs = s.of(Ty::F);
        let arrays = s.of(Ty::A);
        let vecs = s.of(Ty::V);
        let mats = s.of(Ty::M);
        match self.c.below(8) {
            1 | 2 if !fs.is_empty() => self.pick(&fs).to_string(),
            3 if !arrays.is_empty() => {
                let a = self.pick(&arrays).to_string();
                format!("{a}[{}]", self.index_n(s, d))
            }
            4 if !vecs.is_empty() => {
                let v = self.pick(&vecs).to_string();
                format!("{v}[{}]", self.index_lit(2, s, d))
            }
            5 if !mats.is_empty() => {
                let m = self.pick(&mats).to_string();
                format!("{m}[{}, {}]", self.index_n(s, d), self.index_lit(2, s, d))
            }
            6 => format!("f64({})", self.int_leaf(s)),
            _ => self.pick(&CONSTS).to_string(),
        }
    }

    /// An `f64` expression.
    fn f64e(&mut self, s: &Scope, d: u32) -> String {
        if d == 0 || !self.c.chance(4, 5) {
            return self.f64_leaf(s, d);
        }
        let d = d - 1;
        match self.c.below(34) {
            0 => paren(format!("{} + {}", self.f64e(s, d), self.f64e(s, d))),
            1 => paren(format!("{} - {}", self.f64e(s, d), self.f64e(s, d))),
            2 | 3 => paren(format!("{} * {}", self.f64e(s, d), self.f64e(s, d))),
            4 => {
                let t = self.name("t");
                let b = self.f64e(s, d);
                let a = self.f64e(s, d);
                paren(format!("let {t} = {b} in {a} / (1.5 + {t} * {t})"))
            }
            5 | 6 => {
                let f = self.pick(&UNARY);
                f.replace("{}", &self.f64e(s, d))
            }
            7 => {
                let t = self.name("t");
                let b = self.f64e(s, d);
                let f = self.pick(&UNARY_T).replace("{t}", &t);
                paren(format!("let {t} = {b} in {f}"))
            }
            8 => {
                let f = self.pick(&["max", "min", "atan2"]);
                format!("{f}({}, {})", self.f64e(s, d), self.f64e(s, d))
            }
            9 => {
                let t = self.name("t");
                let b = self.f64e(s, d);
                let e = self.f64e(s, d);
                match self.c.below(3) {
                    0 => paren(format!("let {t} = {b} in (1.5 + {t} * {t}) ** tanh({e})")),
                    1 => paren(format!("let {t} = {b} in pow(1.5 + {t} * {t}, {e} * 0.5)")),
                    _ => paren(format!("{b} ** {}", 2 + self.c.below(2))),
                }
            }
            10 | 11 => paren(format!("if {} then {} else {}", self.boole(s, d), self.f64e(s, d), self.f64e(s, d))),
            12 if s.has_n => {
                let f = self.pick(&["sum", "maximum", "minimum", "sum"]);
                format!("{f}({})", self.arre(s, d))
            }
            13 if s.has_n => format!("dot({}, {})", self.arre(s, d), self.arre(s, d)),
            14 => {
                let j = self.name("j");
                let (k, b) = self.trip(s);
                let body = self.f64e(&s.with_index(&j, b), d);
                format!("sum(for {j} < {k} => {body})")
            }
            15 | 16 => {
                let v = self.name("v");
                let ty = self.any_type(s);
                let e = self.expr(ty, s, d);
                let body = self.f64e(&s.with(&v, ty), d);
                paren(format!("let {v} = {e} in {body}"))
            }
            17 => {
                let st = self.name("s");
                let j = self.name("j");
                let init = self.f64e(s, d);
                let k = self.c.below(4);
                let inner = s.with(&st, Ty::F).with_index(&j, Bound::Lit(k));
                let step = self.f64e(&inner, d);
                if self.c.chance(1, 2) {
                    paren(format!("loop {st} = {init} for {j} < {k} do 0.5 * {st} + tanh({step})"))
                } else {
                    paren(format!("loop {st} = {init} for {j} < {k} do {step}"))
                }
            }
            18 => {
                // A while loop, bounded by its counter.
                let (st, c, r, rc) = (self.name("s"), self.name("c"), self.name("r"), self.name("rc"));
                let init = self.f64e(s, d);
                let k = 1 + self.c.below(4);
                let inner = s.with(&st, Ty::F).with(&c, Ty::I);
                let cond = self.boole(&inner, d.min(1));
                let step = self.f64e(&inner, d);
                let after = self.f64e(&s.with(&r, Ty::F).with(&rc, Ty::I), d.min(1));
                paren(format!(
                    "let ({r}, {rc}) = loop ({st}, {c}) = ({init}, 0) while {c} < {k} && {cond} do ({step}, {c} + 1) in {r} + {after}"
                ))
            }
            19 => {
                // A loop with a tuple state (f64, [n]f64 or [2]f64).
                let (st, t, j, p, q) = (self.name("s"), self.name("t"), self.name("j"), self.name("p"), self.name("q"));
                let aty = if s.has_n && self.c.chance(1, 2) { Ty::A } else { Ty::V };
                let (i1, i2) = (self.f64e(s, d), self.expr(aty, s, d));
                let k = self.c.below(4);
                let inner = s.with(&st, Ty::F).with(&t, aty).with_index(&j, Bound::Lit(k));
                let (b1, b2) = (self.f64e(&inner, d), self.expr(aty, &inner, d));
                let after = self.f64e(&s.with(&p, Ty::F).with(&q, aty), d);
                paren(format!(
                    "let ({p}, {q}) = loop ({st}, {t}) = ({i1}, {i2}) for {j} < {k} do ({b1}, {b2}) in {after}"
                ))
            }
            20 => match self.helper(s, &[Sig::XyF, Sig::YF, Sig::VF]) {
                Some((h, Sig::XyF)) if s.has_n => format!("{h}({}, {})", self.arre(s, d), self.f64e(s, d)),
                Some((h, Sig::YF)) => format!("{h}({})", self.f64e(s, d)),
                Some((h, Sig::VF)) => format!("{h}({})", self.vece(s, d)),
                _ => self.f64_leaf(s, d),
            },
            21 | 22 => self.derivative(Ty::F, s, d).unwrap_or_else(|| self.f64_leaf(s, d)),
            23 => format!("sum({})", self.vece(s, d)),
            24 if s.has_n => {
                // A slice: [1:n] (an error when n = 0) or [0:i].
                let a = self.arre(s, d);
                match self.c.below(3) {
                    0 => format!("sum({a}[1:n])"),
                    1 => format!("sum({a}[0:{}])", self.index_n(s, d)),
                    _ => format!("sum({a}[{}:])", self.index_n(s, d)),
                }
            }
            25 if s.has_n => format!("{}[{}]", paren(self.arre(s, d)), self.index_n(s, d)),
            26 if s.has_n => format!("f64(length({}))", self.arre(s, d)),
            27 if s.has_n => {
                let m = self.mate(s, d);
                format!("{}[{}, {}]", paren(m), self.index_n(s, d), self.index_lit(2, s, d))
            }
            28 => format!("f64({})", self.inte(s, d)),
            29 => format!("{}[{}]", paren(self.vece(s, d)), self.index_lit(2, s, d)),
            30 => {
                // Sharing: one value used twice.
                let v = self.name("v");
                let e = self.f64e(s, d);
                paren(format!("let {v} = {e} in {v} * {v} - {v}"))
            }
            _ => self.f64_leaf(s, d),
        }
    }

    /// A derivative operator applied to a helper, of result type `want`
    /// (F, A or V), if some helper gives one.
    fn derivative(&mut self, want: Ty, s: &Scope, d: u32) -> Option<String> {
        let d = d.min(2);
        let (h, sig) = match want {
            Ty::F => self.helper(s, &[Sig::XyF, Sig::XyA, Sig::YF, Sig::VF])?,
            Ty::A => self.helper(s, &[Sig::XyF, Sig::XyA])?,
            Ty::V => self.helper(s, &[Sig::VF])?,
            _ => return None,
        };
        if matches!(sig, Sig::XyF | Sig::XyA) && !s.has_n {
            return None;
        }
        let op = self.c.below(3);
        Some(match (sig, op, want) {
            // grad(h, (x, y)) : ([n]f64, f64)
            (Sig::XyF, 0, Ty::F) => format!("grad({h}, ({}, {})).1", self.arre(s, d), self.f64e(s, d)),
            (Sig::XyF, 0, Ty::A) => format!("grad({h}, ({}, {})).0", self.arre(s, d), self.f64e(s, d)),
            // jvp(h, (x, y), (tx, ty)) : (f64, f64)
            (Sig::XyF, 1, Ty::F) => format!(
                "jvp({h}, ({}, {}), ({}, {})).{}",
                self.arre(s, d),
                self.f64e(s, d),
                self.arre(s, d),
                self.f64e(s, d),
                self.c.below(2)
            ),
            // vjp(h, (x, y), c) : (f64, ([n]f64, f64))
            (Sig::XyF, _, _) => {
                let (v, gx, gy) = (self.name("v"), self.name("g"), self.name("g"));
                let call = format!("vjp({h}, ({}, {}), {})", self.arre(s, d), self.f64e(s, d), self.f64e(s, d));
                let inner = s.with(&v, Ty::F).with(&gx, Ty::A).with(&gy, Ty::F);
                let body = self.expr(want, &inner, d);
                paren(format!("let ({v}, ({gx}, {gy})) = {call} in {body}"))
            }
            // jvp(h, (x, y), (tx, ty)) : ([n]f64, [n]f64)
            (Sig::XyA, 0 | 1, _) => {
                let call = format!(
                    "jvp({h}, ({}, {}), ({}, {})).{}",
                    self.arre(s, d),
                    self.f64e(s, d),
                    self.arre(s, d),
                    self.f64e(s, d),
                    self.c.below(2)
                );
                if want == Ty::A {
                    call
                } else {
                    format!("sum({call})")
                }
            }
            // vjp(h, (x, y), c) : ([n]f64, ([n]f64, f64))
            (Sig::XyA, _, _) => {
                let (v, gx, gy) = (self.name("v"), self.name("g"), self.name("g"));
                let call = format!("vjp({h}, ({}, {}), {})", self.arre(s, d), self.f64e(s, d), self.arre(s, d));
                let inner = s.with(&v, Ty::A).with(&gx, Ty::A).with(&gy, Ty::F);
                let body = self.expr(want, &inner, d);
                paren(format!("let ({v}, ({gx}, {gy})) = {call} in {body}"))
            }
            // grad(h, y) : f64; jvp(h, y, t) : (f64, f64); vjp(h, y, c) : (f64, f64)
            (Sig::YF, 0, _) => format!("grad({h}, {})", self.f64e(s, d)),
            (Sig::YF, 1, _) => {
                format!("jvp({h}, {}, {}).{}", self.f64e(s, d), self.f64e(s, d), self.c.below(2))
            }
            (Sig::YF, _, _) => {
                format!("vjp({h}, {}, {}).{}", self.f64e(s, d), self.f64e(s, d), self.c.below(2))
            }
            // grad(h, v) : [2]f64; jvp : (f64, f64); vjp(h, v, c) : (f64, [2]f64)
            (Sig::VF, 0, _) => {
                let g = format!("grad({h}, {})", self.vece(s, d));
                if want == Ty::V {
                    g
                } else {
                    format!("{g}[{}]", self.index_lit(2, s, d))
                }
            }
            (Sig::VF, 1, Ty::F) => {
                format!("jvp({h}, {}, {}).{}", self.vece(s, d), self.vece(s, d), self.c.below(2))
            }
            (Sig::VF, _, _) => {
                let call = format!("vjp({h}, {}, {})", self.vece(s, d), self.f64e(s, d));
                if want == Ty::V {
                    format!("{call}.1")
                } else {
                    format!("{call}.0")
                }
            }
        })
    }

    fn int_leaf(&mut self, s: &Scope) -> String {
        let is = s.of(Ty::I);
        match self.c.below(6) {
            1 | 2 if !is.is_empty() => self.pick(&is).to_string(),
            3 if s.has_n => "n".into(),
            _ => self.c.below(4).to_string(),
        }
    }

    /// An `i64` expression.
    fn inte(&mut self, s: &Scope, d: u32) -> String {
        if d == 0 || !self.c.chance(2, 3) {
            return self.int_leaf(s);
        }
        let d = d - 1;
        match self.c.below(14) {
            0 => paren(format!("{} + {}", self.inte(s, d), self.inte(s, d))),
            1 => paren(format!("{} - {}", self.inte(s, d), self.inte(s, d))),
            2 => paren(format!("{} * {}", self.inte(s, d), self.inte(s, d))),
            3 => paren(format!("{} / {}", self.inte(s, d), 1 + self.c.below(3))),
            4 => paren(format!("{} % {}", self.inte(s, d), 1 + self.c.below(3))),
            // Rarely a division by a value that may be 0.
            5 if self.c.chance(1, 4) => paren(format!("{} / {}", self.inte(s, d), self.inte(s, d))),
            6 => {
                let f = self.pick(&["min", "max"]);
                format!("{f}({}, {})", self.inte(s, d), self.inte(s, d))
            }
            7 => format!("i64({})", self.f64e(s, d)),
            8 => paren(format!("if {} then {} else {}", self.boole(s, d), self.inte(s, d), self.inte(s, d))),
            9 => {
                let j = self.name("j");
                let (k, b) = self.trip(s);
                let body = self.inte(&s.with_index(&j, b), d);
                format!("sum(for {j} < {k} => {body})")
            }
            10 if s.has_n => format!("length({})", self.arre(s, d)),
            11 => {
                let (st, j) = (self.name("s"), self.name("j"));
                let init = self.inte(s, d);
                let k = self.c.below(4);
                let step = self.inte(&s.with(&st, Ty::I).with_index(&j, Bound::Lit(k)), d);
                paren(format!("loop {st} = {init} for {j} < {k} do {step}"))
            }
            _ => self.int_leaf(s),
        }
    }

    /// A `bool` expression.
    fn boole(&mut self, s: &Scope, d: u32) -> String {
        let bs = s.of(Ty::B);
        if d == 0 || !self.c.chance(3, 4) {
            return match self.c.below(4) {
                1 if !bs.is_empty() => self.pick(&bs).to_string(),
                2 => "true".into(),
                3 => "false".into(),
                _ => format!("{} < {}", self.f64_leaf(s, 0), self.f64_leaf(s, 0)),
            };
        }
        let d = d - 1;
        match self.c.below(8) {
            0 | 1 => {
                let op = self.pick(&["<", "<=", ">", ">=", "==", "!="]);
                paren(format!("{} {op} {}", self.f64e(s, d), self.f64e(s, d)))
            }
            2 => {
                let op = self.pick(&["<", "==", ">=", "!="]);
                paren(format!("{} {op} {}", self.inte(s, d), self.inte(s, d)))
            }
            3 => paren(format!("{} && {}", self.boole(s, d), self.boole(s, d))),
            4 => paren(format!("{} || {}", self.boole(s, d), self.boole(s, d))),
            5 => format!("!{}", paren(self.boole(s, d))),
            6 => paren(format!("if {} then {} else {}", self.boole(s, d), self.boole(s, d), self.boole(s, d))),
            _ => self.boole(s, 0),
        }
    }

    /// A `[n]f64` expression (needs `n`).
    fn arre(&mut self, s: &Scope, d: u32) -> String {
        let arrays = s.of(Ty::A);
        if d == 0 || !self.c.chance(4, 5) {
            if !arrays.is_empty() && self.c.below(3) > 0 {
                return self.pick(&arrays).to_string();
            }
            let j = self.name("j");
            let body = self.f64_leaf(&s.with_index(&j, Bound::N), 0);
            return paren(format!("for {j} < n => {body}"));
        }
        let d = d - 1;
        match self.c.below(22) {
            0 => paren(format!("{} + {}", self.arre(s, d), self.arre(s, d))),
            1 => paren(format!("{} - {}", self.arre(s, d), self.arre(s, d))),
            2 => paren(format!("{} * {}", self.arre(s, d), self.arre(s, d))),
            3 => paren(format!("{} * {}", self.f64e(s, d), self.arre(s, d))),
            4 => paren(format!("{} - {}", self.arre(s, d), self.f64e(s, d))),
            5 => {
                let t = self.name("t");
                let b = self.arre(s, d);
                let a = self.arre(s, d);
                paren(format!("let {t} = {b} in {a} / (1.5 + {t} * {t})"))
            }
            6 | 7 => {
                let f = self.pick(&UNARY);
                f.replace("{}", &self.arre(s, d))
            }
            8 => {
                let t = self.name("t");
                let b = self.arre(s, d);
                let f = self.pick(&UNARY_T).replace("{t}", &t);
                paren(format!("let {t} = {b} in {f}"))
            }
            9 => {
                let f = self.pick(&["max", "min", "atan2"]);
                if self.c.chance(1, 2) {
                    format!("{f}({}, {})", self.arre(s, d), self.f64e(s, d))
                } else {
                    format!("{f}({}, {})", self.arre(s, d), self.arre(s, d))
                }
            }
            10 => paren(format!("{} ** 2", self.arre(s, d))),
            11 => paren(format!("if {} then {} else {}", self.boole(s, d), self.arre(s, d), self.arre(s, d))),
            12 | 13 => {
                let j = self.name("j");
                let body = self.f64e(&s.with_index(&j, Bound::N), d);
                paren(format!("for {j} < n => {body}"))
            }
            14 => {
                let (st, j) = (self.name("s"), self.name("j"));
                let init = self.arre(s, d);
                let k = self.c.below(4);
                let step = self.arre(&s.with(&st, Ty::A).with_index(&j, Bound::Lit(k)), d);
                if self.c.chance(1, 2) {
                    paren(format!("loop {st} = {init} for {j} < {k} do 0.5 * {st} + sin({step})"))
                } else {
                    paren(format!("loop {st} = {init} for {j} < {k} do {step}"))
                }
            }
            15 => {
                let v = self.name("v");
                let ty = self.any_type(s);
                let e = self.expr(ty, s, d);
                let body = self.arre(&s.with(&v, ty), d);
                paren(format!("let {v} = {e} in {body}"))
            }
            16 => match self.helper(s, &[Sig::XyA]) {
                Some((h, _)) => format!("{h}({}, {})", self.arre(s, d), self.f64e(s, d)),
                None => self.arre(s, 0),
            },
            17 => self.derivative(Ty::A, s, d).unwrap_or_else(|| self.arre(s, 0)),
            18 => {
                let j = self.name("j");
                let k = self.c.below(3);
                let body = self.arre(&s.with_index(&j, Bound::Lit(k)), d);
                format!("sum(for {j} < {k} => {body})")
            }
            19 => {
                let (j, m) = (self.name("j"), self.mate(s, d));
                let c = self.index_lit(2, s, d);
                let mv = self.name("m");
                paren(format!("let {mv} = {m} in for {j} < n => {mv}[{j}, {c}]"))
            }
            20 => {
                // A while loop over an array state, bounded by its counter.
                let (st, c, r, rc) = (self.name("s"), self.name("c"), self.name("r"), self.name("rc"));
                let init = self.arre(s, d);
                let k = 1 + self.c.below(3);
                let inner = s.with(&st, Ty::A).with(&c, Ty::I);
                let cond = self.boole(&inner, d.min(1));
                let step = self.arre(&inner, d);
                paren(format!(
                    "let ({r}, {rc}) = loop ({st}, {c}) = ({init}, 0) while {c} < {k} && {cond} do ({step}, {c} + 1) in {r}"
                ))
            }
            _ => paren(format!("-{}", self.arre(s, d))),
        }
    }

    /// A `[2]f64` expression.
    fn vece(&mut self, s: &Scope, d: u32) -> String {
        let vecs = s.of(Ty::V);
        if d == 0 || !self.c.chance(3, 4) {
            if !vecs.is_empty() && self.c.below(3) > 0 {
                return self.pick(&vecs).to_string();
            }
            return format!("[{}, {}]", self.f64_leaf(s, 0), self.f64_leaf(s, 0));
        }
        let d = d - 1;
        match self.c.below(12) {
            0 => format!("[{}, {}]", self.f64e(s, d), self.f64e(s, d)),
            1 => paren(format!("{} + {}", self.vece(s, d), self.vece(s, d))),
            2 => paren(format!("{} * {}", self.vece(s, d), self.f64e(s, d))),
            3 => {
                let f = self.pick(&UNARY);
                f.replace("{}", &self.vece(s, d))
            }
            4 if s.has_n => format!("sum({})", self.mate(s, d)),
            5 if s.has_n => format!("{}[{}]", paren(self.mate(s, d)), self.index_n(s, d)),
            6 => {
                let c = self.name("c");
                let body = self.f64e(&s.with_index(&c, Bound::Lit(2)), d);
                paren(format!("for {c} < 2 => {body}"))
            }
            7 => self.derivative(Ty::V, s, d).unwrap_or_else(|| self.vece(s, 0)),
            8 => paren(format!("if {} then {} else {}", self.boole(s, d), self.vece(s, d), self.vece(s, d))),
            9 => {
                let (st, j) = (self.name("s"), self.name("j"));
                let init = self.vece(s, d);
                let k = self.c.below(4);
                let step = self.vece(&s.with(&st, Ty::V).with_index(&j, Bound::Lit(k)), d);
                paren(format!("loop {st} = {init} for {j} < {k} do {step}"))
            }
            10 if s.has_n => {
                let a = self.arre(s, d);
                let i = self.index_n(s, d);
                let t = self.name("t");
                paren(format!("let {t} = {a} in [{t}[{i}], {t}[0]]"))
            }
            _ => self.vece(s, 0),
        }
    }

    /// A `[n][2]f64` expression (needs `n`).
    fn mate(&mut self, s: &Scope, d: u32) -> String {
        let mats = s.of(Ty::M);
        if d == 0 || !self.c.chance(3, 4) {
            if !mats.is_empty() && self.c.below(3) > 0 {
                return self.pick(&mats).to_string();
            }
            let (j, c) = (self.name("j"), self.name("c"));
            let body = self.f64_leaf(&s.with_index(&j, Bound::N).with_index(&c, Bound::Lit(2)), 0);
            return paren(format!("for {j} < n, {c} < 2 => {body}"));
        }
        let d = d - 1;
        match self.c.below(7) {
            0 => {
                let j = self.name("j");
                let body = self.vece(&s.with_index(&j, Bound::N), d);
                paren(format!("for {j} < n => {body}"))
            }
            1 => {
                let (j, c) = (self.name("j"), self.name("c"));
                let body = self.f64e(&s.with_index(&j, Bound::N).with_index(&c, Bound::Lit(2)), d);
                paren(format!("for {j} < n, {c} < 2 => {body}"))
            }
            2 => paren(format!("{} + {}", self.mate(s, d), self.mate(s, d))),
            3 => paren(format!("{} * {}", self.f64e(s, d), self.mate(s, d))),
            4 => {
                let f = self.pick(&UNARY);
                f.replace("{}", &self.mate(s, d))
            }
            5 => paren(format!("if {} then {} else {}", self.boole(s, d), self.mate(s, d), self.mate(s, d))),
            _ => self.mate(s, 0),
        }
    }

    /// A definition body: a chain of `let`s ending in `in RESULT`.
    fn body(&mut self, result: &[Ty], s: &Scope, depth: u32) -> String {
        let mut s = s.clone();
        let mut out = String::new();
        for _ in 0..self.c.below(4) {
            let v = self.name("a");
            let ty = self.any_type(&s);
            let e = self.expr(ty, &s, depth);
            let _ = writeln!(out, "  let {v} = {e}");
            s = s.with(&v, ty);
        }
        let parts: Vec<String> = result.iter().map(|t| self.expr(*t, &s, depth)).collect();
        let r = if parts.len() == 1 { parts[0].clone() } else { format!("({})", parts.join(", ")) };
        if out.is_empty() {
            format!("  {r}\n")
        } else {
            format!("{out}  in {r}\n")
        }
    }
}

/// An f64 argument value from a byte: mostly a grid in [-4, 4), rarely a
/// special value.
fn value_of(b: u8) -> f64 {
    match b {
        250 => 0.0,
        251 => -0.0,
        252 => 1e300,
        253 => f64::NAN,
        254 => f64::INFINITY,
        255 => 1e-310,
        _ => (b as f64 - 125.0) / 31.0,
    }
}

/// The program and arguments for the fuzz input `data`.
pub fn case(data: &[u8]) -> Case {
    let mut g = Gen { c: Choices { u: Unstructured::new(data) }, fresh: 0, helpers: Vec::new() };
    // The arguments first, so that the program's bytes do not shift them.
    let n = if g.c.chance(1, 32) { 0 } else { 1 + g.c.below(4) as usize };
    let x: Vec<f64> = (0..n).map(|_| value_of(g.c.byte())).collect();
    let y = value_of(g.c.byte());
    let k = [0i64, 1, 2, 3, -1, 5, i64::MAX, i64::MIN][g.c.below(8) as usize];
    let b = g.c.chance(1, 2);
    let v: Vec<f64> = (0..2).map(|_| value_of(g.c.byte())).collect();
    let m: Vec<f64> = (0..2 * n).map(|_| value_of(g.c.byte())).collect();
    let seed = u64::from(g.c.byte()) | u64::from(g.c.byte()) << 8;
    let jacobian = g.c.chance(1, 4);
    let depth = 2 + g.c.below(3);

    let mut source = String::new();
    for h in 0..g.c.below(4) {
        let sig = [Sig::XyF, Sig::XyA, Sig::YF, Sig::VF][g.c.below(4) as usize];
        let name = format!("h{h}");
        let mut s = Scope { helpers: h as usize, ..Scope::default() };
        let (params, result) = match sig {
            Sig::XyF | Sig::XyA => {
                s.has_n = true;
                s = s.with("x", Ty::A).with("y", Ty::F);
                ("x: [n]f64, y: f64", if sig == Sig::XyF { Ty::F } else { Ty::A })
            }
            Sig::YF => {
                s = s.with("y", Ty::F);
                ("y: f64", Ty::F)
            }
            Sig::VF => {
                s = s.with("v", Ty::V);
                ("v: [2]f64", Ty::F)
            }
        };
        let body = g.body(&[result], &s, depth.min(3));
        let _ = write!(source, "def {name}({params}) -> {} =\n{body}", result.src());
        g.helpers.push(Helper { name, sig });
    }
    let s = Scope { has_n: true, helpers: g.helpers.len(), ..Scope::default() }
        .with("x", Ty::A)
        .with("y", Ty::F)
        .with("k", Ty::I)
        .with("b", Ty::B)
        .with("v", Ty::V)
        .with("m", Ty::M);
    let count = 1 + g.c.below(3) as usize;
    let results: Vec<Ty> =
        (0..count).map(|_| [Ty::F, Ty::A, Ty::V, Ty::I, Ty::M, Ty::B][g.c.below(6) as usize]).collect();
    let rsrc: Vec<&str> = results.iter().map(|t| t.src()).collect();
    let rty = if count == 1 { rsrc[0].to_string() } else { format!("({})", rsrc.join(", ")) };
    let body = g.body(&results, &s, depth);
    let _ = write!(source, "def f(x: [n]f64, y: f64, k: i64, b: bool, v: [2]f64, m: [n][2]f64) -> {rty} =\n{body}");

    Case { source, args: arguments(n, x, y, k, b, v, m), seed, jacobian }
}

/// The argument leaves of `f` (the signature of every generated program).
fn arguments(n: usize, x: Vec<f64>, y: f64, k: i64, b: bool, v: Vec<f64>, m: Vec<f64>) -> Vec<Value> {
    vec![
        Value::Array(ArrayValue { shape: vec![n], data: ArrayData::F64(x) }),
        Value::F64(y),
        Value::I64(k),
        Value::Bool(b),
        Value::Array(ArrayValue { shape: vec![2], data: ArrayData::F64(v) }),
        Value::Array(ArrayValue { shape: vec![n, 2], data: ArrayData::F64(m) }),
    ]
}

/// Another argument set for the same program, drawn as [`case`] draws the
/// first one (sizes included) from `rng`'s bytes.
pub fn more_arguments(rng: &mut crate::compare::Rng) -> Vec<Value> {
    let mut byte = || rng.next_u64() as u8;
    let n = if byte() % 32 == 0 { 0 } else { 1 + (byte() % 4) as usize };
    let x: Vec<f64> = (0..n).map(|_| value_of(byte())).collect();
    let y = value_of(byte());
    let k = [0i64, 1, 2, 3, -1, 5, i64::MAX, i64::MIN][(byte() % 8) as usize];
    let b = byte() % 2 == 0;
    let v: Vec<f64> = (0..2).map(|_| value_of(byte())).collect();
    let m: Vec<f64> = (0..2 * n).map(|_| value_of(byte())).collect();
    arguments(n, x, y, k, b, v, m)
}
