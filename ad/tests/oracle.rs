//! Tests of the runtime AD oracles on IR built by hand: known derivatives,
//! the conventions of LANGUAGE.md section 6, forward against reverse
//! (`<ct, J t> == <J^T ct, t>`) and both against central finite differences
//! of the reference interpreter.

use arrayad_ad::oracle::{self, delta};
use arrayad_ir::builder::Builder;
use arrayad_ir::interp;
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_program;
use arrayad_ir::{ArrayData, ArrayValue, Value};
use std::time::{Duration, Instant};

const F1: Type = Type { elem: Scalar::F64, rank: 1 };
const F2: Type = Type { elem: Scalar::F64, rank: 2 };

fn v(x: VarId) -> Atom {
    Atom::Var(x)
}

fn define(params: &[Type], results: &[Type], body: impl FnOnce(&mut Builder, &[VarId]) -> Vec<Atom>) -> Function {
    let (mut f, ps) = Function::with_params("f", params, results);
    let mut b = Builder::new(&mut f);
    b.loc = Loc::new(2, 5);
    let rs = body(&mut b, &ps);
    f.body = b.finish(rs);
    f
}

fn program(funcs: Vec<Function>) -> Program {
    let p = Program { file: "t.arr".into(), funcs };
    verify_program(&p).expect("test program verifies");
    p
}

fn program1(params: &[Type], results: &[Type], body: impl FnOnce(&mut Builder, &[VarId]) -> Vec<Atom>) -> Program {
    program(vec![define(params, results, body)])
}

/// `for i < n => body(i)` with one result.
fn build(b: &mut Builder, n: Atom, body: impl FnOnce(&mut Builder, Atom) -> Atom) -> Atom {
    let i = b.var("i", Type::I64);
    b.begin_block();
    let r = body(b, v(i));
    let blk = b.end_block(vec![r]);
    b.let_one("arr", Expr::Build { n, index: i, body: blk })
}

fn index(b: &mut Builder, a: VarId, idx: &[Atom]) -> Atom {
    b.let_one("x", Expr::Index { array: a, indices: idx.to_vec() })
}

fn arr(shape: &[usize], data: &[f64]) -> Value {
    Value::Array(ArrayValue::f64(shape.to_vec(), data.to_vec()).expect("consistent test array"))
}

fn f64s(v: &Value) -> Vec<f64> {
    v.f64_elements().expect("an f64 value").to_vec()
}

/// SplitMix64: reproducible pseudo-random numbers in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    /// A random f64 value shaped like `like` (which has f64 elements).
    fn like(&mut self, like: &Value) -> Value {
        match like {
            Value::F64(_) => Value::F64(self.next()),
            Value::Array(a) => Value::Array(ArrayValue {
                shape: a.shape.clone(),
                data: ArrayData::F64((0..a.data.len()).map(|_| self.next()).collect()),
            }),
            _ => unreachable!("random values only for f64 parts"),
        }
    }
}

fn has_f64(v: &Value) -> bool {
    v.f64_elements().is_some()
}

/// `x + s t` elementwise on the f64 parts (others unchanged).
fn axpy(x: &Value, s: f64, t: Option<&Value>) -> Value {
    match (x, t) {
        (Value::F64(a), Some(Value::F64(b))) => Value::F64(a + s * b),
        (Value::Array(a), Some(tv)) if has_f64(x) => {
            let data = f64s(x).iter().zip(f64s(tv)).map(|(a, b)| a + s * b).collect();
            Value::Array(ArrayValue { shape: a.shape.clone(), data: ArrayData::F64(data) })
        }
        _ => x.clone(),
    }
}

fn dot(a: &[Option<Value>], b: &[Option<Value>]) -> f64 {
    a.iter()
        .zip(b)
        .filter_map(|(x, y)| Some(f64s(x.as_ref()?).iter().zip(f64s(y.as_ref()?)).map(|(p, q)| p * q).sum::<f64>()))
        .sum()
}

/// Bitwise equality of values (NaN equals NaN).
fn same(a: &[Value], b: &[Value]) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

