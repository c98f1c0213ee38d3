//! Loop bodies computed on pairs of consecutive elements, two `f64`s per
//! instruction, on a backend without a vectoriser of its own
//! ([`Emitter::f64_pairs`]: Cranelift), when the body only loads along
//! its index, from rows known in bounds, and computes `+ - * /`, negation,
//! `abs`, `sqrt`, `exp` and `tanh` of `f64`s, comparisons of them and
//! conditionals on those that yield atoms, as lane masks and selects
//! ([`Lower::pair_plan`]; the last three need [`Emitter::lanewise_pairs`]).
//! Three loops use them:
//!
//! - the unrolled rounds of a `sum` (`sum.rs`): partial sums `2k` and
//!   `2k + 1` are one pair;
//! - a comprehension of `f64`s ([`Lower::paired_build`]);
//! - a `for` loop of effects whose body also adds into accumulators
//!   along its index (`acc[p.., i] += v`): the backward pass of a map,
//!   such as the rows of `dot`'s cotangents ([`Lower::paired_effects`]).
//!
//! In the last two, iterations `i` and `i + 1` run together, every
//! statement on both, in the body's order. A pair holds
//! [`Emitter::pair_lanes`] elements: two on Cranelift; eight on LLVM on
//! x86-64 and four elsewhere, which computes on pairs only the sums of a
//! comprehension of several results, or of one whose body computes `exp`
//! or `tanh` ([`Emitter::pairs_in_sums`]), whose rounds of eight elements
//! hold one or two pairs each (elements `i .. i + L - 1`, all below the
//! round's end).
//!
//! Running iterations `i` and `i + 1` together moves statement `t` of
//! iteration `i` after statement `s` of iteration `i + 1` (`s` before
//! `t`), and nothing else: each element still sees its operations in
//! their order, so the results are bitwise those of the scalar loop,
//! unless `s` and `t` touch one element (one of them writing it) through
//! rows `p` and `q` with `p + 8 (i + 1) = q + 8 i`: rows one element
//! apart, as in the backward pass of `dot(v[0:n-1], v[1:n])`. A test
//! before the loop runs it on pairs only when every row added into is
//! the same row as every other row the body touches or at least two
//! elements away from it; otherwise every iteration runs alone. Rows that
//! cannot share memory are not tested ([`super::roots::ArrayRoots`]): views of two
//! arrays that are new memory (an accumulator, a comprehension's result),
//! or of one such array and a parameter.

use super::emit::{Emitter, FloatCC, FloatOp, FloatUnary, IntCC, IntOp};
use super::expr::float_cc;
use super::inline_math::Lanes;
use super::{Lower, Result, Val};
use arrayad_ir::{Atom, BinOp, Block, Expr, Scalar, StmtKind, Type, UnOp, VarId};
use std::collections::{HashMap, HashSet};

/// At most this many statements make a loop body that may run on pairs
/// of iterations: its test of rows one element apart is quadratic in
/// them.
pub(super) const PAIRED_MAX_STMTS: usize = 16;

/// One statement of a loop body computed on a pair of consecutive
/// elements `i`, `i + 1` ([`Lower::pair_plan`]).
pub(super) enum PairStmt<V> {
    /// `var`, an `f64` bound outside the body that the body uses: `pair`
    /// holds it twice, made once before the loop (the plan's first
    /// statements), so that an iteration does not make it again.
    Outer { var: VarId, pair: V },
    /// `var = a[p.., i]`: the pair at `row + 8 i`, `row` the address of
    /// the row `a[p..]` (its indices known in bounds, and `i + 1` too).
    Load { var: VarId, array: VarId, row: V },
    /// `var = x op y` (`+ - * /` of `f64`s).
    Binary { var: VarId, op: FloatOp, x: Atom, y: Atom },
    /// `var = op x` (`-`, `abs`, `sqrt` of an `f64`).
    Unary { var: VarId, op: FloatUnary, x: Atom },
    /// `var = exp(x)` or `tanh(x)` (`UnOp::Exp`, `UnOp::Tanh`), computed
    /// inline ([`super::inline_math`]).
    InlineMath { var: VarId, op: UnOp, x: Atom },
    /// `var = x`.
    Copy { var: VarId, x: Atom },
    /// `var = x cc y`, a `bool` of two `f64`s: a pair of lane masks, used
    /// only as the condition of a [`Self::Select`]
    /// ([`Emitter::lanewise_pairs`]).
    Compare { var: VarId, cc: FloatCC, x: Atom, y: Atom },
    /// `var = if mask then a else b`, `mask` a [`Self::Compare`] of the
    /// body and both branches an atom each: lane by lane.
    Select { var: VarId, mask: VarId, a: Atom, b: Atom },
    /// `acc[p.., i] += value`: the pair at `row + 8 i` (`row` as for
    /// [`Self::Load`]); `acc` is the accumulator's variable. `again` when
    /// the add before it in the body, with no add between, adds into the
    /// same elements: it adds to the pair that add computed, which is not
    /// stored when this add comes right after it.
    AccAdd { acc: VarId, row: V, value: Atom, again: bool },
}

