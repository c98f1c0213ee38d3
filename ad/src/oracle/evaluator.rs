//! Evaluation of the pure forms of the IR on dual values, generic over the
//! kind of derivative each `f64` carries ([`Mode`]).
//!
//! This is the translation `D{e}` of Krawiec et al. (2022), Figure 9, run as
//! an interpreter: variables, `let`, tuples (multi-result statements),
//! calls and control flow are evaluated as usual, with the duals flowing
//! through them unchanged ("structural" forms: `Index`, `Slice`, `Build`,
//! `ArrayLit`, `Loop`, `If` taking one branch, `Call`); only the primitives
//! (`Unary`, `Binary`, `Reduce`) make new derivatives, through
//! [`Mode::linear`] with the partial derivatives of [`super::rules`].
//! Primal values and run-time errors are exactly the interpreter's (same
//! [`ops`] and [`errors`]).

use super::rules;
use super::values::{DArr, DVal, RowStore, Store};
use arrayad_ir::interp::stack::MAX_DEPTH;
use arrayad_ir::interp::{errors, ops};
use arrayad_ir::{
    Atom, Block, Expr, FuncId, Function, Loc, Program, ReduceOp, RuntimeError, Stmt, StmtKind, Type, VarId,
};
use ops::{OpError, Prim};

type Res<T> = Result<T, RuntimeError>;

/// What an `f64` carries besides its value, and how primitives combine it.
pub(crate) trait Mode {
    /// The derivative of one `f64` scalar.
    type D: Clone;
    /// The derivative of a constant.
    fn zero(&self) -> Self::D;
    /// True for derivatives known to be zero (constants), which primitives
    /// skip.
    fn is_zero(&self, d: &Self::D) -> bool;
    /// The derivative `sum_i c_i d_i` of a primitive's result from the partial
    /// derivatives `c_i` and the (non-zero) derivatives `d_i` of its operands.
    fn linear(&mut self, terms: Vec<(f64, Self::D)>) -> Self::D;
}

/// The evaluator: a mode and the current nesting depth.
pub(crate) struct Evaluator<'p, M: Mode> {
    program: &'p Program,
    /// The mode (its state: the Delta store in reverse mode).
    pub mode: M,
    depth: usize,
}

/// The environment of one active call.
struct Frame<'p, D> {
    func: &'p Function,
    env: Vec<Option<DVal<D>>>,
}

impl<'p, D> Frame<'p, D> {
    fn name(&self, v: VarId) -> &'p str {
        self.func.vars.get(v.index()).map_or("?", |i| i.name.as_str())
    }
}

impl<'p, M: Mode> Evaluator<'p, M> {
    pub fn new(program: &'p Program, mode: M) -> Self {
        Evaluator { program, mode, depth: 0 }
    }

