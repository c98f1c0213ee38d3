//! Forward mode: the dual-number transformation (Krawiec et al. 2022,
//! Fig. 3) as an IR-to-IR rewrite.
//!
//! Every `f64` variable `x` (scalar or array) that depends on an active
//! input gets a tangent variable `dx` of the same type; variables that do
//! not get none (a *symbolic zero*, so no work is spent on constants).
//! Primal statements are copied unchanged; each is followed by the linear
//! statements computing its tangent. Control flow (`build`, `loop`, `if`)
//! is copied with tangents threaded through results and loop states.
//!
//! The output marks which variables are linear (tangents); reverse mode
//! unzips and transposes it (`reverse.rs`).
//!
//! # Forward over reverse
//!
//! The input may itself be reverse-mode code (a `vjp`/`grad` operator of
//! LANGUAGE.md section 10 inlined into the definition): mutable variables,
//! accumulators, in-place accumulation, the tape and effect loops. Their
//! tangents follow the same dual-number reading: the tangent of an f64
//! accumulator is an accumulator of tangents (`acc[i] += v` adds `dv` to
//! `dacc[i]`), a mutable f64 variable gets a mutable tangent assigned
//! alongside it, every push of an f64 value also pushes its tangent (a
//! materialised zero when it has none) and every pop of an f64 value pops
//! that tangent first, so tape positions and marks stay consistent. The
//! result is ordinary (imperative) forward code: the Hessian-vector product
//! is the jvp of the vjp.

use crate::reverse::over_reverse::{StubRule, StubRules};
use crate::AdError;
use arrayad_ir::builder::Builder;
use arrayad_ir::{Atom, BinOp, Block, Expr, Function, ReduceOp, Scalar, Stmt, StmtKind, Type, VarId};
use std::collections::{HashMap, HashSet};

/// A forward-mode transformation in progress: the tangent of each primal
/// variable, and which variables are linear.
#[derive(Default)]
pub(crate) struct Jvp {
    /// Tangent of each primal variable that has one.
    pub tan: HashMap<VarId, Atom>,
    /// Variables holding tangents (linear in the input tangents).
    pub linear: HashSet<VarId>,
    /// For each linear array variable, a primal variable of the same shape.
    pub primal_of: HashMap<VarId, VarId>,
    /// The rules of the `vjp`/`grad` operators whose calls the primal
    /// keeps, by operator (`reverse/over_reverse.rs`).
    pub calls: StubRules,
    /// The number of functions of the program whose kept calls the primal
    /// makes (the jvps of those calls are `arrayad_ir::KeptKind::jvp`
    /// callees).
    pub kept_calls: Option<usize>,
}

/// The jvp of a function, with the facts reverse mode needs.
pub struct JvpOutput {
    /// The jvp function: params = primal params ++ tangents of the active
    /// f64 params; results = primal results ++ tangents of the f64 results.
    pub func: Function,
    /// The linear (tangent) variables of `func`.
    pub linear: HashSet<VarId>,
    /// For each linear array variable, a primal variable of the same shape.
    pub primal_of: HashMap<VarId, VarId>,
    /// Number of primal params (a prefix of `func.params`).
    pub n_primal_params: usize,
    /// Number of primal results (a prefix of `func.body.results`).
    pub n_primal_results: usize,
    /// The rules of its linear calls, by callee (empty unless the primal
    /// kept calls of `vjp`/`grad` operators: `reverse/over_reverse.rs`).
    pub(crate) rules: StubRules,
    /// The number of functions of the program whose definitions the
    /// primal calls, kept ([`arrayad_ir::KeptKind`]): a linear call of a
    /// kept definition's jvp has its vjp as transpose.
    pub(crate) kept_calls: Option<usize>,
}

