//! Compile errors: each case produces a diagnostic at the right line and
//! column whose message names the problem, rendered with codespan.

use arrayad_frontend::{compile, parse};

/// The diagnostics of a source that must fail to compile.
fn errors(src: &str) -> Vec<(String, u32, u32)> {
    match compile("bad.arr", src) {
        Ok(p) => panic!("compiled but should not:\n{src}\n{}", arrayad_ir::printer::print_program(&p)),
        Err(d) => {
            assert_eq!(d.len(), d.entries().len());
            assert!(!d.is_empty());
            d.entries()
        }
    }
}

/// Asserts exactly one error, at `line:col`, whose message contains every
/// needle.
#[track_caller]
fn one_error(src: &str, line: u32, col: u32, needles: &[&str]) {
    let es = errors(src);
    assert_eq!(es.len(), 1, "expected one error, got {es:#?}\nsource:\n{src}");
    let (msg, l, c) = &es[0];
    assert_eq!((*l, *c), (line, col), "wrong position for `{msg}`");
    for n in needles {
        assert!(msg.contains(n), "message `{msg}` lacks `{n}`");
    }
}

#[test]
fn rendering_has_file_line_col_source_line_and_carets() {
    let src = "def f(x: f64) -> f64 =\n  x + true\n";
    let d = compile("dir/file.arr", src).unwrap_err();
    let r = d.render();
    assert!(r.starts_with("error[E0208]: "), "{r}");
    assert!(r.contains("┌─ dir/file.arr:2:3"), "{r}");
    assert!(r.contains("2 │   x + true"), "{r}");
    assert!(r.contains("^^^^^^^^"), "{r}");
    assert_eq!(d.to_string(), r);
    let as_error: &dyn std::error::Error = &d;
    assert_eq!(as_error.to_string(), r);
}

#[test]
fn syntax_errors() {
    one_error("def f(x: f64) -> f64 = x +\n", 1, 27, &["expected an expression", "end of file"]);
    one_error("def f(x: f64) -> f64 = (x", 1, 26, &["expected `,` or `)`"]);
    one_error("def f(x: f64) -> f64 = let y = x\n", 1, 33, &["expected `in`"]);
    one_error("def f(x: f64) f64 = x", 1, 15, &["expected `->`"]);
    one_error("def f(x: f64) -> f64 = if x then 1.0", 1, 37, &["`else`"]);
    one_error("def f(x f64) -> f64 = x", 1, 9, &["expected `:`"]);
    one_error("def f(x: f64) -> f64 = x )", 1, 26, &["expected `def` or end of file"]);
    one_error("f(x) = 1", 1, 1, &["expected a definition"]);
    one_error("def f(x: [n](f64, f64)) -> f64 = 1.0", 1, 13, &["arrays of tuples do not exist"]);
    one_error("def f(x: float) -> f64 = 1.0", 1, 10, &["unknown type `float`"]);
    one_error("def f(x: f64) -> f64 = x # 1", 1, 26, &["unexpected character `#`"]);
    one_error("def f() -> f64 = 1 + λ", 1, 22, &["unexpected character `λ`"]);
    one_error("def f() -> f64 = 2e", 1, 18, &["malformed number"]);
    one_error("def f() -> f64 = 1e400", 1, 18, &["out of range"]);
    one_error("def f() -> f64 = g(1)(2)", 1, 22, &["only definitions and builtins can be called"]);
    one_error("def f() -> f64 = _", 1, 18, &["`_` is not a value"]);
    one_error("def f(a: [n]f64) -> f64 = a[0, 1:2]", 1, 33, &["slice"]);
}

#[test]
fn comparisons_are_non_associative() {
    one_error("def f(a: i64) -> bool =\n  a < 1 < 2", 2, 9, &["non-associative"]);
    one_error("def f(a: i64) -> bool = a == 1 != true", 1, 32, &["non-associative"]);
    // Parenthesised, it is a type error instead (a bool compared with <).
    one_error("def f(a: i64) -> bool = (a < 1) < true", 1, 25, &["`<`"]);
}

