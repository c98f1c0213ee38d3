//! Lowering of the right-hand sides of `let`.

use super::emit::{Conv, Emitter, FloatCC, FloatOp, FloatUnary, IntCC, IntOp, Mem, Ty};
use super::inline_math::{self, Lanes};
use super::memory::Mark;
use super::{elem_size, Arr, Lower, Repr, Result, Val};
use arrayad_ir::{Atom, BinOp, Block, Expr, Fault, MathFn, ReduceOp, Scalar, StmtKind, Type, UnOp, VarId};
use arrayad_runtime::Callee;
use std::collections::HashSet;

/// Accumulators of at most this many elements, of literal extents, are
/// zeroed by stores rather than `memset`.
const SMALL_ZEROS: i64 = 16;

/// How many loop bounds that are themselves enclosing loops' indices
/// [`Lower::known_in_bounds`] follows (`c < r < q < d` is two): deeper
/// triangular nests keep their checks.
const TRIANGULAR_DEPTH: usize = 4;

/// The destination of one result of a `Build`.
enum BuildOut<E: Emitter> {
    /// Scalar rows: the array is allocated before the loop.
    Scalar { ptr: E::Value, elem: Scalar },
    /// Array rows: allocated once the first row's shape is known (in the
    /// caller's buffer of result `dest` when it offers one, else at the
    /// address `place` has when it is the rows' destination: `placed.rs`).
    Array {
        ptr: E::Var,
        row_dims: Vec<E::Var>,
        row_count: E::Var,
        elem: Scalar,
        dest: Option<usize>,
        place: Option<(E::Value, E::Value)>,
    },
}

/// The independent chains of a `maximum` or `minimum` of an array
/// (`Lower::extreme_f64`): as many as the partial sums of `sum`.
const EXTREME_LANES: usize = arrayad_ir::interp::ops::SUM_LANES;