/// Fuses each kept call of a definition (or of its vjp) with the linear
/// call of its jvp that follows it (`Jvp::kept_call`):
/// `vars = g(args); (_, dvars) = g_jvp(args, dargs)` becomes
/// `(vars, dvars) = g_jvp(args, dargs)`, so that a jvp runs the callee's
/// value once instead of twice. The results are the same: the jvp's
/// leading results are the callee's value, computed by the same code
/// (optimised with its tangents), and it fails where the callee fails.
/// For code that is not transposed (the jvp, the hvp, the jvp of a vjp):
/// reverse mode needs the linear call alone.
///
/// `n`: the program's number of functions ([`arrayad_ir::KeptKind`]).
pub(crate) fn fuse_kept_calls(f: &mut Function, n: usize) {
    let jvp_of = |func: arrayad_ir::FuncId| {
        let (def, kind) = arrayad_ir::KeptKind::of_callee(n, func)?;
        Some(kind.jvp()?.callee(n, def))
    };
    arrayad_ir::visit::for_each_block_mut(&mut f.body, &mut |b| {
        if !b.stmts.iter().any(|s| matches!(s.kind, StmtKind::Let { expr: Expr::Call { .. }, .. })) {
            return;
        }
        let mut out = Vec::with_capacity(b.stmts.len());
        let mut stmts = std::mem::take(&mut b.stmts).into_iter().peekable();
        while let Some(s) = stmts.next() {
            if let (StmtKind::Let { vars, expr: Expr::Call { func, args } }, Some(next)) = (&s.kind, stmts.peek()) {
                if let StmtKind::Let { vars: all, expr: Expr::Call { func: jvp, args: jvp_args } } = &next.kind {
                    if jvp_of(*func) == Some(*jvp) && jvp_args.starts_with(args) && all.len() >= vars.len() {
                        let mut fused = vars.clone();
                        fused.extend_from_slice(&all[vars.len()..]);
                        let expr = Expr::Call { func: *jvp, args: jvp_args.clone() };
                        out.push(Stmt { kind: StmtKind::Let { vars: fused, expr }, loc: s.loc });
                        stmts.next();
                        continue;
                    }
                }
            }
            out.push(s);
        }
        b.stmts = out;
    });
}

/// The jvp of `prim`, differentiating the params with `active[k]` true
/// and f64 elements, for a primal that keeps the calls of the `vjp`/`grad`
/// operators of `calls` (`reverse/over_reverse.rs`): each such call is
/// copied, and its tangents are bound by one linear call of the operator's
/// jvp ([`StubRule::jvp_all`]); with `kept_calls` (the program's number of
/// functions), the calls of its definitions (and of their vjps) that the
/// primal keeps likewise, by a linear call of the definition's jvp (or of
/// the jvp of its vjp: [`arrayad_ir::KeptKind::jvp`]).
pub(crate) fn jvp_with_calls(
    prim: &Function,
    active: &[bool],
    calls: Option<&crate::reverse::over_reverse::StubCalls>,
    kept_calls: Option<usize>,
) -> Result<JvpOutput, AdError> {
    let mut f = prim.clone();
    f.name = format!("{}_jvp", prim.name);
    let body = std::mem::take(&mut f.body);
    let mut jvp = Jvp { calls: calls.map(|c| c.by_op.clone()).unwrap_or_default(), kept_calls, ..Jvp::default() };
    let mut b = Builder::new(&mut f);
    let mut tparams = Vec::new();
    for (k, p) in prim.params.iter().enumerate() {
        let ty = prim.ty(*p);
        if active.get(k).copied().unwrap_or(false) && ty.elem == Scalar::F64 {
            tparams.push(jvp.new_tangent(&mut b, *p));
        }
    }
    let tans = jvp.block(&mut b, &body)?;
    let mut results = body.results.clone();
    let mut rtypes = prim.result_types.clone();
    for (r, t) in body.results.iter().zip(tans) {
        let ty = b.func.atom_ty(r);
        if ty.elem == Scalar::F64 {
            let t = match t {
                Some(t) => t,
                None => jvp.zero_like(&mut b, *r),
            };
            results.push(t);
            rtypes.push(ty);
        }
    }
    let body = b.finish(results);
    f.body = body;
    f.params.extend(tparams);
    f.result_types = rtypes;
    Ok(JvpOutput {
        func: f,
        linear: jvp.linear,
        primal_of: jvp.primal_of,
        n_primal_params: prim.params.len(),
        n_primal_results: prim.result_types.len(),
        rules: calls.map(|c| c.rules.clone()).unwrap_or_default(),
        kept_calls,
    })
}

/// How a loop runs: `n` times with an index, or while a condition holds.
#[derive(Clone, Copy)]
enum Head<'a> {
    Counted(Atom, VarId),
    While(&'a Block),
}

