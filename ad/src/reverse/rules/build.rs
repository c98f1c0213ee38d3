//! The reverse of a `build` (a `for` comprehension): a backward effect
//! loop over the rows, each reading its residuals and running the body's
//! Delta bindings backward into the row's cotangent view.
//!
//! The body's residuals of a regular shape (scalars, arrays of the same
//! extents in every iteration) are yielded by the forward comprehension
//! as more results, one array stacking each, and the backward loop reads
//! row `i` of them (Smeding's thesis, ch. 7: arrays of residuals by
//! index); the others are pushed on the tape at the end of each iteration
//! and popped by the backward loop.

use crate::reverse::*;

impl Rev<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(in crate::reverse) fn build_rule(
        &mut self,
        vars: &[VarId],
        n: Atom,
        index: VarId,
        body: &Block,
        loc: Loc,
        top_level: bool,
        fwd: &mut Vec<Stmt>,
        chunk: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        let ib = self.new_var("i", Type::I64);
        let mut seeds = Vec::new();
        for (k, v) in vars.iter().enumerate() {
            if self.linear.contains(v) {
                let c = self.ct[v];
                seeds.push(Seed {
                    target: body.results[k],
                    value: Expr::Index { array: c, indices: vec![Atom::Var(ib)] },
                    alias: true,
                    live: None,
                    owned: false,
                });
            }
        }
        // The scalar rows of a comprehension of the function's body (in
        // scope in the backward pass, so never taped): a nested one's array
        // would be taped whole and kept, and an array row may be needed for
        // its extents only, which are taped alone.
        if top_level {
            self.rows_built = vars
                .iter()
                .zip(&body.results)
                .filter(|(v, _)| !self.linear.contains(v) && self.out.ty(**v).rank == 1)
                .filter_map(|(v, r)| match r {
                    Atom::Var(r) => Some((*r, *v)),
                    _ => None,
                })
                .collect();
        }
        let saved = std::mem::take(&mut self.pending);
        self.for_depth += 1;
        self.yield_rows = true;
        self.yielded_rows.clear();
        let body_result = self.block(body, true, &[index], &[(index, ib)], vec![], seeds);
        self.yield_rows = false;
        self.for_depth -= 1;
        let (fbody, bbody) = body_result?;
        let stacked = std::mem::take(&mut self.yielded_rows);
        self.flush_pending(saved, chunk);
        // The backward loop reads the rows of the result's cotangents.
        for v in vars.iter().filter(|v| self.linear.contains(v)) {
            self.need_live(*v, chunk);
        }
        let mut pvars: Vec<VarId> = vars.iter().copied().filter(|v| !self.linear.contains(v)).collect();
        let mut presults: Vec<Atom> =
            vars.iter().zip(&body.results).filter(|(v, _)| !self.linear.contains(v)).map(|(_, r)| *r).collect();
        // The residuals the body stacks by index: more results of the
        // forward comprehension, primal values of the enclosing block.
        for (residual, stack) in stacked {
            presults.push(Atom::Var(residual));
            pvars.push(stack);
            self.setup.push((stack, None));
        }
        let fblock = Block { stmts: fbody, results: presults };
        if !pvars.is_empty() {
            fwd.push(Stmt { kind: StmtKind::Let { vars: pvars, expr: Expr::Build { n, index, body: fblock } }, loc });
        } else if arrayad_ir::passes::dce::block_has_effect(&fblock) {
            fwd.push(Stmt { kind: StmtKind::For { n, index, reverse: false, body: fblock }, loc });
        }
        chunk.push(Stmt {
            kind: StmtKind::For { n, index: ib, reverse: true, body: Block { stmts: bbody, results: vec![] } },
            loc,
        });
        Ok(())
    }
}
