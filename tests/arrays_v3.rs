//! LANGUAGE.md section 11 (functional update, size arithmetic, flatten,
//! reshape, concat, sign, argmin, argmax) beyond the differential corpus
//! (`tests/programs/arrays_v3.arr`, which checks values and derivatives on
//! every backend against the oracles): compile errors, run-time errors with
//! their locations, in-place updates in O(1) time and memory, and size
//! expressions through the Rust API and the C ABI.

mod common;

use arrayad::{Arg, ErrorKind, Module};
use arrayad_ir::{ArrayData, ArrayValue, Value};

fn compile_error(src: &str) -> String {
    match arrayad_frontend::compile("t.arr", src) {
        Ok(_) => panic!("compiled: {src}"),
        Err(d) => d.render(),
    }
}

#[test]
fn compile_errors_name_the_problem() {
    let cases = [
        ("def f(x: [n * m]f64) -> f64 = sum(x)", "size variable `n` occurs only inside size expressions"),
        ("def f(x: [n]f64) -> [n + k]f64 = x", "size variable `k` of the result type does not occur"),
        ("def f(x: [n]f64) -> [n]f64 = x with [0] = [1.0]", "the new value has type"),
        ("def f(x: [n][m]f64) -> [n][m]f64 = x with [0, 1, 2] = 1.0", "too many indices"),
        ("def f(x: f64) -> f64 = x with [0] = 1.0", "only arrays can be updated"),
        ("def f(x: [n]f64) -> [n]f64 = x with [0.5] = 1.0", "an index must be an i64"),
        ("def f(x: [n]f64) -> [2][n]f64 = reshape(x, (2.0, n))", "the extents of `reshape` must be i64 values"),
        ("def f(x: [n]f64, y: [n]i64) -> [n]f64 = concat(x, y)", "`concat` joins two arrays of one element type"),
        ("def f(x: [n]f64) -> [n]f64 = flatten(x)", "`flatten` expects an array of rank 2 or more"),
        ("def f(x: [n][m]f64) -> i64 = argmax(x)", "`argmax` expects a one-dimensional array of f64"),
        ("def f(x: [n]f64) -> f64 = sign(1)", ""),
        ("def f(x: [(n]f64) -> f64 = 1.0", "expected `)`"),
        ("def f(x: [n +]f64) -> f64 = 1.0", "expected a size"),
        ("def f(x: [n]f64) -> f64 = let y: [n * k]f64 = x in 1.0", "unknown size `k`"),
    ];
    for (src, needle) in cases {
        if needle.is_empty() {
            // sign of an integer literal: an f64 (it coerces).
            assert!(arrayad_frontend::compile("t.arr", src).is_ok(), "{src}");
            continue;
        }
        let msg = compile_error(src);
        assert!(msg.contains(needle), "{src}:\n{msg}");
        assert!(msg.contains("t.arr:1:"), "{src}: no location:\n{msg}");
    }
}

/// The backends of the Rust API in this build.
fn backends() -> Vec<arrayad::Backend> {
    let mut out = vec![arrayad::Backend::Interp, arrayad::Backend::Cranelift];
    if cfg!(feature = "llvm") {
        out.push(arrayad::Backend::Llvm);
    }
    out
}

fn f64s(v: &[f64], shape: &[usize]) -> Value {
    Value::Array(ArrayValue { shape: shape.to_vec(), data: ArrayData::F64(v.to_vec()) })
}

