//! Calls of other generated functions (`Expr::Call` of a definition kept as
//! a call: `arrayad_ir::passes::inline::KeptCalls`).
//!
//! The call packs the arguments into a stack buffer of 8-byte slots (a
//! scalar one slot, an array its data pointer then its extents: the
//! internal calling convention of the crate docs), calls the callee with
//! the caller's context, and unpacks the results from a second buffer. The
//! callee allocates its results in the caller's arena, as any allocating
//! statement does (`analysis.rs` counts a call as one). A failing callee
//! has recorded its message in the context: the caller returns its status
//! unchanged. Straight-line code calling straight-line code checks the
//! statuses of its calls once, at its end
//! ([`calls_straight_line_code_only`]).
//!
//! The destination table of the context (`ctx->dest`) belongs to the
//! outermost call: a function that makes calls takes it at its entry
//! (`Lower::take_destinations`) and clears the context's, so that its
//! callees do not build their results in the caller's output buffers. It
//! also checks the stack there (`Lower::check_stack_depth`), so that
//! chains of calls fail cleanly rather than overflow it. Every failed call
//! of a function branches to one cold block, which returns the status
//! (`Lower::finish_calls`): a call costs one block, not two.

use super::emit::{Emitter, IntCC, IntOp, Mem, Ty};
use super::{Lower, Result, Val};
use arrayad_ir::{Atom, Fault, FuncId, VarId};
use arrayad_runtime::{offsets, Callee, RuntimeFn};

/// Emits a guard for a function `f` whose compiled code needs a stack
/// frame of `frame` bytes, and `slack` more for its call: the guard has
/// `f`'s signature and calls the compiled code (`call_body`, given the
/// guard's own parameters) only when that fits above the context's stack
/// limit
/// ([`arrayad_runtime::Ctx::stack_limit`]); otherwise it fails with
/// [`Fault::FrameTooLarge`], located at `f`. Cranelift's backend
/// (`clif::define_functions`) compiles a function first and puts a guard
/// in front of it when its frame turns out large (a function of very many statements whose values live in
/// stack slots): its prologue would write below the stack otherwise, and
/// no check inside the function can run before its prologue.
pub(crate) fn lower_frame_guard<E: Emitter>(
    b: &mut E,
    file: &str,
    f: &arrayad_ir::Function,
    frame: u64,
    slack: u64,
    call_body: impl FnOnce(&mut E, [E::Value; 3]) -> Result<E::Value>,
) -> Result<()> {
    let params @ [ctx, _, _] = b.params();
    let too_large = || crate::error::CodegenError::malformed(&f.name, "a stack frame beyond 2^62 bytes");
    let bytes = |n: u64| i64::try_from(n).ok().filter(|n| *n < 1 << 62).ok_or_else(too_large);
    let (frame, need) = (bytes(frame)?, bytes(frame.saturating_add(slack))?);
    // The guard's own frame: the address of a slot of it.
    let here = b.stack_slot(8);
    let null = b.iconst(Ty::Ptr, 0);
    let here = b.ptr_diff(here, null);
    // Unchecked (a limit of 0) passes: `here` is above `need`.
    let limit = b.load(Ty::I64, ctx, offsets::STACK_LIMIT, Mem::Ctx);
    let need = b.iconst(Ty::I64, need);
    let floor = b.int(IntOp::Add, limit, need);
    let fits = b.icmp(IntCC::Uge, here, floor);
    let (run, fail) = (b.create_block(), b.create_block());
    b.brif(fits, run, fail);
    b.seal(run);
    b.seal(fail);
    b.switch_to(run);
    let status = call_body(b, params)?;
    b.ret(status);
    b.switch_to(fail);
    b.set_cold(fail);
    let (frame, zero) = (b.iconst(Ty::I64, frame), b.iconst(Ty::I64, 0));
    super::raise_at(
        b,
        ctx,
        file,
        f.loc,
        Fault::FrameTooLarge { function: crate::parallel::source_name(&f.name) },
        [frame, zero, zero],
    )
}

