//! Differential tests over the corpus in `tests/programs/` and over
//! generated programs: for every test case,
//!
//! - reference interpreter on the source program == interpreter on the
//!   optimised program == Cranelift JIT (values);
//! - compiled vjp (interpreter and JIT) == the runtime Delta oracle
//!   (Krawiec et al. Figs. 9-11) == finite differences;
//! - compiled jvp == the dual-number oracle, and `<ct, J t> == <J^T ct, t>`.
//!
//! A corpus file names its cases in comments: `// test: FUNC [ARGS...]`
//! (JSON, one entry per flattened parameter); `// nofd` skips finite
//! differences (programs evaluated at non-differentiable points).

mod common;

use common::{check_case, corpus_cases, Case};
use std::path::Path;

#[test]
fn corpus_programs_agree_across_backends_and_oracles() {
    let cases = corpus_cases();
    for case in &cases {
        check_case(case);
    }
    assert!(cases.len() >= 15, "only {} corpus cases found", cases.len());
}

/// The dense Jacobian from the many-row vjp (one forward pass, the tape
/// replayed for every row; interpreter and JIT) equals the rows of single
/// vjp calls and the columns of jvp calls, for every corpus case with f64
/// results, the GMM example and the generated programs.
#[test]
fn jacobians_by_vjp_rows_agree_with_vjp_rows_and_jvp_columns() {
    let mut with_rows = 0;
    let mut multi_row = 0;
    for case in &corpus_cases() {
        let rows = common::check_jacobian(case);
        with_rows += (rows > 0) as usize;
        multi_row += (rows > 1) as usize;
    }
    assert!(with_rows >= 15 && multi_row >= 5, "{with_rows} cases with rows, {multi_row} with several");
    assert_eq!(common::check_jacobian(&gmm_case()), 1);
    for seed in 0..40u64 {
        common::check_jacobian(&common::generate::program(seed));
    }
}

fn gmm_case() -> Case {
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gmm.arr")).unwrap();
    Case {
        file: "gmm.arr".into(),
        source,
        func: "gmm".into(),
        args: serde_json::json!([
            [0.1, -0.3, 0.25],
            [[0.5, -0.2], [1.0, 0.3], [-0.7, 0.1]],
            [[0.1, -0.2, 0.3], [0.05, 0.2, -0.1], [-0.3, 0.1, 0.2]],
            [[0.3, 0.1], [-0.5, 0.9], [1.2, -0.4], [0.0, 0.2]],
            1.0,
            0
        ]),
        finite_differences: true,
    }
}

#[test]
fn gmm_example_agrees_across_backends_and_oracles() {
    check_case(&gmm_case());
}

#[test]
fn generated_programs_agree_across_backends_and_oracles() {
    for seed in 0..40u64 {
        let case = common::generate::program(seed);
        check_case(&case);
    }
}

#[test]
fn sharing_chain_gradient_is_instant() {
    // let x1 = x + x in let x2 = x1 + x1 in ... x60: 2^60 paths, 60 bindings.
    let mut src = String::from("def f(x: f64) -> f64 =\n  let x0 = x\n");
    for k in 1..=60 {
        src.push_str(&format!("  let x{k} = x{p} + x{p}\n", p = k - 1));
    }
    src.push_str("  in x60\n");
    let start = std::time::Instant::now();
    let case = Case {
        file: "chain.arr".into(),
        source: src,
        func: "f".into(),
        args: serde_json::json!([1.0]),
        finite_differences: false,
    };
    let grad = check_case(&case);
    assert_eq!(grad[0], 2f64.powi(60));
    assert!(start.elapsed().as_secs_f64() < 5.0, "took {:?}", start.elapsed());
}

