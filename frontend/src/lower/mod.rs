//! Lowering of the typed AST to the IR (A-normal form, tuples flattened).
//!
//! Conventions (relied on by the rest of the compiler):
//! - one [`Function`] per definition, in source order; tuple parameters and
//!   results are flattened into their leaves, left to right;
//! - at entry, the first occurrence of each size variable is bound with
//!   `let n = dim param axis`, every other dimension is checked with
//!   `check_size`; array results are checked against the declared sizes at
//!   the end of the body;
//! - every statement carries the [`Loc`] of the source expression it comes
//!   from (its first character);
//! - variables are named after the source names where there are any, and
//!   after the operation otherwise (`add`, `exp`, `elem`, ...).

mod array;

use crate::check::Stub;
use crate::span::{LineIndex, Span};
use crate::tast::{DimTarget, EntryStep, Local, LocalId, ShapeCheck, TBinding, TDef, TExpr, TKind, TPat, TSize};
use crate::types::Ty;
use arrayad_ir::builder::Builder;
use arrayad_ir::{
    binop_result, unop_result, Atom, BinOp, Block, Expr, FuncId, Function, Loc, Program, Scalar, StmtKind, Type, UnOp,
    VarId,
};

/// Lowers checked definitions (without errors) to an IR program: the
/// definitions in source order, then the derivative stubs their operators
/// call (signatures with empty bodies, `arrayad_ir::derivative`).
pub(crate) fn lower_program(file: &str, defs: &[TDef], stubs: &[Stub], lines: &LineIndex<'_>) -> Program {
    let mut names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
    names.extend(stubs.iter().map(|s| format!("{}_{}", s.op, defs.get(s.of).map_or("f", |d| d.name.as_str()))));
    let mut funcs: Vec<Function> = defs.iter().map(|d| lower_def(d, &names, lines)).collect();
    for s in stubs {
        let Some(d) = defs.get(s.of) else { continue };
        let mut f = Function {
            name: s.op.stub_name(&d.name),
            params: Vec::new(),
            body: Block::default(),
            vars: Vec::new(),
            result_types: s.signature.result.leaves(),
            signature: s.signature.clone(),
            loc: lines.loc(d.keyword.start),
        };
        for p in &s.signature.params {
            let ty = Ty::from_src(&p.ty);
            for (n, t) in leaf_names(&p.name, &ty).into_iter().zip(ty.leaves()) {
                let v = f.new_var(n, t);
                f.params.push(v);
            }
        }
        funcs.push(f);
    }
    Program { file: file.to_string(), funcs }
}

fn lower_def(d: &TDef, names: &[String], lines: &LineIndex<'_>) -> Function {
    let mut f = Function {
        name: d.name.clone(),
        params: Vec::new(),
        body: Block::default(),
        vars: Vec::new(),
        result_types: d.result.leaves(),
        signature: d.signature.clone(),
        loc: lines.loc(d.keyword.start),
    };
    let mut params = Vec::new();
    let body = {
        let mut lw =
            Lowerer { b: Builder::new(&mut f), locals: &d.locals, env: vec![None; d.locals.len()], names, lines };
        let mut leaf_vars = Vec::new();
        for &p in &d.params {
            let Some(local) = d.locals.get(p.0) else { continue };
            let atoms: Vec<Atom> = leaf_names(&local.name, &local.ty)
                .into_iter()
                .zip(local.ty.leaves())
                .map(|(n, t)| {
                    let v = lw.b.var(n, t);
                    leaf_vars.push(v);
                    Atom::Var(v)
                })
                .collect();
            lw.bind(p, atoms);
        }
        params.clone_from(&leaf_vars);
        for step in &d.entry {
            match step {
                EntryStep::Bind { leaf, axis, local, span } => {
                    lw.set_loc(*span);
                    let array = leaf_vars.get(*leaf).copied().unwrap_or(VarId(0));
                    let name = lw.local_name(*local);
                    let n = lw.let1(&name, Expr::Dim { array, axis: *axis }, Type::I64);
                    lw.bind(*local, vec![n]);
                }
                EntryStep::Check(c) => {
                    let leaves: Vec<Atom> = leaf_vars.iter().map(|v| Atom::Var(*v)).collect();
                    lw.shape_check(c, &leaves);
                }
            }
        }
        let results = lw.expr(&d.body, Some(&leaf_names("result", &d.result)));
        for c in &d.result_checks {
            lw.shape_check(c, &results);
        }
        lw.b.finish(results)
    };
    f.body = body;
    f.params = params;
    f
}

