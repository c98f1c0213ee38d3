//! Accumulator rows a block of rows keeps on its thread's stack
//! ([`Lower::rows_by_blocks`]).
//!
//! The chunks of a parallel loop of effects over `k` add into the rows
//! `k` of accumulators, each chunk into its own. When a row is smaller
//! than a cache line (`ct_alphas[k]`, one `f64`; `ct_means[k, ..]` at
//! `d = 2`), the rows of two chunks running at once share lines, and in
//! an interchanged backward nest every point adds into every row of the
//! block: each addition then waits for the line to come back from the
//! other core. GMM's gradient at `d = 2`, `K = 5` (LLVM) took 0.60-0.63
//! ms on two threads against 0.22 ms on one; with its rows kept, 0.31-0.36
//! ms (the other maps of the call are not worth their threads either at
//! that size).
//!
//! So a block copies its rows of such an accumulator (at most
//! [`PRIVATE_ROW_F64S`] `f64`s a row) into a stack buffer before its
//! points, the body adds into the buffer, and the block copies the rows
//! back after them. Every element receives the same additions in the
//! same order, starting from the same value: the same bits. The buffer
//! stands in for the accumulator through a base pointer offset so that
//! row `k` of the block is at the buffer's row `k - first`: the body's
//! indexing, checks and views are unchanged.
//!
//! A chunk function called once over the whole loop (one thread, or work
//! below the runtime's grain) runs alone and keeps nothing.
//!
//! Legality: within the nest, every use of the accumulator is an addition
//! into it or a read of it, at `[k, ..]` (so every address the body
//! computes from it is in the block's rows), and no other array the body
//! uses may share its memory
//! ([`super::roots::ArrayRoots::accumulator_apart`]).

use super::emit::{Emitter, IntCC, IntOp};
use super::{Arr, Lower, Repr, Result, Val};
use arrayad_ir::visit::{block_binds, for_each_block, stmt_uses_shallow};
use arrayad_ir::{Atom, Block, Expr, Scalar, StmtKind, VarId};
use std::collections::{HashMap, HashSet};

/// Rows of at most this many `f64`s (one 64-byte cache line) are kept
/// on the stack.
const PRIVATE_ROW_F64S: i64 = 8;

/// The most rows of a block when an accumulator's rows may be kept on the
/// stack: buffers of `PRIVATE_BLOCK_ROWS * PRIVATE_ROW_F64S * 8` bytes
/// (4 KiB) each.
pub(super) const PRIVATE_BLOCK_ROWS: i64 = 64;
/// The most accumulators of a nest kept on the stack.
const MAX_PRIVATE: usize = 4;

/// An accumulator whose rows a block may keep on the stack.
pub(super) struct PrivateRows<V> {
    acc: VarId,
    /// The accumulator as bound outside the nest.
    arr: Arr<V>,
    /// Whether the rows are kept: they are small (at most
    /// [`PRIVATE_ROW_F64S`] `f64`s a row) and the chunk is part of the
    /// loop's range (other chunks may run at once).
    on: V,
    /// The stack buffer.
    buf: V,
}

