//! Lowering of statements.

use super::emit::{Conv, Emitter, FloatOp, IntCC, IntOp, Mem, Ty};
use super::memory::PushItem;
use super::{Arr, Lower, Result, Val};
use arrayad_ir::visit::{block_binds, for_each_block};
use arrayad_ir::{Atom, Block, Expr, Fault, Scalar, Stmt, StmtKind, VarId};
use std::collections::HashSet;

impl<E: Emitter> Lower<'_, E> {
    pub(super) fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        // Facts learnt inside a block do not hold after it.
        let (facts, loc) = (self.known.mark(), self.loc);
        let r = self.stmt_list(stmts);
        self.known.restore(facts);
        // Checks the enclosing statement makes after its body (irregular
        // rows, ...) report the enclosing statement's location.
        self.loc = loc;
        r
    }

    /// The statements in order; a run of pushes (or of pops) of one
    /// location, as reverse mode makes them at the end (start) of a block,
    /// is one tape access with one capacity check, so that the values
    /// pushed are not live across a branch and a cold call per value.
    fn stmt_list(&mut self, stmts: &[Stmt]) -> Result<()> {
        // Mutable variables declared here, by the index of their last use:
        // their emitter variables are given back after it.
        let mut ends: std::collections::BinaryHeap<std::cmp::Reverse<(usize, VarId)>> = Default::default();
        let mut i = 0;
        while i < stmts.len() {
            if let StmtKind::Let { vars, .. } = &stmts[i].kind {
                for v in vars {
                    if let Some(&last) = self.last_use.get(v) {
                        ends.push(std::cmp::Reverse((last, *v)));
                    }
                }
            }
            let done = self.stmt_run(stmts, i)?;
            i += done;
            while let Some(std::cmp::Reverse((last, v))) = ends.peek().copied() {
                if last >= i {
                    break;
                }
                ends.pop();
                self.release_ir_var(v);
            }
        }
        Ok(())
    }

    /// Lowers the statement at `i`, or the run of pushes or pops starting
    /// there; returns how many statements it lowered.
    fn stmt_run(&mut self, stmts: &[Stmt], i: usize) -> Result<usize> {
        if let StmtKind::AccAdd { acc, indices, .. } = &stmts[i].kind {
            return self.acc_add_run(*acc, indices, stmts, i);
        }
        let run = stmts[i..]
            .iter()
            .take_while(|s| {
                s.loc == stmts[i].loc
                    && self
                        .batched_tape_kind(&s.kind)
                        .is_some_and(|k| Some(k) == self.batched_tape_kind(&stmts[i].kind))
            })
            .count();
        if run < 2 {
            self.stmt(&stmts[i])?;
            return Ok(1);
        }
        let batch = &stmts[i..i + run];
        if batch[0].loc.line != 0 {
            self.loc = batch[0].loc;
        }
        if tape_kind(&batch[0].kind) == Some(true) {
            let mut items = Vec::new();
            for s in batch {
                if let StmtKind::Push(a) = &s.kind {
                    let t = self.f.atom_ty(a);
                    if t.is_array() {
                        let arr = self.array_atom(a)?;
                        items.push(self.array_push_item(&arr, t.elem));
                    } else {
                        items.push(PushItem::Slots(self.push_slots(a)?));
                    }
                }
            }
            self.tape_push_items(&items)?;
        } else {
            // The first pop takes the top of the tape: the slots of the
            // run, in push order, are those of its last pop first.
            let mut vars = Vec::with_capacity(run);
            for s in batch.iter().rev() {
                if let StmtKind::Let { vars: vs, .. } = &s.kind {
                    vars.push((vs[0], self.var_ty(vs[0])?));
                }
            }
            let tys: Vec<Ty> = vars.iter().flat_map(|(_, t)| Self::slot_tys(*t)).collect();
            let slots = self.tape_pop(&tys)?;
            let mut at = 0;
            for (v, t) in vars {
                let n = Self::slot_tys(t).len();
                let val = self.popped_value(t, &slots[at..at + n]);
                at += n;
                self.def(v, val)?;
            }
        }
        Ok(run)
    }

    /// [`tape_kind`] of a push, or of a pop of a scalar: pops of arrays
    /// (which read their tag to know how they were pushed) are lowered one
    /// by one.
    fn batched_tape_kind(&self, k: &StmtKind) -> Option<bool> {
        let array = match k {
            StmtKind::Let { vars, .. } => vars.first().is_some_and(|v| self.f.ty(*v).is_array()),
            _ => false,
        };
        if array {
            None
        } else {
            tape_kind(k)
        }
    }

    /// The tape slots of a pushed atom.
    fn push_slots(&mut self, a: &Atom) -> Result<Vec<(Ty, E::Value)>> {
        let t = self.f.atom_ty(a);
        Ok(match self.atom(a)? {
            // A bool takes a whole slot, as an i64 0 or 1.
            Val::S(v) if t.elem == Scalar::Bool => vec![(Ty::I64, self.b.convert(Conv::BoolToI64, v))],
            Val::S(v) => vec![(Ty::of(t.elem), v)],
            Val::A(arr) => {
                let mut v = vec![(Ty::Ptr, arr.ptr)];
                v.extend(arr.dims.into_iter().map(|d| (Ty::I64, d)));
                v
            }
        })
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        // A statement made by a transformation without a source location
        // reports that of the statement before it (or of its block).
        if s.loc.line != 0 {
            self.loc = s.loc;
        }
        self.clock = self.clock.wrapping_add(1);
        self.stmt_kind(&s.kind)?;
        self.release_nested_scopes(&s.kind);
        Ok(())
    }

    fn stmt_kind(&mut self, kind: &StmtKind) -> Result<()> {
        match kind {
            // `s = sum y` of a build `y` used only there: computed where `y`
            // is bound, without the array (`sum.rs`).
            StmtKind::Let { vars, expr: Expr::Build { n, index, body } }
                if !vars.is_empty() && vars.iter().all(|y| self.blocks.fused_sum(*y).is_some()) =>
            {
                let sums = self.fused_sums(n, *index, body)?;
                for (y, v) in vars.iter().zip(sums) {
                    if let Some(s) = self.blocks.fused_sum(*y) {
                        self.def(s, Val::S(v))?;
                    }
                }
            }
            StmtKind::Let { expr: Expr::Reduce { array, .. }, .. } if self.blocks.fused_sum(*array).is_some() => {}
            StmtKind::Let { vars, expr } => {
                if let Expr::Zeros(_) | Expr::ZerosLike(_) | Expr::Build { .. } = expr {
                    for v in vars {
                        if let Some(scope) = self.made_scope(*v) {
                            self.b.declare_data_scope(scope);
                        }
                    }
                }
                self.dest_next = match vars.as_slice() {
                    [v] => self.destinations.get(v).copied(),
                    _ => None,
                };
                if let (true, Expr::Build { .. } | Expr::Call { .. }) = (vars.len() > 1, expr) {
                    self.dest_rows = vars.iter().map(|v| self.destinations.get(v).copied()).collect();
                }
                let vals = self.expr(vars, expr);
                self.dest_next = None;
                self.dest_rows.clear();
                let vals = vals?;
                if vals.len() != vars.len() {
                    return Err(self.malformed(format!("binding {} variables to {} values", vars.len(), vals.len())));
                }
                for (v, val) in vars.iter().zip(vals) {
                    self.def(*v, val)?;
                }
                self.note_zero_or(vars, expr)?;
            }
            StmtKind::Assign { var, value } => {
                let v = self.atom(value)?;
                self.def(*var, v)?;
            }
            StmtKind::AccAdd { acc, indices, value } => self.acc_add(*acc, indices, value)?,
            StmtKind::AccZero { acc, indices } => self.acc_zero(*acc, indices)?,
            StmtKind::CheckSize { a, b, what } => {
                let x = self.scalar(a)?;
                let y = self.scalar(b)?;
                let ok = self.b.icmp(IntCC::Eq, x, y);
                self.check(ok, Fault::SizeMismatch { what }, &[x, y])?;
                self.known.add_equal(x, y);
            }
            StmtKind::Push(a) if self.f.atom_ty(a).is_array() => {
                let elem = self.f.atom_ty(a).elem;
                let arr = self.array_atom(a)?;
                self.tape_push_array(&arr, elem)?;
            }
            StmtKind::Push(a) => {
                let vals = self.push_slots(a)?;
                self.tape_push(&vals)?;
            }
            StmtKind::TapeRewind(m) => {
                let m = self.scalar(m)?;
                self.tape_rewind(m)?;
            }
            StmtKind::For { n, index, reverse, body } => self.for_(n, *index, *reverse, body)?,
            StmtKind::If { cond, then_branch, else_branch } => {
                let c = self.scalar(cond)?;
                self.if_else(c, &mut |l| l.stmts(&then_branch.stmts), &mut |l| l.stmts(&else_branch.stmts))?;
            }
        }
        Ok(())
    }

    /// The statement `stmts[i]`, `acc[indices] += value`, and the adds
    /// right after it into the same element (`ct[i] += x; ct[i] += y`, the
    /// two points of a jammed loop): at most one load, the adds in their
    /// order, one store, the bits of the statements one by one. Returns how many
    /// statements it lowered.
    fn acc_add_run(&mut self, acc: VarId, indices: &[Atom], stmts: &[Stmt], i: usize) -> Result<usize> {
        let values: Vec<Atom> = stmts[i..]
            .iter()
            .map_while(|s| match &s.kind {
                StmtKind::AccAdd { acc: a, indices: ix, value } if *a == acc && ix == indices => Some(*value),
                _ => None,
            })
            .collect();
        let scalar = !indices.is_empty() && values.iter().all(|v| !self.f.atom_ty(v).is_array());
        if !scalar || values.len() < 2 {
            self.stmt(&stmts[i])?;
            return Ok(1);
        }
        let run = &stmts[i..i + values.len()];
        if run[0].loc.line != 0 {
            self.loc = run[0].loc;
        }
        self.clock = self.clock.wrapping_add(values.len() as u32);
        let a = self.array(acc)?;
        if indices.len() != a.dims.len() {
            return Err(self.malformed("several adds into a row of an accumulator at once"));
        }
        let name = self.var_name(acc);
        self.acc_add_elem(acc, &a, indices, &values, &name)?;
        // What follows reports the location it would after the statements
        // one by one: the last one given.
        if let Some(s) = run.iter().rev().find(|s| s.loc.line != 0) {
            self.loc = s.loc;
        }
        Ok(values.len())
    }

    /// `acc[indices] += value`: an element, a row, or the whole
    /// accumulator (added element by element).
    fn acc_add(&mut self, acc: VarId, indices: &[Atom], value: &Atom) -> Result<()> {
        let a = self.array(acc)?;
        let name = self.var_name(acc);
        let rank = a.dims.len();
        if indices.is_empty() {
            // The whole accumulator.
            return self.acc_add_rows(a.ptr, &a.dims, value, &name);
        }
        if indices.len() == rank {
            self.acc_add_elem(acc, &a, indices, std::slice::from_ref(value), &name)
        } else {
            let off = self.checked_offset(&a, indices, &name)?;
            let rest = a.dims[indices.len()..].to_vec();
            let stride = self.product(&rest);
            let eoff = self.b.int(IntOp::Mul, off, stride);
            let base = self.b.elem_addr(a.ptr, eoff, Scalar::F64);
            self.acc_add_rows(base, &rest, value, &name)
        }
    }

    /// `acc[indices] += v` for each of `values`, an element of `a`.
    fn acc_add_elem(
        &mut self,
        acc: VarId,
        a: &Arr<E::Value>,
        indices: &[Atom],
        values: &[Atom],
        name: &str,
    ) -> Result<()> {
        let addr = self.element_address(acc, a, indices, Scalar::F64, name)?;
        // The first write of an accumulator that was not zero-filled:
        // `0.0 + v`, the bits of adding into a zero (the adds after it
        // in the iteration add to what it stored).
        let scope = self.data_scope(acc);
        self.b.set_data_scope(scope);
        let mut sum =
            if self.take_first_write(acc) { self.b.fconst(0.0) } else { self.b.load(Ty::F64, addr, 0, Mem::Data) };
        for value in values {
            let v = self.scalar(value)?;
            sum = self.b.float(FloatOp::Add, sum, v);
        }
        self.b.store(Ty::F64, sum, addr, 0, Mem::Data);
        self.b.set_data_scope(None);
        Ok(())
    }

    /// True when this add into `acc` is its first write in the loop body
    /// being lowered (`writing_first`): it stores `0.0 + v`, and
    /// the adds after it in the iteration add to what it stored.
    pub(super) fn take_first_write(&mut self, acc: VarId) -> bool {
        match self.writing_first.iter().position(|a| *a == Some(acc)) {
            Some(p) => {
                self.writing_first[p] = None;
                true
            }
            None => false,
        }
    }

    /// `acc[indices] = 0` (an element or a row; indices checked).
    fn acc_zero(&mut self, acc: VarId, indices: &[Atom]) -> Result<()> {
        let a = self.array(acc)?;
        let name = self.var_name(acc);
        let off = self.checked_offset(&a, indices, &name)?;
        let rest = a.dims[indices.len()..].to_vec();
        let zero = self.b.fconst(0.0);
        if rest.is_empty() {
            self.store_elem(a.ptr, off, Scalar::F64, zero);
            return Ok(());
        }
        let stride = self.product(&rest);
        let eoff = self.b.int(IntOp::Mul, off, stride);
        let base = self.b.elem_addr(a.ptr, eoff, Scalar::F64);
        let start = self.iconst(0);
        self.counted_loop(start, stride, false, &mut |l, i| {
            l.store_elem(base, i, Scalar::F64, zero);
            Ok(())
        })
    }

    /// `dst[..] += value` elementwise, for an array `value` of extents `dims`.
    fn acc_add_rows(&mut self, dst: E::Value, dims: &[E::Value], value: &Atom, name: &str) -> Result<()> {
        let v = self.array_atom(value)?;
        if v.dims.len() != dims.len() {
            return Err(self.malformed("accumulating an array of the wrong rank"));
        }
        for (axis, (&d, &e)) in v.dims.iter().zip(dims).enumerate() {
            let ok = self.b.icmp(IntCC::Eq, d, e);
            self.check(ok, Fault::AccumulationMismatch { target: name, axis }, &[d, e])?;
        }
        let count = self.product(dims);
        let zero = self.iconst(0);
        let src = v.ptr;
        self.counted_loop(zero, count, false, &mut |l, i| {
            let x = l.load_elem(src, i, Scalar::F64);
            let y = l.load_elem(dst, i, Scalar::F64);
            let s = l.b.float(FloatOp::Add, y, x);
            l.store_elem(dst, i, Scalar::F64, s);
            Ok(())
        })
    }

    fn for_(&mut self, n: &Atom, index: VarId, reverse: bool, body: &Block) -> Result<()> {
        let n = self.scalar(n)?;
        if let Some(nest) = self.row_blocked_nest(index, body) {
            if let Some((lo, hi)) = self.chunk_range.take() {
                return self.rows_by_blocks(lo, hi, n, index, &nest);
            }
        }
        let keep = self.blocks.survivors(self.f, body).filter(|_| self.blocks.allocates(body));
        let mark = if keep.is_some() { Some(self.arena_mark()) } else { None };
        let zero = self.iconst(0);
        let releasing = u32::from(keep.is_some());
        self.releasing += releasing;
        // Accumulators this loop writes first (`first_write.rs`).
        let outer = self.writing_first.len();
        let first = self.first_writes.written_in(body).to_vec();
        for w in &first {
            if w.tail {
                self.zero_tail(w.acc, n)?;
            }
        }
        self.writing_first.extend(first.iter().map(|w| Some(w.acc)));
        // A chunk of a parallel loop of effects: iterations `lo..hi` of
        // `0..n`, `0 <= lo <= hi <= n` (`crate::parallel`).
        let range = self.chunk_range.take();
        if range.is_some() {
            let first = std::mem::take(&mut self.chunk_first_writes);
            self.writing_first.extend(first.into_iter().map(Some));
        }
        let (start, end) = range.unwrap_or((zero, n));
        // A body that only loads, computes and adds along the index runs
        // on pairs of iterations where the backend has no vectoriser
        // (`pairs.rs`).
        let plan =
            if self.b.f64_pairs() && !reverse && keep.is_none() && body.stmts.len() <= super::pairs::PAIRED_MAX_STMTS {
                self.pair_plan(n, index, body, true)?
            } else {
                None
            };
        let lowered = match plan {
            Some(plan) => self.paired_effects((start, end), n, index, body, &plan),
            None => self.hoist_loop_rows(index, body, |l| {
                l.counted_loop_within(start, end, n, reverse, &mut |l, i| {
                    l.def(index, Val::S(i))?;
                    l.stmts(&body.stmts)?;
                    if let (Some(m), Some(keep)) = (&mark, &keep) {
                        l.arena_release_keeping(m, keep)?;
                    }
                    Ok(())
                })
            }),
        };
        self.writing_first.truncate(outer);
        lowered?;
        self.releasing -= releasing;
        Ok(())
    }
}