/// Checks the oracles on `func` of `p` at `args` with the given active
/// params: both give the interpreter's values, `<ct, J t> == <J^T ct, t>`
/// for random `t` and `ct`, and `J t` agrees with central finite differences
/// of the interpreter (relative 1e-6).
fn check(p: &Program, args: &[Value], active: &[bool], seed: u64) {
    let func = FuncId(0);
    let values = interp::run(p, func, args).expect("primal runs");
    let mut rng = Rng(seed);
    for _round in 0..3 {
        let tangents: Vec<Option<Value>> =
            args.iter().zip(active).map(|(a, &act)| (act && has_f64(a)).then(|| rng.like(a))).collect();
        let cts: Vec<Option<Value>> = values.iter().map(|r| has_f64(r).then(|| rng.like(r))).collect();
        let (jv, jt) = oracle::jvp(p, func, args, &tangents).expect("jvp runs");
        let (vv, grads) = oracle::vjp(p, func, args, active, &cts).expect("vjp runs");
        assert!(same(&jv, &values), "jvp values {jv:?} are not the interpreter's {values:?}");
        assert!(same(&vv, &values), "vjp values {vv:?} are not the interpreter's {values:?}");
        // Forward against reverse.
        let lhs = dot(&cts, &jt);
        let rhs = dot(&grads, &tangents);
        assert!(close(lhs, rhs, 1e-10), "<ct, J t> = {lhs} but <J^T ct, t> = {rhs}");
        // Forward against finite differences of the interpreter.
        let h = 1e-6;
        let plus: Vec<Value> = args.iter().zip(&tangents).map(|(a, t)| axpy(a, h, t.as_ref())).collect();
        let minus: Vec<Value> = args.iter().zip(&tangents).map(|(a, t)| axpy(a, -h, t.as_ref())).collect();
        let fp = interp::run(p, func, &plus).expect("primal runs at x + h t");
        let fm = interp::run(p, func, &minus).expect("primal runs at x - h t");
        for ((t, a), b) in jt.iter().zip(&fp).zip(&fm) {
            let Some(t) = t else { continue };
            for ((ti, ai), bi) in f64s(t).iter().zip(f64s(a)).zip(f64s(b)) {
                let fd = (ai - bi) / (2.0 * h);
                assert!(close(*ti, fd, 1e-6), "jvp gives {ti}, finite differences {fd}");
            }
        }
    }
}

/// The gradient of a scalar-valued `func` by the vjp oracle, and checks
/// that the jvp oracle gives the same partial derivatives one by one (with
/// the other scalar parameters inactive rather than given a zero tangent,
/// which would turn an infinite partial derivative into NaN).
fn grad(p: &Program, args: &[Value]) -> Vec<Option<Value>> {
    let func = FuncId(0);
    let active = vec![true; args.len()];
    let (_, g) = oracle::vjp(p, func, args, &active, &[Some(Value::F64(1.0))]).expect("vjp runs");
    for (k, a) in args.iter().enumerate() {
        let Some(n) = a.f64_elements().map(<[f64]>::len) else { continue };
        for e in 0..n {
            let tangents: Vec<Option<Value>> = args
                .iter()
                .enumerate()
                .map(|(j, x)| {
                    let elems = x.f64_elements()?;
                    if j != k && matches!(x, Value::F64(_)) {
                        return None;
                    }
                    let one_hot: Vec<f64> =
                        (0..elems.len()).map(|i| if j == k && i == e { 1.0 } else { 0.0 }).collect();
                    Some(match x {
                        Value::F64(_) => Value::F64(one_hot[0]),
                        Value::Array(a) => {
                            Value::Array(ArrayValue { shape: a.shape.clone(), data: ArrayData::F64(one_hot) })
                        }
                        _ => unreachable!(),
                    })
                })
                .collect();
            let (_, t) = oracle::jvp(p, func, args, &tangents).expect("jvp runs");
            let fwd = t[0].as_ref().and_then(Value::as_f64).expect("scalar tangent");
            let rev = f64s(g[k].as_ref().expect("a cotangent"))[e];
            let agree = close(fwd, rev, 1e-13) || fwd == rev || (fwd.is_nan() && rev.is_nan());
            assert!(agree, "jvp {fwd} vs vjp {rev} for arg {k}[{e}]");
        }
    }
    g
}

fn scalars(g: &[Option<Value>]) -> Vec<f64> {
    g.iter().map(|x| x.as_ref().and_then(Value::as_f64).expect("scalar cotangent")).collect()
}

fn binary_program(op: BinOp) -> Program {
    program1(&[Type::F64, Type::F64], &[Type::F64], |b, ps| vec![b.binary(op, v(ps[0]), v(ps[1]))])
}

fn unary_program(op: UnOp) -> Program {
    program1(&[Type::F64], &[Type::F64], |b, ps| vec![b.unary(op, v(ps[0]))])
}

