//! Mutable scalars to values. A mutable scalar variable whose every
//! assignment is a statement of the block that binds it (none inside a
//! loop body or a branch), and is of a literal or of an immutable
//! variable, holds between two assignments the atom last assigned: its
//! uses read that atom, and the assignments go.
//!
//! Reverse mode accumulates the cotangent of a scalar used several times in
//! such a variable (`ct_x := ct_x + ct`, `reverse/state.rs`); on
//! straight-line code this leaves plain bindings, which the other passes
//! fold, forward mode over the vjp (the Hessian-vector product) copies
//! without a mutable tangent beside each, and the backends compile without
//! building SSA form again. On the chain of lets of `bench/scaling.sh`
//! the vjp has one statement in eight fewer, the Hessian-vector product
//! three in nineteen.
//!
//! One walk to find the variables, one to rewrite: linear in the function.
//! The recursion follows the nesting of blocks, which the frontend bounds.

use crate::program::{Atom, Block, Function, Stmt, StmtKind, VarInfo};
use crate::visit::{child_blocks, child_blocks_mut, Subst};

/// Turns the mutable scalars of `f` described in the module docs into
/// values, in place.
pub fn mutables_to_values(f: &mut Function) {
    if !f.vars.iter().any(|v| v.mutable && v.ty.rank == 0) {
        return;
    }
    let mut find = Find {
        vars: &f.vars,
        home: vec![u32::MAX; f.vars.len()],
        ok: f.vars.iter().map(|v| v.mutable && v.ty.rank == 0).collect(),
        blocks: 0,
    };
    find.block(&f.body);
    let ok = find.ok;
    if !ok.iter().any(|o| *o) {
        return;
    }
    let mut subst = Subst::default();
    rewrite(&mut f.body, &ok, &mut subst);
    for (v, o) in f.vars.iter_mut().zip(&ok) {
        if *o {
            v.mutable = false;
        }
    }
}

/// The first walk: which mutable scalars qualify.
struct Find<'f> {
    /// The function's variables (an assignment of a mutable one does not
    /// qualify its target: the atom would be read after it changed).
    vars: &'f [VarInfo],
    /// The block (numbered in walk order) binding each variable.
    home: Vec<u32>,
    /// Whether each variable qualifies so far.
    ok: Vec<bool>,
    blocks: u32,
}

impl Find<'_> {
    fn block(&mut self, b: &Block) {
        let here = self.blocks;
        self.blocks += 1;
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { vars, .. } => {
                    for v in vars {
                        if let Some(h) = self.home.get_mut(v.0 as usize) {
                            *h = here;
                        }
                    }
                }
                StmtKind::Assign { var, value } => {
                    let i = var.0 as usize;
                    let of_mutable =
                        matches!(value, Atom::Var(w) if self.vars.get(w.0 as usize).is_none_or(|w| w.mutable));
                    if i < self.ok.len() && (self.home[i] != here || of_mutable) {
                        self.ok[i] = false;
                    }
                }
                _ => {}
            }
            for c in child_blocks(&s.kind) {
                self.block(c);
            }
        }
    }
}

/// The second walk: uses read the atom last assigned, and the assignments
/// of the qualifying variables go.
fn rewrite(b: &mut Block, ok: &[bool], subst: &mut Subst) {
    let mut removed = false;
    for s in &mut b.stmts {
        if let StmtKind::Assign { var, value } = &s.kind {
            if ok.get(var.0 as usize).copied().unwrap_or(false) {
                let value = subst.atom(value);
                subst.map.insert(*var, value);
                removed = true;
                continue;
            }
        }
        subst.stmt_shallow_in_place(&mut s.kind);
        for c in child_blocks_mut(&mut s.kind) {
            rewrite(c, ok, subst);
        }
    }
    if removed {
        b.stmts.retain(|s| !is_assign_of(s, ok));
    }
    for r in &mut b.results {
        *r = subst.atom(r);
    }
}

fn is_assign_of(s: &Stmt, ok: &[bool]) -> bool {
    matches!(&s.kind, StmtKind::Assign { var, .. } if ok.get(var.0 as usize).copied().unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{BinOp, Expr, Loc};
    use crate::types::Type;

    fn stmt(kind: StmtKind) -> Stmt {
        Stmt { kind, loc: Loc::default() }
    }

    /// `let mut c = 0; c := x * 2; for i < 3 { acc += c }; c := c + x;
    /// return c` becomes bindings: the loop reads `x * 2`, the result is
    /// the sum, and `c` is no longer mutable. A variable assigned in a loop
    /// stays as it was.
    #[test]
    fn assignments_in_the_binding_block_become_values() {
        let (mut f, ps) = Function::with_params("f", &[Type::F64], &[Type::F64, Type::F64]);
        let x = ps[0];
        let c = f.new_mut_var("c", Type::F64);
        let d = f.new_mut_var("d", Type::F64);
        let t = f.new_var("t", Type::F64);
        let u = f.new_var("u", Type::F64);
        let i = f.new_var("i", Type::I64);
        let loop_body = Block { stmts: vec![stmt(StmtKind::Assign { var: d, value: Atom::Var(c) })], results: vec![] };
        f.body = Block {
            stmts: vec![
                stmt(StmtKind::Let { vars: vec![c], expr: Expr::Atom(Atom::F64(0.0)) }),
                stmt(StmtKind::Let { vars: vec![d], expr: Expr::Atom(Atom::F64(0.0)) }),
                stmt(StmtKind::Let { vars: vec![t], expr: Expr::Binary(BinOp::Mul, Atom::Var(x), Atom::F64(2.0)) }),
                stmt(StmtKind::Assign { var: c, value: Atom::Var(t) }),
                stmt(StmtKind::For { n: Atom::I64(3), index: i, reverse: false, body: loop_body }),
                stmt(StmtKind::Let { vars: vec![u], expr: Expr::Binary(BinOp::Add, Atom::Var(c), Atom::Var(x)) }),
                stmt(StmtKind::Assign { var: c, value: Atom::Var(u) }),
            ],
            results: vec![Atom::Var(c), Atom::Var(d)],
        };
        mutables_to_values(&mut f);
        assert!(!f.var(c).mutable && f.var(d).mutable);
        assert_eq!(f.body.stmts.len(), 5, "{:?}", f.body.stmts);
        assert_eq!(f.body.results, vec![Atom::Var(u), Atom::Var(d)]);
        let StmtKind::For { body, .. } = &f.body.stmts[3].kind else { panic!("{:?}", f.body.stmts[3]) };
        assert_eq!(body.stmts[0].kind, StmtKind::Assign { var: d, value: Atom::Var(t) });
        let StmtKind::Let { expr, .. } = &f.body.stmts[4].kind else { panic!() };
        assert_eq!(*expr, Expr::Binary(BinOp::Add, Atom::Var(t), Atom::Var(x)));
    }
}
