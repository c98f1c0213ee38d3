//! The cotangent state of the backward pass: one cotangent variable per
//! linear variable, declared zero, as a view of a parent accumulator or as
//! an alias of a seed, materialised lazily, and accumulated into.

use super::*;

impl Rev<'_> {
    pub(in crate::reverse) fn is_lin(&self, a: &Atom) -> Option<VarId> {
        match a {
            Atom::Var(v) if self.linear.contains(v) => Some(*v),
            _ => None,
        }
    }

    /// True when `expr` binds a linear variable at any depth (in its nested
    /// blocks, for a structured expression).
    pub(in crate::reverse) fn binds_linear(&self, expr: &Expr) -> bool {
        let mut hit = false;
        let mut check = |v: VarId| hit |= self.linear.contains(&v);
        match expr {
            Expr::Build { body, .. } => arrayad_ir::visit::block_binds(body, &mut check),
            Expr::Loop { states, body, .. } | Expr::While { states, body, .. } => {
                states.iter().for_each(|v| check(*v));
                arrayad_ir::visit::block_binds(body, &mut check);
            }
            Expr::If { then_branch, else_branch, .. } => {
                arrayad_ir::visit::block_binds(then_branch, &mut check);
                arrayad_ir::visit::block_binds(else_branch, &mut check);
            }
            _ => {}
        }
        hit
    }

    /// A copy of `e` whose nested binders (a recomputed comprehension's
    /// index and locals) are fresh variables, so that no variable is bound
    /// twice.
    pub(in crate::reverse) fn fresh_binders(&mut self, e: &Expr) -> Expr {
        let Expr::Build { n, index, body } = e else { return e.clone() };
        let mut rename = Subst::default();
        let body = arrayad_ir::visit::freshen_block(&mut self.out, body, &[*index], &mut rename);
        Expr::Build { n: *n, index: rename.var(*index), body }
    }

    pub(in crate::reverse) fn new_var(&mut self, name: &str, ty: Type) -> VarId {
        self.out.new_var(name, ty)
    }

    pub(in crate::reverse) fn let1(&mut self, out: &mut Vec<Stmt>, name: &str, e: Expr, ty: Type) -> Atom {
        let v = self.new_var(name, ty);
        out.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr: e }, loc: self.loc });
        Atom::Var(v)
    }

    pub(in crate::reverse) fn push(&self, out: &mut Vec<Stmt>, kind: StmtKind) {
        out.push(Stmt { kind, loc: self.loc });
    }

    /// Declares the cotangent of linear variable `v` (see [`Decl`]). An
    /// array cotangent starting at zero is lazy when `lazy` (in nested
    /// blocks): a mutable variable holding a placeholder (an empty array)
    /// and a flag, false until something is added to it.
    pub(in crate::reverse) fn declare_ct(&mut self, v: VarId, decl: Decl, lazy: bool, out: &mut Vec<Stmt>) {
        let ty = self.out.ty(v).with_elem(Scalar::F64);
        let name = format!("ct_{}", self.out.var(v).name.trim_start_matches('d'));
        if ty.is_scalar() {
            let c = self.out.new_mut_var(name, ty);
            let init = match decl {
                Decl::Alias { expr, .. } => expr,
                _ => Expr::Atom(Atom::F64(0.0)),
            };
            self.push(out, StmtKind::Let { vars: vec![c], expr: init });
            self.ct.insert(v, c);
            return;
        }
        let p = self.primal_of.get(&v).copied().unwrap_or(v);
        let (expr, live) = match decl {
            Decl::View { parent, expr } => {
                self.need_live(parent, out);
                (expr, None)
            }
            Decl::Alias { expr, live, owned } => {
                if owned {
                    self.owned_ct.insert(v);
                }
                (expr, live.map(Atom::Var))
            }
            // The placeholder of a zero lazy cotangent is never read (only
            // replaced): an empty array, so that the primal array is not
            // kept (nor taped) for it.
            Decl::Zero if lazy => {
                self.owned_ct.insert(v);
                (Expr::Zeros(vec![Atom::I64(0); ty.rank as usize]), Some(Atom::Bool(false)))
            }
            Decl::Zero => {
                self.owned_ct.insert(v);
                (Expr::ZerosLike(p), None)
            }
        };
        let c = match live {
            Some(l) => {
                let c = self.out.new_mut_var(name.clone(), ty);
                let f = self.out.new_mut_var(format!("live_{}", name.trim_start_matches("ct_")), Type::BOOL);
                self.push(out, StmtKind::Let { vars: vec![c], expr });
                self.push(out, StmtKind::Let { vars: vec![f], expr: Expr::Atom(l) });
                self.live.insert(v, f);
                self.level.insert(v, self.for_depth);
                c
            }
            None => {
                let c = self.new_var(&name, ty);
                self.push(out, StmtKind::Let { vars: vec![c], expr });
                c
            }
        };
        self.ct.insert(v, c);
    }

    /// Makes the lazy cotangent of `x` an accumulator (zeros unless already
    /// live) before `out` uses it in place: right here when `x` is declared
    /// in this backward loop body, else before the loop (so once, not per
    /// element of an inner loop).
    pub(in crate::reverse) fn need_live(&mut self, x: VarId, out: &mut Vec<Stmt>) {
        let Some(&flag) = self.live.get(&x) else { return };
        if self.level[&x] != self.for_depth {
            self.pending.insert(x);
            return;
        }
        let c = self.ct[&x];
        let p = self.primal_of.get(&x).copied().unwrap_or(x);
        let z = self.new_var("zeros", self.out.ty(c));
        let make = vec![
            Stmt { kind: StmtKind::Let { vars: vec![z], expr: Expr::ZerosLike(p) }, loc: self.loc },
            Stmt { kind: StmtKind::Assign { var: c, value: Atom::Var(z) }, loc: self.loc },
            Stmt { kind: StmtKind::Assign { var: flag, value: Atom::Bool(true) }, loc: self.loc },
        ];
        self.push(
            out,
            StmtKind::If {
                cond: Atom::Var(flag),
                then_branch: Block::default(),
                else_branch: Block { stmts: make, results: vec![] },
            },
        );
    }

    /// Materialises, before the backward loop just built, the lazy
    /// cotangents its body needs (`pending` of the body; `saved` is the
    /// enclosing body's).
    pub(in crate::reverse) fn flush_pending(&mut self, saved: HashSet<VarId>, out: &mut Vec<Stmt>) {
        let mut pend: Vec<VarId> = std::mem::replace(&mut self.pending, saved).into_iter().collect();
        pend.sort();
        for x in pend {
            self.need_live(x, out);
        }
    }

    /// `ct(target) += value` (nothing for a literal target: a zero tangent).
    pub(in crate::reverse) fn accumulate(&mut self, target: &Atom, value: Atom, out: &mut Vec<Stmt>) {
        self.accumulate_from(target, value, None, false, out);
    }

    /// `ct(target) += value`, where the array `value` is a lazy cotangent
    /// with flag `vlive` (nothing to add while false), and `owned` tells
    /// that its buffer is consumed here: a lazy target still zero then
    /// takes it over instead of materialising zeros and adding.
    pub(in crate::reverse) fn accumulate_from(
        &mut self,
        target: &Atom,
        value: Atom,
        vlive: Option<VarId>,
        owned: bool,
        out: &mut Vec<Stmt>,
    ) {
        let Some(t) = self.is_lin(target) else { return };
        let Some(&c) = self.ct.get(&t) else { return };
        if self.out.ty(c).is_scalar() {
            let s = self.let1(out, "ct", Expr::Binary(BinOp::Add, Atom::Var(c), value), Type::F64);
            self.push(out, StmtKind::Assign { var: c, value: s });
            return;
        }
        let mut body = Vec::new();
        let add = StmtKind::AccAdd { acc: c, indices: vec![], value };
        match self.live.get(&t).copied() {
            Some(flag) if owned => {
                let take = vec![
                    Stmt { kind: StmtKind::Assign { var: c, value }, loc: self.loc },
                    Stmt { kind: StmtKind::Assign { var: flag, value: Atom::Bool(true) }, loc: self.loc },
                ];
                self.push(
                    &mut body,
                    StmtKind::If {
                        cond: Atom::Var(flag),
                        then_branch: Block { stmts: vec![Stmt { kind: add, loc: self.loc }], results: vec![] },
                        else_branch: Block { stmts: take, results: vec![] },
                    },
                );
            }
            _ => {
                self.need_live(t, &mut body);
                self.push(&mut body, add);
            }
        }
        match vlive {
            Some(l) => self.push(
                out,
                StmtKind::If {
                    cond: Atom::Var(l),
                    then_branch: Block { stmts: body, results: vec![] },
                    else_branch: Block::default(),
                },
            ),
            None => out.extend(body),
        }
    }
}