#[test]
fn product() {
    let p = binary_program(BinOp::Mul);
    let g = grad(&p, &[Value::F64(3.0), Value::F64(-5.0)]);
    assert_eq!(scalars(&g), vec![-5.0, 3.0]);
    check(&p, &[Value::F64(3.0), Value::F64(-5.0)], &[true, true], 1);
    check(&p, &[Value::F64(3.0), Value::F64(-5.0)], &[false, true], 2);
}

#[test]
fn exp_of_sin() {
    let p = program1(&[Type::F64], &[Type::F64], |b, ps| {
        let s = b.unary(UnOp::Sin, v(ps[0]));
        vec![b.unary(UnOp::Exp, s)]
    });
    let x = 0.7f64;
    let g = scalars(&grad(&p, &[Value::F64(x)]));
    assert!(close(g[0], x.sin().exp() * x.cos(), 1e-15));
    check(&p, &[Value::F64(x)], &[true], 3);
}

#[test]
fn sum_of_squares_by_build_and_reduce() {
    let p = program1(&[F1], &[Type::F64], |b, ps| {
        let n = b.let_one("n", Expr::Dim { array: ps[0], axis: 0 });
        let sq = build(b, n, |b, i| {
            let x = index(b, ps[0], &[i]);
            b.binary(BinOp::Mul, x, x)
        });
        vec![b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: sq.as_var().unwrap() })]
    });
    let a = arr(&[4], &[1.0, -2.0, 0.5, 3.0]);
    let g = grad(&p, std::slice::from_ref(&a));
    assert_eq!(f64s(g[0].as_ref().unwrap()), vec![2.0, -4.0, 1.0, 6.0]);
    check(&p, &[a], &[true], 4);
    // An empty array: value 0, empty gradient.
    let g = grad(&p, &[arr(&[0], &[])]);
    assert_eq!(g[0], Some(arr(&[0], &[])));
}

#[test]
fn loop_of_a_hundred_multiplications() {
    // loop s = s0 for i < 100 do s * a  ==  s0 a^100
    let p = program1(&[Type::F64, Type::F64], &[Type::F64], |b, ps| {
        let i = b.var("i", Type::I64);
        let s = b.var("s", Type::F64);
        b.begin_block();
        let m = b.binary(BinOp::Mul, v(s), v(ps[1]));
        let body = b.end_block(vec![m]);
        vec![b.let_one("r", Expr::Loop { n: Atom::I64(100), index: i, states: vec![s], init: vec![v(ps[0])], body })]
    });
    let (s0, a) = (1.5f64, 1.01f64);
    let g = scalars(&grad(&p, &[Value::F64(s0), Value::F64(a)]));
    assert!(close(g[0], a.powi(100), 1e-13), "{} vs {}", g[0], a.powi(100));
    assert!(close(g[1], 100.0 * s0 * a.powi(99), 1e-13), "{} vs {}", g[1], 100.0 * s0 * a.powi(99));
    check(&p, &[Value::F64(s0), Value::F64(a)], &[true, true], 5);
}

#[test]
fn if_differentiates_the_branch_taken() {
    // if x > 0 then x * x else sin x
    let p = program1(&[Type::F64], &[Type::F64], |b, ps| {
        let c = b.binary(BinOp::Gt, v(ps[0]), Atom::F64(0.0));
        b.begin_block();
        let t = b.binary(BinOp::Mul, v(ps[0]), v(ps[0]));
        let then_branch = b.end_block(vec![t]);
        b.begin_block();
        let e = b.unary(UnOp::Sin, v(ps[0]));
        let else_branch = b.end_block(vec![e]);
        vec![b.let_one("r", Expr::If { cond: c, then_branch, else_branch })]
    });
    assert_eq!(scalars(&grad(&p, &[Value::F64(3.0)])), vec![6.0]);
    assert_eq!(scalars(&grad(&p, &[Value::F64(-1.0)])), vec![(-1.0f64).cos()]);
    // At 0 the else branch is taken.
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0)])), vec![1.0]);
    check(&p, &[Value::F64(0.4)], &[true], 6);
    check(&p, &[Value::F64(-0.4)], &[true], 7);
}