/// The bytes of the rows of one block of [`Lower::rows_by_blocks`]: the
/// block's rows of the arrays its body reads and adds into stay in a
/// core's second-level cache (256 KiB to 2 MiB on current x86-64 and
/// AArch64 cores) while the points stream through.
const ROW_BLOCK_BYTES: i64 = 256 << 10;

/// The inner loop of a chunk of a parallel loop of effects lowered by
/// blocks of rows ([`Lower::rows_by_blocks`]), and the rows its body
/// indexes.
struct RowBlockedNest<'b> {
    /// Bindings of numbers before the inner loop that do not depend on
    /// `k` (the counts of a loop run several iterations at a time:
    /// `arrayad_ir::passes::jam`), lowered once before the blocks.
    before: &'b [Stmt],
    /// The inner loop `for j < points do { body }`, `j` being `point`.
    points: &'b Atom,
    point: VarId,
    reverse: bool,
    body: &'b Block,
    /// The arrays bound outside `body` that it reads or adds into at
    /// `[k, ..]` (axis 1: a row is their extents from axis 1 on) or at
    /// `[j, k, ..]` (axis 2), each once.
    rows: Vec<(VarId, usize)>,
    /// Bindings as `before` after the inner loop (of numbers it does not
    /// change), lowered with them.
    after: &'b [Stmt],
    /// Then at most one branch on a number they bind (the iterations a
    /// jammed loop leaves over), whose branches run for each `k` of the
    /// block.
    last: Option<(&'b Atom, &'b Block, &'b Block)>,
}