impl Jvp {
    /// A fresh tangent variable `d<name>` for the primal variable `v` (same
    /// type), recorded as `v`'s tangent.
    fn new_tangent(&mut self, b: &mut Builder, v: VarId) -> VarId {
        let dv = b.var(format!("d{}", b.func.var(v).name), b.func.ty(v));
        self.linear.insert(dv);
        self.primal_of.insert(dv, v);
        self.tan.insert(v, Atom::Var(dv));
        dv
    }

    /// Binds a linear expression of type `ty` to a fresh tangent variable.
    pub(crate) fn lin(&mut self, b: &mut Builder, e: Expr, ty: Type, primal: Option<VarId>) -> Atom {
        let v = b.let1("d", e, ty);
        self.linear.insert(v);
        if let Some(p) = primal {
            self.primal_of.insert(v, p);
        }
        Atom::Var(v)
    }

    /// `c * d` for a primal scalar `c` and a tangent `d`.
    pub(crate) fn scale(&mut self, b: &mut Builder, c: Atom, d: Atom) -> Atom {
        self.lin(b, Expr::Binary(BinOp::Mul, c, d), Type::F64, None)
    }

    /// The sum of two optional scalar tangents.
    pub(crate) fn add(&mut self, b: &mut Builder, x: Option<Atom>, y: Option<Atom>) -> Option<Atom> {
        match (x, y) {
            (Some(x), Some(y)) => Some(self.lin(b, Expr::Binary(BinOp::Add, x, y), Type::F64, None)),
            (x, None) => x,
            (None, y) => y,
        }
    }

    /// A materialised zero tangent shaped like the primal `a`.
    pub(crate) fn zero_like(&mut self, b: &mut Builder, a: Atom) -> Atom {
        match a {
            Atom::Var(v) if b.func.ty(v).is_array() => {
                let ty = b.func.ty(v).with_elem(Scalar::F64);
                self.lin(b, Expr::ZerosLike(v), ty, Some(v))
            }
            _ => Atom::F64(0.0),
        }
    }

    fn tangent(&self, a: &Atom) -> Option<Atom> {
        match a {
            Atom::Var(v) => self.tan.get(v).copied(),
            _ => None,
        }
    }

    /// Transforms the statements of `blk` into the builder's current block
    /// and returns the tangents of its results.
    fn block(&mut self, b: &mut Builder, blk: &Block) -> Result<Vec<Option<Atom>>, AdError> {
        for s in &blk.stmts {
            b.loc = s.loc;
            self.stmt(b, s)?;
        }
        Ok(blk.results.iter().map(|r| self.tangent(r)).collect())
    }

    fn copy(&self, b: &mut Builder, s: &Stmt) {
        b.stmt(s.kind.clone());
    }

    /// A kept call `vars = op(args)` of a `vjp`/`grad` operator: copied,
    /// and when an argument has a tangent, the tangents of its f64 results
    /// bound by the linear call `jvp_op(args, tangents of the f64 args)`
    /// (its leading primal results unused): `reverse/over_reverse.rs`.
    fn stub_call(&mut self, b: &mut Builder, s: &Stmt, vars: &[VarId], args: &[Atom], rule: &StubRule) {
        self.copy(b, s);
        if args.iter().all(|a| self.tangent(a).is_none()) {
            return;
        }
        let mut call_args = args.to_vec();
        for (a, ty) in args.iter().zip(&rule.params) {
            if ty.elem == Scalar::F64 {
                let t = self.tangent_or_zero(b, *a);
                call_args.push(t);
            }
        }
        let mut all: Vec<VarId> = rule.results.iter().map(|ty| b.var("unused", *ty)).collect();
        for (v, ty) in vars.iter().zip(&rule.results) {
            if ty.elem == Scalar::F64 {
                all.push(self.new_tangent(b, *v));
            }
        }
        b.stmt(StmtKind::Let { vars: all, expr: Expr::Call { func: rule.jvp_all, args: call_args } });
    }