#[test]
fn max_and_min_split_ties_evenly() {
    for op in [BinOp::Max, BinOp::Min] {
        let p = binary_program(op);
        assert_eq!(scalars(&grad(&p, &[Value::F64(2.0), Value::F64(2.0)])), vec![0.5, 0.5], "{op:?}");
        let (hi, lo) =
            if op == BinOp::Max { (vec![1.0, 0.0], vec![0.0, 1.0]) } else { (vec![0.0, 1.0], vec![1.0, 0.0]) };
        assert_eq!(scalars(&grad(&p, &[Value::F64(3.0), Value::F64(2.0)])), hi, "{op:?}");
        assert_eq!(scalars(&grad(&p, &[Value::F64(1.0), Value::F64(2.0)])), lo, "{op:?}");
        assert_eq!(scalars(&grad(&p, &[Value::F64(f64::NAN), Value::F64(2.0)])), vec![0.5, 0.5], "{op:?}");
        check(&p, &[Value::F64(1.0), Value::F64(2.0)], &[true, true], 8);
    }
}

#[test]
fn maximum_and_minimum_split_over_all_extremes() {
    for (op, data, want) in [
        (ReduceOp::Max, [1.0, 5.0, 5.0, -2.0, 5.0], [0.0, 1.0 / 3.0, 1.0 / 3.0, 0.0, 1.0 / 3.0]),
        (ReduceOp::Min, [1.0, -2.0, 5.0, -2.0, 5.0], [0.0, 0.5, 0.0, 0.5, 0.0]),
        (ReduceOp::Max, [1.0, 2.0, 3.0, 4.0, 0.0], [0.0, 0.0, 0.0, 1.0, 0.0]),
        (ReduceOp::Max, [1.0, f64::NAN, 3.0, 4.0, 0.0], [0.0; 5]),
    ] {
        let p = program1(&[F1], &[Type::F64], |b, ps| vec![b.let_one("m", Expr::Reduce { op, array: ps[0] })]);
        let g = grad(&p, &[arr(&[5], &data)]);
        assert_eq!(f64s(g[0].as_ref().unwrap()), want.to_vec(), "{op:?} of {data:?}");
    }
    let p =
        program1(&[F1], &[Type::F64], |b, ps| vec![b.let_one("m", Expr::Reduce { op: ReduceOp::Max, array: ps[0] })]);
    check(&p, &[arr(&[3], &[0.1, 0.9, 0.3])], &[true], 9);
    // Empty: the interpreter's error.
    let e = oracle::vjp(&p, FuncId(0), &[arr(&[0], &[])], &[true], &[Some(Value::F64(1.0))]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::EmptyReduction);
    assert!(e.message.starts_with("t.arr:2:5: "), "{}", e.message);
}

#[test]
fn abs_at_zero_has_zero_derivative() {
    let p = unary_program(UnOp::Abs);
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0)])), vec![0.0]);
    assert_eq!(scalars(&grad(&p, &[Value::F64(-3.0)])), vec![-1.0]);
    assert_eq!(scalars(&grad(&p, &[Value::F64(3.0)])), vec![1.0]);
}

#[test]
fn pow_conventions_at_zero() {
    let p = binary_program(BinOp::Pow);
    // d/dy x^y = 0 at x == 0; d/dx = y x^(y-1).
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0), Value::F64(2.0)])), vec![0.0, 0.0]);
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0), Value::F64(3.0)])), vec![0.0, 0.0]);
    // d/dx x^y = 0 at y == 0 (even at x == 0), d/dy = 0 at x == 0.
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0), Value::F64(0.0)])), vec![0.0, 0.0]);
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0), Value::F64(0.5)])), vec![f64::INFINITY, 0.0]);
    let g = scalars(&grad(&p, &[Value::F64(2.0), Value::F64(3.0)]));
    assert_eq!(g[0], 12.0);
    assert!(close(g[1], 8.0 * 2f64.ln(), 1e-15));
    // A negative base with a constant exponent: no NaN from the exponent's
    // (undefined) partial derivative.
    let sq = program1(&[Type::F64], &[Type::F64], |b, ps| vec![b.binary(BinOp::Pow, v(ps[0]), Atom::F64(2.0))]);
    assert_eq!(scalars(&grad(&sq, &[Value::F64(-3.0)])), vec![-6.0]);
    check(&p, &[Value::F64(1.3), Value::F64(0.7)], &[true, true], 10);
}

#[test]
fn sqrt_at_zero_is_infinite() {
    let p = unary_program(UnOp::Sqrt);
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0)])), vec![f64::INFINITY]);
}

