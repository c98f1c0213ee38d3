//! Where a nested backward block pops its residuals.
//!
//! A nested block pushes its residuals at its end, so its backward block
//! must pop them (last pushed first) before any nested backward code pops
//! its own. Popping them all at the start of the block would keep every
//! residual of a long block live at once through the whole backward block
//! (register allocation is then quadratic in their number); instead each
//! pop moves down to just before the first statement that reads it, in
//! their order, and no later than the first statement that touches the
//! tape. The backward code reads the residuals of a chain of statements in
//! the reverse order of their pushes, so each is popped right where it is
//! needed.

use arrayad_ir::visit::{child_blocks, stmt_uses};
use arrayad_ir::{Expr, Stmt, StmtKind, VarId};
use std::collections::HashMap;

/// `pops` (statements `let v = pop`, in popping order) followed by `rest`,
/// each pop sunk as described in the module docs.
pub(super) fn interleave(pops: Vec<Stmt>, rest: Vec<Stmt>) -> Vec<Stmt> {
    if pops.is_empty() {
        return rest;
    }
    let order: HashMap<VarId, usize> = pops
        .iter()
        .enumerate()
        .filter_map(|(k, s)| match &s.kind {
            StmtKind::Let { vars, .. } => vars.first().map(|v| (*v, k)),
            _ => None,
        })
        .collect();
    let mut out = Vec::with_capacity(pops.len() + rest.len());
    let mut pops = pops.into_iter().enumerate().peekable();
    for s in rest {
        if pops.peek().is_some() {
            // Pop through the last residual `s` reads, or everything if `s`
            // touches the tape.
            if touches_tape(&s.kind) {
                out.extend(pops.by_ref().map(|(_, p)| p));
            } else {
                let mut last = None;
                stmt_uses(&s.kind, &mut |v| {
                    if let Some(&k) = order.get(&v) {
                        last = last.max(Some(k));
                    }
                });
                if let Some(last) = last {
                    while let Some((_, p)) = pops.next_if(|(k, _)| *k <= last) {
                        out.push(p);
                    }
                }
            }
        }
        out.push(s);
    }
    out.extend(pops.map(|(_, p)| p));
    out
}

/// True when `kind` pushes, pops, marks or rewinds the tape, at any depth
/// (searching stops at the first such statement).
fn touches_tape(kind: &StmtKind) -> bool {
    let tape = |k: &StmtKind| {
        matches!(
            k,
            StmtKind::Push(_) | StmtKind::TapeRewind(_) | StmtKind::Let { expr: Expr::Pop | Expr::TapeMark, .. }
        )
    };
    if tape(kind) {
        return true;
    }
    let mut stack: Vec<_> = child_blocks(kind).collect();
    while let Some(b) = stack.pop() {
        for s in &b.stmts {
            if tape(&s.kind) {
                return true;
            }
            stack.extend(child_blocks(&s.kind));
        }
    }
    false
}