/// Arrays moved, not computed, by loop iterations (a state passed through
/// a branch, states swapped, a state passed on by an inner loop): gradient
/// time stays O(primal time), not O(size) per iteration (m = n = 100000
/// would take minutes if every iteration zeroed or added a state's
/// cotangent).
#[test]
fn array_moves_in_loops_have_linear_gradients() {
    let src = "def passif(v: [m]f64, n: i64) -> f64 =
  let s = loop s = v for i < n do if s[i % m] > 1e9 then s * 2.0 else s
  in sum(s)
def swap(v: [m]f64, n: i64) -> f64 =
  let (s, t, acc) = loop (s, t, acc) = (v, v, 0.0) for i < n do (t, s, acc + s[i % m] * t[0])
  in acc
def innerpass(v: [m]f64, n: i64) -> f64 =
  let (s, acc) = loop (s, acc) = (v, 0.0) for i < n do
    let r = loop t = s for j < 2 do t
    in (r, acc + r[i % m])
  in acc
";
    let program = arrayad_frontend::compile("moves.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let m = 100_000usize;
    let v = arrayad_ir::Value::Array(arrayad_ir::ArrayValue {
        shape: vec![m],
        data: arrayad_ir::ArrayData::F64((0..m).map(|i| (i % 7) as f64 * 0.1).collect()),
    });
    for name in ["passif", "swap", "innerpass"] {
        let fid = program.find(name).unwrap();
        let vjp = common::ad::vjp(&program, fid, &[true, false]).unwrap();
        for (b, jit) in common::jits("moves.arr", std::slice::from_ref(&vjp)) {
            let start = std::time::Instant::now();
            let args = [v.clone(), arrayad_ir::Value::I64(m as i64), arrayad_ir::Value::F64(1.0)];
            let out = jit.call(&vjp.name, &args).unwrap();
            let took = start.elapsed().as_secs_f64();
            assert_eq!(out.len(), 2, "{name}");
            assert!(took < 5.0, "{name} ({b:?}): gradient took {took:.2} s");
        }
    }
}

#[test]
fn runtime_errors_are_the_same_on_every_backend() {
    // (program, function, args): each fails at run time; the interpreter on
    // the source program, the interpreter on the optimised program and the
    // JIT must report the same kind and the same message.
    let cases: &[(&str, &str, serde_json::Value)] = &[
        ("def f(x: [n]f64, i: i64) -> f64 = x[i] * 2", "f", serde_json::json!([[1.0, 2.0], 5])),
        ("def f(x: [n]f64, k: i64) -> f64 = sum(x[1:k])", "f", serde_json::json!([[1.0, 2.0], 7])),
        ("def f(a: i64, b: i64) -> i64 = a / b + 1", "f", serde_json::json!([3, 0])),
        ("def f(x: [n]f64, y: [m]f64) -> [n]f64 = x + y", "f", serde_json::json!([[1.0, 2.0], [1.0]])),
        ("def f(k: i64) -> f64 = sum(for i < k => 1.0)", "f", serde_json::json!([-3])),
        ("def f(x: [n]f64, k: i64) -> f64 = maximum(x[0:k])", "f", serde_json::json!([[1.0], 0])),
        (
            "def f(k: i64) -> [3][2]f64 =\n  for i < 3 =>\n    for j < (if i == 1 then k else 2) => 1.0",
            "f",
            serde_json::json!([5]),
        ),
        // Bindings whose values are unused still fail (dead code
        // elimination keeps what may fail).
        ("def f(x: [n]f64, k: i64) -> f64 =\n  let d = x[k]\n  let q = 10 / k\n  in x[0] * 2.0", "f", serde_json::json!([[1.0, 2.0], 5])),
        ("def f(x: [n]f64, k: i64) -> f64 =\n  let d = x[k]\n  let q = 10 / k\n  in x[0] * 2.0", "f", serde_json::json!([[1.0, 2.0], 0])),
        ("def f(x: [n]f64, k: i64) -> f64 =\n  let w = for i < k => 1.0\n  in x[0]", "f", serde_json::json!([[1.0], -2])),
        // A triangular nest keeps the check of an index whose chain of
        // bounds (`c < r < n`) does not end at the indexed array's extent,
        // in a sum and in a comprehension.
        (
            "def f(x: [n]f64, y: [m]f64) -> [n]f64 = for r < n => sum(for c < r => y[c] * x[r])",
            "f",
            serde_json::json!([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0]]),
        ),
        (
            "def f(x: [n]f64, y: [m]f64) -> [n][n]f64 =\n  for r < n, c < n => sum(for e < r => y[e] * x[c])",
            "f",
            serde_json::json!([[1.0, 2.0, 3.0], [1.0]]),
        ),
        // The first error is reported, however loops were fused.
        (
            "def f(v: [n]f64, k: i64) -> f64 =\n  let y = for j < n => v[j + k]\n  let q = 10 / (k - 1)\n  in sum(y) * f64(q)",
            "f",
            serde_json::json!([[1.0, 2.0], 1]),
        ),
        (
            "def f(v: [n]f64, k: i64) -> [n]f64 =\n  let y = for j < n => v[j + k]\n  let q = 10 / (k - 1)\n  in for i < n => y[i] * f64(q)",
            "f",
            serde_json::json!([[1.0, 2.0], 1]),
        ),
    ];
    for (src, func, args) in cases {
        let program = arrayad_frontend::compile("err.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
        let fid = program.find(func).unwrap();
        let ptypes = program.func(fid).param_types();
        let args: Vec<arrayad_ir::Value> =
            args.as_array().unwrap().iter().zip(&ptypes).map(|(j, t)| common::json_value(j, *t)).collect();
        let reference = arrayad_ir::interp::run(&program, fid, &args).expect_err("fails");
        assert!(reference.message.starts_with("err.arr:"), "{}", reference.message);
        let prim = common::ad::prepare(&program, fid).unwrap();
        let optimised = arrayad_ir::Program { file: "err.arr".into(), funcs: vec![prim.clone()] };
        let opt = arrayad_ir::interp::run(&optimised, arrayad_ir::FuncId(0), &args).expect_err("fails");
        assert_eq!(opt, reference, "{src}");
        for (b, jit) in common::jits("err.arr", std::slice::from_ref(&prim)) {
            let got = jit.call(&prim.name, &args).expect_err("fails");
            assert_eq!(got, reference, "{src} ({b:?})");
        }
    }
}

/// The bounds checks in the backend IR of `func`'s `kind` ("primal",
/// "jvp", "vjp") in `m`, compiled by `backend`: in Cranelift's IR the
/// checks' `icmp ult` (its loops compare signed), in LLVM's optimised IR
/// the calls reporting an index out of bounds (its own loops compare
/// `ult` too).
fn bounds_checks(m: &arrayad::Module, backend: arrayad::Backend, func: &str, kind: &str) -> usize {
    let ir = m.function(func).unwrap().backend_ir(kind).unwrap().expect("backend IR");
    let oob = format!("i32 {},", arrayad_ir::ErrorKind::IndexOutOfBounds as i32);
    let check = |l: &&str| match backend {
        arrayad::Backend::Llvm => l.contains("@arrayad_fail(") && l.contains(&oob),
        _ => l.contains("icmp") && l.contains(" ult "),
    };
    ir.lines().filter(check).count()
}

/// Triangular nests (`c < r < n`, `c <= r < n`) index without bounds
/// checks on the inner index (`known_in_bounds` in
/// `codegen/src/lower/expr.rs`), in the primal, the jvp (whose tangents are
/// checked at entry to have their primals' extents) and the vjp, while the
/// same nest over an array of another extent keeps its check (its failure
/// is in `runtime_errors_are_the_same_on_every_backend`; the values and
/// derivatives are the corpus's `triangular.arr`).
#[test]
fn triangular_nests_index_without_bounds_checks() {
    let src = "\
def below(x: [n]f64) -> [n]f64 = for r < n => sum(for c < r => x[c] * x[r])
def upto(x: [n]f64) -> [n]f64 = for r < n => maximum(for c < r + 1 => x[c]) * x[r]
def other(x: [n]f64, y: [m]f64) -> [n]f64 = for r < n => sum(for c < r => y[c] * x[r])
";
    for backend in common::api_backends() {
        let m = arrayad::Module::compile_with("tri.arr", src, arrayad::Options::backend(backend)).unwrap();
        let bounds_checks = |func: &str, kind: &str| bounds_checks(&m, backend, func, kind);
        for kind in ["primal", "jvp", "vjp"] {
            assert_eq!(bounds_checks("below", kind), 0, "below {kind} ({backend:?})");
            assert_eq!(bounds_checks("upto", kind), 0, "upto {kind} ({backend:?})");
            assert!(bounds_checks("other", kind) > 0, "other {kind} ({backend:?}): the check of y[c] is gone");
        }
    }
}

/// The points `j = 2 p + n mod 2` and `j + 1` of a loop over pairs `p <
/// n / 2` (the indices a loop run two iterations at a time,
/// `arrayad_ir::passes::jam`, computes) are below `n`, and index `x` of
/// extent `n` without bounds checks (`Halving` in
/// `codegen/src/lower/mod.rs`); `j + 2` keeps its check, and fails where
/// it is out of bounds. The values on every backend are the
/// interpreter's. (In a branch, so that the sum is not split out into a
/// parallel map, whose chunk function would take `n / 2` and `n mod 2` as
/// arguments, without what they are.)
#[test]
fn points_of_a_loop_over_pairs_index_without_bounds_checks() {
    let src = "\
def pairs(x: [n]f64) -> f64 =
  if n == 1 then 0.5 else sum(for p < n / 2 =>
    let j = 2 * p + (n - 2 * (n / 2))
    in x[j] * x[j + 1])
def beyond(x: [n]f64) -> f64 =
  if n == 1 then 0.5 else sum(for p < n / 2 =>
    let j = 2 * p + (n - 2 * (n / 2))
    in x[j] * x[j + 2])
";
    // The last pair's j + 2 is n: out of bounds once there is a pair.
    check_points_of_pairs("pairs.arr", src, ("pairs", "beyond"), 2);
}

/// The points of a loop run four iterations at a time
/// (`arrayad_ir::passes::jam` on LLVM): `j = 4 p + rest` to `j + 3` for
/// `p < n / 4`, `rest = n - 4 (n / 4)` (a reverse loop), `4 p + 3`
/// (forward), and those left over, `4 (n / 4) + t` and `t` for `t <
/// rest`, are below `n`, and index `x` of extent `n` without bounds checks
/// (`Halving` in `codegen/src/lower/mod.rs`); `j + 4` keeps its check, and
/// fails once there is a group. The values on every backend are the
/// interpreter's.
#[test]
fn points_of_a_loop_over_groups_index_without_bounds_checks() {
    let src = "\
def groups(x: [n]f64) -> f64 =
  if n == 1 then 0.5 else
    let rest = n - 4 * (n / 4)
    in sum(for p < n / 4 =>
         let j = 4 * p + rest
         in x[j] * x[j + 1] + x[j + 2] * x[j + 3] + x[4 * p + 3])
       + sum(for t < rest => x[4 * (n / 4) + t] * x[t])
def beyond(x: [n]f64) -> f64 =
  if n == 1 then 0.5 else
    let rest = n - 4 * (n / 4)
    in sum(for p < n / 4 =>
         let j = 4 * p + rest
         in x[j] * x[j + 4])
       + sum(for t < rest => x[4 * (n / 4) + t] * x[t])
";
    check_points_of_pairs("groups.arr", src, ("groups", "beyond"), 4);
}

/// The points `2 p` and `min(2 p + 1, n - 1)` of a comprehension over
/// `p < n / 2 + n mod 2` (the indices of a comprehension of rows run two
/// points at a time, its last pair a point twice when `n` is odd:
/// `arrayad_ir::passes::jam_builds`) are below `n`, and index `x` of
/// extent `n` without bounds checks (`Halving::Below` in
/// `codegen/src/lower/mod.rs`); `min(2 p + 2, n)` keeps its check, and
/// fails. The values on every backend are the interpreter's.
#[test]
fn points_of_pairs_with_a_last_point_twice_index_without_bounds_checks() {
    let src = "\
def twice(x: [n]f64) -> f64 =
  if n == 0 then 0.5 else sum(for p < n / 2 + (n - 2 * (n / 2)) =>
    let i0 = 2 * p
    let i1 = min(2 * p + 1, n - 1)
    in x[i0] * x[i1])
def beyond(x: [n]f64) -> f64 =
  if n == 0 then 0.5 else sum(for p < n / 2 + (n - 2 * (n / 2)) =>
    let i0 = 2 * p
    let i1 = min(2 * p + 2, n)
    in x[i0] * x[i1])
";
    // The last pair's second point is `n`: out of bounds.
    check_points_of_pairs("twice.arr", src, ("twice", "beyond"), 1);
    // The minimum of `n - 1` and a value that is not a point's successor
    // (the first pair's is `-1`) keeps its check.
    let before = src.replace("min(2 * p + 2, n)", "min(2 * p - 1, n - 1)");
    check_points_of_pairs("twice.arr", &before, ("twice", "beyond"), 1);
}

/// The run-time range checks of slices in the backend IR of `func`'s
/// `kind` in `m`, compiled by `backend`: the calls reporting a slice out of
/// range (in Cranelift's IR, `call fnN(v0, vK, ..)  ; vK = KIND, ..`: the
/// failure's kind is its second argument, a constant).
fn slice_checks(m: &arrayad::Module, backend: arrayad::Backend, func: &str, kind: &str) -> usize {
    let ir = m.function(func).unwrap().backend_ir(kind).unwrap().expect("backend IR");
    let code = arrayad_ir::ErrorKind::SliceOutOfRange as i32;
    let llvm = format!("i32 {code},");
    let check = |l: &&str| match backend {
        arrayad::Backend::Llvm => l.contains("@arrayad_fail(") && l.contains(&llvm),
        _ => {
            let Some((call, consts)) = l.split_once(';') else { return false };
            let Some(args) = call.split_once("call fn").and_then(|(_, rest)| rest.split_once('(')) else {
                return false;
            };
            let second = args.1.split([',', ')']).nth(1).map(str::trim);
            second.is_some_and(|v| consts.split(',').any(|c| c.trim() == format!("{v} = {code}")))
        }
    };
    ir.lines().filter(check).count()
}

/// Prefixes `a[0:r]` and `a[0:r + 1]` of the rows of a triangle, `r` an
/// index below `a`'s extent, and `a[0:n]`, `n` the extent, are in range
/// and compiled without a range check (`Lower::slice` in
/// `codegen/src/lower/expr.rs`), in the primal and the vjp (whose
/// cotangent slices mirror them), on every backend; the same prefixes of
/// an array of another extent keep their checks, and fail as the
/// interpreter does. The values on every backend are the interpreter's.
#[test]
fn prefixes_of_the_rows_of_a_triangle_are_sliced_without_range_checks() {
    let src = "\
def within(x: [n]f64, l: [m][n]f64) -> f64 =
  if n == 1 then 0.5 else
    sum(for r < n => dot(l[0][0:r], x[0:r]) * x[r] + sum(x[0:r + 1]) + sum(l[0][0:n]))
def beyond(x: [n]f64, l: [m][k]f64) -> f64 =
  if n == 1 then 0.5 else
    sum(for r < n => dot(l[0][0:r], x[0:r]) * x[r] + sum(x[0:r + 1]))
";
    for backend in common::api_backends() {
        let m = arrayad::Module::compile_with("prefix.arr", src, arrayad::Options::backend(backend)).unwrap();
        for kind in ["primal", "vjp"] {
            assert_eq!(slice_checks(&m, backend, "within", kind), 0, "within {kind} ({backend:?})");
            assert!(slice_checks(&m, backend, "beyond", kind) > 0, "beyond {kind} ({backend:?}): its check is gone");
        }
    }
    let program = arrayad_frontend::compile("prefix.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let array = |dims: Vec<usize>| {
        let len = dims.iter().product::<usize>();
        let xs = (0..len).map(|k| 0.5 + k as f64 * 0.25).collect();
        arrayad_ir::Value::Array(arrayad_ir::ArrayValue::f64(dims, xs).unwrap())
    };
    for n in 0..7usize {
        for (func, k) in [("within", n), ("beyond", 3), ("beyond", n + 1)] {
            let args = [array(vec![n]), array(vec![2, k])];
            let fid = program.find(func).unwrap();
            let want = arrayad_ir::interp::run(&program, fid, &args);
            // `l[0][0:r]` is out of range once `r` passes `k`.
            assert_eq!(want.is_err(), n > k + 1 && n != 1, "{func}, n = {n}, k = {k}");
            let prim = common::ad::prepare(&program, fid).unwrap();
            for (b, jit) in common::jits("prefix.arr", std::slice::from_ref(&prim)) {
                let got = jit.call(&prim.name, &args);
                match (&want, &got) {
                    (Ok(w), Ok(g)) => common::assert_bitwise(&format!("{func}, n = {n}, k = {k} ({b:?})"), w, g),
                    (Err(w), Err(g)) => assert_eq!(g, w, "{func}, n = {n}, k = {k} ({b:?})"),
                    _ => panic!("{func}, n = {n}, k = {k} ({b:?}): {want:?} against {got:?}"),
                }
            }
        }
    }
}

/// Of the definitions `(within, beyond)` of `x: [n]f64` in `src`: `within`
/// indexes `x` without bounds checks, in its primal and its vjp, on every
/// backend; `beyond` keeps its checks, and fails from `n = fails_from`;
/// both give the interpreter's values and errors for `n < 8`.
fn check_points_of_pairs(file: &str, src: &str, (within, beyond): (&str, &str), fails_from: usize) {
    for backend in common::api_backends() {
        let m = arrayad::Module::compile_with(file, src, arrayad::Options::backend(backend)).unwrap();
        let bounds_checks = |func: &str, kind: &str| bounds_checks(&m, backend, func, kind);
        for kind in ["primal", "vjp"] {
            assert_eq!(bounds_checks(within, kind), 0, "{within} {kind} ({backend:?})");
            assert!(bounds_checks(beyond, kind) > 0, "{beyond} {kind} ({backend:?}): its check is gone");
        }
    }
    let program = arrayad_frontend::compile(file, src).unwrap_or_else(|d| panic!("{}", d.render()));
    for n in 0..8usize {
        let xs: Vec<f64> = (0..n).map(|k| 0.5 + k as f64 * 0.25).collect();
        let args = [arrayad_ir::Value::Array(arrayad_ir::ArrayValue::f64(vec![n], xs).unwrap())];
        for func in [within, beyond] {
            let fid = program.find(func).unwrap();
            let want = arrayad_ir::interp::run(&program, fid, &args);
            let prim = common::ad::prepare(&program, fid).unwrap();
            for (b, jit) in common::jits(file, std::slice::from_ref(&prim)) {
                let got = jit.call(&prim.name, &args);
                match (&want, &got) {
                    (Ok(w), Ok(g)) => common::assert_bitwise(&format!("{func}, n = {n} ({b:?})"), w, g),
                    (Err(w), Err(g)) => assert_eq!(g, w, "{func}, n = {n} ({b:?})"),
                    _ => panic!("{func}, n = {n} ({b:?}): {want:?} against {got:?}"),
                }
            }
            assert_eq!(want.is_err(), func == beyond && n >= fails_from, "{func}, n = {n}");
        }
    }
}

/// Rows of a cube read along the loop over `c` in a sum and in a
/// comprehension, and added into along it by the vjp's backward loops,
/// from addresses computed before the loop (`Lower::hoist_loop_rows`):
/// the primal's and the vjp's values
/// on every backend are the interpreter's bits for `m` up to the rows'
/// extent, and past it (`c` checked alone) the interpreter's error.
#[test]
fn rows_read_along_a_loop_fail_as_the_interpreter_does() {
    let file = "triangular.arr";
    let src =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs").join(file))
            .expect("the corpus program");
    let program = arrayad_frontend::compile(file, &src).unwrap_or_else(|d| panic!("{}", d.render()));
    for name in ["cube_rows", "cube_maps"] {
        let fid = program.find(name).unwrap();
        let prim = common::ad::prepare(&program, fid).unwrap();
        let vjp = common::ad::vjp(&program, fid, &[true, true, false]).unwrap();
        check_rows_read_along_a_loop(file, &prim, &vjp);
    }
}

/// [`rows_read_along_a_loop_fail_as_the_interpreter_does`] for one
/// function: its primal `prim` and its `vjp`.
fn check_rows_read_along_a_loop(file: &str, prim: &arrayad_ir::Function, vjp: &arrayad_ir::Function) {
    use arrayad_ir::{ArrayValue, Value};
    let (k, d, e) = (3usize, 2usize, 4usize);
    let l: Vec<f64> = (0..k * d * e).map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.25).collect();
    let x: Vec<f64> = (0..e).map(|i| 1.0 - i as f64 * 0.375).collect();
    for m in 0..=e + 1 {
        let args = vec![
            Value::Array(ArrayValue::f64(vec![k, d, e], l.clone()).unwrap()),
            Value::Array(ArrayValue::f64(vec![e], x.clone()).unwrap()),
            Value::I64(m as i64),
        ];
        let mut vargs = args.clone();
        vargs.push(Value::F64(1.0));
        for (func, args) in [(prim, &args), (vjp, &vargs)] {
            let single = arrayad_ir::Program { file: file.into(), funcs: vec![func.clone()] };
            let want = arrayad_ir::interp::run(&single, arrayad_ir::FuncId(0), args);
            assert_eq!(want.is_err(), m > e, "{} with m = {m}", func.name);
            for (b, jit) in common::jits(file, std::slice::from_ref(func)) {
                let got = jit.call(&func.name, args);
                match (&want, &got) {
                    (Ok(w), Ok(g)) => common::assert_bitwise(&format!("{}, m = {m} ({b:?})", func.name), w, g),
                    (Err(w), Err(g)) => assert_eq!(g, w, "{}, m = {m} ({b:?})", func.name),
                    _ => panic!("{}, m = {m} ({b:?}): {want:?} against {got:?}", func.name),
                }
            }
        }
    }
}

