//! A comprehension that runs zero times keeps the row shape it would have
//! had (`ir::shape::static_row_dims`): `for i < n => [x[i], 1.0]` is a
//! `[0][2]` array for `n = 0`, on every backend and through the
//! derivatives, so that a declared `[n][2]f64` result holds. The
//! interpreter runs the program as written (calls, branches, loops) and
//! compiled code runs it inlined and simplified: both find the same shape.

use arrayad::{Arg, Backend, Module, Options, Value};

const SOURCE: &str = "
def pairs(x: [n]f64) -> [n][2]f64 = for i < n => [x[i], 1.0]
def rows(a: [n][m]f64) -> [n][m]f64 = for i < n => a[i] * 2.0
def nested(a: [n][m]f64) -> [n][m][3]f64 = for i < n => for j < m => [a[i, j], 0.0, 1.0]
def wide(x: [n]f64, k: [m]i64) -> [n][m + 1]f64 = for i < n => for j < m + 1 => x[i]
def through_let(x: [n]f64) -> [n][2]f64 = let y = for i < n => [x[i], x[i] * x[i]] in y
def lits(x: [n]f64) -> [n][2][2]f64 = for i < n => [[x[i], 0.0], [0.0, x[i]]]
def total(x: [n]f64) -> f64 = sum(flatten(for i < n => [x[i], 1.0]))
def branches(z: [k]f64, x: [n]f64, y: f64) -> [k][n]f64 =
  for j < k => if y > 0.0 then (for i < n => y) else (for i < n => f64(j))
def kept(z: [k]f64, x: [n]f64) -> [k][n]f64 = for j < k => (loop s = x for i < 2 do 0.5 * s + sin(x))
def twice(a: [n]f64) -> [n]f64 = a * 2.0
def called(z: [k]f64, x: [n]f64) -> [k][n]f64 = for j < k => twice(x + x)
def counted(z: [k]f64, x: [n]f64, t: i64) -> [k][n]f64 = for j < k => (loop s = x for i < t do s * 0.5)
def literal(z: [k]f64, x: [n]f64, y: [m]f64) -> [k][n]f64 =
  let c = true in for j < k => (if c then x * 2.0 else y)
";

fn backends() -> Vec<Backend> {
    let mut out = vec![Backend::Interp, Backend::Cranelift];
    if cfg!(feature = "llvm") {
        out.push(Backend::Llvm);
    }
    out
}