    /// Calls `func` on `args` (`D{e1 e2}`, Fig. 9).
    pub fn call(&mut self, func: FuncId, args: Vec<DVal<M::D>>, loc: Loc) -> Res<Vec<DVal<M::D>>> {
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
            let what = format!("blocks and calls nested deeper than {MAX_DEPTH}");
            return Err(errors::out_of_memory(self.program, loc, what));
        }
        self.depth += 1;
        Ok(())
    }

    fn malformed(&self, fr: &Frame<M::D>, loc: Loc, what: impl std::fmt::Display) -> RuntimeError {
        errors::malformed(self.program, loc, &fr.func.name, what)
    }

    // ----- variables and atoms -------------------------------------------

    fn set(&self, fr: &mut Frame<M::D>, v: VarId, x: DVal<M::D>, loc: Loc) -> Res<()> {
        match fr.env.get_mut(v.index()) {
            Some(slot) => {
                *slot = Some(x);
                Ok(())
            }
            None => Err(self.malformed(fr, loc, format!("variable %{} is not in the table", v.0))),
        }
    }

    fn get(&self, fr: &Frame<M::D>, v: VarId, loc: Loc) -> Res<DVal<M::D>> {
        match fr.env.get(v.index()) {
            Some(Some(x)) => Ok(x.clone()),
            _ => Err(self.malformed(fr, loc, format!("`{}%{}` is read before it is bound", fr.name(v), v.0))),
        }
    }

    /// `D{r} = pure (r, Zero)` for literals (Fig. 9).
    fn atom(&self, fr: &Frame<M::D>, a: &Atom, loc: Loc) -> Res<DVal<M::D>> {
        Ok(match a {
            Atom::Var(v) => return self.get(fr, *v, loc),
            Atom::F64(x) => DVal::F64(*x, self.mode.zero()),
            Atom::I64(x) => DVal::I64(*x),
            Atom::Bool(x) => DVal::Bool(*x),
        })
    }

    fn atoms(&self, fr: &Frame<M::D>, atoms: &[Atom], loc: Loc) -> Res<Vec<DVal<M::D>>> {
        atoms.iter().map(|a| self.atom(fr, a, loc)).collect()
    }

    /// The static type of an atom.
    fn atom_ty(&self, fr: &Frame<M::D>, a: &Atom, loc: Loc) -> Res<Type> {
        match a {
            Atom::Var(v) => match fr.func.vars.get(v.index()) {
                Some(info) => Ok(info.ty),
                None => Err(self.malformed(fr, loc, format!("variable %{} is not in the table", v.0))),
            },
            _ => Ok(fr.func.atom_ty(a)),
        }
    }

    fn int(&self, fr: &Frame<M::D>, a: &Atom, loc: Loc) -> Res<i64> {
        match self.atom(fr, a, loc)? {
            DVal::I64(i) => Ok(i),
            x => Err(self.malformed(fr, loc, format!("{} where i64 is expected", x.ty()))),
        }
    }

    fn boolean(&self, fr: &Frame<M::D>, a: &Atom, loc: Loc) -> Res<bool> {
        match self.atom(fr, a, loc)? {
            DVal::Bool(b) => Ok(b),
            x => Err(self.malformed(fr, loc, format!("{} where bool is expected", x.ty()))),
        }
    }

    fn array(&self, fr: &Frame<M::D>, v: VarId, loc: Loc) -> Res<DArr<M::D>> {
        match self.get(fr, v, loc)? {
            DVal::Arr(a) => Ok(a),
            _ => Err(self.malformed(fr, loc, format!("`{}` is not an array", fr.name(v)))),
        }
    }

    // ----- blocks and statements -----------------------------------------

    fn block(&mut self, fr: &mut Frame<'p, M::D>, b: &'p Block) -> Res<()> {
        b.stmts.iter().try_for_each(|s| self.stmt(fr, s))
    }

    fn nested(&mut self, fr: &mut Frame<'p, M::D>, b: &'p Block, loc: Loc) -> Res<Vec<DVal<M::D>>> {
        self.enter(loc)?;
        let r = self.block(fr, b).and_then(|()| self.atoms(fr, &b.results, loc));
        self.depth -= 1;
        r
    }

    /// `D{let x = e1 in e2} = do {x <- D{e1}; D{e2}}` (Fig. 9).
    fn stmt(&mut self, fr: &mut Frame<'p, M::D>, s: &'p Stmt) -> Res<()> {
        let loc = s.loc;
        match &s.kind {
            StmtKind::Let { vars, expr } => {
                let vals = self.expr(fr, expr, loc)?;
                if vals.len() != vars.len() {
                    let what = format!("{} values bound to {} variables", vals.len(), vars.len());
                    return Err(self.malformed(fr, loc, what));
                }
                for (v, x) in vars.iter().zip(vals) {
                    self.set(fr, *v, x, loc)?;
                }
                Ok(())
            }
            StmtKind::CheckSize { a, b, what } => {
                let (a, b) = (self.int(fr, a, loc)?, self.int(fr, b, loc)?);
                if a != b {
                    return Err(errors::size_mismatch(self.program, loc, what, a, b));
                }
                Ok(())
            }
            StmtKind::Assign { .. }
            | StmtKind::AccAdd { .. }
            | StmtKind::AccZero { .. }
            | StmtKind::Push(_)
            | StmtKind::TapeRewind(_)
            | StmtKind::For { .. }
            | StmtKind::If { .. } => Err(self.impure(fr, loc)),
        }
    }

    fn impure(&self, fr: &Frame<M::D>, loc: Loc) -> RuntimeError {
        self.malformed(fr, loc, "the AD oracles evaluate only the pure forms of the IR (no mutation or tape)")
    }

    // ----- expressions ----------------------------------------------------

    fn expr(&mut self, fr: &mut Frame<'p, M::D>, e: &'p Expr, loc: Loc) -> Res<Vec<DVal<M::D>>> {
        let one = |x| Ok(vec![x]);
        match e {
            Expr::Atom(a) => one(self.atom(fr, a, loc)?),
            Expr::Unary(op, a) => {
                let x = self.atom(fr, a, loc)?;
                one(self.unary(fr, *op, x, loc)?)
            }
            Expr::Binary(op, a, b) => {
                let (x, y) = (self.atom(fr, a, loc)?, self.atom(fr, b, loc)?);
                one(self.binary(fr, *op, x, y, loc)?)
            }
            Expr::Index { array, indices } => {
                let arr = self.array(fr, *array, loc)?;
                if indices.is_empty() || indices.len() > arr.shape.len() {
                    let what = format!("{} indices into an array of rank {}", indices.len(), arr.shape.len());
                    return Err(self.malformed(fr, loc, what));
                }
                let mut off = 0usize;
                for (axis, ia) in indices.iter().enumerate() {
                    let i = self.int(fr, ia, loc)?;
                    let extent = arr.shape[axis];
                    if i < 0 || i as u64 >= extent as u64 {
                        return Err(errors::index_out_of_bounds(self.program, loc, fr.name(*array), axis, i, extent));
                    }
                    off += i as usize * arr.stride(axis);
                }
                let shape = arr.shape[indices.len()..].to_vec();
                one(if shape.is_empty() { arr.get(off) } else { DVal::Arr(arr.view(off, shape)) })
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
                one(DVal::Arr(arr.view(lo as usize * arr.stride(0), shape)))
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
                one(DVal::Arr(arr.view(0, shape)))
            }
            // A structural form: the updated position takes the value's
            // elements (and derivatives), the others the array's.
            Expr::Update { array, indices, value } => {
                let arr = self.array(fr, *array, loc)?;
                if indices.is_empty() || indices.len() > arr.shape.len() {
                    let what = format!("{} indices into an array of rank {}", indices.len(), arr.shape.len());
                    return Err(self.malformed(fr, loc, what));
                }
                let mut off = 0usize;
                for (axis, ia) in indices.iter().enumerate() {
                    let i = self.int(fr, ia, loc)?;
                    let extent = arr.shape[axis];
                    if i < 0 || i as u64 >= extent as u64 {
                        return Err(errors::index_out_of_bounds(self.program, loc, fr.name(*array), axis, i, extent));
                    }
                    off += i as usize * arr.stride(axis);
                }
                let row_shape = &arr.shape[indices.len()..];
                let x = self.atom(fr, value, loc)?;
                let row_len = match &x {
                    DVal::Arr(r) => {
                        if r.shape.len() != row_shape.len() {
                            return Err(self.malformed(fr, loc, "an update with a row of the wrong rank"));
                        }
                        for (axis, (a, b)) in r.shape.iter().zip(row_shape).enumerate() {
                            if a != b {
                                let what = format!(
                                    "the row assigned into `{}` must have the shape of its rows: axis {axis}",
                                    fr.name(*array)
                                );
                                return Err(errors::size_mismatch(self.program, loc, &what, *a as i64, *b as i64));
                            }
                        }
                        r.len()
                    }
                    _ => 1,
                };
                let mut st = RowStore::new(arr.ty().elem);
                if !st.reserve(arr.len()) {
                    return Err(errors::out_of_memory(self.program, loc, "the updated array cannot be allocated"));
                }
                let mut ok = true;
                for k in 0..off {
                    ok &= st.push(&arr.get(k));
                }
                ok &= st.push(&x);
                for k in off + row_len..arr.len() {
                    ok &= st.push(&arr.get(k));
                }
                if !ok {
                    return Err(self.malformed(fr, loc, "an update with a value of the wrong type"));
                }
                one(DVal::Arr(st.finish(arr.shape.clone())))
            }
            Expr::Dim { array, axis } => {
                let arr = self.array(fr, *array, loc)?;
                match arr.shape.get(*axis as usize) {
                    Some(&d) => one(DVal::I64(d as i64)),
                    None => {
                        Err(self.malformed(fr, loc, format!("axis {axis} of an array of rank {}", arr.shape.len())))
                    }
                }
            }
            Expr::Reduce { op, array } => one(self.reduce(fr, *op, *array, loc)?),
            Expr::ArrayLit { elem_ty, elems } => {
                let rows = self.atoms(fr, elems, loc)?;
                let mut st = Stacker::new(*elem_ty, rows.len());
                for (k, r) in rows.iter().enumerate() {
                    st.push(self, fr, k, r, loc)?;
                }
                one(st.finish())
            }
            Expr::Build { n, index, body } => {
                let n = self.int(fr, n, loc)?;
                if n < 0 {
                    return Err(errors::negative_size(self.program, loc, n));
                }
                let rows = usize::try_from(n)
                    .map_err(|_| errors::out_of_memory(self.program, loc, format!("for of size {n}")))?;
                let mut stackers: Vec<Stacker<M::D>> = Vec::with_capacity(body.results.len());
                for (k, r) in body.results.iter().enumerate() {
                    let mut st = Stacker::new(self.atom_ty(fr, r, loc)?, rows);
                    if n == 0 {
                        st.row_shape = static_row_shape(self.program, fr, *index, body, k);
                    }
                    stackers.push(st);
                }
                for i in 0..n {
                    self.set(fr, *index, DVal::I64(i), loc)?;
                    let vals = self.nested(fr, body, loc)?;
                    for (st, v) in stackers.iter_mut().zip(&vals) {
                        st.push(self, fr, i as usize, v, loc)?;
                    }
                }
                Ok(stackers.into_iter().map(Stacker::finish).collect())
            }
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
                    self.set(fr, *index, DVal::I64(i), loc)?;
                    for (s, x) in states.iter().zip(cur) {
                        self.set(fr, *s, x, loc)?;
                    }
                    cur = self.nested(fr, body, loc)?;
                }
                Ok(cur)
            }
            // A while loop: its trip count is a primal fact, like a branch.
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
                        Some(DVal::Bool(true)) => {}
                        Some(DVal::Bool(false)) => break,
                        _ => return Err(self.malformed(fr, loc, "while condition is not a bool")),
                    }
                    cur = self.nested(fr, body, loc)?;
                }
                Ok(cur)
            }
            // `D{case ...}`: the branch taken (Fig. 9).
            Expr::If { cond, then_branch, else_branch } => {
                let branch = if self.boolean(fr, cond, loc)? { then_branch } else { else_branch };
                self.nested(fr, branch, loc)
            }
            Expr::Call { func, args } => {
                let args = self.atoms(fr, args, loc)?;
                self.call(*func, args, loc)
            }
            Expr::ZerosLike(_) | Expr::Zeros(_) | Expr::Pop | Expr::TapeMark => Err(self.impure(fr, loc)),
        }
    }

    fn op_error(&self, fr: &Frame<M::D>, e: OpError, loc: Loc) -> RuntimeError {
        match e {
            OpError::DivisionByZero(op, x) => errors::division_by_zero(self.program, loc, op, x),
            OpError::IllTyped(what) => self.malformed(fr, loc, what),
        }
    }

    /// The derivative `sum c_i d_i` over the operands whose derivative is not
    /// zero; zero (no Delta) when there are none.
    fn combine(&mut self, terms: impl IntoIterator<Item = (f64, M::D)>) -> M::D {
        let terms: Vec<(f64, M::D)> = terms.into_iter().filter(|(_, d)| !self.mode.is_zero(d)).collect();
        if terms.is_empty() {
            self.mode.zero()
        } else {
            self.mode.linear(terms)
        }
    }

    fn unary(&mut self, fr: &Frame<M::D>, op: arrayad_ir::UnOp, x: DVal<M::D>, loc: Loc) -> Res<DVal<M::D>> {
        let (prim, dx) = match x {
            DVal::F64(v, d) => (Prim::F64(v), Some((v, d))),
            DVal::I64(v) => (Prim::I64(v), None),
            DVal::Bool(v) => (Prim::Bool(v), None),
            DVal::Arr(_) => return Err(self.malformed(fr, loc, format!("{} of an array", op.name()))),
        };
        let y = ops::unary(op, prim).map_err(|e| self.op_error(fr, e, loc))?;
        Ok(match y {
            Prim::F64(yv) => {
                let d = match (dx, op) {
                    (Some((xv, d)), op) => match rules::unary_partial(op, xv, yv) {
                        Some(c) => self.combine([(c, d)]),
                        None => self.mode.zero(),
                    },
                    // i64 -> f64 conversion: a constant.
                    (None, _) => self.mode.zero(),
                };
                DVal::F64(yv, d)
            }
            Prim::I64(v) => DVal::I64(v),
            Prim::Bool(v) => DVal::Bool(v),
        })
    }

    fn binary(
        &mut self,
        fr: &Frame<M::D>,
        op: arrayad_ir::BinOp,
        a: DVal<M::D>,
        b: DVal<M::D>,
        loc: Loc,
    ) -> Res<DVal<M::D>> {
        let prim = |v: &DVal<M::D>| match v {
            DVal::F64(x, _) => Some(Prim::F64(*x)),
            DVal::I64(x) => Some(Prim::I64(*x)),
            DVal::Bool(x) => Some(Prim::Bool(*x)),
            DVal::Arr(_) => None,
        };
        let (Some(pa), Some(pb)) = (prim(&a), prim(&b)) else {
            return Err(self.malformed(fr, loc, format!("{} of an array", op.name())));
        };
        let y = ops::binary(op, pa, pb).map_err(|e| self.op_error(fr, e, loc))?;
        Ok(match (y, a, b) {
            (Prim::F64(yv), DVal::F64(x, dx), DVal::F64(z, dz)) => {
                let d = match rules::binary_partials(op, x, z, yv) {
                    Some((cx, cz)) => self.combine([(cx, dx), (cz, dz)]),
                    None => self.mode.zero(),
                };
                DVal::F64(yv, d)
            }
            (Prim::F64(yv), _, _) => DVal::F64(yv, self.mode.zero()),
            (Prim::I64(v), _, _) => DVal::I64(v),
            (Prim::Bool(v), _, _) => DVal::Bool(v),
        })
    }

    fn reduce(&mut self, fr: &Frame<M::D>, op: ReduceOp, array: VarId, loc: Loc) -> Res<DVal<M::D>> {
        let arr = self.array(fr, array, loc)?;
        if arr.shape.len() != 1 {
            return Err(self.malformed(fr, loc, format!("{} of an array of rank {}", op.name(), arr.shape.len())));
        }
        let r = arr.range();
        match (&*arr.store, op) {
            (Store::I64(v), ReduceOp::Sum) => Ok(DVal::I64(ops::sum_i64(v[r].iter().copied()))),
            (Store::F64 { x, d }, _) => {
                let (xs, ds) = (&x[r.clone()], &d[r]);
                let value = match op {
                    ReduceOp::Sum => Some(ops::sum_f64(xs)),
                    ReduceOp::Max => ops::maximum(xs.iter().copied()),
                    ReduceOp::Min => ops::minimum(xs.iter().copied()),
                };
                let value = value.ok_or_else(|| errors::empty_reduction(self.program, loc, op, fr.name(array)))?;
                let partials = rules::reduce_partials(op, xs, value);
                let terms: Vec<(f64, M::D)> =
                    partials.into_iter().zip(ds).filter(|(c, _)| *c != 0.0).map(|(c, d)| (c, d.clone())).collect();
                Ok(DVal::F64(value, self.combine(terms)))
            }
            _ => Err(self.malformed(fr, loc, format!("{} of {}", op.name(), arr.ty()))),
        }
    }
}

