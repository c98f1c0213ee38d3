//! Unroll-and-jam of comprehensions of numbers
//! (`arrayad_ir::passes::jam_builds`, run by code generation on every
//! function it compiles): a comprehension whose body loops over counts that
//! do not depend on the point runs two points per iteration, with the bits
//! of the original under the reference interpreter, and the compiled
//! primal, jvp and vjp give the interpreter's bits on every backend, for
//! point counts from 0 to 9; comprehensions that may fail, or share
//! nothing between points, are left as they are; the first error is the
//! one the comprehension reports.

mod common;

use arrayad::{Arg, Backend, Module, Options};
use arrayad_ir::passes::jam_builds::jam_comprehensions;
use arrayad_ir::{interp, FuncId, Program, Value};

/// The prepared primal of `func` in `src`.
fn primal(src: &str, func: &str) -> arrayad_ir::Function {
    let program = arrayad_frontend::compile("jam.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let fid = program.find(func).unwrap();
    common::ad::prepare(&program, fid).unwrap()
}

fn run(f: &arrayad_ir::Function, args: &[Value]) -> Result<Vec<Value>, arrayad_ir::RuntimeError> {
    interp::run(&Program { file: "jam.arr".into(), funcs: vec![f.clone()] }, FuncId(0), args)
}

/// Definitions that qualify, each `f(a: [n][m]f64, x: [m]f64)`: a map of
/// reductions over the points `i < n`, with shared loads (`x`), a
/// triangle of rows of the point's own length (`dot` of slices), an extreme
/// of an array whose length does not depend on the point, two levels of
/// comprehensions, a shared statement and a branch.
const QUALIFY: &str = "\
def matvec(a: [n][m]f64, x: [m]f64) -> [n]f64 = for i < n => sum(for j < m => a[i, j] * x[j])
def triangle(a: [n][m]f64, x: [m]f64) -> [n]f64 =
  for i < n => sum(for r < m => x[r] * dot(a[i][0:r], x[0:r]))
def lse(a: [n][m]f64, x: [m]f64) -> [n]f64 =
  for i < n =>
    let t = for j < m => a[i, j] - x[j]
    let mx = maximum(t)
    in mx + log(sum(for j < m => exp(t[j] - mx)))
def nested(a: [n][m]f64, x: [m]f64) -> [n]f64 =
  for i < n =>
    let q = for r < m => a[i, r] * sum(for c < m => if c < r then a[i, c] * x[c] else x[r])
    in sum(for r < m => q[r] * q[r]) - x[0] * 0.0
def total(a: [n][m]f64, x: [m]f64) -> f64 =
  sum(for i < n => let s = sum(for j < m => a[i, j] * x[j]) in if s > 0.0 then s * s else sqrt(1.0 + s * s))
";

/// Definitions left as they are: the body may fail (`a[i, j + 1]`), has no
/// comprehension, or only comprehensions whose counts depend on the point.
const LEFT: &str = "\
def fails(a: [n][m]f64, x: [m]f64) -> [n]f64 = for i < n => sum(for j < m => a[i, j + 1] * x[j])
def flat(a: [n][m]f64, x: [m]f64) -> [n]f64 = for i < n => a[i, 0] * x[0]
def ragged(a: [n][m]f64, x: [m]f64) -> [n]f64 = for i < n => sum(for j < i => a[i, j] * x[j])
";

/// Values of spread magnitudes and both signs (the order of additions
/// shows in the bits).
fn data(len: usize, seed: u64) -> Vec<f64> {
    let mut rng = common::Rng(seed);
    (0..len).map(|_| (rng.unit() - 0.5) * 10f64.powi((rng.below(9) as i32) - 4)).collect()
}

fn args(n: usize, m: usize, seed: u64) -> Vec<Value> {
    vec![
        Value::Array(arrayad_ir::ArrayValue::f64(vec![n, m], data(n * m, seed)).unwrap()),
        Value::Array(arrayad_ir::ArrayValue::f64(vec![m], data(m, seed + 1)).unwrap()),
    ]
}

fn names(src: &str) -> Vec<&str> {
    src.lines().filter_map(|l| l.strip_prefix("def ")).map(|l| l.split('(').next().unwrap()).collect()
}

#[test]
fn jammed_comprehensions_keep_the_interpreters_bits() {
    for name in names(QUALIFY) {
        let original = primal(QUALIFY, name);
        let mut jammed = original.clone();
        assert!(jam_comprehensions(&mut jammed), "{name} is jammed");
        arrayad_ir::verify::verify_program(&Program { file: "jam.arr".into(), funcs: vec![jammed.clone()] })
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for n in 0..10 {
            for m in [1, 3, 8, 11] {
                let a = args(n, m, (n * 100 + m) as u64);
                let want = run(&original, &a).unwrap();
                let got = run(&jammed, &a).unwrap();
                common::assert_bitwise(&format!("{name} n={n} m={m}"), &want, &got);
            }
        }
    }
    for name in names(LEFT) {
        let mut f = primal(LEFT, name);
        assert!(!jam_comprehensions(&mut f), "{name} is left as it is");
    }
}

/// The primal, the jvp and the vjp of every definition, compiled (jammed)
/// on every backend, give the interpreter's bits.
#[test]
fn compiled_derivatives_of_jammed_code_are_the_interpreters() {
    let src = format!("{QUALIFY}{LEFT}");
    let compile = |b: Backend| Module::compile_with("jam.arr", &src, Options::backend(b)).expect("compiles");
    let reference = compile(Backend::Interp);
    for backend in common::api_backends() {
        let module = compile(backend);
        for name in names(&src) {
            let (f, r) = (module.function(name).unwrap(), reference.function(name).unwrap());
            for (n, m) in [(0, 3), (1, 3), (2, 1), (5, 8), (6, 11), (9, 9)] {
                // `fails` reads `a[i, m]`: every point fails unless there
                // are none.
                if name == "fails" && n > 0 {
                    continue;
                }
                let (a, x) = (data(n * m, n as u64), data(m, m as u64 + 7));
                let (ta, tx) = (data(n * m, 3), data(m, 5));
                let args = [Arg::Array { data: &a, shape: &[n, m] }, Arg::Vector(&x)];
                let what = format!("{name} n={n} m={m} ({backend:?})");
                common::assert_bitwise(&what, &f.call(&args).unwrap(), &r.call(&args).unwrap());
                let tangents = [Some(Arg::Array { data: &ta, shape: &[n, m] }), Some(Arg::Vector(&tx))];
                let (got, want) = (f.jvp(&args, &tangents).unwrap(), r.jvp(&args, &tangents).unwrap());
                let tangent = |t: Vec<Option<Value>>| t.into_iter().flatten().collect::<Vec<_>>();
                common::assert_bitwise(&format!("{what}: jvp"), &tangent(got.tangent), &tangent(want.tangent));
                let ones = vec![1.5; n];
                let cotangent = [Some(if name == "total" { Arg::F64(1.5) } else { Arg::Vector(&ones) })];
                let (got, want) = (f.vjp(&args, &cotangent).unwrap(), r.vjp(&args, &cotangent).unwrap());
                for p in ["a", "x"] {
                    let (g, w) = (got.cotangent.f64s(p).unwrap(), want.cotangent.f64s(p).unwrap());
                    let (g, w): (Vec<u64>, Vec<u64>) =
                        (g.iter().map(|v| v.to_bits()).collect(), w.iter().map(|v| v.to_bits()).collect());
                    assert_eq!(g, w, "{what}: vjp {p}");
                }
            }
        }
    }
}

/// An extreme of an empty array fails for every point: the jammed
/// comprehension reports the error the comprehension reports, and none
/// when there are no points.
#[test]
fn the_first_error_is_the_comprehensions() {
    let original = primal(QUALIFY, "lse");
    let mut jammed = original.clone();
    assert!(jam_comprehensions(&mut jammed));
    for n in [0, 1, 2, 3, 4] {
        let a = args(n, 0, 1);
        let want = run(&original, &a);
        assert_eq!(run(&jammed, &a), want, "n={n}");
        assert_eq!(want.is_err(), n > 0, "n={n}");
        for (b, jit) in common::jits("jam.arr", std::slice::from_ref(&original)) {
            assert_eq!(jit.call(&original.name, &a), want, "n={n} ({b:?})");
        }
    }
}

/// The arguments of GMM (`examples/gmm.arr`) for `n` points, 3 components
/// of dimension 4.
fn gmm_args(n: usize) -> Vec<Value> {
    let (k, d) = (3usize, 4usize);
    let arr = |dims: &[usize], seed: u64| {
        let len: usize = dims.iter().product();
        Value::Array(arrayad_ir::ArrayValue::f64(dims.to_vec(), data(len, seed)).unwrap())
    };
    vec![arr(&[k], 1), arr(&[k, d], 2), arr(&[k, d * (d + 1) / 2], 3), arr(&[n, d], 4), Value::F64(1.0), Value::I64(0)]
}

/// GMM's objective: its comprehension over the points is jammed, with the
/// bits of the original.
#[test]
fn gmm_points_run_in_pairs() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gmm.arr")).unwrap();
    let original = primal(&src, "gmm");
    let mut jammed = original.clone();
    assert!(jam_comprehensions(&mut jammed));
    for n in [0usize, 1, 4, 7] {
        let a = gmm_args(n);
        let want = run(&original, &a).unwrap();
        common::assert_bitwise(&format!("gmm n={n}"), &want, &run(&jammed, &a).unwrap());
    }
}