#[test]
fn runtime_errors_have_their_kind_and_location() {
    let src = "\
def resh(x: [n]f64, a: i64, b: i64) -> f64 = sum(flatten(reshape(x, (a, b))))
def upd(x: [n]f64, i: i64) -> [n]f64 = x with [i] = 1.0
def row(x: [n][m]f64, r: [k]f64) -> [n][m]f64 = x with [0] = r
def sized(x: [n]f64, y: [n * 2]f64) -> f64 = sum(x) + sum(y)
def div(x: [n]f64, y: [m]f64, z: [n / m]f64) -> f64 = sum(z)
def arg(x: [n]f64) -> i64 = argmin(x)
def lit(x: [n][2]f64) -> f64 = x[0, 2]
";
    let cases: Vec<(&str, Vec<Value>, ErrorKind, &str)> = vec![
        (
            "resh",
            vec![f64s(&[1., 2., 3., 4., 5., 6.], &[6]), Value::I64(4), Value::I64(2)],
            ErrorKind::SizeMismatch,
            "t.arr:1:58: size mismatch: reshape of `x`, which has 6 elements, to a shape of 8 elements",
        ),
        (
            "resh",
            vec![f64s(&[1., 2.], &[2]), Value::I64(-1), Value::I64(-2)],
            ErrorKind::NegativeSize,
            "t.arr:1:58: negative size: reshape of `x` to the negative extent -1",
        ),
        (
            "upd",
            vec![f64s(&[1., 2.], &[2]), Value::I64(2)],
            ErrorKind::IndexOutOfBounds,
            "t.arr:2:40: index out of bounds: index 2 is out of bounds for axis 0 of `x`, of extent 2",
        ),
        (
            "row",
            vec![f64s(&[1., 2., 3., 4.], &[2, 2]), f64s(&[1., 2., 3.], &[3])],
            ErrorKind::SizeMismatch,
            "t.arr:3:49: size mismatch: the row assigned into `x` must have the shape of its rows: axis 0: 3 and 2 differ",
        ),
        (
            "sized",
            vec![f64s(&[1., 2.], &[2]), f64s(&[1., 2., 3.], &[3])],
            ErrorKind::SizeMismatch,
            "t.arr:4:1: size mismatch: argument `y` of `sized` has type [n * 2]f64 but extent 3 in axis 0 where n * 2 is 4",
        ),
        (
            "div",
            vec![f64s(&[1., 2.], &[2]), f64s(&[], &[0]), f64s(&[], &[0])],
            ErrorKind::SizeMismatch,
            "the size n / m has no value (a division by zero)",
        ),
        ("arg", vec![f64s(&[], &[0])], ErrorKind::EmptyReduction, "t.arr:6:29: empty array: minimum of the empty array"),
        // A literal index against an extent checked equal to a literal:
        // code generation drops the checks it can decide, not this one.
        (
            "lit",
            vec![f64s(&[1., 2.], &[1, 2])],
            ErrorKind::IndexOutOfBounds,
            "t.arr:7:32: index out of bounds: index 2 is out of bounds for axis 1 of `x`, of extent 2",
        ),
    ];
    for backend in backends() {
        let m = Module::compile_with("t.arr", src, arrayad::Options::backend(backend)).unwrap();
        for (func, args, kind, needle) in &cases {
            let f = m.function(func).unwrap();
            let e = f.call_values(args).unwrap_err();
            assert_eq!(e.runtime_kind(), Some(*kind), "{backend:?} {func}: {e}");
            assert!(e.to_string().contains(needle), "{backend:?} {func}: {e}\nwant: {needle}");
        }
    }
}