/// The generated-program check on many more seeds (a long run:
/// `cargo test --release --test differential -- --ignored`; the number of
/// programs is `ARRAYAD_FUZZ_PROGRAMS`, default 2000).
#[test]
#[ignore]
fn generated_programs_agree_long_run() {
    let n: u64 = std::env::var("ARRAYAD_FUZZ_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(2000);
    for seed in 1000..1000 + n {
        check_case(&common::generate::program(seed));
    }
}

#[test]
fn nested_loops_differentiate_in_linear_time() {
    // sum(for ... sum(for ... )) nested 24 deep: each loop body is
    // differentiated once, not twice per level (which took minutes).
    let mut expr = String::from("x[0]");
    for k in 0..24 {
        expr = format!("sum(for i{k} < 1 => {expr} * x[i{k}])");
    }
    let src = format!("def f(x: [n]f64) -> f64 =\n  {expr}\n");
    let program = arrayad_frontend::compile("deep.arr", &src).unwrap_or_else(|d| panic!("{}", d.render()));
    let fid = program.find("f").unwrap();
    let start = std::time::Instant::now();
    common::ad::vjp(&program, fid, &[true]).unwrap();
    common::ad::jvp(&program, fid, &[true]).unwrap();
    assert!(start.elapsed().as_secs_f64() < 10.0, "took {:?}", start.elapsed());
}

/// A loop state that never depends on an active value (a counter array
/// next to an accumulator) gets no tangent and no cotangent: the backward
/// loop allocates no accumulator per iteration, and the gradient is right.
#[test]
fn inactive_loop_states_get_no_cotangents() {
    let src = "def f(x: [n]f64, t: i64) -> f64 =
  let (c, s) = loop (c, s) = (for j < n => 0.0, 0.0) for i < t do (c + 1.0, s + x[i % n] * c[i % n])
  in s
";
    let program = arrayad_frontend::compile("act.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let fid = program.find("f").unwrap();
    let vjp = common::ad::vjp(&program, fid, &[true, false]).unwrap();
    fn allocations_in_loops(b: &arrayad_ir::Block, inside: bool) -> usize {
        use arrayad_ir::{Expr, StmtKind};
        let mut n = 0;
        for s in &b.stmts {
            if inside && matches!(&s.kind, StmtKind::Let { expr: Expr::ZerosLike(_) | Expr::Zeros(_), .. }) {
                n += 1;
            }
            let is_loop = matches!(
                &s.kind,
                StmtKind::For { .. } | StmtKind::Let { expr: Expr::Loop { .. } | Expr::Build { .. }, .. }
            );
            for c in arrayad_ir::visit::child_blocks(&s.kind) {
                n += allocations_in_loops(c, inside || is_loop);
            }
        }
        n
    }
    assert_eq!(allocations_in_loops(&vjp.body, false), 0, "{}", arrayad_ir::printer::print_function(&vjp, None));
    check_case(&Case {
        file: "act.arr".into(),
        source: src.into(),
        func: "f".into(),
        args: serde_json::json!([[0.5, -1.0, 2.0], 7]),
        finite_differences: true,
    });
}

/// Checkpointed loops (`AdOptions::checkpoint`) give the gradient of the
/// taped ones bit for bit (the segments recompute the same operations), on
/// every corpus program and generated program, on the interpreter and every
/// backend. A loop whose array state changes shape cannot be checkpointed:
/// it fails with the size mismatch of the saved state (documented), never
/// a wrong value.
#[test]
fn checkpointed_gradients_equal_taped_gradients() {
    use arrayad_ir::{interp, FuncId, Program, Scalar};
    let mut cases = corpus_cases();
    cases.extend((0..20).map(common::generate::program));
    let mut compared = 0;
    for case in &cases {
        let program = arrayad_frontend::compile(&case.file, &case.source).unwrap();
        let program = arrayad_ad::expand_derivatives(program).unwrap();
        let fid = program.find(&case.func).unwrap();
        let ptypes = program.func(fid).param_types();
        let args: Vec<arrayad_ir::Value> =
            case.args.as_array().unwrap().iter().zip(&ptypes).map(|(j, t)| common::json_value(j, *t)).collect();
        let active: Vec<bool> = ptypes.iter().map(|t| t.elem == Scalar::F64).collect();
        let plain = common::ad::derive_all(&program, fid, &active).unwrap();
        let opts = arrayad_ad::AdOptions { checkpoint: true };
        let cp = common::ad::derive_with(&program, fid, &active, opts).unwrap();
        arrayad_ir::verify::verify_function(&cp.vjp, None)
            .unwrap_or_else(|e| panic!("{e}\n{}", arrayad_ir::printer::print_function(&cp.vjp, None)));
        let reference = interp::run(&program, fid, &args).unwrap();
        let mut vargs = args.clone();
        for r in reference.iter().filter(|v| v.ty().elem == Scalar::F64) {
            vargs.push(match r {
                arrayad_ir::Value::Array(a) => arrayad_ir::Value::Array(arrayad_ir::ArrayValue {
                    shape: a.shape.clone(),
                    data: arrayad_ir::ArrayData::F64(vec![0.5; a.data.len()]),
                }),
                _ => arrayad_ir::Value::F64(0.5),
            });
        }
        let single = |f: &arrayad_ir::Function| Program { file: case.file.clone(), funcs: vec![f.clone()] };
        let want = interp::run(&single(&plain.vjp), FuncId(0), &vargs).unwrap();
        let got = interp::run(&single(&cp.vjp), FuncId(0), &vargs);
        let got = match got {
            Err(e) if e.kind == arrayad_ir::ErrorKind::SizeMismatch && e.message.contains("saved_") => continue,
            r => r.unwrap_or_else(|e| panic!("{}:{} checkpointed: {e}", case.file, case.func)),
        };
        assert_eq!(got, want, "{}:{} checkpointed vjp (interpreter)", case.file, case.func);
        for (b, jit) in common::jits(&case.file, std::slice::from_ref(&cp.vjp)) {
            let j = jit.call(&cp.vjp.name, &vargs).unwrap_or_else(|e| panic!("{}:{} {b:?}: {e}", case.file, case.func));
            assert_eq!(j, want, "{}:{} checkpointed vjp ({b:?})", case.file, case.func);
        }
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} cases compared");
}

/// A branch whose residuals are scalars yields them as results of the
/// forward `if` instead of taping them: outside loops the vjp touches no
/// tape, inside a comprehension the comprehension stacks them by index (as
/// any scalar value of its body: no tape either), and a branch with an
/// array residual still pushes and pops. The gradients are right in every
/// case.
#[test]
fn branch_residuals_are_results_of_the_branch() {
    use arrayad_ir::{Block, Expr, StmtKind};
    /// The pushes of `b` at any depth, and those inside branches.
    fn pushes(b: &Block, in_branch: bool) -> (usize, usize) {
        let mut n = (0, 0);
        for s in &b.stmts {
            let add = |n: &mut (usize, usize), m: (usize, usize)| {
                n.0 += m.0;
                n.1 += m.1;
            };
            match &s.kind {
                StmtKind::Push(_) => {
                    n.0 += 1;
                    n.1 += in_branch as usize;
                }
                StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. }
                | StmtKind::If { then_branch, else_branch, .. } => {
                    add(&mut n, pushes(then_branch, true));
                    add(&mut n, pushes(else_branch, true));
                }
                k => {
                    for c in arrayad_ir::visit::child_blocks(k) {
                        add(&mut n, pushes(c, in_branch));
                    }
                }
            }
        }
        n
    }
    let src = "def outside(x: [2]f64) -> f64 =
  let r = x[0] * x[0] + x[1] * x[1]
  in if r > 1.0 then sin(sqrt(r)) * cos(x[1]) else exp(x[0]) * x[1]
def inside(x: [n]f64) -> f64 =
  sum(for i < n => if x[i] > 0.0 then sin(x[i]) * cos(x[i]) else x[i] * exp(x[i]))
def with_array(x: [n]f64) -> f64 =
  if x[0] > 0.0 then let y = for i < n => sin(x[i]) * x[0] in sum(y * y) else sum(x)
";
    let program = arrayad_frontend::compile("branches.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    for (func, want, args) in [
        ("outside", (0, 0), serde_json::json!([[0.8, 0.9]])),
        ("outside", (0, 0), serde_json::json!([[0.3, -0.2]])),
        ("inside", (0, 0), serde_json::json!([[0.5, -1.5, 2.0, -0.25]])),
        ("with_array", (1, 1), serde_json::json!([[0.7, -0.4, 1.3]])),
    ] {
        let fid = program.find(func).unwrap();
        let vjp = common::ad::vjp(&program, fid, &[true]).unwrap();
        let text = arrayad_ir::printer::print_function(&vjp, None);
        let (all, in_branches) = pushes(&vjp.body, false);
        assert_eq!((all.min(1), in_branches.min(1)), want, "{func}: pushes (any, in branches)\n{text}");
        check_case(&Case {
            file: "branches.arr".into(),
            source: src.into(),
            func: func.into(),
            args,
            finite_differences: true,
        });
    }
}

/// A comprehension's scalar row that reverse mode needs and cannot
/// recompute cheaply (the `exp(x[i] - a)` of a logsumexp) is read back from
/// the comprehension's array rather than taped, and the derivative of
/// `maximum` keeps no mask of the array's length: the vjp of a logsumexp
/// pushes nothing and builds one array, the exponentials (beside the
/// contributions to the maximum's cotangent, which it sums without an
/// array, `arrayad_ir::passes::reductions`). The gradients
/// are right, with ties of the maximum (split evenly), with a nested
/// comprehension (whose rows are taped, as before) and with comprehensions
/// fused into one of two results.
#[test]
fn comprehension_rows_are_read_back_rather_than_taped() {
    use arrayad_ir::{Block, Expr, ReduceOp, StmtKind, VarId};
    use std::collections::HashSet;
    /// The pushes and the comprehensions of `b` that are arrays, at any
    /// depth (`summed`: the comprehensions that only a `sum` reads, which
    /// the lowering sums without an array).
    fn census(b: &Block, summed: &HashSet<VarId>) -> (usize, usize) {
        let mut n = (0, 0);
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Push(_) => n.0 += 1,
                StmtKind::Let { vars, expr: Expr::Build { .. } } if !summed.contains(&vars[0]) => n.1 += 1,
                _ => {}
            }
            for c in arrayad_ir::visit::child_blocks(&s.kind) {
                let m = census(c, summed);
                n = (n.0 + m.0, n.1 + m.1);
            }
        }
        n
    }
    let src = "def lse(x: [n]f64) -> f64 =
  let a = maximum(x)
  in a + log(sum(exp(x - a)))
