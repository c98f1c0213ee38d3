//! No input may panic the frontend: random strings, random token soups,
//! mutations of valid programs and random expressions over a typed
//! environment are compiled; the result is a program (which the frontend
//! has verified) or diagnostics that render, never a panic and never an
//! internal compiler error.

use proptest::prelude::*;

/// Compiles `src` and checks the outcome is well-formed.
fn no_panic(src: &str) -> Result<(), TestCaseError> {
    match arrayad_frontend::compile("fuzz.arr", src) {
        Ok(p) => {
            prop_assert!(arrayad_ir::verify::verify_program(&p).is_ok());
        }
        Err(d) => {
            prop_assert!(!d.is_empty());
            let r = d.render();
            prop_assert!(r.contains("fuzz.arr:"), "{}", r);
            prop_assert!(!r.contains("internal compiler error"), "{}\n--- source:\n{}", r, src);
            prop_assert_eq!(d.entries().len(), d.len());
        }
    }
    let _ = arrayad_frontend::parse("fuzz.arr", src);
    Ok(())
}

const TOKENS: &[&str] = &[
    "def",
    "let",
    "in",
    "if",
    "then",
    "else",
    "for",
    "loop",
    "do",
    "true",
    "false",
    "_",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    ".",
    "->",
    "=>",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "**",
    "/",
    "%",
    "&&",
    "||",
    "!",
    "x",
    "y",
    "f",
    "n",
    "m",
    "v",
    "f64",
    "i64",
    "bool",
    "sum",
    "dot",
    "length",
    "exp",
    "max",
    "maximum",
    "0",
    "1",
    "2",
    "1.5",
    "2e-3",
    "1_000",
    "9223372036854775808",
    "0.1",
    "//",
    "\n",
    "λ",
    "&",
    "|",
    "#",
    "t.0",
    "t.1",
    "[n]f64",
    "[2]",
];

const VALID: &str = include_str!("data/all_forms.arr");

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..80).prop_map(|ts| ts.join(" "))
}

/// A soup that starts like a definition, to get past the first tokens.
fn def_soup() -> impl Strategy<Value = String> {
    (prop::sample::select(&["def f(x: f64) -> f64 = ", "def f(v: [n]f64, x: f64) -> [n]f64 = "][..]), token_soup())
        .prop_map(|(head, body)| format!("{head}{body}"))
}

/// Random edits (delete, duplicate or replace a range) of a valid program.
fn mutated() -> impl Strategy<Value = String> {
    prop::collection::vec((0..VALID.len(), 0usize..12, 0u8..3, prop::sample::select(TOKENS)), 1..6).prop_map(|edits| {
        let mut s: Vec<char> = VALID.chars().collect();
        for (at, len, kind, tok) in edits {
            let at = at % (s.len() + 1);
            let end = (at + len).min(s.len());
            match kind {
                0 => {
                    s.drain(at..end);
                }
                1 => {
                    let copy: Vec<char> = s[at..end].to_vec();
                    s.splice(at..at, copy);
                }
                _ => {
                    s.splice(at..end, tok.chars());
                }
            }
        }
        s.into_iter().collect()
    })
}

