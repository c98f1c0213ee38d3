//! Facts about loop bodies that decide whether, and keeping what, the arena
//! can be reset after every iteration.

use arrayad_ir::visit::{block_binds, for_each_block};
use arrayad_ir::{Atom, Block, Expr, Function, StmtKind, VarId};
use std::collections::{HashMap, HashSet};

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

/// For every mutable variable, the index (in the block that declares it) of
/// the last statement that uses or assigns it, at any depth: after that
/// statement its emitter variables are free (one walk of the function,
/// remembering the statement index at every depth of the current path).
/// A variable that a block's results read has no entry (it lives to the
/// end of its block).
pub(crate) fn last_uses(f: &Function) -> HashMap<VarId, usize> {
    struct Walk<'f> {
        f: &'f Function,
        depth: HashMap<VarId, usize>,
        last: HashMap<VarId, usize>,
        path: Vec<usize>,
    }
    impl Walk<'_> {
        fn used(&mut self, v: VarId) {
            if let Some(&d) = self.depth.get(&v) {
                match self.path.get(d) {
                    Some(&i) => {
                        self.last.insert(v, i);
                    }
                    // Read by the results of its own block.
                    None => {
                        self.last.remove(&v);
                    }
                }
            }
        }
        fn block(&mut self, b: &Block) {
            let d = self.path.len();
            self.path.push(0);
            for (i, s) in b.stmts.iter().enumerate() {
                self.path[d] = i;
                arrayad_ir::visit::stmt_uses_shallow(&s.kind, &mut |v| self.used(v));
                for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                    self.block(nb);
                }
                if let StmtKind::Let { vars, .. } = &s.kind {
                    for v in vars {
                        if self.f.var(*v).mutable {
                            self.depth.insert(*v, d);
                            self.last.insert(*v, i);
                        }
                    }
                }
            }
            self.path.pop();
            for r in &b.results {
                if let Atom::Var(v) = *r {
                    self.used(v);
                }
            }
        }
    }
    let mut w = Walk { f, depth: HashMap::new(), last: HashMap::new(), path: Vec::new() };
    w.block(&f.body);
    w.last
}