    /// A kept call `vars = g(args)` of a definition or of its vjp
    /// ([`arrayad_ir::KeptKind`]): copied, and when an argument has a
    /// tangent, the tangents of its f64 results bound by the linear call
    /// `jvp` of `g`'s jvp in every f64 param (its leading primal results
    /// unused). The transpose of a definition's jvp is its vjp
    /// (`reverse/rules/call.rs`); the jvp of a vjp is only called by
    /// Hessian-vector products, never transposed.
    fn kept_call(&mut self, b: &mut Builder, s: &Stmt, vars: &[VarId], args: &[Atom], jvp: arrayad_ir::FuncId) {
        let no_f64_result = vars.iter().all(|v| b.func.ty(*v).elem != Scalar::F64);
        if no_f64_result || args.iter().all(|a| self.tangent(a).is_none()) {
            self.copy(b, s);
            return;
        }
        // Zero tangents first: the call and its linear call stay next to
        // each other, for `fuse_kept_calls`.
        let mut call_args = args.to_vec();
        for a in args {
            if Self::is_f64_atom(b, a) {
                let t = self.tangent_or_zero(b, *a);
                call_args.push(t);
            }
        }
        self.copy(b, s);
        let types: Vec<Type> = vars.iter().map(|v| b.func.ty(*v)).collect();
        let mut all: Vec<VarId> = types.iter().map(|ty| b.var("unused", *ty)).collect();
        for (v, ty) in vars.iter().zip(&types) {
            if ty.elem == Scalar::F64 {
                all.push(self.new_tangent(b, *v));
            }
        }
        b.stmt(StmtKind::Let { vars: all, expr: Expr::Call { func: jvp, args: call_args } });
    }

    /// A tangent of the atom `a` (of f64 elements): its tangent, or a
    /// materialised zero.
    fn tangent_or_zero(&mut self, b: &mut Builder, a: Atom) -> Atom {
        match self.tangent(&a) {
            Some(t) => t,
            None => self.zero_like(b, a),
        }
    }

    fn is_f64_atom(b: &Builder, a: &Atom) -> bool {
        match a {
            Atom::Var(v) => b.func.ty(*v).elem == Scalar::F64,
            Atom::F64(_) => true,
            _ => false,
        }
    }

    /// The imperative statements of reverse-mode code (module docs,
    /// "Forward over reverse"): an accumulation's tangent is an
    /// accumulation of tangents, an assignment's an assignment of its
    /// value's tangent, a push also pushes the value's tangent, effect
    /// loops and branches are transformed inside.
    fn imperative(&mut self, b: &mut Builder, s: &Stmt) -> Result<(), AdError> {
        match &s.kind {
            StmtKind::Let { .. } => unreachable!("a let is not imperative"),
            StmtKind::CheckSize { .. } | StmtKind::TapeRewind(_) => self.copy(b, s),
            StmtKind::Assign { var, value } => {
                self.copy(b, s);
                if let Some(Atom::Var(dvar)) = self.tan.get(var).copied() {
                    let t = self.tangent_or_zero(b, *value);
                    b.stmt(StmtKind::Assign { var: dvar, value: t });
                }
            }
            StmtKind::AccAdd { acc, indices, value } => {
                self.copy(b, s);
                if let (Some(Atom::Var(dacc)), Some(dv)) = (self.tan.get(acc).copied(), self.tangent(value)) {
                    b.stmt(StmtKind::AccAdd { acc: dacc, indices: indices.clone(), value: dv });
                }
            }
            // Clearing is linear: the tangent accumulator is cleared too.
            StmtKind::AccZero { acc, indices } => {
                self.copy(b, s);
                if let Some(Atom::Var(dacc)) = self.tan.get(acc).copied() {
                    b.stmt(StmtKind::AccZero { acc: dacc, indices: indices.clone() });
                }
            }
            StmtKind::Push(a) => {
                self.copy(b, s);
                // Pops pop the tangent of every f64 value first (Pop rule).
                if Self::is_f64_atom(b, a) {
                    let t = self.tangent_or_zero(b, *a);
                    b.stmt(StmtKind::Push(t));
                }
            }
            StmtKind::For { n, index, reverse, body } => {
                b.begin_block();
                self.block(b, body)?;
                let body = b.end_block(vec![]);
                b.loc = s.loc;
                b.stmt(StmtKind::For { n: *n, index: *index, reverse: *reverse, body });
            }
            StmtKind::If { cond, then_branch, else_branch } => {
                b.begin_block();
                self.block(b, then_branch)?;
                let tb = b.end_block(vec![]);
                b.begin_block();
                self.block(b, else_branch)?;
                let eb = b.end_block(vec![]);
                b.loc = s.loc;
                b.stmt(StmtKind::If { cond: *cond, then_branch: tb, else_branch: eb });
            }
        }
        Ok(())
    }