def rows(x: [n][m]f64) -> f64 =
  sum(for i < n => let e = for j < m => tanh(x[i, j]) * x[i, 0] in sum(e * e) + minimum(e))
def pairs(x: [n]f64) -> f64 =
  let s = for i < n => sin(x[i])
  let c = for i < n => exp(x[i])
  in dot(s, c) + sum(c)
";
    let program = arrayad_frontend::compile("rows.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let fid = program.find("lse").unwrap();
    let vjp = common::ad::vjp(&program, fid, &[true]).unwrap();
    let text = arrayad_ir::printer::print_function(&vjp, None);
    let uses = arrayad_ir::visit::use_counts(&vjp.body, vjp.vars.len());
    let mut summed = HashSet::new();
    arrayad_ir::visit::for_each_block(&vjp.body, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::Let { expr: Expr::Reduce { op: ReduceOp::Sum, array }, .. } = &s.kind {
                if uses[array.index()] == 1 {
                    summed.insert(*array);
                }
            }
        }
    });
    assert_eq!(census(&vjp.body, &summed), (0, 1), "lse: (pushes, comprehensions)\n{text}");
    // The backward loops of the exponentials and of the maximum are one
    // loop, which adds into no scalar (the maximum's cotangent is a sum).
    let loops: Vec<&Block> = vjp
        .body
        .stmts
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::For { body, .. } => Some(body),
            _ => None,
        })
        .collect();
    assert_eq!(loops.len(), 1, "lse: one backward loop\n{text}");
    assert!(!loops[0].stmts.iter().any(|s| matches!(s.kind, StmtKind::Assign { .. })), "{text}");
    for (func, args) in [
        ("lse", serde_json::json!([[0.5, 2.0, -1.0, 2.0, 0.25]])),
        ("lse", serde_json::json!([[3.0]])),
        ("rows", serde_json::json!([[[0.5, -0.3, 0.2], [1.5, 0.7, -0.9]]])),
        ("pairs", serde_json::json!([[0.1, -0.6, 1.2, 0.4]])),
    ] {
        check_case(&Case {
            file: "rows.arr".into(),
            source: src.into(),
            func: func.into(),
            args,
            finite_differences: true,
        });
    }
}