/// Names of the leaves of a value called `name`: `name` itself, or
/// `name_0`, `name_1_0`, ... inside tuples.
fn leaf_names(name: &str, ty: &Ty) -> Vec<String> {
    match ty {
        Ty::Tuple(ts) => ts.iter().enumerate().flat_map(|(i, t)| leaf_names(&format!("{name}_{i}"), t)).collect(),
        _ => vec![name.to_string()],
    }
}

/// The state of lowering one definition.
struct Lowerer<'f, 'd> {
    b: Builder<'f>,
    locals: &'d [Local],
    /// The atoms (leaves) of each local, once bound.
    env: Vec<Option<Vec<Atom>>>,
    /// Definition names, for hints of call results.
    names: &'d [String],
    lines: &'d LineIndex<'d>,
}

impl Lowerer<'_, '_> {
    fn set_loc(&mut self, span: Span) {
        self.b.loc = self.loc(span);
    }

    fn loc(&self, span: Span) -> Loc {
        self.lines.loc(span.start)
    }

    fn local_name(&self, id: LocalId) -> String {
        self.locals.get(id.0).map_or_else(|| "v".to_string(), |l| l.name.clone())
    }

    fn bind(&mut self, id: LocalId, atoms: Vec<Atom>) {
        if let Some(slot) = self.env.get_mut(id.0) {
            *slot = Some(atoms);
        }
    }

    fn lookup(&self, id: LocalId) -> Vec<Atom> {
        self.env.get(id.0).and_then(|a| a.clone()).unwrap_or_default()
    }

    /// Binds a single-valued expression to a fresh variable.
    fn let1(&mut self, name: &str, expr: Expr, ty: Type) -> Atom {
        Atom::Var(self.b.let1(name, expr, ty))
    }

