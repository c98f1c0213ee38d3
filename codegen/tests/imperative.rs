//! The imperative forms of the backward pass: mutable variables, the tape,
//! accumulators, effect loops (forward and reverse) and branches, size checks.

mod common;
use arrayad_ir::builder::Builder;
use arrayad_ir::*;
use common::*;

fn idx(b: &mut Builder, a: VarId, is: &[Atom]) -> Atom {
    b.let_one("x", Expr::Index { array: a, indices: is.to_vec() })
}

fn for_(b: &mut Builder, n: Atom, reverse: bool, body: impl FnOnce(&mut Builder, Atom)) {
    let i = b.var("i", Type::I64);
    b.begin_block();
    body(b, v(i));
    let blk = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse, body: blk });
}

fn pop(b: &mut Builder, t: Type) -> Atom {
    v(b.let1("p", Expr::Pop, t))
}

/// Pushes i = 0..n-1 in a forward loop, pops them in a reverse loop into a
/// mutable accumulator `acc := acc * 10 + popped` (the order shows).
#[test]
fn tape_round_trip_in_reverse_order() {
    let p = program1(&[Type::I64], &[Type::I64, Type::F64], |b, ps| {
        let n = v(ps[0]);
        for_(b, n, false, |b, i| {
            b.stmt(StmtKind::Push(i));
            let f = b.unary(UnOp::ToF64, i);
            b.stmt(StmtKind::Push(f));
        });
        let acc = b.func.new_mut_var("acc", Type::I64);
        b.stmt(StmtKind::Let { vars: vec![acc], expr: Expr::Atom(Atom::I64(0)) });
        let facc = b.func.new_mut_var("facc", Type::F64);
        b.stmt(StmtKind::Let { vars: vec![facc], expr: Expr::Atom(Atom::F64(0.0)) });
        for_(b, n, true, |b, _| {
            let f = pop(b, Type::F64);
            let k = pop(b, Type::I64);
            let t = b.binary(BinOp::Mul, v(acc), Atom::I64(10));
            let t = b.binary(BinOp::Add, t, k);
            b.stmt(StmtKind::Assign { var: acc, value: t });
            let g = b.binary(BinOp::Add, v(facc), f);
            b.stmt(StmtKind::Assign { var: facc, value: g });
        });
        vec![v(acc), v(facc)]
    });
    assert_eq!(run_both(&p, &[Value::I64(4)]).unwrap(), vec![Value::I64(3210), Value::F64(6.0)]);
    assert_eq!(run_both(&p, &[Value::I64(0)]).unwrap(), vec![Value::I64(0), Value::F64(0.0)]);
    assert_eq!(run_both(&p, &[Value::I64(-3)]).unwrap(), vec![Value::I64(0), Value::F64(0.0)]);
    // Many entries: the tape grows (more than its first 1024 slots).
    let n = 100_000i64;
    let r = jit(&p).call("f", &[Value::I64(n)]).unwrap();
    assert_eq!(r[1], Value::F64((0..n).rev().map(|k| k as f64).fold(0.0, |a, b| a + b)));
}

#[test]
fn tape_holds_every_type_and_arrays_by_reference() {
    // push x (array), push b, push 2.5, push 7; pop in reverse; return them
    let p = program1(&[F2, Type::BOOL], &[Type::I64, Type::F64, Type::BOOL, F2, Type::F64], |b, ps| {
        b.stmt(StmtKind::Push(v(ps[0])));
        b.stmt(StmtKind::Push(v(ps[1])));
        b.stmt(StmtKind::Push(Atom::F64(2.5)));
        b.stmt(StmtKind::Push(Atom::I64(7)));
        let k = pop(b, Type::I64);
        let f = pop(b, Type::F64);
        let bo = pop(b, Type::BOOL);
        let a = pop(b, F2);
        let e = idx(b, a.as_var().unwrap(), &[Atom::I64(1), Atom::I64(0)]);
        vec![k, f, bo, a, e]
    });
    let m = arr_f64(&[2, 2], &[1., 2., 3., 4.]);
    let r = run_both(&p, &[m.clone(), Value::Bool(true)]).unwrap();
    assert_eq!(r, vec![Value::I64(7), Value::F64(2.5), Value::Bool(true), m, Value::F64(3.0)]);
}