#[test]
fn shared_chain_of_sixty_doublings_is_instant() {
    // x1 = x + x; x2 = x1 + x1; ... x60: derivative 2^60.
    let p = program1(&[Type::F64], &[Type::F64], |b, ps| {
        let mut x = v(ps[0]);
        for _ in 0..60 {
            x = b.binary(BinOp::Add, x, x);
        }
        vec![x]
    });
    let start = Instant::now();
    let (vals, g) = oracle::vjp(&p, FuncId(0), &[Value::F64(1.0)], &[true], &[Some(Value::F64(1.0))]).unwrap();
    let (_, t) = oracle::jvp(&p, FuncId(0), &[Value::F64(1.0)], &[Some(Value::F64(1.0))]).unwrap();
    assert!(start.elapsed() < Duration::from_millis(500), "took {:?}", start.elapsed());
    let two60 = 2f64.powi(60);
    assert_eq!(vals, vec![Value::F64(two60)]);
    assert_eq!(g, vec![Some(Value::F64(two60))]);
    assert_eq!(t, vec![Some(Value::F64(two60))]);
}

#[test]
fn the_delta_store_has_one_binding_per_primitive() {
    // Fig. 10 by hand: u2 = deltaLet (Add (Var 0) (Var 0)), u3 = deltaLet
    // (Scale 3 (Var u2)); eval 1 (Var u3) gives 6 for input 0.
    use delta::{eval, eval_binds, run_delta, Delta, DeltaId, DeltaMap};
    let (result, state) = run_delta(DeltaId(1), |st| {
        let u2 = st.delta_let(Delta::Add(Box::new(Delta::Var(DeltaId(0))), Box::new(Delta::Var(DeltaId(0)))));
        let u3 = st.delta_let(Delta::Scale(3.0, Box::new(Delta::Var(u2))));
        // An unused binding, never reached: skipped (`Nothing`).
        st.delta_let(Delta::Scale(f64::INFINITY, Box::new(Delta::Var(DeltaId(0)))));
        Delta::Var(u3)
    });
    assert_eq!(state.next_id(), 4);
    let mut um = DeltaMap::new(state.next_id());
    eval(1.0, &result, &mut um);
    eval_binds(&state, &mut um);
    assert_eq!(um.lookup_or_zero(DeltaId(0)), 6.0);
    // A deep Delta does not overflow the stack in eval.
    let mut deep = Delta::Var(DeltaId(0));
    for _ in 0..100_000 {
        deep = Delta::Scale(1.0, Box::new(deep));
    }
    let mut um = DeltaMap::new(1);
    eval(2.0, &deep, &mut um);
    assert_eq!(um.lookup(DeltaId(0)), Some(2.0));
    std::mem::forget(deep); // dropping a 100 000-deep Box chain recurses
}

#[test]
fn unused_intermediates_do_not_poison_the_gradient() {
    // let s = sqrt x in x: s is never used, its infinite partial at 0 must
    // not produce NaN (its binding is never reached).
    let p = program1(&[Type::F64], &[Type::F64], |b, ps| {
        let _s = b.unary(UnOp::Sqrt, v(ps[0]));
        vec![v(ps[0])]
    });
    assert_eq!(scalars(&grad(&p, &[Value::F64(0.0)])), vec![1.0]);
}

#[test]
fn every_unary_math_function() {
    for op in UnOp::ALL {
        if !op.is_math() && op != UnOp::Neg {
            continue;
        }
        let x = match op {
            UnOp::Asin | UnOp::Acos | UnOp::Atan | UnOp::Erf | UnOp::Tanh => 0.3,
            UnOp::Lgamma | UnOp::Digamma => -2.7,
            UnOp::Floor | UnOp::Ceil | UnOp::Sign => 1.6,
            _ => 1.2,
        };
        let p = unary_program(op);
        let g = scalars(&grad(&p, &[Value::F64(x)]))[0];
        let want = match op {
            UnOp::Neg => -1.0,
            UnOp::Exp => x.exp(),
            UnOp::Log => 1.0 / x,
            UnOp::Sqrt => 0.5 / x.sqrt(),
            UnOp::Sin => x.cos(),
            UnOp::Cos => -x.sin(),
            UnOp::Tan => 1.0 / (x.cos() * x.cos()),
            UnOp::Tanh => 1.0 / (x.cosh() * x.cosh()),
            UnOp::Sinh => x.cosh(),
            UnOp::Cosh => x.sinh(),
            UnOp::Asin => 1.0 / (1.0 - x * x).sqrt(),
            UnOp::Acos => -1.0 / (1.0 - x * x).sqrt(),
            UnOp::Atan => 1.0 / (1.0 + x * x),
            UnOp::Log1p => 1.0 / (1.0 + x),
            UnOp::Expm1 => x.exp(),
            UnOp::Erf => 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp(),
            UnOp::Lgamma => oracle::digamma(x),
            UnOp::Digamma => oracle::trigamma(x),
            UnOp::Abs => 1.0,
            UnOp::Floor | UnOp::Ceil | UnOp::Sign => 0.0,
            _ => unreachable!("{op:?}"),
        };
        assert!(close(g, want, 1e-14), "{op:?}'({x}) = {g}, expected {want}");
        check(&p, &[Value::F64(x)], &[true], 11);
    }
}

