//! Lowering of `f64` sums in the language's order of summation
//! (`arrayad_ir::interp::ops::sum_f64`): blocks of 4096 elements
//! (`ops::SUM_BLOCK`) whose sums are added left to right; in a block, of
//! the first `8 * (len / 8)` elements, element `i` goes into partial sum
//! `i % 8`, the partials are combined in a fixed tree, and the last `len %
//! 8` elements are added one by one. The eight partials are independent
//! chains of additions, so the sum runs at the throughput of the adds, not
//! their latency, and LLVM's SLP vectoriser turns the unrolled loop into
//! vector code, with results bitwise equal to the interpreter's on every
//! backend. A sum of fewer than eight elements is the plain left-to-right
//! sum. The blocks are the unit a parallel sum shares out among threads
//! (`crate::parallel`), so its bits do not depend on their number.
//!
//! On a backend without a vectoriser of its own ([`Emitter::f64_pairs`]:
//! Cranelift), the unrolled rounds add two partials per instruction: lanes
//! `2k` and `2k + 1` are one pair of `f64`s, loaded as one vector from the
//! consecutive elements `8j + 2k` and `8j + 2k + 1`, so every partial
//! still receives the same additions in the same order, bitwise equal to
//! the scalar code. Bodies made only of loads along the summed index,
//! values from outside, `+ - * /`, negation, `abs`, `sqrt`, `exp`, `tanh`,
//! comparisons and conditionals of atoms on them are computed on pairs
//! (`pairs.rs`); any other body stays scalar. LLVM does the same for the
//! sums of a comprehension of two results or more, and of one whose body
//! computes `exp` or `tanh` ([`Emitter::pairs_in_sums`]), with pairs of
//! eight lanes on x86-64 (all the partials of a sum from one load of eight
//! consecutive elements) and of four elsewhere (`4k .. 4k + 3`), where its
//! vectoriser would pack the same partial of every sum into one vector, or
//! `exp`'s chain two lanes wide.
//!
//! A `sum` of an array reads it; a `sum` of a comprehension used only there
//! (`analysis::BlockFacts::fused_sum`; all the results of a build, each
//! summed: a value and its tangent) runs the comprehension's body in the
//! loop, without the arrays.

use super::emit::{Emitter, FloatOp, IntCC, IntOp, Ty};
use super::{Lower, Result, Val};
use arrayad_ir::interp::ops::{SUM_BLOCK, SUM_LANES};
use arrayad_ir::{Atom, Block, Expr, Scalar, StmtKind, UnOp, VarId};

/// The values of element `i` of one or more sums (one per sum), lowered
/// at the current point; or, for a pair ([`Emitter::f64_pairs`]), the
/// pairs of the values of elements `i` and `i + 1`.
type Elements<'a, L, V> = dyn FnMut(&mut L, V) -> Result<Vec<V>> + 'a;

/// What [`Lower::sum_lanes`] does with the sums of its blocks.
pub(super) enum Blocks<V> {
    /// Adds them left to right, and returns the sums.
    Total,
    /// Sums only the blocks `lo..hi` and stores the sum of block `b` of
    /// sum `k` at `ptrs[k][b - lo]` (a parallel sum's chunk).
    Store { lo: V, hi: V, ptrs: Vec<V> },
}

/// Rounds of eight elements in a block of a sum.
const ROUNDS_PER_BLOCK: i64 = (SUM_BLOCK / SUM_LANES) as i64;

const _: () = assert!(SUM_LANES.is_multiple_of(8), "partial sums go in pairs of 2, 4 or 8");

/// At most this many statements per sum, none with a block, make a body
/// that is lowered once per partial sum (unrolled); larger bodies are
/// lowered once.
const UNROLL_MAX_STMTS: usize = 8;