/// Random expressions over variables of several types: mostly ill-typed,
/// sometimes well-typed; those that check must lower to verified IR.
fn expression() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(
        &[
            "x", "y", "i", "j", "b", "v", "w", "a", "iv", "t", "n", "m", "1", "2.5", "0", "true", "-3", "[1, 2]",
            "[x, y]",
        ][..],
    )
    .prop_map(str::to_string);
    leaf.prop_recursive(5, 48, 3, |inner| {
        let bin = prop::sample::select(&["+", "-", "*", "/", "%", "**", "<", "==", "&&", "||", ">=", "!="][..]);
        let un = prop::sample::select(&["exp", "log", "sum", "length", "maximum", "f64", "i64", "abs", "-", "!"][..]);
        let bin2 = prop::sample::select(&["min", "max", "pow", "atan2", "dot"][..]);
        prop_oneof![
            (inner.clone(), bin, inner.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (un, inner.clone()).prop_map(|(f, a)| match f {
                "-" | "!" => format!("({f}{a})"),
                _ => format!("{f}({a})"),
            }),
            (bin2, inner.clone(), inner.clone()).prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| format!("(if {c} then {a} else {b})")),
            inner.clone().prop_map(|a| format!("(for k < n => {a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("(for k < n, l < m => {a} + {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("(let z = {a} in {b} + z)")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}, {b}).1")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("(loop s = {a} for k < n do s + {b})")),
            inner.clone().prop_map(|a| format!("{a}[i]")),
            inner.clone().prop_map(|a| format!("{a}[i, j]")),
            inner.clone().prop_map(|a| format!("{a}[1:n]")),
            inner.clone().prop_map(|a| format!("[{a}, {a}]")),
            inner.clone().prop_map(|a| format!("g({a}, t)")),
            inner.prop_map(|a| format!("t2({a}).0")),
        ]
    })
}

fn typed_program(e: &str, result: &str) -> String {
    format!(
        "def g(p: f64, q: (f64, i64)) -> f64 = p + q.0\n\
         def t2(p: f64) -> (f64, f64) = (p, p)\n\
         def h(x: f64, y: f64, i: i64, j: i64, b: bool, v: [n]f64, w: [n]f64, a: [n][m]f64, iv: [n]i64, t: (f64, i64)) -> {result} =\n  {e}\n"
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn random_strings_do_not_panic(s in "\\PC{0,200}") {
        no_panic(&s)?;
    }

    #[test]
    fn random_bytes_do_not_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        no_panic(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn token_soups_do_not_panic(s in token_soup()) {
        no_panic(&s)?;
    }

    #[test]
    fn definition_soups_do_not_panic(s in def_soup()) {
        no_panic(&s)?;
    }

    #[test]
    fn mutated_programs_do_not_panic(s in mutated()) {
        no_panic(&s)?;
    }

    #[test]
    fn random_expressions_check_or_lower_to_verified_ir(e in expression()) {
        for result in ["f64", "i64", "bool", "[n]f64", "[n][m]f64", "(f64, i64)"] {
            no_panic(&typed_program(&e, result))?;
        }
    }

    #[test]
    fn random_well_typed_programs_compile(seed in prop::collection::vec(any::<u8>(), 64..512), k in 0usize..6) {
        let (ty, result) = [
            (Ty::F, "f64"), (Ty::I, "i64"), (Ty::B, "bool"), (Ty::V, "[n]f64"), (Ty::A, "[n][m]f64"), (Ty::T, "(f64, i64)"),
        ][k];
        let mut g = Gen { seed: &seed, pos: 0 };
        let e = g.expr(ty, 4);
        let src = typed_program(&e, result);
        match arrayad_frontend::compile("t.arr", &src) {
            Ok(p) => prop_assert!(arrayad_ir::verify::verify_program(&p).is_ok()),
            Err(d) => prop_assert!(false, "{}\n{}", d, src),
        }
    }
}

#[test]
fn some_random_expressions_do_type_check() {
    // Sanity check of the generator: well-typed programs exist among them.
    for (e, r) in [
        ("(for k < n => (exp(x) + v[k]))", "[n]f64"),
        ("(loop s = 0 for k < n do s + v[k])", "f64"),
        ("g(sum(a[i]), t) + t2(1).0", "f64"),
        ("[x, y][i] * -3", "f64"),
    ] {
        let src = typed_program(e, r);
        assert!(arrayad_frontend::compile("t.arr", &src).is_ok(), "{src}");
    }
}

#[test]
fn pathological_inputs_do_not_panic() {
    let cases = [
        String::new(),
        "def".into(),
        "def f(".into(),
        "def f() -> f64 =".into(),
        "\u{0}\u{1}\u{7f}".into(),
        "def f() -> f64 = 1 // no newline".into(),
        "def f() -> [".repeat(1000),
        format!("def f() -> f64 = {}", "[".repeat(100_000)),
        format!("def f() -> f64 = {}", "let x = ".repeat(50_000)),
        format!("def f() -> f64 = {}1", "for i < 1, ".repeat(50_000)),
        format!("def f() -> {}f64 = 1", "[1]".repeat(40)),
        format!("def f(x: f64) -> f64 = x{}", "[0]".repeat(50_000)),
        format!("def f(x: f64) -> f64 = {}x", "!".repeat(50_000)),
        format!("def f(x: f64) -> f64 = x{}", " ** x".repeat(50_000)),
        format!("def f(x: f64) -> f64 = {}", "loop s = ".repeat(50_000)),
        format!("def f() -> f64 = {}1.0{}", "(".repeat(200), ",1)".repeat(200)),
        format!("def f() -> f64 = sum({}1.0{})", "[".repeat(40), "]".repeat(40)),
        "def f(x: f64) -> f64 = 1e999 + 1e-999 + 0.0".into(),
        "\u{feff}def f(x: f64) -> f64 = x\r\n\tdef".into(),
        "def f() -> i64 = -9223372036854775808 - 1".into(),
        "def f() -> i64 = --9223372036854775808".into(),
        "def f(x: [9223372036854775807]f64) -> f64 = x[0]".into(),
        "def f(t: (f64, f64)) -> f64 = t.4294967296".into(),
    ];
    for c in &cases {
        no_panic(c).unwrap();
    }
}

/// The types of the well-typed expression generator.
#[derive(Clone, Copy)]
enum Ty {
    /// f64
    F,
    /// i64
    I,
    /// bool
    B,
    /// [n]f64
    V,
    /// [n][m]f64
    A,
    /// (f64, i64)
    T,
}

/// Generates well-typed expressions, driven by a byte string.
struct Gen<'a> {
    seed: &'a [u8],
    pos: usize,
}

impl Gen<'_> {
    fn pick(&mut self, n: usize) -> usize {
        let b = self.seed.get(self.pos).copied().unwrap_or(0) as usize;
        self.pos += 1;
        b % n
    }

    fn expr(&mut self, ty: Ty, depth: u32) -> String {
        let leaf = depth == 0;
        let d = depth.saturating_sub(1);
        let e = |g: &mut Self, t: Ty| g.expr(t, d);
        match ty {
            Ty::F => match if leaf { self.pick(3) } else { self.pick(24) } {
                0 => "x".into(),
                1 => "y".into(),
                2 => "2.5".into(),
                3 => format!("({} + {})", e(self, Ty::F), e(self, Ty::F)),
                4 => format!("({} * {} - {} / {})", e(self, Ty::F), e(self, Ty::F), e(self, Ty::F), e(self, Ty::F)),
                5 => format!("(-{})", e(self, Ty::F)),
                6 => format!("exp({})", e(self, Ty::F)),
                7 => format!("sum({})", e(self, Ty::V)),
                8 => format!("dot({}, {})", e(self, Ty::V), e(self, Ty::V)),
                9 => format!("{}[{}]", e(self, Ty::V), e(self, Ty::I)),
                10 => format!("{}[{}, {}]", e(self, Ty::A), e(self, Ty::I), e(self, Ty::I)),
                11 => format!("maximum({})", e(self, Ty::V)),
                12 => format!("f64({})", e(self, Ty::I)),
                13 => format!("(if {} then {} else {})", e(self, Ty::B), e(self, Ty::F), e(self, Ty::F)),
                14 => format!("(let z = {} in z + {})", e(self, Ty::F), e(self, Ty::F)),
                15 => format!("{}.0", e(self, Ty::T)),
                16 => format!("g({}, {})", e(self, Ty::F), e(self, Ty::T)),
                17 => format!("t2({}).1", e(self, Ty::F)),
                18 => format!("(loop s = {} for k < n do s + {})", e(self, Ty::F), e(self, Ty::F)),
                19 => format!("max({}, {})", e(self, Ty::F), e(self, Ty::F)),
                20 => format!("({} ** 2)", e(self, Ty::F)),
                21 => format!("sum({})[{}]", e(self, Ty::A), e(self, Ty::I)),
                22 => format!("(2 * {} + 1)", e(self, Ty::F)),
                _ => format!("(let (p, q) = t2({}) in p * q)", e(self, Ty::F)),
            },
            Ty::I => match if leaf { self.pick(4) } else { self.pick(14) } {
                0 => "i".into(),
                1 => "j".into(),
                2 => "n".into(),
                3 => "3".into(),
                4 => format!("({} + {} * {})", e(self, Ty::I), e(self, Ty::I), e(self, Ty::I)),
                5 => format!("({} % {})", e(self, Ty::I), e(self, Ty::I)),
                6 => format!("length({})", e(self, Ty::V)),
                7 => format!("i64({})", e(self, Ty::F)),
                8 => format!("{}.1", e(self, Ty::T)),
                9 => format!("iv[{}]", e(self, Ty::I)),
                10 => "sum(iv)".into(),
                11 => format!("(-{})", e(self, Ty::I)),
                12 => format!("(loop c = 0 for k < {} do c + k)", e(self, Ty::I)),
                _ => format!("min({}, {})", e(self, Ty::I), e(self, Ty::I)),
            },
            Ty::B => match if leaf { self.pick(2) } else { self.pick(7) } {
                0 => "b".into(),
                1 => "true".into(),
                2 => format!("({} < {})", e(self, Ty::F), e(self, Ty::F)),
                3 => format!("({} == {})", e(self, Ty::I), e(self, Ty::I)),
                4 => format!("({} && {})", e(self, Ty::B), e(self, Ty::B)),
                5 => format!("({} || {})", e(self, Ty::B), e(self, Ty::B)),
                _ => format!("(!{})", e(self, Ty::B)),
            },
            Ty::V => match if leaf { self.pick(2) } else { self.pick(12) } {
                0 => "v".into(),
                1 => "w".into(),
                2 => format!("({} + {})", e(self, Ty::V), e(self, Ty::V)),
                3 => format!("({} * {})", e(self, Ty::V), e(self, Ty::F)),
                4 => format!("({} - {})", e(self, Ty::F), e(self, Ty::V)),
                5 => format!("exp({})", e(self, Ty::V)),
                6 => format!("(for k < n => {})", e(self, Ty::F)),
                7 => format!("{}[{}]", e(self, Ty::A), e(self, Ty::I)),
                8 => format!("{}[0:n]", e(self, Ty::V)),
                9 => format!("(if {} then {} else {})", e(self, Ty::B), e(self, Ty::V), e(self, Ty::V)),
                10 => format!("min({}, {})", e(self, Ty::V), e(self, Ty::F)),
                _ => format!("sum({})", e(self, Ty::A)),
            },
            Ty::A => match if leaf { 0 } else { self.pick(7) } {
                0 => "a".into(),
                1 => format!("({} + {})", e(self, Ty::A), e(self, Ty::A)),
                2 => format!("({} * {})", e(self, Ty::A), e(self, Ty::F)),
                3 => format!("(for k < n, l < m => {})", e(self, Ty::F)),
                4 => format!("(for k < n => {})", e(self, Ty::V)),
                5 => format!("[{}, {}]", e(self, Ty::V), e(self, Ty::V)),
                _ => format!("log({})", e(self, Ty::A)),
            },
            Ty::T => match if leaf { 0 } else { self.pick(4) } {
                0 => "t".into(),
                1 => format!("({}, {})", e(self, Ty::F), e(self, Ty::I)),
                2 => format!("(if {} then {} else {})", e(self, Ty::B), e(self, Ty::T), e(self, Ty::T)),
                _ => format!("(loop (s, c) = {} for k < n do (s * 2, c + 1))", e(self, Ty::T)),
            },
        }
    }
}
