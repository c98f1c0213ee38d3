//! What the backward pass of a block reads and how: which cotangents are
//! zeroed up front ([`forced`]), which residuals are recomputed rather than
//! taped ([`is_cheap`], the residual policy of ARCHITECTURE.md), and
//! shapes read from primal arrays ([`shape_only`], [`rewrite_shapes`]).

use super::*;

/// The linear arrays bound in `blk` whose cotangents the backward pass of
/// `blk` certainly makes accumulators whatever the path taken: builds and
/// array literals (whose transpositions read their cotangents), arrays
/// indexed, sliced, summed or listed in a literal at the top of `blk`, any
/// variable used in the body of a build or loop there (what such a body
/// needs is materialised before the backward loop), and results of `blk`
/// whose seeds are not consumed by them. Such a cotangent is zeroed when
/// declared; the others are lazy (a zero that costs no O(size) work per
/// iteration).
pub(in crate::reverse) fn forced(blk: &Block, plain_seeds: &[Seed]) -> HashSet<VarId> {
    let mut set = HashSet::new();
    for s in &blk.stmts {
        let StmtKind::Let { vars, expr } = &s.kind else { continue };
        match expr {
            Expr::Build { body, .. } => {
                set.extend(vars.iter().copied());
                arrayad_ir::visit::block_uses(body, &mut |v| {
                    set.insert(v);
                });
            }
            Expr::Loop { body, .. } | Expr::While { body, .. } => arrayad_ir::visit::block_uses(body, &mut |v| {
                set.insert(v);
            }),
            Expr::ArrayLit { elems, .. } => {
                set.extend(vars.iter().copied());
                set.extend(elems.iter().filter_map(|e| e.as_var()));
            }
            Expr::Index { array, .. }
            | Expr::Slice { array, .. }
            | Expr::Reshape { array, .. }
            | Expr::Reduce { array, .. } => {
                set.insert(*array);
            }
            _ => {}
        }
    }
    for s in plain_seeds.iter().filter(|s| !s.owned) {
        if let Atom::Var(v) = s.target {
            set.insert(v);
        }
    }
    set
}

/// Calls `f` on every expression of `stmts`, at any depth.
pub(in crate::reverse) fn for_each_expr(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    for s in stmts {
        if let StmtKind::Let { expr, .. } = &s.kind {
            f(expr);
        }
        for b in arrayad_ir::visit::child_blocks(&s.kind) {
            for_each_expr(&b.stmts, f);
        }
    }
}

/// True when `a` is used in `pre` and `stmts` only for its extents (`dim`,
/// `zeros_like`).
pub(in crate::reverse) fn shape_only(pre: &[Stmt], stmts: &[Stmt], a: VarId) -> bool {
    let (mut all, mut shape) = (0usize, 0usize);
    for part in [pre, stmts] {
        for s in part {
            stmt_uses(&s.kind, &mut |v| all += (v == a) as usize);
        }
        for_each_expr(part, &mut |e| match e {
            Expr::Dim { array, .. } | Expr::ZerosLike(array) if *array == a => shape += 1,
            _ => {}
        });
    }
    all == shape
}

/// Replaces `dim a k` by the `k`-th extent of `shapes[a]` and
/// `zeros_like a` by `zeros` of those extents, at any depth.
pub(in crate::reverse) fn rewrite_shapes(stmts: &mut [Stmt], shapes: &HashMap<VarId, Vec<Atom>>) {
    for s in stmts {
        match &mut s.kind {
            StmtKind::Let { expr, .. } => match expr {
                Expr::Dim { array, axis } => {
                    if let Some(d) = shapes.get(array).and_then(|ds| ds.get(*axis as usize)) {
                        *expr = Expr::Atom(*d);
                    }
                }
                Expr::ZerosLike(array) => {
                    if let Some(ds) = shapes.get(array) {
                        *expr = Expr::Zeros(ds.clone());
                    }
                }
                Expr::Build { body, .. } | Expr::Loop { body, .. } => rewrite_shapes(&mut body.stmts, shapes),
                Expr::While { cond, body, .. } => {
                    rewrite_shapes(&mut cond.stmts, shapes);
                    rewrite_shapes(&mut body.stmts, shapes);
                }
                Expr::If { then_branch, else_branch, .. } => {
                    rewrite_shapes(&mut then_branch.stmts, shapes);
                    rewrite_shapes(&mut else_branch.stmts, shapes);
                }
                _ => {}
            },
            StmtKind::For { body, .. } => rewrite_shapes(&mut body.stmts, shapes),
            StmtKind::If { then_branch, else_branch, .. } => {
                rewrite_shapes(&mut then_branch.stmts, shapes);
                rewrite_shapes(&mut else_branch.stmts, shapes);
            }
            _ => {}
        }
    }
}

/// Expressions cheap enough to recompute in the backward pass rather than
/// tape.
pub(in crate::reverse) fn is_cheap(e: &Expr) -> bool {
    match e {
        Expr::Atom(_) | Expr::Index { .. } | Expr::Slice { .. } | Expr::Reshape { .. } | Expr::Dim { .. } => true,
        Expr::Unary(op, _) => matches!(
            op,
            UnOp::Neg | UnOp::Not | UnOp::ToF64 | UnOp::ToI64 | UnOp::Abs | UnOp::Floor | UnOp::Ceil | UnOp::Sign
        ),
        Expr::Binary(op, _, _) => !matches!(op, BinOp::Pow | BinOp::Atan2 | BinOp::Polygamma),
        // A choice between two atoms (`if j % 2 == 0 then 1.0 else -1.0`).
        Expr::If { then_branch, else_branch, .. } => {
            [then_branch, else_branch].iter().all(|b| b.stmts.is_empty() && b.results.len() == 1)
        }
        // A comprehension of cheap scalar expressions (`x[i] - means[k]`,
        // `concat(c[0:j], c[j + 1:k])`): recomputing its O(n) elements
        // costs what writing and reading them on the tape would, and keeps
        // nothing alive.
        Expr::Build { body, .. } => body.results.len() == 1 && body.stmts.iter().all(is_cheap_row_stmt),
        _ => false,
    }
}

/// A statement a cheap comprehension's body may hold: one binding of a
/// cheap expression, or of a branch between blocks of such bindings (the
/// recomputed comprehension's binders are all fresh: `fresh_binders`).
/// The nesting of branches is the program's, which the frontend bounds.
pub(in crate::reverse) fn is_cheap_row_stmt(s: &Stmt) -> bool {
    let StmtKind::Let { vars, expr } = &s.kind else { return false };
    vars.len() == 1
        && match expr {
            Expr::Build { .. } => false,
            Expr::If { then_branch, else_branch, .. } => {
                [then_branch, else_branch].iter().all(|b| b.results.len() == 1 && b.stmts.iter().all(is_cheap_row_stmt))
            }
            _ => is_cheap(expr),
        }
}
