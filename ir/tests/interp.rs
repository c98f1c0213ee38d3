//! Tests of the reference interpreter on IR built by hand.

use arrayad_ir::builder::Builder;
use arrayad_ir::interp::{self, ops};
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_program;
use arrayad_ir::{ArrayData, ArrayValue, RuntimeError, Value};

const FILE: &str = "t.arr";

/// A one-function program whose body `build` emits, after verification.
fn program1(params: &[Type], results: &[Type], build: impl FnOnce(&mut Builder, &[VarId]) -> Vec<Atom>) -> Program {
    let (mut f, ps) = Function::with_params("f", params, results);
    let mut b = Builder::new(&mut f);
    b.loc = Loc::new(3, 7);
    let rs = build(&mut b, &ps);
    f.body = b.finish(rs);
    let p = Program { file: FILE.into(), funcs: vec![f] };
    verify_program(&p).expect("test program verifies");
    p
}

fn run(p: &Program, args: &[Value]) -> Result<Vec<Value>, RuntimeError> {
    interp::run(p, FuncId(0), args)
}

fn arr_f64(shape: &[usize], data: &[f64]) -> Value {
    Value::Array(ArrayValue::f64(shape.to_vec(), data.to_vec()).expect("consistent test array"))
}

fn arr_i64(shape: &[usize], data: &[i64]) -> Value {
    Value::Array(ArrayValue { shape: shape.to_vec(), data: ArrayData::I64(data.to_vec()) })
}

const F1: Type = Type { elem: Scalar::F64, rank: 1 };
const F2: Type = Type { elem: Scalar::F64, rank: 2 };
const I1: Type = Type { elem: Scalar::I64, rank: 1 };

fn v(x: VarId) -> Atom {
    Atom::Var(x)
}

/// `for i < n => body(i)` with one result.
fn build(b: &mut Builder, n: Atom, body: impl FnOnce(&mut Builder, Atom) -> Atom) -> Atom {
    let i = b.var("i", Type::I64);
    b.begin_block();
    let r = body(b, v(i));
    let blk = b.end_block(vec![r]);
    b.let_one("arr", Expr::Build { n, index: i, body: blk })
}

fn expect_err(r: Result<Vec<Value>, RuntimeError>, kind: ErrorKind, parts: &[&str]) {
    let e = r.expect_err("a run-time error");
    assert_eq!(e.kind, kind, "{}", e.message);
    for p in parts {
        assert!(e.message.contains(p), "message {:?} lacks {:?}", e.message, p);
    }
}

#[test]
fn sum_of_squares_with_build_and_reduce() {
    let p = program1(&[F1], &[Type::F64], |b, ps| {
        let n = b.let_one("n", Expr::Dim { array: ps[0], axis: 0 });
        let sq = build(b, n, |b, i| {
            let x = b.let_one("x", Expr::Index { array: ps[0], indices: vec![i] });
            b.binary(BinOp::Mul, x, x)
        });
        vec![b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: sq.as_var().unwrap() })]
    });
    let out = run(&p, &[arr_f64(&[3], &[1.0, 2.0, 3.0])]).unwrap();
    assert_eq!(out, vec![Value::F64(14.0)]);
    // Empty input: sum of nothing is 0.
    assert_eq!(run(&p, &[arr_f64(&[0], &[])]).unwrap(), vec![Value::F64(0.0)]);
}

#[test]
fn loop_with_two_states() {
    // Fibonacci: (a, b) = (0, 1); n times (a, b) = (b, a + b).
    let p = program1(&[Type::I64], &[Type::I64, Type::I64], |b, ps| {
        let i = b.var("i", Type::I64);
        let a = b.var("a", Type::I64);
        let c = b.var("b", Type::I64);
        b.begin_block();
        let s = b.binary(BinOp::Add, v(a), v(c));
        let body = b.end_block(vec![v(c), s]);
        let out = b.let_infer(
            "st",
            Expr::Loop { n: v(ps[0]), index: i, states: vec![a, c], init: vec![Atom::I64(0), Atom::I64(1)], body },
        );
        out.into_iter().map(v).collect()
    });
    assert_eq!(run(&p, &[Value::I64(10)]).unwrap(), vec![Value::I64(55), Value::I64(89)]);
    assert_eq!(run(&p, &[Value::I64(0)]).unwrap(), vec![Value::I64(0), Value::I64(1)]);
    expect_err(run(&p, &[Value::I64(-2)]), ErrorKind::NegativeSize, &["t.arr:3:7", "-2"]);
}

#[test]
fn if_expression_takes_one_branch() {
    // if x > 0 then x * 2 else 1 / 0 (the other branch must not run)
    let p = program1(&[Type::I64], &[Type::I64], |b, ps| {
        let c = b.binary(BinOp::Gt, v(ps[0]), Atom::I64(0));
        b.begin_block();
        let t = b.binary(BinOp::Mul, v(ps[0]), Atom::I64(2));
        let then_branch = b.end_block(vec![t]);
        b.begin_block();
        let e = b.binary(BinOp::Div, Atom::I64(1), Atom::I64(0));
        let else_branch = b.end_block(vec![e]);
        vec![b.let_one("r", Expr::If { cond: c, then_branch, else_branch })]
    });
    assert_eq!(run(&p, &[Value::I64(4)]).unwrap(), vec![Value::I64(8)]);
    expect_err(run(&p, &[Value::I64(-4)]), ErrorKind::DivisionByZero, &["t.arr:3:7", "division of 1 by zero"]);
}