impl<E: Emitter> Lower<'_, E> {
    /// The accumulators whose rows the blocks of the nest `for k < n do {
    /// for j .. do { b } }` (`k` is `index`; `bodies` are `b` and the
    /// branches of the last point) may keep on the stack (module docs),
    /// with their buffers and the run-time test whether they do: their
    /// rows are small, and the chunk `lo..hi` of `0..n` is not the whole
    /// loop (a chunk function called once over all iterations, on the
    /// caller's thread alone, shares no line with another).
    pub(super) fn private_rows(
        &mut self,
        index: VarId,
        bodies: &[&Block],
        (lo, hi, n): (E::Value, E::Value, E::Value),
    ) -> Result<Vec<PrivateRows<E::Value>>> {
        let mut inside: HashSet<VarId> = HashSet::new();
        for b in bodies {
            block_binds(b, &mut |v| {
                inside.insert(v);
            });
        }
        // The arrays from outside the bodies they use: whether every use
        // is an addition or a read at `[k, ..]`, and whether one adds.
        let mut uses: HashMap<VarId, (bool, bool)> = HashMap::new();
        let mut order: Vec<VarId> = Vec::new();
        let f = self.f;
        let inside_of = |v: VarId| inside.contains(&v);
        let mut note = |v: VarId, at_k: bool, adds: bool| {
            if inside.contains(&v) || v == index || !f.ty(v).is_array() {
                return;
            }
            let e = uses.entry(v).or_insert_with(|| {
                order.push(v);
                (true, false)
            });
            e.0 &= at_k;
            e.1 |= adds;
        };
        let at_k = |indices: &[Atom]| indices.first() == Some(&Atom::Var(index));
        // The array from outside each view bound inside views (rows and
        // slices of its rows `k`, through views of views): adding into the
        // view adds into it.
        let mut view_of: HashMap<VarId, VarId> = HashMap::new();
        for b in bodies {
            for_each_block(b, &mut |blk| {
                for s in &blk.stmts {
                    if let StmtKind::Let { vars, expr: Expr::Index { array, .. } | Expr::Slice { array, .. } } = &s.kind
                    {
                        if let [w] = vars.as_slice() {
                            let root = view_of.get(array).copied().unwrap_or(*array);
                            if f.ty(*w).is_array() && !inside_of(root) {
                                view_of.insert(*w, root);
                            }
                        }
                    }
                    match &s.kind {
                        StmtKind::AccAdd { acc, indices, value } => {
                            if let Some(&root) = view_of.get(acc) {
                                // (Its rows `k` only: a view of a row `k`.)
                                note(root, true, true);
                            }
                            note(*acc, at_k(indices), true);
                            if let Atom::Var(v) = value {
                                note(*v, false, false);
                            }
                            for i in indices {
                                if let Atom::Var(v) = i {
                                    note(*v, false, false);
                                }
                            }
                        }
                        StmtKind::Let { expr: Expr::Index { array, indices }, .. } => {
                            note(*array, at_k(indices), false);
                            for i in indices {
                                if let Atom::Var(v) = i {
                                    note(*v, false, false);
                                }
                            }
                        }
                        // Extents are the accumulator's either way.
                        StmtKind::Let { expr: Expr::Dim { .. }, .. } => {}
                        kind => stmt_uses_shallow(kind, &mut |v| note(v, false, false)),
                    }
                }
                for r in &blk.results {
                    if let Atom::Var(v) = r {
                        note(*v, false, false);
                    }
                }
            });
        }
        let candidates: Vec<VarId> = order
            .iter()
            .copied()
            .filter(|v| uses[v] == (true, true) && f.ty(*v).elem == Scalar::F64)
            .filter(|v| matches!(self.vars.get(v.index()), Some(Some(Repr::Fixed(Val::A(_))))))
            .collect();
        let roots = self.array_roots();
        let candidates: Vec<VarId> = candidates
            .into_iter()
            .filter(|&acc| order.iter().all(|&x| x == acc || roots.accumulator_apart(acc, x)))
            .take(MAX_PRIVATE)
            .collect();
        let mut kept = Vec::new();
        let rows = self.b.int(IntOp::Sub, hi, lo);
        let part = self.b.icmp(IntCC::Slt, rows, n);
        for acc in candidates {
            let arr = self.array(acc)?;
            let row = self.product(&arr.dims[1..]);
            let small = self.icmp_imm(IntCC::Sle, row, PRIVATE_ROW_F64S);
            // (The rows copied are within the accumulator however many
            // of them the body reaches.)
            let within = self.b.icmp(IntCC::Sle, hi, arr.dims[0]);
            let on = self.b.int(IntOp::And, small, part);
            let on = self.b.int(IntOp::And, on, within);
            let buf = self.b.stack_slot((PRIVATE_BLOCK_ROWS * PRIVATE_ROW_F64S * 8) as u32);
            kept.push(PrivateRows { acc, arr, on, buf });
        }
        Ok(kept)
    }

    /// Copies the rows `first..end` of each of `private` whose rows are
    /// small enough into its buffer, and binds the accumulator to the
    /// buffer (`end - first <= PRIVATE_BLOCK_ROWS`); returns what the
    /// accumulators were bound to.
    pub(super) fn keep_rows(
        &mut self,
        private: &[PrivateRows<E::Value>],
        first: E::Value,
        end: E::Value,
    ) -> Result<Vec<Option<Repr<E>>>> {
        let mut saved = Vec::with_capacity(private.len());
        for p in private {
            let (start, count) = self.kept_span(p, first, end);
            let src = self.b.elem_addr(p.arr.ptr, start, Scalar::F64);
            self.copy_elems(p.buf, src, count, Scalar::F64)?;
            // Row `k` of the block at the buffer's row `k - first`: the
            // buffer less `start` elements (a plain byte offset).
            let eight = self.iconst(8);
            let bytes = self.b.int(IntOp::Mul, start, eight);
            let zero = self.iconst(0);
            let back = self.b.int(IntOp::Sub, zero, bytes);
            let base = self.b.loose_base(p.buf, back);
            let ptr = self.b.select(p.on, base, p.arr.ptr);
            let bound = Repr::Fixed(Val::A(Arr { ptr, dims: p.arr.dims.clone() }));
            saved.push(self.vars[p.acc.index()].replace(bound));
        }
        Ok(saved)
    }

    /// Copies the kept rows `first..end` back and binds the accumulators
    /// as they were (`saved`, from [`Self::keep_rows`]).
    pub(super) fn give_back_rows(
        &mut self,
        private: &[PrivateRows<E::Value>],
        saved: Vec<Option<Repr<E>>>,
        first: E::Value,
        end: E::Value,
    ) -> Result<()> {
        for (p, was) in private.iter().zip(saved) {
            self.vars[p.acc.index()] = was;
            let (start, count) = self.kept_span(p, first, end);
            let dst = self.b.elem_addr(p.arr.ptr, start, Scalar::F64);
            self.copy_elems(dst, p.buf, count, Scalar::F64)?;
        }
        Ok(())
    }

    /// The first element of row `first` of `p`'s accumulator, and the
    /// elements of the rows `first..end` when they are kept (0 when not).
    fn kept_span(&mut self, p: &PrivateRows<E::Value>, first: E::Value, end: E::Value) -> (E::Value, E::Value) {
        let row = self.product(&p.arr.dims[1..]);
        let start = self.b.int(IntOp::Mul, first, row);
        let rows = self.b.int(IntOp::Sub, end, first);
        let count = self.b.int(IntOp::Mul, rows, row);
        let zero = self.iconst(0);
        (start, self.b.select(p.on, count, zero))
    }
}