#[test]
fn every_binary_arithmetic_operation() {
    for op in [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Pow, BinOp::Atan2, BinOp::Min, BinOp::Max] {
        let p = binary_program(op);
        check(&p, &[Value::F64(1.7), Value::F64(0.6)], &[true, true], 12);
        let x = if op == BinOp::Pow { 0.8 } else { -0.8 };
        check(&p, &[Value::F64(x), Value::F64(2.5)], &[true, false], 13);
    }
    let g = scalars(&grad(&binary_program(BinOp::Div), &[Value::F64(3.0), Value::F64(2.0)]));
    assert_eq!(g, vec![0.5, -0.75]);
    let g = scalars(&grad(&binary_program(BinOp::Atan2), &[Value::F64(1.0), Value::F64(2.0)]));
    assert_eq!(g, vec![0.4, -0.2]);
}

/// g(a: [n][m]f64, k: i64, c: f64) -> (f64, [m]f64):
///   row = a[k]; tail = a[1:n]; s = sum(for i < m => row[i] * c + tanh(a[0, i]));
///   lit = [s, c, row[0]]; r = for j < m => min(row[j], c) / (1 + max(lit)) + f64(k)
/// f(a, k, c, w) = let (s, r) = g(a, k, c) in (s * w + sum(r), r, dim tail)
fn mixed_program() -> Program {
    let (mut g, gp) = Function::with_params("g", &[F2, Type::I64, Type::F64], &[Type::F64, F1, Type::I64]);
    let mut b = Builder::new(&mut g);
    b.loc = Loc::new(7, 3);
    let (a, k, c) = (gp[0], gp[1], gp[2]);
    let row = b.let_one("row", Expr::Index { array: a, indices: vec![v(k)] }).as_var().unwrap();
    let n = b.let_one("n", Expr::Dim { array: a, axis: 0 });
    let tail = b.let_one("tail", Expr::Slice { array: a, lo: Atom::I64(1), hi: n }).as_var().unwrap();
    let m = b.let_one("m", Expr::Dim { array: a, axis: 1 });
    let terms = build(&mut b, m, |b, i| {
        let x = index(b, row, &[i]);
        let y = b.binary(BinOp::Mul, x, v(c));
        let z = index(b, a, &[Atom::I64(0), i]);
        let t = b.unary(UnOp::Tanh, z);
        b.binary(BinOp::Add, y, t)
    });
    let s = b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: terms.as_var().unwrap() });
    let r0 = index(&mut b, row, &[Atom::I64(0)]);
    let lit = b.let_one("lit", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![s, v(c), r0] }).as_var().unwrap();
    let mx = b.let_one("mx", Expr::Reduce { op: ReduceOp::Max, array: lit });
    let den = b.binary(BinOp::Add, Atom::F64(1.0), mx);
    let fk = b.unary(UnOp::ToF64, v(k));
    let r = build(&mut b, m, |b, j| {
        let x = index(b, row, &[j]);
        let mn = b.binary(BinOp::Min, x, v(c));
        let q = b.binary(BinOp::Div, mn, den);
        b.binary(BinOp::Add, q, fk)
    });
    let dt = b.let_one("dt", Expr::Dim { array: tail, axis: 0 });
    g.body = b.finish(vec![s, r, dt]);

    let (mut f, fp) = Function::with_params("f", &[F2, Type::I64, Type::F64, Type::F64], &[Type::F64, F1, Type::I64]);
    let mut b = Builder::new(&mut f);
    b.loc = Loc::new(12, 1);
    let (sv, rv, dv) = (b.var("s", Type::F64), b.var("r", F1), b.var("d", Type::I64));
    b.stmt(StmtKind::Let {
        vars: vec![sv, rv, dv],
        expr: Expr::Call { func: FuncId(1), args: vec![v(fp[0]), v(fp[1]), v(fp[2])] },
    });
    let sw = b.binary(BinOp::Mul, v(sv), v(fp[3]));
    let sr = b.let_one("sr", Expr::Reduce { op: ReduceOp::Sum, array: rv });
    let out = b.binary(BinOp::Add, sw, sr);
    f.body = b.finish(vec![out, v(rv), v(dv)]);
    program(vec![f, g])
}

