//! Facts about loop bodies that decide whether the arena can be reset after
//! every iteration.

use arrayad_ir::{Atom, Block, Expr, Function, StmtKind};

fn is_array(f: &Function, a: &Atom) -> bool {
    f.atom_ty(a).is_array()
}

/// True when no array allocated while running `body` can outlive the
/// iteration, other than through the body's results (which the caller
/// copies or rejects): no array is pushed on the tape and no array is
/// assigned to a mutable variable, at any depth.
pub(crate) fn nothing_escapes(f: &Function, body: &Block) -> bool {
    body.stmts.iter().all(|s| match &s.kind {
        StmtKind::Push(a) => !is_array(f, a),
        StmtKind::Assign { value, .. } => !is_array(f, value),
        StmtKind::Let { expr, .. } => match expr {
            Expr::Build { body, .. } | Expr::Loop { body, .. } => nothing_escapes(f, body),
            Expr::If { then_branch, else_branch, .. } => {
                nothing_escapes(f, then_branch) && nothing_escapes(f, else_branch)
            }
            _ => true,
        },
        StmtKind::For { body, .. } => nothing_escapes(f, body),
        StmtKind::If { then_branch, else_branch, .. } => {
            nothing_escapes(f, then_branch) && nothing_escapes(f, else_branch)
        }
        StmtKind::AccAdd { .. } | StmtKind::CheckSize { .. } | StmtKind::TapeRewind(_) => true,
    })
}

/// True when running `body` may allocate from the arena.
pub(crate) fn allocates(body: &Block) -> bool {
    body.stmts.iter().any(|s| match &s.kind {
        StmtKind::Let { expr, .. } => match expr {
            Expr::Build { .. } | Expr::ArrayLit { .. } | Expr::ZerosLike(_) => true,
            Expr::Loop { body, .. } => allocates(body),
            Expr::If { then_branch, else_branch, .. } => allocates(then_branch) || allocates(else_branch),
            _ => false,
        },
        StmtKind::For { body, .. } => allocates(body),
        StmtKind::If { then_branch, else_branch, .. } => allocates(then_branch) || allocates(else_branch),
        _ => false,
    })
}
