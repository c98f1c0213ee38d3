//! Loop-invariant code motion of bindings that may fail: out of a loop
//! whose trip count is a literal of at least 1, and only past statements
//! that cannot fail, so that the call's first error stays the same.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::passes;
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_program;
use arrayad_ir::{interp, ArrayValue, Value};
use common::{bits, v, F1};

/// `f(x: [n]f64)` with three comprehensions:
/// - `for r < 2`: a one-hot row `[0.0, 0.0] with [r] = 1.0`, then
///   `sin(x[3])` (invariant, may fail: leaves the loop);
/// - `for r < n`: `x[1]` (may fail, the loop may run zero times: stays);
/// - `for r < 2`: `x[r]`, then `x[5]` (invariant, but behind a statement
///   that may fail: stays);
/// - two loops over accumulators (`+=`), whose reads and zeros stay.
fn program() -> Program {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1; 5]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let index = |b: &mut Builder, k: Atom| b.let_one("e", Expr::Index { array: x, indices: vec![k] });

    let r = b.var("r", Type::I64);
    b.begin_block();
    let one_hot = b.let1("oh", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![Atom::F64(0.0); 2] }, F1);
    let row = b.let1("row", Expr::Update { array: one_hot, indices: vec![v(r)], value: Atom::F64(1.0) }, F1);
    let e3 = index(&mut b, Atom::I64(3));
    let s3 = b.unary(UnOp::Sin, e3);
    let pick = b.let_one("pick", Expr::Index { array: row, indices: vec![v(r)] });
    let res = b.binary(BinOp::Mul, s3, pick);
    let body = b.end_block(vec![res]);
    let first = b.let1("first", Expr::Build { n: Atom::I64(2), index: r, body }, F1);

    let r2 = b.var("r", Type::I64);
    b.begin_block();
    let e1 = index(&mut b, Atom::I64(1));
    let ri = b.let_one("ri", Expr::Unary(UnOp::ToF64, v(r2)));
    let res = b.binary(BinOp::Add, e1, ri);
    let body = b.end_block(vec![res]);
    let second = b.let1("second", Expr::Build { n, index: r2, body }, F1);

    let r3 = b.var("r", Type::I64);
    b.begin_block();
    let xr = index(&mut b, v(r3));
    let e5 = index(&mut b, Atom::I64(5));
    let res = b.binary(BinOp::Add, xr, e5);
    let body = b.end_block(vec![res]);
    let third = b.let1("third", Expr::Build { n: Atom::I64(2), index: r3, body }, F1);

    // An accumulator read before it is added to: its element changes from
    // one iteration to the next, so the read stays.
    let acc = b.let1("acc", Expr::Zeros(vec![Atom::I64(1)]), F1);
    let r4 = b.var("r", Type::I64);
    b.begin_block();
    let seen = b.let_one("seen", Expr::Index { array: acc, indices: vec![Atom::I64(0)] });
    b.stmt(StmtKind::AccAdd { acc, indices: vec![Atom::I64(0)], value: Atom::F64(1.0) });
    let body = b.end_block(vec![seen]);
    let fourth = b.let1("fourth", Expr::Build { n: Atom::I64(2), index: r4, body }, F1);

    // An accumulator made per iteration: it stays in the loop.
    let r5 = b.var("r", Type::I64);
    b.begin_block();
    let fresh = b.let1("fresh", Expr::Zeros(vec![Atom::I64(2)]), F1);
    b.stmt(StmtKind::AccAdd { acc: fresh, indices: vec![v(r5)], value: Atom::F64(2.0) });
    let total = b.let_one("total", Expr::Reduce { op: ReduceOp::Sum, array: fresh });
    let body = b.end_block(vec![total]);
    let fifth = b.let1("fifth", Expr::Build { n: Atom::I64(2), index: r5, body }, F1);

    f.body = b.finish(vec![v(first), v(second), v(third), v(fourth), v(fifth)]);
    let p = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&p).expect("the program verifies");
    p
}

/// The nesting depth of the statement `x[k]` for the literal `k`.
fn depth_of_index(b: &Block, k: i64, depth: usize) -> Option<usize> {
    for s in &b.stmts {
        if let StmtKind::Let { expr: Expr::Index { indices, .. }, .. } = &s.kind {
            if indices.as_slice() == [Atom::I64(k)] {
                return Some(depth);
            }
        }
        for child in arrayad_ir::visit::child_blocks(&s.kind) {
            if let Some(d) = depth_of_index(child, k, depth + 1) {
                return Some(d);
            }
        }
    }
    None
}