    /// Binds a multi-valued expression to fresh variables.
    fn letn(&mut self, names: &[String], tys: &[Type], expr: Expr) -> Vec<Atom> {
        let vars: Vec<VarId> = tys
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n = names.get(i).map_or("v", String::as_str);
                self.b.var(n, *t)
            })
            .collect();
        self.b.stmt(StmtKind::Let { vars: vars.clone(), expr });
        vars.into_iter().map(Atom::Var).collect()
    }

    /// The variable holding an array atom (arrays are always variables;
    /// anything else is bound first).
    fn var_of(&mut self, a: Atom, ty: Type) -> VarId {
        match a {
            Atom::Var(v) => v,
            other => self.b.let1("v", Expr::Atom(other), ty),
        }
    }

    /// The one value of a non-tuple expression.
    fn one(&mut self, e: &TExpr) -> Atom {
        self.expr(e, None).into_iter().next().unwrap_or(Atom::I64(0))
    }

    /// An array-valued expression as a variable, with its type.
    fn array(&mut self, e: &TExpr) -> (VarId, Type) {
        let ty = e.ty.leaf().unwrap_or(Type::F64);
        let a = self.one(e);
        (self.var_of(a, ty), ty)
    }

    fn dim_target(&mut self, t: &DimTarget) -> Atom {
        match t {
            DimTarget::Lit(n) => Atom::I64(*n),
            DimTarget::Local(id) => self.lookup(*id).into_iter().next().unwrap_or(Atom::I64(0)),
            DimTarget::Expr(e) => self.size(e),
        }
    }

    /// The value of a size expression (`i64` arithmetic; a division by zero
    /// is the run-time error of `/`).
    fn size(&mut self, e: &TSize) -> Atom {
        match e {
            TSize::Lit(n) => Atom::I64(*n),
            TSize::Local(id) => self.lookup(*id).into_iter().next().unwrap_or(Atom::I64(0)),
            TSize::Bin(op, a, b) => {
                let (x, y) = (self.size(a), self.size(b));
                let op = match op {
                    arrayad_ir::SizeOp::Add => BinOp::Add,
                    arrayad_ir::SizeOp::Sub => BinOp::Sub,
                    arrayad_ir::SizeOp::Mul => BinOp::Mul,
                    arrayad_ir::SizeOp::Div => BinOp::Div,
                };
                self.let1("size", Expr::Binary(op, x, y), Type::I64)
            }
        }
    }

    /// `check_size dim(leaf, axis) == target`.
    fn shape_check(&mut self, c: &ShapeCheck, leaves: &[Atom]) {
        self.set_loc(c.span);
        let Some(&Atom::Var(array)) = leaves.get(c.leaf) else { return };
        let d = self.let1("dim", Expr::Dim { array, axis: c.axis }, Type::I64);
        let b = self.dim_target(&c.target);
        self.b.stmt(StmtKind::CheckSize { a: d, b, what: c.what.clone() });
    }

    /// Lowers an expression to the atoms of its leaves. `hint` names the
    /// variables that receive the leaves of the value (source names, if any).
    fn expr(&mut self, e: &TExpr, hint: Option<&[String]>) -> Vec<Atom> {
        let loc = self.loc(e.span);
        let single =
            hint.and_then(|h| if h.len() == 1 { h.first() } else { None }).map(String::as_str).filter(|n| *n != "_");
        let names = |default: &str| match hint {
            Some(h) if h.len() == e.ty.leaf_count() => h.to_vec(),
            _ => leaf_names(default, &e.ty),
        };
        let ty = e.ty.leaf().unwrap_or(Type::F64);
        match &e.kind {
            TKind::Error => Vec::new(),
            TKind::Int(v) => vec![if ty.elem == Scalar::F64 { Atom::F64(*v as f64) } else { Atom::I64(*v) }],
            TKind::Float(x) => vec![Atom::F64(*x)],
            TKind::Bool(b) => vec![Atom::Bool(*b)],
            TKind::Var(id) => self.lookup(*id),
            TKind::Tuple(cs) => {
                let mut out = Vec::new();
                for c in cs {
                    let h = hint.filter(|h| h.len() == e.ty.leaf_count()).and_then(|h| h.get(out.len()..));
                    let h = h.and_then(|h| h.get(..c.ty.leaf_count()));
                    out.extend(self.expr(c, h));
                }
                out
            }
            TKind::Proj { tuple, index } => {
                let atoms = self.expr(tuple, None);
                let Ty::Tuple(ts) = &tuple.ty else { return atoms };
                let start: usize = ts.iter().take(*index).map(Ty::leaf_count).sum();
                let n = ts.get(*index).map_or(0, Ty::leaf_count);
                atoms.get(start..start + n).map(<[Atom]>::to_vec).unwrap_or_default()
            }
            TKind::ArrayLit(es) => {
                let elems: Vec<Atom> = es.iter().map(|x| self.one(x)).collect();
                self.b.loc = loc;
                vec![self.let1(single.unwrap_or("arr"), Expr::ArrayLit { elem_ty: ty.row(), elems }, ty)]
            }
            TKind::Let { bindings, body } => {
                for b in bindings {
                    self.binding(b);
                }
                self.expr(body, hint)
            }
            TKind::If { cond, then_branch, else_branch } => {
                let c = self.one(cond);
                self.b.begin_block();
                let t = self.expr(then_branch, None);
                let then_branch = self.b.end_block(t);
                self.b.begin_block();
                let f = self.expr(else_branch, None);
                let else_branch = self.b.end_block(f);
                self.b.loc = loc;
                let tys = e.ty.leaves();
                self.letn(&names("if"), &tys, Expr::If { cond: c, then_branch, else_branch })
            }
            TKind::And(a, b) | TKind::Or(a, b) => {
                let is_and = matches!(e.kind, TKind::And(..));
                let x = self.one(a);
                self.b.begin_block();
                let y = self.one(b);
                let rhs = self.b.end_block(vec![y]);
                let constant = Block { stmts: Vec::new(), results: vec![Atom::Bool(!is_and)] };
                let (then_branch, else_branch) = if is_and { (rhs, constant) } else { (constant, rhs) };
                self.b.loc = loc;
                let name = single.unwrap_or(if is_and { "and" } else { "or" });
                vec![self.let1(name, Expr::If { cond: x, then_branch, else_branch }, Type::BOOL)]
            }
            TKind::Build { index, n, body } => {
                let n = self.one(n);
                let i = self.index_var(*index);
                self.b.begin_block();
                let r = self.one(body);
                let body = self.b.end_block(vec![r]);
                self.b.loc = loc;
                vec![self.let1(single.unwrap_or("arr"), Expr::Build { n, index: i, body }, ty)]
            }
            TKind::Loop { pat, init, index, n, body } => {
                let init = self.expr(init, None);
                let n = self.one(n);
                let tys = e.ty.leaves();
                let state_names = pattern_leaf_names(pat, self.locals);
                let states: Vec<VarId> = tys
                    .iter()
                    .enumerate()
                    .map(|(k, t)| self.b.var(state_names.get(k).map_or("s", String::as_str), *t))
                    .collect();
                let state_atoms: Vec<Atom> = states.iter().map(|v| Atom::Var(*v)).collect();
                self.bind_pattern(pat, &state_atoms);
                let i = self.index_var(*index);
                self.b.begin_block();
                let r = self.expr(body, None);
                let body = self.b.end_block(r);
                self.b.loc = loc;
                let out_names = match hint {
                    Some(h) if h.len() == tys.len() => h.to_vec(),
                    _ => state_names,
                };
                self.letn(&out_names, &tys, Expr::Loop { n, index: i, states, init, body })
            }
            TKind::While { pat, init, cond, body } => {
                let init = self.expr(init, None);
                let tys = e.ty.leaves();
                let state_names = pattern_leaf_names(pat, self.locals);
                let states: Vec<VarId> = tys
                    .iter()
                    .enumerate()
                    .map(|(k, t)| self.b.var(state_names.get(k).map_or("s", String::as_str), *t))
                    .collect();
                let state_atoms: Vec<Atom> = states.iter().map(|v| Atom::Var(*v)).collect();
                self.bind_pattern(pat, &state_atoms);
                self.b.begin_block();
                let c = self.one(cond);
                let cond = self.b.end_block(vec![c]);
                self.b.begin_block();
                let r = self.expr(body, None);
                let body = self.b.end_block(r);
                self.b.loc = loc;
                let out_names = match hint {
                    Some(h) if h.len() == tys.len() => h.to_vec(),
                    _ => state_names,
                };
                self.letn(&out_names, &tys, Expr::While { states, init, cond, body })
            }
            TKind::Unary { op, arg } => {
                let a = self.one(arg);
                let at = arg.ty.leaf().unwrap_or(Type::F64);
                let name = single.unwrap_or(op.name());
                let op = *op;
                if at.is_array() {
                    let out = unop_result(op, Type::scalar(at.elem)).elem;
                    let sym = op.name();
                    vec![self.map(loc, name, sym, &[(a, at)], out, |lw, xs| {
                        lw.scalar_unary(op, xs.first().copied().unwrap_or(Atom::I64(0)), at.elem, sym)
                    })]
                } else {
                    self.b.loc = loc;
                    vec![self.scalar_unary(op, a, at.elem, name)]
                }
            }
            TKind::Binary { op, sym, lhs, rhs } => {
                let a = self.one(lhs);
                let b = self.one(rhs);
                let (ta, tb) = (lhs.ty.leaf().unwrap_or(Type::F64), rhs.ty.leaf().unwrap_or(Type::F64));
                let name = single.unwrap_or(op.name());
                let op = *op;
                let scalar_ty = binop_result(op, Type::scalar(ta.elem));
                if ta.is_array() || tb.is_array() {
                    vec![self.map(loc, name, sym, &[(a, ta), (b, tb)], scalar_ty.elem, |lw, xs| {
                        let (x, y) = (xs.first().copied(), xs.get(1).copied());
                        let (x, y) = (x.unwrap_or(Atom::I64(0)), y.unwrap_or(Atom::I64(0)));
                        lw.let1(op.name(), Expr::Binary(op, x, y), scalar_ty)
                    })]
                } else {
                    self.b.loc = loc;
                    vec![self.let1(name, Expr::Binary(op, a, b), scalar_ty)]
                }
            }
            TKind::Call { func, args } => {
                let args: Vec<Atom> = args.iter().flat_map(|a| self.expr(a, None)).collect();
                self.b.loc = loc;
                let callee = self.names.get(*func).map_or("call", String::as_str);
                let names = names(callee);
                let func = FuncId(u32::try_from(*func).unwrap_or(u32::MAX));
                self.letn(&names, &e.ty.leaves(), Expr::Call { func, args })
            }
            TKind::Length(a) => {
                let (array, _) = self.array(a);
                self.b.loc = loc;
                vec![self.let1(single.unwrap_or("len"), Expr::Dim { array, axis: 0 }, Type::I64)]
            }
            TKind::Sum(a) => {
                let (array, at) = self.array(a);
                vec![self.sum(loc, single.unwrap_or("sum"), array, at)]
            }
            TKind::Reduce(op, a) => {
                let (array, _) = self.array(a);
                self.b.loc = loc;
                vec![self.let1(single.unwrap_or(op.name()), Expr::Reduce { op: *op, array }, Type::F64)]
            }
            TKind::Dot(a, b) => {
                let (x, _) = self.array(a);
                let (y, _) = self.array(b);
                vec![self.dot(loc, single.unwrap_or("dot"), x, y)]
            }
            TKind::Index { array, indices } => {
                let (arr, _) = self.array(array);
                let indices: Vec<Atom> = indices.iter().map(|i| self.one(i)).collect();
                self.b.loc = loc;
                let name = single.unwrap_or(if ty.is_array() { "row" } else { "elem" });
                vec![self.let1(name, Expr::Index { array: arr, indices }, ty)]
            }
            TKind::Slice { array, lo, hi } => {
                let (arr, _) = self.array(array);
                let lo = match lo {
                    Some(l) => self.one(l),
                    None => Atom::I64(0),
                };
                let hi = match hi {
                    Some(h) => self.one(h),
                    None => {
                        self.b.loc = loc;
                        self.let1("len", Expr::Dim { array: arr, axis: 0 }, Type::I64)
                    }
                };
                self.b.loc = loc;
                vec![self.let1(single.unwrap_or("slice"), Expr::Slice { array: arr, lo, hi }, ty)]
            }
            TKind::Update { array, indices, value } => {
                let (arr, _) = self.array(array);
                let indices: Vec<Atom> = indices.iter().map(|i| self.one(i)).collect();
                let value = self.one(value);
                self.b.loc = loc;
                let name = single.unwrap_or("updated");
                vec![self.let1(name, Expr::Update { array: arr, indices, value }, ty)]
            }
            TKind::Reshape { array, dims } => {
                let (arr, _) = self.array(array);
                let dims: Vec<Atom> = dims.iter().map(|d| self.one(d)).collect();
                self.b.loc = loc;
                vec![self.let1(single.unwrap_or("reshaped"), Expr::Reshape { array: arr, dims }, ty)]
            }
            TKind::Flatten(array) => {
                let (arr, at) = self.array(array);
                self.b.loc = loc;
                let d0 = self.let1("n", Expr::Dim { array: arr, axis: 0 }, Type::I64);
                let d1 = self.let1("m", Expr::Dim { array: arr, axis: 1 }, Type::I64);
                let mut dims = vec![self.let1("size", Expr::Binary(BinOp::Mul, d0, d1), Type::I64)];
                for axis in 2..at.rank {
                    dims.push(self.let1("n", Expr::Dim { array: arr, axis }, Type::I64));
                }
                vec![self.let1(single.unwrap_or("flat"), Expr::Reshape { array: arr, dims }, ty)]
            }
            TKind::Concat(a, b) => {
                let (x, _) = self.array(a);
                let (y, _) = self.array(b);
                vec![self.concat(loc, single.unwrap_or("joined"), x, y, ty)]
            }
            TKind::ArgExtreme { max, array } => {
                let (arr, _) = self.array(array);
                vec![self.arg_extreme(loc, single.unwrap_or(if *max { "argmax" } else { "argmin" }), *max, arr)]
            }
        }
    }

    /// `op a` on scalars; negation of a literal is folded.
    fn scalar_unary(&mut self, op: UnOp, a: Atom, elem: Scalar, name: &str) -> Atom {
        match (op, a) {
            (UnOp::Neg, Atom::I64(v)) => Atom::I64(v.wrapping_neg()),
            (UnOp::Neg, Atom::F64(x)) => Atom::F64(-x),
            _ => {
                let ty = unop_result(op, Type::scalar(elem));
                self.let1(name, Expr::Unary(op, a), ty)
            }
        }
    }

    /// The IR variable of a `for`/`loop` index (a fresh unnamed one for `_`).
    fn index_var(&mut self, index: Option<LocalId>) -> VarId {
        match index {
            Some(id) => {
                let name = self.local_name(id);
                let v = self.b.var(name, Type::I64);
                self.bind(id, vec![Atom::Var(v)]);
                v
            }
            None => self.b.var("i", Type::I64),
        }
    }

    fn binding(&mut self, b: &TBinding) {
        let names = pattern_leaf_names(&b.pat, self.locals);
        let atoms = self.expr(&b.value, Some(&names));
        for c in &b.checks {
            self.shape_check(c, &atoms);
        }
        self.bind_pattern(&b.pat, &atoms);
    }

    fn bind_pattern(&mut self, pat: &TPat, atoms: &[Atom]) {
        self.bind_pat(pat, atoms, &mut 0);
    }

    fn bind_pat(&mut self, pat: &TPat, atoms: &[Atom], next: &mut usize) {
        match pat {
            TPat::Bind(id) => {
                let n = self.locals.get(id.0).map_or(0, |l| l.ty.leaf_count());
                let part = atoms.get(*next..*next + n).map(<[Atom]>::to_vec).unwrap_or_default();
                *next += n;
                self.bind(*id, part);
            }
            TPat::Wild(ty) => *next += ty.leaf_count(),
            TPat::Tuple(ps) => ps.iter().for_each(|p| self.bind_pat(p, atoms, next)),
        }
    }
}

/// Names for the leaves of the values a pattern binds.
fn pattern_leaf_names(pat: &TPat, locals: &[Local]) -> Vec<String> {
    match pat {
        TPat::Bind(id) => match locals.get(id.0) {
            Some(l) => leaf_names(&l.name, &l.ty),
            None => vec!["s".into()],
        },
        TPat::Wild(ty) => vec!["_".to_string(); ty.leaf_count()],
        TPat::Tuple(ps) => ps.iter().flat_map(|p| pattern_leaf_names(p, locals)).collect(),
    }
}
