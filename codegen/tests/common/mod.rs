//! Shared helpers of the codegen tests: hand-built IR, the JIT and the
//! reference interpreter side by side.
#![allow(dead_code)]

pub use arrayad_codegen::{Backend, JitModule, TargetOptions};
use arrayad_ir::builder::Builder;
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_program;
use arrayad_ir::{ArrayData, ArrayValue, RuntimeError, Value};

pub const FILE: &str = "t.arr";
pub const F1: Type = Type { elem: Scalar::F64, rank: 1 };
pub const F2: Type = Type { elem: Scalar::F64, rank: 2 };
pub const F3: Type = Type { elem: Scalar::F64, rank: 3 };
pub const I1: Type = Type { elem: Scalar::I64, rank: 1 };
pub const I2: Type = Type { elem: Scalar::I64, rank: 2 };
pub const B1: Type = Type { elem: Scalar::Bool, rank: 1 };

/// A one-function program (named `f`) whose body `build` emits, verified.
pub fn program1(params: &[Type], results: &[Type], build: impl FnOnce(&mut Builder, &[VarId]) -> Vec<Atom>) -> Program {
    let (mut f, ps) = Function::with_params("f", params, results);
    let mut b = Builder::new(&mut f);
    b.loc = Loc::new(3, 7);
    let rs = build(&mut b, &ps);
    f.body = b.finish(rs);
    let p = Program { file: FILE.into(), funcs: vec![f] };
    verify_program(&p).expect("test program verifies");
    p
}

/// The program compiled by every backend of this build (Cranelift, and
/// LLVM with the `llvm` feature).
pub struct Jits(pub Vec<(Backend, JitModule)>);

impl Jits {
    /// Calls `name` on every backend; they must agree (values bit for bit,
    /// or error kind and message). Returns the first backend's result.
    pub fn call(&self, name: &str, args: &[Value]) -> Result<Vec<Value>, RuntimeError> {
        let mut first: Option<(Backend, Result<Vec<Value>, RuntimeError>)> = None;
        for (b, m) in &self.0 {
            let r = m.call(name, args);
            match &first {
                None => first = Some((*b, r)),
                Some((b0, r0)) => match (r0, &r) {
                    (Ok(x), Ok(y)) => assert!(same_all(x, y), "{b0:?} {x:?} != {b:?} {y:?}"),
                    (Err(x), Err(y)) => assert_eq!(x, y, "{b0:?} and {b:?} fail differently"),
                    _ => panic!("{b0:?} {r0:?} vs {b:?} {r:?}"),
                },
            }
        }
        first.expect("at least one backend").1
    }
}

pub fn jit(p: &Program) -> Jits {
    Jits(
        Backend::available()
            .into_iter()
            .map(|b| {
                let m = JitModule::compile_with(b, &TargetOptions::host(), &p.file, &p.funcs)
                    .unwrap_or_else(|e| panic!("{b:?}: {e}"));
                (b, m)
            })
            .collect(),
    )
}

/// Equality of values, bit for bit for f64 (any NaN equals any NaN).
pub fn same(a: &Value, b: &Value) -> bool {
    fn f(x: f64, y: f64) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }
    match (a, b) {
        (Value::F64(x), Value::F64(y)) => f(*x, *y),
        (Value::Array(x), Value::Array(y)) => {
            x.shape == y.shape
                && match (&x.data, &y.data) {
                    (ArrayData::F64(p), ArrayData::F64(q)) => {
                        p.len() == q.len() && p.iter().zip(q).all(|(x, y)| f(*x, *y))
                    }
                    (p, q) => p == q,
                }
        }
        (a, b) => a == b,
    }
}

pub fn same_all(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
}

/// Runs `f` of `p` with the JIT and the interpreter; they must agree (values
/// bit for bit, or error kind and message). Returns the JIT's result.
pub fn run_both(p: &Program, args: &[Value]) -> Result<Vec<Value>, RuntimeError> {
    let m = jit(p);
    let j = m.call(&p.funcs[0].name, args);
    let i = arrayad_ir::interp::run(p, FuncId(0), args);
    match (&j, &i) {
        (Ok(a), Ok(b)) => assert!(same_all(a, b), "JIT {a:?} != interpreter {b:?}"),
        (Err(a), Err(b)) => {
            assert_eq!(a.kind, b.kind, "JIT error {a:?} vs interpreter error {b:?}");
            assert_eq!(a.message, b.message, "messages differ");
        }
        _ => panic!("JIT {j:?} vs interpreter {i:?}"),
    }
    j
}

pub fn arr_f64(shape: &[usize], data: &[f64]) -> Value {
    Value::Array(ArrayValue::f64(shape.to_vec(), data.to_vec()).expect("consistent test array"))
}

pub fn arr_i64(shape: &[usize], data: &[i64]) -> Value {
    Value::Array(ArrayValue { shape: shape.to_vec(), data: ArrayData::I64(data.to_vec()) })
}

pub fn arr_bool(shape: &[usize], data: &[bool]) -> Value {
    Value::Array(ArrayValue { shape: shape.to_vec(), data: ArrayData::Bool(data.to_vec()) })
}

pub fn v(x: VarId) -> Atom {
    Atom::Var(x)
}

/// `for i < n => body(i)` with one result.
pub fn build(b: &mut Builder, n: Atom, body: impl FnOnce(&mut Builder, Atom) -> Atom) -> Atom {
    let i = b.var("i", Type::I64);
    b.begin_block();
    let r = body(b, v(i));
    let blk = b.end_block(vec![r]);
    b.let_one("arr", Expr::Build { n, index: i, body: blk })
}

/// Expects an error of `kind` whose message contains every part.
pub fn expect_err(r: Result<Vec<Value>, RuntimeError>, kind: ErrorKind, parts: &[&str]) -> String {
    let e = r.expect_err("a run-time error");
    assert_eq!(e.kind, kind, "{}", e.message);
    for p in parts {
        assert!(e.message.contains(p), "message {:?} lacks {:?}", e.message, p);
    }
    e.message
}