/// A backward loop adding into rows of one accumulator one and two
/// elements apart (`acc[0:n]`, `acc[1:n + 1]`, `acc[2:n + 2]`), run
/// forward: every backend gives the interpreter's bits. Cranelift runs
/// such loops on pairs of iterations only when no two rows are one
/// element apart (`codegen/src/lower/pairs.rs`); pairs here would add the
/// three terms of an element in another order.
#[test]
fn backward_rows_one_element_apart_keep_their_order() {
    use arrayad_ir::builder::Builder;
    use arrayad_ir::{ArrayValue, Atom, BinOp, Expr, FuncId, Function, Program, StmtKind, Type, Value};
    let f1 = Type { elem: arrayad_ir::Scalar::F64, rank: 1 };
    let (mut f, ps) = Function::with_params("shifted", &[f1, f1], &[f1]);
    let (x, y) = (ps[0], ps[1]);
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: y, axis: 0 });
    let n1 = b.binary(BinOp::Add, n, Atom::I64(1));
    let n2 = b.binary(BinOp::Add, n, Atom::I64(2));
    let acc = b.let1("acc", Expr::ZerosLike(x), f1);
    let mut rows = Vec::new();
    for (lo, hi) in [(Atom::I64(0), n), (Atom::I64(1), n1), (Atom::I64(2), n2)] {
        let row = b.let1("row", Expr::Slice { array: acc, lo, hi }, f1);
        // (What the lowering needs to know every row holds `n` elements.)
        let d = b.let_one("d", Expr::Dim { array: row, axis: 0 });
        b.stmt(StmtKind::CheckSize { a: d, b: n, what: "the row's length".into() });
        rows.push(row);
    }
    let i = b.var("i", Type::scalar(arrayad_ir::Scalar::I64));
    b.begin_block();
    let e = b.let_one("e", Expr::Index { array: y, indices: vec![Atom::Var(i)] });
    for (k, row) in rows.iter().enumerate() {
        let v = b.binary(BinOp::Mul, e, Atom::F64(k as f64 + 1.0));
        b.stmt(StmtKind::AccAdd { acc: *row, indices: vec![Atom::Var(i)], value: v });
    }
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse: false, body });
    f.body = b.finish(vec![Atom::Var(acc)]);
    arrayad_ir::verify::verify_function(&f, None).unwrap_or_else(|e| panic!("{e}"));
    let program = Program { file: "shifted".into(), funcs: vec![f.clone()] };
    for n in [2usize, 3, 8, 9] {
        // Magnitudes far apart, so that the order of the additions shows.
        let ys: Vec<f64> = (0..n).map(|k| [1e16, 1.0, -1e16, 3.0, 0.5][k % 5] * (1.0 + k as f64 / 7.0)).collect();
        let args = [
            Value::Array(ArrayValue::f64(vec![n + 2], vec![0.0; n + 2]).unwrap()),
            Value::Array(ArrayValue::f64(vec![n], ys).unwrap()),
        ];
        let want = arrayad_ir::interp::run(&program, FuncId(0), &args).unwrap();
        for (backend, jit) in common::jits("shifted", std::slice::from_ref(&f)) {
            let got = jit.call("shifted", &args).unwrap();
            let bits = |v: &[Value]| v[0].f64_elements().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{backend:?}, n = {n}");
        }
    }
}