#[test]
fn unknown_names() {
    one_error("def f(x: f64) -> f64 = x + y", 1, 28, &["unknown variable `y`"]);
    one_error("def f(x: f64) -> f64 = g(x)", 1, 24, &["unknown function `g`"]);
    one_error("def f(x: f64) -> f64 = x(1)", 1, 24, &["`x` is a variable, not a function"]);
    one_error("def g() -> f64 = 1.0\ndef f(x: f64) -> f64 = g + x", 2, 24, &["`g` is a definition, not a value"]);
    one_error("def f(x: f64) -> f64 = exp + x", 1, 24, &["`exp` is a builtin function, not a value"]);
    // Names go out of scope after their `let`.
    one_error("def f(x: f64) -> f64 = (let y = x in y) + y", 1, 43, &["unknown variable `y`"]);
    one_error("def f(x: f64) -> [3]f64 = (for i < 3 => x) [i]", 1, 45, &["unknown variable `i`"]);
}

#[test]
fn type_mismatches() {
    one_error("def f(x: f64, i: i64) -> f64 = x + i", 1, 32, &["different types", "f64 and i64"]);
    one_error("def f(x: f64) -> i64 = x", 1, 24, &["has type f64", "result type is i64"]);
    // A body's type error points at the value of its `let` chain.
    one_error("def f(x: f64) -> i64 =\n  let y = x\n  in y * 2.0", 3, 6, &["has type f64"]);
    one_error("def f(c: bool) -> f64 = if c then 1.0 else true", 1, 44, &["branches of `if`", "f64 and bool"]);
    one_error("def f(x: f64) -> f64 = if x then 1.0 else 2.0", 1, 27, &["condition of `if` must be a bool"]);
    one_error("def f(x: f64) -> f64 = x % 2.0", 1, 24, &["`%` needs i64 operands"]);
    one_error("def f(i: i64) -> i64 = i ** 2", 1, 24, &["`**` needs f64 operands"]);
    one_error("def f(v: [n]f64, w: [n]f64) -> bool = v < w", 1, 39, &["comparisons are scalar only"]);
    one_error("def f(v: [n]bool) -> [n]bool = !v", 1, 32, &["`!` applies to a bool"]);
    one_error("def f(b: bool) -> bool = -b", 1, 26, &["`-` applies to f64 and i64"]);
    one_error("def f(a: bool, b: f64) -> bool = a && b", 1, 39, &["operands of `&&` must be bools"]);
    one_error("def f(v: [n]f64, a: [n][n]f64) -> [n]f64 = v + a", 1, 44, &["same rank"]);
    one_error("def f(v: [n]f64) -> f64 = v[1.0]", 1, 29, &["an index must be an i64"]);
    one_error("def f(v: [n]f64) -> f64 = v[0, 0]", 1, 27, &["too many indices"]);
    one_error("def f(x: f64) -> f64 = x[0]", 1, 24, &["only arrays can be indexed"]);
    one_error("def f(t: (f64, f64)) -> f64 = t.2", 1, 33, &["no component 2"]);
    one_error("def f(x: f64) -> f64 = x.0", 1, 24, &["selects a tuple component"]);
    one_error("def f(x: f64) -> f64 = let (a, b) = x in a", 1, 28, &["pattern has 2 components"]);
    one_error("def f(x: f64) -> f64 = let (a, a) = (x, x) in a", 1, 32, &["`a` is bound twice"]);
    one_error("def f(x: f64) -> f64 = let y: i64 = x in 1.0", 1, 37, &["annotation says i64"]);
    one_error("def f(n: i64) -> [2]f64 = for i < 2.0 => 1.0", 1, 35, &["number of iterations", "i64"]);
    one_error(
        "def f(x: f64) -> bool = loop s = true for i < 3 do x",
        1,
        52,
        &["loop body has type f64", "state has type bool"],
    );
    one_error("def f(x: f64) -> i64 = loop s = 0 for i < 3 do s < 1", 1, 48, &["loop body has type bool"]);
    one_error("def f(x: f64) -> f64 = [1.0, true][0]", 1, 30, &["array literal", "same type"]);
    one_error("def f() -> f64 = 9223372036854775808", 1, 18, &["too large"]);
    one_error("def f() -> f64 = 99999999999999999999999", 1, 18, &["too large"]);
}

