//! Interchange of backward loop nests (`passes::interchange`) on a nest
//! shaped like GMM's backward pass: per point `j`, code of its own (`A`,
//! a local accumulator `t`), then a loop over components `k` adding into
//! row `k` of outer accumulators, directly and through a view of the row.
//! The interchanged program must give bitwise the results of the original
//! under the reference interpreter; nests that break a condition of the
//! module docs must be left alone.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::passes::interchange::interchange_backward_nests;
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_program;
use common::{assert_same_results, v, F1};

/// What the nest does besides the legal pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Twist {
    /// Nothing: the rewrite applies.
    None,
    /// `B` reads an element of an accumulator it adds into.
    ReadsWritten,
    /// `B` adds into row `j` (the point's), not `k`.
    AddsAtPoint,
    /// `A` adds into an outer accumulator.
    AEffect,
}

/// `f(x: [n]f64) -> ([n][n]f64, [n]f64)`: `acc = zeros [n, n]`,
/// `acc1 = zeros_like x`, and
///
/// ```text
/// for rev j < n do {
///   let t = zeros [n]
///   for k < n do { t[k] += x[j] * x[k] }
///   for rev k < n do {
///     let tk = t[k]
///     acc1[k] += tk * x[j]
///     let row = acc[k]
///     for c < n do { row[c] += tk * x[c] }
///   }
/// }
/// ```
fn program(reverse: bool, twist: Twist) -> Program {
    let m2 = Type { elem: Scalar::F64, rank: 2 };
    let (mut f, ps) = Function::with_params("f", &[F1], &[m2, F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let acc = b.let1("acc", Expr::Zeros(vec![n, n]), m2);
    let acc1 = b.let1("acc1", Expr::ZerosLike(x), F1);
    let (j, k, k2, c) = (b.var("j", Type::I64), b.var("k", Type::I64), b.var("k", Type::I64), b.var("c", Type::I64));
    b.begin_block();
    let t = b.let1("t", Expr::Zeros(vec![n]), F1);
    let xj = b.let_one("xj", Expr::Index { array: x, indices: vec![v(j)] });
    b.begin_block();
    let xk = b.let_one("xk", Expr::Index { array: x, indices: vec![v(k)] });
    let p = b.binary(BinOp::Mul, xj, xk);
    b.stmt(StmtKind::AccAdd { acc: t, indices: vec![v(k)], value: p });
    if twist == Twist::AEffect {
        b.stmt(StmtKind::AccAdd { acc: acc1, indices: vec![v(k)], value: p });
    }
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: k, reverse: false, body });
    b.begin_block();
    let tk = b.let_one("tk", Expr::Index { array: t, indices: vec![v(k2)] });
    let q = b.binary(BinOp::Mul, tk, xj);
    b.stmt(StmtKind::AccAdd { acc: acc1, indices: vec![v(k2)], value: q });
    if twist == Twist::ReadsWritten {
        let seen = b.let_one("seen", Expr::Index { array: acc1, indices: vec![v(k2)] });
        b.stmt(StmtKind::AccAdd { acc: acc1, indices: vec![v(k2)], value: seen });
    }
    let at = if twist == Twist::AddsAtPoint { j } else { k2 };
    let row = b.let1("row", Expr::Index { array: acc, indices: vec![v(at)] }, F1);
    b.begin_block();
    let xc = b.let_one("xc", Expr::Index { array: x, indices: vec![v(c)] });
    let r = b.binary(BinOp::Mul, tk, xc);
    b.stmt(StmtKind::AccAdd { acc: row, indices: vec![v(c)], value: r });
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: c, reverse: false, body });
    let inner = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: k2, reverse, body: inner });
    let outer = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: j, reverse, body: outer });
    f.body = b.finish(vec![v(acc), v(acc1)]);
    Program { file: "interchange.arr".into(), funcs: vec![f] }
}

/// The top-level statements of `p`'s function that are loops whose body
/// is one loop (the interchanged form).
fn interchanged(p: &Program) -> bool {
    p.funcs[0].body.stmts.iter().any(|s| match &s.kind {
        StmtKind::For { body, .. } => matches!(body.stmts.as_slice(), [Stmt { kind: StmtKind::For { .. }, .. }]),
        _ => false,
    })
}

#[test]
fn interchanged_nests_give_bitwise_the_original_results() {
    for reverse in [true, false] {
        let p = program(reverse, Twist::None);
        let mut q = p.clone();
        interchange_backward_nests(&mut q.funcs[0]);
        verify_program(&q).unwrap_or_else(|e| panic!("interchanged program fails to verify: {e:?}"));
        assert!(interchanged(&q), "not interchanged:\n{}", arrayad_ir::printer::print_program(&q));
        assert_same_results(&p, &q, usize::from(reverse), &[0, 1, 2, 3, 7, 16], "interchanged");
    }
}

#[test]
fn nests_breaking_a_condition_are_left_alone() {
    for twist in [Twist::ReadsWritten, Twist::AddsAtPoint, Twist::AEffect] {
        let p = program(true, twist);
        let mut q = p.clone();
        interchange_backward_nests(&mut q.funcs[0]);
        assert_eq!(
            arrayad_ir::printer::print_program(&q),
            arrayad_ir::printer::print_program(&p),
            "{twist:?}: rewritten"
        );
    }
}
