//! The reverse of an `if`: the branch taken runs its Delta bindings
//! backward, reading the residuals of its forward half.
//!
//! A branch whose residuals are all scalars yields them as extra results
//! of the forward `if` (the other branch yields zeros in their place), and
//! its backward half binds them from those results: unless it holds a loop
//! that tapes its iterations, the forward `if` then has no effect (DCE drops
//! it when its results are unused, loop-invariant code motion may move it,
//! as any primal code). The results are primal values of the enclosing
//! block, taped or kept in scope by its rule like any other. A branch with
//! an array residual pushes its residuals at its end and pops them at the
//! start of its backward half.

use crate::reverse::*;

impl Rev<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(in crate::reverse) fn if_rule(
        &mut self,
        vars: &[VarId],
        cond: Atom,
        then_branch: &Block,
        else_branch: &Block,
        loc: Loc,
        fwd: &mut Vec<Stmt>,
        chunk: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        // Each branch's forward block, backward block and yielded residuals.
        let mut branches = Vec::new();
        for br in [then_branch, else_branch] {
            let seeds: Vec<Seed> = vars
                .iter()
                .enumerate()
                .filter(|(_, v)| self.linear.contains(v))
                .map(|(k, v)| Seed {
                    target: br.results[k],
                    value: Expr::Atom(Atom::Var(self.ct[v])),
                    alias: true,
                    live: self.live.get(v).copied(),
                    owned: true,
                })
                .collect();
            self.yield_residuals = true;
            self.yielded = None;
            let unzipped = self.block(br, true, &[], &[], vec![], seeds);
            self.yield_residuals = false;
            let (f, b) = unzipped?;
            let residuals = self.yielded.take().unwrap_or_default();
            let presults: Vec<Atom> =
                vars.iter().zip(&br.results).filter(|(v, _)| !self.linear.contains(v)).map(|(_, r)| *r).collect();
            branches.push((f, presults, b, residuals));
        }
        // The variables the forward `if` binds the residuals of both
        // branches to, then's first.
        let outer: Vec<Vec<VarId>> = branches
            .iter()
            .map(|(_, _, _, rs)| {
                rs.iter()
                    .map(|r| {
                        let name = self.out.var(*r).name.clone();
                        self.new_var(&name, self.out.ty(*r))
                    })
                    .collect()
            })
            .collect();
        let zero = |ty: Type| match ty.elem {
            Scalar::F64 => Atom::F64(0.0),
            Scalar::I64 => Atom::I64(0),
            Scalar::Bool => Atom::Bool(false),
        };
        let mut fwd_blocks = Vec::new();
        let mut bwd_blocks = Vec::new();
        for (k, (f, mut results, b, residuals)) in branches.into_iter().enumerate() {
            for (j, rs) in outer.iter().enumerate() {
                if j == k {
                    results.extend(residuals.iter().map(|r| Atom::Var(*r)));
                } else {
                    results.extend(rs.iter().map(|r| zero(self.out.ty(*r))));
                }
            }
            fwd_blocks.push(Block { stmts: f, results });
            let mut stmts: Vec<Stmt> = residuals
                .iter()
                .zip(&outer[k])
                .map(|(r, o)| Stmt { kind: StmtKind::Let { vars: vec![*r], expr: Expr::Atom(Atom::Var(*o)) }, loc })
                .collect();
            stmts.extend(b);
            bwd_blocks.push(Block { stmts, results: vec![] });
        }
        let (fe, be) = (fwd_blocks.pop().expect("two branches"), bwd_blocks.pop().expect("two branches"));
        let (ft, bt) = (fwd_blocks.pop().expect("two branches"), bwd_blocks.pop().expect("two branches"));
        let mut pvars: Vec<VarId> = vars.iter().copied().filter(|v| !self.linear.contains(v)).collect();
        for v in outer.into_iter().flatten() {
            pvars.push(v);
            self.setup.push((v, None));
        }
        if !pvars.is_empty() {
            fwd.push(Stmt {
                kind: StmtKind::Let { vars: pvars, expr: Expr::If { cond, then_branch: ft, else_branch: fe } },
                loc,
            });
        } else if arrayad_ir::passes::dce::block_has_effect(&ft) || arrayad_ir::passes::dce::block_has_effect(&fe) {
            fwd.push(Stmt { kind: StmtKind::If { cond, then_branch: ft, else_branch: fe }, loc });
        }
        chunk.push(Stmt { kind: StmtKind::If { cond, then_branch: bt, else_branch: be }, loc });
        Ok(())
    }
}
