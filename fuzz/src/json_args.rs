//! The `json_args` target: the fuzz input as the JSON text of `arrayad run
//! FILE FUNC --args ARGS` (and of `--jvp TANGENTS`, `--vjp COTANGENT`) for
//! every definition of [`SOURCE`], through the functions the command line
//! uses (`arrayad::json::parse`, `decode_args`, `decode_tangents`,
//! `decode_cotangent`, the calls of `Function`, `encode_*`), on the
//! interpreter and the Cranelift JIT.

use crate::compare::{agree, close};
use arrayad::{json, Backend, Error, Function, Module, Options, Value};
use std::sync::OnceLock;

/// Owned values as borrowed arguments.
fn av(v: &[Value]) -> Vec<arrayad::Arg<'_>> {
    v.iter().map(arrayad::Arg::Value).collect()
}

/// Optional owned values as optional borrowed arguments.
fn ao(v: &[Option<Value>]) -> Vec<Option<arrayad::Arg<'_>>> {
    v.iter().map(|x| x.as_ref().map(arrayad::Arg::Value)).collect()
}

/// The fixed program: parameters of every kind (scalars, arrays of each
/// element type, literal and variable dimensions, a zero dimension, nested
/// tuples), every run-time error reachable from the arguments (indices,
/// sizes, division by zero, empty `maximum`), and work linear in the size
/// of the arguments.
pub const SOURCE: &str = "\
def f(x: [n]f64, m: [n][2]f64, p: (f64, [2]i64), b: bool, k: i64) -> (f64, [n]f64, i64) =
  let s = if b then sum(x) else dot(x, x)
  let r = for i < n => m[i, 0] * x[i] + p.0
  in (s + f64(p.1[0]) + m[0, 1], r, k + p.1[1] + n)
def g(t: ((f64, i64), [n][m]f64), w: [m]bool) -> [m]f64 =
  let (a, c) = t.0
  in for j < m => if w[j] then a * t.1[c % n, j] else sum(t.1[0]) / f64(c)
def h(a: [3]f64, e: [0]f64, q: [2][2][2]f64, z: [n][0]f64) -> f64 =
  a[0] * q[1, 0, 1] + f64(length(e)) + maximum(a) + f64(length(z))
def s(x: f64, i: i64, bs: [n]bool, is: [n]i64) -> f64 =
  let c = sum(for j < n => if bs[j] then is[j] else 1)
  in if i > 0 then x ** 2 * f64(10 / i) else f64(c) * x
";

/// Memory limit of a JIT call.
const MAX_MEMORY: u64 = 256 << 20;

fn modules() -> &'static (Module, Module) {
    static MODULES: OnceLock<(Module, Module)> = OnceLock::new();
    MODULES.get_or_init(|| {
        let interp = Module::compile_with("args.arr", SOURCE, Options::backend(Backend::Interp)).expect("compiles");
        let jit =
            Module::compile_with("args.arr", SOURCE, Options::default().with_max_memory(MAX_MEMORY)).expect("compiles");
        (interp, jit)
    })
}

/// Panics on an internal error, on results that differ between the
/// backends or on one backend failing alone; returns the interpreter's
/// result.
fn both<T>(what: &str, text: &str, a: Result<T, Error>, b: Result<T, Error>, eq: impl Fn(&T, &T) -> bool) -> Option<T> {
    for r in [&a, &b] {
        if let Err(e @ Error::Internal(_)) = r {
            panic!("{what}: internal error: {e}\ninput: {text:?}");
        }
    }
    match (a, b) {
        (Ok(x), Ok(y)) => {
            assert!(eq(&x, &y), "{what}: interpreter and JIT disagree\ninput: {text:?}");
            Some(x)
        }
        (Err(x), Err(y)) => {
            assert_eq!(x, y, "{what}: different errors\ninput: {text:?}");
            None
        }
        (Ok(_), Err(e)) => panic!("{what}: only the JIT fails: {e}\ninput: {text:?}"),
        (Err(e), Ok(_)) => panic!("{what}: only the interpreter fails: {e}\ninput: {text:?}"),
    }
}