    /// After the let of a mutable f64 variable `v`: its tangent becomes a
    /// mutable variable too (assignments to `v` assign it), starting at the
    /// tangent of `v`'s initial value; a placeholder array without a tangent
    /// (reverse mode's lazy cotangents: never read before an assignment)
    /// starts as the same placeholder.
    fn mutable_tangent(&mut self, b: &mut Builder, v: VarId, init: &Expr) {
        let ty = b.func.ty(v);
        let start = match (self.tan.get(&v).copied(), init) {
            (Some(t), _) => t,
            (None, Expr::Atom(a @ Atom::Var(_))) if ty.is_array() => *a,
            (None, _) => self.zero_like(b, Atom::Var(v)),
        };
        let dv = b.func.new_mut_var(format!("d{}", b.func.var(v).name), ty);
        self.linear.insert(dv);
        self.primal_of.insert(dv, v);
        b.stmt(StmtKind::Let { vars: vec![dv], expr: Expr::Atom(start) });
        self.tan.insert(v, Atom::Var(dv));
    }

    fn stmt(&mut self, b: &mut Builder, s: &Stmt) -> Result<(), AdError> {
        let StmtKind::Let { vars, expr } = &s.kind else {
            return self.imperative(b, s);
        };
        self.let_stmt(b, s, vars, expr)?;
        if let [v] = vars.as_slice() {
            if b.func.var(*v).mutable && b.func.ty(*v).elem == Scalar::F64 {
                self.mutable_tangent(b, *v, expr);
            }
        }
        Ok(())
    }