#[test]
fn calls_views_slices_literals_and_several_results() {
    let p = mixed_program();
    let a = arr(&[3, 4], &[0.3, -0.2, 0.8, 1.1, -0.5, 0.25, 0.6, -0.9, 0.45, 0.7, -0.35, 0.15]);
    for (k, active) in
        [(0, [true, false, true, true]), (1, [true, false, true, false]), (2, [false, false, true, true])]
    {
        check(&p, &[a.clone(), Value::I64(k), Value::F64(0.4), Value::F64(1.5)], &active, 20 + k as u64);
    }
    // Run-time errors are the interpreter's, with the callee's location.
    let args = [a, Value::I64(3), Value::F64(0.4), Value::F64(1.5)];
    let e1 = interp::run(&p, FuncId(0), &args).unwrap_err();
    let e2 = oracle::jvp(&p, FuncId(0), &args, &[None, None, None, None]).unwrap_err();
    let e3 = oracle::vjp(&p, FuncId(0), &args, &[true; 4], &[None, None, None]).unwrap_err();
    assert_eq!(e1, e2);
    assert_eq!(e1, e3);
    assert_eq!(e1.kind, ErrorKind::IndexOutOfBounds);
    assert!(e1.message.starts_with("t.arr:7:3: index out of bounds: index 3"), "{}", e1.message);
}

#[test]
fn inactive_and_non_f64_parameters_get_no_cotangent() {
    let p = mixed_program();
    let a = arr(&[2, 2], &[0.1, 0.2, 0.3, 0.4]);
    let args = [a, Value::I64(1), Value::F64(0.4), Value::F64(1.5)];
    let cts = [Some(Value::F64(1.0)), Some(arr(&[2], &[0.5, -1.0])), None];
    let (_, g) = oracle::vjp(&p, FuncId(0), &args, &[true, true, false, true], &cts).unwrap();
    assert!(g[0].is_some() && g[1].is_none() && g[2].is_none() && g[3].is_some());
    let (_, t) = oracle::jvp(&p, FuncId(0), &args, &[None, None, Some(Value::F64(1.0)), None]).unwrap();
    assert!(t[0].is_some() && t[1].is_some() && t[2].is_none());
}