impl<E: Emitter> Lower<'_, E> {
    /// The sum of the `f64` array elements `ptr[0..n]`.
    pub(super) fn sum_f64_array(&mut self, ptr: E::Value, n: E::Value) -> Result<E::Value> {
        let mut pairs = |l: &mut Self, i| {
            let addr = l.b.elem_addr(ptr, i, Scalar::F64);
            Ok(vec![l.b.load_pair(addr)])
        };
        let pairs: Option<&mut Elements<'_, Self, E::Value>> = if self.b.f64_pairs() { Some(&mut pairs) } else { None };
        let mut elem = |l: &mut Self, i| Ok(vec![l.load_elem(ptr, i, Scalar::F64)]);
        let sums = self.sum_lanes(n, 1, true, &mut elem, pairs, &[], Blocks::Total)?;
        Ok(sums[0])
    }

    /// The sums of every result of `build index < n => body` (scalar
    /// `f64`s), as one loop: the body's errors and effects happen in the
    /// order of the build's iterations.
    pub(super) fn fused_sums(&mut self, n: &Atom, index: VarId, body: &Block) -> Result<Vec<E::Value>> {
        let n = self.scalar(n)?;
        self.check_size(n)?;
        self.fused_block_sums(n, index, body, Blocks::Total)
    }

    /// In the chunk function of a parallel sum (`Lower::chunk_blocks`):
    /// the sums of the blocks `lo..hi` of `build index < n => body` (`n >=
    /// 0`, `f64` results: a value and its tangents), each in the order of
    /// a block of `sum`, as an array of `hi - lo` rows per result (in the
    /// caller's buffer of result `dests[k]` when it offers one). The
    /// runtime calls it with `0 <= lo <= hi <= ` the number of blocks.
    pub(super) fn block_sums(
        &mut self,
        n: E::Value,
        index: VarId,
        body: &Block,
        (lo, hi): (E::Value, E::Value),
        dests: &[Option<usize>],
    ) -> Result<Vec<super::Arr<E::Value>>> {
        if body.results.is_empty() || dests.len() != body.results.len() {
            return Err(self.malformed("a parallel sum without its results"));
        }
        let rows = self.b.int(IntOp::Sub, hi, lo);
        let mut ptrs = Vec::with_capacity(dests.len());
        for dest in dests {
            self.dest_next = *dest;
            ptrs.push(self.alloc_elems(rows, Scalar::F64, None)?);
        }
        self.fused_block_sums(n, index, body, Blocks::Store { lo, hi, ptrs: ptrs.clone() })?;
        Ok(ptrs.into_iter().map(|ptr| super::Arr { ptr, dims: vec![rows] }).collect())
    }

    /// The sums of every result of `build index < n => body` (`n >= 0`),
    /// as `blocks` says.
    fn fused_block_sums(
        &mut self,
        n: E::Value,
        index: VarId,
        body: &Block,
        blocks: Blocks<E::Value>,
    ) -> Result<Vec<E::Value>> {
        let width = body.results.len();
        // Straight-line bodies (an `if` in select form is a select).
        let unroll = body.stmts.len() <= UNROLL_MAX_STMTS * width
            && body.stmts.iter().all(|s| match &s.kind {
                StmtKind::Let { vars, expr: Expr::If { then_branch, else_branch, .. } } => {
                    self.select_form(vars, then_branch, else_branch)
                }
                StmtKind::Let { expr, .. } => {
                    matches!(
                        expr,
                        Expr::Atom(_) | Expr::Unary(..) | Expr::Binary(..) | Expr::Index { .. } | Expr::Dim { .. }
                    )
                }
                _ => false,
            });
        // The variables a copy of the body binds (at any depth), unbound
        // before the next.
        let mut bound = vec![index];
        arrayad_ir::visit::block_binds(body, &mut |v| bound.push(v));
        let inline_math = body
            .stmts
            .iter()
            .any(|s| matches!(&s.kind, StmtKind::Let { expr: Expr::Unary(UnOp::Exp | UnOp::Tanh, _), .. }));
        let plan = if unroll && self.b.pairs_in_sums(width, inline_math) {
            self.pair_plan(n, index, body, false)?
        } else {
            None
        };
        let mut pair_element;
        let pairs: Option<&mut Elements<'_, Self, E::Value>> = match &plan {
            Some(plan) => {
                pair_element = |l: &mut Self, i| l.pair_element(plan, &body.results, i);
                Some(&mut pair_element)
            }
            None => None,
        };
        self.hoist_loop_rows(index, body, |l| {
            l.sum_lanes(
                n,
                width,
                unroll,
                &mut |l, i| {
                    l.def(index, Val::S(i))?;
                    l.stmts(&body.stmts)?;
                    body.results.iter().map(|r| l.scalar(r)).collect()
                },
                pairs,
                &bound,
                blocks,
            )
        })
    }

    /// The `width` sums of the values `elem(i)` for `0 <= i < n` (`n >=
    /// 0`), each in the order of `sum` (`ops::sum_f64`): blocks of
    /// [`SUM_BLOCK`] elements, each summed as [`Self::sum_block`] sums
    /// one, their sums added left to right. A size known to fit in one
    /// block is one block. Otherwise one loop runs over all the elements
    /// and adds the partial sums to totals at the end of every block
    /// ([`Self::sum_blocks_flushed`]; an unrolled body also has a copy for
    /// one block); the totals start at `-0.0`, to which adding a block's
    /// sum gives that sum (an empty sum is `0.0`).
    /// `unbind` are the IR variables `elem` binds, freed after each copy.
    /// With [`Blocks::Store`], only the given blocks are summed, each by a
    /// loop of its own, each stored, and there are no sums to return.
    #[allow(clippy::too_many_arguments)]
    fn sum_lanes(
        &mut self,
        n: E::Value,
        width: usize,
        unroll: bool,
        elem: &mut Elements<'_, Self, E::Value>,
        mut pairs: Option<&mut Elements<'_, Self, E::Value>>,
        unbind: &[VarId],
        blocks: Blocks<E::Value>,
    ) -> Result<Vec<E::Value>> {
        if let Blocks::Store { lo, hi, ptrs } = blocks {
            if ptrs.len() != width {
                return Err(self.malformed("a parallel sum's blocks stored in too few arrays"));
            }
            let shift = self.iconst(SUM_BLOCK.trailing_zeros() as i64);
            let block = self.iconst(SUM_BLOCK as i64);
            self.counted_loop(lo, hi, false, &mut |l, k| {
                // Block `k`: the elements `k * SUM_BLOCK ..` up to `n`.
                let first = l.b.int(IntOp::Shl, k, shift);
                let rest = l.b.int(IntOp::Sub, n, first);
                let len = l.b.int(IntOp::SMin, rest, block);
                let sums = l.sum_block(n, Some(first), len, width, unroll, elem, pairs.as_deref_mut(), unbind, None)?;
                let row = l.b.int(IntOp::Sub, k, lo);
                for (ptr, s) in ptrs.iter().zip(sums) {
                    l.store_elem(*ptr, row, Scalar::F64, s);
                }
                Ok(())
            })?;
            return Ok(Vec::new());
        }
        if matches!(self.known.size(n), super::Size::Const(c) if c <= SUM_BLOCK as i64) {
            return self.sum_block(n, None, n, width, unroll, elem, pairs, unbind, None);
        }
        if !unroll {
            return self.sum_blocks_flushed(n, width, unroll, elem, pairs, unbind);
        }
        // An unrolled body is a few statements without blocks: it is
        // lowered twice, once for a sum of one block (short sums, the
        // common case in inner loops, cost what they did before blocks),
        // once for longer ones.
        let results: Vec<E::Var> = (0..width).map(|_| self.b.declare_var(Ty::F64)).collect();
        let one_block = self.icmp_imm(IntCC::Sle, n, SUM_BLOCK as i64);
        // The two copies lower the body one after the other.
        let body = std::cell::RefCell::new((elem, pairs));
        self.if_else(
            one_block,
            &mut |l| {
                let (elem, pairs) = &mut *body.borrow_mut();
                let sums = l.sum_block(n, None, n, width, unroll, *elem, pairs.as_deref_mut(), unbind, None)?;
                results.iter().zip(sums).for_each(|(r, s)| l.b.def_var(*r, s));
                Ok(())
            },
            &mut |l| {
                let (elem, pairs) = &mut *body.borrow_mut();
                let sums = l.sum_blocks_flushed(n, width, unroll, *elem, pairs.as_deref_mut(), unbind)?;
                results.iter().zip(sums).for_each(|(r, s)| l.b.def_var(*r, s));
                Ok(())
            },
        )?;
        Ok(self.take_vars(results))
    }

    /// [`Self::sum_lanes`] of any number of blocks: one loop over all the
    /// elements, as for one block, which at the end of every block adds
    /// its partial sums, combined, to the totals and starts them again from
    /// 0.0 ([`Self::flush_block`]), one test per round of eight elements.
    fn sum_blocks_flushed(
        &mut self,
        n: E::Value,
        width: usize,
        unroll: bool,
        elem: &mut Elements<'_, Self, E::Value>,
        pairs: Option<&mut Elements<'_, Self, E::Value>>,
        unbind: &[VarId],
    ) -> Result<Vec<E::Value>> {
        let totals: Vec<E::Var> = (0..width).map(|_| self.b.declare_var(Ty::F64)).collect();
        let minus_zero = self.b.fconst(-0.0);
        totals.iter().for_each(|t| self.b.def_var(*t, minus_zero));
        let last = self.sum_block(n, None, n, width, unroll, elem, pairs, unbind, Some(&totals))?;
        Ok(totals
            .into_iter()
            .zip(last)
            .map(|(t, s)| {
                let total = self.b.use_var(t);
                self.b.release_var(t);
                self.b.float(FloatOp::Add, total, s)
            })
            .collect())
    }

    /// With `flush` (the totals of a sum of several blocks, one per sum),
    /// at the end of element or round `at` of a sum from element 0: when
    /// it ends a block of [`SUM_BLOCK`] elements (`at & mask == mask`),
    /// adds the combined partial sums of each sum (`partials`, of as many
    /// lanes each, in pairs when `paired`) to its total and sets them to
    /// `0.0`, as a new block starts.
    fn flush_block(
        &mut self,
        flush: Option<&[E::Var]>,
        at: E::Value,
        mask: i64,
        partials: &[E::Var],
        paired: bool,
    ) -> Result<()> {
        let Some(totals) = flush else { return Ok(()) };
        let per_sum = partials.len() / totals.len().max(1);
        let mask = self.iconst(mask);
        let low = self.b.int(IntOp::And, at, mask);
        let ends = self.b.icmp(IntCC::Eq, low, mask);
        self.if_else(
            ends,
            &mut |l| {
                for (total, p) in totals.iter().zip(partials.chunks(per_sum)) {
                    let mut lanes = Vec::with_capacity(SUM_LANES);
                    for v in p {
                        let x = l.b.use_var(*v);
                        if paired {
                            for lane in 0..l.b.pair_lanes() {
                                lanes.push(l.b.pair_lane(x, lane as u8));
                            }
                        } else {
                            lanes.push(x);
                        }
                    }
                    let s = l.combine_partials(lanes);
                    l.add_to_var(*total, s);
                    let zero = l.b.fconst(0.0);
                    let zero = if paired { l.b.splat_pair(zero) } else { zero };
                    p.iter().for_each(|v| l.b.def_var(*v, zero));
                }
                Ok(())
            },
            &mut |_| Ok(()),
        )
    }

    /// The `width` sums of one block of a sum over `0 <= i < n`: the
    /// values `elem(i)` for `lo <= i < lo + len` (`lo` a multiple of 8,
    /// `None` for 0; `0 <= len`, `lo + len <= n`), each in the order of
    /// `ops::sum_f64_block`: the first `m = 8 * (len / 8)` elements into
    /// eight partial sums, combined in the fixed tree, then the last `len -
    /// m` added one by one. With `unroll`, the partials are variables and
    /// each round of eight elements is eight copies of `elem`; otherwise
    /// one loop over the elements adds each into the partial of its lane
    /// (`partial_sums`). With `pairs` (an unrolled sum on a backend of
    /// [`Emitter::f64_pairs`]), the rounds are computed on pairs of
    /// elements (`paired_partial_sums`) and `elem` computes only the last
    /// `len - m`. With `flush` (a sum of several blocks from element 0,
    /// `len = n`), the partial sums go to the totals of `flush` at the end
    /// of every block ([`Self::flush_block`]), and the sums returned are
    /// those of the last block.
    #[allow(clippy::too_many_arguments)]
    fn sum_block(
        &mut self,
        n: E::Value,
        lo: Option<E::Value>,
        len: E::Value,
        width: usize,
        unroll: bool,
        elem: &mut Elements<'_, Self, E::Value>,
        mut pairs: Option<&mut Elements<'_, Self, E::Value>>,
        unbind: &[VarId],
        flush: Option<&[E::Var]>,
    ) -> Result<Vec<E::Value>> {
        let accs: Vec<E::Var> = (0..width).map(|_| self.b.declare_var(Ty::F64)).collect();
        let mut head = |l: &mut Self, rounds: E::Value, m: E::Value| -> Result<()> {
            let partials = match (unroll, pairs.as_deref_mut()) {
                (true, Some(pairs)) => l.paired_partial_sums(n, lo, rounds, width, pairs, flush)?,
                _ => l.partial_sums(n, lo, rounds, m, width, unroll, elem, unbind, flush)?,
            };
            for (acc, p) in accs.iter().zip(partials.chunks(SUM_LANES)) {
                let s = l.combine_partials(p.to_vec());
                l.b.def_var(*acc, s);
            }
            Ok(())
        };
        let zeros = |l: &mut Self| {
            let zero = l.b.fconst(0.0);
            accs.iter().for_each(|acc| l.b.def_var(*acc, zero));
        };
        // A size known when compiling (the rows of a `[4][4]f64`) decides
        // which parts run without a test.
        let size = self.known.size(len);
        let m = if matches!(size, super::Size::Const(c) if c < SUM_LANES as i64) {
            zeros(self);
            self.iconst(0)
        } else {
            let shift = self.iconst(SUM_LANES.trailing_zeros() as i64);
            let rounds = self.b.int(IntOp::SShr, len, shift);
            let m = self.b.int(IntOp::Shl, rounds, shift);
            if matches!(size, super::Size::Const(_)) {
                head(self, rounds, m)?;
            } else {
                let any = self.icmp_imm(IntCC::Sgt, rounds, 0);
                self.if_else(any, &mut |l| head(l, rounds, m), &mut |l| {
                    zeros(l);
                    Ok(())
                })?;
            }
            m
        };
        let (start, end) = (self.block_element(lo, m), self.block_element(lo, len));
        self.counted_loop_within(start, end, n, false, &mut |l, i| {
            let xs = l.element(elem, i, width)?;
            l.unbind(unbind);
            for (acc, x) in accs.iter().zip(xs) {
                l.add_to_var(*acc, x);
            }
            Ok(())
        })?;
        Ok(self.take_vars(accs))
    }

    /// `elem(i)`, checked to give `width` values.
    fn element(&mut self, elem: &mut Elements<'_, Self, E::Value>, i: E::Value, width: usize) -> Result<Vec<E::Value>> {
        let xs = elem(self, i)?;
        if xs.len() != width {
            return Err(self.malformed("a summed element of the wrong width"));
        }
        Ok(xs)
    }

    /// The eight partial sums of the elements `lo..lo + m` (`m = 8 *
    /// rounds`, `lo + m <= n`, `lo` a multiple of 8 or `None` for 0) of
    /// each of the `width` sums, sum by sum.
    #[allow(clippy::too_many_arguments)]
    fn partial_sums(
        &mut self,
        n: E::Value,
        lo: Option<E::Value>,
        rounds: E::Value,
        m: E::Value,
        width: usize,
        unroll: bool,
        elem: &mut Elements<'_, Self, E::Value>,
        unbind: &[VarId],
        flush: Option<&[E::Var]>,
    ) -> Result<Vec<E::Value>> {
        let zero = self.b.fconst(0.0);
        let partials: Vec<E::Var> = (0..SUM_LANES * width)
            .map(|_| {
                let v = self.b.declare_var(Ty::F64);
                self.b.def_var(v, zero);
                v
            })
            .collect();
        if !unroll {
            // One copy of the body. The partials rotate: element `i` is
            // added to the first of each sum's eight, which then moves to
            // the end, so the first is always lane `i % 8`, and after a
            // multiple of eight elements every partial is back in place.
            let zero = self.iconst(0);
            let (start, end) = (self.block_element(lo, zero), self.block_element(lo, m));
            self.counted_loop_within(start, end, n, false, &mut |l, i| {
                l.in_bounds.push((i, n));
                let xs = l.element(elem, i, width);
                l.in_bounds.pop();
                let xs = xs?;
                l.unbind(unbind);
                for (lanes, x) in partials.chunks(SUM_LANES).zip(xs) {
                    let s = l.b.use_var(lanes[0]);
                    let added = l.b.float(FloatOp::Add, s, x);
                    for k in 1..SUM_LANES {
                        let next = l.b.use_var(lanes[k]);
                        l.b.def_var(lanes[k - 1], next);
                    }
                    l.b.def_var(lanes[SUM_LANES - 1], added);
                }
                l.flush_block(flush, i, SUM_BLOCK as i64 - 1, &partials, false)
            })?;
            return Ok(self.take_vars(partials));
        }
        let shift = self.iconst(SUM_LANES.trailing_zeros() as i64);
        let first = self.iconst(0);
        self.counted_loop(first, rounds, false, &mut |l, j| {
            let base = l.round_start(lo, j, shift);
            for k in 0..SUM_LANES {
                let i = if k == 0 { base } else { l.add_imm(base, k as i64) };
                // lo + 8j + k < lo + m <= n.
                l.in_bounds.push((i, n));
                let xs = l.element(elem, i, width);
                l.in_bounds.pop();
                let xs = xs?;
                l.unbind(unbind);
                for (q, x) in xs.into_iter().enumerate() {
                    l.add_to_var(partials[q * SUM_LANES + k], x);
                }
            }
            l.flush_block(flush, j, ROUNDS_PER_BLOCK - 1, &partials, false)
        })?;
        Ok(self.take_vars(partials))
    }

    /// The eight partial sums of the elements `lo..lo + 8 * rounds` of
    /// each of the `width` sums, sum by sum, as `partial_sums` unrolled
    /// computes them, with partials `L k .. L k + L - 1` one pair (`L` the
    /// emitter's [`Emitter::pair_lanes`]): `pairs(i)` gives the pairs of
    /// elements `i .. i + L - 1` (`i` a multiple of `L`; `i + L - 1 < lo +
    /// 8 * rounds <= n`).
    fn paired_partial_sums(
        &mut self,
        n: E::Value,
        lo: Option<E::Value>,
        rounds: E::Value,
        width: usize,
        pairs: &mut Elements<'_, Self, E::Value>,
        flush: Option<&[E::Var]>,
    ) -> Result<Vec<E::Value>> {
        let zero = self.b.fconst(0.0);
        let zeros = self.b.splat_pair(zero);
        let lanes = self.b.pair_lanes();
        let per_sum = SUM_LANES / lanes;
        let vars: Vec<E::Var> = (0..per_sum * width)
            .map(|_| {
                let v = self.b.declare_pair_var();
                self.b.def_var(v, zeros);
                v
            })
            .collect();
        let first = self.iconst(0);
        let shift = self.iconst(SUM_LANES.trailing_zeros() as i64);
        self.counted_loop(first, rounds, false, &mut |l, j| {
            let base = l.round_start(lo, j, shift);
            for k in 0..per_sum {
                let i = if k == 0 { base } else { l.add_imm(base, (lanes * k) as i64) };
                l.in_bounds.push((i, n));
                let xs = l.element(pairs, i, width);
                l.in_bounds.pop();
                for (q, x) in xs?.into_iter().enumerate() {
                    let var = vars[q * per_sum + k];
                    let s = l.b.use_var(var);
                    let s = l.b.float(FloatOp::Add, s, x);
                    l.b.def_var(var, s);
                }
            }
            l.flush_block(flush, j, ROUNDS_PER_BLOCK - 1, &vars, true)
        })?;
        let mut partials = Vec::with_capacity(SUM_LANES * width);
        for var in vars {
            let p = self.b.use_var(var);
            for lane in 0..lanes {
                partials.push(self.b.pair_lane(p, lane as u8));
            }
            self.b.release_var(var);
        }
        Ok(partials)
    }

    /// The first element of round `j` of a block starting at `lo` (`None`
    /// for 0): `lo + (j << shift)`.
    fn round_start(&mut self, lo: Option<E::Value>, j: E::Value, shift: E::Value) -> E::Value {
        let base = self.b.int(IntOp::Shl, j, shift);
        self.block_element(lo, base)
    }

    /// Element `i` of a block counted from its start `lo` (`None` for 0):
    /// `lo + i`.
    fn block_element(&mut self, lo: Option<E::Value>, i: E::Value) -> E::Value {
        match lo {
            Some(lo) => self.b.int(IntOp::Add, lo, i),
            None => i,
        }
    }

    /// `((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7))`
    /// (`ops::combine_partial_sums`).
    fn combine_partials(&mut self, mut level: Vec<E::Value>) -> E::Value {
        while level.len() > 1 {
            let half = level.len() / 2;
            level = (0..half).map(|k| self.b.float(FloatOp::Add, level[k], level[k + half])).collect();
        }
        level[0]
    }

    /// `var += x` (`f64`).
    fn add_to_var(&mut self, var: E::Var, x: E::Value) {
        let s = self.b.use_var(var);
        let s = self.b.float(FloatOp::Add, s, x);
        self.b.def_var(var, s);
    }

    /// The values of the emitter variables `vars`, which are released.
    fn take_vars(&mut self, vars: Vec<E::Var>) -> Vec<E::Value> {
        vars.into_iter()
            .map(|v| {
                let s = self.b.use_var(v);
                self.b.release_var(v);
                s
            })
            .collect()
    }

    /// Forgets the bindings of `vars` (a body lowered once more binds them
    /// again).
    fn unbind(&mut self, vars: &[VarId]) {
        for v in vars {
            self.release_ir_var(*v);
            if let Some(slot) = self.vars.get_mut(v.index()) {
                *slot = None;
            }
        }
    }
}