    fn let_stmt(&mut self, b: &mut Builder, s: &Stmt, vars: &[VarId], expr: &Expr) -> Result<(), AdError> {
        let v0 = vars.first().copied();
        match expr {
            Expr::Atom(a) => {
                self.copy(b, s);
                if let (Some(t), Some(v)) = (self.tangent(a), v0) {
                    self.tan.insert(v, t);
                }
            }
            Expr::Unary(op, x) => {
                self.copy(b, s);
                if let (Some(dx), Some(v)) = (self.tangent(x), v0) {
                    if let Some(dy) = self.unary_rule(b, *op, *x, Atom::Var(v), dx) {
                        self.tan.insert(v, dy);
                    }
                }
            }
            Expr::Binary(op, x, z) => {
                self.copy(b, s);
                let (dx, dz) = (self.tangent(x), self.tangent(z));
                if let Some(v) = v0 {
                    if let Some(dy) = self.binary_rule(b, *op, *x, *z, Atom::Var(v), dx, dz) {
                        self.tan.insert(v, dy);
                    }
                }
            }
            Expr::Index { array, indices } => {
                self.copy(b, s);
                if let (Some(Atom::Var(da)), Some(v)) = (self.tan.get(array).copied(), v0) {
                    let ty = b.func.ty(v);
                    let dy = self.lin(b, Expr::Index { array: da, indices: indices.clone() }, ty, Some(v));
                    self.tan.insert(v, dy);
                }
            }
            Expr::Slice { array, lo, hi } => {
                self.copy(b, s);
                if let (Some(Atom::Var(da)), Some(v)) = (self.tan.get(array).copied(), v0) {
                    let ty = b.func.ty(v);
                    let dy = self.lin(b, Expr::Slice { array: da, lo: *lo, hi: *hi }, ty, Some(v));
                    self.tan.insert(v, dy);
                }
            }
            // A reshape is linear: the tangent's reshape (a view).
            Expr::Reshape { array, dims } => {
                self.copy(b, s);
                if let (Some(Atom::Var(da)), Some(v)) = (self.tan.get(array).copied(), v0) {
                    let ty = b.func.ty(v);
                    let dy = self.lin(b, Expr::Reshape { array: da, dims: dims.clone() }, ty, Some(v));
                    self.tan.insert(v, dy);
                }
            }
            // An update is linear in the array and the value together: the
            // tangent's update by the value's tangent (zero where either has
            // none).
            Expr::Update { array, indices, value } => {
                self.copy(b, s);
                let (da, dv) = (self.tan.get(array).copied(), self.tangent(value));
                if let (true, Some(v)) = (da.is_some() || dv.is_some(), v0) {
                    let da = self.tangent_or_zero(b, Atom::Var(*array));
                    let dv = self.tangent_or_zero(b, *value);
                    let ty = b.func.ty(v);
                    if let Atom::Var(da) = da {
                        let e = Expr::Update { array: da, indices: indices.clone(), value: dv };
                        let dy = self.lin(b, e, ty, Some(v));
                        self.tan.insert(v, dy);
                    }
                }
            }
            Expr::Dim { .. } => self.copy(b, s),
            Expr::Reduce { op, array } => {
                self.copy(b, s);
                if let (Some(Atom::Var(da)), Some(v)) = (self.tan.get(array).copied(), v0) {
                    let dy = match op {
                        ReduceOp::Sum => self.lin(b, Expr::Reduce { op: ReduceOp::Sum, array: da }, Type::F64, None),
                        ReduceOp::Max | ReduceOp::Min => self.extreme_rule(b, *array, v, da),
                    };
                    self.tan.insert(v, dy);
                }
            }
            Expr::ArrayLit { elem_ty, elems } => {
                self.copy(b, s);
                if let Some(v) = v0 {
                    if elems.iter().any(|e| self.tangent(e).is_some()) {
                        let telems: Vec<Atom> = elems
                            .iter()
                            .map(|e| match self.tangent(e) {
                                Some(t) => t,
                                None => self.zero_like(b, *e),
                            })
                            .collect();
                        let ety = elem_ty.with_elem(Scalar::F64);
                        let dy = self.lin(b, Expr::ArrayLit { elem_ty: ety, elems: telems }, ety.lift(), Some(v));
                        self.tan.insert(v, dy);
                    }
                }
            }
            Expr::Build { n, index, body } => {
                b.begin_block();
                let tans = self.block(b, body)?;
                let mut results = body.results.clone();
                let mut all = vars.to_vec();
                for (k, t) in tans.into_iter().enumerate() {
                    if let Some(t) = t {
                        results.push(t);
                        all.push(self.new_tangent(b, vars[k]));
                    }
                }
                let body = b.end_block(results);
                b.loc = s.loc;
                b.stmt(StmtKind::Let { vars: all, expr: Expr::Build { n: *n, index: *index, body } });
            }
            Expr::Loop { n, index, states, init, body } => {
                self.loop_rule(b, s, vars, Head::Counted(*n, *index), states, init, body)?
            }
            Expr::While { states, init, cond, body } => {
                self.loop_rule(b, s, vars, Head::While(cond), states, init, body)?
            }
            Expr::If { cond, then_branch, else_branch } => self.if_rule(b, s, vars, *cond, then_branch, else_branch)?,
            Expr::Call { func, args } => {
                // A kept call of a definition or of its vjp: tangents by
                // the matching jvp ([`arrayad_ir::KeptKind::jvp`]).
                let kept_jvp = self.kept_calls.and_then(|n| {
                    let (def, kind) = arrayad_ir::KeptKind::of_callee(n, *func)?;
                    Some(kind.jvp()?.callee(n, def))
                });
                match (self.calls.get(func).cloned(), kept_jvp) {
                    (Some(rule), _) => self.stub_call(b, s, vars, args, &rule),
                    (None, Some(jvp)) => self.kept_call(b, s, vars, args, jvp),
                    _ => return Err(AdError::new("call not inlined before differentiation")),
                }
            }
            // An f64 accumulator's tangent is an accumulator of tangents.
            Expr::ZerosLike(_) | Expr::Zeros(_) => {
                self.copy(b, s);
                if let Some(v) = v0.filter(|v| b.func.ty(*v).elem == Scalar::F64) {
                    let ty = b.func.ty(v);
                    let dv = self.lin(b, expr.clone(), ty, Some(v));
                    self.tan.insert(v, dv);
                }
            }
            // A push of an f64 value pushes its tangent after it: pop the
            // tangent first.
            Expr::Pop => {
                if let Some(v) = v0.filter(|v| b.func.ty(*v).elem == Scalar::F64) {
                    let dv = self.new_tangent(b, v);
                    b.stmt(StmtKind::Let { vars: vec![dv], expr: Expr::Pop });
                }
                self.copy(b, s);
            }
            Expr::TapeMark => self.copy(b, s),
        }
        Ok(())
    }

