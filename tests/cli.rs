//! The `arrayad` command line end to end (LANGUAGE.md section 7): `check`,
//! `run` in every mode and on both backends, exit statuses and messages of
//! usage and run-time errors, `emit` of every stage.

mod support;

use serde_json::json;
use std::path::{Path, PathBuf};
use support::{arrayad, arrayad_stdin, assert_close_all, close, num, nums, scratch};

const PROGRAM: &str = "\
// test program for the command line
def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])

def get(x: [n]f64, i: i64) -> f64 = x[i]

def idiv(a: i64, b: i64) -> i64 = a / b

def add(x: [n]f64, y: [m]f64) -> [n]f64 = x + y

def softmax(v: [n]f64) -> [n]f64 =
  let mx = maximum(v)
  let e = exp(v - mx)
  in e / sum(e)

def powers(a: f64) -> [3]f64 = [a, a * a, a * a * a]

def transpose(a: [n][m]f64) -> [m][n]f64 = for j < m, i < n => a[i, j]

def stats(x: [n]f64, k: i64) -> (f64, i64, bool) = (sum(x) / f64(n), k * 2, n > k)

def pair(a: f64, p: (f64, i64)) -> (f64, [2]f64) = (a * p.0, [a, f64(p.1)])

def count(k: i64) -> f64 = sum(for i < k => 1.0)

def inv(x: f64) -> f64 = 1.0 / x
";

/// A scratch directory holding `prog.arr`.
fn setup(name: &str) -> PathBuf {
    let dir = scratch("cli", name);
    std::fs::write(dir.join("prog.arr"), PROGRAM).unwrap();
    dir
}

/// `arrayad run prog.arr FUNC --args ARGS EXTRA...`, expecting success.
fn run_ok(dir: &Path, func: &str, args: &str, extra: &[&str]) -> serde_json::Value {
    let mut argv = vec!["run", "prog.arr", func, "--args", args];
    argv.extend_from_slice(extra);
    let out = arrayad(dir, &argv);
    assert_eq!(out.code, 0, "arrayad {argv:?} failed: {out:#?}");
    assert!(out.stderr.is_empty(), "unexpected stderr: {out:#?}");
    out.json()
}

/// `arrayad ARGV...`, expecting exit status `code` and a message on stderr
/// that contains every one of `needles`.
fn fails(dir: &Path, argv: &[&str], code: i32, needles: &[&str]) -> String {
    let out = arrayad(dir, argv);
    assert_eq!(out.code, code, "arrayad {argv:?}: wrong exit status: {out:#?}");
    assert!(out.stdout.is_empty(), "arrayad {argv:?}: output on stdout: {out:#?}");
    for n in needles {
        assert!(out.stderr.contains(n), "arrayad {argv:?}: stderr lacks {n:?}: {}", out.stderr);
    }
    assert!(!out.stderr.contains("panicked"), "arrayad {argv:?} panicked: {}", out.stderr);
    out.stderr
}

