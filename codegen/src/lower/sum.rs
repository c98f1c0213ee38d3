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
//! On a backend without a vectoriser of its own ([`Emitter::f64_pairs`]:
//! Cranelift), the unrolled blocks add two partials per instruction: lanes
//! `2k` and `2k + 1` are one pair of `f64`s, loaded as one vector from the
//! consecutive elements `8j + 2k` and `8j + 2k + 1`, so every partial
//! still receives the same additions in the same order, bitwise equal to
//! the scalar code. Bodies made only of loads along the summed index,
//! values from outside and `+ - * /` are computed on pairs (`PairStmt`);
//! any other body stays scalar.
//!
//! A `sum` of an array reads it; a `sum` of a comprehension used only there
//! (`analysis::BlockFacts::fused_sum`; all the results of a build, each
//! summed: a value and its tangent) runs the comprehension's body in the
//! loop, without the arrays.

use super::emit::{Emitter, FloatOp, IntCC, IntOp, Ty};
use super::{Lower, Result, Val};
use arrayad_ir::interp::ops::SUM_LANES;
use arrayad_ir::{Atom, BinOp, Block, Expr, Scalar, StmtKind, Type, VarId};
use std::collections::{HashMap, HashSet};

/// The values of element `i` of one or more sums (one per sum), lowered
/// at the current point; or, for a pair ([`Emitter::f64_pairs`]), the
/// pairs of the values of elements `i` and `i + 1`.
type Elements<'a, L, V> = dyn FnMut(&mut L, V) -> Result<Vec<V>> + 'a;

/// Pairs of partial sums per sum.
const PAIRS: usize = SUM_LANES / 2;
const _: () = assert!(SUM_LANES.is_multiple_of(2), "partial sums go in pairs");

/// One statement of a summed body computed on a pair of consecutive
/// elements `i`, `i + 1` (`fused_sums`).
enum PairStmt<V> {
    /// `var = a[p.., i]`: the pair at `row + 8 i`, `row` the address of
    /// the row `a[p..]` (its indices known in bounds, and `i + 1` too).
    Load { var: VarId, row: V },
    /// `var = x op y` (`+ - * /` of `f64`s).
    Binary { var: VarId, op: FloatOp, x: Atom, y: Atom },
    /// `var = x`.
    Copy { var: VarId, x: Atom },
}