#[test]
fn tape_underflow_is_reported_not_a_crash() {
    let p = program1(&[], &[Type::F64], |b, _| vec![pop(b, Type::F64)]);
    let e = jit(&p).call("f", &[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("tape"), "{}", e.message);
}

/// `acc = zeros_like(x)`; `acc[i, j] += x[i, j] * k`; `acc[i] += row`; and
/// the whole accumulated through a view `acc[1]`.
#[test]
fn accumulators_scalar_and_row_wise_through_views() {
    let p = program1(&[F2, F1], &[F2], |b, ps| {
        let (x, r) = (ps[0], ps[1]);
        let acc = b.let_one("acc", Expr::ZerosLike(x)).as_var().unwrap();
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let m = b.let_one("m", Expr::Dim { array: x, axis: 1 });
        for_(b, n, false, |b, i| {
            for_(b, m, true, |b, j| {
                let e = idx(b, x, &[i, j]);
                let e3 = b.binary(BinOp::Mul, e, Atom::F64(3.0));
                b.stmt(StmtKind::AccAdd { acc, indices: vec![i, j], value: e3 });
            });
            b.stmt(StmtKind::AccAdd { acc, indices: vec![i], value: v(r) });
        });
        let row1 = b.let_one("row1", Expr::Index { array: acc, indices: vec![Atom::I64(1)] }).as_var().unwrap();
        b.stmt(StmtKind::AccAdd { acc: row1, indices: vec![Atom::I64(0)], value: Atom::F64(100.0) });
        vec![v(acc)]
    });
    let x = arr_f64(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let r = arr_f64(&[3], &[0.5, 0.25, 0.125]);
    let out = run_both(&p, &[x.clone(), r]).unwrap();
    assert_eq!(out, vec![arr_f64(&[2, 3], &[3.5, 6.25, 9.125, 112.5, 15.25, 18.125])]);
    // A row of the wrong length is a size mismatch.
    let msg = expect_err(run_both(&p, &[x, arr_f64(&[2], &[0.0, 0.0])]), ErrorKind::SizeMismatch, &["t.arr:3:7"]);
    assert!(msg.contains("accumulation into `acc`"), "{msg}");
    assert!(msg.contains("2 and 3 differ"), "{msg}");
}

#[test]
fn accumulator_index_out_of_bounds() {
    let p = program1(&[F1, Type::I64], &[F1], |b, ps| {
        let acc = b.let_one("acc", Expr::ZerosLike(ps[0])).as_var().unwrap();
        b.stmt(StmtKind::AccAdd { acc, indices: vec![v(ps[1])], value: Atom::F64(1.0) });
        vec![v(acc)]
    });
    let x = arr_f64(&[3], &[0.0; 3]);
    assert_eq!(run_both(&p, &[x.clone(), Value::I64(2)]).unwrap(), vec![arr_f64(&[3], &[0., 0., 1.])]);
    expect_err(run_both(&p, &[x, Value::I64(3)]), ErrorKind::IndexOutOfBounds, &["t.arr:3:7", "index 3", "`acc`"]);
}

#[test]
fn effect_if_and_mutable_arrays() {
    // mut best := x; for i < n: if x[i] > 0 then best := (for j => x[j] + i) else ()
    let p = program1(&[F1], &[F1, Type::I64], |b, ps| {
        let x = ps[0];
        let best = b.func.new_mut_var("best", F1);
        b.stmt(StmtKind::Let { vars: vec![best], expr: Expr::Atom(v(x)) });
        let cnt = b.func.new_mut_var("cnt", Type::I64);
        b.stmt(StmtKind::Let { vars: vec![cnt], expr: Expr::Atom(Atom::I64(0)) });
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        for_(b, n, false, |b, i| {
            let e = idx(b, x, &[i]);
            let c = b.binary(BinOp::Gt, e, Atom::F64(0.0));
            b.begin_block();
            let fi = b.unary(UnOp::ToF64, i);
            let nb = build(b, n, |b, j| {
                let xj = idx(b, x, &[j]);
                b.binary(BinOp::Add, xj, fi)
            });
            b.stmt(StmtKind::Assign { var: best, value: nb });
            let c1 = b.binary(BinOp::Add, v(cnt), Atom::I64(1));
            b.stmt(StmtKind::Assign { var: cnt, value: c1 });
            let t = b.end_block(vec![]);
            b.begin_block();
            let e = b.end_block(vec![]);
            b.stmt(StmtKind::If { cond: c, then_branch: t, else_branch: e });
        });
        vec![v(best), v(cnt)]
    });
    let r = run_both(&p, &[arr_f64(&[3], &[1.0, -1.0, 2.0])]).unwrap();
    assert_eq!(r, vec![arr_f64(&[3], &[3.0, 1.0, 4.0]), Value::I64(2)]);
    let r = run_both(&p, &[arr_f64(&[2], &[-1.0, -1.0])]).unwrap();
    assert_eq!(r, vec![arr_f64(&[2], &[-1.0, -1.0]), Value::I64(0)]);
}

#[test]
fn check_size() {
    let p = program1(&[F1, F1], &[Type::F64], |b, ps| {
        let n = b.let_one("n", Expr::Dim { array: ps[0], axis: 0 });
        let m = b.let_one("m", Expr::Dim { array: ps[1], axis: 0 });
        b.stmt(StmtKind::CheckSize { a: n, b: m, what: "operands of `+` (100%)".into() });
        vec![Atom::F64(1.0)]
    });
    assert_eq!(run_both(&p, &[arr_f64(&[2], &[0.; 2]), arr_f64(&[2], &[0.; 2])]).unwrap(), vec![Value::F64(1.0)]);
    let msg =
        expect_err(run_both(&p, &[arr_f64(&[2], &[0.; 2]), arr_f64(&[3], &[0.; 3])]), ErrorKind::SizeMismatch, &[]);
    assert_eq!(msg, "t.arr:3:7: size mismatch: operands of `+` (100%): 2 and 3 differ");
}

/// A hand-written reverse pass over a loop: f(x) = prod_i x[i] by a loop
/// with the running product taped, then the gradient by a reverse For.
#[test]
fn hand_written_reverse_pass() {
    let p = program1(&[F1], &[Type::F64, F1], |b, ps| {
        let x = ps[0];
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let i = b.var("i", Type::I64);
        let s = b.var("s", Type::F64);
        b.begin_block();
        b.stmt(StmtKind::Push(v(s)));
        let e = idx(b, x, &[v(i)]);
        let s2 = b.binary(BinOp::Mul, v(s), e);
        let body = b.end_block(vec![s2]);
        let prod = b.let_one("prod", Expr::Loop { n, index: i, states: vec![s], init: vec![Atom::F64(1.0)], body });
        let dx = b.let_one("dx", Expr::ZerosLike(x)).as_var().unwrap();
        let ct = b.func.new_mut_var("ct", Type::F64);
        b.stmt(StmtKind::Let { vars: vec![ct], expr: Expr::Atom(Atom::F64(1.0)) });
        for_(b, n, true, |b, i| {
            let sprev = pop(b, Type::F64);
            let xi = idx(b, x, &[i]);
            let g = b.binary(BinOp::Mul, v(ct), sprev);
            b.stmt(StmtKind::AccAdd { acc: dx, indices: vec![i], value: g });
            let c2 = b.binary(BinOp::Mul, v(ct), xi);
            b.stmt(StmtKind::Assign { var: ct, value: c2 });
        });
        vec![prod, v(dx)]
    });
    let r = run_both(&p, &[arr_f64(&[4], &[2.0, 3.0, 5.0, 7.0])]).unwrap();
    assert_eq!(r, vec![Value::F64(210.0), arr_f64(&[4], &[105.0, 70.0, 42.0, 30.0])]);
}