/// `f` as a program, before and after LICM (both verified), and the
/// transformed program printed.
fn licm_of(f: Function) -> (Program, Program, String) {
    let before = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&before).expect("the program verifies");
    let mut after = before.clone();
    passes::licm::licm(&mut after.funcs[0]);
    verify_program(&after).expect("the transformed program verifies");
    let shown = arrayad_ir::printer::print_program(&after);
    (before, after, shown)
}

/// `before` and `after` give bitwise the same values, or the same first
/// error, on `x: [n]f64` for every `n` of `sizes`.
fn assert_same_runs(before: &Program, after: &Program, sizes: &[usize]) {
    for &n in sizes {
        let data: Vec<f64> = (0..n).map(|k| 0.25 + k as f64).collect();
        let args = [Value::Array(ArrayValue::f64(vec![n], data).expect("array"))];
        match (interp::run(before, FuncId(0), &args), interp::run(after, FuncId(0), &args)) {
            (Ok(w), Ok(g)) => assert_eq!(bits(&g), bits(&w), "n = {n}"),
            (Err(w), Err(g)) => assert_eq!(format!("{g:?}"), format!("{w:?}"), "n = {n}"),
            (w, g) => panic!("n = {n}: the original gives {w:?}, the transformed {g:?}"),
        }
    }
}

#[test]
fn fallible_invariants_leave_loops_that_run_and_keep_the_first_error() {
    let before = program();
    let mut after = before.clone();
    passes::licm::licm(&mut after.funcs[0]);
    verify_program(&after).expect("the transformed program verifies");
    let shown = arrayad_ir::printer::print_program(&after);
    assert_eq!(depth_of_index(&after.funcs[0].body, 3, 0), Some(0), "x[3] leaves `for r < 2`\n{shown}");
    assert_eq!(depth_of_index(&after.funcs[0].body, 1, 0), Some(1), "x[1] stays in `for r < n`\n{shown}");
    assert_eq!(depth_of_index(&after.funcs[0].body, 5, 0), Some(1), "x[5] stays behind x[r]\n{shown}");
    let f = &after.funcs[0];
    for (name, len) in [("fourth", 2), ("fifth", 3)] {
        let body = f.body.stmts.iter().find_map(|s| match &s.kind {
            StmtKind::Let { vars, expr: Expr::Build { body, .. } } if f.var(vars[0]).name == name => Some(body),
            _ => None,
        });
        assert_eq!(body.map(|b| b.stmts.len()), Some(len), "`{name}` keeps its statements\n{shown}");
    }
    // The same values, and the same first error, at every size: x[3]
    // fails for n <= 3, x[r] for n <= 1 (before x[5]), x[5] for n <= 5.
    assert_same_runs(&before, &after, &[0, 1, 2, 3, 4, 5, 6, 7]);
}

/// `f(x: [n]f64)` with one comprehension `for r < 2` whose first statement
/// fails at run time although it has no index: rows of different lengths
/// (`irregular`), or the update of a literal of arrays with a row of
/// another length. `x[6]` after it stays in the loop, and the error is
/// the one the original reports.
fn failing_first(irregular: bool) -> Program {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let r = b.var("r", Type::I64);
    b.begin_block();
    let first = if irregular {
        let j = b.var("j", Type::I64);
        b.begin_block();
        let same = b.binary(BinOp::Eq, v(j), v(r));
        b.begin_block();
        let one = b.let1("one", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![Atom::F64(1.0)] }, F1);
        let then_branch = b.end_block(vec![v(one)]);
        b.begin_block();
        let two = b.let1("two", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![Atom::F64(1.0); 2] }, F1);
        let else_branch = b.end_block(vec![v(two)]);
        let row = b.let1("row", Expr::If { cond: same, then_branch, else_branch }, F1);
        let rows = b.end_block(vec![v(row)]);
        b.let1("t", Expr::Build { n: Atom::I64(2), index: j, body: rows }, Type { elem: Scalar::F64, rank: 2 })
    } else {
        let u = b.let1("u", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![Atom::F64(1.0)] }, F1);
        let w = b.let1("w", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![Atom::F64(1.0); 3] }, F1);
        let m2 = Type { elem: Scalar::F64, rank: 2 };
        let lit = b.let1("lit", Expr::ArrayLit { elem_ty: F1, elems: vec![v(u), v(u)] }, m2);
        b.let1("t", Expr::Update { array: lit, indices: vec![v(r)], value: v(w) }, m2)
    };
    let rows = b.let_one("rows", Expr::Dim { array: first, axis: 0 });
    let e6 = b.let_one("e", Expr::Index { array: x, indices: vec![Atom::I64(6)] });
    let rf = b.let_one("rf", Expr::Unary(UnOp::ToF64, rows));
    let res = b.binary(BinOp::Add, e6, rf);
    let body = b.end_block(vec![res]);
    let out = b.let1("out", Expr::Build { n: Atom::I64(2), index: r, body }, F1);
    f.body = b.finish(vec![v(out)]);
    let p = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&p).expect("the program verifies");
    p
}

