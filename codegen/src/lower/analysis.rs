//! Facts about loop bodies that decide whether, and keeping what, the arena
//! can be reset after every iteration.

use arrayad_ir::visit::{block_binds, for_each_block};
use arrayad_ir::{Atom, Block, Expr, Function, StmtKind, VarId};
use std::collections::HashSet;

fn is_array(f: &Function, a: &Atom) -> bool {
    f.atom_ty(a).is_array()
}

/// What an iteration of a loop body leaves behind, when its memory can be
/// released at the end of the iteration: the mutable array variables bound
/// outside the body that it assigns (their values must survive the
/// release). `None` when an array escapes in a way a release cannot
/// follow: pushed on the tape (by reference).
pub(crate) fn survivors(f: &Function, body: &Block) -> Option<Vec<VarId>> {
    let mut pushed = false;
    let mut assigned: Vec<VarId> = Vec::new();
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Push(a) if is_array(f, a) => pushed = true,
                StmtKind::Assign { var, value } if is_array(f, value) && !assigned.contains(var) => assigned.push(*var),
                _ => {}
            }
        }
    });
    if pushed {
        return None;
    }
    let mut inner = HashSet::new();
    block_binds(body, &mut |v| {
        inner.insert(v);
    });
    assigned.retain(|v| !inner.contains(v));
    Some(assigned)
}

/// True when running `body` may allocate from the arena.
pub(crate) fn allocates(body: &Block) -> bool {
    let mut any = false;
    for_each_block(body, &mut |b| {
        any |= b.stmts.iter().any(|s| {
            matches!(
                &s.kind,
                StmtKind::Let {
                    expr: Expr::Build { .. } | Expr::ArrayLit { .. } | Expr::ZerosLike(_) | Expr::Zeros(_),
                    ..
                }
            )
        })
    });
    any
}
