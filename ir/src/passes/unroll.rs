//! Full unrolling of short loops with a literal trip count: a `build`,
//! `loop` or `for` over `i < n` with `n` a small literal becomes `n` copies
//! of its body (fresh variables, `i` replaced by `0`, `1`, ...), the
//! comprehension's rows an array literal. With [`super::scalarize`], small
//! fixed-size arrays (`[3]f64` points, rotations, array literals) then live
//! in scalars: straight-line code without allocation, for the primal and
//! for its tangent and cotangent code.
//!
//! A loop is unrolled when `n * size(body) <= BUDGET` (sizes counted in
//! statements at every depth) and `n <= MAX_TRIPS`, so unrolling grows a
//! function by a bounded factor. Errors keep their order: the copies run
//! in the loop's order (comprehensions of array rows, whose shape checks
//! interleave with the rows, are not unrolled).

use crate::program::{Atom, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::visit::Subst;

/// The largest trip count unrolled.
pub const MAX_TRIPS: i64 = 8;
/// The largest number of statements an unrolled loop may produce.
pub const BUDGET: usize = 64;

/// Unrolls the short loops of `f` (innermost first).
pub fn unroll(f: &mut Function) {
    // A function without counted loops has nothing to unroll: its body is
    // not rebuilt (straight-line derivatives run to millions of statements).
    if !has_counted_loop(&f.body) {
        return;
    }
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body);
}

/// The number of statements of `b` at every depth, or any number above
/// `cap` once it exceeds `cap` (so that deciding costs O(cap), not the size
/// of a large body, at every level of a nest of loops).
pub(super) fn size_up_to(b: &Block, cap: usize) -> usize {
    let mut n = 0;
    let mut stack = vec![b];
    while let Some(blk) = stack.pop() {
        n += blk.stmts.len();
        if n > cap {
            return n;
        }
        for s in &blk.stmts {
            stack.extend(crate::visit::child_blocks(&s.kind));
        }
    }
    n
}

fn trips(n: &Atom, body: &Block) -> Option<i64> {
    match n {
        Atom::I64(0) => Some(0),
        Atom::I64(k) if (1..=MAX_TRIPS).contains(k) && (*k as usize) * size_up_to(body, BUDGET) <= BUDGET => Some(*k),
        _ => None,
    }
}

/// A copy of `body` with `index` replaced by `k` and every variable it
/// binds fresh; `states` (loop states) replaced by `state_vals`.
fn instance(f: &mut Function, body: &Block, index: VarId, k: i64, states: &[(VarId, Atom)]) -> Block {
    let mut subst = Subst::default();
    subst.map.insert(index, Atom::I64(k));
    for (s, a) in states {
        subst.map.insert(*s, *a);
    }
    crate::visit::freshen_block(f, body, &[], &mut subst)
}

/// True when `b` has a comprehension, a `loop` or a `for` at any depth.
fn has_counted_loop(b: &Block) -> bool {
    let mut found = false;
    crate::visit::for_each_block(b, &mut |blk| {
        found |= blk.stmts.iter().any(|s| {
            matches!(s.kind, StmtKind::Let { expr: Expr::Build { .. } | Expr::Loop { .. }, .. } | StmtKind::For { .. })
        })
    });
    found
}

fn block(f: &mut Function, b: Block) -> Block {
    let mut out: Vec<Stmt> = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let loc = s.loc;
        let kind = crate::passes::inline::map_nested(s.kind, &mut |nb| block(f, nb));
        match kind {
            // Only scalar rows: an array literal checks its rows' shapes after
            // computing them all, a comprehension each row as it comes, which
            // would change which of two errors is reported.
            StmtKind::Let { vars, expr: Expr::Build { n, index, body } } => match trips(&n, &body) {
                Some(k) if k > 0 && vars.iter().all(|v| f.ty(*v).rank == 1) => {
                    let mut rows: Vec<Vec<Atom>> = vec![Vec::new(); vars.len()];
                    for i in 0..k {
                        let inst = instance(f, &body, index, i, &[]);
                        out.extend(inst.stmts);
                        for (r, a) in rows.iter_mut().zip(inst.results) {
                            r.push(a);
                        }
                    }
                    for (v, elems) in vars.iter().zip(rows) {
                        let elem_ty = f.ty(*v).row();
                        out.push(Stmt {
                            kind: StmtKind::Let { vars: vec![*v], expr: Expr::ArrayLit { elem_ty, elems } },
                            loc,
                        });
                    }
                }
                _ => out.push(Stmt { kind: StmtKind::Let { vars, expr: Expr::Build { n, index, body } }, loc }),
            },
            StmtKind::Let { vars, expr: Expr::Loop { n, index, states, init, body } } => match trips(&n, &body) {
                Some(k) if !states.iter().any(|s| f.var(*s).mutable) => {
                    let mut cur: Vec<Atom> = init.clone();
                    for i in 0..k {
                        let pairs: Vec<(VarId, Atom)> = states.iter().copied().zip(cur.iter().copied()).collect();
                        let inst = instance(f, &body, index, i, &pairs);
                        out.extend(inst.stmts);
                        cur = inst.results;
                    }
                    for (v, a) in vars.iter().zip(cur) {
                        out.push(Stmt { kind: StmtKind::Let { vars: vec![*v], expr: Expr::Atom(a) }, loc });
                    }
                }
                _ => out.push(Stmt {
                    kind: StmtKind::Let { vars, expr: Expr::Loop { n, index, states, init, body } },
                    loc,
                }),
            },
            StmtKind::For { n, index, reverse, body } => match trips(&n, &body) {
                Some(k) => {
                    let order: Vec<i64> = if reverse { (0..k).rev().collect() } else { (0..k).collect() };
                    for i in order {
                        out.extend(instance(f, &body, index, i, &[]).stmts);
                    }
                }
                None => out.push(Stmt { kind: StmtKind::For { n, index, reverse, body }, loc }),
            },
            kind => out.push(Stmt { kind, loc }),
        }
    }
    Block { stmts: out, results: b.results }
}
