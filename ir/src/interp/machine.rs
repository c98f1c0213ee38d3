//! The evaluator: a recursive walk over blocks with one environment (a slot
//! per variable) per active call, the residual tape, and the run-time checks
//! of LANGUAGE.md section 5.

use super::array::{Array, Data, Val};
use super::errors;
use super::ops::{self, OpError, Prim};
use super::stack::MAX_DEPTH;
use crate::program::{Atom, Block, Expr, FuncId, Function, Loc, Program, ReduceOp, Stmt, StmtKind, VarId};
use crate::types::{Scalar, Type};
use crate::value::RuntimeError;

type Res<T> = Result<T, RuntimeError>;

/// The state of one evaluation (one call of [`super::run`]).
pub(crate) struct Machine<'p> {
    program: &'p Program,
    /// The residual tape (`Push`/`Pop`), shared by all calls of the run:
    /// the stored entries; those at `top..` were popped but can be replayed
    /// after a `TapeRewind`.
    tape: Vec<Val>,
    /// The tape position: the number of entries below the top.
    top: usize,
    /// Current nesting of blocks and calls.
    depth: usize,
}

/// The environment of one active call.
struct Frame<'p> {
    func: &'p Function,
    env: Vec<Option<Val>>,
}

impl<'p> Frame<'p> {
    fn name(&self, v: VarId) -> &'p str {
        self.func.vars.get(v.index()).map_or("?", |i| i.name.as_str())
    }
}