/// A value of a pair evaluation: a pair, or one `f64` the same for both
/// elements (a value from outside the body, a literal).
#[derive(Clone, Copy)]
enum PairVal<V> {
    Pair(V),
    Both(V),
}

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
        let sums = self.sum_lanes(n, 1, true, &mut |l, i| Ok(vec![l.load_elem(ptr, i, Scalar::F64)]), pairs, &[])?;
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
        let plan = if unroll && self.b.f64_pairs() { self.pair_plan(n, index, body)? } else { None };
        let mut pair_element;
        let pairs: Option<&mut Elements<'_, Self, E::Value>> = match &plan {
            Some(plan) => {
                pair_element = |l: &mut Self, i| l.pair_element(plan, &body.results, i);
                Some(&mut pair_element)
            }
            None => None,
        };
        self.sum_lanes(
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
        )
    }

    /// How `body` (of a sum over `index < n`) computes each statement on a
    /// pair of consecutive elements, or `None` when it cannot: a body of
    /// `f64` lets, each a load `a[p.., index]` of an array from outside
    /// whose indices are known in bounds (`p..` values from outside, and
    /// `index` below `n`, which bounds the last axis), a copy, or `+ - *
    /// /` of such values, values from outside and literals. The rows'
    /// addresses are computed here, once.
    fn pair_plan(&mut self, n: E::Value, index: VarId, body: &Block) -> Result<Option<Vec<PairStmt<E::Value>>>> {
        let mut inside = HashSet::new();
        inside.insert(index);
        let mut plan = Vec::with_capacity(body.stmts.len());
        for s in &body.stmts {
            let StmtKind::Let { vars, expr } = &s.kind else { return Ok(None) };
            let [var] = vars[..] else { return Ok(None) };
            if self.var_ty(var)? != Type::F64 {
                return Ok(None);
            }
            let stmt = match expr {
                Expr::Index { array, indices } => {
                    let Some((last, prefix)) = indices.split_last() else { return Ok(None) };
                    let t = self.var_ty(*array)?;
                    let outside = |a: &Atom| match a {
                        Atom::I64(_) => true,
                        Atom::Var(v) => !inside.contains(v),
                        _ => false,
                    };
                    if inside.contains(array)
                        || t.elem != Scalar::F64
                        || t.rank as usize != indices.len()
                        || *last != Atom::Var(index)
                        || !prefix.iter().all(outside)
                    {
                        return Ok(None);
                    }
                    let a = self.array(*array)?;
                    let d_last = self.known.canon(a.dims[prefix.len()]);
                    if !self.bound_within(n, d_last) {
                        return Ok(None);
                    }
                    for (axis, p) in prefix.iter().enumerate() {
                        let i = self.scalar(p)?;
                        if !self.known_in_bounds(i, self.known.canon(a.dims[axis])) {
                            return Ok(None);
                        }
                    }
                    // Known in bounds, so `checked_offset` emits no check.
                    let row = if prefix.is_empty() {
                        a.ptr
                    } else {
                        let off = self.checked_offset(&a, prefix, &self.var_name(*array))?;
                        let e = self.b.int(IntOp::Mul, off, a.dims[prefix.len()]);
                        self.b.elem_addr(a.ptr, e, Scalar::F64)
                    };
                    PairStmt::Load { var, row }
                }
                Expr::Binary(op, x, y) => {
                    let op = match op {
                        BinOp::Add => FloatOp::Add,
                        BinOp::Sub => FloatOp::Sub,
                        BinOp::Mul => FloatOp::Mul,
                        BinOp::Div => FloatOp::Div,
                        _ => return Ok(None),
                    };
                    if !self.pair_operand(x, index)? || !self.pair_operand(y, index)? {
                        return Ok(None);
                    }
                    PairStmt::Binary { var, op, x: *x, y: *y }
                }
                Expr::Atom(x) if self.pair_operand(x, index)? => PairStmt::Copy { var, x: *x },
                _ => return Ok(None),
            };
            plan.push(stmt);
            inside.insert(var);
        }
        for r in &body.results {
            if !self.pair_operand(r, index)? {
                return Ok(None);
            }
        }
        Ok(Some(plan))
    }

    /// True when `x` can be an operand of a pair evaluation: an `f64`
    /// literal or variable other than the summed index.
    fn pair_operand(&self, x: &Atom, index: VarId) -> Result<bool> {
        Ok(match x {
            Atom::F64(_) => true,
            Atom::Var(v) => *v != index && self.var_ty(*v)? == Type::F64,
            _ => false,
        })
    }

    /// The pairs of the `results` of a body planned by `pair_plan`, at the
    /// elements `i` and `i + 1`.
    fn pair_element(&mut self, plan: &[PairStmt<E::Value>], results: &[Atom], i: E::Value) -> Result<Vec<E::Value>> {
        let mut vals: HashMap<VarId, PairVal<E::Value>> = HashMap::with_capacity(plan.len());
        for s in plan {
            let (var, v) = match s {
                PairStmt::Load { var, row } => {
                    let addr = self.b.elem_addr(*row, i, Scalar::F64);
                    (*var, PairVal::Pair(self.b.load_pair(addr)))
                }
                PairStmt::Binary { var, op, x, y } => {
                    let x = self.pair_value(&vals, x)?;
                    let y = self.pair_value(&vals, y)?;
                    let v = match (x, y) {
                        (PairVal::Both(x), PairVal::Both(y)) => PairVal::Both(self.b.float(*op, x, y)),
                        (x, y) => {
                            let x = self.as_pair(x);
                            let y = self.as_pair(y);
                            PairVal::Pair(self.b.float(*op, x, y))
                        }
                    };
                    (*var, v)
                }
                PairStmt::Copy { var, x } => (*var, self.pair_value(&vals, x)?),
            };
            vals.insert(var, v);
        }
        results
            .iter()
            .map(|r| {
                let v = self.pair_value(&vals, r)?;
                Ok(self.as_pair(v))
            })
            .collect()
    }

    /// The value of operand `x` in a pair evaluation (`vals`: the body's
    /// values so far).
    fn pair_value(&mut self, vals: &HashMap<VarId, PairVal<E::Value>>, x: &Atom) -> Result<PairVal<E::Value>> {
        match x {
            Atom::Var(v) => match vals.get(v) {
                Some(p) => Ok(*p),
                None => Ok(PairVal::Both(self.scalar(x)?)),
            },
            _ => Ok(PairVal::Both(self.scalar(x)?)),
        }
    }

    /// `v` as a pair.
    fn as_pair(&mut self, v: PairVal<E::Value>) -> E::Value {
        match v {
            PairVal::Pair(p) => p,
            PairVal::Both(x) => self.b.splat_pair(x),
        }
    }

    /// The `width` sums of the values `elem(i)` for `0 <= i < n` (`n >=
    /// 0`), each in the order of `sum`: the first `m = 8 * (n / 8)`
    /// elements into eight partial sums, combined in the fixed tree, then
    /// the last `n - m` added one by one. With `unroll`, the partials are
    /// variables and each block of eight elements is eight copies of
    /// `elem`; otherwise one loop over the elements adds each into the
    /// partial of its lane (`partial_sums`). With `pairs` (an unrolled sum
    /// on a backend of [`Emitter::f64_pairs`]), the blocks are computed on
    /// pairs of elements (`paired_partial_sums`) and `elem` computes only
    /// the last `n - m`. `unbind` are the IR variables `elem` binds, freed
    /// after each copy.
    fn sum_lanes(
        &mut self,
        n: E::Value,
        width: usize,
        unroll: bool,
        elem: &mut Elements<'_, Self, E::Value>,
        mut pairs: Option<&mut Elements<'_, Self, E::Value>>,
        unbind: &[VarId],
    ) -> Result<Vec<E::Value>> {
        let accs: Vec<E::Var> = (0..width).map(|_| self.b.declare_var(Ty::F64)).collect();
        let mut head = |l: &mut Self, blocks: E::Value, m: E::Value| -> Result<()> {
            let partials = match (unroll, pairs.as_deref_mut()) {
                (true, Some(pairs)) => l.paired_partial_sums(n, blocks, width, pairs)?,
                _ => l.partial_sums(n, blocks, m, width, unroll, elem, unbind)?,
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

    /// The eight partial sums of the elements `0..8 * blocks` of each of
    /// the `width` sums, sum by sum, as `partial_sums` unrolled computes
    /// them, with partials `2k` and `2k + 1` one pair: `pairs(i)` gives the
    /// pairs of elements `i` and `i + 1` (`i` even; `i + 1 < 8 * blocks <=
    /// n`).
    fn paired_partial_sums(
        &mut self,
        n: E::Value,
        blocks: E::Value,
        width: usize,
        pairs: &mut Elements<'_, Self, E::Value>,
    ) -> Result<Vec<E::Value>> {
        let zero = self.b.fconst(0.0);
        let zeros = self.b.splat_pair(zero);
        let vars: Vec<E::Var> = (0..PAIRS * width)
            .map(|_| {
                let v = self.b.declare_pair_var();
                self.b.def_var(v, zeros);
                v
            })
            .collect();
        let first = self.iconst(0);
        let shift = self.iconst(SUM_LANES.trailing_zeros() as i64);
        self.counted_loop(first, blocks, false, &mut |l, j| {
            let base = l.b.int(IntOp::Shl, j, shift);
            for k in 0..PAIRS {
                let i = if k == 0 { base } else { l.add_imm(base, 2 * k as i64) };
                l.in_bounds.push((i, n));
                let xs = l.element(pairs, i, width);
                l.in_bounds.pop();
                for (q, x) in xs?.into_iter().enumerate() {
                    let var = vars[q * PAIRS + k];
                    let s = l.b.use_var(var);
                    let s = l.b.float(FloatOp::Add, s, x);
                    l.b.def_var(var, s);
                }
            }
            Ok(())
        })?;
        let mut partials = Vec::with_capacity(SUM_LANES * width);
        for var in vars {
            let p = self.b.use_var(var);
            partials.push(self.b.pair_lane(p, 0));
            partials.push(self.b.pair_lane(p, 1));
            self.b.release_var(var);
        }
        Ok(partials)
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
