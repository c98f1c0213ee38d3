//! Arena allocation (inline bump fast path), element copies and fills, the
//! tape (inline push/pop fast paths) and arena marks.

use super::imports::Extern;
use super::{clif_ty, elem_size, Lower, Result};
use arrayad_ir::{ErrorKind, Scalar};
use arrayad_runtime::offsets;
use cranelift_codegen::ir::{condcodes::IntCC, types, BlockArg, InstBuilder, MemFlagsData, Value};
use cranelift_module::Module;

/// The arena state saved by [`Lower::arena_mark`]: pointer, end, chunk.
pub(crate) type Mark = [Value; 3];

fn ctx_flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

impl<M: Module> Lower<'_, '_, M> {
    /// The product of `dims` (unsigned) and whether it overflowed (an `i8`
    /// truth value, `None` when no multiplication happened).
    pub(super) fn checked_product(&mut self, dims: &[Value]) -> (Value, Option<Value>) {
        let mut acc: Option<Value> = None;
        let mut ovf: Option<Value> = None;
        for &d in dims {
            acc = Some(match acc {
                None => d,
                Some(a) => {
                    let (p, o) = self.b.ins().umul_overflow(a, d);
                    ovf = Some(match ovf {
                        None => o,
                        Some(x) => self.b.ins().bor(x, o),
                    });
                    p
                }
            });
        }
        (acc.unwrap_or_else(|| self.iconst(1)), ovf)
    }

    /// The product of `dims` for an array that exists (no overflow possible).
    pub(super) fn product(&mut self, dims: &[Value]) -> Value {
        let mut acc: Option<Value> = None;
        for &d in dims {
            acc = Some(match acc {
                None => d,
                Some(a) => self.b.ins().imul(a, d),
            });
        }
        acc.unwrap_or_else(|| self.iconst(1))
    }

    /// Allocates room for `count` elements of `elem` from the arena;
    /// `overflow` says the count itself already overflowed.
    pub(super) fn alloc_elems(&mut self, count: Value, elem: Scalar, overflow: Option<Value>) -> Result<Value> {
        let size = elem_size(elem);
        let (bytes, o) = if size == 1 {
            (count, None)
        } else {
            let s = self.iconst(size);
            let (b, o) = self.b.ins().umul_overflow(count, s);
            (b, Some(o))
        };
        let bad = match (overflow, o) {
            (Some(a), Some(b)) => Some(self.b.ins().bor(a, b)),
            (a, b) => a.or(b),
        };
        let bytes = match bad {
            Some(bad) => {
                let huge = self.iconst(-1);
                self.b.ins().select(bad, huge, bytes)
            }
            None => bytes,
        };
        self.alloc_bytes(bytes)
    }