impl<'p> Machine<'p> {
    pub fn new(program: &'p Program) -> Machine<'p> {
        Machine { program, tape: Vec::new(), top: 0, depth: 0 }
    }

    /// Calls function `func` on `args`.
    pub fn call(&mut self, func: FuncId, args: Vec<Val>, loc: Loc) -> Res<Vec<Val>> {
        let program = self.program;
        let Some(f) = program.funcs.get(func.0 as usize) else {
            return Err(errors::malformed(program, loc, "?", format!("call of missing function {}", func.0)));
        };
        if args.len() != f.params.len() {
            let what = format!("{} arguments for {} parameters", args.len(), f.params.len());
            return Err(errors::malformed(program, loc, &f.name, what));
        }
        self.enter(loc)?;
        let mut fr = Frame { func: f, env: vec![None; f.vars.len()] };
        let result = (|| {
            for (p, a) in f.params.iter().zip(args) {
                self.set(&mut fr, *p, a, f.loc)?;
            }
            self.block(&mut fr, &f.body)?;
            self.atoms(&fr, &f.body.results, f.loc)
        })();
        self.depth -= 1;
        result
    }

    fn enter(&mut self, loc: Loc) -> Res<()> {
        if self.depth >= MAX_DEPTH {
            return Err(errors::out_of_memory(
                self.program,
                loc,
                format!("blocks and calls nested deeper than {MAX_DEPTH}"),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn malformed(&self, fr: &Frame, loc: Loc, what: impl std::fmt::Display) -> RuntimeError {
        errors::malformed(self.program, loc, &fr.func.name, what)
    }

    // ----- variables and atoms -------------------------------------------

    fn set(&self, fr: &mut Frame, v: VarId, x: Val, loc: Loc) -> Res<()> {
        match fr.env.get_mut(v.index()) {
            Some(slot) => {
                *slot = Some(x);
                Ok(())
            }
            None => Err(self.malformed(fr, loc, format!("variable %{} is not in the table", v.0))),
        }
    }

    fn get(&self, fr: &Frame, v: VarId, loc: Loc) -> Res<Val> {
        match fr.env.get(v.index()) {
            Some(Some(x)) => Ok(x.clone()),
            _ => Err(self.malformed(fr, loc, format!("`{}%{}` is read before it is bound", fr.name(v), v.0))),
        }
    }

    fn atom(&self, fr: &Frame, a: &Atom, loc: Loc) -> Res<Val> {
        Ok(match a {
            Atom::Var(v) => return self.get(fr, *v, loc),
            Atom::F64(x) => Val::Prim(Prim::F64(*x)),
            Atom::I64(x) => Val::Prim(Prim::I64(*x)),
            Atom::Bool(x) => Val::Prim(Prim::Bool(*x)),
        })
    }

    fn atoms(&self, fr: &Frame, atoms: &[Atom], loc: Loc) -> Res<Vec<Val>> {
        atoms.iter().map(|a| self.atom(fr, a, loc)).collect()
    }

    /// The static type of an atom.
    fn atom_ty(&self, fr: &Frame, a: &Atom, loc: Loc) -> Res<Type> {
        match a {
            Atom::Var(v) => match fr.func.vars.get(v.index()) {
                Some(info) => Ok(info.ty),
                None => Err(self.malformed(fr, loc, format!("variable %{} is not in the table", v.0))),
            },
            _ => Ok(fr.func.atom_ty(a)),
        }
    }

    fn prim(&self, fr: &Frame, a: &Atom, loc: Loc) -> Res<Prim> {
        match self.atom(fr, a, loc)? {
            Val::Prim(p) => Ok(p),
            Val::Arr(_) => Err(self.malformed(fr, loc, "an array where a scalar is expected")),
        }
    }

    fn int(&self, fr: &Frame, a: &Atom, loc: Loc) -> Res<i64> {
        match self.prim(fr, a, loc)? {
            Prim::I64(i) => Ok(i),
            p => Err(self.malformed(fr, loc, format!("{} where i64 is expected", p.elem()))),
        }
    }

    fn boolean(&self, fr: &Frame, a: &Atom, loc: Loc) -> Res<bool> {
        match self.prim(fr, a, loc)? {
            Prim::Bool(b) => Ok(b),
            p => Err(self.malformed(fr, loc, format!("{} where bool is expected", p.elem()))),
        }
    }

    fn array(&self, fr: &Frame, v: VarId, loc: Loc) -> Res<Array> {
        match self.get(fr, v, loc)? {
            Val::Arr(a) => Ok(a),
            Val::Prim(_) => Err(self.malformed(fr, loc, format!("`{}` is not an array", fr.name(v)))),
        }
    }

    // ----- blocks and statements -----------------------------------------

    fn block(&mut self, fr: &mut Frame<'p>, b: &'p Block) -> Res<()> {
        b.stmts.iter().try_for_each(|s| self.stmt(fr, s))
    }

    /// Runs a nested block and yields its results.
    fn nested(&mut self, fr: &mut Frame<'p>, b: &'p Block, loc: Loc) -> Res<Vec<Val>> {
        self.enter(loc)?;
        let r = self.block(fr, b).and_then(|()| self.atoms(fr, &b.results, loc));
        self.depth -= 1;
        r
    }

    fn stmt(&mut self, fr: &mut Frame<'p>, s: &'p Stmt) -> Res<()> {
        let loc = s.loc;
        match &s.kind {
            StmtKind::Let { vars, expr } => {
                let vals = self.expr(fr, expr, vars, loc)?;
                if vals.len() != vars.len() {
                    let what = format!("{} values bound to {} variables", vals.len(), vars.len());
                    return Err(self.malformed(fr, loc, what));
                }
                for (v, x) in vars.iter().zip(vals) {
                    self.set(fr, *v, x, loc)?;
                }
            }
            StmtKind::Assign { var, value } => {
                let x = self.atom(fr, value, loc)?;
                self.set(fr, *var, x, loc)?;
            }
            StmtKind::AccAdd { acc, indices, value } => self.acc_add(fr, *acc, indices, value, loc)?,
            StmtKind::AccZero { acc, indices } => {
                let arr = self.array(fr, *acc, loc)?;
                if !arr.buf.accumulator || arr.elem() != Scalar::F64 {
                    let what = format!("`{}` is cleared but not an accumulator", fr.name(*acc));
                    return Err(self.malformed(fr, loc, what));
                }
                let (off, shape) = self.locate(fr, &arr, *acc, indices, loc)?;
                let len = super::array::size(&shape);
                let start = arr.off + off;
                let mut data = arr.buf.data.borrow_mut();
                if let Data::F64(d) = &mut *data {
                    d[start..start + len].iter_mut().for_each(|x| *x = 0.0);
                }
            }
            StmtKind::CheckSize { a, b, what } => {
                let (a, b) = (self.int(fr, a, loc)?, self.int(fr, b, loc)?);
                if a != b {
                    return Err(errors::size_mismatch(self.program, loc, what, a, b));
                }
            }
            StmtKind::Push(a) => {
                let x = self.atom(fr, a, loc)?;
                // A push discards the popped entries above the top. An
                // entry counts as the compiled tape's 8 bytes (an array's
                // storage is counted with its buffer).
                let entry = 8;
                super::meter::release((self.tape.len() - self.top.min(self.tape.len())) as u64 * entry);
                self.tape.truncate(self.top);
                if !super::meter::fits(entry) {
                    return Err(errors::out_of_memory(self.program, loc, "the tape cannot grow"));
                }
                if self.tape.try_reserve(1).is_err() {
                    return Err(errors::tape_full(self.program, loc));
                }
                super::meter::add(entry);
                self.tape.push(x);
                self.top = self.tape.len();
            }
            StmtKind::TapeRewind(m) => {
                let m = self.int(fr, m, loc)?;
                match usize::try_from(m) {
                    Ok(m) if m <= self.tape.len() => self.top = m,
                    _ => {
                        let what = format!("tape_rewind to mark {m}, but the tape holds {} entries", self.tape.len());
                        return Err(self.malformed(fr, loc, what));
                    }
                }
            }
            StmtKind::For { n, index, reverse, body } => {
                let n = self.int(fr, n, loc)?;
                for k in 0..n.max(0) {
                    let i = if *reverse { n - 1 - k } else { k };
                    self.set(fr, *index, Val::Prim(Prim::I64(i)), loc)?;
                    self.nested(fr, body, loc)?;
                }
            }
            StmtKind::If { cond, then_branch, else_branch } => {
                let branch = if self.boolean(fr, cond, loc)? { then_branch } else { else_branch };
                self.nested(fr, branch, loc)?;
            }
        }
        Ok(())
    }

    /// `acc[indices] += value`: a scalar at a full index, an array of the
    /// remaining shape at a partial (or empty) one.
    fn acc_add(&mut self, fr: &Frame, acc: VarId, indices: &[Atom], value: &Atom, loc: Loc) -> Res<()> {
        let arr = self.array(fr, acc, loc)?;
        if !arr.buf.accumulator || arr.elem() != Scalar::F64 {
            let what = format!("`{}` is the target of an accumulation but not an accumulator", fr.name(acc));
            return Err(self.malformed(fr, loc, what));
        }
        // No indices: the whole accumulator.
        let (off, shape) =
            if indices.is_empty() { (0, arr.shape.clone()) } else { self.locate(fr, &arr, acc, indices, loc)? };
        let value = self.atom(fr, value, loc)?;
        // Copy the addend first: it may be a view of the accumulator itself.
        let addend: Vec<f64> = match (&value, shape.is_empty()) {
            (Val::Prim(Prim::F64(x)), true) => vec![*x],
            (Val::Arr(v), false) if v.shape == shape => match v.f64_elements() {
                Some(xs) => xs,
                None => return Err(self.malformed(fr, loc, "accumulating a non-f64 array")),
            },
            (Val::Arr(v), false) if v.shape.len() == shape.len() => {
                let first_diff = v.shape.iter().zip(&shape).position(|(a, b)| a != b).unwrap_or(0);
                return Err(errors::accumulation_mismatch(
                    self.program,
                    loc,
                    fr.name(acc),
                    first_diff,
                    v.shape[first_diff] as i64,
                    shape[first_diff] as i64,
                ));
            }
            _ => {
                return Err(self.malformed(
                    fr,
                    loc,
                    format!("accumulating a value of the wrong type into `{}`", fr.name(acc)),
                ))
            }
        };
        match &mut *arr.buf.data.borrow_mut() {
            Data::F64(data) => {
                for (d, x) in data[arr.off + off..].iter_mut().zip(addend) {
                    *d += x;
                }
            }
            _ => return Err(self.malformed(fr, loc, "accumulation into a non-f64 array")),
        }
        Ok(())
    }

    /// Checks `indices` against the axes of `arr` (named by variable `name`)
    /// and returns the flat offset in the view they select and the shape
    /// left over.
    fn locate(&self, fr: &Frame, arr: &Array, name: VarId, indices: &[Atom], loc: Loc) -> Res<(usize, Vec<usize>)> {
        if indices.is_empty() || indices.len() > arr.shape.len() {
            let what = format!("{} indices into an array of rank {}", indices.len(), arr.shape.len());
            return Err(self.malformed(fr, loc, what));
        }
        let mut off = 0usize;
        for (axis, ia) in indices.iter().enumerate() {
            let i = self.int(fr, ia, loc)?;
            let extent = arr.shape[axis];
            if i < 0 || i as u64 >= extent as u64 {
                return Err(errors::index_out_of_bounds(self.program, loc, fr.name(name), axis, i, extent));
            }
            off += i as usize * arr.stride(axis);
        }
        Ok((off, arr.shape[indices.len()..].to_vec()))
    }

    // ----- expressions ----------------------------------------------------

    fn expr(&mut self, fr: &mut Frame<'p>, e: &'p Expr, vars: &[VarId], loc: Loc) -> Res<Vec<Val>> {
        let one = |x: Val| Ok(vec![x]);
        match e {
            Expr::Atom(a) => one(self.atom(fr, a, loc)?),
            Expr::Unary(op, a) => {
                let x = self.prim(fr, a, loc)?;
                one(Val::Prim(self.op_result(fr, ops::unary(*op, x), loc)?))
            }
            Expr::Binary(op, a, b) => {
                let (x, y) = (self.prim(fr, a, loc)?, self.prim(fr, b, loc)?);
                one(Val::Prim(self.op_result(fr, ops::binary(*op, x, y), loc)?))
            }
            Expr::Index { array, indices } => {
                let arr = self.array(fr, *array, loc)?;
                let (off, shape) = self.locate(fr, &arr, *array, indices, loc)?;
                one(if shape.is_empty() { Val::Prim(arr.get(off)) } else { Val::Arr(arr.view(off, shape)) })
            }
            Expr::Slice { array, lo, hi } => {
                let arr = self.array(fr, *array, loc)?;
                let (lo, hi) = (self.int(fr, lo, loc)?, self.int(fr, hi, loc)?);
                let n = arr.shape[0];
                if lo < 0 || lo > hi || hi as u64 > n as u64 {
                    return Err(errors::slice_out_of_range(self.program, loc, fr.name(*array), lo, hi, n));
                }
                let mut shape = arr.shape.clone();
                shape[0] = (hi - lo) as usize;
                one(Val::Arr(arr.view(lo as usize * arr.stride(0), shape)))
            }
            Expr::Reshape { array, dims } => {
                let arr = self.array(fr, *array, loc)?;
                let mut shape = Vec::with_capacity(dims.len());
                for d in dims {
                    let n = self.int(fr, d, loc)?;
                    if n < 0 {
                        return Err(errors::negative_extent(self.program, loc, fr.name(*array), n));
                    }
                    shape.push(n as usize);
                }
                let product = ops::element_count(&shape);
                if product != i64::try_from(arr.len()).ok() {
                    let p = product.unwrap_or(i64::MAX);
                    return Err(errors::reshape_mismatch(self.program, loc, fr.name(*array), p, arr.len()));
                }
                one(Val::Arr(arr.view(0, shape)))
            }
            Expr::Update { array, indices, value } => {
                let arr = self.array(fr, *array, loc)?;
                let (off, row_shape) = self.locate(fr, &arr, *array, indices, loc)?;
                let x = self.atom(fr, value, loc)?;
                let copy = arr.buf.data.borrow().copy_range(arr.off, arr.len());
                let Some(mut data) = copy else {
                    return Err(errors::out_of_memory(self.program, loc, "the updated array cannot be allocated"));
                };
                let ok = match (&x, row_shape.is_empty()) {
                    (Val::Prim(p), true) => data.set(off, *p),
                    (Val::Arr(r), false) => {
                        for (axis, (a, b)) in r.shape.iter().zip(&row_shape).enumerate() {
                            if a != b {
                                let what = format!(
                                    "the row assigned into `{}` must have the shape of its rows: axis {axis}",
                                    fr.name(*array)
                                );
                                return Err(errors::size_mismatch(self.program, loc, &what, *a as i64, *b as i64));
                            }
                        }
                        r.shape.len() == row_shape.len()
                            && data.copy_within_from(off, &r.buf.data.borrow(), r.off, r.len())
                    }
                    _ => false,
                };
                if !ok {
                    return Err(self.malformed(fr, loc, "an update with a value of the wrong type"));
                }
                one(Val::Arr(Array::new(arr.shape.clone(), data, arr.buf.accumulator)))
            }
            Expr::Dim { array, axis } => {
                let arr = self.array(fr, *array, loc)?;
                match arr.shape.get(*axis as usize) {
                    Some(&d) => one(Val::Prim(Prim::I64(d as i64))),
                    None => {
                        Err(self.malformed(fr, loc, format!("axis {axis} of an array of rank {}", arr.shape.len())))
                    }
                }
            }
            Expr::Reduce { op, array } => one(Val::Prim(self.reduce(fr, *op, *array, loc)?)),
            Expr::ArrayLit { elem_ty, elems } => {
                let rows = self.atoms(fr, elems, loc)?;
                one(self.stack_rows(fr, *elem_ty, &rows, loc)?)
            }
            Expr::Build { n, index, body } => self.build(fr, n, *index, body, loc),
            Expr::Loop { n, index, states, init, body } => {
                let n = self.int(fr, n, loc)?;
                if n < 0 {
                    return Err(errors::negative_size(self.program, loc, n));
                }
                let mut cur = self.atoms(fr, init, loc)?;
                if cur.len() != states.len() || body.results.len() != states.len() {
                    return Err(self.malformed(fr, loc, "loop states, initial values and results differ in number"));
                }
                for i in 0..n {
                    self.set(fr, *index, Val::Prim(Prim::I64(i)), loc)?;
                    for (s, x) in states.iter().zip(cur) {
                        self.set(fr, *s, x, loc)?;
                    }
                    cur = self.nested(fr, body, loc)?;
                }
                Ok(cur)
            }
            Expr::While { states, init, cond, body } => {
                let mut cur = self.atoms(fr, init, loc)?;
                if cur.len() != states.len() || body.results.len() != states.len() || cond.results.len() != 1 {
                    return Err(self.malformed(fr, loc, "while states, initial values and results differ in number"));
                }
                loop {
                    for (s, x) in states.iter().zip(cur.iter().cloned()) {
                        self.set(fr, *s, x, loc)?;
                    }
                    let c = self.nested(fr, cond, loc)?;
                    match c.first() {
                        Some(Val::Prim(Prim::Bool(true))) => {}
                        Some(Val::Prim(Prim::Bool(false))) => break,
                        _ => return Err(self.malformed(fr, loc, "while condition is not a bool")),
                    }
                    cur = self.nested(fr, body, loc)?;
                }
                Ok(cur)
            }
            Expr::If { cond, then_branch, else_branch } => {
                let branch = if self.boolean(fr, cond, loc)? { then_branch } else { else_branch };
                self.nested(fr, branch, loc)
            }
            Expr::Call { func, args } => {
                let args = self.atoms(fr, args, loc)?;
                self.call(*func, args, loc)
            }
            Expr::ZerosLike(_) | Expr::Zeros(_) => {
                let shape: Vec<usize> = match e {
                    Expr::ZerosLike(v) => self.array(fr, *v, loc)?.shape.clone(),
                    Expr::Zeros(dims) => {
                        let mut shape = Vec::with_capacity(dims.len());
                        for d in dims {
                            let n = self.int(fr, d, loc)?;
                            shape.push(
                                usize::try_from(n)
                                    .map_err(|_| self.malformed(fr, loc, format!("zeros of extent {n}")))?,
                            );
                        }
                        shape
                    }
                    _ => unreachable!("matched above"),
                };
                let len = shape.iter().try_fold(1usize, |a, d| a.checked_mul(*d));
                let Some(len) = len else {
                    return Err(errors::out_of_memory(self.program, loc, "an accumulator cannot be allocated"));
                };
                let data = match Data::with_capacity(Scalar::F64, len) {
                    Some(Data::F64(mut d)) => {
                        d.resize(len, 0.0);
                        Data::F64(d)
                    }
                    _ => return Err(errors::out_of_memory(self.program, loc, "an accumulator cannot be allocated")),
                };
                one(Val::Arr(Array::new(shape, data, true)))
            }
            Expr::Pop => {
                if self.top == 0 {
                    return Err(self.malformed(fr, loc, "pop from an empty tape"));
                }
                self.top -= 1;
                let Some(x) = self.tape.get(self.top).cloned() else {
                    return Err(self.malformed(fr, loc, "pop above the stored tape"));
                };
                let want = vars.first().and_then(|v| fr.func.vars.get(v.index())).map(|i| i.ty);
                if want != Some(x.ty()) {
                    return Err(self.malformed(fr, loc, format!("popped a value of type {}", x.ty())));
                }
                one(x)
            }
            Expr::TapeMark => one(Val::Prim(Prim::I64(self.top as i64))),
        }
    }

    fn op_result(&self, fr: &Frame, r: Result<Prim, OpError>, loc: Loc) -> Res<Prim> {
        r.map_err(|e| match e {
            OpError::DivisionByZero(op, x) => errors::division_by_zero(self.program, loc, op, x),
            OpError::IllTyped(what) => self.malformed(fr, loc, what),
        })
    }

    fn reduce(&self, fr: &Frame, op: ReduceOp, array: VarId, loc: Loc) -> Res<Prim> {
        let arr = self.array(fr, array, loc)?;
        if arr.shape.len() != 1 {
            return Err(self.malformed(fr, loc, format!("{} of an array of rank {}", op.name(), arr.shape.len())));
        }
        let data = arr.buf.data.borrow();
        let range = arr.off..arr.off + arr.len();
        let r = match (&*data, op) {
            (Data::F64(v), ReduceOp::Sum) => Some(Prim::F64(ops::sum_f64(&v[range]))),
            (Data::I64(v), ReduceOp::Sum) => Some(Prim::I64(ops::sum_i64(v[range].iter().copied()))),
            (Data::F64(v), ReduceOp::Max) => ops::maximum(v[range].iter().copied()).map(Prim::F64),
            (Data::F64(v), ReduceOp::Min) => ops::minimum(v[range].iter().copied()).map(Prim::F64),
            (d, _) => return Err(self.malformed(fr, loc, format!("{} of {}", op.name(), d.elem()))),
        };
        r.ok_or_else(|| errors::empty_reduction(self.program, loc, op, fr.name(array)))
    }

    /// The array whose rows are `rows` (scalars or equally shaped arrays of
    /// type `row_ty`).
    fn stack_rows(&self, fr: &Frame, row_ty: Type, rows: &[Val], loc: Loc) -> Res<Val> {
        let mut st = Stacker::new(row_ty, rows.len());
        for (k, r) in rows.iter().enumerate() {
            st.push(self, fr, k, r, loc)?;
        }
        st.finish(self, loc)
    }

    /// `for index < n => body`.
    fn build(&mut self, fr: &mut Frame<'p>, n: &Atom, index: VarId, body: &'p Block, loc: Loc) -> Res<Vec<Val>> {
        let n = self.int(fr, n, loc)?;
        if n < 0 {
            return Err(errors::negative_size(self.program, loc, n));
        }
        let rows =
            usize::try_from(n).map_err(|_| errors::out_of_memory(self.program, loc, format!("for of size {n}")))?;
        let mut stackers = Vec::with_capacity(body.results.len());
        for (k, r) in body.results.iter().enumerate() {
            let mut st = Stacker::new(self.atom_ty(fr, r, loc)?, rows);
            if n == 0 {
                st.empty_row_shape = self.static_row_shape(fr, index, body, k);
            }
            stackers.push(st);
        }
        for i in 0..n {
            self.set(fr, index, Val::Prim(Prim::I64(i)), loc)?;
            let vals = self.nested(fr, body, loc)?;
            for (st, v) in stackers.iter_mut().zip(&vals) {
                st.push(self, fr, i as usize, v, loc)?;
            }
        }
        stackers.into_iter().map(|st| st.finish(self, loc)).collect()
    }
}

impl<'p> Machine<'p> {
    /// The row shape of result `k` of `build index < 0 => body`, where it
    /// is known without running the body
    /// ([`crate::shape::eval_static_row_shape`]).
    fn static_row_shape(&self, fr: &Frame<'p>, index: VarId, body: &Block, k: usize) -> Option<Vec<usize>> {
        let var = |v: VarId| match fr.env.get(v.index()) {
            Some(Some(Val::Prim(Prim::I64(x)))) => Some(*x),
            _ => None,
        };
        let dim = |v: VarId, axis: u8| match fr.env.get(v.index()) {
            Some(Some(Val::Arr(a))) => a.shape.get(axis as usize).and_then(|&d| i64::try_from(d).ok()),
            _ => None,
        };
        crate::shape::eval_static_row_shape(fr.func, Some(self.program), index, body, k, &var, &dim)
    }
}

/// Collects the rows of an array (`ArrayLit`, `Build`), checking that they
/// are regular; `n` rows are expected.
struct Stacker {
    row_ty: Type,
    n: usize,
    /// Shape of row 0, once seen.
    row_shape: Option<Vec<usize>>,
    /// The row shape of a comprehension that runs zero times, where it is
    /// known statically (`shape::static_row_dims`).
    empty_row_shape: Option<Vec<usize>>,
    data: Option<Data>,
}

impl Stacker {
    fn new(row_ty: Type, n: usize) -> Stacker {
        Stacker { row_ty, n, row_shape: None, empty_row_shape: None, data: None }
    }

    fn push(&mut self, m: &Machine, fr: &Frame, k: usize, row: &Val, loc: Loc) -> Res<()> {
        if row.ty() != self.row_ty {
            return Err(m.malformed(fr, loc, format!("a row of type {} where {} is expected", row.ty(), self.row_ty)));
        }
        let row_shape: &[usize] = match row {
            Val::Prim(_) => &[],
            Val::Arr(a) => &a.shape,
        };
        if self.data.is_none() {
            let len = match row {
                Val::Prim(_) => 1,
                Val::Arr(a) => a.len(),
            };
            let cap = len.checked_mul(self.n);
            let data = cap.and_then(|cap| Data::with_capacity(self.row_ty.elem, cap)).ok_or_else(|| {
                errors::out_of_memory(m.program, loc, format!("an array of {} rows of shape {row_shape:?}", self.n))
            })?;
            self.data = Some(data);
            self.row_shape = Some(row_shape.to_vec());
        }
        let (Some(data), Some(first)) = (&mut self.data, &self.row_shape) else {
            return Ok(());
        };
        if first.as_slice() != row_shape {
            return Err(errors::irregular(m.program, loc, k, row_shape, first));
        }
        let ok = match row {
            Val::Prim(p) => data.push(*p),
            Val::Arr(a) => a.append_to(data),
        };
        if !ok {
            return Err(m.malformed(fr, loc, "rows of different element types"));
        }
        Ok(())
    }

    fn finish(self, m: &Machine, loc: Loc) -> Res<Val> {
        let mut shape = vec![self.n];
        let data = match (self.data, self.row_shape) {
            (Some(data), Some(row_shape)) => {
                shape.extend(row_shape);
                data
            }
            // No rows: the static row shape, else extent 0 in every inner
            // dimension.
            _ => {
                match self.empty_row_shape {
                    Some(row) if row.len() == self.row_ty.rank as usize => shape.extend(row),
                    _ => shape.extend(std::iter::repeat_n(0, self.row_ty.rank as usize)),
                }
                Data::with_capacity(self.row_ty.elem, 0)
                    .ok_or_else(|| errors::out_of_memory(m.program, loc, "an empty array"))?
            }
        };
        Ok(Val::Arr(Array::new(shape, data, false)))
    }
}
