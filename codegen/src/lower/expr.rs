//! Lowering of the right-hand sides of `let`.

use super::analysis::{allocates, nothing_escapes};
use super::imports::Extern;
use super::memory::Mark;
use super::{clif_ty, elem_size, Arr, Lower, Repr, Result, Val};
use crate::error::CodegenError;
use arrayad_ir::{Atom, BinOp, Block, ErrorKind, Expr, ReduceOp, Scalar, Type, UnOp, VarId};
use cranelift_codegen::ir::{
    condcodes::{FloatCC, IntCC},
    types, InstBuilder, Value,
};
use cranelift_frontend::Variable;
use cranelift_module::Module;

/// The destination of one result of a `Build`.
enum BuildOut {
    /// Scalar rows: the array is allocated before the loop.
    Scalar { ptr: Value, elem: Scalar },
    /// Array rows: allocated once the first row's shape is known.
    Array { ptr: Variable, row_dims: Vec<Variable>, row_count: Variable, elem: Scalar },
}

impl<M: Module> Lower<'_, '_, M> {
    /// The values of `expr`, bound to `vars` by the caller.
    pub(super) fn expr(&mut self, vars: &[VarId], expr: &Expr) -> Result<Vec<Val>> {
        Ok(match expr {
            Expr::Atom(a) => vec![self.atom(a)?],
            Expr::Unary(op, a) => vec![Val::S(self.unary(*op, a)?)],
            Expr::Binary(op, a, b) => vec![Val::S(self.binary(*op, a, b)?)],
            Expr::Index { array, indices } => vec![self.index(*array, indices)?],
            Expr::Slice { array, lo, hi } => vec![Val::A(self.slice(*array, lo, hi)?)],
            Expr::Dim { array, axis } => {
                let a = self.array(*array)?;
                let d = a.dims.get(*axis as usize).copied().ok_or_else(|| self.malformed("dim of a missing axis"))?;
                vec![Val::S(d)]
            }
            Expr::Reduce { op, array } => vec![Val::S(self.reduce(*op, *array)?)],
            Expr::ArrayLit { elem_ty, elems } => vec![Val::A(self.array_lit(*elem_ty, elems)?)],
            Expr::Build { n, index, body } => self.build(n, *index, body)?,
            Expr::Loop { n, index, states, init, body } => self.loop_(n, *index, states, init, body)?,
            Expr::If { cond, then_branch, else_branch } => self.if_expr(vars, cond, then_branch, else_branch)?,
            Expr::Call { .. } => {
                return Err(CodegenError::Unsupported {
                    func: self.f.name.clone(),
                    message: "a call (calls must be inlined before code generation)".into(),
                })
            }
            Expr::ZerosLike(v) => vec![Val::A(self.zeros_like(*v)?)],
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

    fn unary(&mut self, op: UnOp, a: &Atom) -> Result<Value> {
        let e = self.elem_of(a);
        let x = self.scalar(a)?;
        let libm = |name: &'static str| Extern::Unary(name);
        let ext = match op {
            UnOp::Neg => {
                return Ok(if e == Scalar::F64 { self.b.ins().fneg(x) } else { self.b.ins().ineg(x) });
            }
            UnOp::Not => return Ok(self.b.ins().bxor_imm_s(x, 1)),
            UnOp::Sqrt => return Ok(self.b.ins().sqrt(x)),
            UnOp::Abs => return Ok(self.b.ins().fabs(x)),
            UnOp::Floor => return Ok(self.b.ins().floor(x)),
            UnOp::Ceil => return Ok(self.b.ins().ceil(x)),
            UnOp::ToF64 => {
                return Ok(match e {
                    Scalar::I64 => self.b.ins().fcvt_from_sint(types::F64, x),
                    Scalar::Bool => {
                        let w = self.b.ins().uextend(types::I64, x);
                        self.b.ins().fcvt_from_sint(types::F64, w)
                    }
                    Scalar::F64 => x,
                })
            }
            UnOp::ToI64 => {
                return Ok(match e {
                    Scalar::F64 => self.b.ins().fcvt_to_sint_sat(types::I64, x),
                    Scalar::Bool => self.b.ins().uextend(types::I64, x),
                    Scalar::I64 => x,
                })
            }
            UnOp::Exp => libm("exp"),
            UnOp::Log => libm("log"),
            UnOp::Sin => libm("sin"),
            UnOp::Cos => libm("cos"),
            UnOp::Tan => libm("tan"),
            UnOp::Tanh => libm("tanh"),
            UnOp::Sinh => libm("sinh"),
            UnOp::Cosh => libm("cosh"),
            UnOp::Asin => libm("asin"),
            UnOp::Acos => libm("acos"),
            UnOp::Atan => libm("atan"),
            UnOp::Log1p => libm("log1p"),
            UnOp::Expm1 => libm("expm1"),
            UnOp::Erf => libm("erf"),
            UnOp::Lgamma => libm("arrayad_lgamma"),
            UnOp::Digamma => libm("arrayad_digamma"),
            UnOp::Sign => {
                // 1 if x > 0, -1 if x < 0, else x (±0 and NaN).
                let z = self.b.ins().f64const(0.0);
                let gt = self.b.ins().fcmp(FloatCC::GreaterThan, x, z);
                let lt = self.b.ins().fcmp(FloatCC::LessThan, x, z);
                let one = self.b.ins().f64const(1.0);
                let m1 = self.b.ins().f64const(-1.0);
                let r = self.b.ins().select(lt, m1, x);
                return Ok(self.b.ins().select(gt, one, r));
            }
        };
        Ok(self.call(ext, &[x])?[0])
    }

    fn binary(&mut self, op: BinOp, a: &Atom, b: &Atom) -> Result<Value> {
        let e = self.elem_of(a);
        let x = self.scalar(a)?;
        let y = self.scalar(b)?;
        let f = e == Scalar::F64;
        Ok(match op {
            BinOp::Add if f => self.b.ins().fadd(x, y),
            BinOp::Add => self.b.ins().iadd(x, y),
            BinOp::Sub if f => self.b.ins().fsub(x, y),
            BinOp::Sub => self.b.ins().isub(x, y),
            BinOp::Mul if f => self.b.ins().fmul(x, y),
            BinOp::Mul => self.b.ins().imul(x, y),
            BinOp::Div if f => self.b.ins().fdiv(x, y),
            BinOp::Div | BinOp::Rem => {
                let ok = self.b.ins().icmp_imm_s(IntCC::NotEqual, y, 0);
                let detail =
                    if op == BinOp::Div { "integer division of %1 by zero" } else { "remainder of %1 by zero" };
                self.check(ok, ErrorKind::DivisionByZero, detail, &[x])?;
                // Never let the hardware trap on i64::MIN / -1: divide by 1
                // instead (x % -1 == x % 1 == 0) and negate for the quotient.
                let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let one = self.iconst(1);
                let d = self.b.ins().select(m1, one, y);
                if op == BinOp::Rem {
                    self.b.ins().srem(x, d)
                } else {
                    let q = self.b.ins().sdiv(x, d);
                    let neg = self.b.ins().ineg(x);
                    self.b.ins().select(m1, neg, q)
                }
            }
            BinOp::Pow => self.call(Extern::Binary("pow"), &[x, y])?[0],
            BinOp::Atan2 => self.call(Extern::Binary("atan2"), &[x, y])?[0],
            BinOp::Min if f => self.min_max_f64(false, x, y),
            BinOp::Min => self.b.ins().smin(x, y),
            BinOp::Max if f => self.min_max_f64(true, x, y),
            BinOp::Max => self.b.ins().smax(x, y),
            BinOp::And => self.b.ins().band(x, y),
            BinOp::Or => self.b.ins().bor(x, y),
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                if f {
                    let cc = match op {
                        BinOp::Eq => FloatCC::Equal,
                        BinOp::Ne => FloatCC::NotEqual,
                        BinOp::Lt => FloatCC::LessThan,
                        BinOp::Le => FloatCC::LessThanOrEqual,
                        BinOp::Gt => FloatCC::GreaterThan,
                        _ => FloatCC::GreaterThanOrEqual,
                    };
                    self.b.ins().fcmp(cc, x, y)
                } else {
                    let cc = match op {
                        BinOp::Eq => IntCC::Equal,
                        BinOp::Ne => IntCC::NotEqual,
                        BinOp::Lt => IntCC::SignedLessThan,
                        BinOp::Le => IntCC::SignedLessThanOrEqual,
                        BinOp::Gt => IntCC::SignedGreaterThan,
                        _ => IntCC::SignedGreaterThanOrEqual,
                    };
                    self.b.ins().icmp(cc, x, y)
                }
            }
        })
    }

    /// `max(a, b)` (`max`) or `min(a, b)` of `f64`s as the interpreter
    /// defines them: NaN if either is NaN, else the larger (smaller) one,
    /// the first when they compare equal (so `min(0.0, -0.0) = 0.0`).
    pub(super) fn min_max_f64(&mut self, max: bool, a: Value, b: Value) -> Value {
        let cc = if max { FloatCC::GreaterThan } else { FloatCC::LessThan };
        let pick_b = self.b.ins().fcmp(cc, b, a);
        let r = self.b.ins().select(pick_b, b, a);
        let uno = self.b.ins().fcmp(FloatCC::Unordered, a, b);
        let nan = self.b.ins().f64const(f64::NAN);
        self.b.ins().select(uno, nan, r)
    }

    /// Checks `indices` against the leading axes of `a` and returns the
    /// row-major offset (in units of the remaining sub-array).
    pub(super) fn checked_offset(&mut self, a: &Arr, indices: &[Atom], name: &str) -> Result<Value> {
        if indices.is_empty() || indices.len() > a.dims.len() {
            return Err(self.malformed(format!("{} indices into an array of rank {}", indices.len(), a.dims.len())));
        }
        let mut off: Option<Value> = None;
        for (ax, idx) in indices.iter().enumerate() {
            let i = self.scalar(idx)?;
            let d = a.dims[ax];
            if !self.known_in_bounds(i, d) {
                let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, i, d);
                self.check(
                    ok,
                    ErrorKind::IndexOutOfBounds,
                    &format!("index %1 is out of bounds for axis {ax} of `{}`, of extent %2", name.replace('%', "%%")),
                    &[i, d],
                )?;
            }
            off = Some(match off {
                None => i,
                Some(o) => {
                    let m = self.b.ins().imul(o, d);
                    self.b.ins().iadd(m, i)
                }
            });
        }
        Ok(off.expect("at least one index"))
    }

    /// True when `0 <= i < d` is known here: `i` is the index of an
    /// enclosing counted loop over `0..n` and `n` is `d`, or was checked equal
    /// to it.
    pub(super) fn known_in_bounds(&self, i: Value, d: Value) -> bool {
        self.in_bounds.iter().any(|&(j, n)| {
            j == i && (n == d || self.equal.iter().any(|&(a, b)| (a == n && b == d) || (a == d && b == n)))
        })
    }

    fn index(&mut self, array: VarId, indices: &[Atom]) -> Result<Val> {
        let t = self.var_ty(array)?;
        let a = self.array(array)?;
        let name = self.var_name(array);
        let off = self.checked_offset(&a, indices, &name)?;
        let k = indices.len();
        if k == a.dims.len() {
            Ok(Val::S(self.load_elem(a.ptr, off, t.elem)))
        } else {
            let rest = a.dims[k..].to_vec();
            let stride = self.product(&rest);
            let eoff = self.b.ins().imul(off, stride);
            let ptr = self.elem_addr(a.ptr, eoff, t.elem);
            Ok(Val::A(Arr { ptr, dims: rest }))
        }
    }

    fn slice(&mut self, array: VarId, lo: &Atom, hi: &Atom) -> Result<Arr> {
        let t = self.var_ty(array)?;
        let a = self.array(array)?;
        let lo = self.scalar(lo)?;
        let hi = self.scalar(hi)?;
        let n = a.dims[0];
        // 0 <= lo <= hi <= n, as two unsigned comparisons.
        let ok1 = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, hi, n);
        let ok2 = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, lo, hi);
        let ok = self.b.ins().band(ok1, ok2);
        let name = self.var_name(array).replace('%', "%%");
        self.check(
            ok,
            ErrorKind::SliceOutOfRange,
            &format!("slice %1:%2 of `{name}`, whose axis 0 has extent %3"),
            &[lo, hi, n],
        )?;
        let rest = a.dims[1..].to_vec();
        let stride = self.product(&rest);
        let eoff = self.b.ins().imul(lo, stride);
        let ptr = self.elem_addr(a.ptr, eoff, t.elem);
        let len = self.memo_sub(hi, lo);
        let mut dims = vec![len];
        dims.extend(rest);
        Ok(Arr { ptr, dims })
    }

    fn reduce(&mut self, op: ReduceOp, array: VarId) -> Result<Value> {
        let t = self.var_ty(array)?;
        let a = self.array(array)?;
        if a.dims.len() != 1 {
            return Err(self.malformed("reduction of an array of rank other than 1"));
        }
        let n = a.dims[0];
        let acc = self.b.declare_var(clif_ty(t.elem));
        let start = match op {
            ReduceOp::Sum => {
                let z = if t.elem == Scalar::F64 { self.b.ins().f64const(0.0) } else { self.iconst(0) };
                self.b.def_var(acc, z);
                self.iconst(0)
            }
            ReduceOp::Max | ReduceOp::Min => {
                if t.elem != Scalar::F64 {
                    return Err(self.malformed("maximum/minimum of a non-f64 array"));
                }
                let ok = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
                let what = if op == ReduceOp::Max { "maximum" } else { "minimum" };
                let name = self.var_name(array).replace('%', "%%");
                self.check(ok, ErrorKind::EmptyReduction, &format!("{what} of the empty array `{name}`"), &[])?;
                let z = self.iconst(0);
                let first = self.load_elem(a.ptr, z, Scalar::F64);
                self.b.def_var(acc, first);
                self.iconst(1)
            }
        };
        let elem = t.elem;
        self.counted_loop(start, n, false, &mut |l, i| {
            let x = l.load_elem(a.ptr, i, elem);
            let s = l.b.use_var(acc);
            let r = match (op, elem) {
                (ReduceOp::Sum, Scalar::F64) => l.b.ins().fadd(s, x),
                (ReduceOp::Sum, _) => l.b.ins().iadd(s, x),
                (ReduceOp::Max, _) => l.min_max_f64(true, s, x),
                (ReduceOp::Min, _) => l.min_max_f64(false, s, x),
            };
            l.b.def_var(acc, r);
            Ok(())
        })?;
        Ok(self.b.use_var(acc))
    }

    fn array_lit(&mut self, elem_ty: Type, elems: &[Atom]) -> Result<Arr> {
        let elem = elem_ty.elem;
        let n = self.iconst(elems.len() as i64);
        if elem_ty.is_scalar() {
            let ptr = self.alloc_elems(n, elem, None)?;
            for (k, e) in elems.iter().enumerate() {
                let v = self.scalar(e)?;
                self.b.ins().store(
                    cranelift_codegen::ir::MemFlagsData::trusted(),
                    v,
                    ptr,
                    (k as i64 * elem_size(elem)) as i32,
                );
            }
            return Ok(Arr { ptr, dims: vec![n] });
        }
        let rows: Vec<Arr> = elems.iter().map(|e| self.array_atom(e)).collect::<Result<_>>()?;
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
        let (total, o2) = self.b.ins().umul_overflow(row_count, n);
        let ovf = match ovf {
            Some(o) => self.b.ins().bor(o, o2),
            None => o2,
        };
        let ptr = self.alloc_elems(total, elem, Some(ovf))?;
        for (r, row) in rows.iter().enumerate() {
            let ri = self.iconst(r as i64);
            let off = self.b.ins().imul(ri, row_count);
            let dst = self.elem_addr(ptr, off, elem);
            self.copy_elems(dst, row.ptr, row_count, elem)?;
        }
        let mut dims = vec![n];
        dims.extend(first.dims.iter().copied());
        Ok(Arr { ptr, dims })
    }

    /// Checks a trip count: negative is an error.
    fn check_size(&mut self, n: Value) -> Result<()> {
        let ok = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, 0);
        self.check(ok, ErrorKind::NegativeSize, "%1 iterations", &[n])
    }

    fn build(&mut self, n: &Atom, index: VarId, body: &Block) -> Result<Vec<Val>> {
        let n = self.scalar(n)?;
        self.check_size(n)?;
        let mut outs = Vec::new();
        for r in &body.results {
            let t = self.f.atom_ty(r);
            if t.is_scalar() {
                let ptr = self.alloc_elems(n, t.elem, None)?;
                outs.push(BuildOut::Scalar { ptr, elem: t.elem });
            } else {
                let z = self.iconst(0);
                let ptr = self.b.declare_var(types::I64);
                self.b.def_var(ptr, z);
                let row_count = self.b.declare_var(types::I64);
                self.b.def_var(row_count, z);
                let row_dims: Vec<Variable> = (0..t.rank)
                    .map(|_| {
                        let v = self.b.declare_var(types::I64);
                        self.b.def_var(v, z);
                        v
                    })
                    .collect();
                outs.push(BuildOut::Array { ptr, row_dims, row_count, elem: t.elem });
            }
        }
        let any_array = outs.iter().any(|o| matches!(o, BuildOut::Array { .. }));
        let release = nothing_escapes(self.f, body) && allocates(body);
        // The arena state every iteration returns to (for array rows: taken
        // again once the result is allocated in iteration 0).
        let mark_vars: Option<[Variable; 3]> = if release {
            let m = self.arena_mark();
            Some(m.map(|v| {
                let var = self.b.declare_var(types::I64);
                self.b.def_var(var, v);
                var
            }))
        } else {
            None
        };
        let zero = self.iconst(0);
        self.counted_loop(zero, n, false, &mut |l, i| {
            l.def(index, Val::S(i))?;
            l.stmts(&body.stmts)?;
            let vals: Vec<Val> = body.results.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
            if any_array {
                let first = l.b.ins().icmp_imm_s(IntCC::Equal, i, 0);
                l.if_else(
                    first,
                    &mut |l| {
                        for (o, v) in outs.iter().zip(&vals) {
                            if let (BuildOut::Array { ptr, row_dims, row_count, elem }, Val::A(row)) = (o, v) {
                                for (var, d) in row_dims.iter().zip(&row.dims) {
                                    l.b.def_var(*var, *d);
                                }
                                let (rc, ovf) = l.checked_product(&row.dims);
                                let (total, o2) = l.b.ins().umul_overflow(rc, n);
                                let ovf = match ovf {
                                    Some(o) => l.b.ins().bor(o, o2),
                                    None => o2,
                                };
                                let p = l.alloc_elems(total, *elem, Some(ovf))?;
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
                                let first: Vec<Value> = row_dims.iter().map(|v| l.b.use_var(*v)).collect();
                                l.check_regular(i, &row.dims, &first)?;
                            }
                        }
                        Ok(())
                    },
                )?;
            }
            for (o, v) in outs.iter().zip(&vals) {
                match (o, v) {
                    (BuildOut::Scalar { ptr, elem }, Val::S(x)) => l.store_elem(*ptr, i, *elem, *x),
                    (BuildOut::Array { ptr, row_count, elem, .. }, Val::A(row)) => {
                        let base = l.b.use_var(*ptr);
                        let rc = l.b.use_var(*row_count);
                        let off = l.b.ins().imul(i, rc);
                        let dst = l.elem_addr(base, off, *elem);
                        l.copy_elems(dst, row.ptr, rc, *elem)?;
                    }
                    _ => return Err(l.malformed("a build result of the wrong kind")),
                }
            }
            if let Some(mv) = &mark_vars {
                let m: Mark = mv.map(|v| l.b.use_var(v));
                l.arena_release(&m);
            }
            Ok(())
        })?;
        Ok(outs
            .iter()
            .map(|o| match o {
                BuildOut::Scalar { ptr, .. } => Val::A(Arr { ptr: *ptr, dims: vec![n] }),
                BuildOut::Array { ptr, row_dims, .. } => {
                    let ptr = self.b.use_var(*ptr);
                    let mut dims = vec![n];
                    dims.extend(row_dims.iter().map(|v| self.b.use_var(*v)));
                    Val::A(Arr { ptr, dims })
                }
            })
            .collect())
    }

    fn loop_(&mut self, n: &Atom, index: VarId, states: &[VarId], init: &[Atom], body: &Block) -> Result<Vec<Val>> {
        if states.len() != init.len() || states.len() != body.results.len() {
            return Err(self.malformed("loop states, initial values and results differ in number"));
        }
        let n = self.scalar(n)?;
        self.check_size(n)?;
        let init_vals: Vec<Val> = init.iter().map(|a| self.atom(a)).collect::<Result<_>>()?;
        for (s, v) in states.iter().zip(init_vals) {
            self.def(*s, v)?;
        }
        let scalar_states = states.iter().all(|s| self.f.ty(*s).is_scalar());
        let release = scalar_states && nothing_escapes(self.f, body) && allocates(body);
        let mark = release.then(|| self.arena_mark());
        let zero = self.iconst(0);
        self.counted_loop(zero, n, false, &mut |l, i| {
            l.def(index, Val::S(i))?;
            l.stmts(&body.stmts)?;
            let vals: Vec<Val> = body.results.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
            for (s, v) in states.iter().zip(vals) {
                l.def(*s, v)?;
            }
            if let Some(m) = &mark {
                l.arena_release(m);
            }
            Ok(())
        })?;
        states.iter().map(|s| self.use_ir_var(*s)).collect()
    }

    fn if_expr(&mut self, vars: &[VarId], cond: &Atom, then_b: &Block, else_b: &Block) -> Result<Vec<Val>> {
        let c = self.scalar(cond)?;
        if then_b.results.len() != vars.len() || else_b.results.len() != vars.len() {
            return Err(self.malformed("if branches yield the wrong number of values"));
        }
        let mut reprs: Vec<Repr> = Vec::new();
        for v in vars {
            let t = self.var_ty(*v)?;
            reprs.push(self.fresh_repr(t));
        }
        let arm = |l: &mut Self, b: &Block| -> Result<()> {
            l.stmts(&b.stmts)?;
            let vals: Vec<Val> = b.results.iter().map(|a| l.atom(a)).collect::<Result<_>>()?;
            for (r, v) in reprs.iter().zip(vals) {
                l.def_repr(r, v)?;
            }
            Ok(())
        };
        self.if_else(c, &mut |l| arm(l, then_b), &mut |l| arm(l, else_b))?;
        Ok(reprs.iter().map(|r| self.use_repr(r)).collect())
    }

    fn zeros_like(&mut self, v: VarId) -> Result<Arr> {
        let a = self.array(v)?;
        let (count, ovf) = self.checked_product(&a.dims);
        let ptr = self.alloc_elems(count, Scalar::F64, ovf)?;
        let bytes = self.b.ins().imul_imm_s(count, 8);
        self.zero_bytes(ptr, bytes)?;
        Ok(Arr { ptr, dims: a.dims })
    }

    fn pop(&mut self, t: Type) -> Result<Val> {
        let slots = self.tape_pop(super::slots(t))?;
        if t.is_scalar() {
            Ok(Val::S(self.slot_to_scalar(slots[0], t.elem)))
        } else {
            Ok(Val::A(Arr { ptr: slots[0], dims: slots[1..].to_vec() }))
        }
    }
}