/// A value of a pair evaluation: a pair, or one `f64` the same for both
/// elements (a literal: a variable from outside the body is a pair made
/// before the loop, [`PairStmt::Outer`]).
#[derive(Clone, Copy)]
enum PairVal<V> {
    Pair(V),
    Both(V),
}

impl<E: Emitter> Lower<'_, E> {
    /// How `body` (of a sum, comprehension or loop over `index < n`)
    /// computes each statement on a pair of consecutive elements, or
    /// `None` when it cannot: a body of
    /// `f64` lets, each a load `a[p.., index]` of an array from outside
    /// whose indices are known in bounds (`p..` values from outside, and
    /// `index` below `n`, which bounds the last axis), a copy, `+ - * /`
    /// of such values, values from outside and literals, or `-`, `abs`,
    /// `sqrt` of one, and with [`Emitter::lanewise_pairs`] `exp` and `tanh`
    /// (each rounds as its scalar form does), `bool` comparisons of such
    /// values, and `if m then a else b` of such a comparison `m` with
    /// branches of atoms only (a select lane by lane); with
    /// `effects` (the body of a `for` loop, without results), also adds
    /// `acc[p.., index] += x` of such values into accumulators indexed as
    /// the loads are. The rows' addresses, and the pairs of the values
    /// from outside the body it uses ([`PairStmt::Outer`]), are computed
    /// here, once.
    pub(super) fn pair_plan(
        &mut self,
        n: E::Value,
        index: VarId,
        body: &Block,
        effects: bool,
    ) -> Result<Option<Vec<PairStmt<E::Value>>>> {
        let mut inside = HashSet::new();
        inside.insert(index);
        // The comparisons of the body, planned as lane masks.
        let mut masks = HashSet::new();
        let mut plan = Vec::with_capacity(body.stmts.len());
        let mut last_add: Option<(VarId, &[Atom])> = None;
        for s in &body.stmts {
            let (vars, expr) = match &s.kind {
                StmtKind::Let { vars, expr } => (vars, expr),
                StmtKind::AccAdd { acc, indices, value } if effects => {
                    if !self.pair_operand(value, index)? {
                        return Ok(None);
                    }
                    let Some(row) = self.pair_row(*acc, indices, n, index, &inside)? else { return Ok(None) };
                    let again = last_add == Some((*acc, indices.as_slice()));
                    last_add = Some((*acc, indices));
                    plan.push(PairStmt::AccAdd { acc: *acc, row, value: *value, again });
                    continue;
                }
                _ => return Ok(None),
            };
            let [var] = vars[..] else { return Ok(None) };
            let ty = self.var_ty(var)?;
            // Lane masks, as inline math, need lane-wise pairs.
            if ty == Type::BOOL && self.b.lanewise_pairs() {
                let Expr::Binary(op, x, y) = expr else { return Ok(None) };
                let Some(cc) = float_cc(*op) else { return Ok(None) };
                if !self.pair_operand(x, index)? || !self.pair_operand(y, index)? {
                    return Ok(None);
                }
                plan.push(PairStmt::Compare { var, cc, x: *x, y: *y });
                inside.insert(var);
                masks.insert(var);
                continue;
            }
            if ty != Type::F64 {
                return Ok(None);
            }
            let stmt = match expr {
                Expr::Index { array, indices } => {
                    let Some(row) = self.pair_row(*array, indices, n, index, &inside)? else { return Ok(None) };
                    PairStmt::Load { var, array: *array, row }
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
                // Inline math on pairs needs lane masks and integer lanes.
                Expr::Unary(op @ (UnOp::Exp | UnOp::Tanh), x) if self.b.lanewise_pairs() => {
                    if !self.pair_operand(x, index)? {
                        return Ok(None);
                    }
                    PairStmt::InlineMath { var, op: *op, x: *x }
                }
                Expr::Unary(op, x) => {
                    let op = match op {
                        UnOp::Neg => FloatUnary::Neg,
                        UnOp::Abs => FloatUnary::Abs,
                        UnOp::Sqrt => FloatUnary::Sqrt,
                        _ => return Ok(None),
                    };
                    if !self.pair_operand(x, index)? {
                        return Ok(None);
                    }
                    PairStmt::Unary { var, op, x: *x }
                }
                Expr::Atom(x) if self.pair_operand(x, index)? => PairStmt::Copy { var, x: *x },
                Expr::If { cond: Atom::Var(mask), then_branch, else_branch } if masks.contains(mask) => {
                    let ([a], [b]) = (&then_branch.results[..], &else_branch.results[..]) else { return Ok(None) };
                    if !then_branch.stmts.is_empty()
                        || !else_branch.stmts.is_empty()
                        || !self.pair_operand(a, index)?
                        || !self.pair_operand(b, index)?
                    {
                        return Ok(None);
                    }
                    PairStmt::Select { var, mask: *mask, a: *a, b: *b }
                }
                _ => return Ok(None),
            };
            plan.push(stmt);
            inside.insert(var);
        }
        if effects && !body.results.is_empty() {
            return Ok(None);
        }
        for r in &body.results {
            if !self.pair_operand(r, index)? {
                return Ok(None);
            }
        }
        // The variables from outside used as operands, each once, in the
        // order of their first use.
        let mut outer: Vec<VarId> = Vec::new();
        let mut note = |a: &Atom| {
            if let Atom::Var(v) = a {
                if !inside.contains(v) && !outer.contains(v) {
                    outer.push(*v);
                }
            }
        };
        for s in &plan {
            match s {
                PairStmt::Binary { x, y, .. }
                | PairStmt::Compare { x, y, .. }
                | PairStmt::Select { a: x, b: y, .. } => {
                    note(x);
                    note(y);
                }
                PairStmt::Unary { x, .. }
                | PairStmt::InlineMath { x, .. }
                | PairStmt::Copy { x, .. }
                | PairStmt::AccAdd { value: x, .. } => note(x),
                PairStmt::Load { .. } | PairStmt::Outer { .. } => {}
            }
        }
        body.results.iter().for_each(&mut note);
        let mut first = Vec::with_capacity(outer.len() + plan.len());
        for var in outer {
            let x = self.scalar(&Atom::Var(var))?;
            first.push(PairStmt::Outer { var, pair: self.b.splat_pair(x) });
        }
        first.extend(plan);
        Ok(Some(first))
    }

    /// The address of the row `array[p..]` of a load or add
    /// `array[p.., index]` in a body planned by [`Self::pair_plan`], or
    /// `None` unless `array` holds `f64`s, comes from outside the body
    /// (`inside` holds what the body binds) and is indexed in full, `p..`
    /// are values from outside known in bounds, and `index < n` is within
    /// the last axis.
    fn pair_row(
        &mut self,
        array: VarId,
        indices: &[Atom],
        n: E::Value,
        index: VarId,
        inside: &HashSet<VarId>,
    ) -> Result<Option<E::Value>> {
        let Some((last, prefix)) = indices.split_last() else { return Ok(None) };
        let t = self.var_ty(array)?;
        let outside = |a: &Atom| match a {
            Atom::I64(_) => true,
            Atom::Var(v) => !inside.contains(v),
            _ => false,
        };
        if inside.contains(&array)
            || t.elem != Scalar::F64
            || t.rank as usize != indices.len()
            || *last != Atom::Var(index)
            || !prefix.iter().all(outside)
        {
            return Ok(None);
        }
        let a = self.array(array)?;
        let d_last = self.known.canon(a.dims[prefix.len()]);
        if !self.bound_within(n, d_last) {
            return Ok(None);
        }
        self.known_row_address(array, prefix)
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
    pub(super) fn pair_element(
        &mut self,
        plan: &[PairStmt<E::Value>],
        results: &[Atom],
        i: E::Value,
    ) -> Result<Vec<E::Value>> {
        let vals = self.pair_stmts(plan, i)?;
        results
            .iter()
            .map(|r| {
                let v = self.pair_value(&vals, r)?;
                Ok(self.as_pair(v))
            })
            .collect()
    }

    /// The statements of a body planned by `pair_plan` at the elements `i`
    /// and `i + 1`; returns the values the body binds.
    fn pair_stmts(&mut self, plan: &[PairStmt<E::Value>], i: E::Value) -> Result<HashMap<VarId, PairVal<E::Value>>> {
        let mut vals: HashMap<VarId, PairVal<E::Value>> = HashMap::with_capacity(plan.len());
        // The pair the last add computed.
        let mut last_sum = None;
        for (k, s) in plan.iter().enumerate() {
            let (var, v) = match s {
                PairStmt::Outer { var, pair } => (*var, PairVal::Pair(*pair)),
                PairStmt::Load { var, row, .. } => {
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
                PairStmt::Unary { var, op, x } => {
                    let v = match self.pair_value(&vals, x)? {
                        PairVal::Both(x) => PairVal::Both(self.b.float_unary(*op, x)),
                        PairVal::Pair(x) => PairVal::Pair(self.b.float_unary(*op, x)),
                    };
                    (*var, v)
                }
                PairStmt::InlineMath { var, op, x } => {
                    let v = match self.pair_value(&vals, x)? {
                        PairVal::Both(x) => PairVal::Both(self.inline_math(*op, Lanes::One, x)),
                        PairVal::Pair(x) => PairVal::Pair(self.inline_math(*op, Lanes::Pair, x)),
                    };
                    (*var, v)
                }
                PairStmt::Copy { var, x } => (*var, self.pair_value(&vals, x)?),
                PairStmt::Compare { var, cc, x, y } => {
                    let x = self.pair_value(&vals, x)?;
                    let y = self.pair_value(&vals, y)?;
                    let (x, y) = (self.as_pair(x), self.as_pair(y));
                    (*var, PairVal::Pair(self.b.fcmp(*cc, x, y)))
                }
                PairStmt::Select { var, mask, a, b } => {
                    let PairVal::Pair(m) = self.pair_value(&vals, &Atom::Var(*mask))? else {
                        return Err(self.malformed("a select of pairs without its lane masks"));
                    };
                    let a = self.pair_value(&vals, a)?;
                    let b = self.pair_value(&vals, b)?;
                    let (a, b) = (self.as_pair(a), self.as_pair(b));
                    (*var, PairVal::Pair(self.b.select(m, a, b)))
                }
                PairStmt::AccAdd { acc, row, value, again } => {
                    let v = self.pair_value(&vals, value)?;
                    let v = self.as_pair(v);
                    let addr = self.b.elem_addr(*row, i, Scalar::F64);
                    // The first write of an accumulator that was not
                    // zero-filled adds into a zero (`Lower::acc_add`).
                    let old = match last_sum {
                        Some(old) if *again => old,
                        _ if self.take_first_write(*acc) => {
                            let zero = self.b.fconst(0.0);
                            self.b.splat_pair(zero)
                        }
                        _ => self.b.load_pair(addr),
                    };
                    let new = self.b.float(FloatOp::Add, old, v);
                    // An add into the same pair right after this one
                    // stores what this one would have.
                    if !matches!(plan.get(k + 1), Some(PairStmt::AccAdd { again: true, .. })) {
                        self.b.store_pair(new, addr);
                    }
                    last_sum = Some(new);
                    continue;
                }
            };
            vals.insert(var, v);
        }
        Ok(vals)
    }

    /// `for index < n do body` over the iterations `start..end` (`0 <=
    /// start`, `end <= n`; none when `end <= start`), `body` planned by
    /// [`Self::pair_plan`] with effects: iterations `i` and `i + 1`
    /// together, from `start` on, while two are left, when the rows the
    /// body adds into are the same as, or at least two elements away from,
    /// every other row it touches (the module's doc); the rest one by one.
    pub(super) fn paired_effects(
        &mut self,
        (start, end): (E::Value, E::Value),
        n: E::Value,
        index: VarId,
        body: &Block,
        plan: &[PairStmt<E::Value>],
    ) -> Result<()> {
        let row = |s: &PairStmt<E::Value>| match s {
            PairStmt::Load { array, row, .. } | PairStmt::AccAdd { acc: array, row, .. } => Some((*array, *row)),
            _ => None,
        };
        let rows: Vec<(VarId, E::Value)> = plan.iter().filter_map(row).collect();
        let written: Vec<(VarId, E::Value)> =
            plan.iter().filter(|s| matches!(s, PairStmt::AccAdd { .. })).filter_map(row).collect();
        let roots = self.array_roots();
        let mut tests = Vec::new();
        for &(a, w) in &written {
            for &(b, x) in &rows {
                // The test is symmetric: one per pair of rows.
                if x != w && !roots.apart(a, b) && !tests.contains(&(w, x)) && !tests.contains(&(x, w)) {
                    tests.push((w, x));
                }
            }
        }
        let firsts = self.writing_first.clone();
        let rest = self.pair_loop((start, end), &tests, &mut |l, i| l.pair_stmts(plan, i).map(drop))?;
        // The iterations left each write first what the pairs did not.
        self.writing_first = firsts;
        self.counted_loop_within(rest, end, n, false, &mut |l, i| {
            l.def(index, Val::S(i))?;
            l.stmts(&body.stmts)
        })
    }

    /// `pair(i)` for `i = start, start + 2, ..` while `i + 1 < end`, unless
    /// a test fails ([`Self::pair_rounds`]); returns where the iterations
    /// left start.
    fn pair_loop(
        &mut self,
        (start, end): (E::Value, E::Value),
        tests: &[(E::Value, E::Value)],
        pair: &mut dyn FnMut(&mut Self, E::Value) -> Result<()>,
    ) -> Result<E::Value> {
        let rounds = self.pair_rounds(start, end, tests);
        let zero = self.iconst(0);
        self.counted_loop(zero, rounds, false, &mut |l, j| {
            let two_j = l.b.int(IntOp::Add, j, j);
            let i = l.b.int(IntOp::Add, start, two_j);
            pair(l, i)
        })?;
        let paired = self.b.int(IntOp::Add, rounds, rounds);
        Ok(self.b.int(IntOp::Add, start, paired))
    }

    /// The pairs of iterations of a loop over `start..end` (none when `end
    /// <= start`) that run together: half the iterations, or none unless
    /// the rows `w` and `x` of every test `(w, x)` are the same row or at
    /// least 16 bytes apart (the module's doc).
    fn pair_rounds(&mut self, start: E::Value, end: E::Value, tests: &[(E::Value, E::Value)]) -> E::Value {
        let zero = self.iconst(0);
        let len = self.b.int(IntOp::Sub, end, start);
        let len = self.b.int(IntOp::SMax, len, zero);
        let one = self.iconst(1);
        let rounds = self.b.int(IntOp::SShr, len, one);
        let mut apart = None;
        for &(w, x) in tests {
            // `w - x` is 0, or at least 16 bytes either way.
            let d = self.b.ptr_diff(w, x);
            let same = self.b.icmp(IntCC::Eq, d, zero);
            let off = self.add_imm(d, 15);
            let thirty = self.iconst(30);
            let far = self.b.icmp(IntCC::Ult, thirty, off);
            let ok = self.b.int(IntOp::Or, same, far);
            apart = Some(match apart {
                Some(a) => self.b.int(IntOp::And, a, ok),
                None => ok,
            });
        }
        match apart {
            Some(apart) => self.b.select(apart, rounds, zero),
            None => rounds,
        }
    }

    /// The first iterations of `build index < n => body` over `start..end`
    /// (`0 <= start`, `end <= n`), `body` planned by [`Self::pair_plan`]
    /// (no effects), two at a time: the pairs of its results stored in
    /// the `f64` arrays `outs` at `i - lo` (`lo`: the first row of a
    /// parallel map's chunk, else 0). Returns where the iterations left
    /// (one at most) start. The results go to memory allocated for them
    /// just before the loop (or an output buffer, which overlaps no
    /// input: `docs/src/c-abi.md`), which no row the body loads can
    /// reach: the loop needs no test of the module's doc.
    pub(super) fn paired_build(
        &mut self,
        (start, end): (E::Value, E::Value),
        lo: Option<E::Value>,
        outs: &[E::Value],
        body: &Block,
        plan: &[PairStmt<E::Value>],
    ) -> Result<E::Value> {
        self.pair_loop((start, end), &[], &mut |l, i| {
            let at = match lo {
                Some(lo) => l.b.int(IntOp::Sub, i, lo),
                None => i,
            };
            let pairs = l.pair_element(plan, &body.results, i)?;
            for (out, v) in outs.iter().zip(pairs) {
                let addr = l.b.elem_addr(*out, at, Scalar::F64);
                l.b.store_pair(v, addr);
            }
            Ok(())
        })
    }

    /// The value of operand `x` in a pair evaluation (`vals`: the body's
    /// values so far).
    fn pair_value(&mut self, vals: &HashMap<VarId, PairVal<E::Value>>, x: &Atom) -> Result<PairVal<E::Value>> {
        match x {
            Atom::Var(v) => match vals.get(v) {
                Some(p) => Ok(*p),
                // (Not reached for a planned body, whose variables from
                // outside are `Outer` entries: the value either way.)
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
}