#[test]
fn statements_failing_without_an_index_keep_later_reads_in_the_loop() {
    for irregular in [true, false] {
        let before = failing_first(irregular);
        let mut after = before.clone();
        passes::licm::licm(&mut after.funcs[0]);
        verify_program(&after).expect("the transformed program verifies");
        let shown = arrayad_ir::printer::print_program(&after);
        assert_eq!(depth_of_index(&after.funcs[0].body, 6, 0), Some(1), "x[6] stays\n{shown}");
        for n in [3, 8] {
            let args = [Value::Array(ArrayValue::f64(vec![n], vec![0.5; n]).expect("array"))];
            let want = interp::run(&before, FuncId(0), &args).expect_err("the original fails");
            let got = interp::run(&after, FuncId(0), &args).expect_err("the transformed program fails");
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "irregular = {irregular}, n = {n}");
        }
    }
}

/// `f(x: [n]f64) = for r < 2 => [1.0, 2.0][r] + x[7]`: the read of the
/// literal at the loop index depends on `r` and stays, but the size facts
/// prove it in bounds, so `x[7]` after it leaves the loop, with the same
/// value and the same first error at every size.
#[test]
fn reads_proven_in_bounds_do_not_keep_later_reads_in_the_loop() {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let r = b.var("r", Type::I64);
    b.begin_block();
    let lit = b.let1("lit", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![Atom::F64(1.0), Atom::F64(2.0)] }, F1);
    let pick = b.let_one("pick", Expr::Index { array: lit, indices: vec![v(r)] });
    let e7 = b.let_one("e", Expr::Index { array: x, indices: vec![Atom::I64(7)] });
    let res = b.binary(BinOp::Add, pick, e7);
    let body = b.end_block(vec![res]);
    let out = b.let1("out", Expr::Build { n: Atom::I64(2), index: r, body }, F1);
    f.body = b.finish(vec![v(out)]);
    let (before, after, shown) = licm_of(f);
    assert_eq!(depth_of_index(&after.funcs[0].body, 7, 0), Some(0), "x[7] leaves the loop\n{shown}");
    assert_same_runs(&before, &after, &[0, 7, 8, 9]);
}

/// `f(x: [n]f64) = for r < 2 => (while s < r + 3 do s + 1) + x[7]`: a
/// `while` that stays may run forever, so `x[7]` after it stays in the loop
/// (moving it would turn a call that does not end into an error).
#[test]
fn a_while_that_stays_keeps_later_reads_in_the_loop() {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let r = b.var("r", Type::I64);
    b.begin_block();
    let limit = b.binary(BinOp::Add, v(r), Atom::I64(3));
    let s = b.var("s", Type::I64);
    b.begin_block();
    let c = b.binary(BinOp::Lt, v(s), limit);
    let cond = b.end_block(vec![c]);
    b.begin_block();
    let next = b.binary(BinOp::Add, v(s), Atom::I64(1));
    let body = b.end_block(vec![next]);
    let end = b.let1("end", Expr::While { states: vec![s], init: vec![Atom::I64(0)], cond, body }, Type::I64);
    let endf = b.let_one("endf", Expr::Unary(UnOp::ToF64, v(end)));
    let e7 = b.let_one("e", Expr::Index { array: x, indices: vec![Atom::I64(7)] });
    let res = b.binary(BinOp::Add, endf, e7);
    let body = b.end_block(vec![res]);
    let out = b.let1("out", Expr::Build { n: Atom::I64(2), index: r, body }, F1);
    f.body = b.finish(vec![v(out)]);
    let (before, after, shown) = licm_of(f);
    assert_eq!(depth_of_index(&after.funcs[0].body, 7, 0), Some(1), "x[7] stays in the loop\n{shown}");
    assert_same_runs(&before, &after, &[8]);
}
