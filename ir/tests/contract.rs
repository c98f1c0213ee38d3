//! Array contraction of loop-local accumulators (`passes::contract`) on
//! generated backward-pass-like loops: accumulators added into at the loop
//! index, at the next or the previous iteration's element (guarded to stay
//! in bounds), at literal indices under a test of the index, and read back
//! at the index or beside it. The contracted program must give bitwise the
//! results of the original under the reference interpreter, and the
//! generator must produce accumulators that are contracted as well as ones
//! that must not be.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::interp;
use arrayad_ir::passes::contract::contract_accumulators;
use arrayad_ir::program::*;
use arrayad_ir::types::Type;
use arrayad_ir::verify::verify_program;
use arrayad_ir::{ArrayValue, Value};
use common::{assert_same_results, bits, v, when, Rng, F1};

/// `0 <= j < n`.
fn in_bounds(b: &mut Builder, j: Atom, n: Atom) -> Atom {
    let ge = b.binary(BinOp::Ge, j, Atom::I64(0));
    let lt = b.binary(BinOp::Lt, j, n);
    b.binary(BinOp::And, ge, lt)
}

/// A program of `x: [n]f64` with 1 to 3 accumulators (`zeros_like x` or
/// `zeros [n]`) and one loop (forward or reverse) of 1 to 6 operations on
/// them, adding what it reads into `out`, which it returns, sometimes with
/// an accumulator (which then stays an array), sometimes with a second
/// loop using one.
fn program(rng: &mut Rng) -> Program {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1, F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let count = 1 + rng.below(3) as usize;
    let accs: Vec<VarId> = (0..count)
        .map(|k| {
            let expr = if rng.below(2) == 0 { Expr::ZerosLike(x) } else { Expr::Zeros(vec![n]) };
            b.let1(format!("a{k}"), expr, F1)
        })
        .collect();
    let out = b.let1("out", Expr::ZerosLike(x), F1);
    let reverse = rng.below(2) == 0;
    let step: i64 = if reverse { -1 } else { 1 };
    let i = b.var("i", Type::I64);
    b.begin_block();
    let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![v(i)] });
    let mut value = xi;
    for _ in 0..1 + rng.below(6) {
        let acc = accs[rng.below(count as u64) as usize];
        value = b.binary(BinOp::Mul, value, Atom::F64(1.0 + rng.below(7) as f64 / 8.0));
        match rng.below(6) {
            // An addition at the index, the next iteration's element or
            // the previous one's (the last keeps the array).
            0..=2 => {
                let c = [0, step, -step][rng.below(3) as usize];
                let j = b.binary(BinOp::Add, v(i), Atom::I64(c));
                let inside = in_bounds(&mut b, j, n);
                when(&mut b, inside, |b| b.stmt(StmtKind::AccAdd { acc, indices: vec![j], value }));
            }
            // At a literal index under `if i == k`: `k` itself, or the
            // next iteration's element.
            3 => {
                let k = 1 + rng.below(3) as i64;
                let c = if rng.below(2) == 0 { 0 } else { step };
                let test = b.binary(BinOp::Eq, v(i), Atom::I64(k));
                when(&mut b, test, |b| {
                    let inside = in_bounds(b, Atom::I64(k + c), n);
                    when(b, inside, |b| b.stmt(StmtKind::AccAdd { acc, indices: vec![Atom::I64(k + c)], value }));
                });
            }
            // A read at the index (or, rarely, at the next iteration's
            // element: the array stays), added into `out`.
            _ => {
                let read = |b: &mut Builder, j: Atom, value: Atom| {
                    let t = b.let_one("t", Expr::Index { array: acc, indices: vec![j] });
                    let scaled = b.binary(BinOp::Mul, t, Atom::F64(0.75));
                    let sum = b.binary(BinOp::Add, scaled, value);
                    b.stmt(StmtKind::AccAdd { acc: out, indices: vec![v(i)], value: sum });
                };
                if rng.below(5) != 0 {
                    read(&mut b, v(i), value);
                } else if reverse {
                    // `i - 1` where `i != 0`: known in bounds.
                    let first = b.binary(BinOp::Eq, v(i), Atom::I64(0));
                    b.begin_block();
                    let then_branch = b.end_block(vec![]);
                    b.begin_block();
                    let j = b.binary(BinOp::Sub, v(i), Atom::I64(1));
                    read(&mut b, j, value);
                    let else_branch = b.end_block(vec![]);
                    b.stmt(StmtKind::If { cond: first, then_branch, else_branch });
                } else {
                    let j = b.binary(BinOp::Add, v(i), Atom::I64(1));
                    let inside = in_bounds(&mut b, j, n);
                    when(&mut b, inside, |b| read(b, j, value));
                }
            }
        }
    }
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse, body });
    if rng.below(4) == 0 {
        // A second loop reading an accumulator.
        let acc = accs[rng.below(count as u64) as usize];
        let j = b.var("j", Type::I64);
        b.begin_block();
        let t = b.let_one("t", Expr::Index { array: acc, indices: vec![v(j)] });
        b.stmt(StmtKind::AccAdd { acc: out, indices: vec![v(j)], value: t });
        let body = b.end_block(vec![]);
        b.stmt(StmtKind::For { n, index: j, reverse: false, body });
    }
    let second = if rng.below(4) == 0 { accs[rng.below(count as u64) as usize] } else { out };
    f.body = b.finish(vec![v(out), v(second)]);
    let p = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&p).expect("generated program verifies");
    p
}

