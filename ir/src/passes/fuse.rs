//! Loop fusion, so that `sum(for ...)`, `dot` and chains of elementwise
//! operations run as single loops without temporary arrays:
//!
//! - reduction fusion: `y = build i < n => r; s = sum y` (y used once)
//!   becomes `s = loop acc = 0 for i < n do acc + r`;
//! - map fusion: `y = build j < n => r1` (y used once) read as `y[i]` at the
//!   top of the body of `z = build i < n => ...` (the same `n`) moves the
//!   producer's body into the consumer's.
//!
//! Both keep the order of floating-point operations (sums stay sequential
//! from index 0), so results are bit for bit those of the unfused program.
//! Both keep every run-time error and the order in which they would occur:
//! the fused reduction takes the producer's place, and map fusion (which
//! runs the producer's body later, interleaved with the consumer's) only
//! moves a producer that cannot fail ([`super::fallible`]).

use super::fallible::Fallible;
use crate::program::{Atom, Block, Expr, Function, ReduceOp, Stmt, StmtKind, VarId};
use crate::types::Scalar;
use crate::visit::{use_counts, Subst};

/// Fuses loops in `f` in place.
pub fn fuse(f: &mut Function) {
    let counts = use_counts(&f.body, f.vars.len());
    let fallible = super::fallible::analyse(f);
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &counts, &fallible);
}

fn block(f: &mut Function, b: Block, counts: &[u32], fallible: &Fallible) -> Block {
    let mut out: Vec<Stmt> = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let loc = s.loc;
        let kind = crate::passes::inline::map_nested(s.kind, &mut |nb| block(f, nb, counts, fallible));
        match kind {
            StmtKind::Let { vars, expr: Expr::Reduce { op: ReduceOp::Sum, array } } if counts[array.index()] == 1 => {
                if let Some(pos) = producer(&out, array) {
                    let prod = out.remove(pos);
                    if let StmtKind::Let { expr: Expr::Build { n, index, body }, .. } = prod.kind {
                        let elem = f.ty(array).elem;
                        let acc = f.new_var("acc", f.ty(vars[0]));
                        let zero = if elem == Scalar::F64 { Atom::F64(0.0) } else { Atom::I64(0) };
                        let mut body = body;
                        let r = body.results[0];
                        let next = f.new_var("acc", f.ty(vars[0]));
                        body.stmts.push(Stmt {
                            kind: StmtKind::Let {
                                vars: vec![next],
                                expr: Expr::Binary(crate::BinOp::Add, Atom::Var(acc), r),
                            },
                            loc,
                        });
                        body.results = vec![Atom::Var(next)];
                        let expr = Expr::Loop { n, index, states: vec![acc], init: vec![zero], body };
                        // The loop's own failure (a negative size) is the
                        // `for`'s, and it runs where the producer ran (the
                        // statements in between cannot use the sum).
                        out.insert(pos, Stmt { kind: StmtKind::Let { vars, expr }, loc: prod.loc });
                        continue;
                    }
                    unreachable!("producer() returns only single-result builds");
                }
                out.push(Stmt { kind: StmtKind::Let { vars, expr: Expr::Reduce { op: ReduceOp::Sum, array } }, loc });
            }
            StmtKind::Let { vars, expr: Expr::Build { n, index, body } } => {
                let body = map_fuse(f, &mut out, n, index, body, counts, fallible);
                out.push(Stmt { kind: StmtKind::Let { vars, expr: Expr::Build { n, index, body } }, loc });
            }
            kind => out.push(Stmt { kind, loc }),
        }
    }
    Block { stmts: out, results: b.results }
}

/// The position in `out` of the single-result, effect-free build binding `y`.
fn producer(out: &[Stmt], y: VarId) -> Option<usize> {
    let pos = out.iter().rposition(|s| matches!(&s.kind, StmtKind::Let { vars, .. } if vars.contains(&y)))?;
    match &out[pos].kind {
        StmtKind::Let { vars, expr: Expr::Build { body, .. } }
            if vars.len() == 1 && body.results.len() == 1 && !crate::passes::dce::block_has_effect(body) =>
        {
            Some(pos)
        }
        _ => None,
    }
}

/// Map fusion into the body of `build index < n`.
fn map_fuse(
    f: &mut Function,
    out: &mut Vec<Stmt>,
    n: Atom,
    index: VarId,
    body: Block,
    counts: &[u32],
    fallible: &Fallible,
) -> Block {
    let mut stmts = Vec::with_capacity(body.stmts.len());
    let mut subst = Subst::default();
    for s in body.stmts {
        let s = subst.stmt(&s);
        if let StmtKind::Let { vars, expr: Expr::Index { array, indices } } = &s.kind {
            if counts[array.index()] == 1 && indices.as_slice() == [Atom::Var(index)] && f.ty(*array).rank == 1 {
                if let Some(pos) = producer(out, *array) {
                    let same_n =
                        matches!(&out[pos].kind, StmtKind::Let { expr: Expr::Build { n: pn, .. }, .. } if *pn == n);
                    if same_n && !fallible.stmt(&out[pos].kind) {
                        let prod = out.remove(pos);
                        if let StmtKind::Let { expr: Expr::Build { index: pj, body: pbody, .. }, .. } = prod.kind {
                            let mut rename = Subst::default();
                            rename.map.insert(pj, Atom::Var(index));
                            let pbody = rename.block(&pbody);
                            stmts.extend(pbody.stmts);
                            subst.map.insert(vars[0], pbody.results[0]);
                            continue;
                        }
                    }
                }
            }
        }
        stmts.push(s);
    }
    let results = body.results.iter().map(|a| subst.atom(a)).collect();
    Block { stmts, results }
}