/// A loop adding three values into the same element of an accumulator,
/// one statement after another (`acc[i] += y[i]; acc[i] += z[i]; acc[i] +=
/// -0.5 * y[i]`, what a jammed backward loop does): every backend gives the
/// interpreter's bits. The lowering loads the element once and stores it
/// once (`codegen/src/lower/stmt.rs`, and on pairs of iterations on
/// Cranelift, `pairs.rs`), adding in the statements' order.
#[test]
fn consecutive_adds_into_one_element_keep_their_order() {
    use arrayad_ir::builder::Builder;
    use arrayad_ir::{ArrayValue, Atom, BinOp, Expr, FuncId, Function, Program, StmtKind, Type, Value};
    let f1 = Type { elem: arrayad_ir::Scalar::F64, rank: 1 };
    let (mut f, ps) = Function::with_params("thrice", &[f1, f1], &[f1]);
    let (y, z) = (ps[0], ps[1]);
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: y, axis: 0 });
    let m = b.let_one("m", Expr::Dim { array: z, axis: 0 });
    b.stmt(StmtKind::CheckSize { a: m, b: n, what: "the lengths".into() });
    let acc = b.let1("acc", Expr::ZerosLike(y), f1);
    let i = b.var("i", Type::scalar(arrayad_ir::Scalar::I64));
    b.begin_block();
    let u = b.let_one("u", Expr::Index { array: y, indices: vec![Atom::Var(i)] });
    let v = b.let_one("v", Expr::Index { array: z, indices: vec![Atom::Var(i)] });
    let w = b.binary(BinOp::Mul, u, Atom::F64(-0.5));
    for value in [u, v, w] {
        b.stmt(StmtKind::AccAdd { acc, indices: vec![Atom::Var(i)], value });
    }
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse: false, body });
    f.body = b.finish(vec![Atom::Var(acc)]);
    arrayad_ir::verify::verify_function(&f, None).unwrap_or_else(|e| panic!("{e}"));
    let program = Program { file: "thrice".into(), funcs: vec![f.clone()] };
    for n in [1usize, 2, 7, 8] {
        // (1e16 + 1) - 5e15 is 5e15; (-5e15 + 1) + 1e16 would be 5e15 + 1.
        let ys: Vec<f64> = (0..n).map(|k| [1e16, -0.0, 3.0, -1e16][k % 4]).collect();
        let zs: Vec<f64> = (0..n).map(|k| [1.0, -0.0, 1e-17, 0.5][k % 4]).collect();
        let args =
            [Value::Array(ArrayValue::f64(vec![n], ys).unwrap()), Value::Array(ArrayValue::f64(vec![n], zs).unwrap())];
        let want = arrayad_ir::interp::run(&program, FuncId(0), &args).unwrap();
        assert_eq!(want[0].f64_elements().unwrap()[0], 5e15, "the interpreter adds in order");
        for (backend, jit) in common::jits("thrice", std::slice::from_ref(&f)) {
            let got = jit.call("thrice", &args).unwrap();
            let bits = |v: &[Value]| v[0].f64_elements().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{backend:?}, n = {n}");
        }
    }
}