#[test]
fn views_slices_and_dims() {
    // a: [3][2]; r = a[1]; s = a[1:3]; t = s[1, 0]; d = dim s 0
    let p = program1(&[F2], &[F1, F2, Type::F64, Type::I64, Type::I64], |b, ps| {
        let r = b.let_one("r", Expr::Index { array: ps[0], indices: vec![Atom::I64(1)] });
        let s = b.let_one("s", Expr::Slice { array: ps[0], lo: Atom::I64(1), hi: Atom::I64(3) });
        let sv = s.as_var().unwrap();
        let t = b.let_one("t", Expr::Index { array: sv, indices: vec![Atom::I64(1), Atom::I64(0)] });
        let d0 = b.let_one("d0", Expr::Dim { array: sv, axis: 0 });
        let d1 = b.let_one("d1", Expr::Dim { array: sv, axis: 1 });
        vec![r, s, t, d0, d1]
    });
    let a = arr_f64(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run(&p, &[a]).unwrap();
    assert_eq!(
        out,
        vec![
            arr_f64(&[2], &[3.0, 4.0]),
            arr_f64(&[2, 2], &[3.0, 4.0, 5.0, 6.0]),
            Value::F64(5.0),
            Value::I64(2),
            Value::I64(2),
        ]
    );
}

#[test]
fn acc_add_through_views_updates_the_parent() {
    // g = zeros_like a ([2][3]); g[1][2] += 5 via the row view; g[0] += row;
    // s = g[1:2]; s[0, 0] += 7; g[1, 1] += g[1, 2] (scalar from the same buffer)
    let p = program1(&[F2, F1], &[F2], |b, ps| {
        let g = b.let_one("g", Expr::ZerosLike(ps[0])).as_var().unwrap();
        let row = b.let_one("row", Expr::Index { array: g, indices: vec![Atom::I64(1)] }).as_var().unwrap();
        b.stmt(StmtKind::AccAdd { acc: row, indices: vec![Atom::I64(2)], value: Atom::F64(5.0) });
        b.stmt(StmtKind::AccAdd { acc: g, indices: vec![Atom::I64(0)], value: v(ps[1]) });
        let s = b.let_one("s", Expr::Slice { array: g, lo: Atom::I64(1), hi: Atom::I64(2) }).as_var().unwrap();
        b.stmt(StmtKind::AccAdd { acc: s, indices: vec![Atom::I64(0), Atom::I64(0)], value: Atom::F64(7.0) });
        let x = b.let_one("x", Expr::Index { array: g, indices: vec![Atom::I64(1), Atom::I64(2)] });
        b.stmt(StmtKind::AccAdd { acc: g, indices: vec![Atom::I64(1), Atom::I64(1)], value: x });
        // Accumulating a row of the accumulator into another row of it.
        let r0 = b.let_one("r0", Expr::Index { array: g, indices: vec![Atom::I64(0)] });
        b.stmt(StmtKind::AccAdd { acc: g, indices: vec![Atom::I64(0)], value: r0 });
        // No indices: the whole array (here the parameter `a`, all ones).
        b.stmt(StmtKind::AccAdd { acc: g, indices: vec![], value: v(ps[0]) });
        vec![v(g)]
    });
    let out = run(&p, &[arr_f64(&[2, 3], &[1.0; 6]), arr_f64(&[3], &[1.0, 2.0, 3.0])]).unwrap();
    assert_eq!(out, vec![arr_f64(&[2, 3], &[3.0, 5.0, 7.0, 8.0, 6.0, 6.0])]);
    // A row of the wrong length: size mismatch.
    expect_err(
        run(&p, &[arr_f64(&[2, 3], &[0.0; 6]), arr_f64(&[2], &[1.0, 2.0])]),
        ErrorKind::SizeMismatch,
        &["t.arr:3:7", "2 and 3"],
    );
}

#[test]
fn acc_add_into_a_non_accumulator_is_rejected() {
    let p = program1(&[F1], &[F1], |b, ps| {
        b.stmt(StmtKind::AccAdd { acc: ps[0], indices: vec![Atom::I64(0)], value: Atom::F64(1.0) });
        vec![v(ps[0])]
    });
    expect_err(run(&p, &[arr_f64(&[1], &[0.0])]), ErrorKind::InvalidArgument, &["not an accumulator"]);
}

#[test]
fn mutable_variables_for_loops_and_effect_ifs() {
    // mut s = 0; for rev i < n do { if i % 2 == 0 then { s := s * 10 + i } else {} }
    let p = program1(&[Type::I64], &[Type::I64], |b, ps| {
        let s = b.func.new_mut_var("s", Type::I64);
        b.stmt(StmtKind::Let { vars: vec![s], expr: Expr::Atom(Atom::I64(0)) });
        let i = b.var("i", Type::I64);
        b.begin_block();
        let r = b.binary(BinOp::Rem, v(i), Atom::I64(2));
        let c = b.binary(BinOp::Eq, r, Atom::I64(0));
        b.begin_block();
        let t = b.binary(BinOp::Mul, v(s), Atom::I64(10));
        let t = b.binary(BinOp::Add, t, v(i));
        b.stmt(StmtKind::Assign { var: s, value: t });
        let then_branch = b.end_block(vec![]);
        b.begin_block();
        let else_branch = b.end_block(vec![]);
        b.stmt(StmtKind::If { cond: c, then_branch, else_branch });
        let body = b.end_block(vec![]);
        b.stmt(StmtKind::For { n: v(ps[0]), index: i, reverse: true, body });
        vec![v(s)]
    });
    assert_eq!(run(&p, &[Value::I64(7)]).unwrap(), vec![Value::I64(6420)]);
    // A negative count runs the loop zero times.
    assert_eq!(run(&p, &[Value::I64(-3)]).unwrap(), vec![Value::I64(0)]);
}

#[test]
fn tape_is_last_in_first_out_and_arrays_are_pushed_by_reference() {
    // push 1; push 2; g = zeros_like a; push g; g[0] += 3; pop h; pop y; pop x
    let p = program1(&[F1], &[Type::I64, Type::I64, F1], |b, ps| {
        b.stmt(StmtKind::Push(Atom::I64(1)));
        b.stmt(StmtKind::Push(Atom::I64(2)));
        let g = b.let_one("g", Expr::ZerosLike(ps[0])).as_var().unwrap();
        b.stmt(StmtKind::Push(v(g)));
        b.stmt(StmtKind::AccAdd { acc: g, indices: vec![Atom::I64(0)], value: Atom::F64(3.0) });
        let h = b.let1("h", Expr::Pop, F1);
        let y = b.let1("y", Expr::Pop, Type::I64);
        let x = b.let1("x", Expr::Pop, Type::I64);
        vec![v(y), v(x), v(h)]
    });
    let out = run(&p, &[arr_f64(&[2], &[9.0, 9.0])]).unwrap();
    assert_eq!(out, vec![Value::I64(2), Value::I64(1), arr_f64(&[2], &[3.0, 0.0])]);
}

#[test]
fn tape_rewind_replays_popped_entries() {
    // push 1, 2, 3; m0 = mark; pop a, b; rewind m0; pop c, d; m1 = mark;
    // pop e; rewind m1; pop f
    let p = program1(&[], &[Type::I64; 7], |b, _| {
        for k in 1..=3 {
            b.stmt(StmtKind::Push(Atom::I64(k)));
        }
        let m0 = b.let1("m0", Expr::TapeMark, Type::I64);
        let a = b.let1("a", Expr::Pop, Type::I64);
        let bb = b.let1("b", Expr::Pop, Type::I64);
        b.stmt(StmtKind::TapeRewind(v(m0)));
        let c = b.let1("c", Expr::Pop, Type::I64);
        let d = b.let1("d", Expr::Pop, Type::I64);
        let m1 = b.let1("m1", Expr::TapeMark, Type::I64);
        let e = b.let1("e", Expr::Pop, Type::I64);
        b.stmt(StmtKind::TapeRewind(v(m1)));
        let f = b.let1("f", Expr::Pop, Type::I64);
        vec![v(a), v(bb), v(c), v(d), v(e), v(f), v(m0)]
    });
    let want: Vec<Value> = [3, 2, 3, 2, 1, 1, 3].iter().map(|k| Value::I64(*k)).collect();
    assert_eq!(run(&p, &[]).unwrap(), want);
}

#[test]
fn tape_rewind_past_the_stored_tape_is_an_error() {
    // push 1, 2; m = mark (2); pop; pop; push 9 (discards both); rewind m
    let p = program1(&[], &[Type::I64], |b, _| {
        b.stmt(StmtKind::Push(Atom::I64(1)));
        b.stmt(StmtKind::Push(Atom::I64(2)));
        let m = b.let1("m", Expr::TapeMark, Type::I64);
        b.let1("x", Expr::Pop, Type::I64);
        b.let1("y", Expr::Pop, Type::I64);
        b.stmt(StmtKind::Push(Atom::I64(9)));
        b.stmt(StmtKind::TapeRewind(v(m)));
        vec![v(b.let1("z", Expr::Pop, Type::I64))]
    });
    expect_err(run(&p, &[]), ErrorKind::InvalidArgument, &["tape_rewind to mark 2", "holds 1 entries"]);
    // A mark from a parameter: beyond the tape, or negative.
    let p = program1(&[Type::I64], &[Type::I64], |b, ps| {
        b.stmt(StmtKind::Push(Atom::I64(5)));
        b.stmt(StmtKind::TapeRewind(v(ps[0])));
        vec![v(b.let1("z", Expr::Pop, Type::I64))]
    });
    assert_eq!(run(&p, &[Value::I64(1)]).unwrap(), vec![Value::I64(5)]);
    expect_err(run(&p, &[Value::I64(2)]), ErrorKind::InvalidArgument, &["tape_rewind to mark 2"]);
    expect_err(run(&p, &[Value::I64(-1)]), ErrorKind::InvalidArgument, &["tape_rewind to mark -1"]);
    expect_err(run(&p, &[Value::I64(i64::MAX)]), ErrorKind::InvalidArgument, &["tape_rewind"]);
    // Rewinding to 0 leaves nothing to pop.
    expect_err(run(&p, &[Value::I64(0)]), ErrorKind::InvalidArgument, &["empty tape"]);
}

#[test]
fn tape_marks_and_rewinds_survive_the_optimiser() {
    // push 1; push 2; m1 = mark (unused); m2 = mark; a = pop; rewind m2;
    // b = pop; a + b. Marks are effects: neither removed nor merged.
    let mut p = program1(&[], &[Type::I64], |b, _| {
        b.stmt(StmtKind::Push(Atom::I64(1)));
        b.stmt(StmtKind::Push(Atom::I64(2)));
        b.let1("m1", Expr::TapeMark, Type::I64);
        let m2 = b.let1("m2", Expr::TapeMark, Type::I64);
        let a = b.let1("a", Expr::Pop, Type::I64);
        b.stmt(StmtKind::TapeRewind(v(m2)));
        let c = b.let1("c", Expr::Pop, Type::I64);
        vec![b.binary(BinOp::Add, v(a), v(c))]
    });
    arrayad_ir::passes::optimize(&mut p.funcs[0]);
    verify_program(&p).unwrap();
    let text = arrayad_ir::printer::print_function(&p.funcs[0], None);
    assert_eq!(text.matches("= tape_mark").count(), 2, "{text}");
    assert_eq!(text.matches("tape_rewind m2").count(), 1, "{text}");
    assert_eq!(run(&p, &[]).unwrap(), vec![Value::I64(4)]);
}

#[test]
fn tape_rewind_of_a_non_integer_does_not_verify() {
    let (mut f, _) = Function::with_params("f", &[], &[]);
    let mut b = Builder::new(&mut f);
    b.stmt(StmtKind::TapeRewind(Atom::F64(1.0)));
    f.body = b.finish(vec![]);
    let p = Program { file: FILE.into(), funcs: vec![f] };
    let e = verify_program(&p).unwrap_err();
    assert!(e.message.contains("tape_rewind"), "{e}");
}

#[test]
fn pop_from_an_empty_tape_is_an_error() {
    let p = program1(&[], &[Type::I64], |b, _| vec![v(b.let1("x", Expr::Pop, Type::I64))]);
    expect_err(run(&p, &[]), ErrorKind::InvalidArgument, &["empty tape"]);
}

#[test]
fn calls_evaluate_the_callee() {
    // g(x, y) = (x * y, x + y); f(a) = let (p, s) = g(a, 3) in p - s
    let (mut g, gp) = Function::with_params("g", &[Type::F64, Type::F64], &[Type::F64, Type::F64]);
    let mut b = Builder::new(&mut g);
    let m = b.binary(BinOp::Mul, v(gp[0]), v(gp[1]));
    let s = b.binary(BinOp::Add, v(gp[0]), v(gp[1]));
    g.body = b.finish(vec![m, s]);
    let (mut f, fp) = Function::with_params("f", &[Type::F64], &[Type::F64]);
    let mut b = Builder::new(&mut f);
    let pv = b.var("p", Type::F64);
    let sv = b.var("s", Type::F64);
    b.stmt(StmtKind::Let {
        vars: vec![pv, sv],
        expr: Expr::Call { func: FuncId(1), args: vec![v(fp[0]), Atom::F64(3.0)] },
    });
    let r = b.binary(BinOp::Sub, v(pv), v(sv));
    f.body = b.finish(vec![r]);
    let p = Program { file: FILE.into(), funcs: vec![f, g] };
    verify_program(&p).unwrap();
    assert_eq!(interp::run(&p, FuncId(0), &[Value::F64(2.0)]).unwrap(), vec![Value::F64(1.0)]);
}

#[test]
fn recursion_is_rejected() {
    let (mut f, fp) = Function::with_params("f", &[Type::F64], &[Type::F64]);
    let rv = f.new_var("r", Type::F64);
    f.body.stmts.push(Stmt {
        kind: StmtKind::Let { vars: vec![rv], expr: Expr::Call { func: FuncId(0), args: vec![v(fp[0])] } },
        loc: Loc::new(2, 2),
    });
    f.body.results = vec![v(rv)];
    let p = Program { file: FILE.into(), funcs: vec![f] };
    expect_err(interp::run(&p, FuncId(0), &[Value::F64(1.0)]), ErrorKind::InvalidArgument, &["recursively"]);
}

fn unary_value(op: UnOp, x: Value) -> Value {
    let t = x.ty();
    let rt = unop_result(op, t);
    let p = program1(&[t], &[rt], |b, ps| vec![b.unary(op, v(ps[0]))]);
    run(&p, &[x]).unwrap().remove(0)
}

fn binary_value(op: BinOp, x: Value, y: Value) -> Result<Value, RuntimeError> {
    let t = x.ty();
    let p = program1(&[t, t], &[binop_result(op, t)], |b, ps| vec![b.binary(op, v(ps[0]), v(ps[1]))]);
    run(&p, &[x, y]).map(|mut r| r.remove(0))
}

#[test]
fn every_unary_operation() {
    let x = 0.3f64;
    let f = |op| unary_value(op, Value::F64(x));
    for op in UnOp::ALL {
        let got = match op {
            UnOp::Not => unary_value(op, Value::Bool(true)),
            UnOp::ToF64 => unary_value(op, Value::I64(-7)),
            _ => f(op),
        };
        let want = match op {
            UnOp::Neg => Value::F64(-x),
            UnOp::Not => Value::Bool(false),
            UnOp::Exp => Value::F64(x.exp()),
            UnOp::Log => Value::F64(x.ln()),
            UnOp::Sqrt => Value::F64(x.sqrt()),
            UnOp::Sin => Value::F64(x.sin()),
            UnOp::Cos => Value::F64(x.cos()),
            UnOp::Tan => Value::F64(x.tan()),
            UnOp::Tanh => Value::F64(x.tanh()),
            UnOp::Sinh => Value::F64(x.sinh()),
            UnOp::Cosh => Value::F64(x.cosh()),
            UnOp::Asin => Value::F64(x.asin()),
            UnOp::Acos => Value::F64(x.acos()),
            UnOp::Atan => Value::F64(x.atan()),
            UnOp::Log1p => Value::F64(x.ln_1p()),
            UnOp::Expm1 => Value::F64(x.exp_m1()),
            UnOp::Erf => Value::F64(0.328_626_759_459_127_4),
            UnOp::Lgamma => Value::F64(1.095_797_994_818_075_2),
            UnOp::Abs => Value::F64(x),
            UnOp::Floor => Value::F64(0.0),
            UnOp::Ceil => Value::F64(1.0),
            UnOp::ToF64 => Value::F64(-7.0),
            UnOp::ToI64 => Value::I64(0),
            UnOp::Sign => Value::F64(1.0),
            UnOp::Digamma => Value::F64(-3.502_524_222_200_133),
            #[allow(unreachable_patterns)]
            _ => panic!("new unary operation {op:?}: extend this test"),
        };
        match (&got, &want) {
            (Value::F64(g), Value::F64(w)) => assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{op:?}: {g} vs {w}"),
            _ => assert_eq!(got, want, "{op:?}"),
        }
    }
    // Edge cases.
    assert_eq!(unary_value(UnOp::Neg, Value::I64(i64::MIN)), Value::I64(i64::MIN));
    assert_eq!(unary_value(UnOp::ToI64, Value::F64(-2.9)), Value::I64(-2));
    assert_eq!(unary_value(UnOp::ToI64, Value::F64(1e300)), Value::I64(i64::MAX));
    assert_eq!(unary_value(UnOp::ToI64, Value::F64(f64::NEG_INFINITY)), Value::I64(i64::MIN));
    assert_eq!(unary_value(UnOp::ToI64, Value::F64(f64::NAN)), Value::I64(0));
    assert_eq!(unary_value(UnOp::Abs, Value::F64(-2.5)), Value::F64(2.5));
    assert_eq!(unary_value(UnOp::Floor, Value::F64(-2.5)), Value::F64(-3.0));
    assert_eq!(unary_value(UnOp::Sign, Value::F64(-0.0)).as_f64().map(f64::is_sign_negative), Some(true));
    assert_eq!(unary_value(UnOp::Sign, Value::F64(-3.0)), Value::F64(-1.0));
    assert!(unary_value(UnOp::Sqrt, Value::F64(-1.0)).as_f64().unwrap().is_nan());
    assert_eq!(unary_value(UnOp::Log, Value::F64(0.0)), Value::F64(f64::NEG_INFINITY));
    assert_eq!(unary_value(UnOp::Lgamma, Value::F64(0.0)), Value::F64(f64::INFINITY));
    assert!((unary_value(UnOp::Lgamma, Value::F64(-0.5)).as_f64().unwrap() - 1.265_512_123_484_645_3).abs() < 1e-15);
}

#[test]
fn every_binary_operation() {
    use BinOp::*;
    let f = |op, a: f64, b: f64| binary_value(op, Value::F64(a), Value::F64(b)).unwrap();
    let i = |op, a: i64, b: i64| binary_value(op, Value::I64(a), Value::I64(b));
    let bl = |op, a: bool, b: bool| binary_value(op, Value::Bool(a), Value::Bool(b)).unwrap();
    assert_eq!(f(Add, 1.5, 2.25), Value::F64(3.75));
    assert_eq!(f(Sub, 1.5, 2.25), Value::F64(-0.75));
    assert_eq!(f(Mul, 1.5, 2.0), Value::F64(3.0));
    assert_eq!(f(Div, 1.0, 0.0), Value::F64(f64::INFINITY));
    assert_eq!(f(Pow, 2.0, 10.0), Value::F64(1024.0));
    assert_eq!(f(Atan2, 1.0, -1.0), Value::F64(1.0f64.atan2(-1.0)));
    assert_eq!(f(Min, 1.0, -2.0), Value::F64(-2.0));
    assert_eq!(f(Max, 1.0, -2.0), Value::F64(1.0));
    assert!(f(Min, f64::NAN, 1.0).as_f64().unwrap().is_nan());
    assert!(f(Max, 1.0, f64::NAN).as_f64().unwrap().is_nan());
    for (op, want) in [(Eq, false), (Ne, true), (Lt, true), (Le, true), (Gt, false), (Ge, false)] {
        assert_eq!(f(op, 1.0, 2.0), Value::Bool(want), "{op:?}");
        assert_eq!(i(op, 1, 2).unwrap(), Value::Bool(want), "{op:?}");
    }
    assert_eq!(f(Eq, f64::NAN, f64::NAN), Value::Bool(false));
    assert_eq!(i(Add, i64::MAX, 1).unwrap(), Value::I64(i64::MIN));
    assert_eq!(i(Sub, i64::MIN, 1).unwrap(), Value::I64(i64::MAX));
    assert_eq!(i(Mul, i64::MAX, 2).unwrap(), Value::I64(-2));
    assert_eq!(i(Div, -7, 2).unwrap(), Value::I64(-3));
    assert_eq!(i(Rem, -7, 2).unwrap(), Value::I64(-1));
    assert_eq!(i(Rem, 7, -2).unwrap(), Value::I64(1));
    assert_eq!(i(Div, i64::MIN, -1).unwrap(), Value::I64(i64::MIN));
    assert_eq!(i(Rem, i64::MIN, -1).unwrap(), Value::I64(0));
    assert_eq!(i(Min, 3, -4).unwrap(), Value::I64(-4));
    assert_eq!(i(Max, 3, -4).unwrap(), Value::I64(3));
    expect_err(
        i(Div, 5, 0).map(|v| vec![v]),
        ErrorKind::DivisionByZero,
        &["t.arr:3:7", "integer division of 5 by zero"],
    );
    expect_err(i(Rem, 5, 0).map(|v| vec![v]), ErrorKind::DivisionByZero, &["t.arr:3:7", "remainder of 5 by zero"]);
    assert_eq!(bl(And, true, false), Value::Bool(false));
    assert_eq!(bl(Or, true, false), Value::Bool(true));
    assert_eq!(bl(Eq, true, false), Value::Bool(false));
    assert_eq!(bl(Ne, true, false), Value::Bool(true));
}

#[test]
fn reductions() {
    let red = |op: ReduceOp, xs: &[f64]| {
        let p = program1(&[F1], &[Type::F64], |b, ps| vec![b.let_one("r", Expr::Reduce { op, array: ps[0] })]);
        run(&p, &[arr_f64(&[xs.len()], xs)])
    };
    assert_eq!(red(ReduceOp::Max, &[1.0, 5.0, -2.0]).unwrap(), vec![Value::F64(5.0)]);
    assert_eq!(red(ReduceOp::Min, &[1.0, 5.0, -2.0]).unwrap(), vec![Value::F64(-2.0)]);
    assert!(red(ReduceOp::Max, &[1.0, f64::NAN, 9.0]).unwrap()[0].as_f64().unwrap().is_nan());
    assert!(red(ReduceOp::Min, &[f64::NAN, 1.0]).unwrap()[0].as_f64().unwrap().is_nan());
    expect_err(red(ReduceOp::Max, &[]), ErrorKind::EmptyReduction, &["t.arr:3:7", "maximum", "`p0`"]);
    expect_err(red(ReduceOp::Min, &[]), ErrorKind::EmptyReduction, &["t.arr:3:7", "minimum"]);
    let p =
        program1(&[I1], &[Type::I64], |b, ps| vec![b.let_one("r", Expr::Reduce { op: ReduceOp::Sum, array: ps[0] })]);
    assert_eq!(run(&p, &[arr_i64(&[3], &[i64::MAX, 1, 1])]).unwrap(), vec![Value::I64(i64::MIN + 1)]);
}

#[test]
fn array_literals_and_irregular_rows() {
    // [a, b] of two [n]f64 rows, and [1, 2, 3].
    let p = program1(&[F1, F1], &[F2, I1], |b, ps| {
        let m = b.let_one("m", Expr::ArrayLit { elem_ty: F1, elems: vec![v(ps[0]), v(ps[1])] });
        let l = b
            .let_one("l", Expr::ArrayLit { elem_ty: Type::I64, elems: vec![Atom::I64(1), Atom::I64(2), Atom::I64(3)] });
        vec![m, l]
    });
    let out = run(&p, &[arr_f64(&[2], &[1.0, 2.0]), arr_f64(&[2], &[3.0, 4.0])]).unwrap();
    assert_eq!(out, vec![arr_f64(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), arr_i64(&[3], &[1, 2, 3])]);
    expect_err(
        run(&p, &[arr_f64(&[2], &[1.0, 2.0]), arr_f64(&[3], &[3.0, 4.0, 5.0])]),
        ErrorKind::IrregularArray,
        &["t.arr:3:7", "row 1 has shape [3] but row 0 has shape [2]"],
    );
    // An empty literal of rows has extent 0 in every dimension.
    let p = program1(&[], &[Type { elem: Scalar::F64, rank: 3 }], |b, _| {
        vec![b.let_one("e", Expr::ArrayLit { elem_ty: F2, elems: vec![] })]
    });
    assert_eq!(
        run(&p, &[]).unwrap(),
        vec![Value::Array(ArrayValue { shape: vec![0, 0, 0], data: ArrayData::F64(vec![]) })]
    );
}

#[test]
fn build_of_arrays_checks_regularity_and_handles_zero_rows() {
    // for i < n => iota(i + 1 if irregular else 2)
    let p = program1(&[Type::I64, Type::BOOL], &[Type { elem: Scalar::I64, rank: 2 }], |b, ps| {
        let out = build(b, v(ps[0]), |b, i| {
            let i1 = b.binary(BinOp::Add, i, Atom::I64(1));
            b.begin_block();
            let t = b.end_block(vec![i1]);
            b.begin_block();
            let e = b.end_block(vec![Atom::I64(2)]);
            let len = b.let_one("len", Expr::If { cond: v(ps[1]), then_branch: t, else_branch: e });
            build(b, len, |b, j| b.binary(BinOp::Mul, i, j))
        });
        vec![out]
    });
    let out = run(&p, &[Value::I64(3), Value::Bool(false)]).unwrap();
    assert_eq!(out, vec![arr_i64(&[3, 2], &[0, 0, 0, 1, 0, 2])]);
    expect_err(
        run(&p, &[Value::I64(3), Value::Bool(true)]),
        ErrorKind::IrregularArray,
        &["t.arr:3:7", "row 1 has shape [2] but row 0 has shape [1]"],
    );
    let out = run(&p, &[Value::I64(0), Value::Bool(true)]).unwrap();
    assert_eq!(out, vec![arr_i64(&[0, 0], &[])]);
    expect_err(run(&p, &[Value::I64(-1), Value::Bool(true)]), ErrorKind::NegativeSize, &["t.arr:3:7", "-1"]);
}

#[test]
fn index_and_slice_errors_name_the_values() {
    let p = program1(&[F2, Type::I64, Type::I64], &[Type::F64], |b, ps| {
        b.loc = Loc::new(4, 9);
        let x = b.let_one("x", Expr::Index { array: ps[0], indices: vec![v(ps[1]), v(ps[2])] });
        vec![x]
    });
    let a = arr_f64(&[2, 3], &[0.0; 6]);
    assert_eq!(run(&p, &[a.clone(), Value::I64(1), Value::I64(2)]).unwrap(), vec![Value::F64(0.0)]);
    expect_err(
        run(&p, &[a.clone(), Value::I64(2), Value::I64(0)]),
        ErrorKind::IndexOutOfBounds,
        &["t.arr:4:9", "index 2", "axis 0", "`p0`", "extent 2"],
    );
    expect_err(
        run(&p, &[a.clone(), Value::I64(0), Value::I64(-1)]),
        ErrorKind::IndexOutOfBounds,
        &["t.arr:4:9", "index -1", "axis 1", "extent 3"],
    );
    let p = program1(&[F1, Type::I64, Type::I64], &[F1], |b, ps| {
        vec![b.let_one("s", Expr::Slice { array: ps[0], lo: v(ps[1]), hi: v(ps[2]) })]
    });
    let a = arr_f64(&[3], &[1.0, 2.0, 3.0]);
    assert_eq!(run(&p, &[a.clone(), Value::I64(3), Value::I64(3)]).unwrap(), vec![arr_f64(&[0], &[])]);
    for (lo, hi) in [(2, 1), (-1, 2), (0, 4)] {
        expect_err(
            run(&p, &[a.clone(), Value::I64(lo), Value::I64(hi)]),
            ErrorKind::SliceOutOfRange,
            &["t.arr:3:7", &format!("{lo}:{hi}"), "`p0`", "extent 3"],
        );
    }
}

#[test]
fn check_size_reports_both_sizes() {
    let p = program1(&[Type::I64, Type::I64], &[Type::I64], |b, ps| {
        b.stmt(StmtKind::CheckSize { a: v(ps[0]), b: v(ps[1]), what: "rows of x and y".into() });
        vec![v(ps[0])]
    });
    assert_eq!(run(&p, &[Value::I64(2), Value::I64(2)]).unwrap(), vec![Value::I64(2)]);
    expect_err(
        run(&p, &[Value::I64(2), Value::I64(5)]),
        ErrorKind::SizeMismatch,
        &["t.arr:3:7", "rows of x and y", "2", "5"],
    );
}

#[test]
fn bad_arguments_are_invalid() {
    let p = program1(&[F2], &[F2], |_, ps| vec![v(ps[0])]);
    expect_err(run(&p, &[]), ErrorKind::InvalidArgument, &["0 arguments given, 1 expected"]);
    expect_err(run(&p, &[Value::F64(1.0)]), ErrorKind::InvalidArgument, &["type"]);
    expect_err(run(&p, &[arr_f64(&[2], &[1.0, 2.0])]), ErrorKind::InvalidArgument, &["type"]);
    let bad = Value::Array(ArrayValue { shape: vec![2, 2], data: ArrayData::F64(vec![1.0]) });
    expect_err(run(&p, &[bad]), ErrorKind::InvalidArgument, &["shape [2, 2] with 1 elements"]);
    let overflow = Value::Array(ArrayValue { shape: vec![1 << 40, 1 << 40], data: ArrayData::F64(vec![]) });
    expect_err(run(&p, &[overflow]), ErrorKind::InvalidArgument, &["elements"]);
    let huge_empty = Value::Array(ArrayValue { shape: vec![1 << 40, 1 << 40, 0], data: ArrayData::F64(vec![]) });
    let p3 = program1(&[Type { elem: Scalar::F64, rank: 3 }], &[Type::I64], |b, ps| {
        vec![b.let_one("d", Expr::Dim { array: ps[0], axis: 1 })]
    });
    assert_eq!(run(&p3, &[huge_empty]).unwrap(), vec![Value::I64(1 << 40)]);
    let too_big = Value::Array(ArrayValue { shape: vec![0, usize::MAX], data: ArrayData::F64(vec![]) });
    expect_err(run(&p3, &[too_big]), ErrorKind::InvalidArgument, &["extent"]);
    let rank0 = Value::Array(ArrayValue { shape: vec![], data: ArrayData::F64(vec![1.0]) });
    let p0 = program1(&[Type::F64], &[Type::F64], |_, ps| vec![v(ps[0])]);
    expect_err(run(&p0, &[rank0]), ErrorKind::InvalidArgument, &["rank 0"]);
    expect_err(interp::run(&p0, FuncId(7), &[]), ErrorKind::InvalidArgument, &["no function"]);
}

#[test]
fn huge_builds_run_out_of_memory_gracefully() {
    let p = program1(&[Type::I64], &[F1], |b, ps| vec![build(b, v(ps[0]), |_, _| Atom::F64(1.0))]);
    expect_err(run(&p, &[Value::I64(i64::MAX)]), ErrorKind::OutOfMemory, &["t.arr:3:7"]);
}

/// `if c then (if c then ... x ...)` nested `depth` times.
fn nested_ifs(depth: usize) -> Program {
    program1(&[Type::BOOL, Type::F64], &[Type::F64], |b, ps| {
        fn go(b: &mut Builder, c: Atom, x: Atom, d: usize) -> Atom {
            if d == 0 {
                return b.binary(BinOp::Add, x, Atom::F64(1.0));
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

#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    // Building, verifying and dropping such a program recurses too (in the
    // builder, the verifier and `Drop`): do that on a big stack, and only
    // the interpreter's evaluation is what this test is about.
    let big = std::thread::Builder::new().stack_size(1 << 28);
    big.spawn(|| {
        let p = nested_ifs(3000);
        assert_eq!(run(&p, &[Value::Bool(true), Value::F64(1.0)]).unwrap(), vec![Value::F64(2.0)]);
        let p = nested_ifs(interp::stack::MAX_DEPTH + 5);
        expect_err(run(&p, &[Value::Bool(true), Value::F64(1.0)]), ErrorKind::OutOfMemory, &["nested deeper"]);
    })
    .unwrap()
    .join()
    .unwrap();
}

#[test]
fn malformed_ir_gives_errors_not_panics() {
    // A variable used before it is bound (the verifier would reject this).
    let (mut f, _) = Function::with_params("f", &[], &[Type::F64]);
    let x = f.new_var("x", Type::F64);
    let y = f.new_var("y", Type::F64);
    f.body.stmts.push(Stmt { kind: StmtKind::Let { vars: vec![y], expr: Expr::Atom(v(x)) }, loc: Loc::new(5, 1) });
    f.body.results = vec![v(y)];
    let p = Program { file: FILE.into(), funcs: vec![f] };
    expect_err(run(&p, &[]), ErrorKind::InvalidArgument, &["t.arr:5:1", "malformed IR", "`x%0`"]);
    // A variable outside the table.
    let (mut f, _) = Function::with_params("f", &[], &[Type::F64]);
    f.body.results = vec![Atom::Var(VarId(99))];
    let p = Program { file: FILE.into(), funcs: vec![f] };
    expect_err(run(&p, &[]), ErrorKind::InvalidArgument, &["malformed IR"]);
}

#[test]
fn ops_agree_with_the_c_library() {
    // digamma: known values (the runtime's series, which this one follows
    // operation for operation, is accurate to about 2e-13 near 1).
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
    assert!(close(ops::digamma(1.0), -0.577_215_664_901_532_9));
    assert!(close(ops::digamma(0.5), -1.963_510_026_021_423_5));
    assert!(close(ops::digamma(-0.5), 0.036_489_973_978_576_52));
    assert!(close(ops::digamma(10.0), 2.251_752_589_066_721));
    assert!(ops::digamma(0.0).is_nan() && ops::digamma(-3.0).is_nan());
    assert!(close(ops::erf(1.0), 0.842_700_792_949_714_9));
    assert!(close(ops::lgamma(10.0), 362_880f64.ln()));
}
