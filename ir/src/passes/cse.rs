//! Common subexpression elimination of pure scalar and view operations,
//! scoped by block. Reads of accumulators and mutable variables are never
//! shared (their values change).
//!
//! Linear in the size of the function: one table of the expressions
//! available (with an undo list per block, so a lookup costs the same at any
//! depth), and every statement renamed once, in place (a statement kept is
//! not moved).

use crate::fx::{FxHashMap, FxHashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, ReduceOp, StmtKind, UnOp, VarId};
use crate::visit::Subst;

/// Runs CSE on `f` in place.
pub fn cse(f: &mut Function) {
    let mut c = Cse { unstable: FxHashSet::default(), table: FxHashMap::default(), subst: Subst::default(), depth: 0 };
    for (i, v) in f.vars.iter().enumerate() {
        if v.mutable {
            c.unstable.insert(VarId(i as u32));
        }
    }
    c.block(&mut f.body);
}

/// An operand as a key: a variable, or a literal by its bits (so that
/// `0.0` and `-0.0` differ and NaNs are equal to themselves).
#[derive(Clone, PartialEq, Eq, Hash)]
enum AtomKey {
    Var(u32),
    F64(u64),
    I64(i64),
    Bool(bool),
}

fn atom_key(a: &Atom) -> AtomKey {
    match a {
        Atom::Var(v) => AtomKey::Var(v.0),
        Atom::F64(x) => AtomKey::F64(x.to_bits()),
        Atom::I64(x) => AtomKey::I64(*x),
        Atom::Bool(x) => AtomKey::Bool(*x),
    }
}

/// An expression that may be shared.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Unary(UnOp, AtomKey),
    Binary(BinOp, AtomKey, AtomKey),
    Index(u32, Vec<AtomKey>),
    Slice(u32, AtomKey, AtomKey),
    Dim(u32, u8),
    Reduce(ReduceOp, u32),
}

struct Cse {
    /// Mutable variables, accumulators and views of accumulators.
    unstable: FxHashSet<VarId>,
    /// The expressions available here and the variable holding each.
    table: FxHashMap<Key, VarId>,
    subst: Subst,
    /// The nesting depth of the block being rewritten (0: the body).
    depth: u32,
}

impl Cse {
    fn key(&self, e: &Expr) -> Option<Key> {
        let stable = |v: &VarId| !self.unstable.contains(v);
        let atom = |a: &Atom| a.as_var().is_none_or(|v| stable(&v));
        Some(match e {
            Expr::Unary(op, a) if atom(a) => Key::Unary(*op, atom_key(a)),
            Expr::Binary(op, a, b) if atom(a) && atom(b) => Key::Binary(*op, atom_key(a), atom_key(b)),
            Expr::Index { array, indices } if stable(array) && indices.iter().all(atom) => {
                Key::Index(array.0, indices.iter().map(atom_key).collect())
            }
            Expr::Slice { array, lo, hi } if stable(array) && atom(lo) && atom(hi) => {
                Key::Slice(array.0, atom_key(lo), atom_key(hi))
            }
            Expr::Dim { array, axis } if stable(array) => Key::Dim(array.0, *axis),
            Expr::Reduce { op, array } if stable(array) => Key::Reduce(*op, array.0),
            _ => return None,
        })
    }

    /// Renames `b` in place and removes the statements whose expression an
    /// earlier one computes (a pass over a long body moves only what
    /// follows a removed statement).
    fn block(&mut self, b: &mut Block) {
        let mut added: Vec<Key> = Vec::new();
        let mut keep = vec![true; b.stmts.len()];
        let mut removed = false;
        for (s, kept) in b.stmts.iter_mut().zip(keep.iter_mut()) {
            if crate::visit::child_blocks(&s.kind).next().is_none() {
                if let StmtKind::Let { vars, expr } = &mut s.kind {
                    self.subst.expr_shallow_in_place(expr);
                    let taints = matches!(expr, Expr::ZerosLike(_) | Expr::Zeros(_))
                        || (matches!(
                            expr,
                            Expr::Index { .. }
                                | Expr::Slice { .. }
                                | Expr::Reshape { .. }
                                | Expr::Update { .. }
                                | Expr::Atom(_)
                                | Expr::Pop
                                | Expr::Call { .. }
                        ) && {
                            let mut t = false;
                            crate::visit::expr_uses(expr, &mut |v| t |= self.unstable.contains(&v));
                            t
                        });
                    if taints {
                        self.unstable.extend(vars.iter().copied());
                    }
                    if vars.len() == 1 && !taints {
                        if let Some(k) = self.key(expr) {
                            match self.table.entry(k) {
                                std::collections::hash_map::Entry::Occupied(prev) => {
                                    self.subst.map.insert(vars[0], Atom::Var(*prev.get()));
                                    *kept = false;
                                    removed = true;
                                    continue;
                                }
                                std::collections::hash_map::Entry::Vacant(slot) => {
                                    if self.depth > 0 {
                                        added.push(slot.key().clone());
                                    }
                                    slot.insert(vars[0]);
                                }
                            }
                        }
                    }
                    continue;
                }
            }
            self.depth += 1;
            self.subst.stmt_shallow_in_place(&mut s.kind);
            for nb in crate::visit::child_blocks_mut(&mut s.kind) {
                self.block(nb);
            }
            self.depth -= 1;
        }
        if removed {
            let mut keep = keep.into_iter();
            b.stmts.retain(|_| keep.next().unwrap_or(true));
        }
        // The function body's table ends with the pass: only nested
        // blocks forget their expressions (`added` is empty at depth 0).
        for k in added {
            self.table.remove(&k);
        }
        for r in &mut b.results {
            *r = self.subst.atom(r);
        }
    }
}