/// A reshape to a shape with an extent 0 has no elements, however large
/// its other extents (their product would overflow): it succeeds on an
/// empty array, on every backend and in the interpreter, while a shape
/// whose product overflows without a 0 is a size mismatch.
#[test]
fn reshapes_to_shapes_with_an_extent_zero_have_no_elements() {
    let src = "def resh(x: [n]f64, a: i64, b: i64, c: i64) -> f64 = sum(reshape(x, (a, b, c))[0, 0]) + f64(n)";
    let program = arrayad_frontend::compile("t.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let id = program.find("resh").unwrap();
    let big = 1i64 << 62;
    let cases = [(big, 4, 0, true), (1 << 32, 1 << 32, 1, false), (4, big, 0, true), (1, 1, 0, true)];
    for backend in backends() {
        let m = Module::compile_with("t.arr", src, arrayad::Options::backend(backend)).unwrap();
        let f = m.function("resh").unwrap();
        for (a, b, c, ok) in cases {
            let args = [f64s(&[], &[0]), Value::I64(a), Value::I64(b), Value::I64(c)];
            let want = arrayad_ir::interp::run(&program, id, &args);
            assert_eq!(want.is_ok(), ok, "interpreter, ({a}, {b}, {c}): {want:?}");
            match f.call_values(&args) {
                Ok(got) => assert_eq!(got[0].as_f64(), Some(0.0), "{backend:?} ({a}, {b}, {c})"),
                Err(e) => {
                    assert!(!ok, "{backend:?} ({a}, {b}, {c}): {e}");
                    assert_eq!(e.runtime_kind(), Some(ErrorKind::SizeMismatch), "{backend:?}: {e}");
                }
            }
        }
    }
}

#[test]
fn size_expressions_bind_result_shapes_and_check_arguments() {
    let src = "def tri(d: [k]f64, l: [k][k * (k - 1) / 2]f64) -> [k + 1]f64 = concat(d, [sum(flatten(l))])";
    for backend in backends() {
        let m = Module::compile_with("t.arr", src, arrayad::Options::backend(backend)).unwrap();
        let f = m.function("tri").unwrap();
        let d = [1.0, 2.0, 3.0];
        let l = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        let out = f.call(&[Arg::Vector(&d), Arg::Array { data: &l, shape: &[3, 3] }]).unwrap();
        assert_eq!(out[0].f64_elements(), Some(&[1.0, 2.0, 3.0, 45.0][..]), "{backend:?}");
        let e = f.call(&[Arg::Vector(&d), Arg::Array { data: &l[..6], shape: &[3, 2] }]).unwrap_err();
        assert_eq!(e.runtime_kind(), Some(ErrorKind::SizeMismatch), "{backend:?}: {e}");
        // The vjp's cotangent has the result's shape from the sizes.
        let v =
            f.vjp(&[Arg::Vector(&d), Arg::Array { data: &l, shape: &[3, 3] }], &[Some(Arg::Vector(&[1., 1., 1., 2.]))]);
        let v = v.unwrap();
        assert_eq!(v.cotangent[1].as_ref().and_then(Value::f64_elements), Some(&[2.0; 9][..]), "{backend:?}");
    }
}

/// A loop updating one element of an array of 2 * 10^5 per iteration: in
/// place, its primal and its gradient hold O(n) memory (a copy per update
/// would be 2 * 10^5 copies of 1.6 MB).
#[test]
fn updates_of_dead_arrays_run_in_place_forward_and_backward() {
    let src = "\
def fill(x: [n]f64) -> f64 =
  let z = x * 0.0
  let r = loop acc = z for i < n do acc with [i] = x[i] * 2.0 + (if i > 0 then acc[i - 1] else 0.0)
  in r[n - 1] + sum(r)
";
    let n = 200_000;
    let x: Vec<f64> = (0..n).map(|i| (i % 7) as f64).collect();
    let program = arrayad_frontend::compile("fill.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let id = program.find("fill").unwrap();
    let d = common::ad::derive_all(&program, id, &[true]).unwrap();
    let arg = f64s(&x, &[n]);
    for (b, jit) in common::jits("fill.arr", &[d.primal.clone(), d.vjp.clone()]) {
        let (r, primal) = jit.call_with_memory(&d.primal.name, std::slice::from_ref(&arg));
        r.unwrap_or_else(|e| panic!("{b:?}: {e}"));
        let (r, grad) = jit.call_with_memory(&d.vjp.name, &[arg.clone(), Value::F64(1.0)]);
        let out = r.unwrap_or_else(|e| panic!("{b:?}: {e}"));
        let bytes = (n * 8) as u64;
        assert!(primal <= 4 * bytes, "{b:?}: the primal held {primal} bytes for an array of {bytes}");
        assert!(grad <= 12 * bytes, "{b:?}: the gradient held {grad} bytes for an array of {bytes}");
        // d/dx_j of r[n-1] + sum(r), r_i = 2 sum_{j<=i} x_j: 2 + 2 (n - j).
        let g = out[1].f64_elements().unwrap();
        assert_eq!(g[0], 2.0 + 2.0 * n as f64, "{b:?}");
        assert_eq!(g[n - 1], 4.0, "{b:?}");
    }
}
