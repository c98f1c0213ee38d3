//! The reverse of an `if`: the branch taken, popped from the tape, runs its
//! Delta bindings backward.

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
            let (f, b) = self.block(br, true, &[], &[], vec![], seeds)?;
            let presults: Vec<Atom> =
                vars.iter().zip(&br.results).filter(|(v, _)| !self.linear.contains(v)).map(|(_, r)| *r).collect();
            branches.push((Block { stmts: f, results: presults }, Block { stmts: b, results: vec![] }));
        }
        let (fe, be) = branches.pop().expect("two branches");
        let (ft, bt) = branches.pop().expect("two branches");
        let pvars: Vec<VarId> = vars.iter().copied().filter(|v| !self.linear.contains(v)).collect();
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
