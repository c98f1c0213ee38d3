//! Loop-invariant code motion: scalar computations in the body of a
//! `build`, `loop` or `for` whose operands are all defined outside the body
//! move in front of it, so they run once instead of once per iteration (and,
//! before differentiation, are never taped per iteration).
//!
//! Only expressions that cannot fail and have no effect move (atoms, unary
//! operations, binary operations other than an `i64` division or remainder
//! by a divisor that is not a nonzero literal, extents): running one of them
//! when the loop would have run zero times only costs its time, never an
//! error. Mutable variables are never invariant (the body may assign them).
//! Inner bodies are processed first, so a computation invariant in several
//! nested loops leaves all of them.
//!
//! Linear in the size of the function: every binding gets its position in
//! a preorder numbering, and a loop body is the interval of positions it
//! spans, so "bound inside this loop" is two comparisons.

use crate::fx::FxHashSet as HashSet;
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::types::Scalar;

/// Hoists the loop-invariant computations of every loop body of `f`.
pub fn licm(f: &mut Function) {
    let mutable: HashSet<VarId> =
        f.vars.iter().enumerate().filter(|(_, v)| v.mutable).map(|(i, _)| VarId(i as u32)).collect();
    let types: Vec<Scalar> = f.vars.iter().map(|v| v.ty.elem).collect();
    let mut ctx = Ctx { mutable, types, pos: vec![u32::MAX; f.vars.len()], ranges: Vec::new(), next_loop: 0 };
    let mut counter = 0;
    ctx.number(&f.body, &mut counter);
    let mut body = std::mem::take(&mut f.body);
    ctx.block(&mut body);
    f.body = body;
}

struct Ctx {
    mutable: HashSet<VarId>,
    types: Vec<Scalar>,
    /// The preorder position of each variable's binding (`u32::MAX` for
    /// parameters).
    pos: Vec<u32>,
    /// The positions `[start, end)` each loop spans, in preorder of loops.
    ranges: Vec<(u32, u32)>,
    /// The next loop of `ranges` the transformation meets.
    next_loop: usize,
}

/// The loop binders (index, states) and body of a loop statement.
fn as_loop(s: &StmtKind) -> Option<(Vec<VarId>, &Block)> {
    match s {
        StmtKind::Let { expr: Expr::Build { index, body, .. }, .. } | StmtKind::For { index, body, .. } => {
            Some((vec![*index], body))
        }
        StmtKind::Let { expr: Expr::Loop { index, states, body, .. }, .. } => {
            let mut b = vec![*index];
            b.extend(states.iter().copied());
            Some((b, body))
        }
        _ => None,
    }
}

impl Ctx {
    /// Numbers the bindings of `b` in preorder and records the span of
    /// every loop.
    fn number(&mut self, b: &Block, counter: &mut u32) {
        for s in &b.stmts {
            if let StmtKind::Let { vars, .. } = &s.kind {
                for v in vars {
                    if let Some(p) = self.pos.get_mut(v.index()) {
                        *p = *counter;
                    }
                }
                *counter += 1;
            }
            if let Some((binders, body)) = as_loop(&s.kind) {
                let k = self.ranges.len();
                self.ranges.push((*counter, 0));
                for v in binders {
                    if let Some(p) = self.pos.get_mut(v.index()) {
                        *p = *counter;
                    }
                }
                *counter += 1;
                self.number(body, counter);
                self.ranges[k].1 = *counter;
            } else {
                for child in crate::visit::child_blocks(&s.kind) {
                    self.number(child, counter);
                }
            }
        }
    }