fn values_eq(a: &[Value], b: &[Value]) -> bool {
    agree(a, b, 1e-12).is_none()
}

fn options_eq(a: &[Option<Value>], b: &[Option<Value>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => agree(std::slice::from_ref(x), std::slice::from_ref(y), 1e-12).is_none(),
            _ => false,
        })
}

/// Every mode of the command line for one definition.
fn run(fi: Function, fj: Function, text: &str, args_json: &serde_json::Value) {
    let name = fi.name();
    let sig = fi.signature();
    let result_ty = &sig.result;
    let Ok(args) = json::decode_args(name, sig, args_json) else { return };
    let what = |m: &str| format!("{name} {m}");

    if let Some(v) = both(&what("call"), text, fi.call_values(&args), fj.call_values(&args), |a, b| values_eq(a, b)) {
        let _ = json::encode_result(result_ty, &v);
    }
    if let Ok(tangents) = json::decode_tangents(name, sig, &args, fj.active(), args_json) {
        let r =
            both(&what("jvp"), text, fi.jvp(&av(&args), &ao(&tangents)), fj.jvp(&av(&args), &ao(&tangents)), |a, b| {
                values_eq(&a.value, &b.value) && options_eq(&a.tangent, &b.tangent)
            });
        if let Some(r) = r {
            let leaves: Vec<Option<&Value>> = r.tangent.iter().map(Option::as_ref).collect();
            let _ = json::encode_tree(result_ty, &leaves);
        }
    }
    // The cotangent: the last entry of the JSON array (or the whole text).
    let ct_json = args_json.as_array().and_then(|a| a.last()).unwrap_or(args_json);
    let shapes =
        both(&what("result shapes"), text, fi.result_shapes(&av(&args)), fj.result_shapes(&av(&args)), |a, b| a == b);
    if let Some(shapes) = shapes {
        if let Ok(cts) = json::decode_cotangent(result_ty, &shapes, ct_json) {
            let r = both(&what("vjp"), text, fi.vjp(&av(&args), &ao(&cts)), fj.vjp(&av(&args), &ao(&cts)), |a, b| {
                values_eq(&a.value, &b.value) && options_eq(a.cotangent.as_slice(), b.cotangent.as_slice())
            });
            if let Some(r) = r {
                let _ = json::encode_per_param(sig, r.cotangent.as_slice());
            }
        }
    }
    let jac_eq = |a: &arrayad::Jacobian, b: &arrayad::Jacobian| {
        (a.rows, a.cols) == (b.rows, b.cols)
            && values_eq(&a.value, &b.value)
            && a.data.iter().zip(&b.data).all(|(x, y)| close(*x, *y, 1e-12))
    };
    both(&what("jacobian"), text, fi.jacobian(&av(&args)), fj.jacobian(&av(&args)), jac_eq);
    if matches!(result_ty, arrayad::SrcType::Scalar(arrayad::Scalar::F64)) {
        let g = both(&what("grad"), text, fi.grad(&av(&args)), fj.grad(&av(&args)), |a, b| {
            close(a.value, b.value, 1e-12) && options_eq(a.gradient.as_slice(), b.gradient.as_slice())
        });
        if let Some(g) = g {
            let _ = json::encode_f64(g.value);
            let _ = json::encode_per_param(sig, g.gradient.as_slice());
        }
        both(&what("hessian"), text, fi.hessian(&av(&args)), fj.hessian(&av(&args)), jac_eq);
    }
}

/// The check of one fuzz input.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(args_json) = json::parse("ARGS", text) else { return };
    let (interp, jit) = modules();
    for (fi, fj) in interp.functions().zip(jit.functions()) {
        run(fi, fj, text, &args_json);
    }
}
