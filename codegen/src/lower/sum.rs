//! Lowering of `f64` sums in the language's order of summation
//! (`arrayad_ir::interp::ops::sum_f64`): of the first `8 * (n / 8)`
//! elements, element `i` goes into partial sum `i % 8`, the partials are
//! combined in a fixed tree, and the last `n % 8` elements are added one by
//! one. The eight partials are independent chains of additions, so the sum
//! runs at the throughput of the adds, not their latency, and LLVM's SLP
//! vectoriser turns the unrolled loop into vector code, with results
//! bitwise equal to the interpreter's on every backend. A sum of fewer than
//! eight elements is the plain left-to-right sum.
//!
//! A `sum` of an array reads it; a `sum` of a comprehension used only there
//! (`analysis::BlockFacts::fused_sum`; all the results of a build, each
//! summed: a value and its tangent) runs the comprehension's body in the
//! loop, without the arrays.

use super::emit::{Emitter, FloatOp, IntCC, IntOp, Ty};
use super::{Lower, Result, Val};
use arrayad_ir::interp::ops::SUM_LANES;
use arrayad_ir::{Atom, Block, Expr, Scalar, StmtKind, VarId};

/// The values of element `i` of one or more sums (one per sum), lowered
/// at the current point.
type Elements<'a, L, V> = dyn FnMut(&mut L, V) -> Result<Vec<V>> + 'a;

/// At most this many statements per sum, none with a block, make a body
/// that is lowered once per partial sum (unrolled); larger bodies are
/// lowered once.
const UNROLL_MAX_STMTS: usize = 8;

impl<E: Emitter> Lower<'_, E> {
    /// The sum of the `f64` array elements `ptr[0..n]`.
    pub(super) fn sum_f64_array(&mut self, ptr: E::Value, n: E::Value) -> Result<E::Value> {
        let sums = self.sum_lanes(n, 1, true, &mut |l, i| Ok(vec![l.load_elem(ptr, i, Scalar::F64)]), &[])?;
        Ok(sums[0])
    }

    /// The sums of every result of `build index < n => body` (scalar
    /// `f64`s), as one loop: the body's errors and effects happen in the
    /// order of the build's iterations.
    pub(super) fn fused_sums(&mut self, n: &Atom, index: VarId, body: &Block) -> Result<Vec<E::Value>> {
        let n = self.scalar(n)?;
        self.check_size(n)?;
        let width = body.results.len();
        let unroll = body.stmts.len() <= UNROLL_MAX_STMTS * width
            && body.stmts.iter().all(|s| {
                matches!(
                    &s.kind,
                    StmtKind::Let {
                        expr: Expr::Atom(_)
                            | Expr::Unary(..)
                            | Expr::Binary(..)
                            | Expr::Index { .. }
                            | Expr::Dim { .. },
                        ..
                    }
                )
            });
        // The variables a copy of the body binds (at any depth), unbound
        // before the next.
        let mut bound = vec![index];
        arrayad_ir::visit::block_binds(body, &mut |v| bound.push(v));
        self.sum_lanes(
            n,
            width,
            unroll,
            &mut |l, i| {
                l.def(index, Val::S(i))?;
                l.stmts(&body.stmts)?;
                body.results.iter().map(|r| l.scalar(r)).collect()
            },
            &bound,
        )
    }

    /// The `width` sums of the values `elem(i)` for `0 <= i < n` (`n >=
    /// 0`), each in the order of `sum`: the first `m = 8 * (n / 8)`
    /// elements into eight partial sums, combined in the fixed tree, then
    /// the last `n - m` added one by one. With `unroll`, the partials are
    /// variables and each block of eight elements is eight copies of
    /// `elem`; otherwise one loop over the elements adds each into the
    /// partial of its lane (`partial_sums`). `unbind` are the IR variables `elem` binds, freed
    /// after each copy.
    fn sum_lanes(
        &mut self,
        n: E::Value,
        width: usize,
        unroll: bool,
        elem: &mut Elements<'_, Self, E::Value>,
        unbind: &[VarId],
    ) -> Result<Vec<E::Value>> {
        let accs: Vec<E::Var> = (0..width).map(|_| self.b.declare_var(Ty::F64)).collect();
        let mut head = |l: &mut Self, blocks: E::Value, m: E::Value| -> Result<()> {
            let partials = l.partial_sums(n, blocks, m, width, unroll, elem, unbind)?;
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
        let size = self.known.size(n);
        let m = if matches!(size, super::Size::Const(c) if c < SUM_LANES as i64) {
            zeros(self);
            self.iconst(0)
        } else {
            let shift = self.iconst(SUM_LANES.trailing_zeros() as i64);
            let blocks = self.b.int(IntOp::SShr, n, shift);
            let m = self.b.int(IntOp::Shl, blocks, shift);
            if matches!(size, super::Size::Const(_)) {
                head(self, blocks, m)?;
            } else {
                let any = self.icmp_imm(IntCC::Sgt, blocks, 0);
                self.if_else(any, &mut |l| head(l, blocks, m), &mut |l| {
                    zeros(l);
                    Ok(())
                })?;
            }
            m
        };
        self.counted_loop(m, n, false, &mut |l, i| {
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

    /// The eight partial sums of the elements `0..m` (`m = 8 * blocks <=
    /// n`) of each of the `width` sums, sum by sum.
    #[allow(clippy::too_many_arguments)]
    fn partial_sums(
        &mut self,
        n: E::Value,
        blocks: E::Value,
        m: E::Value,
        width: usize,
        unroll: bool,
        elem: &mut Elements<'_, Self, E::Value>,
        unbind: &[VarId],
    ) -> Result<Vec<E::Value>> {
        let zero = self.b.fconst(0.0);
        let first = self.iconst(0);
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
            self.counted_loop(first, m, false, &mut |l, i| {
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
                Ok(())
            })?;
            return Ok(self.take_vars(partials));
        }
        let shift = self.iconst(SUM_LANES.trailing_zeros() as i64);
        self.counted_loop(first, blocks, false, &mut |l, j| {
            let base = l.b.int(IntOp::Shl, j, shift);
            for k in 0..SUM_LANES {
                let i = if k == 0 { base } else { l.add_imm(base, k as i64) };
                // 8j + k < m <= n.
                l.in_bounds.push((i, n));
                let xs = l.element(elem, i, width);
                l.in_bounds.pop();
                let xs = xs?;
                l.unbind(unbind);
                for (q, x) in xs.into_iter().enumerate() {
                    l.add_to_var(partials[q * SUM_LANES + k], x);
                }
            }
            Ok(())
        })?;
        Ok(self.take_vars(partials))
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