    /// Processes the loops of `b` (their bodies first), inserting what
    /// leaves each loop body in front of the loop.
    fn block(&mut self, b: &mut Block) {
        // The statements hoisted before each statement, by its index: a
        // block nothing leaves is not rebuilt.
        let mut hoists: Vec<(usize, Vec<Stmt>)> = Vec::new();
        for (i, s) in b.stmts.iter_mut().enumerate() {
            let hoisted = match &mut s.kind {
                StmtKind::Let { expr: Expr::Build { body, .. } | Expr::Loop { body, .. }, .. }
                | StmtKind::For { body, .. } => {
                    let range = self.ranges.get(self.next_loop).copied().unwrap_or((0, u32::MAX));
                    self.next_loop += 1;
                    self.block(body);
                    self.hoist(body, range)
                }
                StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. }
                | StmtKind::If { then_branch, else_branch, .. } => {
                    self.block(then_branch);
                    self.block(else_branch);
                    Vec::new()
                }
                // Nothing leaves a while loop (it may run zero times): its
                // blocks are processed in place, in `number`'s order.
                StmtKind::Let { expr: Expr::While { cond, body, .. }, .. } => {
                    self.block(cond);
                    self.block(body);
                    Vec::new()
                }
                _ => Vec::new(),
            };
            if !hoisted.is_empty() {
                hoists.push((i, hoisted));
            }
        }
        if hoists.is_empty() {
            return;
        }
        let stmts = std::mem::take(&mut b.stmts);
        let mut out = Vec::with_capacity(stmts.len() + hoists.iter().map(|(_, h)| h.len()).sum::<usize>());
        let mut hoists = hoists.into_iter().peekable();
        for (i, s) in stmts.into_iter().enumerate() {
            if let Some((_, h)) = hoists.next_if(|(j, _)| *j == i) {
                out.extend(h);
            }
            out.push(s);
        }
        b.stmts = out;
    }

    /// Removes from a loop body spanning the positions `range` the
    /// statements that may leave it, in order.
    fn hoist(&self, body: &mut Block, range: (u32, u32)) -> Vec<Stmt> {
        let mut moved: HashSet<VarId> = HashSet::default();
        let invariant = |v: VarId, moved: &HashSet<VarId>| {
            if self.mutable.contains(&v) {
                return false;
            }
            let p = self.pos.get(v.index()).copied().unwrap_or(u32::MAX);
            !(range.0 <= p && p < range.1) || moved.contains(&v)
        };
        let mut hoisted = Vec::new();
        let stmts = std::mem::take(&mut body.stmts);
        for s in stmts {
            let movable = match &s.kind {
                StmtKind::Let { vars, expr } => {
                    vars.iter().all(|v| !self.mutable.contains(v))
                        && self.pure_infallible(expr)
                        && atoms(expr).all(|a| match a {
                            Atom::Var(v) => invariant(v, &moved),
                            _ => true,
                        })
                }
                _ => false,
            };
            if movable {
                if let StmtKind::Let { vars, .. } = &s.kind {
                    moved.extend(vars.iter().copied());
                }
                hoisted.push(s);
            } else {
                body.stmts.push(s);
            }
        }
        hoisted
    }

    /// True for expressions that cannot fail and have no effect.
    fn pure_infallible(&self, e: &Expr) -> bool {
        match e {
            Expr::Atom(_) | Expr::Unary(..) | Expr::Dim { .. } => true,
            Expr::Binary(BinOp::Div | BinOp::Rem, a, b) => {
                let int = match a {
                    Atom::Var(v) => self.types.get(v.index()) != Some(&Scalar::F64),
                    Atom::F64(_) => false,
                    _ => true,
                };
                !int || matches!(b, Atom::I64(d) if *d != 0)
            }
            Expr::Binary(..) => true,
            _ => false,
        }
    }
}

/// The atoms an expression of [`Ctx::pure_infallible`]'s kinds reads.
fn atoms(e: &Expr) -> impl Iterator<Item = Atom> {
    let v: Vec<Atom> = match e {
        Expr::Atom(a) | Expr::Unary(_, a) => vec![*a],
        Expr::Binary(_, a, b) => vec![*a, *b],
        Expr::Dim { array, .. } => vec![Atom::Var(*array)],
        _ => vec![],
    };
    v.into_iter()
}
