//! Arena allocation (inline bump fast path), element copies and fills, the
//! tape (inline push/pop fast paths) and arena marks.

use super::emit::{Emitter, IntCC, IntOp, Mem, Ty};
use super::{elem_size, Arr, Lower, Result, Val};
use arrayad_ir::{Fault, Scalar, VarId};
use arrayad_runtime::{offsets, Callee, RuntimeFn, ARENA_ALIGN};

/// One value pushed on the tape ([`Lower::tape_push_items`]): fixed slots
/// (a scalar, or an array by reference), or a copy of an array of `Scalar`s.
pub(super) enum PushItem<V> {
    Slots(Vec<(Ty, V)>),
    Copy(Arr<V>, Scalar),
}

/// The arena state saved by [`Lower::arena_mark`]: pointer, end, chunk.
pub(crate) type Mark<V> = [V; 3];

/// A loop iteration that keeps arrays (`Lower::arena_release_keeping`)
/// releases its memory only when it allocated at least this much since the
/// mark: the garbage of smaller iterations waits for the next release, so
/// a loop's memory exceeds its live data by at most this many bytes plus
/// one iteration's allocation.
const RELEASE_MIN_BYTES: i64 = 32 << 10;

/// On a backend without a vectoriser, copies of at least this many
/// elements call `memmove`; shorter ones are a loop.
const COPY_CALL_MIN: i64 = 32;

/// The context fields of an arena mark, in [`Mark`] order.
const MARK_FIELDS: [i32; 3] = [offsets::ARENA_PTR, offsets::ARENA_END, offsets::ARENA_CUR];