/// The row shape of result `k` of `build index < 0 => body`, where it is
/// known without running the body, as the interpreter and compiled code
/// find it (`arrayad_ir::shape::eval_static_row_shape`).
fn static_row_shape<'p, D>(
    program: &'p Program,
    fr: &Frame<'p, D>,
    index: VarId,
    body: &'p Block,
    k: usize,
) -> Option<Vec<usize>> {
    let var = |v: VarId| match fr.env.get(v.index()) {
        Some(Some(DVal::I64(x))) => Some(*x),
        _ => None,
    };
    let dim = |v: VarId, axis: u8| match fr.env.get(v.index()) {
        Some(Some(DVal::Arr(a))) => a.shape.get(axis as usize).and_then(|&d| i64::try_from(d).ok()),
        _ => None,
    };
    arrayad_ir::shape::eval_static_row_shape(fr.func, Some(program), index, body, k, &var, &dim)
}

/// Collects the rows of an array literal or `for` body, checking that they
/// are regular; `n` rows are expected (when none come, the row shape set
/// before, if any, stands).
struct Stacker<D> {
    row_ty: Type,
    n: usize,
    row_shape: Option<Vec<usize>>,
    store: RowStore<D>,
}

impl<D: Clone> Stacker<D> {
    fn new(row_ty: Type, n: usize) -> Self {
        Stacker { row_ty, n, row_shape: None, store: RowStore::new(row_ty.elem) }
    }