/// The most argument slots and result slots of a call in `f` (`None`
/// without calls): every call of a function shares one buffer of each
/// (the callee reads its arguments at entry, the caller its results right
/// after the call), so a function of many calls has a small frame.
pub(super) fn call_buffer_slots(f: &arrayad_ir::Function) -> Option<(usize, usize)> {
    let mut most: Option<(usize, usize)> = None;
    arrayad_ir::visit::for_each_block(&f.body, &mut |b| {
        for s in &b.stmts {
            if let arrayad_ir::StmtKind::Let { vars, expr: arrayad_ir::Expr::Call { args, .. } } = &s.kind {
                let a: usize = args.iter().map(|a| super::slots(f.atom_ty(a))).sum();
                let r: usize = vars.iter().map(|v| super::slots(f.ty(*v))).sum();
                let (ma, mr) = most.unwrap_or((0, 0));
                most = Some((ma.max(a), mr.max(r)));
            }
        }
    });
    most
}

/// True when every call at the top level of `f` goes to straight-line
/// scalar code ([`crate::Callees::is_straight_line`]).
///
/// In a function that is itself straight-line scalar code
/// ([`arrayad_ir::Function::is_straight_line_scalar`]), the statuses of
/// the calls are then checked once, after its last statement
/// (`Lower::check_call_status`), instead of after each call, which costs a
/// branch and a block per call: in a function of many small calls, such
/// as the derivatives of a library of helpers, a sixth of the compile time.
/// After a failed call, `f` runs on with the results the call left unset:
/// scalar arithmetic, and calls that return after a bounded number of
/// statements whatever their arguments, and touch no array. Nothing of
/// that reaches the caller: `f` returns the failure at its end. An error
/// the rest of `f` meets does not replace the first one (the context keeps
/// the first error of a call: `arrayad_fail`), and a callee that itself
/// makes calls returns at its entry (once an error is recorded, the
/// context's stack limit is beyond reach), so the work after a failure is
/// at most that of `f`'s own statements and of its calls of leaves.
pub(super) fn calls_straight_line_code_only(f: &arrayad_ir::Function, callees: &crate::Callees) -> bool {
    f.body.stmts.iter().all(|s| match &s.kind {
        arrayad_ir::StmtKind::Let { expr: arrayad_ir::Expr::Call { func, .. }, .. } => callees.is_straight_line(*func),
        _ => true,
    })
}