    /// `maximum`/`minimum`: the derivative is split evenly over all
    /// positions holding the extreme (LANGUAGE.md section 6).
    ///
    /// The positions are not stored: the count is the `sum` of a
    /// comprehension of ones and zeros (exact: every partial sum is an
    /// integer below 2^53), which code generation sums without the array,
    /// on several threads at the top of a function (`codegen::parallel`),
    /// and the linear loop compares each element with the extreme again,
    /// so that neither the tangent nor the backward pass (which transposes
    /// that loop) writes or reads a mask of the array's length. Each
    /// tangent term is still the mask times the element's tangent: the
    /// values are those of a stored mask, bit for bit.
    fn extreme_rule(&mut self, b: &mut Builder, array: VarId, y: VarId, da: VarId) -> Atom {
        let n = b.let_one("n", Expr::Dim { array, axis: 0 });
        let j = b.var("j", Type::I64);
        b.begin_block();
        let wj = Self::extreme_mask(b, array, j, y);
        let body = b.end_block(vec![wj]);
        let mask = b.let1("mask", Expr::Build { n, index: j, body }, Type::array(Scalar::F64, 1));
        let cnt = b.let_one("count", Expr::Reduce { op: ReduceOp::Sum, array: mask });
        let cntm = b.binary(BinOp::Max, cnt, Atom::F64(1.0));
        let j2 = b.var("j", Type::I64);
        let acc = b.var("dacc", Type::F64);
        self.linear.insert(acc);
        b.begin_block();
        let wj = Self::extreme_mask(b, array, j2, y);
        let dj = self.lin(b, Expr::Index { array: da, indices: vec![Atom::Var(j2)] }, Type::F64, None);
        let t = self.scale(b, wj, dj);
        let next = self.lin(b, Expr::Binary(BinOp::Add, Atom::Var(acc), t), Type::F64, None);
        let body = b.end_block(vec![next]);
        let dsum = self.lin(
            b,
            Expr::Loop { n, index: j2, states: vec![acc], init: vec![Atom::F64(0.0)], body },
            Type::F64,
            None,
        );
        self.lin(b, Expr::Binary(BinOp::Div, dsum, cntm), Type::F64, None)
    }

    /// `1.0` where `array[j]` equals the extreme `y`, else `0.0`.
    fn extreme_mask(b: &mut Builder, array: VarId, j: VarId, y: VarId) -> Atom {
        let aj = b.let_one("a", Expr::Index { array, indices: vec![Atom::Var(j)] });
        let is_ext = b.binary(BinOp::Eq, aj, Atom::Var(y));
        b.begin_block();
        let one = b.end_block(vec![Atom::F64(1.0)]);
        b.begin_block();
        let zero = b.end_block(vec![Atom::F64(0.0)]);
        crate::rules::select(b, is_ext, one, zero)
    }

    /// The f64 loop states that depend on an active value: those whose
    /// initial value has a tangent, and, to a fixed point, those whose next
    /// value depends (through the body's bindings, at any depth) on an
    /// active state or an active variable from outside.
    fn state_activity(&self, b: &Builder, states: &[VarId], init: &[Atom], body: &Block) -> Vec<bool> {
        let f64_state = |v: VarId| b.func.ty(v).elem == Scalar::F64;
        let mut active: Vec<bool> =
            states.iter().zip(init).map(|(st, i)| f64_state(*st) && self.tangent(i).is_some()).collect();
        loop {
            let mut live: HashSet<VarId> = states.iter().zip(&active).filter(|(_, a)| **a).map(|(s, _)| *s).collect();
            let depends = |e: &Expr, live: &HashSet<VarId>| {
                let mut hit = false;
                arrayad_ir::visit::expr_uses(e, &mut |v| hit |= live.contains(&v) || self.tan.contains_key(&v));
                hit
            };
            // (Imperative statements of reverse-mode code assign mutable
            // variables, whose tangents are in `tan` from their lets.)
            for s in &body.stmts {
                if let StmtKind::Let { vars, expr } = &s.kind {
                    if depends(expr, &live) {
                        live.extend(vars.iter().copied());
                    }
                }
            }
            let next: Vec<bool> = states
                .iter()
                .zip(&body.results)
                .zip(&active)
                .map(|((st, r), a)| *a || (f64_state(*st) && matches!(r, Atom::Var(v) if live.contains(v))))
                .collect();
            if next == active {
                return active;
            }
            active = next;
        }
    }

