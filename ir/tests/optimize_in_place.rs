//! The optimisation passes that rewrite blocks in place (simplification,
//! common subexpressions, dead code, accumulator folding, loop-invariant
//! code motion) still do their work at the top level and in nested
//! blocks, and the optimised function gives bitwise the results of the
//! original.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::passes;
use arrayad_ir::program::*;
use arrayad_ir::types::Type;
use arrayad_ir::verify::verify_program;
use common::{assert_same_results, v, F1};

/// `f(x: [n]f64)` with work for each pass: a product computed twice and
/// a dead sum at the top level, a zero-initialised accumulator added to
/// once, a mutable variable assigned twice far from its declaration, an `if` on a
/// literal, and a comprehension whose body computes a loop-invariant
/// product twice and a dead sum.
fn program() -> (Program, VarId, VarId) {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1, F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let x0 = b.let_one("x0", Expr::Index { array: x, indices: vec![Atom::I64(0)] });
    // A mutable variable declared early, first used (and assigned twice)
    // far below: its assignments become values.
    let m = b.let1("m", Expr::Atom(x0), Type::F64);
    let a = b.binary(BinOp::Mul, x0, Atom::F64(2.0));
    let twice = b.binary(BinOp::Mul, x0, Atom::F64(2.0));
    b.binary(BinOp::Add, x0, Atom::F64(1.0));
    let c = b.let1("c", Expr::Atom(Atom::F64(0.0)), Type::F64);
    let t = b.binary(BinOp::Add, v(c), a);
    b.stmt(StmtKind::Assign { var: c, value: t });
    let i = b.var("i", Type::I64);
    b.begin_block();
    let k = b.binary(BinOp::Mul, x0, Atom::F64(3.0));
    let k2 = b.binary(BinOp::Mul, x0, Atom::F64(3.0));
    let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![v(i)] });
    b.binary(BinOp::Add, xi, Atom::F64(5.0));
    let r1 = b.binary(BinOp::Mul, xi, k);
    let r = b.binary(BinOp::Add, r1, k2);
    let body = b.end_block(vec![r]);
    let out = b.let1("out", Expr::Build { n, index: i, body }, F1);
    let u = b.binary(BinOp::Add, v(m), Atom::F64(1.5));
    b.stmt(StmtKind::Assign { var: m, value: u });
    let w = b.binary(BinOp::Mul, v(m), Atom::F64(0.5));
    b.stmt(StmtKind::Assign { var: m, value: w });
    // An `if` on a literal: its taken branch in its place.
    b.begin_block();
    let z = b.binary(BinOp::Mul, x0, Atom::F64(7.0));
    let then_branch = b.end_block(vec![z]);
    b.begin_block();
    let else_branch = b.end_block(vec![x0]);
    let g = b.let1("g", Expr::If { cond: Atom::Bool(true), then_branch, else_branch }, Type::F64);
    let cg = b.binary(BinOp::Add, v(c), v(g));
    let cm = b.binary(BinOp::Add, cg, v(m));
    let s = b.binary(BinOp::Add, twice, cm);
    let j = b.var("j", Type::I64);
    b.begin_block();
    let xj = b.let_one("xj", Expr::Index { array: x, indices: vec![v(j)] });
    let q = b.binary(BinOp::Mul, xj, s);
    let body = b.end_block(vec![q]);
    let out2 = b.let1("out2", Expr::Build { n, index: j, body }, F1);
    f.body = b.finish(vec![v(out), v(out2)]);
    f.vars[c.index()].mutable = true;
    f.vars[m.index()].mutable = true;
    let p = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&p).expect("the program verifies");
    (p, c, m)
}

/// The statements of `b` at every depth, each with its nesting depth.
fn statements(b: &Block) -> Vec<(usize, StmtKind)> {
    fn walk(b: &Block, depth: usize, out: &mut Vec<(usize, StmtKind)>) {
        for s in &b.stmts {
            out.push((depth, s.kind.clone()));
            for child in arrayad_ir::visit::child_blocks(&s.kind) {
                walk(child, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(b, 0, &mut out);
    out
}

/// `x0 * lit` statements, by depth.
fn products_by(stmts: &[(usize, StmtKind)], lit: f64) -> Vec<usize> {
    stmts
        .iter()
        .filter(|(_, k)| matches!(k, StmtKind::Let { expr: Expr::Binary(BinOp::Mul, Atom::Var(_), Atom::F64(y)), .. } if *y == lit))
        .map(|(d, _)| *d)
        .collect()
}

#[test]
fn passes_rewriting_in_place_still_share_remove_fold_and_hoist() {
    let (before, c, m) = program();
    let mut after = before.clone();
    passes::optimize(&mut after.funcs[0]);
    verify_program(&after).expect("the optimised program verifies");
    assert_same_results(&before, &after, 0, &[1, 3, 6], "optimised");
    let stmts = statements(&after.funcs[0].body);
    let shown = || arrayad_ir::printer::print_program(&after);
    // Computed once at the top level (CSE), and the loop-invariant
    // product once, outside the comprehension (LICM, then CSE).
    assert_eq!(products_by(&stmts, 2.0), vec![0], "{}", shown());
    assert_eq!(products_by(&stmts, 3.0), vec![0], "{}", shown());
    // The `if` on a literal is gone, its branch's product at the top level.
    assert_eq!(products_by(&stmts, 7.0), vec![0], "{}", shown());
    assert!(!stmts.iter().any(|(_, k)| matches!(k, StmtKind::Let { expr: Expr::If { .. }, .. })), "{}", shown());
    // Dead sums removed at both depths (DCE).
    let dead = |lit: f64| {
        stmts.iter().any(
            |(_, k)| matches!(k, StmtKind::Let { expr: Expr::Binary(BinOp::Add, _, Atom::F64(y)), .. } if *y == lit),
        )
    };
    assert!(!dead(1.0) && !dead(5.0), "{}", shown());
    // The accumulator added to once is an ordinary binding, then gone.
    assert!(
        stmts.iter().all(|(_, k)| !matches!(k, StmtKind::Assign { var, .. } if *var == c)
            && !matches!(k, StmtKind::Let { vars, .. } if vars.contains(&c))),
        "{}",
        shown()
    );
    // `m`, assigned only in the block that binds it, became values
    // (`passes::mutables`): neither its declaration nor an assignment is
    // left, and the product by 0.5 of its last value is computed once.
    assert!(
        stmts.iter().all(|(_, k)| !matches!(k, StmtKind::Assign { var, .. } if *var == m)
            && !matches!(k, StmtKind::Let { vars, .. } if vars.contains(&m))),
        "{}",
        shown()
    );
    assert_eq!(products_by(&stmts, 0.5), vec![0], "{}", shown());
}