fn shape(v: &Value) -> Vec<usize> {
    match v {
        Value::Array(a) => a.shape.clone(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn zero_rows_keep_their_static_shape_on_every_backend() {
    let empty: [f64; 0] = [];
    let three = [1.0, 2.0, 3.0];
    let four = [1.0, 2.0, 3.0, 4.0];
    let cases: [(&str, Vec<Arg<'_>>, Vec<usize>); 10] = [
        ("pairs", vec![Arg::Vector(&empty)], vec![0, 2]),
        ("rows", vec![Arg::Array { data: &empty, shape: &[0, 3] }], vec![0, 3]),
        ("nested", vec![Arg::Array { data: &empty, shape: &[0, 4] }], vec![0, 4, 3]),
        ("wide", vec![Arg::Vector(&empty), Arg::I64Array { data: &[7, 8], shape: &[2] }], vec![0, 3]),
        ("through_let", vec![Arg::Vector(&empty)], vec![0, 2]),
        ("lits", vec![Arg::Vector(&empty)], vec![0, 2, 2]),
        // Through an `if` whose branches have the same extents, a loop
        // that keeps its state's, and a call.
        ("branches", vec![Arg::Vector(&empty), Arg::Vector(&three), Arg::F64(0.5)], vec![0, 3]),
        ("kept", vec![Arg::Vector(&empty), Arg::Vector(&three)], vec![0, 3]),
        ("called", vec![Arg::Vector(&empty), Arg::Vector(&three)], vec![0, 3]),
        ("literal", vec![Arg::Vector(&empty), Arg::Vector(&three), Arg::Vector(&four)], vec![0, 3]),
    ];
    for backend in backends() {
        let m = Module::compile_with("empty.arr", SOURCE, Options::backend(backend)).unwrap();
        for (name, args, want) in &cases {
            let f = m.function(name).unwrap();
            let v = f.call(args).unwrap_or_else(|e| panic!("{backend:?} {name}: {e}"));
            assert_eq!(shape(&v[0]), *want, "{backend:?} {name}");
            // The tangent has the value's shape, and the cotangent of an
            // empty result is the argument's (empty) shape.
            let tangents: Vec<Option<Arg<'_>>> =
                args.iter().map(|a| Some(*a).filter(|a| !matches!(a, Arg::I64Array { .. } | Arg::I64(_)))).collect();
            let jvp = f.jvp(args, &tangents).unwrap_or_else(|e| panic!("{backend:?} {name} jvp: {e}"));
            assert_eq!(shape(jvp.tangent[0].as_ref().unwrap()), *want, "{backend:?} {name} tangent");
            let ct = vec![0.0; 0];
            let vjp = f
                .vjp(args, &[Some(Arg::Array { data: &ct, shape: want })])
                .unwrap_or_else(|e| panic!("{backend:?} {name} vjp: {e}"));
            assert_eq!(vjp.value[0], v[0], "{backend:?} {name} vjp value");
        }
        let total = m.function("total").unwrap();
        let g = total.grad(&[Arg::Vector(&empty)]).unwrap();
        assert_eq!(g.value, 0.0);
        assert_eq!(g.gradient.f64s("x"), Some(&empty[..]));
    }
}

/// A loop over a count known only at run time keeps its state's extents
/// (compiled code cannot unroll it). Its tangent state takes its extents
/// from the primal state, whose initial value is another argument than
/// the tangent's (equal only at run time): the tangent keeps extent 0.
#[test]
fn a_loop_over_a_run_time_count_keeps_its_state_shape() {
    let empty: [f64; 0] = [];
    let three = [1.0, 2.0, 3.0];
    for backend in backends() {
        let m = Module::compile_with("empty.arr", SOURCE, Options::backend(backend)).unwrap();
        let f = m.function("counted").unwrap();
        let args = [Arg::Vector(&empty), Arg::Vector(&three), Arg::I64(5)];
        let v = f.call(&args).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        assert_eq!(shape(&v[0]), [0, 3], "{backend:?}");
    }
}

#[test]
fn a_row_shape_that_depends_on_the_index_stays_zero() {
    // `x[i:]` has a row length only the body can tell: with no row, every
    // inner extent is 0 (LANGUAGE.md leaves it unspecified; Expr::Build
    // documents it).
    let src = "def tails(x: [n]f64) -> f64 = sum(flatten(for i < n => x[i:]))";
    for backend in backends() {
        let m = Module::compile_with("tails.arr", src, Options::backend(backend)).unwrap();
        let v = m.function("tails").unwrap().call(&[Arg::Vector(&[])]).unwrap();
        assert_eq!(v[0], Value::F64(0.0), "{backend:?}");
    }
}

#[test]
fn the_oracles_keep_the_static_row_shape_too() {
    // The Delta and dual-number oracles evaluate the program with their own
    // evaluator: a zero-row comprehension has the interpreter's row shape
    // there too, so `a[1]` below is in bounds on every side.
    let src = "def f(x: [n]f64) -> f64 = let a = sum(for j < 0 => x) in a[1] + sum(x * x)";
    let program = arrayad_frontend::compile("oracle.arr", src).unwrap();
    let id = program.find("f").unwrap();
    let x = Value::Array(arrayad::ArrayValue { shape: vec![3], data: arrayad::ArrayData::F64(vec![1.0, 2.0, 3.0]) });
    let (values, grads) =
        arrayad_ad::oracle::vjp(&program, id, std::slice::from_ref(&x), &[true], &[Some(Value::F64(1.0))]).unwrap();
    assert_eq!(values, vec![Value::F64(14.0)]);
    assert_eq!(grads[0].as_ref().and_then(Value::f64_elements), Some(&[2.0, 4.0, 6.0][..]));
    let t = Value::Array(arrayad::ArrayValue { shape: vec![3], data: arrayad::ArrayData::F64(vec![1.0, 0.0, 0.0]) });
    let (_, tangents) = arrayad_ad::oracle::jvp(&program, id, std::slice::from_ref(&x), &[Some(t)]).unwrap();
    assert_eq!(tangents[0], Some(Value::F64(2.0)));
    for backend in backends() {
        let m = Module::compile_with("oracle.arr", src, Options::backend(backend)).unwrap();
        let g = m.function("f").unwrap().grad(&[Arg::Vector(&[1.0, 2.0, 3.0])]).unwrap();
        assert_eq!((g.value, g.gradient.f64s("x")), (14.0, Some(&[2.0, 4.0, 6.0][..])), "{backend:?}");
    }
}