    /// Counted and while loops (the condition of a while loop reads primal
    /// states only: it is copied unchanged).
    #[allow(clippy::too_many_arguments)]
    fn loop_rule(
        &mut self,
        b: &mut Builder,
        s: &Stmt,
        vars: &[VarId],
        head: Head<'_>,
        states: &[VarId],
        init: &[Atom],
        body: &Block,
    ) -> Result<(), AdError> {
        let is_f64 = |b: &Builder, v: VarId| b.func.ty(v).elem == Scalar::F64;
        // Which states carry a tangent: a dependence analysis of the body
        // (cheap, no differentiation) to its fixed point, so that the body
        // is differentiated once (iterating the differentiation itself would
        // take 2^depth rounds for nested loops) and a state that never
        // depends on an active value (a counter next to an accumulator)
        // gets no tangent and no cotangent.
        let mut active: Vec<bool> = self.state_activity(b, states, init, body);
        // Fixed point (reached at once but for the guess above): a state is
        // active if its initial value or its next value has a tangent.
        let (body_block, dstates) = loop {
            b.begin_block();
            let mut dstates = Vec::new();
            for (k, st) in states.iter().enumerate() {
                if active[k] {
                    dstates.push(self.new_tangent(b, *st));
                } else {
                    self.tan.remove(st);
                }
            }
            let tans = self.block(b, body)?;
            let next: Vec<bool> =
                (0..states.len()).map(|k| active[k] || (tans[k].is_some() && is_f64(b, states[k]))).collect();
            if next == active {
                let mut results = body.results.clone();
                for (k, t) in tans.into_iter().enumerate() {
                    if active[k] {
                        let t = match t {
                            Some(t) => t,
                            None => self.zero_like(b, body.results[k]),
                        };
                        results.push(t);
                    }
                }
                break (b.end_block(results), dstates);
            }
            b.end_block(vec![]);
            // The retry forgets the tangents the discarded pass gave the
            // body's variables: they are bound in no block (a mutable
            // variable would start from its stale tangent).
            arrayad_ir::visit::block_binds(body, &mut |v| {
                self.tan.remove(&v);
            });
            active = next;
        };
        b.loc = s.loc;
        let mut all_states = states.to_vec();
        all_states.extend(&dstates);
        let mut all_init = init.to_vec();
        let mut all_vars = vars.to_vec();
        for k in 0..states.len() {
            if active[k] {
                let t = match self.tangent(&init[k]) {
                    Some(t) => t,
                    None => self.zero_like(b, init[k]),
                };
                all_init.push(t);
                all_vars.push(self.new_tangent(b, vars[k]));
            } else {
                self.tan.remove(&vars[k]);
            }
        }
        let expr = match head {
            Head::Counted(n, index) => Expr::Loop { n, index, states: all_states, init: all_init, body: body_block },
            Head::While(cond) => {
                Expr::While { states: all_states, init: all_init, cond: cond.clone(), body: body_block }
            }
        };
        b.stmt(StmtKind::Let { vars: all_vars, expr });
        Ok(())
    }

    fn if_rule(
        &mut self,
        b: &mut Builder,
        s: &Stmt,
        vars: &[VarId],
        cond: Atom,
        then_branch: &Block,
        else_branch: &Block,
    ) -> Result<(), AdError> {
        b.begin_block();
        let tt = self.block(b, then_branch)?;
        let mut tb = b.end_block(then_branch.results.clone());
        b.begin_block();
        let te = self.block(b, else_branch)?;
        let mut eb = b.end_block(else_branch.results.clone());
        let mut all = vars.to_vec();
        for k in 0..vars.len() {
            if tt[k].is_none() && te[k].is_none() {
                self.tan.remove(&vars[k]);
                continue;
            }
            for (blk, t) in [(&mut tb, tt[k]), (&mut eb, te[k])] {
                let t = match t {
                    Some(t) => t,
                    None => {
                        // Materialise a zero tangent inside the branch.
                        b.begin_block();
                        let z = self.zero_like(b, blk.results[k]);
                        let extra = b.end_block(vec![]);
                        blk.stmts.extend(extra.stmts);
                        z
                    }
                };
                blk.results.push(t);
            }
            all.push(self.new_tangent(b, vars[k]));
        }
        b.loc = s.loc;
        b.stmt(StmtKind::Let { vars: all, expr: Expr::If { cond, then_branch: tb, else_branch: eb } });
        Ok(())
    }
}
