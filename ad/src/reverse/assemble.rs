//! Assembling an unzipped vjp into a function: the vjp (forward pass,
//! backward pass, cotangents as results) and the many-row vjp (one forward
//! pass, the backward pass once per cotangent row, replaying the tape).

use super::*;

pub(in crate::reverse) fn assemble_vjp(u: Unzipped) -> Function {
    let mut out = u.out;
    let mut stmts = u.fwd;
    // Each array cotangent must have the shape of its result.
    let f64_results: Vec<Atom> =
        u.primal_results.iter().filter(|r| out.atom_ty(r).elem == Scalar::F64).copied().collect();
    for (r, c) in f64_results.iter().zip(&u.ct_outs) {
        let (Atom::Var(r), ty) = (*r, out.ty(*c)) else { continue };
        for axis in 0..ty.rank {
            let dc = out.new_var("n", Type::I64);
            let dr = out.new_var("n", Type::I64);
            let loc = out.loc;
            stmts.push(Stmt { kind: StmtKind::Let { vars: vec![dc], expr: Expr::Dim { array: *c, axis } }, loc });
            stmts.push(Stmt { kind: StmtKind::Let { vars: vec![dr], expr: Expr::Dim { array: r, axis } }, loc });
            stmts.push(Stmt {
                kind: StmtKind::CheckSize {
                    a: Atom::Var(dc),
                    b: Atom::Var(dr),
                    what: format!("the cotangent's axis {axis} must equal the result's"),
                },
                loc,
            });
        }
    }
    stmts.extend(u.bwd);
    let mut results = u.primal_results;
    let mut rtypes = u.primal_types;
    for c in &u.grads {
        results.push(Atom::Var(*c));
        rtypes.push(out.ty(*c));
    }
    out.body = Block { stmts, results };
    out.params = u.primal_params;
    out.params.extend(u.ct_outs);
    out.result_types = rtypes;
    out
}

pub(in crate::reverse) fn assemble_rows(u: Unzipped) -> Function {
    let mut out = u.out;
    let mut stmts = u.fwd;
    let stmt = |kind| Stmt { kind, loc: Loc::default() };
    let ct_rows: Vec<VarId> = u.ct_outs.iter().map(|c| out.new_var("ct_rows", out.ty(*c).lift())).collect();
    let mut results = u.primal_results;
    let mut rtypes = u.primal_types;
    let (count, rows) = row_count(&mut out, &ct_rows);
    stmts.extend(count.into_iter().map(stmt));
    if !u.grads.is_empty() {
        let mark = out.new_var("tape_mark", Type::I64);
        stmts.push(stmt(StmtKind::Let { vars: vec![mark], expr: Expr::TapeMark }));
        let row = out.new_var("row", Type::I64);
        let mut body = vec![stmt(StmtKind::TapeRewind(Atom::Var(mark)))];
        for (c, cr) in u.ct_outs.iter().zip(&ct_rows) {
            body.push(stmt(StmtKind::Let {
                vars: vec![*c],
                expr: Expr::Index { array: *cr, indices: vec![Atom::Var(row)] },
            }));
        }
        body.extend(u.bwd);
        let body = Block { stmts: body, results: u.grads.iter().map(|c| Atom::Var(*c)).collect() };
        let stacks: Vec<VarId> = u.grads.iter().map(|c| out.new_var("grad_rows", out.ty(*c).lift())).collect();
        stmts.push(stmt(StmtKind::Let { vars: stacks.clone(), expr: Expr::Build { n: rows, index: row, body } }));
        for s in stacks {
            results.push(Atom::Var(s));
            rtypes.push(out.ty(s));
        }
    }
    out.body = Block { stmts, results };
    out.params = u.primal_params;
    out.params.extend(ct_rows);
    out.result_types = rtypes;
    out
}

/// The number of cotangent rows of the stacks `ct_rows` (0 without any):
/// the statements binding it, which check that every stack has as many
/// rows as the first ([`arrayad_ir::ErrorKind::SizeMismatch`]), and the
/// count.
pub(in crate::reverse) fn row_count(out: &mut Function, ct_rows: &[VarId]) -> (Vec<StmtKind>, Atom) {
    let Some(&first) = ct_rows.first() else { return (Vec::new(), Atom::I64(0)) };
    let r = out.new_var("rows", Type::I64);
    let mut stmts = vec![StmtKind::Let { vars: vec![r], expr: Expr::Dim { array: first, axis: 0 } }];
    for (k, &c) in ct_rows.iter().enumerate().skip(1) {
        let rk = out.new_var("rows", Type::I64);
        stmts.push(StmtKind::Let { vars: vec![rk], expr: Expr::Dim { array: c, axis: 0 } });
        stmts.push(StmtKind::CheckSize {
            a: Atom::Var(rk),
            b: Atom::Var(r),
            what: format!("the row counts of cotangent {k} and of cotangent 0"),
        });
    }
    (stmts, Atom::Var(r))
}