#[test]
fn empty_array_literal_is_an_error() {
    one_error("def f() -> [0]f64 = []", 1, 21, &["empty array literal"]);
}

#[test]
fn arrays_of_tuples_do_not_exist() {
    one_error("def f(x: [n]f64) -> [n]f64 = for i < n => (x[i], x[i])", 1, 43, &["arrays of tuples", "body of `for`"]);
    one_error("def f(x: f64) -> [2]f64 = [(x, x), (x, x)]", 1, 28, &["arrays of tuples"]);
}

#[test]
fn builtins_are_typed() {
    one_error("def f(i: i64) -> f64 = exp(i)", 1, 24, &["`exp` expects an f64"]);
    one_error("def f(x: f64) -> f64 = exp(x, x)", 1, 24, &["`exp` takes 1 argument but 2 were given"]);
    one_error("def f(x: f64) -> f64 = pow(x)", 1, 24, &["`pow` takes 2 arguments but 1 was given"]);
    one_error("def f(x: f64) -> i64 = length(x)", 1, 24, &["`length` expects an array"]);
    one_error("def f(x: [n]bool) -> bool = sum(x)", 1, 29, &["`sum` expects an array of f64 or i64"]);
    one_error("def f(x: [n][m]f64) -> f64 = maximum(x)", 1, 30, &["`maximum` expects a one-dimensional array"]);
    one_error("def f(x: [n]f64, y: [n]i64) -> f64 = dot(x, y)", 1, 38, &["`dot` expects two"]);
    one_error("def f(b: bool) -> f64 = f64(b)", 1, 25, &["`f64` converts"]);
    one_error("def f(x: f64, i: i64) -> f64 = min(x, i)", 1, 32, &["`min`", "different types"]);
    one_error("def exp(x: f64) -> f64 = x", 1, 5, &["`exp` is a builtin function and cannot be redefined"]);
}

#[test]
fn calls_are_checked() {
    let g = "def g(a: f64, v: [n]f64) -> f64 = a\n";
    one_error(&format!("{g}def f(x: f64) -> f64 = g(x)"), 2, 24, &["`g` takes 2 arguments but 1 was given"]);
    one_error(
        &format!("{g}def f(x: f64) -> f64 = g(x, x)"),
        2,
        29,
        &["argument 2 of `g` has type f64", "parameter `v` has type [n]f64"],
    );
    one_error(&format!("{g}def f(v: [n]i64) -> f64 = g(1.0, v)"), 2, 34, &["argument 2"]);
}

#[test]
fn recursion_is_an_error() {
    one_error(
        "def f(x: f64) -> f64 =\n  if x < 0.0 then 0.0 else f(x - 1.0)",
        2,
        28,
        &["recursion is not allowed", "`f` calls itself"],
    );
    one_error(
        "def a(x: f64) -> f64 = b(x)\ndef b(x: f64) -> f64 = c(x)\ndef c(x: f64) -> f64 = a(x) + 1.0",
        3,
        24,
        &["mutual recursion", "`a` -> `b` -> `c` -> `a`"],
    );
    // A call to a definition that appears later is fine.
    assert!(compile("t.arr", "def a(x: f64) -> f64 = b(x)\ndef b(x: f64) -> f64 = x").is_ok());
}

#[test]
fn signature_errors() {
    one_error("def f(x: [n]f64) -> [m]f64 = x", 1, 22, &["size variable `m` of the result type"]);
    let es = errors("def f(n: i64) -> [n]f64 = for i < n => 1.0");
    assert!(es[0].0.contains("size variable `n`"));
    one_error("def f(x: f64, x: f64) -> f64 = x", 1, 15, &["duplicate parameter `x`"]);
    one_error("def f(n: i64, x: [n]f64) -> f64 = 1.0", 1, 7, &["both a parameter and a size variable"]);
    one_error("def f() -> f64 = 1.0\ndef f() -> f64 = 2.0", 2, 5, &["`f` is defined twice"]);
    one_error("def f(x: [99999999999999999999]f64) -> f64 = 1.0", 1, 11, &["too large"]);
}