impl<E: Emitter> Lower<'_, E> {
    /// The inner loop `for j < points do { b }` of the loop `for k < n do
    /// body` (`k` is `index`) when that loop is a chunk of a parallel loop
    /// of effects to lower by blocks of rows ([`Lower::rows_by_blocks`]):
    /// its body is the inner loop alone, whose count is not `k`, neither
    /// writes an accumulator first (`first_write.rs`), and `b` reads an
    /// array bound outside it at `[j, k, ..]` (the residuals an
    /// interchanged backward nest reads).
    fn row_blocked_nest<'b>(&self, index: VarId, body: &'b Block) -> Option<RowBlockedNest<'b>> {
        if self.chunk_range.is_none() || !self.chunk_first_writes.is_empty() {
            return None;
        }
        let at = body.stmts.iter().position(|s| matches!(s.kind, StmtKind::For { .. }))?;
        let (before, rest) = body.stmts.split_at(at);
        let (inner, after) = rest.split_first()?;
        let (after, last) = match after.split_last() {
            Some((Stmt { kind: StmtKind::If { cond, then_branch, else_branch }, .. }, lets)) => {
                (lets, Some((cond, then_branch, else_branch)))
            }
            _ => (after, None),
        };
        // Numbers computed from what neither `k` nor the inner loop
        // changes (no mutable variable).
        let invariant = |s: &Stmt| match &s.kind {
            StmtKind::Let {
                vars,
                expr: expr @ (Expr::Atom(_) | Expr::Unary(..) | Expr::Binary(..) | Expr::Dim { .. }),
            } => {
                let mut fixed = true;
                arrayad_ir::visit::expr_uses(expr, &mut |u| fixed &= u != index && !self.f.var(u).mutable);
                fixed && vars.iter().all(|v| self.f.ty(*v).is_scalar() && !self.f.var(*v).mutable)
            }
            _ => false,
        };
        if !before.iter().chain(after).all(invariant) || last.is_some_and(|(c, ..)| *c == Atom::Var(index)) {
            return None;
        }
        let StmtKind::For { n: points, index: point, reverse, body: b } = &inner.kind else { return None };
        if *points == Atom::Var(index)
            || !self.first_writes.written_in(body).is_empty()
            || !self.first_writes.written_in(b).is_empty()
        {
            return None;
        }
        let mut inside = HashSet::new();
        block_binds(b, &mut |v| {
            inside.insert(v);
        });
        let mut rows: Vec<(VarId, usize)> = Vec::new();
        let mut read_by_point = false;
        for_each_block(b, &mut |blk| {
            for st in &blk.stmts {
                let (array, indices, read) = match &st.kind {
                    StmtKind::Let { expr: Expr::Index { array, indices }, .. } => (*array, indices, true),
                    StmtKind::AccAdd { acc, indices, .. } => (*acc, indices, false),
                    _ => continue,
                };
                let axis = match indices.as_slice() {
                    [Atom::Var(k), ..] if *k == index => 1,
                    // (A point of a jammed loop is a number computed from
                    // its index.)
                    [Atom::Var(j), Atom::Var(k), ..] if (*j == *point || inside.contains(j)) && *k == index => 2,
                    _ => continue,
                };
                if inside.contains(&array) {
                    continue;
                }
                read_by_point |= read && axis == 2;
                if !rows.contains(&(array, axis)) {
                    rows.push((array, axis));
                }
            }
        });
        read_by_point.then_some(RowBlockedNest {
            before,
            points,
            point: *point,
            reverse: *reverse,
            body: b,
            rows,
            after,
            last,
        })
    }

    /// The chunk `lo..hi` of a parallel loop of effects
    /// `for k < n do { for j < points do { b } }` (`crate::parallel`) in
    /// blocks of rows, the points outer within a block:
    /// `for each block K of lo..hi do { for j < points do { for k in K do
    /// { b } } }`.
    ///
    /// The interchanged backward nests of comprehensions
    /// (`arrayad_ir::passes::interchange`) have this form: `b` adds into
    /// the rows `k` of accumulators and reads residuals stacked by point,
    /// `r[j, k, ..]`. One `k` at a time they read those with a stride of a
    /// whole point's rows, a cache miss per `(j, k)`; a block of rows
    /// reads `r[j, K, ..]`, contiguous, and keeps the block's accumulator
    /// rows in cache while the points stream through. A block holds as
    /// many rows as fit in [`ROW_BLOCK_BYTES`] (at least one): the bytes
    /// of a row `k` of the arrays bound outside that `b` indexes by
    /// `[k, ..]` or `[j, k, ..]`, computed from their extents when the
    /// chunk runs.
    ///
    /// Legality: a parallel loop of effects runs its iterations in any
    /// order and at once (`Accumulators::effect_loop`: they cannot fail,
    /// add only into their own rows `k`, read nothing another adds into,
    /// and assign nothing outside themselves), so its iterations `k` may
    /// interleave; within one `k` the points run in their order, so every
    /// element receives the same additions in the same order, the same
    /// bits. `points` is bound outside the loop (the body is the inner
    /// loop alone, whose count is not `k`): the same for every `k`.
    fn rows_by_blocks(
        &mut self,
        lo: E::Value,
        hi: E::Value,
        n: E::Value,
        index: VarId,
        nest: &RowBlockedNest<'_>,
    ) -> Result<()> {
        let RowBlockedNest { point, reverse: rev_points, body: b, .. } = *nest;
        // The numbers bound before and after the inner loop, which do not
        // depend on `k` (nor on the loop between them), once.
        self.stmts(nest.before)?;
        self.stmts(nest.after)?;
        let points = self.scalar(nest.points)?;
        let last = nest.last.map(|(cond, ..)| self.scalar(cond)).transpose()?;
        let zero = self.iconst(0);
        let one = self.iconst(1);
        let row_bytes = self.row_bytes(&nest.rows)?;
        let budget = self.iconst(ROW_BLOCK_BYTES);
        let size = self.b.int(IntOp::SDiv, budget, row_bytes);
        let size = self.b.int(IntOp::SMax, size, one);
        // Accumulator rows smaller than a cache line, kept on the stack
        // while the block's points run (`private_rows.rs`).
        let empty = Block::default();
        let (then_b, else_b) = nest.last.map_or((&empty, &empty), |(_, t, e)| (t, e));
        let private = self.private_rows(index, &[b, then_b, else_b], (lo, hi, n))?;
        let size = if private.is_empty() {
            size
        } else {
            let cap = self.iconst(super::private_rows::PRIVATE_BLOCK_ROWS);
            self.b.int(IntOp::SMin, size, cap)
        };
        // ceil((hi - lo) / size), 0 <= lo <= hi.
        let rows = self.b.int(IntOp::Sub, hi, lo);
        let rows = self.b.int(IntOp::Add, rows, size);
        let rows = self.add_imm(rows, -1);
        let blocks = self.b.int(IntOp::SDiv, rows, size);
        // Each block of a body that allocates releases what it made, as
        // the loop over `k` would.
        let keeps: Vec<Option<Vec<VarId>>> = [b, then_b, else_b]
            .iter()
            .map(|blk| self.blocks.survivors(self.f, blk).filter(|_| self.blocks.allocates(blk)))
            .collect();
        let mark = if keeps.iter().any(Option::is_some) { Some(self.arena_mark()) } else { None };
        let releasing = u32::from(mark.is_some());
        self.releasing += releasing;
        // `for k in first..end do { blk }` (`k` bound anew by each such
        // loop: it is the index of up to three).
        let each_k = |l: &mut Self, first: E::Value, end: E::Value, blk: &Block, keep: &Option<Vec<VarId>>| {
            let lowered = l.counted_loop_within(first, end, n, false, &mut |l, k| {
                l.def(index, Val::S(k))?;
                l.stmts(&blk.stmts)?;
                if let (Some(m), Some(keep)) = (&mark, keep) {
                    l.arena_release_keeping(m, keep)?;
                }
                Ok(())
            });
            if let Some(slot) = l.vars.get_mut(index.index()) {
                *slot = None;
            }
            lowered
        };
        let lowered = self.counted_loop_within(zero, blocks, blocks, false, &mut |l, block| {
            let first = l.b.int(IntOp::Mul, block, size);
            let first = l.b.int(IntOp::Add, lo, first);
            let end = l.b.int(IntOp::Add, first, size);
            let end = l.b.int(IntOp::SMin, end, hi);
            let saved = l.keep_rows(&private, first, end)?;
            l.counted_loop_within(zero, points, points, rev_points, &mut |l, j| {
                l.def(point, Val::S(j))?;
                each_k(l, first, end, b, &keeps[0])
            })?;
            if let Some(c) = last {
                l.if_else(c, &mut |l| each_k(l, first, end, then_b, &keeps[1]), &mut |l| {
                    each_k(l, first, end, else_b, &keeps[2])
                })?;
            }
            l.give_back_rows(&private, saved, first, end)
        });
        self.releasing -= releasing;
        lowered
    }

    /// The bytes (at least 1) of a row of `rows` (arrays with the axis
    /// their rows start at, [`RowBlockedNest::rows`]): products of their
    /// extents (each extent clamped to 2^20, each product to 2^40: no
    /// overflow).
    fn row_bytes(&mut self, rows: &[(VarId, usize)]) -> Result<E::Value> {
        let (cap, dim_cap) = (self.iconst(1 << 40), self.iconst(1 << 20));
        let mut total = self.iconst(1);
        for &(array, axis) in rows {
            let a = self.array(array)?;
            let mut bytes = self.iconst(8);
            for d in a.dims.iter().skip(axis) {
                // (A row with an extent over 2^20 exceeds any block.)
                let d = self.b.int(IntOp::SMin, *d, dim_cap);
                bytes = self.b.int(IntOp::Mul, bytes, d);
                bytes = self.b.int(IntOp::SMin, bytes, cap);
            }
            total = self.b.int(IntOp::Add, total, bytes);
        }
        Ok(total)
    }

    /// Zero-fills `acc[clamp(from, 0, extent)..extent]` of the rank-1
    /// accumulator `acc`: the elements a loop of `from` iterations writing
    /// it first does not reach (`first_write.rs`).
    pub(super) fn zero_tail(&mut self, acc: VarId, from: E::Value) -> Result<()> {
        let a = self.array(acc)?;
        let extent = a.dims[0];
        let zero = self.iconst(0);
        let start = self.b.int(IntOp::SMax, from, zero);
        let start = self.b.int(IntOp::SMin, start, extent);
        let dst = self.b.elem_addr(a.ptr, start, Scalar::F64);
        let count = self.b.int(IntOp::Sub, extent, start);
        self.zero_f64s(dst, count)
    }
}

/// `Some(true)` for a push, `Some(false)` for a pop of one variable.
fn tape_kind(k: &StmtKind) -> Option<bool> {
    match k {
        StmtKind::Push(_) => Some(true),
        StmtKind::Let { vars, expr: arrayad_ir::Expr::Pop } if vars.len() == 1 => Some(false),
        _ => None,
    }
}
