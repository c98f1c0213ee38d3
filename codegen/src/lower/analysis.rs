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

/// [`survivors`] and [`allocates`] of every block of a function, from one
/// walk (asking each loop body alone would rescan the loops nested in it,
/// O(depth x size)). Keyed by the address of the block in the function,
/// which lowering does not move.
pub(crate) struct BlockFacts {
    facts: HashMap<*const Block, Facts>,
}

#[derive(Default)]
struct Facts {
    /// An array is pushed on the tape.
    pushed: bool,
    /// Something is allocated from the arena.
    allocates: bool,
    /// The array variables assigned inside and bound outside.
    assigned: Vec<VarId>,
}

impl BlockFacts {
    pub(crate) fn new(f: &Function) -> BlockFacts {
        struct Walk<'f> {
            f: &'f Function,
            /// The depth of the block binding each variable.
            bound_at: HashMap<VarId, usize>,
            /// The blocks being walked, outermost first, with the variables
            /// already among their survivors.
            open: Vec<(*const Block, Facts, HashSet<VarId>)>,
            done: HashMap<*const Block, Facts>,
        }
        impl Walk<'_> {
            fn block(&mut self, b: &Block) {
                let d = self.open.len();
                self.open.push((b as *const Block, Facts::default(), HashSet::new()));
                for s in &b.stmts {
                    let mut bind = |v: VarId| {
                        self.bound_at.insert(v, d);
                    };
                    match &s.kind {
                        StmtKind::Let { vars, expr } => {
                            vars.iter().for_each(|v| bind(*v));
                            match expr {
                                Expr::Build { index, .. } => bind(*index),
                                Expr::Loop { index, states, .. } => {
                                    bind(*index);
                                    states.iter().for_each(|v| bind(*v));
                                }
                                Expr::While { states, .. } => states.iter().for_each(|v| bind(*v)),
                                _ => {}
                            }
                            if matches!(
                                expr,
                                Expr::Build { .. } | Expr::ArrayLit { .. } | Expr::ZerosLike(_) | Expr::Zeros(_)
                            ) {
                                self.open[d].1.allocates = true;
                            }
                        }
                        StmtKind::For { index, .. } => bind(*index),
                        StmtKind::Push(a) if is_array(self.f, a) => self.open[d].1.pushed = true,
                        StmtKind::Assign { var, value } if is_array(self.f, value) => {
                            // A survivor of every open block inside the
                            // variable's own.
                            let from = self.bound_at.get(var).map_or(0, |dv| dv + 1);
                            for k in (from..=d).rev() {
                                let (_, facts, seen) = &mut self.open[k];
                                if !seen.insert(*var) {
                                    break;
                                }
                                facts.assigned.push(*var);
                            }
                        }
                        _ => {}
                    }
                    for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                        self.block(nb);
                    }
                }
                if let Some((key, facts, _)) = self.open.pop() {
                    if let Some((_, parent, _)) = self.open.last_mut() {
                        parent.pushed |= facts.pushed;
                        parent.allocates |= facts.allocates;
                    }
                    self.done.insert(key, facts);
                }
            }
        }
        let mut w = Walk { f, bound_at: HashMap::new(), open: Vec::new(), done: HashMap::new() };
        w.block(&f.body);
        BlockFacts { facts: w.done }
    }

    /// [`survivors`] of `body`, a block of the function.
    pub(crate) fn survivors(&self, f: &Function, body: &Block) -> Option<Vec<VarId>> {
        match self.facts.get(&(body as *const Block)) {
            Some(facts) if facts.pushed => None,
            Some(facts) => Some(facts.assigned.clone()),
            None => survivors(f, body),
        }
    }

    /// [`allocates`] of `body`, a block of the function.
    pub(crate) fn allocates(&self, body: &Block) -> bool {
        match self.facts.get(&(body as *const Block)) {
            Some(facts) => facts.allocates,
            None => allocates(body),
        }
    }
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