#[test]
fn several_errors_in_one_file() {
    let src = "\
def a(x: f64) -> f64 = x + 1 +
def b(x: f64) -> f64 = y
def c(x: f64) -> f64 = x % 2.0
def d(x: f64) -> bool = x < 1 < 2
def e(x: f64) -> f64 = a(x) + undefined(x)
def ok(x: f64) -> f64 = x
";
    let es = errors(src);
    let pos: Vec<(u32, u32)> = es.iter().map(|e| (e.1, e.2)).collect();
    assert_eq!(pos, vec![(2, 1), (2, 24), (3, 24), (4, 31), (5, 31)], "{es:#?}");
    // Several errors inside one definition are reported too.
    let es = errors("def f(x: f64) -> f64 = y + z * w");
    assert_eq!(es.len(), 3);
}

#[test]
fn a_definition_with_a_syntax_error_is_not_an_unknown_function() {
    // `broken` fails to parse; the call to it is not reported again.
    let es = errors("def broken(x: f64) -> f64 = x +\ndef user(x: f64) -> f64 = broken(x)");
    assert_eq!(es.len(), 1, "{es:#?}");
}

#[test]
fn errors_in_uncalled_definitions_are_reported() {
    one_error("def main(x: f64) -> f64 = x\ndef unused(x: f64) -> f64 = x + true", 2, 29, &["`+`"]);
}

#[test]
fn nesting_limit_is_an_error() {
    let src = format!("def f(x: f64) -> f64 = {}x{}", "(".repeat(5000), ")".repeat(5000));
    let es = errors(&src);
    assert!(es[0].0.contains("nested too deeply"), "{es:?}");
    let src = format!("def f(x: f64) -> f64 = {}x", "-".repeat(100_000));
    assert!(errors(&src)[0].0.contains("nested too deeply"));
    let src = format!("def f(x: f64) -> f64 = x{}", ".0".repeat(100_000));
    assert!(errors(&src)[0].0.contains("nested"));
    let src = format!("def f(x: f64) -> f64 = {}x", "if true then 1.0 else ".repeat(100_000));
    assert!(errors(&src)[0].0.contains("nested too deeply"));
    // Within the limit, deep nesting compiles.
    let src = format!("def f(x: f64) -> f64 = {}x{}", "(1.0 + ".repeat(250), ")".repeat(250));
    assert!(compile("t.arr", &src).is_ok());
}

#[test]
fn parse_returns_the_ast_or_errors() {
    let p = parse("p.arr", "def f(x: f64) -> f64 = x + 1").unwrap();
    assert_eq!(p.defs.len(), 1);
    assert_eq!(p.defs[0].name.name, "f");
    let dbg = format!("{p:?}");
    assert!(dbg.contains("Binary") && dbg.contains("Add"), "{dbg}");
    // Parsing does not type-check.
    assert!(parse("p.arr", "def f(x: f64) -> f64 = x + true").is_ok());
    let d = parse("p.arr", "def f(x: f64) -> f64 = x +").unwrap_err();
    assert_eq!(d.entries()[0].1, 1);
}

#[test]
fn notes_give_hints() {
    let d = compile("h.arr", "def h(x: f64) -> f64 = let pi = 3 in pi * x").unwrap_err();
    let r = d.render();
    assert!(r.contains("= there are no implicit conversions"), "{r}");
    assert!(r.contains("`pi` is an i64 because it is bound to an integer literal"), "{r}");
    let d = compile("h.arr", "def f() -> f64 = 1.0\ndef f() -> f64 = 2.0").unwrap_err();
    assert!(d.render().contains("first definition of `f` is at line 1, column 5"), "{}", d.render());
}