#[test]
fn bad_tangents_and_cotangents_are_invalid_arguments() {
    let p = mixed_program();
    let a = arr(&[2, 2], &[0.1, 0.2, 0.3, 0.4]);
    let args = [a, Value::I64(1), Value::F64(0.4), Value::F64(1.5)];
    let bad_shape = Some(arr(&[4], &[0.0; 4]));
    let e = oracle::jvp(&p, FuncId(0), &args, &[bad_shape, None, None, None]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let e = oracle::jvp(&p, FuncId(0), &args, &[None, Some(Value::I64(1)), None, None]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let e = oracle::jvp(&p, FuncId(0), &args, &[None]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let e = oracle::vjp(&p, FuncId(0), &args, &[true; 4], &[Some(arr(&[1], &[1.0])), None, None]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let e = oracle::vjp(&p, FuncId(0), &args, &[true; 4], &[None, None, Some(Value::F64(1.0))]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    let e = oracle::vjp(&p, FuncId(0), &args, &[true; 3], &[None, None, None]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
}

#[test]
fn imperative_forms_are_rejected() {
    let p = program1(&[F1], &[F1], |b, ps| {
        let g = b.let_one("g", Expr::ZerosLike(ps[0])).as_var().unwrap();
        b.stmt(StmtKind::AccAdd { acc: g, indices: vec![Atom::I64(0)], value: Atom::F64(1.0) });
        vec![v(g)]
    });
    let args = [arr(&[1], &[0.0])];
    assert!(interp::run(&p, FuncId(0), &args).is_ok());
    let e = oracle::jvp(&p, FuncId(0), &args, &[None]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("pure forms"), "{}", e.message);
    let e = oracle::vjp(&p, FuncId(0), &args, &[true], &[None]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
}

#[test]
fn digamma_known_values_and_finite_differences() {
    let known = [
        (1.0, -0.577_215_664_901_532_9),
        (0.5, -1.963_510_026_021_423_5),
        (2.0, 0.422_784_335_098_467_1),
        (10.0, 2.251_752_589_066_721),
        (-0.5, 0.036_489_973_978_576_52),
        (100.0, 4.600_161_852_738_087),
    ];
    for (x, want) in known {
        assert!(close(oracle::digamma(x), want, 1e-12), "digamma({x}) = {} vs {want}", oracle::digamma(x));
    }
    assert!(oracle::digamma(0.0).is_nan() && oracle::digamma(-2.0).is_nan() && oracle::digamma(f64::NAN).is_nan());
    assert_eq!(oracle::digamma(f64::INFINITY), f64::INFINITY);
    // Against central differences of lgamma, and trigamma against those of
    // digamma.
    let h = 1e-5;
    for x in [0.1, 0.7, 1.0, 2.5, 5.9, 6.1, 13.0, 120.0, -0.3, -1.5, -7.25] {
        let fd = (interp::ops::lgamma(x + h) - interp::ops::lgamma(x - h)) / (2.0 * h);
        assert!(close(oracle::digamma(x), fd, 1e-7), "digamma({x}) = {} vs {fd}", oracle::digamma(x));
        let fd2 = (oracle::digamma(x + h) - oracle::digamma(x - h)) / (2.0 * h);
        assert!(close(oracle::trigamma(x), fd2, 1e-6), "trigamma({x}) = {} vs {fd2}", oracle::trigamma(x));
    }
    assert!(close(oracle::trigamma(1.0), std::f64::consts::PI.powi(2) / 6.0, 1e-14));
    assert!(close(oracle::trigamma(0.5), std::f64::consts::PI.powi(2) / 2.0, 1e-14));
}

#[test]
fn gradient_cost_is_linear_in_the_primal() {
    // sum(for i < n => a[i] * a[i]) for n = 100 000 and 200 000: the times
    // are printed (they grow linearly); only a generous bound is asserted,
    // the machine being shared.
    let p = program1(&[F1], &[Type::F64], |b, ps| {
        let n = b.let_one("n", Expr::Dim { array: ps[0], axis: 0 });
        let sq = build(b, n, |b, i| {
            let x = index(b, ps[0], &[i]);
            b.binary(BinOp::Mul, x, x)
        });
        vec![b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: sq.as_var().unwrap() })]
    });
    let time = |n: usize| {
        let a = arr(&[n], &vec![0.5; n]);
        let start = Instant::now();
        let (_, g) = oracle::vjp(&p, FuncId(0), &[a], &[true], &[Some(Value::F64(1.0))]).unwrap();
        assert!(f64s(g[0].as_ref().unwrap()).iter().all(|&x| x == 1.0));
        start.elapsed()
    };
    let (t1, t2) = (time(100_000), time(200_000));
    eprintln!("vjp of a sum of squares: {t1:?} for 1e5, {t2:?} for 2e5");
    assert!(t2 < Duration::from_secs(5), "took {t2:?}");
}

#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    // `if c then (if c then ... x * x ...) else x`, nested; building,
    // verifying and dropping such IR recurses too, hence the big stack here.
    fn nested(depth: usize) -> Program {
        program1(&[Type::BOOL, Type::F64], &[Type::F64], |b, ps| {
            fn go(b: &mut Builder, c: Atom, x: Atom, d: usize) -> Atom {
                if d == 0 {
                    return b.binary(BinOp::Mul, x, x);
                }
                b.begin_block();
                let inner = go(b, c, x, d - 1);
                let t = b.end_block(vec![inner]);
                b.begin_block();
                let e = b.end_block(vec![x]);
                b.let_one("r", Expr::If { cond: c, then_branch: t, else_branch: e })
            }
            vec![go(b, v(ps[0]), v(ps[1]), depth)]
        })
    }
    let big = std::thread::Builder::new().stack_size(1 << 28);
    big.spawn(|| {
        let args = [Value::Bool(true), Value::F64(3.0)];
        let p = nested(3000);
        let (_, g) = oracle::vjp(&p, FuncId(0), &args, &[false, true], &[Some(Value::F64(1.0))]).unwrap();
        assert_eq!(g[1], Some(Value::F64(6.0)));
        let (_, t) = oracle::jvp(&p, FuncId(0), &args, &[None, Some(Value::F64(1.0))]).unwrap();
        assert_eq!(t[0], Some(Value::F64(6.0)));
        let p = nested(interp::stack::MAX_DEPTH + 5);
        let e = oracle::jvp(&p, FuncId(0), &args, &[None, Some(Value::F64(1.0))]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfMemory);
    })
    .unwrap()
    .join()
    .unwrap();
}