impl<E: Emitter> Lower<'_, E> {
    /// The product of `dims` (unsigned) and whether it overflowed (a truth
    /// value, `None` when no multiplication happened).
    pub(super) fn checked_product(&mut self, dims: &[E::Value]) -> (E::Value, Option<E::Value>) {
        let mut acc: Option<E::Value> = None;
        let mut ovf: Option<E::Value> = None;
        for &d in dims {
            acc = Some(match acc {
                None => d,
                Some(a) => {
                    let (p, o) = self.b.umul_overflow(a, d);
                    ovf = Some(match ovf {
                        None => o,
                        Some(x) => self.b.int(IntOp::Or, x, o),
                    });
                    p
                }
            });
        }
        (acc.unwrap_or_else(|| self.iconst(1)), ovf)
    }

    /// The product of `dims` for an array that exists (no overflow possible).
    pub(super) fn product(&mut self, dims: &[E::Value]) -> E::Value {
        let mut acc: Option<E::Value> = None;
        for &d in dims {
            acc = Some(match acc {
                None => d,
                Some(a) => self.b.int(IntOp::Mul, a, d),
            });
        }
        acc.unwrap_or_else(|| self.iconst(1))
    }

    /// Allocates room for `count` elements of `elem` from the arena;
    /// `overflow` says the count itself already overflowed.
    pub(super) fn alloc_elems(
        &mut self,
        count: E::Value,
        elem: Scalar,
        overflow: Option<E::Value>,
    ) -> Result<E::Value> {
        let size = elem_size(elem);
        let (bytes, o) = if size == 1 {
            (count, None)
        } else {
            let s = self.iconst(size);
            let (b, o) = self.b.umul_overflow(count, s);
            (b, Some(o))
        };
        let bad = match (overflow, o) {
            (Some(a), Some(b)) => Some(self.b.int(IntOp::Or, a, b)),
            (a, b) => a.or(b),
        };
        let bytes = match bad {
            Some(bad) => {
                let huge = self.iconst(-1);
                self.b.select(bad, huge, bytes)
            }
            None => bytes,
        };
        self.alloc_bytes(bytes)
    }

    /// The memory of array result `result` (`size` bytes): the caller's
    /// buffer for it when the context offers one (`arrayad_ctx::dest`, set
    /// by the C ABI for outputs that overlap nothing, or, in a function
    /// that makes calls, the table it took at entry: [`Lower::dest_table`])
    /// of exactly that size,
    /// else the arena's ([`Self::alloc_bytes`]). The caller then finds the
    /// result already in place and copies nothing.
    fn alloc_result(&mut self, size: E::Value, result: usize) -> Result<E::Value> {
        let table = match self.dest_table {
            Some(table) => table,
            None => self.b.load(Ty::Ptr, self.ctx, offsets::DEST, Mem::Ctx),
        };
        let null = self.b.iconst(Ty::Ptr, 0);
        let offered = self.b.icmp(IntCC::Ne, table, null);
        let dest = self.b.declare_var(Ty::Ptr);
        let at = i32::try_from(16 * result).map_err(|_| self.malformed("too many results"))?;
        self.if_else(
            offered,
            &mut |l| {
                let p = l.b.load(Ty::Ptr, table, at, Mem::Slots);
                let bytes = l.b.load(Ty::I64, table, at + 8, Mem::Slots);
                let fits = l.b.icmp(IntCC::Eq, bytes, size);
                let null = l.b.iconst(Ty::Ptr, 0);
                let p = l.b.select(fits, p, null);
                l.b.def_var(dest, p);
                Ok(())
            },
            &mut |l| {
                let null = l.b.iconst(Ty::Ptr, 0);
                l.b.def_var(dest, null);
                Ok(())
            },
        )?;
        let p = self.b.use_var(dest);
        let taken = self.b.icmp(IntCC::Ne, p, null);
        let p = self.taken_or_arena(taken, p, size);
        self.b.release_var(dest);
        p
    }

    /// `p` when `taken`, else `size` bytes of the arena
    /// ([`Self::alloc_bytes`]).
    fn taken_or_arena(&mut self, taken: E::Value, p: E::Value, size: E::Value) -> Result<E::Value> {
        let out = self.b.declare_var(Ty::Ptr);
        self.if_else(
            taken,
            &mut |l| {
                l.b.def_var(out, p);
                Ok(())
            },
            &mut |l| {
                let q = l.alloc_bytes(size)?;
                l.b.def_var(out, q);
                Ok(())
            },
        )?;
        let p = self.b.use_var(out);
        self.b.release_var(out);
        Ok(p)
    }

    /// The memory of a row computed in place (`placed.rs`): `place`, when
    /// it is not null and holds exactly `size` bytes (`bytes`), else
    /// `size` bytes of the arena ([`Self::alloc_bytes`]).
    fn alloc_placed(&mut self, size: E::Value, place: E::Value, bytes: E::Value) -> Result<E::Value> {
        let null = self.b.iconst(Ty::Ptr, 0);
        let exists = self.b.icmp(IntCC::Ne, place, null);
        let fits = self.b.icmp(IntCC::Eq, size, bytes);
        let taken = self.b.int(IntOp::And, exists, fits);
        self.taken_or_arena(taken, place, size)
    }

    /// Allocates `size` bytes ([`ARENA_ALIGN`]-byte aligned) from the arena: inline bump
    /// when the current chunk has room, else `arrayad_alloc_slow`; returns
    /// from the function with OutOfMemory when that fails.
    pub(super) fn alloc_bytes(&mut self, size: E::Value) -> Result<E::Value> {
        if let Some(result) = self.dest_next.take() {
            self.place_next = None;
            return self.alloc_result(size, result);
        }
        if let Some((place, bytes)) = self.place_next.take() {
            return self.alloc_placed(size, place, bytes);
        }
        let ctx = self.ctx;
        let p = self.b.load(Ty::Ptr, ctx, offsets::ARENA_PTR, Mem::Ctx);
        let e = self.b.load(Ty::Ptr, ctx, offsets::ARENA_END, Mem::Ctx);
        let avail = self.b.ptr_diff(e, p);
        let fits = self.b.icmp(IntCC::Ule, size, avail);
        let res = self.b.declare_var(Ty::Ptr);
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let oom = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold(slow);
        self.b.set_cold(oom);
        self.b.brif(fits, fast, slow);
        self.b.seal(fast);
        self.b.seal(slow);

        self.b.switch_to(fast);
        let r = self.add_imm(size, ARENA_ALIGN - 1);
        let mask = self.iconst(!(ARENA_ALIGN - 1));
        let r = self.b.int(IntOp::And, r, mask);
        let np = self.b.ptr_offset(p, r);
        self.b.store(Ty::Ptr, np, ctx, offsets::ARENA_PTR, Mem::Ctx);
        self.b.def_var(res, p);
        self.b.jump(join);

        self.b.switch_to(slow);
        let q = self.b.call(Callee::Runtime(RuntimeFn::AllocSlow), &[ctx, size])?;
        self.b.def_var(res, q);
        let null = self.b.iconst(Ty::Ptr, 0);
        let failed_alloc = self.b.icmp(IntCC::Eq, q, null);
        self.b.brif(failed_alloc, oom, join);
        self.b.seal(oom);
        self.b.seal(join);

        // Replace the runtime's message by one with the location. A size of
        // 2^63 bytes or more (the overflow marker -1 among them) would print
        // as a negative number.
        self.b.switch_to(oom);
        let overflow = self.icmp_imm(IntCC::Slt, size, 0);
        let too_big = self.b.create_block();
        let failed = self.b.create_block();
        self.b.set_cold(too_big);
        self.b.set_cold(failed);
        self.b.brif(overflow, too_big, failed);
        self.b.seal(too_big);
        self.b.seal(failed);
        self.b.switch_to(too_big);
        self.raise(Fault::ArraySizeOverflow, &[])?;
        self.b.switch_to(failed);
        self.raise(Fault::AllocationFailed, &[size])?;

        self.b.switch_to(join);
        let r = self.b.use_var(res);
        self.b.release_var(res);
        Ok(r)
    }

    pub(super) fn load_elem(&mut self, base: E::Value, index: E::Value, elem: Scalar) -> E::Value {
        let a = self.b.elem_addr(base, index, elem);
        self.b.load(Ty::of(elem), a, 0, Mem::Data)
    }

    pub(super) fn store_elem(&mut self, base: E::Value, index: E::Value, elem: Scalar, v: E::Value) {
        let a = self.b.elem_addr(base, index, elem);
        self.b.store(Ty::of(elem), v, a, 0, Mem::Data);
    }

    /// Copies `count` elements of `elem` from `src` to `dst`: an inline
    /// loop, or `memmove` for a long copy on a backend without a
    /// vectoriser.
    pub(super) fn copy_elems(&mut self, dst: E::Value, src: E::Value, count: E::Value, elem: Scalar) -> Result<()> {
        let zero = self.iconst(0);
        // Copy 8-byte elements as integers: bit-exact for f64.
        let e = if elem == Scalar::F64 { Scalar::I64 } else { elem };
        let by_element = |l: &mut Self| {
            l.counted_loop(zero, count, false, &mut |l, i| {
                let v = l.load_elem(src, i, e);
                l.store_elem(dst, i, e, v);
                Ok(())
            })
        };
        match self.known.size(count) {
            // A backend with a vectoriser makes the loop move vectors.
            _ if !self.b.f64_pairs() => by_element(self),
            super::Size::Const(c) if c < COPY_CALL_MIN => by_element(self),
            _ => {
                // Long rows (a point's residuals) through the C library's
                // copy, which moves whole vectors, where the loop would
                // move one element per iteration ([`Emitter::f64_pairs`]:
                // no vectoriser).
                let long = self.icmp_imm(IntCC::Sge, count, COPY_CALL_MIN);
                self.if_else(
                    long,
                    &mut |l| {
                        let size = l.iconst(elem_size(elem));
                        let bytes = l.b.int(IntOp::Mul, count, size);
                        l.b.call(Callee::Runtime(RuntimeFn::Memmove), &[dst, src, bytes])?;
                        Ok(())
                    },
                    &mut |l| by_element(l),
                )
            }
        }
    }

    /// Zero-fills `count` `f64` elements at `dst`.
    pub(super) fn zero_f64s(&mut self, dst: E::Value, count: E::Value) -> Result<()> {
        let eight = self.iconst(8);
        let bytes = self.b.int(IntOp::Mul, count, eight);
        self.zero_bytes(dst, bytes)
    }

    /// Zero-fills `bytes` bytes at `dst` (`memset`).
    pub(super) fn zero_bytes(&mut self, dst: E::Value, bytes: E::Value) -> Result<()> {
        let z = self.b.iconst(Ty::I32, 0);
        self.b.call(Callee::Runtime(RuntimeFn::Memset), &[dst, z, bytes])?;
        Ok(())
    }

    /// Saves the arena state.
    pub(super) fn arena_mark(&mut self) -> Mark<E::Value> {
        let ctx = self.ctx;
        MARK_FIELDS.map(|off| self.b.load(Ty::Ptr, ctx, off, Mem::Ctx))
    }

    /// Restores a saved arena state: everything allocated since is free.
    pub(super) fn arena_release(&mut self, m: &Mark<E::Value>) {
        let ctx = self.ctx;
        for (v, off) in m.iter().zip(MARK_FIELDS) {
            self.b.store(Ty::Ptr, *v, ctx, off, Mem::Ctx);
        }
    }

    /// Restores a saved arena state, keeping the arrays that the IR
    /// variables `keep` hold now: those allocated since the mark move down
    /// to it (`arrayad_arena_keep`) and the variables are rebound to them.
    /// (When they cannot move, nothing is released this time.)
    pub(super) fn arena_release_keeping(&mut self, m: &Mark<E::Value>, keep: &[VarId]) -> Result<()> {
        if keep.is_empty() {
            self.arena_release(m);
            return Ok(());
        }
        let slot = self.b.stack_slot((16 * keep.len()) as u32);
        let mut arrays = Vec::with_capacity(keep.len());
        for (j, v) in keep.iter().enumerate() {
            let elem = self.var_ty(*v)?.elem;
            let a = self.array(*v)?;
            let count = self.product(&a.dims);
            let bytes = match elem_size(elem) {
                1 => count,
                size => {
                    let s = self.iconst(size);
                    self.b.int(IntOp::Mul, count, s)
                }
            };
            self.b.store(Ty::Ptr, a.ptr, slot, 16 * j as i32, Mem::Stack);
            self.b.store(Ty::I64, bytes, slot, 16 * j as i32 + 8, Mem::Stack);
            arrays.push(a);
        }
        // An iteration that allocated less than RELEASE_MIN_BYTES in the
        // mark's chunk leaves it for a later release (the call costs more
        // than the memory is worth): what it allocated is garbage by the
        // next release, which moves that iteration's survivors instead.
        let ctx = self.ctx;
        let cur_ptr = self.b.load(Ty::Ptr, ctx, offsets::ARENA_PTR, Mem::Ctx);
        let cur_chunk = self.b.load(Ty::Ptr, ctx, offsets::ARENA_CUR, Mem::Ctx);
        let same_chunk = self.b.icmp(IntCC::Eq, cur_chunk, m[2]);
        let used = self.b.ptr_diff(cur_ptr, m[0]);
        let all = self.iconst(i64::MAX);
        let counted = self.b.select(same_chunk, used, all);
        let release = self.icmp_imm(IntCC::Uge, counted, RELEASE_MIN_BYTES);
        let n = self.iconst(keep.len() as i64);
        let (m0, m2) = (m[0], m[2]);
        self.if_else(
            release,
            &mut |l| {
                l.b.call(Callee::Runtime(RuntimeFn::ArenaKeep), &[l.ctx, m0, m2, n, slot])?;
                Ok(())
            },
            &mut |_| Ok(()),
        )?;
        for (j, (v, a)) in keep.iter().zip(arrays).enumerate() {
            let ptr = self.b.load(Ty::Ptr, slot, 16 * j as i32, Mem::Stack);
            self.def(*v, Val::A(Arr { ptr, dims: a.dims }))?;
        }
        Ok(())
    }

    /// Pushes 8-byte slots (values of the given types) on the tape.
    pub(super) fn tape_push(&mut self, vals: &[(Ty, E::Value)]) -> Result<()> {
        let ctx = self.ctx;
        let k = vals.len() as i64;
        let tp = self.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
        let te = self.b.load(Ty::Ptr, ctx, offsets::TAPE_END, Mem::Ctx);
        let room = self.b.ptr_diff(te, tp);
        let fits = self.icmp_imm(IntCC::Uge, room, k * 8);
        let at = self.b.declare_var(Ty::Ptr);
        self.b.def_var(at, tp);
        let grow = self.b.create_block();
        let fail = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold(grow);
        self.b.set_cold(fail);
        self.b.brif(fits, join, grow);
        self.b.seal(grow);

        self.b.switch_to(grow);
        let kk = self.iconst(k);
        let st = self.b.call(Callee::Runtime(RuntimeFn::TapeGrow), &[ctx, kk])?;
        let tp2 = self.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
        self.b.def_var(at, tp2);
        let zero = self.b.iconst(Ty::I32, 0);
        let grow_failed = self.b.icmp(IntCC::Ne, st, zero);
        self.b.brif(grow_failed, fail, join);
        self.b.seal(fail);
        self.b.seal(join);

        self.b.switch_to(fail);
        self.raise(Fault::TapeFull, &[])?;

        self.b.switch_to(join);
        let at_var = at;
        let at = self.b.use_var(at_var);
        self.b.release_var(at_var);
        for (j, (t, v)) in vals.iter().enumerate() {
            self.b.store(*t, *v, at, 8 * j as i32, Mem::Tape);
        }
        let step = self.iconst(k * 8);
        let np = self.b.ptr_offset(at, step);
        self.b.store(Ty::Ptr, np, ctx, offsets::TAPE_PTR, Mem::Ctx);
        // A push discards the popped slots above it: the stored tape ends here.
        self.b.store(Ty::Ptr, np, ctx, offsets::TAPE_TOP, Mem::Ctx);
        Ok(())
    }

    /// The tape position as an `i64` slot count (`Expr::TapeMark`): an
    /// offset from the base, since the buffer moves when it grows.
    pub(super) fn tape_mark(&mut self) -> E::Value {
        let ctx = self.ctx;
        let tp = self.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
        let tb = self.b.load(Ty::Ptr, ctx, offsets::TAPE_BASE, Mem::Ctx);
        let used = self.b.ptr_diff(tp, tb);
        let three = self.iconst(3);
        self.b.int(IntOp::UShr, used, three)
    }

    /// Sets the tape position back to `mark` slots (`StmtKind::TapeRewind`).
    /// Pops never overwrite slots and the buffer never shrinks, so every
    /// slot below the end of the stored tape (`tape_top`) is intact; a mark
    /// beyond it (or negative) is an internal error, reported, never a crash.
    pub(super) fn tape_rewind(&mut self, mark: E::Value) -> Result<()> {
        let ctx = self.ctx;
        let tb = self.b.load(Ty::Ptr, ctx, offsets::TAPE_BASE, Mem::Ctx);
        let top = self.b.load(Ty::Ptr, ctx, offsets::TAPE_TOP, Mem::Ctx);
        let stored = self.b.ptr_diff(top, tb);
        let three = self.iconst(3);
        let stored = self.b.int(IntOp::UShr, stored, three);
        let ok = self.b.icmp(IntCC::Ule, mark, stored);
        self.check(ok, Fault::TapeRewindBeyondEnd, &[mark, stored])?;
        let off = self.b.int(IntOp::Shl, mark, three);
        let np = self.b.ptr_offset(tb, off);
        self.b.store(Ty::Ptr, np, ctx, offsets::TAPE_PTR, Mem::Ctx);
        Ok(())
    }

    /// Pushes the array `arr` of `elem`s on the tape (see
    /// [`Self::tape_push_items`]).
    pub(super) fn tape_push_array(&mut self, arr: &Arr<E::Value>, elem: Scalar) -> Result<()> {
        let item = self.array_push_item(arr, elem);
        self.tape_push_items(&[item])
    }

    /// How the array `arr` of `elem`s goes on the tape. Inside a loop body
    /// that releases its arena memory at the end of every iteration
    /// (`releasing`), a copy: its elements (padded to whole 8-byte slots),
    /// its extents and the tag 1, so that the memory of the iteration that
    /// computed it can be released and a loop's tape holds only what its
    /// backward pass reads. Elsewhere a reference (nothing moves or frees
    /// it before the backward pass): its pointer, its extents and the tag
    /// 0. [`Self::tape_pop_array`] reads the tag.
    pub(super) fn array_push_item(&mut self, arr: &Arr<E::Value>, elem: Scalar) -> PushItem<E::Value> {
        if self.releasing == 0 {
            let mut vals = vec![(Ty::Ptr, arr.ptr)];
            vals.extend(arr.dims.iter().map(|d| (Ty::I64, *d)));
            let tag = self.iconst(0);
            vals.push((Ty::I64, tag));
            PushItem::Slots(vals)
        } else {
            PushItem::Copy(arr.clone(), elem)
        }
    }

    /// Pushes `items` on the tape, in order, with one check of the room
    /// left (and one call to grow it when short).
    pub(super) fn tape_push_items(&mut self, items: &[PushItem<E::Value>]) -> Result<()> {
        if items.iter().all(|i| matches!(i, PushItem::Slots(_))) {
            let vals: Vec<(Ty, E::Value)> =
                items.iter().flat_map(|i| if let PushItem::Slots(v) = i { v.clone() } else { Vec::new() }).collect();
            return self.tape_push(&vals);
        }
        let ctx = self.ctx;
        let three = self.iconst(3);
        // The slots of every item: fixed ones, and the elements, extents
        // and tag of each copy.
        let fixed: i64 = items.iter().map(|i| if let PushItem::Slots(v) = i { v.len() as i64 } else { 0 }).sum();
        let mut total = self.iconst(fixed);
        let mut copies = Vec::new();
        for item in items {
            if let PushItem::Copy(arr, elem) = item {
                let (count, _) = self.checked_product(&arr.dims);
                let data_slots = self.data_slots(count, *elem);
                let extra = self.iconst(arr.dims.len() as i64 + 1);
                let slots = self.b.int(IntOp::Add, data_slots, extra);
                total = self.b.int(IntOp::Add, total, slots);
                copies.push((count, data_slots));
            }
        }
        let total_bytes = self.b.int(IntOp::Shl, total, three);
        let tp = self.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
        let te = self.b.load(Ty::Ptr, ctx, offsets::TAPE_END, Mem::Ctx);
        let room = self.b.ptr_diff(te, tp);
        let fits = self.b.icmp(IntCC::Uge, room, total_bytes);
        let at = self.b.declare_var(Ty::Ptr);
        self.b.def_var(at, tp);
        let grow = self.b.create_block();
        let fail = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold(grow);
        self.b.set_cold(fail);
        self.b.brif(fits, join, grow);
        self.b.seal(grow);

        self.b.switch_to(grow);
        let st = self.b.call(Callee::Runtime(RuntimeFn::TapeGrow), &[ctx, total])?;
        let tp2 = self.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
        self.b.def_var(at, tp2);
        let zero = self.b.iconst(Ty::I32, 0);
        let grow_failed = self.b.icmp(IntCC::Ne, st, zero);
        self.b.brif(grow_failed, fail, join);
        self.b.seal(fail);
        self.b.seal(join);

        self.b.switch_to(fail);
        self.raise(Fault::TapeFull, &[])?;

        self.b.switch_to(join);
        let at_var = at;
        let start = self.b.use_var(at_var);
        self.b.release_var(at_var);
        let mut cur = start;
        let mut copies = copies.into_iter();
        for item in items {
            match item {
                PushItem::Slots(vals) => {
                    for (j, (t, v)) in vals.iter().enumerate() {
                        self.b.store(*t, *v, cur, 8 * j as i32, Mem::Tape);
                    }
                    let step = self.iconst(8 * vals.len() as i64);
                    cur = self.b.ptr_offset(cur, step);
                }
                PushItem::Copy(arr, elem) => {
                    let Some((count, data_slots)) = copies.next() else {
                        return Err(self.malformed("a tape copy without its size"));
                    };
                    self.copy_elems(cur, arr.ptr, count, *elem)?;
                    let data_bytes = self.b.int(IntOp::Shl, data_slots, three);
                    cur = self.b.ptr_offset(cur, data_bytes);
                    for (j, d) in arr.dims.iter().enumerate() {
                        self.b.store(Ty::I64, *d, cur, 8 * j as i32, Mem::Tape);
                    }
                    let tag = self.iconst(1);
                    self.b.store(Ty::I64, tag, cur, 8 * arr.dims.len() as i32, Mem::Tape);
                    let step = self.iconst(8 * (arr.dims.len() as i64 + 1));
                    cur = self.b.ptr_offset(cur, step);
                }
            }
        }
        let np = self.b.ptr_offset(start, total_bytes);
        self.b.store(Ty::Ptr, np, ctx, offsets::TAPE_PTR, Mem::Ctx);
        self.b.store(Ty::Ptr, np, ctx, offsets::TAPE_TOP, Mem::Ctx);
        Ok(())
    }

    /// Pops an array of type `t` pushed by [`Self::tape_push_array`]: a
    /// reference as it was pushed; a copy as a view of its elements on the
    /// tape (valid until the next push), or, in a function that pushes
    /// after popping (a checkpointed loop recomputing its segments, which
    /// overwrites popped slots: `BlockFacts::interleaved_tape`), as a copy
    /// into fresh arena memory.
    pub(super) fn tape_pop_array(&mut self, t: arrayad_ir::Type) -> Result<Arr<E::Value>> {
        let ctx = self.ctx;
        let fresh_copy = self.blocks.interleaved_tape;
        let mut top = self.tape_pop(&vec![Ty::I64; t.rank as usize + 1])?;
        let tag = top.pop().unwrap_or_else(|| self.iconst(0));
        let dims = top;
        let ptr = self.b.declare_var(Ty::Ptr);
        let copied = self.icmp_imm(IntCC::Ne, tag, 0);
        self.if_else(
            copied,
            &mut |l| {
                let (count, _) = l.checked_product(&dims);
                let data_slots = l.data_slots(count, t.elem);
                let three = l.iconst(3);
                let data_bytes = l.b.int(IntOp::Shl, data_slots, three);
                let tp = l.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
                let tb = l.b.load(Ty::Ptr, ctx, offsets::TAPE_BASE, Mem::Ctx);
                let have = l.b.ptr_diff(tp, tb);
                let ok = l.b.icmp(IntCC::Uge, have, data_bytes);
                l.check(ok, Fault::TapeUnderflow, &[])?;
                let zero = l.iconst(0);
                let back = l.b.int(IntOp::Sub, zero, data_bytes);
                let at = l.b.ptr_offset(tp, back);
                l.b.store(Ty::Ptr, at, ctx, offsets::TAPE_PTR, Mem::Ctx);
                if fresh_copy {
                    let fresh = l.alloc_elems(count, t.elem, None)?;
                    l.copy_elems(fresh, at, count, t.elem)?;
                    l.b.def_var(ptr, fresh);
                } else {
                    l.b.def_var(ptr, at);
                }
                Ok(())
            },
            &mut |l| {
                let p = l.tape_pop(&[Ty::Ptr])?;
                l.b.def_var(ptr, p[0]);
                Ok(())
            },
        )?;
        let p = self.b.use_var(ptr);
        self.b.release_var(ptr);
        Ok(Arr { ptr: p, dims })
    }

    /// The 8-byte tape slots `count` elements of `elem` take.
    fn data_slots(&mut self, count: E::Value, elem: Scalar) -> E::Value {
        let size = self.iconst(crate::lower::elem_size(elem));
        let bytes = self.b.int(IntOp::Mul, count, size);
        let seven = self.iconst(7);
        let padded = self.b.int(IntOp::Add, bytes, seven);
        let three = self.iconst(3);
        self.b.int(IntOp::UShr, padded, three)
    }

    /// Pops one slot per type in `tys` (in push order) from the tape; a
    /// tape with fewer slots is an internal error, reported, never a crash.
    pub(super) fn tape_pop(&mut self, tys: &[Ty]) -> Result<Vec<E::Value>> {
        let ctx = self.ctx;
        let k = tys.len() as i64;
        let tp = self.b.load(Ty::Ptr, ctx, offsets::TAPE_PTR, Mem::Ctx);
        let tb = self.b.load(Ty::Ptr, ctx, offsets::TAPE_BASE, Mem::Ctx);
        let have = self.b.ptr_diff(tp, tb);
        let ok = self.icmp_imm(IntCC::Uge, have, k * 8);
        self.check(ok, Fault::TapeUnderflow, &[])?;
        let back = self.iconst(-k * 8);
        let at = self.b.ptr_offset(tp, back);
        self.b.store(Ty::Ptr, at, ctx, offsets::TAPE_PTR, Mem::Ctx);
        Ok(tys.iter().enumerate().map(|(j, t)| self.b.load(*t, at, 8 * j as i32, Mem::Tape)).collect())
    }
}