impl<E: Emitter> Lower<'_, E> {
    /// The values of `expr`, bound to `vars` by the caller.
    pub(super) fn expr(&mut self, vars: &[VarId], expr: &Expr) -> Result<Vec<Val<E::Value>>> {
        Ok(match expr {
            Expr::Atom(a) => vec![self.atom(a)?],
            Expr::Unary(op, a) => vec![Val::S(self.unary(*op, a)?)],
            Expr::Binary(op, a, b) => vec![Val::S(self.binary(*op, a, b)?)],
            Expr::Index { array, indices } => vec![self.index(*array, indices)?],
            Expr::Slice { array, lo, hi } => vec![Val::A(self.slice(*array, lo, hi)?)],
            Expr::Reshape { array, dims } => vec![Val::A(self.reshape(*array, dims)?)],
            Expr::Update { array, indices, value } => {
                let in_place = vars.first().is_some_and(|y| self.in_place.updates.contains(y));
                vec![Val::A(self.update(*array, indices, value, in_place)?)]
            }
            Expr::Dim { array, axis } => {
                let a = self.array(*array)?;
                let d = a.dims.get(*axis as usize).copied().ok_or_else(|| self.malformed("dim of a missing axis"))?;
                vec![Val::S(d)]
            }
            Expr::Reduce { op, array } => vec![Val::S(self.reduce(*op, *array)?)],
            Expr::ArrayLit { elem_ty, elems } => {
                // A literal of rows computed in place (`placed.rs`).
                let place = vars.first().and_then(|v| self.places.remove(v));
                vec![Val::A(self.array_lit(*elem_ty, elems, place)?)]
            }
            Expr::Build { n, index, body } => self.build(vars, n, *index, body)?,
            Expr::Loop { n, index, states, init, body } => self.loop_(n, *index, states, init, body)?,
            Expr::While { states, init, cond, body } => self.while_(states, init, cond, body)?,
            Expr::If { cond, then_branch, else_branch } => self.if_expr(vars, cond, then_branch, else_branch)?,
            Expr::Call { func, args } => self.call_def(*func, vars, args)?,
            Expr::ZerosLike(v) if matches!(vars, [acc] if self.first_writes.unzeroed(*acc)) => {
                // Written by a loop before it is read (`first_write.rs`).
                let a = self.array(*v)?;
                vec![Val::A(self.alloc_f64(a.dims)?.0)]
            }
            Expr::ZerosLike(v) => {
                let a = self.array(*v)?;
                vec![Val::A(self.zeros(a.dims)?)]
            }
            Expr::Zeros(dims) if matches!(vars, [v] if self.first_writes.unzeroed(*v)) => {
                // Written by a loop before it is read (`first_write.rs`).
                let vals = dims.iter().map(|d| self.scalar(d)).collect::<Result<Vec<_>>>()?;
                vec![Val::A(self.alloc_f64(vals)?.0)]
            }
            Expr::Zeros(dims) => {
                // Literal extents of a small accumulator: zeroed by stores.
                let literal: Option<i64> = dims.iter().try_fold(1i64, |n, d| match d {
                    Atom::I64(k) if *k >= 0 => n.checked_mul(*k),
                    _ => None,
                });
                let vals = dims.iter().map(|d| self.scalar(d)).collect::<Result<Vec<_>>>()?;
                match literal {
                    Some(count) if count <= SMALL_ZEROS => {
                        let n = self.iconst(count);
                        let ptr = self.alloc_elems(n, Scalar::F64, None)?;
                        let zero = self.b.iconst(Ty::I64, 0);
                        for k in 0..count {
                            self.b.store(Ty::I64, zero, ptr, (8 * k) as i32, Mem::Data);
                        }
                        vec![Val::A(Arr { ptr, dims: vals })]
                    }
                    _ => vec![Val::A(self.zeros(vals)?)],
                }
            }
            Expr::Pop => {
                let [v] = vars else {
                    return Err(self.malformed("pop binds one variable"));
                };
                let t = self.var_ty(*v)?;
                vec![self.pop(t)?]
            }
            Expr::TapeMark => vec![Val::S(self.tape_mark())],
        })
    }

    fn elem_of(&self, a: &Atom) -> Scalar {
        self.f.atom_ty(a).elem
    }

    fn unary(&mut self, op: UnOp, a: &Atom) -> Result<E::Value> {
        let e = self.elem_of(a);
        let x = self.scalar(a)?;
        if let Some(m) = MathFn::of_unary(op) {
            return self.b.call(Callee::Math(m), &[x]);
        }
        Ok(match op {
            UnOp::Exp | UnOp::Tanh => self.inline_math(op, Lanes::One, x),
            UnOp::Neg if e == Scalar::F64 => self.b.float_unary(FloatUnary::Neg, x),
            UnOp::Neg => {
                let z = self.iconst(0);
                self.b.int(IntOp::Sub, z, x)
            }
            UnOp::Not => {
                let t = self.b.iconst(Ty::Bool, 1);
                self.b.int(IntOp::Xor, x, t)
            }
            UnOp::Sqrt => self.b.float_unary(FloatUnary::Sqrt, x),
            UnOp::Abs => self.b.float_unary(FloatUnary::Abs, x),
            UnOp::Floor => self.b.float_unary(FloatUnary::Floor, x),
            UnOp::Ceil => self.b.float_unary(FloatUnary::Ceil, x),
            UnOp::ToF64 => match e {
                Scalar::I64 => self.b.convert(Conv::I64ToF64, x),
                Scalar::Bool => {
                    let w = self.b.convert(Conv::BoolToI64, x);
                    self.b.convert(Conv::I64ToF64, w)
                }
                Scalar::F64 => x,
            },
            UnOp::ToI64 => match e {
                Scalar::F64 => self.b.convert(Conv::F64ToI64Sat, x),
                Scalar::Bool => self.b.convert(Conv::BoolToI64, x),
                Scalar::I64 => x,
            },
            UnOp::Sign => {
                // 1 if x > 0, -1 if x < 0, else x (±0 and NaN).
                let z = self.b.fconst(0.0);
                let gt = self.b.fcmp(FloatCC::Gt, x, z);
                let lt = self.b.fcmp(FloatCC::Lt, x, z);
                let one = self.b.fconst(1.0);
                let m1 = self.b.fconst(-1.0);
                let r = self.b.select(lt, m1, x);
                self.b.select(gt, one, r)
            }
            _ => return Err(self.malformed(format!("unary operation {} of {e}", op.name()))),
        })
    }

    /// `exp` or `tanh` of an `f64` value or pair, computed inline
    /// (`inline_math.rs`).
    pub(super) fn inline_math(&mut self, op: UnOp, lanes: Lanes, x: E::Value) -> E::Value {
        match op {
            UnOp::Tanh => inline_math::tanh(self.b, lanes, x),
            _ => inline_math::exp(self.b, lanes, x),
        }
    }

    fn binary(&mut self, op: BinOp, a: &Atom, b: &Atom) -> Result<E::Value> {
        let e = self.elem_of(a);
        let x = self.scalar(a)?;
        let y = self.scalar(b)?;
        let f = e == Scalar::F64;
        if f {
            if let Some(m) = MathFn::of_binary(op) {
                return self.b.call(Callee::Math(m), &[x, y]);
            }
        }
        let v = match op {
            BinOp::Add if f => self.b.float(FloatOp::Add, x, y),
            BinOp::Add => {
                let v = self.b.int(IntOp::Add, x, y);
                if self.known.const_value(y) == Some(1) {
                    self.successors.insert(v, x);
                } else if self.known.const_value(x) == Some(1) {
                    self.successors.insert(v, y);
                }
                v
            }
            BinOp::Sub if f => self.b.float(FloatOp::Sub, x, y),
            BinOp::Sub => self.b.int(IntOp::Sub, x, y),
            BinOp::Mul if f => self.b.float(FloatOp::Mul, x, y),
            BinOp::Mul => self.b.int(IntOp::Mul, x, y),
            BinOp::Div if f => self.b.float(FloatOp::Div, x, y),
            BinOp::Div | BinOp::Rem if matches!(b, Atom::I64(d) if *d != 0 && *d != -1) => {
                let Atom::I64(d) = *b else { unreachable!("matched a literal divisor") };
                self.div_by_literal(op == BinOp::Rem, x, d)
            }
            BinOp::Div | BinOp::Rem => {
                let ok = self.icmp_imm(IntCC::Ne, y, 0);
                self.check(ok, Fault::DivisionByZero { remainder: op == BinOp::Rem }, &[x])?;
                // Never let the hardware trap on i64::MIN / -1: divide by 1
                // instead (x % -1 == x % 1 == 0) and negate for the quotient.
                let m1 = self.icmp_imm(IntCC::Eq, y, -1);
                let one = self.iconst(1);
                let d = self.b.select(m1, one, y);
                if op == BinOp::Rem {
                    self.b.int(IntOp::SRem, x, d)
                } else {
                    let q = self.b.int(IntOp::SDiv, x, d);
                    let z = self.iconst(0);
                    let neg = self.b.int(IntOp::Sub, z, x);
                    self.b.select(m1, neg, q)
                }
            }
            BinOp::Min if f => self.min_max_f64(false, x, y),
            BinOp::Min => self.b.int(IntOp::SMin, x, y),
            BinOp::Max if f => self.min_max_f64(true, x, y),
            BinOp::Max => self.b.int(IntOp::SMax, x, y),
            BinOp::And => self.b.int(IntOp::And, x, y),
            BinOp::Or => self.b.int(IntOp::Or, x, y),
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                if let (true, Some(cc)) = (f, float_cc(op)) {
                    self.b.fcmp(cc, x, y)
                } else {
                    let cc = match op {
                        BinOp::Eq => IntCC::Eq,
                        BinOp::Ne => IntCC::Ne,
                        BinOp::Lt => IntCC::Slt,
                        BinOp::Le => IntCC::Sle,
                        BinOp::Gt => IntCC::Sgt,
                        _ => IntCC::Sge,
                    };
                    self.b.icmp(cc, x, y)
                }
            }
            BinOp::Pow | BinOp::Atan2 | BinOp::Polygamma => return Err(self.malformed(format!("{} of {e}", op.name()))),
        };
        if e == Scalar::I64 {
            self.note_halving(op, x, y, v);
        }
        Ok(v)
    }

    /// Records `v = if c then d else 0` (or `0` then `d`), an immutable
    /// `i64` `v` whose branches yield an atom each, as `v` being `0` or
    /// `d` ([`Lower::zero_or`]).
    pub(super) fn note_zero_or(&mut self, vars: &[VarId], expr: &Expr) -> Result<()> {
        let (Expr::If { then_branch, else_branch, .. }, [v]) = (expr, vars) else { return Ok(()) };
        if self.f.ty(*v) != Type::I64 || self.f.var(*v).mutable || self.rebound.contains(v) {
            return Ok(());
        }
        let d = match (
            then_branch.stmts.is_empty() && else_branch.stmts.is_empty(),
            &then_branch.results[..],
            &else_branch.results[..],
        ) {
            (true, [d], [Atom::I64(0)]) | (true, [Atom::I64(0)], [d]) => d,
            _ => return Ok(()),
        };
        let (v, d) = (self.scalar(&Atom::Var(*v))?, self.scalar(d)?);
        self.zero_or.insert(v, d);
        Ok(())
    }

    /// Records what `v = x op y` (`i64`) is in the indices of the points
    /// of a loop run `d` iterations at a time ([`super::Halving`]).
    fn note_halving(&mut self, op: BinOp, x: E::Value, y: E::Value, v: E::Value) {
        use super::Halving::{Below, Half, Last, Odd, Paired, Pairs, Point, Twice};
        let factor = |l: &Self, a: E::Value| l.known.const_value(a).filter(|d| *d >= 2);
        let fact = match op {
            BinOp::Div => factor(self, y).map(|d| Half(x, d)),
            BinOp::Mul => [(x, y), (y, x)].into_iter().find_map(|(a, b)| {
                let d = factor(self, b)?;
                match self.halving.get(&a) {
                    Some(&Half(n, e)) if e == d => Some(Paired(n, d)),
                    // `a` an index below `n / d`, or below the pairs of
                    // a comprehension of rows.
                    _ => self.in_bounds.iter().find_map(|&(i, h)| match self.halving.get(&h) {
                        Some(&Half(n, e)) if i == a && e == d => Some(Twice(n, d)),
                        Some(&Pairs(n)) if i == a && d == 2 => Some(Below(n)),
                        _ => None,
                    }),
                }
            }),
            BinOp::Sub => match self.halving.get(&y) {
                Some(&Paired(n, d)) if x == n || self.known.same(x, n) => Some(Odd(n, d)),
                _ if self.known.const_value(y) == Some(1) => Some(Last(x)),
                _ => None,
            },
            // `min(x, n - 1)` of a point below `n`, or of its successor.
            BinOp::Min => match self.halving.get(&y) {
                Some(&Last(n)) => {
                    let below = |v: &E::Value| matches!(self.halving.get(v), Some(&Below(m)) if m == n);
                    (below(&x) || self.successors.get(&x).is_some_and(below)).then_some(Below(n))
                }
                _ => None,
            },
            BinOp::Add => [(x, y), (y, x)].into_iter().find_map(|(a, b)| {
                let c = self.known.const_value(b);
                match (self.halving.get(&a), self.halving.get(&b)) {
                    (Some(&Half(n, 2)), Some(&Odd(m, 2))) if n == m => Some(Pairs(n)),
                    (Some(&Twice(n, d)), Some(&Odd(m, e))) if n == m && d == e => Some(Point(n, d)),
                    // `twice + 0`, the first point of a forward loop.
                    (Some(&fact), _) if c == Some(0) => Some(fact),
                    // The other points of a run of `d`: `0 <= v + c <= n - 1`.
                    (Some(&(Twice(n, d) | Point(n, d))), _) if c.is_some_and(|c| (1..d).contains(&c)) => Some(Below(n)),
                    // `(n / d) * d + t`, `t` an index below the remainder:
                    // the iterations left over, below `n`.
                    (Some(&Paired(n, d)), _) if self.below_remainder(b) == Some((n, d)) => Some(Below(n)),
                    _ => None,
                }
            }),
            _ => None,
        };
        if let Some(fact) = fact {
            self.halving.insert(v, fact);
        }
    }

    /// `(n, d)` when `i` is the index of a loop over the remainder `Odd(n,
    /// d)` (`0 <= i < n - (n / d) * d <= n`: the iterations a loop run `d`
    /// at a time leaves over).
    fn below_remainder(&self, i: E::Value) -> Option<(E::Value, i64)> {
        self.in_bounds.iter().find_map(|&(j, h)| match self.halving.get(&h) {
            Some(&super::Halving::Odd(n, d)) if j == i => Some((n, d)),
            _ => None,
        })
    }

    /// `x / d` (or `x % d` when `rem`) for a literal `d` other than 0 and
    /// -1, which can neither fail nor overflow: shifts for a power of two
    /// (rounding toward zero: a negative `x` is biased by `|d| - 1` first),
    /// else the division instruction without checks.
    fn div_by_literal(&mut self, rem: bool, x: E::Value, d: i64) -> E::Value {
        let k = d.unsigned_abs().trailing_zeros();
        if d.unsigned_abs().is_power_of_two() && k < 63 {
            if k == 0 {
                // d == 1: x / 1 = x, x % 1 = 0.
                return if rem { self.iconst(0) } else { x };
            }
            // bias = (x >> 63) >>> (64 - k): |d| - 1 for negative x, else 0.
            let c63 = self.iconst(63);
            let sign = self.b.int(IntOp::SShr, x, c63);
            let ck = self.iconst(64 - k as i64);
            let bias = self.b.int(IntOp::UShr, sign, ck);
            let biased = self.b.int(IntOp::Add, x, bias);
            let kk = self.iconst(k as i64);
            let q = self.b.int(IntOp::SShr, biased, kk);
            if rem {
                // x % d = x - (q << k) (the sign of d does not matter).
                let m = self.b.int(IntOp::Shl, q, kk);
                return self.b.int(IntOp::Sub, x, m);
            }
            if d < 0 {
                let z = self.iconst(0);
                return self.b.int(IntOp::Sub, z, q);
            }
            return q;
        }
        let dv = self.iconst(d);
        self.b.int(if rem { IntOp::SRem } else { IntOp::SDiv }, x, dv)
    }

    /// `maximum` (`max`) or `minimum` of the `n >= 1` `f64`s at `ptr`, the
    /// bits of the left fold of [`Self::min_max_f64`] from the first
    /// element (the first element itself when `n = 1`; else NaN if any
    /// element is, else the first largest, or smallest, element),
    /// computed in [`EXTREME_LANES`] independent chains that vector units
    /// run side by side: each lane folds every eighth element (all start
    /// at the first), the lanes are folded together, the tail goes into
    /// the first lane. That gives the fold's value, and its bits unless
    /// the extreme is zero, the one value two elements can hold in
    /// different bits (`+0.0` and `-0.0`): then the first element equal to
    /// zero is the result.
    fn extreme_f64(&mut self, max: bool, ptr: E::Value, n: E::Value) -> Result<E::Value> {
        let z = self.iconst(0);
        let first = self.load_elem(ptr, z, Scalar::F64);
        let lanes: Vec<E::Var> = (0..EXTREME_LANES)
            .map(|_| {
                let v = self.b.declare_var(Ty::F64);
                self.b.def_var(v, first);
                v
            })
            .collect();
        let shift = self.iconst(EXTREME_LANES.trailing_zeros() as i64);
        let rest = self.add_imm(n, -1);
        let rounds = self.b.int(IntOp::SShr, rest, shift);
        self.counted_loop(z, rounds, false, &mut |l, r| {
            let base = l.b.int(IntOp::Shl, r, shift);
            for (j, lane) in lanes.iter().enumerate() {
                let i = l.add_imm(base, 1 + j as i64);
                let x = l.load_elem(ptr, i, Scalar::F64);
                let s = l.b.use_var(*lane);
                let m = l.min_max_f64(max, s, x);
                l.b.def_var(*lane, m);
            }
            Ok(())
        })?;
        let done = self.b.int(IntOp::Shl, rounds, shift);
        let done = self.add_imm(done, 1);
        self.counted_loop(done, n, false, &mut |l, i| {
            let x = l.load_elem(ptr, i, Scalar::F64);
            let s = l.b.use_var(lanes[0]);
            let m = l.min_max_f64(max, s, x);
            l.b.def_var(lanes[0], m);
            Ok(())
        })?;
        let mut acc = self.b.use_var(lanes[0]);
        for lane in &lanes[1..] {
            let x = self.b.use_var(*lane);
            acc = self.min_max_f64(max, acc, x);
        }
        for lane in lanes {
            self.b.release_var(lane);
        }
        // One element is its own fold (a NaN keeps its bits).
        let single = self.icmp_imm(IntCC::Eq, n, 1);
        let acc = self.b.select(single, first, acc);
        let out = self.b.declare_var(Ty::F64);
        self.b.def_var(out, acc);
        let zero = self.b.fconst(0.0);
        let is_zero = self.b.fcmp(FloatCC::Eq, acc, zero);
        self.if_else(
            is_zero,
            &mut |l| {
                // Downwards, the last zero met is the first in index order.
                l.counted_loop(z, n, true, &mut |l, i| {
                    let x = l.load_elem(ptr, i, Scalar::F64);
                    let cur = l.b.use_var(out);
                    let zero = l.b.fconst(0.0);
                    let at_zero = l.b.fcmp(FloatCC::Eq, x, zero);
                    let r = l.b.select(at_zero, x, cur);
                    l.b.def_var(out, r);
                    Ok(())
                })
            },
            &mut |_| Ok(()),
        )?;
        let r = self.b.use_var(out);
        self.b.release_var(out);
        Ok(r)
    }

    /// `max(a, b)` (`max`) or `min(a, b)` of `f64`s as the interpreter
    /// defines them: NaN if either is NaN, else the larger (smaller) one,
    /// the first when they compare equal (so `min(0.0, -0.0) = 0.0`).
    pub(super) fn min_max_f64(&mut self, max: bool, a: E::Value, b: E::Value) -> E::Value {
        let cc = if max { FloatCC::Gt } else { FloatCC::Lt };
        let pick_b = self.b.fcmp(cc, b, a);
        let r = self.b.select(pick_b, b, a);
        let uno = self.b.fcmp(FloatCC::Uno, a, b);
        let nan = self.b.fconst(f64::NAN);
        self.b.select(uno, nan, r)
    }

    /// Checks `indices` against the leading axes of `a` and returns the
    /// row-major offset (in units of the remaining sub-array).
    pub(super) fn checked_offset(&mut self, a: &Arr<E::Value>, indices: &[Atom], name: &str) -> Result<E::Value> {
        if indices.is_empty() || indices.len() > a.dims.len() {
            return Err(self.malformed(format!("{} indices into an array of rank {}", indices.len(), a.dims.len())));
        }
        let mut off: Option<E::Value> = None;
        for (axis, idx) in indices.iter().enumerate() {
            let i = self.scalar(idx)?;
            let d = self.check_index(i, a.dims[axis], name, axis)?;
            off = Some(match off {
                None => i,
                Some(o) => {
                    let m = self.b.int(IntOp::Mul, o, d);
                    self.b.int(IntOp::Add, m, i)
                }
            });
        }
        off.ok_or_else(|| self.malformed("an index without indices"))
    }

    /// Checks `0 <= i < d` for axis `axis` of the array `name` (`d` its
    /// extent) unless that is known here; returns the extent as known
    /// (`Known::canon`).
    fn check_index(&mut self, i: E::Value, d: E::Value, name: &str, axis: usize) -> Result<E::Value> {
        let d = self.known.canon(d);
        if !self.known_in_bounds(i, d) {
            let ok = self.b.icmp(IntCC::Ult, i, d);
            self.check(ok, Fault::IndexOutOfBounds { array: name, axis }, &[i, d])?;
        }
        Ok(d)
    }

    /// True when `0 <= i < d` is known here: `i` is the index of an
    /// enclosing counted loop over `0..n` and `n` is `d`, or was checked equal
    /// to it; or `i` is a literal and `d` a larger literal or a size checked
    /// equal to one (`p[k, 7]` after `p`'s axis was checked to be 8: such
    /// checks inside loops are invariant branches, which LLVM's loop
    /// unswitching would otherwise copy loops for); or `i` is the index of
    /// a counted loop whose bound is itself the index of an enclosing one
    /// over `0..d`, through at most [`TRIANGULAR_DEPTH`] such bounds: in
    /// the triangular nest `for r < d => sum(for c < r => x[c])`, `c < r
    /// < d` (packed triangular storage, Cholesky-like loops), and `for c <
    /// r + 1` (`c <= r < d`, [`Lower::successors`]); or `i` is a point
    /// `j` to `j + m - 1` of a loop over `0..d` run `m` iterations at a
    /// time (`0 <= j <= d - m`), or one it leaves over
    /// ([`super::Halving`]). Each step
    /// follows the first bound that is itself an index, so the query is
    /// linear in the loop depth.
    pub(super) fn known_in_bounds(&self, i: E::Value, d: E::Value) -> bool {
        if let (Some(c), Some(m)) = (self.known.const_value(i), self.known.const_value(d)) {
            if (0..m).contains(&c) {
                return true;
            }
        }
        // The points `j`, `j + 1` of a group of iterations of a loop over
        // `0..n` run several at a time, `0 <= j <= n - 2` (the others are
        // `Below`).
        let point = |v: E::Value| match self.halving.get(&v) {
            Some(&super::Halving::Point(n, _) | &super::Halving::Twice(n, _)) => self.bound_is(n, d),
            _ => false,
        };
        if point(i) || self.successors.get(&i).is_some_and(|&j| point(j)) {
            return true;
        }
        if matches!(self.halving.get(&i), Some(&super::Halving::Below(n)) if self.bound_is(n, d)) {
            return true;
        }
        if self.below_remainder(i).is_some_and(|(n, _)| self.bound_is(n, d)) {
            return true;
        }
        let mut below = i;
        for _ in 0..=TRIANGULAR_DEPTH {
            let mut bound = None;
            for &(j, n) in &self.in_bounds {
                if j == below {
                    if self.bound_is(n, d) {
                        return true;
                    }
                    // An index has at most two facts (a sum's unrolled
                    // part also bounds it by a multiple of eight). `below
                    // < r + 1` is `below <= r`: as good as `below < r`
                    // once `r < m`, `r` being an index.
                    let n = self.successors.get(&n).copied().unwrap_or(n);
                    if bound.is_none() && self.in_bounds.iter().any(|&(k, _)| k == n) {
                        bound = Some(n);
                    }
                }
            }
            // 0 <= below < n, and (next round) 0 <= n < m: below < m.
            match bound {
                Some(n) => below = n,
                None => return false,
            }
        }
        false
    }

    /// True when an index known to be below `n` (`0 <= i < n`, so `n >
    /// 0`) is below `d`: `n` is `d` or was checked equal to it, or `n` is
    /// `0` or `d` (`Lower::zero_or`).
    fn bound_is(&self, n: E::Value, d: E::Value) -> bool {
        self.known.same(n, d) || self.zero_or.get(&n).is_some_and(|&m| self.known.same(m, d))
    }

    /// True when every index known only to be below `n` (`0 <= i < n`)
    /// is below `d`: `n` is `d` or was checked equal to it, or `n` is an
    /// enclosing index, or such an index plus one, known below `d`
    /// ([`Self::known_in_bounds`], whose chain this extends by one step).
    pub(super) fn bound_within(&self, n: E::Value, d: E::Value) -> bool {
        if self.bound_is(n, d) {
            return true;
        }
        let r = self.successors.get(&n).copied().unwrap_or(n);
        self.in_bounds.iter().any(|&(k, _)| k == r) && self.known_in_bounds(r, d)
    }

    /// Lowers `lower`, a `for` loop, a sum or a comprehension over
    /// `index` whose body is `body`, with the addresses of the rows
    /// `a[p..]` that the statements at the top of `body` read or add into
    /// along the index (`x = a[p.., index]`, `a[p.., index] += v`, `a` an
    /// array of `f64`s bound outside the body and not mutable, `p..`
    /// immutable values from outside known in bounds) computed first,
    /// once, before the loop: the body's accesses use them
    /// ([`Self::element_address`]). Cranelift does not move the row's
    /// offset out of the loop itself: a triangle's row `sum(for c < r =>
    /// l[k, r, c] * x[c])` multiplied and added it, from spilled operands,
    /// for every element.
    pub(super) fn hoist_loop_rows<T>(
        &mut self,
        index: VarId,
        body: &Block,
        lower: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let mark = self.loop_rows.len();
        // What the body's top-level statements may use of what it binds:
        // its index and its top-level bindings (those of nested blocks
        // are not in scope there).
        let mut inside: HashSet<VarId> = HashSet::from([index]);
        for s in &body.stmts {
            if let StmtKind::Let { vars, .. } = &s.kind {
                inside.extend(vars.iter().copied());
            }
        }
        for s in &body.stmts {
            let (array, indices) = match &s.kind {
                StmtKind::Let { expr: Expr::Index { array, indices }, .. } => (*array, indices),
                StmtKind::AccAdd { acc, indices, .. } => (*acc, indices),
                _ => continue,
            };
            let Some((last, prefix)) = indices.split_last() else { continue };
            // (A mutable index may be assigned in the body.)
            let outside = |a: &Atom| match a {
                Atom::I64(_) => true,
                Atom::Var(v) => !inside.contains(v) && !self.f.var(*v).mutable,
                _ => false,
            };
            if *last != Atom::Var(index)
                || prefix.is_empty()
                || self.var_ty(array)?.rank as usize != indices.len()
                || inside.contains(&array)
                || self.f.var(array).mutable
                || !prefix.iter().all(outside)
                || self.loop_rows[mark..].iter().any(|(a, p, _)| *a == array && p == prefix)
            {
                continue;
            }
            if let Some(row) = self.known_row_address(array, prefix)? {
                self.loop_rows.push((array, prefix.to_vec(), row));
            }
        }
        let lowered = lower(self);
        self.loop_rows.truncate(mark);
        lowered
    }

    /// The address of the row `array[p..]` (`p..` being `prefix`; the
    /// array itself when there is none) of an array of `f64`s when every
    /// index of `prefix` is known in bounds (no check is emitted), or
    /// `None`.
    pub(super) fn known_row_address(&mut self, array: VarId, prefix: &[Atom]) -> Result<Option<E::Value>> {
        if self.var_ty(array)?.elem != Scalar::F64 {
            return Ok(None);
        }
        let a = self.array(array)?;
        if prefix.len() >= a.dims.len() {
            return Ok(None);
        }
        for (axis, p) in prefix.iter().enumerate() {
            let i = self.scalar(p)?;
            if !self.known_in_bounds(i, self.known.canon(a.dims[axis])) {
                return Ok(None);
            }
        }
        if prefix.is_empty() {
            return Ok(Some(a.ptr));
        }
        // Known in bounds, so `checked_offset` emits no check.
        let off = self.checked_offset(&a, prefix, &self.var_name(array))?;
        let e = self.b.int(IntOp::Mul, off, a.dims[prefix.len()]);
        Ok(Some(self.b.elem_addr(a.ptr, e, Scalar::F64)))
    }

    /// The address of the element `a[indices]` of `a`, the array bound to
    /// `array` (every axis indexed, each checked unless known in bounds):
    /// from its row's address when the loop being lowered computed it
    /// before ([`Self::hoist_loop_rows`]), the last index checked alone.
    pub(super) fn element_address(
        &mut self,
        array: VarId,
        a: &Arr<E::Value>,
        indices: &[Atom],
        elem: Scalar,
        name: &str,
    ) -> Result<E::Value> {
        if let Some((last, prefix)) = indices.split_last() {
            let row = self.loop_rows.iter().rev().find(|(r, p, _)| *r == array && p == prefix).map(|(_, _, row)| *row);
            if let Some(row) = row {
                let i = self.scalar(last)?;
                self.check_index(i, a.dims[prefix.len()], name, prefix.len())?;
                return Ok(self.b.elem_addr(row, i, elem));
            }
        }
        let off = self.checked_offset(a, indices, name)?;
        Ok(self.b.elem_addr(a.ptr, off, elem))
    }

    fn index(&mut self, array: VarId, indices: &[Atom]) -> Result<Val<E::Value>> {
        let t = self.var_ty(array)?;
        let a = self.array(array)?;
        let name = self.var_name(array);
        let k = indices.len();
        if k == a.dims.len() {
            let addr = self.element_address(array, &a, indices, t.elem, &name)?;
            let scope = self.data_scope(array);
            self.b.set_data_scope(scope);
            let x = self.b.load(Ty::of(t.elem), addr, 0, Mem::Data);
            self.b.set_data_scope(None);
            Ok(Val::S(x))
        } else {
            let off = self.checked_offset(&a, indices, &name)?;
            let rest = a.dims[k..].to_vec();
            let stride = self.product(&rest);
            let eoff = self.b.int(IntOp::Mul, off, stride);
            let ptr = self.b.elem_addr(a.ptr, eoff, t.elem);
            Ok(Val::A(Arr { ptr, dims: rest }))
        }
    }

    fn slice(&mut self, array: VarId, lo: &Atom, hi: &Atom) -> Result<Arr<E::Value>> {
        let t = self.var_ty(array)?;
        let a = self.array(array)?;
        let lo = self.scalar(lo)?;
        let hi = self.scalar(hi)?;
        let n = a.dims[0];
        // A prefix `a[0:hi]` whose end is known not past the extent needs no
        // check: `hi` is the extent, an index below it, or such an index
        // plus one (0 <= hi <= n, [`Self::bound_within`]), the slices of
        // the rows of a triangle.
        let known_prefix = self.known.const_value(lo) == Some(0) && self.bound_within(hi, self.known.canon(n));
        if !known_prefix {
            // 0 <= lo <= hi <= n, as two unsigned comparisons.
            let ok1 = self.b.icmp(IntCC::Ule, hi, n);
            let ok2 = self.b.icmp(IntCC::Ule, lo, hi);
            let ok = self.b.int(IntOp::And, ok1, ok2);
            let name = self.var_name(array);
            self.check(ok, Fault::SliceOutOfRange { array: &name }, &[lo, hi, n])?;
        }
        let rest = a.dims[1..].to_vec();
        let stride = self.product(&rest);
        let eoff = self.b.int(IntOp::Mul, lo, stride);
        let ptr = self.b.elem_addr(a.ptr, eoff, t.elem);
        // `a[0:hi]` is `hi` long: the same value, so that a loop counting
        // to `hi` reads the slice known in bounds.
        let len = if self.known.const_value(lo) == Some(0) { hi } else { self.memo_sub(hi, lo) };
        let mut dims = vec![len];
        dims.extend(rest);
        Ok(Arr { ptr, dims })
    }

    /// `reshape array dims`: the same elements under new extents (a view),
    /// after checking that no extent is negative and that their product is
    /// the element count (0 when an extent is 0, whatever the others).
    fn reshape(&mut self, array: VarId, dims: &[Atom]) -> Result<Arr<E::Value>> {
        let a = self.array(array)?;
        let name = self.var_name(array);
        let mut vals = Vec::with_capacity(dims.len());
        for d in dims {
            let v = self.scalar(d)?;
            if !matches!(d, Atom::I64(k) if *k >= 0) {
                let ok = self.icmp_imm(IntCC::Sge, v, 0);
                self.check(ok, Fault::NegativeExtent { array: &name }, &[v])?;
            }
            vals.push(v);
        }
        let count = self.product(&a.dims);
        let (p, ovf) = self.checked_product(&vals);
        let mut ok = self.b.icmp(IntCC::Eq, p, count);
        if let Some(o) = ovf {
            // A shape with an extent 0 has no elements (the wrapped product
            // is then 0 too), however large the others are.
            let mut empty = None;
            for &v in &vals {
                let zero = self.icmp_imm(IntCC::Eq, v, 0);
                empty = Some(match empty {
                    Some(e) => self.b.int(IntOp::Or, e, zero),
                    None => zero,
                });
            }
            let t = self.b.iconst(Ty::Bool, 1);
            let no = self.b.int(IntOp::Xor, o, t);
            let fits = match empty {
                Some(e) => self.b.int(IntOp::Or, no, e),
                None => no,
            };
            ok = self.b.int(IntOp::And, ok, fits);
        }
        self.check(ok, Fault::ReshapeMismatch { array: &name }, &[p, count])?;
        Ok(Arr { ptr: a.ptr, dims: vals })
    }

    /// `array with [indices] = value`: a copy of `array` (indices checked)
    /// with the element, or the row (its shape checked), replaced; or
    /// `array` itself, written, when `in_place` (the array is owned and
    /// dead: [`super::analysis::InPlace`]).
    fn update(&mut self, array: VarId, indices: &[Atom], value: &Atom, in_place: bool) -> Result<Arr<E::Value>> {
        let t = self.var_ty(array)?;
        let a = self.array(array)?;
        let name = self.var_name(array);
        let off = self.checked_offset(&a, indices, &name)?;
        let k = indices.len();
        let row = if k < a.dims.len() {
            let row = self.array_atom(value)?;
            let rest = &a.dims[k..];
            if row.dims.len() != rest.len() {
                return Err(self.malformed("an update with a row of the wrong rank"));
            }
            for (axis, (&r, &d)) in row.dims.iter().zip(rest).enumerate() {
                if !self.known.same(r, d) {
                    let what = format!("the row assigned into `{name}` must have the shape of its rows: axis {axis}");
                    let ok = self.b.icmp(IntCC::Eq, r, d);
                    self.check(ok, Fault::SizeMismatch { what: &what }, &[r, d])?;
                }
            }
            Some(row)
        } else {
            None
        };
        let ptr = if in_place {
            a.ptr
        } else {
            let count = self.product(&a.dims);
            let ptr = self.alloc_elems(count, t.elem, None)?;
            self.copy_elems(ptr, a.ptr, count, t.elem)?;
            ptr
        };
        match row {
            None => {
                let v = self.scalar(value)?;
                self.store_elem(ptr, off, t.elem, v);
            }
            Some(row) => {
                let stride = self.product(&a.dims[k..]);
                let eoff = self.b.int(IntOp::Mul, off, stride);
                let dst = self.b.elem_addr(ptr, eoff, t.elem);
                self.copy_elems(dst, row.ptr, stride, t.elem)?;
            }
        }
        Ok(Arr { ptr, dims: a.dims })
    }

    fn reduce(&mut self, op: ReduceOp, array: VarId) -> Result<E::Value> {
        let t = self.var_ty(array)?;
        let a = self.array(array)?;
        if a.dims.len() != 1 {
            return Err(self.malformed("reduction of an array of rank other than 1"));
        }
        let n = a.dims[0];
        if (op, t.elem) == (ReduceOp::Sum, Scalar::F64) {
            return self.sum_f64_array(a.ptr, n);
        }
        if matches!(op, ReduceOp::Max | ReduceOp::Min) && t.elem == Scalar::F64 {
            let ok = self.icmp_imm(IntCC::Sgt, n, 0);
            let name = self.var_name(array);
            self.check(ok, Fault::EmptyReduction { op, array: &name }, &[])?;
            return self.extreme_f64(op == ReduceOp::Max, a.ptr, n);
        }
        let acc = self.b.declare_var(Ty::of(t.elem));
        let start = match op {
            // An `i64` sum (wrapping: any order gives the same result).
            ReduceOp::Sum => {
                let z = self.iconst(0);
                self.b.def_var(acc, z);
                self.iconst(0)
            }
            ReduceOp::Max | ReduceOp::Min => return Err(self.malformed("maximum/minimum of a non-f64 array")),
        };
        let elem = t.elem;
        self.counted_loop(start, n, false, &mut |l, i| {
            let x = l.load_elem(a.ptr, i, elem);
            let s = l.b.use_var(acc);
            let r = l.b.int(IntOp::Add, s, x);
            l.b.def_var(acc, r);
            Ok(())
        })?;
        let r = self.b.use_var(acc);
        self.b.release_var(acc);
        Ok(r)
    }

    /// The array literal `[elems..]` of `elem_ty` elements; a literal of
    /// rows is allocated at `place` when it fits (`placed.rs`), and a row
    /// already at its place there is not copied.
    fn array_lit(
        &mut self,
        elem_ty: Type,
        elems: &[Atom],
        place: Option<(E::Value, E::Value)>,
    ) -> Result<Arr<E::Value>> {
        let elem = elem_ty.elem;
        let n = self.iconst(elems.len() as i64);
        if elem_ty.is_scalar() {
            let ptr = self.alloc_elems(n, elem, None)?;
            for (k, e) in elems.iter().enumerate() {
                let v = self.scalar(e)?;
                self.b.store(Ty::of(elem), v, ptr, (k as i64 * elem_size(elem)) as i32, Mem::Data);
            }
            return Ok(Arr { ptr, dims: vec![n] });
        }
        let rows: Vec<Arr<E::Value>> = elems.iter().map(|e| self.array_atom(e)).collect::<Result<_>>()?;
        let Some(first) = rows.first().cloned() else {
            let z = self.iconst(0);
            let ptr = self.alloc_elems(z, elem, None)?;
            let mut dims = vec![n];
            dims.extend(std::iter::repeat_n(z, elem_ty.rank as usize));
            return Ok(Arr { ptr, dims });
        };
        for (r, row) in rows.iter().enumerate().skip(1) {
            let ri = self.iconst(r as i64);
            self.check_regular(ri, &row.dims, &first.dims)?;
        }
        let (row_count, ovf) = self.checked_product(&first.dims);
        let (total, o2) = self.b.umul_overflow(row_count, n);
        let ovf = match ovf {
            Some(o) => self.b.int(IntOp::Or, o, o2),
            None => o2,
        };
        self.place_next = place;
        let ptr = self.alloc_elems(total, elem, Some(ovf));
        self.place_next = None;
        let ptr = ptr?;
        for (r, row) in rows.iter().enumerate() {
            let ri = self.iconst(r as i64);
            let off = self.b.int(IntOp::Mul, ri, row_count);
            let dst = self.b.elem_addr(ptr, off, elem);
            if place.is_some() {
                // A row computed at its place in the literal is there.
                let elsewhere = self.b.icmp(IntCC::Ne, dst, row.ptr);
                self.if_else(elsewhere, &mut |l| l.copy_elems(dst, row.ptr, row_count, elem), &mut |_| Ok(()))?;
            } else {
                self.copy_elems(dst, row.ptr, row_count, elem)?;
            }
        }
        let mut dims = vec![n];
        dims.extend(first.dims.iter().copied());
        Ok(Arr { ptr, dims })
    }

    /// Checks a trip count: negative is an error.
    pub(super) fn check_size(&mut self, n: E::Value) -> Result<()> {
        let ok = self.icmp_imm(IntCC::Sge, n, 0);
        self.check(ok, Fault::NegativeSize, &[n])
    }

    /// The value of a static extent (`shape::StaticDim`) before a
    /// comprehension; a negative value (a row cannot have one) becomes 0.
    pub(super) fn static_dim(&mut self, d: &arrayad_ir::shape::StaticDim) -> Result<E::Value> {
        use arrayad_ir::shape::StaticDim;
        let v = match d {
            StaticDim::Lit(n) => self.memo_const(*n),
            StaticDim::Var(v) => self.scalar(&Atom::Var(*v))?,
            StaticDim::DimOf(a, axis) => {
                let arr = self.array(*a)?;
                match arr.dims.get(*axis as usize) {
                    Some(d) => *d,
                    None => return Err(self.malformed("a static extent beyond the array's rank")),
                }
            }
            StaticDim::Bin(op, a, b) => {
                let (x, y) = (self.static_dim(a)?, self.static_dim(b)?);
                let op = match op {
                    arrayad_ir::BinOp::Add => IntOp::Add,
                    arrayad_ir::BinOp::Sub => IntOp::Sub,
                    _ => IntOp::Mul,
                };
                self.b.int(op, x, y)
            }
        };
        let zero = self.iconst(0);
        Ok(self.b.int(IntOp::SMax, v, zero))
    }

    /// `count` rows of extents `dims` and elements `elem`, in the
    /// caller's buffer `dest` when it offers one (`Lower::dest_next`), else
    /// at `place` when it fits (`Lower::place_next`): the rows' pointer and
    /// the elements of one row. A product that overflows fails as an
    /// allocation too large.
    fn alloc_rows(
        &mut self,
        dims: &[E::Value],
        count: E::Value,
        elem: Scalar,
        dest: Option<usize>,
        place: Option<(E::Value, E::Value)>,
    ) -> Result<(E::Value, E::Value)> {
        let (row, ovf) = self.checked_product(dims);
        let (total, o2) = self.b.umul_overflow(row, count);
        let ovf = match ovf {
            Some(o) => self.b.int(IntOp::Or, o, o2),
            None => o2,
        };
        self.dest_next = dest;
        self.place_next = place;
        let ptr = self.alloc_elems(total, elem, Some(ovf));
        self.dest_next = None;
        self.place_next = None;
        Ok((ptr?, row))
    }

    fn build(&mut self, vars: &[VarId], n: &Atom, index: VarId, body: &Block) -> Result<Vec<Val<E::Value>>> {
        // Results computed in the caller's buffers (`destinations`), or
        // rows of an enclosing comprehension computed in place
        // (`placed.rs`): their allocations below, before the body's, take
        // them.
        let places: Vec<Option<(E::Value, E::Value)>> =
            (0..body.results.len()).map(|k| vars.get(k).and_then(|v| self.places.remove(v))).collect();
        let dest = self.dest_next.take();
        let rows_dest = std::mem::take(&mut self.dest_rows);
        let dests: Vec<Option<usize>> = match body.results.len() {
            1 => vec![dest],
            k if rows_dest.len() == k => rows_dest,
            k => vec![None; k],
        };
        let n = self.scalar(n)?;
        self.check_size(n)?;
        // A chunk of a parallel map: iterations `lo..hi` of `0..n`, rows
        // at `i - lo` (`Lower::chunk_range`).
        let range = self.chunk_range.take();
        if let (Some(blocks), true) = (range, self.chunk_blocks) {
            return Ok(self.block_sums(n, index, body, blocks, &dests)?.into_iter().map(Val::A).collect());
        }
        let (start, rows) = match range {
            Some((lo, hi)) => (lo, self.b.int(IntOp::Sub, hi, lo)),
            None => (self.iconst(0), n),
        };
        let mut outs: Vec<BuildOut<E>> = Vec::new();
        for (((k, r), dest), place) in body.results.iter().enumerate().zip(dests).zip(places) {
            let t = self.f.atom_ty(r);
            if t.is_scalar() {
                self.dest_next = dest;
                self.place_next = place;
                let ptr = self.alloc_elems(rows, t.elem, None);
                self.place_next = None;
                let ptr = ptr?;
                outs.push(BuildOut::Scalar { ptr, elem: t.elem });
            } else {
                let z = self.iconst(0);
                let ptr = self.b.declare_var(Ty::Ptr);
                let null = self.b.iconst(Ty::Ptr, 0);
                self.b.def_var(ptr, null);
                let row_count = self.b.declare_var(Ty::I64);
                self.b.def_var(row_count, z);
                // The row shape if the loop runs zero times: known statically
                // (`shape::static_row_dims`), else 0 in every dimension.
                let known = arrayad_ir::shape::static_row_dims(self.f, self.program, index, body, k)
                    .filter(|dims| dims.len() == t.rank as usize);
                let initial = match &known {
                    Some(dims) => dims.iter().map(|d| self.static_dim(d)).collect::<Result<Vec<_>>>()?,
                    None => vec![z; t.rank as usize],
                };
                // A chunk of a parallel map of array rows: the rows' shape
                // is the static one (`crate::parallel::rows_of`), so the
                // chunk's rows are allocated before its first iteration, in
                // the runtime's destination for them.
                if range.is_some() {
                    if known.is_none() {
                        return Err(self.malformed("a parallel map of rows of no static shape"));
                    }
                    let (p, rc) = self.alloc_rows(&initial, rows, t.elem, dest, place)?;
                    self.b.def_var(ptr, p);
                    self.b.def_var(row_count, rc);
                }
                let row_dims: Vec<E::Var> = initial
                    .into_iter()
                    .map(|d| {
                        let v = self.b.declare_var(Ty::I64);
                        self.b.def_var(v, d);
                        v
                    })
                    .collect();
                outs.push(BuildOut::Array { ptr, row_dims, row_count, elem: t.elem, dest, place });
            }
        }
        let any_array = outs.iter().any(|o| matches!(o, BuildOut::Array { .. }));
        // A comprehension whose iterations push arrays keeps their memory
        // and pushes them by reference: its iterations are independent and
        // typically small (a row per point), where copying each residual
        // costs more than the memory it would give back; the sequential
        // loops (`loop`, `for` statements, `while`), whose states evolve
        // over many iterations, release and copy.
        let keep = self
            .blocks
            .survivors(self.f, body)
            .filter(|_| self.blocks.allocates(body) && !self.blocks.pushes_arrays(self.f, body));
        // The arena state every iteration returns to (for array rows: taken
        // again once the result is allocated in iteration 0).
        let mark_vars: Option<[E::Var; 3]> = if keep.is_some() {
            let m = self.arena_mark();
            let tys = [Ty::Ptr, Ty::Ptr, Ty::Ptr];
            let mut vars = Vec::new();
            for (v, t) in m.iter().zip(tys) {
                let var = self.b.declare_var(t);
                self.b.def_var(var, *v);
                vars.push(var);
            }
            Some([vars[0], vars[1], vars[2]])
        } else {
            None
        };
        let end = range.map_or(n, |(_, hi)| hi);
        // A body of loads along the index and arithmetic, of `f64`
        // results, runs on pairs of iterations where the backend has no
        // vectoriser (`pairs.rs`).
        let pair_outs: Option<Vec<E::Value>> = outs
            .iter()
            .map(|o| match o {
                BuildOut::Scalar { ptr, elem: Scalar::F64 } => Some(*ptr),
                _ => None,
            })
            .collect();
        let plan = match pair_outs {
            Some(_) if self.b.f64_pairs() && keep.is_none() && body.stmts.len() <= super::pairs::PAIRED_MAX_STMTS => {
                self.pair_plan(n, index, body, false)?
            }
            _ => None,
        };
        let start = match (plan, pair_outs) {
            (Some(plan), Some(ptrs)) => self.paired_build((start, end), range.map(|(lo, _)| lo), &ptrs, body, &plan)?,
            _ => start,
        };
        let releasing = u32::from(keep.is_some());
        self.releasing += releasing;
        // The array rows computed in their destination (`placed.rs`).
        let super::placed::Placed { rows: placed, literals } = super::placed::placed(self.f, body);
        let placed: Vec<(usize, VarId)> =
            placed.into_iter().filter(|(k, _)| matches!(outs.get(*k), Some(BuildOut::Array { .. }))).collect();
        let literals: Vec<super::placed::PlacedLiteral> =
            literals.into_iter().filter(|(k, ..)| matches!(outs.get(*k), Some(BuildOut::Array { .. }))).collect();
        self.hoist_loop_rows(index, body, |l| {
            l.counted_loop_within(start, end, n, false, &mut |l, i| {
                l.def(index, Val::S(i))?;
                let at = match range {
                    Some((lo, _)) => l.b.int(IntOp::Sub, i, lo),
                    None => i,
                };
                // Each placed row's destination: row `at` of its result
                // (at a null address until the result is allocated).
                let row_place = |l: &mut Self, k: usize| match outs.get(k) {
                    Some(BuildOut::Array { ptr, row_count, elem, .. }) => {
                        let base = l.b.use_var(*ptr);
                        let rc = l.b.use_var(*row_count);
                        let size = l.iconst(elem_size(*elem));
                        let bytes = l.b.int(IntOp::Mul, rc, size);
                        let off = l.b.int(IntOp::Mul, at, bytes);
                        Some((l.b.ptr_offset(base, off), bytes))
                    }
                    _ => None,
                };
                for &(k, y) in &placed {
                    if let Some(place) = row_place(l, k) {
                        l.places.insert(y, place);
                    }
                }
                // A literal's rows: part `u` of its destination each, at a
                // null address while the destination is.
                for (k, lit, rows) in &literals {
                    let Some((dst, bytes)) = row_place(l, *k) else { continue };
                    l.places.insert(*lit, (dst, bytes));
                    let part = l.div_by_literal(false, bytes, rows.len() as i64);
                    let null = l.b.iconst(Ty::Ptr, 0);
                    let exists = l.b.icmp(IntCC::Ne, dst, null);
                    for (u, y) in rows.iter().enumerate() {
                        if let Some(y) = y {
                            let u = l.iconst(u as i64);
                            let off = l.b.int(IntOp::Mul, u, part);
                            let at = l.b.ptr_offset(dst, off);
                            let at = l.b.select(exists, at, null);
                            l.places.insert(*y, (at, part));
                        }
                    }
                }
                let lowered = l.stmts(&body.stmts);
                for (_, y) in &placed {
                    l.places.remove(y);
                }
                for (_, lit, rows) in &literals {
                    l.places.remove(lit);
                    for y in rows.iter().flatten() {
                        l.places.remove(y);
                    }
                }
                lowered?;
                let vals: Vec<Val<E::Value>> = body.results.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
                if any_array && range.is_some() {
                    // Every row of the static shape the chunk allocated.
                    for (o, v) in outs.iter().zip(&vals) {
                        if let (BuildOut::Array { row_dims, .. }, Val::A(row)) = (o, v) {
                            let known: Vec<E::Value> = row_dims.iter().map(|v| l.b.use_var(*v)).collect();
                            l.check_regular(i, &row.dims, &known)?;
                        }
                    }
                } else if any_array {
                    let first = l.icmp_imm(IntCC::Eq, i, 0);
                    l.if_else(
                        first,
                        &mut |l| {
                            for (o, v) in outs.iter().zip(&vals) {
                                if let (BuildOut::Array { ptr, row_dims, row_count, elem, dest, place }, Val::A(row)) =
                                    (o, v)
                                {
                                    for (var, d) in row_dims.iter().zip(&row.dims) {
                                        l.b.def_var(*var, *d);
                                    }
                                    let (p, rc) = l.alloc_rows(&row.dims, n, *elem, *dest, *place)?;
                                    l.b.def_var(*ptr, p);
                                    l.b.def_var(*row_count, rc);
                                }
                            }
                            if let Some(mv) = &mark_vars {
                                let m = l.arena_mark();
                                for (var, v) in mv.iter().zip(m) {
                                    l.b.def_var(*var, v);
                                }
                            }
                            Ok(())
                        },
                        &mut |l| {
                            for (o, v) in outs.iter().zip(&vals) {
                                if let (BuildOut::Array { row_dims, .. }, Val::A(row)) = (o, v) {
                                    let first: Vec<E::Value> = row_dims.iter().map(|v| l.b.use_var(*v)).collect();
                                    l.check_regular(i, &row.dims, &first)?;
                                }
                            }
                            Ok(())
                        },
                    )?;
                }
                for (k, (o, v)) in outs.iter().zip(&vals).enumerate() {
                    match (o, v) {
                        (BuildOut::Scalar { ptr, elem }, Val::S(x)) => l.store_elem(*ptr, at, *elem, *x),
                        (BuildOut::Array { ptr, row_count, elem, .. }, Val::A(row)) => {
                            let base = l.b.use_var(*ptr);
                            let rc = l.b.use_var(*row_count);
                            let off = l.b.int(IntOp::Mul, at, rc);
                            let dst = l.b.elem_addr(base, off, *elem);
                            if placed.iter().any(|(p, _)| *p == k) || literals.iter().any(|(p, ..)| *p == k) {
                                // Computed there already, unless its
                                // destination was not taken.
                                let elsewhere = l.b.icmp(IntCC::Ne, dst, row.ptr);
                                l.if_else(elsewhere, &mut |l| l.copy_elems(dst, row.ptr, rc, *elem), &mut |_| Ok(()))?;
                            } else {
                                l.copy_elems(dst, row.ptr, rc, *elem)?;
                            }
                        }
                        _ => return Err(l.malformed("a build result of the wrong kind")),
                    }
                }
                if let (Some(mv), Some(keep)) = (&mark_vars, &keep) {
                    let m: Mark<E::Value> = mv.map(|v| l.b.use_var(v));
                    l.arena_release_keeping(&m, keep)?;
                }
                Ok(())
            })
        })?;
        self.releasing -= releasing;
        let vals = outs
            .iter()
            .map(|o| match o {
                BuildOut::Scalar { ptr, .. } => Val::A(Arr { ptr: *ptr, dims: vec![rows] }),
                BuildOut::Array { ptr, row_dims, .. } => {
                    let ptr = self.b.use_var(*ptr);
                    let mut dims = vec![rows];
                    dims.extend(row_dims.iter().map(|v| self.b.use_var(*v)));
                    Val::A(Arr { ptr, dims })
                }
            })
            .collect();
        for o in outs {
            if let BuildOut::Array { ptr, row_dims, row_count, .. } = o {
                self.b.release_var(ptr);
                self.b.release_var(row_count);
                row_dims.into_iter().for_each(|v| self.b.release_var(v));
            }
        }
        mark_vars.into_iter().flatten().for_each(|v| self.b.release_var(v));
        Ok(vals)
    }

    fn loop_(
        &mut self,
        n: &Atom,
        index: VarId,
        states: &[VarId],
        init: &[Atom],
        body: &Block,
    ) -> Result<Vec<Val<E::Value>>> {
        if states.len() != init.len() || states.len() != body.results.len() {
            return Err(self.malformed("loop states, initial values and results differ in number"));
        }
        let n = self.scalar(n)?;
        self.check_size(n)?;
        self.def_states(states, init)?;
        // Released after every iteration but for the array states (their
        // new values) and the outer mutable arrays the body assigns.
        let keep: Option<Vec<VarId>> =
            self.blocks.survivors(self.f, body).filter(|_| self.blocks.allocates(body)).map(|mut outer| {
                let mut k: Vec<VarId> = states.iter().copied().filter(|s| self.f.ty(*s).is_array()).collect();
                k.append(&mut outer);
                k
            });
        let mark = if keep.is_some() { Some(self.arena_mark()) } else { None };
        let zero = self.iconst(0);
        let releasing = u32::from(keep.is_some());
        self.releasing += releasing;
        self.counted_loop(zero, n, false, &mut |l, i| {
            l.def(index, Val::S(i))?;
            l.stmts(&body.stmts)?;
            let vals: Vec<Val<E::Value>> = body.results.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
            for (s, v) in states.iter().zip(vals) {
                l.def(*s, v)?;
            }
            if let (Some(m), Some(keep)) = (&mark, &keep) {
                l.arena_release_keeping(m, keep)?;
            }
            Ok(())
        })?;
        self.releasing -= releasing;
        let vals = states.iter().map(|s| self.use_ir_var(*s)).collect();
        states.iter().for_each(|s| self.release_ir_var(*s));
        vals
    }

    /// Defines loop states from their initial values; a state whose
    /// updates run in place starts from a copy of its value unless that
    /// value was the loop's to take ([`super::analysis::InPlace`]).
    fn def_states(&mut self, states: &[VarId], init: &[Atom]) -> Result<()> {
        for (s, a) in states.iter().zip(init) {
            let mut v = self.atom(a)?;
            if let (true, Val::A(arr)) = (self.in_place.copy_init.contains(s), &v) {
                let elem = self.var_ty(*s)?.elem;
                let count = self.product(&arr.dims);
                let ptr = self.alloc_elems(count, elem, None)?;
                self.copy_elems(ptr, arr.ptr, count, elem)?;
                v = Val::A(Arr { ptr, dims: arr.dims.clone() });
            }
            self.def(*s, v)?;
        }
        Ok(())
    }

    /// `loop states = init while cond do body`: a header block evaluates
    /// the condition; the body defines the next states and jumps back.
    /// Memory is released per iteration as for counted loops.
    fn while_(&mut self, states: &[VarId], init: &[Atom], cond: &Block, body: &Block) -> Result<Vec<Val<E::Value>>> {
        if states.len() != init.len() || states.len() != body.results.len() || cond.results.len() != 1 {
            return Err(self.malformed("while states, initial values, results or condition differ in number"));
        }
        self.def_states(states, init)?;
        let keep: Option<Vec<VarId>> = self
            .blocks
            .survivors(self.f, body)
            .filter(|_| self.blocks.allocates(body) || self.blocks.allocates(cond))
            .map(|mut outer| {
                let mut k: Vec<VarId> = states.iter().copied().filter(|s| self.f.ty(*s).is_array()).collect();
                k.append(&mut outer);
                k
            });
        let mark = if keep.is_some() { Some(self.arena_mark()) } else { None };
        let header = self.b.create_block();
        let body_blk = self.b.create_block();
        let exit = self.b.create_block();
        self.b.jump(header);
        self.b.switch_to(header);
        let memo = self.known.mark();
        self.stmts(&cond.stmts)?;
        let c = self.scalar(&cond.results[0])?;
        self.b.brif(c, body_blk, exit);
        self.b.seal(body_blk);
        self.b.switch_to(body_blk);
        let releasing = u32::from(keep.is_some());
        self.releasing += releasing;
        self.stmts(&body.stmts)?;
        self.releasing -= releasing;
        let vals: Vec<Val<E::Value>> = body.results.iter().map(|a| self.atom(a)).collect::<Result<_>>()?;
        for (s, v) in states.iter().zip(vals) {
            self.def(*s, v)?;
        }
        if let (Some(m), Some(keep)) = (&mark, &keep) {
            self.arena_release_keeping(m, keep)?;
        }
        self.b.jump(header);
        // All predecessors of the header and the exit are known now.
        self.b.seal(header);
        self.b.seal(exit);
        self.b.switch_to(exit);
        self.known.restore(memo);
        let vals = states.iter().map(|s| self.use_ir_var(*s)).collect();
        states.iter().for_each(|s| self.release_ir_var(*s));
        vals
    }

    /// `if cond then .. else ..`. Branches that only yield atoms, of
    /// scalar variables, are selects: both atoms are at hand, and a
    /// select costs no jump (`if a[i] == m then 1.0 else 0.0`, the mask
    /// of a maximum's derivative).
    fn if_expr(&mut self, vars: &[VarId], cond: &Atom, then_b: &Block, else_b: &Block) -> Result<Vec<Val<E::Value>>> {
        let c = self.scalar(cond)?;
        if then_b.results.len() != vars.len() || else_b.results.len() != vars.len() {
            return Err(self.malformed("if branches yield the wrong number of values"));
        }
        if self.select_form(vars, then_b, else_b) {
            return then_b
                .results
                .iter()
                .zip(&else_b.results)
                .map(|(a, b)| {
                    let (a, b) = (self.scalar(a)?, self.scalar(b)?);
                    Ok(Val::S(self.b.select(c, a, b)))
                })
                .collect();
        }
        let mut reprs: Vec<Repr<E>> = Vec::new();
        for v in vars {
            let t = self.var_ty(*v)?;
            reprs.push(self.fresh_repr(t));
        }
        let arm = |l: &mut Self, b: &Block| -> Result<()> {
            l.stmts(&b.stmts)?;
            let vals: Vec<Val<E::Value>> = b.results.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
            for (r, v) in reprs.iter().zip(vals) {
                l.def_repr(r, v)?;
            }
            Ok(())
        };
        self.if_else(c, &mut |l| arm(l, then_b), &mut |l| arm(l, else_b))?;
        let vals = reprs.iter().map(|r| self.use_repr(r)).collect();
        reprs.into_iter().for_each(|r| self.release_repr(r));
        Ok(vals)
    }

    /// True when `let vars = if c then then_b else else_b` is lowered as
    /// selects ([`Self::if_expr`]): neither branch has statements (each
    /// only yields atoms) and every result is a scalar.
    pub(super) fn select_form(&self, vars: &[VarId], then_b: &Block, else_b: &Block) -> bool {
        then_b.stmts.is_empty()
            && else_b.stmts.is_empty()
            && vars.iter().all(|v| self.f.vars.get(v.index()).is_some_and(|info| info.ty.is_scalar()))
    }

    /// A zero-filled `f64` array of extents `dims`.
    fn zeros(&mut self, dims: Vec<E::Value>) -> Result<Arr<E::Value>> {
        let (a, count) = self.alloc_f64(dims)?;
        self.zero_f64s(a.ptr, count)?;
        Ok(a)
    }

    /// An `f64` array of extents `dims`, not initialised (an accumulator
    /// its first loop writes whole: `first_write.rs`), and its element
    /// count.
    fn alloc_f64(&mut self, dims: Vec<E::Value>) -> Result<(Arr<E::Value>, E::Value)> {
        let (count, ovf) = self.checked_product(&dims);
        let ptr = self.alloc_elems(count, Scalar::F64, ovf)?;
        Ok((Arr { ptr, dims }, count))
    }

    fn pop(&mut self, t: Type) -> Result<Val<E::Value>> {
        if t.is_array() {
            return Ok(Val::A(self.tape_pop_array(t)?));
        }
        let tys = Self::slot_tys(t);
        let slots = self.tape_pop(&tys)?;
        Ok(self.popped_value(t, &slots))
    }

    /// The tape slots of a value of type `t`: a scalar one (a bool as an
    /// `i64` 0 or 1), an array its pointer and extents.
    pub(super) fn slot_tys(t: Type) -> Vec<Ty> {
        let first = match (t.is_scalar(), t.elem) {
            (false, _) => Ty::Ptr,
            (true, Scalar::Bool) => Ty::I64,
            (true, e) => Ty::of(e),
        };
        let mut tys = vec![first];
        tys.extend(std::iter::repeat_n(Ty::I64, t.rank as usize));
        tys
    }

    /// The value of type `t` in its popped slots ([`Self::slot_tys`]).
    pub(super) fn popped_value(&mut self, t: Type, slots: &[E::Value]) -> Val<E::Value> {
        if t.is_scalar() {
            Val::S(if t.elem == Scalar::Bool { self.b.convert(Conv::I64ToBool, slots[0]) } else { slots[0] })
        } else {
            Val::A(Arr { ptr: slots[0], dims: slots[1..].to_vec() })
        }
    }
}

/// The float comparison of `op` (`== != < <= > >=`), or `None` for another
/// operator. `!=` is true of unordered operands, the others false.
pub(super) fn float_cc(op: BinOp) -> Option<FloatCC> {
    Some(match op {
        BinOp::Eq => FloatCC::Eq,
        BinOp::Ne => FloatCC::Ne,
        BinOp::Lt => FloatCC::Lt,
        BinOp::Le => FloatCC::Le,
        BinOp::Gt => FloatCC::Gt,
        BinOp::Ge => FloatCC::Ge,
        _ => return None,
    })
}