impl<E: Emitter> Lower<'_, E> {
    /// `vars = func(args)`: the values of `vars`.
    pub(super) fn call_def(&mut self, func: FuncId, vars: &[VarId], args: &[Atom]) -> Result<Vec<Val<E::Value>>> {
        let arg_slots: usize = args.iter().map(|a| super::slots(self.f.atom_ty(a))).sum();
        let mut result_types = Vec::with_capacity(vars.len());
        for v in vars {
            result_types.push(self.var_ty(*v)?);
        }
        let result_slots: usize = result_types.iter().map(|t| super::slots(*t)).sum();
        let (argbuf, resbuf) = match self.call_buffers {
            Some((a, r, most_args, most_results)) if arg_slots <= most_args && result_slots <= most_results => (a, r),
            _ => return Err(self.malformed("a call larger than the function's call buffers")),
        };
        self.pack(argbuf, args, Mem::Stack)?;
        let ctx = self.ctx;
        let tape = if self.rewinds_tape { Some(self.tape_above_its_end()) } else { None };
        let parallel = self.callees.parallel_map(func).cloned();
        // The rows of a parallel map: its count (`args[1]`, as the
        // comprehension's), or for a parallel sum, the count of its blocks
        // (the count itself when negative: the chunk function fails on it).
        let rows = match (&parallel, args.get(1)) {
            (Some(map), Some(n)) => {
                let n = self.scalar(n)?;
                if map.blocks {
                    let blocks = self.block_count(n);
                    self.b.store(Ty::I64, blocks, argbuf, 8, Mem::Stack);
                    Some(blocks)
                } else {
                    Some(n)
                }
            }
            _ => None,
        };
        // The accumulators a parallel loop of effects writes first: the
        // elements from its count on, which it does not reach, are
        // zero-filled here (`first_write.rs`).
        if let (Some(_), Some(n)) = (&parallel, args.get(1)) {
            let tails: Vec<VarId> =
                self.first_writes.written_by_call(func).iter().filter(|w| w.tail).map(|w| w.acc).collect();
            if !tails.is_empty() {
                let n = self.scalar(n)?;
                for acc in tails {
                    self.zero_tail(acc, n)?;
                }
            }
        }
        // The extents of the rows of each array of a parallel map, as the
        // function has them at the call.
        let mut row_dims: Vec<Vec<E::Value>> = Vec::new();
        let status = match &parallel {
            // A comprehension split out for parallel execution: through
            // the runtime, which runs its chunk function on the pool or on
            // this thread (`crate::parallel`).
            Some(map) => {
                // The arrays it binds that are results of this function:
                // the caller's buffers for them, if any, are the map's (a
                // table of their entries, entry k for array k).
                let single = self.dest_next.take();
                let rows_dest = std::mem::take(&mut self.dest_rows);
                let results = if map.rows.len() == 1 { vec![single] } else { rows_dest };
                let dest = match self.dest_table {
                    Some(table) if results.iter().any(Option::is_some) => {
                        self.dest_entries(table, &results)?;
                        true
                    }
                    _ => false,
                };
                let chunk = self.b.function_address(func)?;
                let nslots = self.iconst(i64::try_from(arg_slots).map_err(|_| self.malformed("too many arguments"))?);
                for dims in &map.rows {
                    let dims = dims.iter().map(|d| self.static_dim(d)).collect::<Result<Vec<_>>>()?;
                    row_dims.push(dims);
                }
                let layout = self.map_layout(&result_types, &row_dims)?;
                let weight = self.iconst(map.weight);
                let outputs =
                    self.iconst(i64::try_from(map.rows.len()).map_err(|_| self.malformed("a map of too many arrays"))?);
                let args = [ctx, chunk, argbuf, nslots, resbuf, layout, outputs, weight];
                let status = self.b.call(Callee::Runtime(RuntimeFn::ParallelMap), &args)?;
                if dest {
                    let null = self.b.iconst(Ty::Ptr, 0);
                    self.b.store(Ty::Ptr, null, ctx, offsets::DEST, Mem::Ctx);
                }
                status
            }
            None => self.b.call_function(func, [ctx, argbuf, resbuf])?,
        };
        if self.defers_call_status {
            // A failed call has recorded its error in the context, which
            // `check_call_status` reads.
            self.deferred_calls = true;
            if let Some(saved) = tape {
                self.tape_restore(saved);
            }
            return Ok(self.unpack(resbuf, &result_types, Mem::Stack));
        }
        let zero = self.b.iconst(Ty::I32, 0);
        let ok = self.b.icmp(IntCC::Eq, status, zero);
        let (failed, failed_status) = match self.call_failed {
            Some(f) => f,
            None => {
                let block = self.b.create_block();
                self.b.set_cold(block);
                let var = self.b.declare_var(Ty::I32);
                *self.call_failed.insert((block, var))
            }
        };
        self.b.def_var(failed_status, status);
        let cont = self.b.create_block();
        self.b.brif(ok, cont, failed);
        self.b.seal(cont);
        self.b.switch_to(cont);
        if let Some(saved) = tape {
            self.tape_restore(saved);
        }
        let mut out = self.unpack(resbuf, &result_types, Mem::Stack);
        // Later accesses keep the fact of a parallel map's rows, and the
        // extents of array rows are the static ones (the runtime returns
        // only the pointer and the count of each array of a map run on the
        // pool).
        if let Some(n) = rows {
            for (val, dims) in out.iter_mut().zip(row_dims) {
                if let Val::A(a) = val {
                    a.dims = std::iter::once(n).chain(dims).collect();
                }
            }
        }
        Ok(out)
    }

    /// The layout of the arrays of a parallel map for the runtime
    /// (`arrayad_parallel_map`), on the stack: per array, of type
    /// `types[k]` and rows of extents `row_dims[k]`,
    /// [`arrayad_runtime::PMAP_LAYOUT_WORDS`] words: its first slot in
    /// the chunk function's results, the rank of its rows, their extents.
    /// A null pointer for a loop of effects.
    fn map_layout(&mut self, types: &[arrayad_ir::Type], row_dims: &[Vec<E::Value>]) -> Result<E::Value> {
        if row_dims.is_empty() {
            return Ok(self.b.iconst(Ty::Ptr, 0));
        }
        let words = arrayad_runtime::PMAP_LAYOUT_WORDS;
        let too_many = || "a parallel map of too many arrays";
        let bytes = u32::try_from(8 * words * row_dims.len()).map_err(|_| self.malformed(too_many()))?;
        let layout = self.b.stack_slot(bytes);
        let mut slot = 0;
        for (k, (t, dims)) in types.iter().zip(row_dims).enumerate() {
            let at = |j: usize| i32::try_from(8 * (words * k + j)).ok();
            if dims.len() + 2 > words || dims.len() + 1 != usize::from(t.rank) {
                return Err(self.malformed("a parallel map's rows of another rank than its array's"));
            }
            let first = self.iconst(i64::try_from(slot).map_err(|_| self.malformed(too_many()))?);
            let rank = self.iconst(dims.len() as i64);
            self.b.store(Ty::I64, first, layout, at(0).ok_or_else(|| self.malformed(too_many()))?, Mem::Stack);
            self.b.store(Ty::I64, rank, layout, at(1).ok_or_else(|| self.malformed(too_many()))?, Mem::Stack);
            for (j, d) in dims.iter().enumerate() {
                self.b.store(Ty::I64, *d, layout, at(2 + j).ok_or_else(|| self.malformed(too_many()))?, Mem::Stack);
            }
            slot += super::slots(*t);
        }
        Ok(layout)
    }

    /// Points the context's destination table at a new one whose entry
    /// `k` is entry `results[k]` of this function's `table` (or none),
    /// for a parallel map: the map computes each of its arrays in its
    /// caller's buffer when that is offered (a null `table` offers none;
    /// an entry of none is a null pointer, which the map and its chunk
    /// function take as no buffer).
    fn dest_entries(&mut self, table: E::Value, results: &[Option<usize>]) -> Result<()> {
        let offset = |k: usize| i32::try_from(16 * k).ok();
        let bytes = u32::try_from(16 * results.len()).map_err(|_| self.malformed("too many results"))?;
        // (entry of the new table, entry of this function's) per array
        // that has one.
        let mut copies = Vec::new();
        for (k, r) in results.iter().enumerate() {
            let at = offset(k).ok_or_else(|| self.malformed("too many results"))?;
            if let Some(r) = r {
                copies.push((at, offset(*r).ok_or_else(|| self.malformed("too many results"))?));
            }
        }
        let entries = self.b.stack_slot(bytes);
        let null = self.b.iconst(Ty::Ptr, 0);
        let zero = self.iconst(0);
        for k in 0..results.len() {
            let at = offset(k).ok_or_else(|| self.malformed("too many results"))?;
            self.b.store(Ty::Ptr, null, entries, at, Mem::Stack);
            self.b.store(Ty::I64, zero, entries, at + 8, Mem::Stack);
        }
        let offered = self.b.icmp(IntCC::Ne, table, null);
        self.if_else(
            offered,
            &mut |l| {
                for &(at, from) in &copies {
                    let p = l.b.load(Ty::Ptr, table, from, Mem::Slots);
                    let size = l.b.load(Ty::I64, table, from + 8, Mem::Slots);
                    l.b.store(Ty::Ptr, p, entries, at, Mem::Stack);
                    l.b.store(Ty::I64, size, entries, at + 8, Mem::Stack);
                }
                Ok(())
            },
            &mut |_| Ok(()),
        )?;
        let ctx = self.ctx;
        self.b.store(Ty::Ptr, entries, ctx, offsets::DEST, Mem::Ctx);
        Ok(())
    }

    /// The blocks of a parallel sum of `n` iterations: `(n - 1) /
    /// SUM_BLOCK + 1` for `n > 0` (no overflow), `n` itself otherwise.
    fn block_count(&mut self, n: E::Value) -> E::Value {
        use arrayad_ir::interp::ops::SUM_BLOCK;
        let last = self.add_imm(n, -1);
        let shift = self.iconst(SUM_BLOCK.trailing_zeros() as i64);
        let count = self.b.int(IntOp::SShr, last, shift);
        let count = self.add_imm(count, 1);
        let positive = self.icmp_imm(IntCC::Sgt, n, 0);
        self.b.select(positive, count, n)
    }

    /// Fails with [`Fault::CallsTooDeep`] when the frame of this function,
    /// which calls kept definitions (at `frame`, an address in it), lies
    /// below the context's stack limit: each kept call is a native frame,
    /// and chains of them may be as deep as the program's definitions, so
    /// the stack is checked rather than overflowed. Whoever calls generated
    /// code sets the limit 64 KiB above the bottom of the thread's stack
    /// when it is known, else [`arrayad_runtime::CALL_STACK`] bytes below
    /// its own frame (`arrayad_set_stack_limit`: the JIT's calls through
    /// `arrayad_runtime::OwnedCtx::set_stack_limit_here`, the C wrappers'
    /// `begin()`, the C runtime's `invoke`); 0 checks nothing. Once per
    /// function, at its entry: a function without kept calls adds one
    /// frame, bounded by the backend (a larger one has a guard,
    /// [`lower_frame_guard`]).
    pub(super) fn check_stack_depth(&mut self, frame: E::Value) -> Result<()> {
        let ctx = self.ctx;
        let limit = self.b.load(Ty::I64, ctx, offsets::STACK_LIMIT, Mem::Ctx);
        let null = self.b.iconst(Ty::Ptr, 0);
        let frame = self.b.ptr_diff(frame, null);
        let within = self.b.icmp(IntCC::Uge, frame, limit);
        let name = crate::parallel::source_name(&self.f.name).to_string();
        self.check(within, Fault::CallsTooDeep { function: &name }, &[])
    }

    /// Takes the destination table of the context for this function's own
    /// results ([`Lower::dest_table`]) and clears the context's, so that
    /// its callees build their results in the arena, not in the caller's
    /// output buffers: once, at the entry of a function that makes calls.
    pub(super) fn take_destinations(&mut self) {
        let ctx = self.ctx;
        self.dest_table = Some(self.b.load(Ty::Ptr, ctx, offsets::DEST, Mem::Ctx));
        let null = self.b.iconst(Ty::Ptr, 0);
        self.b.store(Ty::Ptr, null, ctx, offsets::DEST, Mem::Ctx);
    }

    /// Where the statuses of calls are checked once, after the last
    /// statement ([`calls_straight_line_code_only`]): from the context, whose error
    /// kind is 0 until a call fails, then that of the first error.
    pub(super) fn check_call_status(&mut self) {
        if !std::mem::take(&mut self.deferred_calls) {
            return;
        }
        let ctx = self.ctx;
        let recorded = self.b.load(Ty::I32, ctx, offsets::ERR_KIND, Mem::Ctx);
        let zero = self.b.iconst(Ty::I32, 0);
        let ok = self.b.icmp(IntCC::Eq, recorded, zero);
        let (cont, failed) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold(failed);
        self.b.brif(ok, cont, failed);
        self.b.seal(cont);
        self.b.seal(failed);
        self.b.switch_to(failed);
        self.b.ret(recorded);
        self.b.switch_to(cont);
    }

    /// Emits the block that every failed call branches to (returning the
    /// callee's status, which has recorded its message), once all of
    /// them are emitted: after the function's last statement.
    pub(super) fn finish_calls(&mut self) {
        if let Some((block, status)) = self.call_failed.take() {
            self.b.switch_to(block);
            self.b.seal(block);
            let s = self.b.use_var(status);
            self.b.ret(s);
        }
    }

    /// Moves the tape position to the end of the stored tape, for a call
    /// in a function that rewinds its tape ([`rewinds_tape`]): the callee's
    /// pushes then go above the slots the caller replays. The position
    /// and end as byte offsets from the base (the buffer may move while
    /// the callee grows it), for [`Self::tape_restore`].
    fn tape_above_its_end(&mut self) -> (E::Value, E::Value) {
        let ctx = self.ctx;
        let base = self.b.load(Ty::Ptr, ctx, offsets::TAPE_BASE, Mem::Ctx);
        let at = self.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
        let top = self.b.load(Ty::Ptr, ctx, offsets::TAPE_TOP, Mem::Ctx);
        self.b.store(Ty::Ptr, top, ctx, offsets::TAPE_PTR, Mem::Ctx);
        (self.b.ptr_diff(at, base), self.b.ptr_diff(top, base))
    }

    /// Puts back the tape position and end that
    /// [`Self::tape_above_its_end`] saved: the callee's slots above the
    /// end are discarded.
    fn tape_restore(&mut self, (at, top): (E::Value, E::Value)) {
        let ctx = self.ctx;
        let base = self.b.load(Ty::Ptr, ctx, offsets::TAPE_BASE, Mem::Ctx);
        let at = self.b.ptr_offset(base, at);
        let top = self.b.ptr_offset(base, top);
        self.b.store(Ty::Ptr, at, ctx, offsets::TAPE_PTR, Mem::Ctx);
        self.b.store(Ty::Ptr, top, ctx, offsets::TAPE_TOP, Mem::Ctx);
    }
}

/// True when `f` rewinds its tape (`StmtKind::TapeRewind`: the many-row
/// vjp replays its forward pass's tape for every cotangent row). A call
/// there must not push over the stored slots above the position, which
/// the next row pops again: `Lower::tape_above_its_end`.
pub(super) fn rewinds_tape(f: &arrayad_ir::Function) -> bool {
    let mut found = false;
    arrayad_ir::visit::for_each_block(&f.body, &mut |b| {
        found |= b.stmts.iter().any(|s| matches!(s.kind, arrayad_ir::StmtKind::TapeRewind(_)));
    });
    found
}