    fn push<M: Mode<D = D>>(&mut self, ev: &Evaluator<M>, fr: &Frame<D>, k: usize, row: &DVal<D>, loc: Loc) -> Res<()> {
        if row.ty() != self.row_ty {
            let what = format!("a row of type {} where {} is expected", row.ty(), self.row_ty);
            return Err(ev.malformed(fr, loc, what));
        }
        let (shape, len): (&[usize], usize) = match row {
            DVal::Arr(a) => (&a.shape, a.len()),
            _ => (&[], 1),
        };
        match &self.row_shape {
            _ if k == 0 => {
                if !len.checked_mul(self.n).is_some_and(|total| self.store.reserve(total)) {
                    let what = format!("an array of {} rows of shape {shape:?}", self.n);
                    return Err(errors::out_of_memory(ev.program, loc, what));
                }
                self.row_shape = Some(shape.to_vec());
            }
            Some(first) if first.as_slice() != shape => {
                return Err(errors::irregular(ev.program, loc, k, shape, first))
            }
            _ => {}
        }
        if !self.store.push(row) {
            return Err(ev.malformed(fr, loc, "rows of different element types"));
        }
        Ok(())
    }

    fn finish(self) -> DVal<D> {
        let mut shape = vec![self.n];
        match self.row_shape {
            Some(rs) => shape.extend(rs),
            // No rows: extent 0 in every inner dimension.
            None => shape.extend(std::iter::repeat_n(0, self.row_ty.rank as usize)),
        }
        DVal::Arr(self.store.finish(shape))
    }
}