/// The accumulators a function binds.
fn accumulators(b: &Block) -> usize {
    b.stmts.iter().filter(|s| matches!(s.kind, StmtKind::Let { expr: Expr::Zeros(_) | Expr::ZerosLike(_), .. })).count()
}

#[test]
fn contracted_accumulators_give_bitwise_the_original_results() {
    let mut rng = Rng(0x51ed_2701_d4c3_a9b5);
    let (mut contracted, mut kept) = (0, 0);
    for case in 0..400 {
        let p = program(&mut rng);
        let mut q = p.clone();
        contract_accumulators(&mut q.funcs[0]);
        verify_program(&q).unwrap_or_else(|e| panic!("case {case}: contracted program fails to verify: {e:?}"));
        let (before, after) = (accumulators(&p.funcs[0].body), accumulators(&q.funcs[0].body));
        if after < before {
            contracted += 1;
        }
        // `out` always stays.
        if after > 1 {
            kept += 1;
        }
        assert_same_results(&p, &q, case, &[0, 1, 2, 3, 7], "contracted");
    }
    assert!(contracted >= 100, "only {contracted} of 400 programs had accumulators contracted");
    assert!(kept >= 100, "only {kept} of 400 programs kept an accumulator");
}

/// The RK4 stage cotangent of the module docs: `a[i - 1] += u` and a read
/// of `a[i]` in a reverse loop become two scalars, and the function binds
/// no array for it any more.
#[test]
fn a_reverse_recurrence_accumulator_becomes_scalars() {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let a = b.let1("a", Expr::ZerosLike(x), F1);
    let out = b.let1("out", Expr::ZerosLike(x), F1);
    let i = b.var("i", Type::I64);
    b.begin_block();
    let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![v(i)] });
    let first = b.binary(BinOp::Eq, v(i), Atom::I64(0));
    b.begin_block();
    let then_branch = b.end_block(vec![]);
    b.begin_block();
    let j = b.binary(BinOp::Sub, v(i), Atom::I64(1));
    b.stmt(StmtKind::AccAdd { acc: a, indices: vec![j], value: xi });
    let else_branch = b.end_block(vec![]);
    b.stmt(StmtKind::If { cond: first, then_branch, else_branch });
    let t = b.let_one("t", Expr::Index { array: a, indices: vec![v(i)] });
    let sum = b.binary(BinOp::Add, t, xi);
    b.stmt(StmtKind::AccAdd { acc: out, indices: vec![v(i)], value: sum });
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse: true, body });
    f.body = b.finish(vec![v(out)]);
    let p = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&p).expect("verifies");
    let mut q = p.clone();
    contract_accumulators(&mut q.funcs[0]);
    verify_program(&q).expect("contracted program verifies");
    assert_eq!(accumulators(&q.funcs[0].body), 1, "{}", arrayad_ir::printer::print_program(&q));
    let args = [Value::Array(ArrayValue::f64(vec![4], vec![1.0, 2.0, 3.0, 4.0]).expect("array"))];
    let got = interp::run(&q, FuncId(0), &args).expect("runs");
    // out[i] = x[i + 1] + x[i] (x[4] = 0).
    assert_eq!(got[0].f64_elements(), Some(&[3.0, 5.0, 7.0, 4.0][..]));
    assert_eq!(bits(&got), bits(&interp::run(&p, FuncId(0), &args).expect("runs")));
}