    /// Allocates `size` bytes (32-byte aligned) from the arena: inline bump
    /// when the current chunk has room, else `arrayad_alloc_slow`; returns
    /// from the function with OutOfMemory when that fails.
    pub(super) fn alloc_bytes(&mut self, size: Value) -> Result<Value> {
        let ctx = self.ctx;
        let p = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::ARENA_PTR);
        let e = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::ARENA_END);
        let avail = self.b.ins().isub(e, p);
        let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, size, avail);
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let oom = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.set_cold_block(oom);
        let res = self.b.append_block_param(join, types::I64);
        self.b.ins().brif(fits, fast, &[], slow, &[]);
        self.b.seal_block(fast);
        self.b.seal_block(slow);

        self.b.switch_to_block(fast);
        let r = self.b.ins().iadd_imm_s(size, 31);
        let r = self.b.ins().band_imm_s(r, !31i64);
        let np = self.b.ins().iadd(p, r);
        self.b.ins().store(ctx_flags(), np, ctx, offsets::ARENA_PTR);
        self.b.ins().jump(join, &[BlockArg::Value(p)]);

        self.b.switch_to_block(slow);
        let q = self.call(Extern::AllocSlow, &[ctx, size])?[0];
        let null = self.b.ins().icmp_imm_s(IntCC::Equal, q, 0);
        self.b.ins().brif(null, oom, &[], join, &[BlockArg::Value(q)]);
        self.b.seal_block(oom);
        self.b.seal_block(join);

        // Replace the runtime's message by one with the location. A size of
        // 2^63 bytes or more (the overflow marker -1 among them) would print
        // as a negative number.
        self.b.switch_to_block(oom);
        let overflow = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, size, 0);
        let too_big = self.b.create_block();
        let failed = self.b.create_block();
        self.b.set_cold_block(too_big);
        self.b.set_cold_block(failed);
        self.b.ins().brif(overflow, too_big, &[], failed, &[]);
        self.b.seal_block(too_big);
        self.b.seal_block(failed);
        self.b.switch_to_block(too_big);
        self.raise(ErrorKind::OutOfMemory, "the size of an array overflows", &[])?;
        self.b.switch_to_block(failed);
        self.raise(ErrorKind::OutOfMemory, "cannot allocate an array of %1 bytes", &[size])?;

        self.b.switch_to_block(join);
        Ok(res)
    }

    /// `base + index * elem_size(elem)`.
    pub(super) fn elem_addr(&mut self, base: Value, index: Value, elem: Scalar) -> Value {
        // A shift rather than a multiply: the x64 backend folds
        // `base + (index << 3)` into one scaled addressing mode.
        let off = match elem_size(elem) {
            8 => self.b.ins().ishl_imm_u(index, 3),
            1 => index,
            n => self.b.ins().imul_imm_s(index, n),
        };
        self.b.ins().iadd(base, off)
    }

    pub(super) fn load_elem(&mut self, base: Value, index: Value, elem: Scalar) -> Value {
        let a = self.elem_addr(base, index, elem);
        self.b.ins().load(clif_ty(elem), MemFlagsData::trusted(), a, 0)
    }

    pub(super) fn store_elem(&mut self, base: Value, index: Value, elem: Scalar, v: Value) {
        let a = self.elem_addr(base, index, elem);
        self.b.ins().store(MemFlagsData::trusted(), v, a, 0);
    }

    /// Copies `count` elements of `elem` from `src` to `dst` (an inline loop).
    pub(super) fn copy_elems(&mut self, dst: Value, src: Value, count: Value, elem: Scalar) -> Result<()> {
        let zero = self.iconst(0);
        // Copy 8-byte elements as integers: bit-exact for f64.
        let e = if elem == Scalar::F64 { Scalar::I64 } else { elem };
        self.counted_loop(zero, count, false, &mut |l, i| {
            let v = l.load_elem(src, i, e);
            l.store_elem(dst, i, e, v);
            Ok(())
        })
    }

    /// Zero-fills `bytes` bytes at `dst` (`memset`).
    pub(super) fn zero_bytes(&mut self, dst: Value, bytes: Value) -> Result<()> {
        let z = self.b.ins().iconst(types::I32, 0);
        self.call(Extern::Memset, &[dst, z, bytes])?;
        Ok(())
    }

    /// Saves the arena state.
    pub(super) fn arena_mark(&mut self) -> Mark {
        let ctx = self.ctx;
        [offsets::ARENA_PTR, offsets::ARENA_END, offsets::ARENA_CUR]
            .map(|off| self.b.ins().load(types::I64, ctx_flags(), ctx, off))
    }

    /// Restores a saved arena state: everything allocated since is free.
    pub(super) fn arena_release(&mut self, m: &Mark) {
        let ctx = self.ctx;
        for (v, off) in m.iter().zip([offsets::ARENA_PTR, offsets::ARENA_END, offsets::ARENA_CUR]) {
            self.b.ins().store(ctx_flags(), *v, ctx, off);
        }
    }

    /// Pushes 8-byte slots (`i64` or `f64` values) on the tape.
    pub(super) fn tape_push(&mut self, vals: &[Value]) -> Result<()> {
        let ctx = self.ctx;
        let k = vals.len() as i64;
        let tp = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_PTR);
        let te = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_END);
        let room = self.b.ins().isub(te, tp);
        let fits = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, room, k * 8);
        let grow = self.b.create_block();
        let fail = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold_block(grow);
        self.b.set_cold_block(fail);
        let at = self.b.append_block_param(join, types::I64);
        self.b.ins().brif(fits, join, &[BlockArg::Value(tp)], grow, &[]);
        self.b.seal_block(grow);

        self.b.switch_to_block(grow);
        let kk = self.iconst(k);
        let st = self.call(Extern::TapeGrow, &[ctx, kk])?[0];
        let tp2 = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_PTR);
        self.b.ins().brif(st, fail, &[], join, &[BlockArg::Value(tp2)]);
        self.b.seal_block(fail);
        self.b.seal_block(join);

        self.b.switch_to_block(fail);
        self.raise(ErrorKind::OutOfMemory, "the tape cannot grow", &[])?;

        self.b.switch_to_block(join);
        for (j, v) in vals.iter().enumerate() {
            self.b.ins().store(MemFlagsData::trusted(), *v, at, 8 * j as i32);
        }
        let np = self.b.ins().iadd_imm_s(at, k * 8);
        self.b.ins().store(ctx_flags(), np, ctx, offsets::TAPE_PTR);
        // A push discards the popped slots above it: the stored tape ends here.
        self.b.ins().store(ctx_flags(), np, ctx, offsets::TAPE_TOP);
        Ok(())
    }

    /// The tape position as an `i64` slot count (`Expr::TapeMark`): an
    /// offset from the base, since the buffer moves when it grows.
    pub(super) fn tape_mark(&mut self) -> Value {
        let ctx = self.ctx;
        let tp = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_PTR);
        let tb = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_BASE);
        let used = self.b.ins().isub(tp, tb);
        self.b.ins().ushr_imm_u(used, 3)
    }

    /// Sets the tape position back to `mark` slots (`StmtKind::TapeRewind`).
    /// Pops never overwrite slots and the buffer never shrinks, so every
    /// slot below the end of the stored tape (`tape_top`) is intact; a mark
    /// beyond it (or negative) is an internal error, reported, never a crash.
    pub(super) fn tape_rewind(&mut self, mark: Value) -> Result<()> {
        let ctx = self.ctx;
        let tb = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_BASE);
        let top = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_TOP);
        let stored = self.b.ins().isub(top, tb);
        let stored = self.b.ins().ushr_imm_u(stored, 3);
        let ok = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, mark, stored);
        self.check(
            ok,
            ErrorKind::InvalidArgument,
            "tape rewind to slot %1 beyond the %2 stored slots (internal error of the generated code)",
            &[mark, stored],
        )?;
        let off = self.b.ins().ishl_imm_u(mark, 3);
        let np = self.b.ins().iadd(tb, off);
        self.b.ins().store(ctx_flags(), np, ctx, offsets::TAPE_PTR);
        Ok(())
    }

    /// Pops `k` slots (as `i64`s, in push order) from the tape; a tape with
    /// fewer slots is an internal error, reported, never a crash.
    pub(super) fn tape_pop(&mut self, k: usize) -> Result<Vec<Value>> {
        let ctx = self.ctx;
        let tp = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_PTR);
        let tb = self.b.ins().load(types::I64, ctx_flags(), ctx, offsets::TAPE_BASE);
        let have = self.b.ins().isub(tp, tb);
        let ok = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, have, k as i64 * 8);
        self.check(ok, ErrorKind::InvalidArgument, "tape underflow (internal error of the generated code)", &[])?;
        let at = self.b.ins().iadd_imm_s(tp, -(k as i64) * 8);
        self.b.ins().store(ctx_flags(), at, ctx, offsets::TAPE_PTR);
        Ok((0..k).map(|j| self.b.ins().load(types::I64, MemFlagsData::trusted(), at, 8 * j as i32)).collect())
    }
}