/// True when `f` has a `reshape` (the rows of a jammed comprehension put
/// back in the order of the points).
fn has_reshape(f: &arrayad_ir::Function) -> bool {
    let mut any = false;
    arrayad_ir::visit::for_each_block(&f.body, &mut |b| {
        any |= b
            .stmts
            .iter()
            .any(|s| matches!(&s.kind, arrayad_ir::StmtKind::Let { expr: arrayad_ir::Expr::Reshape { .. }, .. }))
    });
    any
}

/// The reverse pass of a comprehension keeps rows of residuals per point:
/// the vjp's forward comprehension is jammed with its rows stacked in pairs
/// (`jam_rows`), and gives the vjp's bits under the interpreter, for even
/// and odd point counts.
#[test]
fn comprehensions_of_residual_rows_keep_the_interpreters_bits() {
    let program = arrayad_frontend::compile("jam.arr", QUALIFY).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut stacked = Vec::new();
    for name in names(QUALIFY) {
        let fid = program.find(name).unwrap();
        let original = common::ad::vjp(&program, fid, &[true, true]).unwrap();
        let mut jammed = original.clone();
        if !jam_comprehensions(&mut jammed) {
            continue;
        }
        if has_reshape(&jammed) {
            stacked.push(name);
        }
        arrayad_ir::verify::verify_program(&Program { file: "jam.arr".into(), funcs: vec![jammed.clone()] })
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for n in 0..8 {
            for m in [1, 3, 8, 11] {
                let mut a = args(n, m, (n * 10 + m) as u64);
                a.push(if name == "total" {
                    Value::F64(1.25)
                } else {
                    Value::Array(arrayad_ir::ArrayValue::f64(vec![n], data(n, 9)).unwrap())
                });
                let want = run(&original, &a).unwrap();
                let got = run(&jammed, &a).unwrap();
                common::assert_bitwise(&format!("{name} vjp n={n} m={m}"), &want, &got);
            }
        }
    }
    assert!(stacked.contains(&"lse") && stacked.contains(&"triangle"), "rows stacked in {stacked:?}");
}

/// GMM's gradient: the comprehension over the points of its forward pass,
/// which keeps every point's `Q_k (x_i - mu_k)` rows, is jammed with the
/// rows stacked in pairs, with the bits of the original.
#[test]
fn gmm_residual_rows_run_in_pairs() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gmm.arr")).unwrap();
    let program = arrayad_frontend::compile("gmm.arr", &src).unwrap_or_else(|d| panic!("{}", d.render()));
    let fid = program.find("gmm").unwrap();
    let original = common::ad::vjp(&program, fid, &[true, true, true, false, false, false]).unwrap();
    let mut jammed = original.clone();
    assert!(jam_comprehensions(&mut jammed) && has_reshape(&jammed));
    for n in [0usize, 1, 4, 7] {
        let mut a = gmm_args(n);
        a.push(Value::F64(0.75));
        let want = run(&original, &a).unwrap();
        common::assert_bitwise(&format!("gmm vjp n={n}"), &want, &run(&jammed, &a).unwrap());
    }
}
