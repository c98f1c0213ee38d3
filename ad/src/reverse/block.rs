//! Unzipping one block: its primal statements into the forward pass (with
//! the pushes of its residuals), its Delta bindings in reverse order into
//! the backward pass, each structured binding by its rule (`rules/`).

use super::*;

impl Rev<'_> {
    /// Unzips block `blk` of the jvp program into forward statements and
    /// backward statements.
    ///
    /// - `nested`: false only for the function body, whose primal values
    ///   stay in scope for the backward pass; a nested block tapes or
    ///   recomputes them.
    /// - `binders`: the block's primal binders (loop index, primal loop
    ///   states); `binder_twins` maps those that the backward loop provides
    ///   for free (its own index) to their backward variables.
    /// - `lin_binders`: linear variables bound on entry (tangent params,
    ///   linear loop states) with the declaration of their cotangent.
    /// - `seeds`: the cotangents of the block's linear results.
    ///
    /// The statements made for the enclosing statement after this returns
    /// carry its location again.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::reverse) fn block(
        &mut self,
        blk: &Block,
        nested: bool,
        binders: &[VarId],
        binder_twins: &[(VarId, VarId)],
        lin_binders: Vec<(VarId, Decl)>,
        seeds: Vec<Seed>,
    ) -> Result<(Vec<Stmt>, Vec<Stmt>), AdError> {
        let outer = self.loc;
        let r = self.block_stmts(blk, nested, binders, binder_twins, lin_binders, seeds);
        self.loc = outer;
        r
    }

    /// [`Self::block`] without the restoring of the location.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::reverse) fn block_stmts(
        &mut self,
        blk: &Block,
        nested: bool,
        binders: &[VarId],
        binder_twins: &[(VarId, VarId)],
        lin_binders: Vec<(VarId, Decl)>,
        seeds: Vec<Seed>,
    ) -> Result<(Vec<Stmt>, Vec<Stmt>), AdError> {
        // Asked of this block only, not of the blocks nested in it.
        let yielding = std::mem::take(&mut self.yield_residuals);
        let yield_rows = std::mem::take(&mut self.yield_rows);
        let rows_built = std::mem::take(&mut self.rows_built);
        let mut fwd: Vec<Stmt> = Vec::new();
        let mut decls: Vec<Stmt> = Vec::new();
        let mut chunks: Vec<Vec<Stmt>> = Vec::new();
        // Primal variables bound here, in order, with cheap definitions.
        let mut bound: Vec<VarId> = binders.to_vec();
        let mut defs: HashMap<VarId, (Expr, Loc)> = HashMap::new();

        // Seeds that can become the target's own accumulator.
        let mut alias: HashMap<VarId, Decl> = HashMap::new();
        let mut plain_seeds = Vec::new();
        let mut counts: HashMap<VarId, usize> = HashMap::new();
        for s in &seeds {
            if let Atom::Var(v) = s.target {
                *counts.entry(v).or_default() += 1;
            }
        }
        let bound_by_let: HashSet<VarId> = blk
            .stmts
            .iter()
            .flat_map(|s| match &s.kind {
                StmtKind::Let { vars, expr }
                    if !matches!(expr, Expr::Index { .. } | Expr::Slice { .. } | Expr::Reshape { .. }) =>
                {
                    vars.clone()
                }
                _ => vec![],
            })
            .collect();
        // A linear loop state returned as (exactly one) result of the body
        // takes the incoming cotangent as its own accumulator too, so a
        // state passed through (or permuted) costs nothing per iteration.
        let lin_bound: HashSet<VarId> = lin_binders.iter().map(|(v, _)| *v).collect();
        for s in seeds {
            match s.target {
                Atom::Var(v)
                    if s.alias
                        && counts[&v] == 1
                        && (bound_by_let.contains(&v) || lin_bound.contains(&v))
                        && self.linear.contains(&v) =>
                {
                    alias.insert(v, Decl::Alias { expr: s.value, live: s.live, owned: s.owned });
                }
                _ => plain_seeds.push(s),
            }
        }

        let forced = if nested { forced(blk, &plain_seeds) } else { HashSet::new() };
        for (v, decl) in lin_binders {
            let decl = alias.remove(&v).unwrap_or(decl);
            let lazy = nested && !forced.contains(&v);
            self.declare_ct(v, decl, lazy, &mut decls);
        }

        for s in &blk.stmts {
            let loc = s.loc;
            self.loc = loc;
            let StmtKind::Let { vars, expr } = &s.kind else {
                // Size checks belong to the primal program.
                fwd.push(s.clone());
                continue;
            };
            let any_linear = vars.iter().any(|v| self.linear.contains(v));
            let structured =
                matches!(expr, Expr::Build { .. } | Expr::Loop { .. } | Expr::While { .. } | Expr::If { .. });
            if !any_linear && !structured {
                if vars.len() == 1 && is_cheap(expr) {
                    defs.insert(vars[0], (expr.clone(), loc));
                }
                bound.extend(vars);
                fwd.push(s.clone());
                continue;
            }
            if !any_linear && !self.binds_linear(expr) {
                // A primal build/loop/if: no linear statement inside. (One
                // whose linear values are all dead inside, say a loop with a
                // tangent state whose result is unused, still goes through
                // its rule: its body mentions tangents, which the forward
                // pass does not have.)
                if vars.len() == 1 && is_cheap(expr) {
                    defs.insert(vars[0], (expr.clone(), loc));
                }
                bound.extend(vars);
                fwd.push(s.clone());
                continue;
            }
            // Declare the cotangents of the linear variables bound here.
            for v in vars.iter().filter(|v| self.linear.contains(v)) {
                let view = match expr {
                    Expr::Index { array, indices } if self.out.ty(*v).is_array() => self.ct.get(array).map(|c| {
                        Decl::View { parent: *array, expr: Expr::Index { array: *c, indices: indices.clone() } }
                    }),
                    Expr::Slice { array, lo, hi } => self
                        .ct
                        .get(array)
                        .map(|c| Decl::View { parent: *array, expr: Expr::Slice { array: *c, lo: *lo, hi: *hi } }),
                    Expr::Reshape { array, dims } => self
                        .ct
                        .get(array)
                        .map(|c| Decl::View { parent: *array, expr: Expr::Reshape { array: *c, dims: dims.clone() } }),
                    _ => None,
                };
                if view.is_some() {
                    self.views.insert(*v);
                }
                let decl = view.or_else(|| alias.remove(v)).unwrap_or(Decl::Zero);
                let lazy = nested && !forced.contains(v);
                self.declare_ct(*v, decl, lazy, &mut decls);
            }
            bound.extend(vars.iter().filter(|v| !self.linear.contains(v)));
            let mut chunk = Vec::new();
            match expr {
                Expr::Build { n, index, body } => {
                    self.build_rule(vars, *n, *index, body, loc, !nested, &mut fwd, &mut chunk)?;
                    // The stacked residuals of its body: primal values of
                    // this block.
                    for (v, _) in std::mem::take(&mut self.setup) {
                        bound.push(v);
                    }
                    // The primal half of the comprehension, when cheap, is
                    // recomputed rather than taped like any cheap binding.
                    if let Some(Stmt { kind: StmtKind::Let { vars: pv, expr: pe @ Expr::Build { .. } }, loc }) =
                        fwd.last()
                    {
                        if pv.len() == 1 && is_cheap(pe) {
                            defs.insert(pv[0], (pe.clone(), *loc));
                        }
                    }
                }
                Expr::While { states, init, cond, body } => {
                    self.loop_rule(vars, LoopHead::While(cond), states, init, body, loc, &mut fwd, &mut chunk)?;
                    // The trip count: a primal value of this block (taped
                    // when the block is nested).
                    for (v, _) in std::mem::take(&mut self.setup) {
                        bound.push(v);
                    }
                }
                Expr::Loop { n, index, states, init, body } => {
                    let head = LoopHead::Counted(*n, *index);
                    self.loop_rule(vars, head, states, init, body, loc, &mut fwd, &mut chunk)?;
                    // A checkpointed loop binds its segment sizes and saved
                    // states in front of it: primal values of this block.
                    for (v, def) in std::mem::take(&mut self.setup) {
                        if let Some(d) = def.filter(|(e, _)| is_cheap(e)) {
                            defs.insert(v, d);
                        }
                        bound.push(v);
                    }
                }
                Expr::If { cond, then_branch, else_branch } => {
                    self.if_rule(vars, *cond, then_branch, else_branch, loc, &mut fwd, &mut chunk)?;
                    // The residuals the branches yield: primal values of
                    // this block.
                    for (v, _) in std::mem::take(&mut self.setup) {
                        bound.push(v);
                    }
                }
                Expr::Call { func, args } => {
                    let rules = self.rules;
                    let kept = self.kept_calls.and_then(|n| Some((n, arrayad_ir::KeptKind::of_callee(n, *func)?)));
                    match (rules.get(func), kept) {
                        (Some(rule), _) => self.call_rule(vars, args, rule, &mut chunk)?,
                        (None, Some((n, (def, arrayad_ir::KeptKind::Jvp)))) => {
                            let vjp = arrayad_ir::KeptKind::Vjp.callee(n, def);
                            self.kept_call_rule(vars, args, vjp, &mut chunk)?
                        }
                        _ => return Err(AdError::new("a linear call of no operator")),
                    }
                }
                _ => self.transpose(vars[0], expr, &mut chunk)?,
            }
            chunks.push(chunk);
        }

        let mut bwd = decls;
        for s in plain_seeds {
            let value = match s.value {
                Expr::Atom(a) => a,
                e => {
                    let ty = self.out.atom_ty(&s.target).with_elem(Scalar::F64);
                    self.let1(&mut bwd, "seed", e, ty)
                }
            };
            self.accumulate_from(&s.target, value, s.live, s.owned, &mut bwd);
        }
        for c in chunks.into_iter().rev() {
            bwd.extend(c);
        }

        if !nested {
            return Ok((fwd, bwd));
        }

        // A recomputable comprehension of scalars that the backward code
        // reads only for its extent (a zero cotangent's shape) is not
        // recomputed: its extent is its trip count.
        let mut extents: HashMap<VarId, Vec<Atom>> = HashMap::new();
        for v in &bound {
            if let Some((Expr::Build { n, body, .. }, _)) = defs.get(v) {
                if self.out.ty(*v).rank == 1 && body.results.len() == 1 && shape_only(&[], &bwd, *v) {
                    extents.insert(*v, vec![*n]);
                }
            }
        }
        if !extents.is_empty() {
            rewrite_shapes(&mut bwd, &extents);
        }

        // Residuals: primal variables bound here that the backward code uses.
        let bound_set: HashSet<VarId> = bound.iter().copied().collect();
        // The rows this block yields into a comprehension's array, when
        // not cheap to recompute, are read back from it (`rows_built`).
        if let [index, ..] = binders {
            for (r, array) in rows_built {
                if bound_set.contains(&r) && r != *index && !defs.contains_key(&r) {
                    let row = Expr::Index { array, indices: vec![Atom::Var(*index)] };
                    defs.insert(r, (row, self.loc));
                }
            }
        }
        let mut needed: HashSet<VarId> = HashSet::new();
        for s in &bwd {
            stmt_uses(&s.kind, &mut |v| {
                if bound_set.contains(&v) {
                    needed.insert(v);
                }
            });
        }
        let given: HashMap<VarId, VarId> = binder_twins.iter().copied().collect();
        let mut work: Vec<VarId> = needed.iter().copied().collect();
        while let Some(v) = work.pop() {
            if given.contains_key(&v) {
                continue;
            }
            if let Some((e, _)) = defs.get(&v) {
                arrayad_ir::visit::expr_uses(e, &mut |u| {
                    if bound_set.contains(&u) && needed.insert(u) {
                        work.push(u);
                    }
                });
            }
        }
        let mut taped = Vec::new();
        let mut recompute = Vec::new();
        for v in &bound {
            if !needed.contains(v) {
                continue;
            }
            if let Some(t) = given.get(v) {
                self.twins.map.insert(*v, Atom::Var(*t));
                continue;
            }
            let twin = self.new_var(&self.out.var(*v).name.clone(), self.out.ty(*v));
            self.twins.map.insert(*v, Atom::Var(twin));
            match defs.get(v) {
                Some((e, loc)) => {
                    let e = self.fresh_binders(e);
                    recompute.push(Stmt { kind: StmtKind::Let { vars: vec![*v], expr: e }, loc: *loc })
                }
                None => taped.push(*v),
            }
        }
        // An array the backward code reads only for its extents is not
        // taped (that would keep it alive): its extents are.
        let mut shapes: HashMap<VarId, Vec<Atom>> = HashMap::new();
        let mut taped_slots = Vec::new();
        let outer = match binders.first() {
            Some(index) if yield_rows => self.outer_extents(*index, &fwd, &taped),
            _ => HashMap::new(),
        };
        for v in taped {
            let ty = self.out.ty(v);
            if ty.is_array() && shape_only(&recompute, &bwd, v) {
                // In a comprehension's body, extents that are literals or
                // variables bound outside it are the same in every
                // iteration: read from there, not taped (they then also
                // tell the backward code's bounds).
                if let Some(dims) = outer.get(&v) {
                    shapes.insert(v, dims.clone());
                    continue;
                }
                let mut dims = Vec::new();
                for axis in 0..ty.rank {
                    let d = self.new_var(&format!("dim_{}", self.out.var(v).name), Type::I64);
                    fwd.push(Stmt {
                        kind: StmtKind::Let { vars: vec![d], expr: Expr::Dim { array: v, axis } },
                        loc: self.loc,
                    });
                    let twin = self.new_var(&format!("dim_{}", self.out.var(v).name), Type::I64);
                    self.twins.map.insert(d, Atom::Var(twin));
                    dims.push(d);
                }
                taped_slots.extend(dims.iter().copied());
                shapes.insert(v, dims.into_iter().map(Atom::Var).collect());
            } else {
                taped_slots.push(v);
            }
        }
        let taped = taped_slots;
        if !shapes.is_empty() {
            rewrite_shapes(&mut recompute, &shapes);
            rewrite_shapes(&mut bwd, &shapes);
        }
        if yielding && taped.iter().all(|v| self.out.ty(*v).is_scalar()) {
            // The branch rule binds them from the branch's results.
            self.yielded = Some(taped);
            return Ok((fwd, recompute.into_iter().chain(bwd).collect()));
        }
        // (The backward loop's own index reads the rows.)
        let (taped, reads) = match binders.first().and_then(|i| Some((*i, *given.get(i)?))) {
            Some((index, twin)) if yield_rows => self.stack_residuals(index, twin, &fwd, taped),
            _ => (taped, Vec::new()),
        };
        for v in &taped {
            self.push(&mut fwd, StmtKind::Push(Atom::Var(*v)));
        }
        let pops: Vec<Stmt> = taped
            .iter()
            .rev()
            .map(|v| Stmt { kind: StmtKind::Let { vars: vec![*v], expr: Expr::Pop }, loc: self.loc })
            .collect();
        let prefix = pops::interleave(pops, reads.into_iter().chain(recompute).chain(bwd).collect());
        // The backward code reads the twins: renamed once, by `unzip`.
        Ok((fwd, prefix))
    }

    /// The extents of each array of `vars`, bound in the body of a
    /// comprehension over `index` whose forward statements are `fwd`, when
    /// each is a literal or a variable bound outside the body
    /// ([`arrayad_ir::shape::static_dims_in`]).
    fn outer_extents(&self, index: VarId, fwd: &[Stmt], vars: &[VarId]) -> HashMap<VarId, Vec<Atom>> {
        use arrayad_ir::shape::StaticDim;
        let arrays: Vec<Atom> = vars.iter().filter(|v| self.out.ty(**v).is_array()).map(|v| Atom::Var(*v)).collect();
        if arrays.is_empty() {
            return HashMap::new();
        }
        let dims = arrayad_ir::shape::static_dims_in(&self.out, index, fwd, &arrays);
        arrays
            .iter()
            .zip(dims)
            .filter_map(|(a, dims)| {
                let atoms = dims?
                    .iter()
                    .map(|d| match d {
                        StaticDim::Lit(x) => Some(Atom::I64(*x)),
                        StaticDim::Var(w) => Some(Atom::Var(*w)),
                        _ => None,
                    })
                    .collect::<Option<Vec<Atom>>>()?;
                Some((a.as_var()?, atoms))
            })
            .collect()
    }

    /// Of the residuals `taped` of a comprehension's body over `index`
    /// (whose forward statements are `fwd`), those that stack into a
    /// regular array: `f64` and `i64` scalars, and arrays whose extents
    /// are the same in every iteration ([`arrayad_ir::shape::static_dims_in`]).
    /// Each gets the array that the forward comprehension yields it into
    /// (left in `yielded_rows` for the `build` rule) and a statement reading
    /// its row back at `twin`, the backward loop's index; the rest stay
    /// taped. Returns those left and the reads.
    ///
    /// Residuals by index rather than on the tape (Smeding's thesis,
    /// ch. 7): the forward comprehension then touches no tape, so its
    /// iterations stay independent (a parallel map), and its backward loop
    /// reads them in any order.
    fn stack_residuals(
        &mut self,
        index: VarId,
        twin: VarId,
        fwd: &[Stmt],
        taped: Vec<VarId>,
    ) -> (Vec<VarId>, Vec<Stmt>) {
        let stackable = |ty: Type| matches!(ty.elem, Scalar::F64 | Scalar::I64);
        let arrays: Vec<Atom> = taped
            .iter()
            .filter(|v| stackable(self.out.ty(**v)) && self.out.ty(**v).is_array())
            .map(|v| Atom::Var(*v))
            .collect();
        let regular: HashSet<VarId> = if arrays.is_empty() {
            HashSet::new()
        } else {
            let dims = arrayad_ir::shape::static_dims_in(&self.out, index, fwd, &arrays);
            arrays
                .iter()
                .zip(dims)
                .filter_map(|(a, d)| match (a, d) {
                    (Atom::Var(v), Some(_)) => Some(*v),
                    _ => None,
                })
                .collect()
        };
        let mut left = Vec::new();
        let mut reads = Vec::new();
        for v in taped {
            let ty = self.out.ty(v);
            if !stackable(ty) || (ty.is_array() && !regular.contains(&v)) {
                left.push(v);
                continue;
            }
            let name = format!("rows_{}", self.out.var(v).name);
            let stack = self.new_var(&name, Type { elem: ty.elem, rank: ty.rank + 1 });
            self.yielded_rows.push((v, stack));
            let row = Expr::Index { array: stack, indices: vec![Atom::Var(twin)] };
            reads.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr: row }, loc: self.loc });
        }
        (left, reads)
    }
}