#[test]
fn check_accepts_a_good_file_and_reports_compile_errors() {
    let dir = setup("check");
    let out = arrayad(&dir, &["check", "prog.arr"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stderr.is_empty(), "{out:#?}");

    std::fs::write(dir.join("bad.arr"), "def f(x: f64) -> f64 =\n  x + true\n").unwrap();
    let err = fails(&dir, &["check", "bad.arr"], 1, &["error[E0208]: ", "bad.arr:2:3", "x + true"]);
    let caret = err.lines().find(|l| l.contains('^')).unwrap_or_else(|| panic!("no caret line: {err}"));
    // The caret sits under the `x` of line 2 (after the gutter).
    let src_line = err.lines().find(|l| l.contains("x + true")).unwrap();
    assert_eq!(caret.find('^'), src_line.find('x'), "caret misplaced:\n{err}");

    // Several errors, each reported; syntax errors too.
    std::fs::write(dir.join("two.arr"), "def f(x: f64) -> f64 = y\ndef g(x: f64) -> f64 = (x +\n").unwrap();
    fails(&dir, &["check", "two.arr"], 1, &["two.arr:1:24", "two.arr:2:"]);

    // Recursion is a compile error.
    std::fs::write(dir.join("rec.arr"), "def f(x: f64) -> f64 = g(x)\ndef g(x: f64) -> f64 = f(x)\n").unwrap();
    fails(&dir, &["check", "rec.arr"], 1, &["rec.arr:"]);

    // Not UTF-8, a missing file.
    std::fs::write(dir.join("bin.arr"), b"def f(x: f64) -> f64 = x\n\xff\xfe").unwrap();
    fails(&dir, &["check", "bin.arr"], 1, &["bin.arr:2:1"]);
    fails(&dir, &["check", "missing.arr"], 2, &["missing.arr"]);
}

#[test]
fn explain_prints_the_long_form_of_every_code() {
    let dir = setup("explain");
    let list = arrayad(&dir, &["explain"]);
    assert_eq!(list.code, 0, "{list:#?}");
    let codes: Vec<&str> = list.stdout.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(codes.len() > 40 && codes.contains(&"E0101") && codes.contains(&"E1003"), "{}", list.stdout);
    for code in codes {
        let out = arrayad(&dir, &["explain", code]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(out.stdout.starts_with(&format!("# {code}: ")), "{code}: {}", out.stdout);
    }
    let out = arrayad(&dir, &["explain", "e0209"]);
    assert!(out.stdout.contains("f64(n)"), "{}", out.stdout);
    fails(&dir, &["explain", "E4242"], 2, &["`E4242` is not an error code"]);
}

#[test]
fn run_prints_values_of_every_type() {
    let dir = setup("values");
    let v = run_ok(&dir, "f", "[[1, 2, 3], [0.5, -1, 2]]", &[]);
    let want = 0.5 - 2.0 + 6.0 + 1f64.exp();
    assert!(close(num(&v["value"]), want, 1e-15), "{v}");
    assert_eq!(v.as_object().unwrap().len(), 1, "{v}");

    let v = run_ok(&dir, "transpose", "[[[1, 2, 3], [4, 5, 6]]]", &[]);
    assert_eq!(v["value"], json!([[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]));

    let out = arrayad(&dir, &["run", "prog.arr", "stats", "--args", "[[1, 2, 3.5], 2]"]);
    assert_eq!(out.code, 0, "{out:#?}");
    // f64 always prints with a fraction; i64 as an integer; bool as a bool.
    assert_eq!(out.stdout.trim(), r#"{"value": [2.1666666666666665, 4, true]}"#);

    let v = run_ok(&dir, "powers", "[2]", &[]);
    assert_eq!(v["value"], json!([2.0, 4.0, 8.0]));

    // Non-finite values in and out.
    let v = run_ok(&dir, "inv", "[0]", &[]);
    assert_eq!(v["value"], json!("inf"));
    let v = run_ok(&dir, "inv", r#"["-inf"]"#, &[]);
    assert_eq!(num(&v["value"]), 0.0);
    let v = run_ok(&dir, "add", r#"[["NaN", 1], [1, 2]]"#, &[]);
    assert_eq!(v["value"], json!(["NaN", 3.0]));

    // Empty arrays.
    let v = run_ok(&dir, "transpose", "[[]]", &[]);
    assert_eq!(v["value"], json!([]));
    let v = run_ok(&dir, "count", "[0]", &[]);
    assert_eq!(v["value"], json!(0.0));
}

#[test]
fn run_reads_arguments_from_files_and_stdin() {
    let dir = setup("inputs");
    std::fs::write(dir.join("args.json"), "[[1, 2, 3], [0.5, -1, 2]]\n").unwrap();
    let from_file = run_ok(&dir, "f", "args.json", &[]);
    let inline = run_ok(&dir, "f", "[[1, 2, 3], [0.5, -1, 2]]", &[]);
    assert_eq!(from_file, inline);
    let out = arrayad_stdin(&dir, &["run", "prog.arr", "f", "--args", "-"], "[[1, 2, 3], [0.5, -1, 2]]");
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json(), inline);
    // A scalar cotangent may be written inline or read from stdin.
    let out = arrayad_stdin(&dir, &["run", "prog.arr", "inv", "--args", "[2]", "--vjp", "-"], "3");
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json(), json!({"value": 0.5, "cotangent": [-0.75]}));
    // stdin can be read only once
    fails(&dir, &["run", "prog.arr", "inv", "--args", "-", "--vjp", "-"], 2, &["standard input"]);
}

#[test]
fn grad_jvp_vjp_match_the_analytic_derivatives() {
    let dir = setup("derivatives");
    let args = "[[1, 2, 3], [0.5, -1, 2]]";
    let e1 = 1f64.exp();

    let v = run_ok(&dir, "f", args, &["--grad"]);
    assert!(close(num(&v["value"]), 0.5 - 2.0 + 6.0 + e1, 1e-15));
    assert_close_all("d/dx", &nums(&v["gradient"][0]), &[0.5 + e1, -1.0, 2.0], 1e-15);
    assert_close_all("d/dw", &nums(&v["gradient"][1]), &[1.0, 2.0, 3.0], 1e-15);

    // jvp in direction (tx, tw): <grad, t>
    let v = run_ok(&dir, "f", args, &["--jvp", "[[1, 0, -1], [2, 2, 2]]"]);
    let want = (0.5 + e1) - 2.0 + 2.0 * (1.0 + 2.0 + 3.0);
    assert!(close(num(&v["tangent"]), want, 1e-14), "{v}");
    assert!(close(num(&v["value"]), 0.5 - 2.0 + 6.0 + e1, 1e-15));

    // vjp of an array result: J^T ct, and the dot-product test against jvp.
    let sargs = "[[0.5, -1, 2]]";
    let ct = [0.3, -0.7, 1.1];
    let t = [1.0, 2.0, -0.5];
    let vj = run_ok(&dir, "softmax", sargs, &["--vjp", &json!(ct).to_string()]);
    let jv = run_ok(&dir, "softmax", sargs, &["--jvp", &json!([t]).to_string()]);
    let jt_ct = nums(&vj["cotangent"][0]);
    let j_t = nums(&jv["tangent"]);
    let lhs: f64 = ct.iter().zip(&j_t).map(|(a, b)| a * b).sum();
    let rhs: f64 = jt_ct.iter().zip(&t).map(|(a, b)| a * b).sum();
    assert!(close(lhs, rhs, 1e-14), "<ct, J t> = {lhs} but <J^T ct, t> = {rhs}");
    // softmax' = diag(s) - s s^T
    let s = nums(&vj["value"]);
    let sct: f64 = s.iter().zip(&ct).map(|(a, b)| a * b).sum();
    let want: Vec<f64> = (0..3).map(|i| s[i] * (ct[i] - sct)).collect();
    assert_close_all("softmax vjp", &jt_ct, &want, 1e-14);

    // Tuples in and out; null tangents and cotangents for non-f64 parts.
    let v = run_ok(&dir, "pair", "[2, [3, 4]]", &["--jvp", "[1, [1, null]]"]);
    assert_eq!(v, json!({"value": [6.0, [2.0, 4.0]], "tangent": [5.0, [1.0, 0.0]]}));
    let v = run_ok(&dir, "pair", "[2, [3, 4]]", &["--vjp", "[1, [1, 1]]"]);
    assert_eq!(v, json!({"value": [6.0, [2.0, 4.0]], "cotangent": [4.0, [2.0, null]]}));
    // No f64 parameter at all: the gradient is null.
    let v = run_ok(&dir, "count", "[3]", &["--grad"]);
    assert_eq!(v, json!({"value": 3.0, "gradient": [null]}));
    // An i64 result: the tangent is null.
    let v = run_ok(&dir, "idiv", "[7, 2]", &["--jvp", "[null, null]"]);
    assert_eq!(v, json!({"value": 3, "tangent": null}));
}

#[test]
fn jacobian_by_rows_and_by_columns() {
    let dir = setup("jacobian");
    // 3 x 3: softmax, J = diag(s) - s s^T
    let v = run_ok(&dir, "softmax", "[[1, 2, 3]]", &["--jacobian"]);
    let s = nums(&v["value"]);
    let jac = v["jacobian"].as_array().unwrap();
    assert_eq!(jac.len(), 3);
    for (i, row) in jac.iter().enumerate() {
        let want: Vec<f64> = (0..3).map(|j| if i == j { s[i] - s[i] * s[j] } else { -s[i] * s[j] }).collect();
        assert_close_all(&format!("softmax jacobian row {i}"), &nums(row), &want, 1e-14);
    }
    // 3 rows, 1 column (forward mode is cheaper)
    let v = run_ok(&dir, "powers", "[2]", &["--jacobian"]);
    assert_eq!(v["jacobian"], json!([[1.0], [4.0], [12.0]]));
    // 1 row, 6 columns (reverse mode is cheaper)
    let v = run_ok(&dir, "f", "[[1, 2, 3], [0.5, -1, 2]]", &["--jacobian"]);
    let e1 = 1f64.exp();
    assert_eq!(v["jacobian"].as_array().unwrap().len(), 1);
    assert_close_all("f jacobian", &nums(&v["jacobian"][0]), &[0.5 + e1, -1.0, 2.0, 1.0, 2.0, 3.0], 1e-15);
    // Rows of a tuple result, columns of a tuple parameter (p.1 is an i64).
    let v = run_ok(&dir, "pair", "[2, [3, 4]]", &["--jacobian"]);
    assert_eq!(v["jacobian"], json!([[3.0, 2.0], [1.0, 0.0], [0.0, 0.0]]));
    // With --wrt only the columns of the listed parameters.
    let v = run_ok(&dir, "f", "[[1, 2, 3], [0.5, -1, 2]]", &["--jacobian", "--wrt", "w"]);
    assert_eq!(v["jacobian"], json!([[1.0, 2.0, 3.0]]));
    // A result without f64 parts has no rows.
    let v = run_ok(&dir, "idiv", "[7, 2]", &["--jacobian"]);
    assert_eq!(v["jacobian"], json!([]));
}

#[test]
fn wrt_selects_the_active_parameters() {
    let dir = setup("wrt");
    let args = "[[1, 2, 3], [0.5, -1, 2]]";
    let v = run_ok(&dir, "f", args, &["--grad", "--wrt", "w"]);
    assert_eq!(v["gradient"][0], json!(null));
    assert_eq!(v["gradient"][1], json!([1.0, 2.0, 3.0]));
    let v = run_ok(&dir, "f", args, &["--grad", "--wrt", "x,w"]);
    assert!(v["gradient"][0].is_array() && v["gradient"][1].is_array(), "{v}");
    // Tangents of inactive parameters are ignored (null is the usual spelling).
    let v = run_ok(&dir, "f", args, &["--jvp", "[null, [1, 1, 1]]", "--wrt", "w"]);
    assert!(close(num(&v["tangent"]), 6.0, 1e-15), "{v}");
    let v2 = run_ok(&dir, "f", args, &["--jvp", "[[5, 5, 5], [1, 1, 1]]", "--wrt", "w"]);
    assert_eq!(v["tangent"], v2["tangent"]);
    let v = run_ok(&dir, "softmax", "[[1, 2]]", &["--vjp", "[1, 0]", "--wrt", "v"]);
    assert!(v["cotangent"][0].is_array(), "{v}");
    fails(&dir, &["run", "prog.arr", "f", "--args", args, "--grad", "--wrt", "y"], 2, &["`y`"]);
    // `i` is a parameter of `get`, not of `f`.
    fails(&dir, &["run", "prog.arr", "f", "--args", args, "--grad", "--wrt", "i"], 2, &["`i`"]);
}

#[test]
fn interpreter_and_cranelift_agree() {
    let dir = setup("backends");
    let cases: &[(&str, &str, &[&str])] = &[
        ("f", "[[1, 2, 3], [0.5, -1, 2]]", &[]),
        ("f", "[[1, 2, 3], [0.5, -1, 2]]", &["--grad"]),
        ("f", "[[1, 2, 3], [0.5, -1, 2]]", &["--jvp", "[[1, 0, -1], [2, 2, 2]]"]),
        ("softmax", "[[0.5, -1, 2, 7]]", &["--vjp", "[1, 2, 3, 4]"]),
        ("softmax", "[[0.5, -1, 2, 7]]", &["--jacobian"]),
        ("transpose", "[[[1, 2, 3], [4, 5, 6]]]", &["--jacobian"]),
        ("stats", "[[1, 2, 3.5], 2]", &["--vjp", "[1, null, null]"]),
        ("pair", "[2, [3, 4]]", &["--jacobian"]),
    ];
    for (func, args, extra) in cases {
        let jit = run_ok(&dir, func, args, extra);
        let mut with_interp = extra.to_vec();
        with_interp.extend_from_slice(&["--backend", "interp"]);
        let interp = run_ok(&dir, func, args, &with_interp);
        let mut explicit = extra.to_vec();
        explicit.extend_from_slice(&["--backend", "cranelift"]);
        assert_eq!(jit, run_ok(&dir, func, args, &explicit));
        for key in jit.as_object().unwrap().keys() {
            let (a, b) = (&jit[key], &interp[key]);
            if a.is_number() || a.is_array() && !nums_or_empty(a).is_empty() {
                assert_close_all(&format!("{func} {extra:?} {key}"), &nums_or_empty(a), &nums_or_empty(b), 1e-13);
            } else {
                assert_eq!(a, b, "{func} {extra:?} {key}");
            }
        }
    }
    // Run-time errors are the same on both backends.
    for backend in ["cranelift", "interp"] {
        fails(&dir, &["run", "prog.arr", "get", "--args", "[[1, 2], 2]", "--backend", backend], 3, &["prog.arr:4:"]);
    }
}

/// The numbers of a JSON value, skipping nulls, booleans and integers of
/// tuples (used to compare outputs numerically).
fn nums_or_empty(j: &serde_json::Value) -> Vec<f64> {
    match j {
        serde_json::Value::Array(a) => a.iter().flat_map(nums_or_empty).collect(),
        serde_json::Value::Number(_) | serde_json::Value::String(_) => vec![num(j)],
        _ => vec![],
    }
}

#[test]
fn usage_errors_exit_with_status_2() {
    let dir = setup("usage");
    let r = |args: &'static str, extra: &[&'static str]| {
        let mut v = vec!["run", "prog.arr", "f", "--args", args];
        v.extend_from_slice(extra);
        v
    };
    // Malformed JSON, wrong count, wrong types, ragged arrays.
    fails(&dir, &r("[[1, 2], [3, 4]", &[]), 2, &["ARGS", "malformed JSON", "line 1"]);
    fails(&dir, &r("[[1, 2]]", &[]), 2, &["ARGS", "one entry per parameter", "found 1 entry"]);
    fails(&dir, &r("[[1, 2], [3, 4], 5]", &[]), 2, &["found 3 entries"]);
    fails(&dir, &r("[[1, 2], [3, \"x\"]]", &[]), 2, &["`w`", "w[1]"]);
    fails(&dir, &r("[[1, 2], 3]", &[]), 2, &["`w`", "expected an array"]);
    fails(&dir, &["run", "prog.arr", "transpose", "--args", "[[[1, 2], [3]]]"], 2, &["ragged", "a[1]", "a[0]"]);
    fails(&dir, &["run", "prog.arr", "get", "--args", "[[1, 2], 1.5]"], 2, &["`i`", "i64"]);
    fails(&dir, &r("{\"x\": 1}", &[]), 2, &["ARGS"]);
    // Tangents and cotangents of the wrong shape.
    fails(&dir, &r("[[1, 2], [3, 4]]", &["--jvp", "[[1], [1, 1]]"]), 2, &["tangent of `x`"]);
    fails(&dir, &["run", "prog.arr", "softmax", "--args", "[[1, 2]]", "--vjp", "[1, 2, 3]"], 2, &["COTANGENT"]);
    // Unknown function, unknown flag, conflicting modes, missing --args.
    fails(&dir, &["run", "prog.arr", "nope", "--args", "[]"], 2, &["`nope`", "softmax"]);
    fails(&dir, &r("[[1], [2]]", &["--bogus"]), 2, &["--bogus"]);
    fails(&dir, &r("[[1], [2]]", &["--grad", "--jacobian"]), 2, &[]);
    fails(&dir, &["run", "prog.arr", "f"], 2, &["--args"]);
    fails(&dir, &r("nonexistent.json", &[]), 2, &["nonexistent.json"]);
    // --grad of a function whose result is not one f64.
    fails(&dir, &["run", "prog.arr", "softmax", "--args", "[[1, 2]]", "--grad"], 2, &["--grad", "softmax"]);
    // Backends that cannot do it.
    if !cfg!(feature = "llvm") {
        // Without the feature: a usage error that says how to build with it.
        fails(&dir, &r("[[1], [2]]", &["--backend", "llvm"]), 2, &["LLVM", "--features llvm"]);
        fails(&dir, &["build", "prog.arr", "-o", "libx.so", "--backend", "llvm"], 2, &["--features llvm"]);
    }
    fails(&dir, &r("[[1], [2]]", &["--backend", "gpu"]), 2, &["gpu"]);
    fails(&dir, &["build", "prog.arr", "-o", "libx.so", "--backend", "interp"], 2, &["interp"]);
    fails(&dir, &["build", "prog.arr", "-o", "libx.so", "--export", "nope"], 2, &["`nope`"]);
    fails(&dir, &["build", "prog.arr", "-o", "libx.so", "--wrt", "zz"], 2, &["`zz`"]);
    fails(&dir, &["frobnicate"], 2, &[]);
    // --help succeeds.
    let out = arrayad(&dir, &["--help"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("run") && out.stdout.contains("build"), "{out:#?}");
}

#[test]
fn runtime_errors_exit_with_status_3_and_name_the_location() {
    let dir = setup("runtime");
    let cases: &[(&str, &str, &[&str])] = &[
        ("get", "[[1, 2], 2]", &["error[E1001]: prog.arr:4:", "index out of bounds", "2"]),
        ("get", "[[1, 2], -1]", &["prog.arr:4:", "index out of bounds"]),
        ("idiv", "[1, 0]", &["prog.arr:6:", "division by zero"]),
        // sizes of the arguments disagree: reported at the definition
        ("f", "[[1, 2], [1, 2, 3]]", &["prog.arr:2:1", "size mismatch", "`x`", "`w`"]),
        // elementwise operands of different sizes
        ("add", "[[1, 2], [1, 2, 3]]", &["prog.arr:8:", "size mismatch"]),
        // a negative trip count
        ("count", "[-1]", &["prog.arr:23:", "negative size"]),
    ];
    for (func, args, needles) in cases {
        for backend in ["cranelift", "interp"] {
            fails(&dir, &["run", "prog.arr", func, "--args", args, "--backend", backend], 3, needles);
            // Derivatives fail the same way.
            fails(&dir, &["run", "prog.arr", func, "--args", args, "--jacobian", "--backend", backend], 3, needles);
        }
    }
    std::fs::write(dir.join("lit.arr"), "def three(x: [3]f64) -> f64 = sum(x)\n").unwrap();
    fails(&dir, &["run", "lit.arr", "three", "--args", "[[1, 2]]"], 3, &["lit.arr:1:1", "size mismatch"]);
}

#[test]
fn emit_prints_every_stage() {
    let dir = setup("emit");
    let emit = |stage: &str| {
        let out = arrayad(&dir, &["emit", "prog.arr", "--stage", stage, "--function", "f"]);
        assert_eq!(out.code, 0, "emit --stage {stage}: {out:#?}");
        assert!(!out.stdout.trim().is_empty(), "emit --stage {stage} printed nothing");
        out.stdout
    };
    let ast = emit("ast");
    assert!(ast.contains("Def") && ast.contains("\"f\""), "{ast}");
    let ir = emit("ir");
    assert!(ir.starts_with("def f("), "{ir}");
    assert!(ir.contains("exp"), "{ir}");
    let jvp = emit("jvp");
    assert!(jvp.contains("def f_jvp("), "{jvp}");
    let vjp = emit("vjp");
    assert!(vjp.contains("def f_vjp("), "{vjp}");
    let rows = emit("vjp_rows");
    assert!(rows.contains("def f_vjp_rows(") && rows.contains("tape_mark") && rows.contains("tape_rewind"), "{rows}");
    let delta = emit("delta");
    assert!(delta.contains("linear") && delta.contains("def f_jvp("), "{delta}");
    let clif = emit("clif");
    assert!(clif.contains("function") && clif.contains("; f_vjp"), "{clif}");
    // Every definition when --function is not given.
    let out = arrayad(&dir, &["emit", "prog.arr", "--stage", "ir"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("def softmax(") && out.stdout.contains("def pair("), "{out:#?}");
    // ir inlines calls
    std::fs::write(dir.join("calls.arr"), "def sq(x: f64) -> f64 = x * x\ndef g(y: f64) -> f64 = sq(y) + 1\n").unwrap();
    let out = arrayad(&dir, &["emit", "calls.arr", "--stage", "ir", "--function", "g"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!out.stdout.contains("call"), "calls are not inlined: {}", out.stdout);
    // ... except those `build` keeps: the IR stages show them as calls,
    // the derivatives as calls of the kept definition's derivatives.
    std::fs::write(
        dir.join("kept.arr"),
        "def g(x: f64) -> f64 = sin(x) * x\ndef f(x: f64) -> f64 = g(x) + g(2.0 * x)\n",
    )
    .unwrap();
    for (stage, want) in [("ir", "call g("), ("jvp", "call g_jvp("), ("vjp", "call g_vjp("), ("delta", "sin")] {
        let args = ["emit", "kept.arr", "--stage", stage, "--function", "f", "--keep-calls-above", "1"];
        let out = arrayad(&dir, &args);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(out.stdout.contains(want), "emit --stage {stage} keeps calls of g: {}", out.stdout);
        let inlined = arrayad(&dir, &args[..6]);
        assert!(!inlined.stdout.contains("call"), "emit --stage {stage} inlines by default: {}", inlined.stdout);
    }
    if cfg!(feature = "llvm") {
        let llvm = emit("llvm");
        assert!(llvm.contains("define") && llvm.contains("; f_vjp"), "{llvm}");
        // The metadata the functions refer to follows them; a loop up to an
        // enclosing loop's index (a row of a triangle) is not interleaved.
        assert!(llvm.lines().any(|l| l.starts_with("!0 = ")), "{llvm}");
        let tri = "def tri(a: [n][n]f64, x: [n]f64) -> [n]f64 =\n  for r < n => sum(for c < r => a[r, c] * x[c])\n";
        std::fs::write(dir.join("tri.arr"), tri).unwrap();
        let out = arrayad(&dir, &["emit", "tri.arr", "--stage", "llvm", "--function", "tri"]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(out.stdout.contains("!{!\"llvm.loop.interleave.count\", i32 1}"), "{}", out.stdout);
        let square = tri.replace("c < r", "c < n");
        std::fs::write(dir.join("square.arr"), square).unwrap();
        let out = arrayad(&dir, &["emit", "square.arr", "--stage", "llvm", "--function", "tri"]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(!out.stdout.contains("llvm.loop.interleave.count"), "{}", out.stdout);
        // The backward rows of a triangle add into one accumulator while
        // reading others: their accesses carry alias scopes, so they are
        // vectorised without run-time overlap checks.
        let rows = "def q(l: [n][n]f64, x: [m][n]f64) -> f64 =\n  sum(for i < m => let y = x[i] in \
                    sum(for r < n => l[r, r] * y[r] + dot(l[r][0:r], y[0:r])))\n";
        std::fs::write(dir.join("rows.arr"), rows).unwrap();
        let out = arrayad(&dir, &["emit", "rows.arr", "--stage", "llvm", "--function", "q", "--wrt", "l,x"]);
        assert_eq!(out.code, 0, "{out:#?}");
        let vjp = out.stdout.split("; q_vjp").nth(1).unwrap_or_default();
        assert!(vjp.contains("!noalias") && vjp.contains("!alias.scope"), "{}", out.stdout);
        assert!(vjp.contains("<8 x double>") || vjp.contains("<4 x double>") || vjp.contains("<2 x double>"), "{vjp}");
        assert!(!vjp.contains("vector.memcheck"), "{vjp}");
        // The command lets LLVM vectorise the remainders of loops of 4 or
        // more lanes (`arrayad::llvm_vectorise_epilogues`).
        if vjp.contains("<8 x double>") || vjp.contains("<4 x double>") {
            assert!(vjp.contains("vec.epilog.vector.body"), "{vjp}");
        }
    } else {
        fails(&dir, &["emit", "prog.arr", "--stage", "llvm"], 2, &["LLVM", "--features llvm"]);
    }
    fails(&dir, &["emit", "prog.arr", "--stage", "nonsense"], 2, &[]);
    fails(&dir, &["emit", "prog.arr", "--stage", "ir", "--function", "nope"], 2, &["`nope`"]);
    std::fs::write(dir.join("bad.arr"), "def f(x: f64) -> f64 = x +\n").unwrap();
    fails(&dir, &["emit", "bad.arr", "--stage", "ast"], 1, &["bad.arr:"]);
}

#[test]
fn malformed_sources_never_crash() {
    let dir = setup("fuzz");
    let sources = [
        "",
        "def",
        "def f(",
        "def f(x: [n]f64) -> [m]f64 = x",
        "def f(x: f64) -> f64 = ((((((((((((((((((((x))))))))))))))))))))",
        &format!("def f(x: f64) -> f64 = {}x{}", "(".repeat(5000), ")".repeat(5000)),
        &format!("def f(x: f64) -> f64 = x{}", " + x".repeat(20000)),
        "def f(x: f64) -> f64 = let y = x in",
        "def f(x: [n]f64) -> f64 = x[1, 2, 3]",
        "\u{0}\u{1}\u{2} def 🙂",
    ];
    for (i, src) in sources.iter().enumerate() {
        let name = format!("fuzz{i}.arr");
        std::fs::write(dir.join(&name), src).unwrap();
        let out = arrayad(&dir, &["check", &name]);
        assert!(out.code == 0 || out.code == 1, "check {src:.60?}: {out:#?}");
        assert!(!out.stderr.contains("panicked") && !out.stderr.contains("internal error"), "{out:#?}");
    }
    // Deeply nested JSON is an error, not a crash.
    let deep = format!("[{}1{}]", "[".repeat(10000), "]".repeat(10000));
    fails(&dir, &["run", "prog.arr", "inv", "--args", &deep], 2, &["ARGS"]);
}

#[test]
fn time_passes_prints_the_time_of_each_phase_on_stderr() {
    let dir = setup("time_passes");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
        .args(["run", "prog.arr", "f", "--args", "[[1, 2, 3], [0.5, -1, 2]]", "--grad"])
        .current_dir(&dir)
        .env("ARRAYAD_TIME_PASSES", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for phase in ["frontend", "prepare primal", "optimize `f`", "linearize", "derive", "Cranelift"] {
        let line = stderr.lines().find(|l| l.starts_with(&format!("arrayad: time: {phase}: ")));
        let seconds = line.and_then(|l| l.rsplit(": ").next()?.strip_suffix(" s")?.parse::<f64>().ok());
        assert!(seconds.is_some_and(|s| s >= 0.0), "no time for {phase}: {stderr}");
    }
    // The value on stdout is unchanged.
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["gradient"].is_array(), "{v}");
}

/// `run --threads N`: the same output on 1 and 3 threads (softmax's
/// division, a map of 40,000 rows, runs on the pool), and a count out of
/// 1..=256 is a usage error.
#[test]
fn threads_give_the_same_output_and_are_checked() {
    let dir = setup("threads");
    let v: Vec<f64> = (0..40_000).map(|i| ((i * 37) % 101) as f64 * 0.01).collect();
    std::fs::write(dir.join("v.json"), serde_json::json!([v]).to_string()).unwrap();
    std::fs::write(dir.join("ct.json"), serde_json::json!(v).to_string()).unwrap();
    let one = run_ok(&dir, "softmax", "v.json", &["--threads", "1", "--vjp", "ct.json"]);
    let three = run_ok(&dir, "softmax", "v.json", &["--threads", "3", "--vjp", "ct.json"]);
    assert_eq!(one.to_string(), three.to_string());
    for bad in ["0", "257", "two"] {
        fails(&dir, &["run", "prog.arr", "softmax", "--args", "v.json", "--threads", bad], 2, &["--threads"]);
    }
}
