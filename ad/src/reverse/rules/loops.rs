//! The reverse of a counted or while `loop`: the iterations backward, each
//! popping its residuals, with the loop states' cotangents carried; or
//! checkpointed (`checkpoint.rs`).

use crate::reverse::*;

impl Rev<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(in crate::reverse) fn loop_rule(
        &mut self,
        vars: &[VarId],
        head: LoopHead<'_>,
        states: &[VarId],
        init: &[Atom],
        body: &Block,
        loc: Loc,
        fwd: &mut Vec<Stmt>,
        chunk: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        // A while loop runs back over its recorded trip count; its index
        // (unused by its body) is fresh.
        let (n, index) = match head {
            LoopHead::Counted(n, index) => (Some(n), index),
            LoopHead::While(_) => (None, self.new_var("i", Type::I64)),
        };
        let ib = self.new_var("i", Type::I64);
        let mut binders = vec![index];
        let mut lin_binders = Vec::new();
        let mut seeds = Vec::new();
        let mut carriers = Vec::new();
        for (k, st) in states.iter().enumerate() {
            if self.linear.contains(st) {
                let ty = self.out.ty(*st).with_elem(Scalar::F64);
                let cs = self.out.new_mut_var("ct_state", ty);
                chunk.push(Stmt {
                    kind: StmtKind::Let { vars: vec![cs], expr: Expr::Atom(Atom::Var(self.ct[&vars[k]])) },
                    loc: self.loc,
                });
                // An array carrier has a flag too: false while it is zero.
                let cl = if ty.is_array() {
                    let cl = self.out.new_mut_var("live_state", Type::BOOL);
                    let init_live = match self.live.get(&vars[k]) {
                        Some(f) => Atom::Var(*f),
                        None => Atom::Bool(true),
                    };
                    chunk.push(Stmt {
                        kind: StmtKind::Let { vars: vec![cl], expr: Expr::Atom(init_live) },
                        loc: self.loc,
                    });
                    Some(cl)
                } else {
                    None
                };
                // The incoming state's cotangent is shaped like the incoming
                // state (`declare_ct` zeroes one like the primal state, a
                // residual of the iteration), not like the carrier: a state
                // may change its extents from one iteration to the next.
                lin_binders.push((*st, Decl::Zero));
                // The carrier is consumed by this seed alone: the target may
                // take it as its accumulator.
                seeds.push(Seed {
                    target: body.results[k],
                    value: Expr::Atom(Atom::Var(cs)),
                    alias: true,
                    live: cl,
                    owned: true,
                });
                carriers.push((k, cs, cl));
            } else {
                binders.push(*st);
            }
        }
        // After the body's bindings ran backward, the carriers take the
        // cotangents of this iteration's incoming states.
        let saved = std::mem::take(&mut self.pending);
        self.for_depth += 1;
        let body_result = self.block(body, true, &binders, &[(index, ib)], lin_binders, seeds);
        self.for_depth -= 1;
        let (fbody, mut bbody) = body_result?;
        self.flush_pending(saved, chunk);
        for (k, cs, cl) in &carriers {
            let c = self.ct[&states[*k]];
            bbody.push(Stmt { kind: StmtKind::Assign { var: *cs, value: Atom::Var(c) }, loc: self.loc });
            if let Some(cl) = cl {
                let live = match self.live.get(&states[*k]) {
                    Some(f) => Atom::Var(*f),
                    None => Atom::Bool(true),
                };
                bbody.push(Stmt { kind: StmtKind::Assign { var: *cl, value: live }, loc: self.loc });
            }
        }
        let pidx: Vec<usize> = (0..states.len()).filter(|k| !self.linear.contains(&states[*k])).collect();
        let pvars: Vec<VarId> = pidx.iter().map(|k| vars[*k]).collect();
        let pstates: Vec<VarId> = pidx.iter().map(|k| states[*k]).collect();
        let presults: Vec<Atom> = pidx.iter().map(|k| body.results[*k]).collect();
        if self.checkpoint {
            if let Some(reason) = checkpoint::not_applicable(&self.out, &head, &pstates) {
                self.uncheckpointed.push(crate::Uncheckpointed { loc, reason });
            }
        }
        if let (LoopHead::Counted(n, _), true) = (head, self.checkpoint && checkpoint::applies(&self.out, &pstates)) {
            let parts = checkpoint::LoopParts {
                n,
                index,
                index_twin: ib,
                vars: pvars,
                states: pstates,
                init: pidx.iter().map(|k| init[*k]).collect(),
                fwd: fbody,
                results: presults,
                bwd: bbody,
                loc,
            };
            let before = fwd.len();
            checkpoint::checkpointed(&mut self.out, parts, fwd, chunk);
            // Every binding but the last statement (the loop) is setup.
            for s in &fwd[before..fwd.len() - 1] {
                if let StmtKind::Let { vars, expr } = &s.kind {
                    for v in vars {
                        self.setup.push((*v, (vars.len() == 1).then(|| (expr.clone(), s.loc))));
                    }
                }
            }
        } else if let LoopHead::While(cond) = head {
            // Forward: the loop with a trip counter; backward: a reverse
            // counted loop over the trip count.
            let count = self.new_var("trips", Type::I64);
            let counter = self.new_var("trip", Type::I64);
            let next = self.new_var("trip", Type::I64);
            let mut stmts = vec![
                Stmt { kind: StmtKind::Let { vars: vec![index], expr: Expr::Atom(Atom::Var(counter)) }, loc },
                Stmt {
                    kind: StmtKind::Let {
                        vars: vec![next],
                        expr: Expr::Binary(BinOp::Add, Atom::Var(counter), Atom::I64(1)),
                    },
                    loc,
                },
            ];
            stmts.extend(fbody);
            let mut results = presults;
            results.push(Atom::Var(next));
            let mut all_vars = pvars;
            all_vars.push(count);
            self.setup.push((count, None));
            let mut all_states = pstates;
            all_states.push(counter);
            let mut all_init: Vec<Atom> = pidx.iter().map(|k| init[*k]).collect();
            all_init.push(Atom::I64(0));
            fwd.push(Stmt {
                kind: StmtKind::Let {
                    vars: all_vars,
                    expr: Expr::While {
                        states: all_states,
                        init: all_init,
                        cond: cond.clone(),
                        body: Block { stmts, results },
                    },
                },
                loc,
            });
            chunk.push(Stmt {
                kind: StmtKind::For {
                    n: Atom::Var(count),
                    index: ib,
                    reverse: true,
                    body: Block { stmts: bbody, results: vec![] },
                },
                loc,
            });
        } else {
            let n = n.unwrap_or(Atom::I64(0));
            let fblock = Block { stmts: fbody, results: presults };
            if !pvars.is_empty() {
                fwd.push(Stmt {
                    kind: StmtKind::Let {
                        vars: pvars,
                        expr: Expr::Loop {
                            n,
                            index,
                            states: pstates,
                            init: pidx.iter().map(|k| init[*k]).collect(),
                            body: fblock,
                        },
                    },
                    loc,
                });
            } else if arrayad_ir::passes::dce::block_has_effect(&fblock) {
                fwd.push(Stmt { kind: StmtKind::For { n, index, reverse: false, body: fblock }, loc });
            }
            chunk.push(Stmt {
                kind: StmtKind::For { n, index: ib, reverse: true, body: Block { stmts: bbody, results: vec![] } },
                loc,
            });
        }
        for (k, cs, cl) in carriers {
            self.accumulate_from(&init[k], Atom::Var(cs), cl, true, chunk);
        }
        Ok(())
    }
}
