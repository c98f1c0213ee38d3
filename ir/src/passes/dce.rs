//! Dead code elimination. Statements with effects (assignments,
//! accumulation, size checks, the tape, effect loops and branches, and
//! anything containing them) are kept, and so are bindings that may fail at
//! run time (their error is part of the program's meaning, see
//! [`super::fallible`]); other pure bindings whose variables are never used
//! are removed.

use crate::program::{Block, Expr, Function, StmtKind};
use crate::visit::stmt_uses_shallow;

/// Removes dead pure bindings from `f`.
pub fn dce(f: &mut Function) {
    dce_assuming_safe(f, &std::collections::HashSet::new());
}

/// [`dce`], where the bindings of the variables in `safe` are known not to
/// fail (the caller's invariant: e.g. the tangent statements of a jvp, each
/// of which mirrors a primal statement that ran before it on an array of the
/// same shape).
pub fn dce_assuming_safe(f: &mut Function, safe: &std::collections::HashSet<crate::VarId>) {
    let mut fallible = super::fallible::analyse(f);
    fallible.assume_safe(safe);
    let mut live = vec![false; f.vars.len()];
    block(&mut f.body, &mut live, &fallible);
}

/// True when `kind` has an effect beyond binding its variables.
pub fn has_effect(kind: &StmtKind) -> bool {
    match kind {
        StmtKind::Let { expr, .. } => match expr {
            // The tape position changes (pop) or is observed (mark): neither
            // may be removed, and a mark must stay where it is.
            Expr::Pop | Expr::TapeMark => true,
            Expr::Build { body, .. } | Expr::Loop { body, .. } => block_has_effect(body),
            Expr::While { cond, body, .. } => block_has_effect(cond) || block_has_effect(body),
            Expr::If { then_branch, else_branch, .. } => block_has_effect(then_branch) || block_has_effect(else_branch),
            _ => false,
        },
        _ => true,
    }
}

/// True when any statement of `b` (at any depth) has an effect.
pub fn block_has_effect(b: &Block) -> bool {
    b.stmts.iter().any(|s| has_effect(&s.kind))
}

fn block(b: &mut Block, live: &mut [bool], fallible: &super::fallible::Fallible) {
    for r in &b.results {
        if let crate::Atom::Var(v) = r {
            live[v.index()] = true;
        }
    }
    // Decided last statement first; the kept ones stay where they are (a
    // pass over a long body moves no statement it keeps).
    let mut keep = vec![false; b.stmts.len()];
    for (s, k) in b.stmts.iter_mut().zip(keep.iter_mut()).rev() {
        *k = match &s.kind {
            StmtKind::Let { vars, .. } => {
                vars.iter().any(|v| live[v.index()]) || has_effect(&s.kind) || fallible.stmt(&s.kind)
            }
            _ => true,
        };
        if !*k {
            continue;
        }
        // The nested blocks mark what their kept statements use; the
        // statement itself adds what it reads outside them.
        for nb in crate::visit::child_blocks_mut(&mut s.kind) {
            block(nb, live, fallible);
        }
        stmt_uses_shallow(&s.kind, &mut |v| live[v.index()] = true);
    }
    let mut keep = keep.into_iter();
    b.stmts.retain(|_| keep.next().unwrap_or(true));
}
