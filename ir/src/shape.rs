//! The row shape of a comprehension that runs zero times.
//!
//! `for i < n => [x[i], 1.0]` has type `[n][2]f64`; when `n == 0` no row is
//! computed, yet the result must still have the shape `[0][2]` (a
//! `[n][2]f64` result is checked against it, and its shape reaches the
//! caller). [`static_row_dims`] finds the extents of a [`Expr::Build`]'s
//! rows from what the body computes *before* it depends on the index: a
//! literal of `k` rows, a nested comprehension over a count fixed outside,
//! an index or view into an array from outside, a reshape to fixed
//! extents, `+ - *` of such sizes, an `if` whose branches have the same
//! such extents (or whose condition is a literal, also through a `let`), a
//! counted loop whose body keeps the extents of its state, `zeros` and
//! `zeros_like`, and a call (the callee's result extents with the
//! arguments' put in; the interpreter sees calls that compiled code sees
//! inlined). Extents are compared by their form, which optimisation can
//! change (a condition that only folds once a call is inlined), so the
//! interpreter and compiled code can still differ in rare programs.
//!
//! The interpreter and code generation evaluate those extents before the
//! loop and use them when it runs zero times (the first row overrides them otherwise, so they are only ever a
//! default). A row shape that depends on the index (`for i < n => x[i:]`)
//! has no static form: such a comprehension keeps extent 0 in every inner
//! dimension when it runs zero times, as [`Expr::Build`] documents.

use crate::program::{Atom, BinOp, Block, Expr, Function, Program, Stmt, StmtKind, VarId};
use std::collections::HashMap;

/// An extent computed from values that exist before a comprehension runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaticDim {
    /// A literal extent.
    Lit(i64),
    /// An `i64` variable bound outside the comprehension.
    Var(VarId),
    /// Axis `axis` of an array bound outside the comprehension.
    DimOf(VarId, u8),
    /// `+`, `-` or `*` (wrapping, as `i64` arithmetic) of two extents.
    Bin(BinOp, Box<StaticDim>, Box<StaticDim>),
}

impl StaticDim {
    /// The extent, given the values of outer variables (`var`: an `i64`;
    /// `dim`: an array's extent). `None` if a lookup fails.
    pub fn eval(&self, var: &dyn Fn(VarId) -> Option<i64>, dim: &dyn Fn(VarId, u8) -> Option<i64>) -> Option<i64> {
        match self {
            StaticDim::Lit(n) => Some(*n),
            StaticDim::Var(v) => var(*v),
            StaticDim::DimOf(a, axis) => dim(*a, *axis),
            StaticDim::Bin(op, a, b) => {
                let (x, y) = (a.eval(var, dim)?, b.eval(var, dim)?);
                match op {
                    BinOp::Add => Some(x.wrapping_add(y)),
                    BinOp::Sub => Some(x.wrapping_sub(y)),
                    BinOp::Mul => Some(x.wrapping_mul(y)),
                    _ => None,
                }
            }
        }
    }
}

/// How deep the analysis follows definitions (nested comprehensions,
/// chains of views, calls): its time per comprehension is bounded
/// independently of the program's size.
const DEPTH: u32 = 16;

/// The statically known extents of the rows of `build index < n => body`
/// in `f` (one entry per axis of the row, i.e. of `body.results[result]`),
/// or `None` when some extent depends on the index or on values computed
/// in the body (see the module docs). Scalar rows have no extents: `Some`
/// of an empty list.
///
/// `program`, where given, is the program `f` belongs to: the analysis then
/// sees through calls (the callee's result extents in terms of the call's
/// arguments), as it sees the same code once inlined.
pub fn static_row_dims<'a>(
    f: &'a Function,
    program: Option<&'a Program>,
    index: VarId,
    body: &'a Block,
    result: usize,
) -> Option<Vec<StaticDim>> {
    let row = body.results.get(result)?;
    let rank = f.atom_ty(row).rank as usize;
    if rank == 0 {
        return Some(Vec::new());
    }
    let mut scopes = vec![Scope::new(Some(index), body)];
    let dims = shape_of_atom(Cx { f, program }, &mut scopes, row, DEPTH)?;
    (dims.len() == rank).then_some(dims)
}

/// The statically known extents of each of `atoms`, values of the
/// statements `stmts` of the body of a comprehension over `index` in `f`
/// (as [`static_row_dims`] finds a row's: `None` for an atom whose extents
/// depend on the index or on values computed in the body). Equal extents
/// in every iteration, so such values stack into a regular array: the
/// reverse mode's residuals of a comprehension (`ad::reverse`).
pub fn static_dims_in(f: &Function, index: VarId, stmts: &[Stmt], atoms: &[Atom]) -> Vec<Option<Vec<StaticDim>>> {
    let mut scopes = vec![Scope::of_stmts(Some(index), stmts)];
    atoms
        .iter()
        .map(|a| {
            let rank = f.atom_ty(a).rank as usize;
            if rank == 0 {
                return Some(Vec::new());
            }
            let dims = shape_of_atom(Cx { f, program: None }, &mut scopes, a, DEPTH)?;
            (dims.len() == rank).then_some(dims)
        })
        .collect()
}

/// The function analysed and its program (for calls).
#[derive(Clone, Copy)]
struct Cx<'a> {
    f: &'a Function,
    program: Option<&'a Program>,
}

/// The row shape of result `result` of `build index < 0 => body` in `f`
/// (of `program`, where given) for an evaluator: [`static_row_dims`]
/// evaluated with the values of the
/// outer variables (`var`: an `i64`; `dim`: an array's extent), a negative
/// extent (which a row cannot have) taken as 0, as compiled code does.
/// `None` where the extents are not static or a lookup fails.
pub fn eval_static_row_shape<'a>(
    f: &'a Function,
    program: Option<&'a Program>,
    index: VarId,
    body: &'a Block,
    result: usize,
    var: &dyn Fn(VarId) -> Option<i64>,
    dim: &dyn Fn(VarId, u8) -> Option<i64>,
) -> Option<Vec<usize>> {
    let dims = static_row_dims(f, program, index, body, result)?;
    dims.iter().map(|d| d.eval(var, dim).map(|x| usize::try_from(x).unwrap_or(0))).collect()
}

/// The variables one block binds: the index of a comprehension or loop
/// body and each variable a `let` binds, with its expression and which of
/// its values it is. (A loop's states are not in it: they read as outer
/// variables while a loop's result is analysed, see [`shape_of_loop`].)
struct Scope<'a> {
    index: Option<VarId>,
    defs: HashMap<VarId, (&'a Expr, usize)>,
}

impl<'a> Scope<'a> {
    fn new(index: Option<VarId>, body: &'a Block) -> Scope<'a> {
        Scope::of_stmts(index, &body.stmts)
    }

    fn of_stmts(index: Option<VarId>, stmts: &'a [Stmt]) -> Scope<'a> {
        let mut defs = HashMap::new();
        for s in stmts {
            if let StmtKind::Let { vars, expr } = &s.kind {
                for (k, v) in vars.iter().enumerate() {
                    defs.insert(*v, (expr, k));
                }
            }
        }
        Scope { index, defs }
    }
}

/// Where `v` is bound: `Ok(Some((expr, k)))` as value `k` of a `let` in a
/// scope, `Ok(None)` outside every scope, `Err(())` as an index.
fn lookup<'a>(scopes: &[Scope<'a>], v: VarId) -> Result<Option<(&'a Expr, usize)>, ()> {
    for s in scopes.iter().rev() {
        if s.index == Some(v) {
            return Err(());
        }
        if let Some(d) = s.defs.get(&v) {
            return Ok(Some(*d));
        }
    }
    Ok(None)
}

/// The static extents of result `k` of `if cond then a else b`: those of
/// the branch a literal condition takes, else those both branches have.
fn shape_of_if<'a>(
    cx: Cx<'a>,
    scopes: &mut Vec<Scope<'a>>,
    (cond, then_branch, else_branch): (&Atom, &'a Block, &'a Block),
    k: usize,
    depth: u32,
) -> Option<Vec<StaticDim>> {
    let literal = match cond {
        Atom::Var(v) => match lookup(scopes, *v) {
            Ok(Some((Expr::Atom(Atom::Bool(b)), 0))) if !cx.f.var(*v).mutable => Some(*b),
            _ => None,
        },
        Atom::Bool(b) => Some(*b),
        _ => None,
    };
    let mut branch = |b: &'a Block| {
        scopes.push(Scope::new(None, b));
        let dims = b.results.get(k).and_then(|r| shape_of_atom(cx, scopes, r, depth));
        scopes.pop();
        dims
    };
    match literal {
        Some(true) => branch(then_branch),
        Some(false) => branch(else_branch),
        _ => {
            let a = branch(then_branch)?;
            (branch(else_branch)? == a).then_some(a)
        }
    }
}

/// The static extents of result `k` of a call of `func` on `args`: the
/// callee's result extents (in terms of its parameters) with the
/// arguments' put in. Needs the program ([`Cx::program`]). A call of a
/// kept definition's jvp or vjp (`crate::KeptKind`) has the definition's
/// results, then tangents shaped like its f64 results (jvp) or cotangents
/// shaped like its f64 arguments (vjp); the jvp of its vjp has the vjp's
/// results, then their tangents.
fn shape_of_call<'a>(
    cx: Cx<'a>,
    scopes: &mut Vec<Scope<'a>>,
    (func, args): (crate::program::FuncId, &'a [Atom]),
    k: usize,
    depth: u32,
) -> Option<Vec<StaticDim>> {
    let depth = depth.checked_sub(1)?;
    let program = cx.program?;
    let (def, kind) = crate::KeptKind::of_callee(program.funcs.len(), func)?;
    let callee = program.funcs.get(def.0 as usize)?;
    let n_results = callee.body.results.len();
    // Result `k` is shaped like the callee's result `j`, or like its
    // argument `j` (a cotangent of an f64 param).
    enum Like {
        Result(usize),
        Arg(usize),
    }
    let f64_results =
        || callee.body.results.iter().enumerate().filter(|(_, r)| callee.atom_ty(r).elem == crate::Scalar::F64);
    let f64_params = || callee.params.iter().enumerate().filter(|(_, p)| callee.ty(**p).elem == crate::Scalar::F64);
    let like = match kind {
        crate::KeptKind::Primal => Like::Result(k),
        _ if k < n_results => Like::Result(k),
        crate::KeptKind::Jvp => Like::Result(f64_results().map(|(j, _)| j).nth(k - n_results)?),
        crate::KeptKind::Vjp => Like::Arg(f64_params().map(|(j, _)| j).nth(k - n_results)?),
        // The vjp's cotangents, then the tangents of its f64 results: the
        // definition's, then the cotangents.
        crate::KeptKind::VjpJvp => {
            let cotangents = f64_params().map(|(j, _)| Like::Arg(j));
            let tangents = f64_results().map(|(j, _)| Like::Result(j)).chain(f64_params().map(|(j, _)| Like::Arg(j)));
            cotangents.chain(tangents).nth(k - n_results)?
        }
    };
    let k = match like {
        Like::Result(j) => j,
        Like::Arg(j) => return shape_of_atom(cx, scopes, args.get(j)?, depth),
    };
    let result = callee.body.results.get(k)?;
    let inner = Cx { f: callee, program: cx.program };
    let dims = shape_of_atom(inner, &mut vec![Scope::new(None, &callee.body)], result, depth)?;
    // Outside the callee's body only its parameters are bound.
    let arg = |p: &VarId| callee.params.iter().position(|q| q == p).and_then(|i| args.get(i));
    fn put<'a>(
        cx: Cx<'a>,
        scopes: &mut Vec<Scope<'a>>,
        d: &StaticDim,
        arg: &dyn Fn(&VarId) -> Option<&'a Atom>,
        depth: u32,
    ) -> Option<StaticDim> {
        match d {
            StaticDim::Lit(n) => Some(StaticDim::Lit(*n)),
            StaticDim::Var(p) => size_of_atom(cx, scopes, arg(p)?, depth),
            StaticDim::DimOf(p, axis) => shape_of_atom(cx, scopes, arg(p)?, depth)?.get(*axis as usize).cloned(),
            StaticDim::Bin(op, a, b) => {
                let (a, b) = (put(cx, scopes, a, arg, depth)?, put(cx, scopes, b, arg, depth)?);
                Some(StaticDim::Bin(*op, Box::new(a), Box::new(b)))
            }
        }
    }
    dims.iter().map(|d| put(cx, scopes, d, &arg, depth)).collect()
}

/// The static extents of state `k` of `loop states = init for i < n do
/// body` after the loop: those of its initial value when the body keeps
/// them, else none. By induction over the iterations: assuming every
/// state has its initial value's extents, the next state `k` has them
/// again, and so does every state its extents are taken from (a tangent
/// state's extents are often the primal state's). The states read as
/// outer variables while the body's extents are found; only this
/// comparison sees them.
fn shape_of_loop<'a>(
    cx: Cx<'a>,
    scopes: &mut Vec<Scope<'a>>,
    (index, states, init, body): (VarId, &[VarId], &[Atom], &'a Block),
    k: usize,
    depth: u32,
) -> Option<Vec<StaticDim>> {
    let mut before: Vec<Option<Vec<StaticDim>>> = vec![None; states.len()];
    let mut checked = vec![false; states.len()];
    let mut todo = vec![k];
    while let Some(j) = todo.pop() {
        if std::mem::replace(checked.get_mut(j)?, true) {
            continue;
        }
        if before[j].is_none() {
            before[j] = Some(shape_of_atom(cx, scopes, init.get(j)?, depth)?);
        }
        scopes.push(Scope::new(Some(index), body));
        let next = body.results.get(j).and_then(|r| shape_of_atom(cx, scopes, r, depth));
        scopes.pop();
        // The next extents with each state's extents replaced by its
        // initial value's (the induction hypothesis).
        fn put(d: &StaticDim, states: &[VarId], todo: &mut Vec<usize>) -> Option<StaticDim> {
            Some(match d {
                StaticDim::Lit(n) => StaticDim::Lit(*n),
                StaticDim::Var(v) if states.contains(v) => return None,
                StaticDim::Var(v) => StaticDim::Var(*v),
                StaticDim::DimOf(v, axis) => match states.iter().position(|s| s == v) {
                    Some(i) => {
                        todo.push(i);
                        StaticDim::DimOf(*v, *axis)
                    }
                    None => StaticDim::DimOf(*v, *axis),
                },
                StaticDim::Bin(op, a, b) => {
                    StaticDim::Bin(*op, Box::new(put(a, states, todo)?), Box::new(put(b, states, todo)?))
                }
            })
        }
        let next: Vec<StaticDim> = next?.iter().map(|d| put(d, states, &mut todo)).collect::<Option<_>>()?;
        // Initial extents of the states `next` names, then compare.
        for &i in &todo {
            if before.get(i)?.is_none() {
                before[i] = Some(shape_of_atom(cx, scopes, init.get(i)?, depth)?);
            }
        }
        let hypothesis = |d: &StaticDim| -> Option<StaticDim> {
            fn go(d: &StaticDim, states: &[VarId], before: &[Option<Vec<StaticDim>>]) -> Option<StaticDim> {
                Some(match d {
                    StaticDim::DimOf(v, axis) => match states.iter().position(|s| s == v) {
                        Some(i) => before[i].as_ref()?.get(*axis as usize)?.clone(),
                        None => d.clone(),
                    },
                    StaticDim::Bin(op, a, b) => {
                        StaticDim::Bin(*op, Box::new(go(a, states, before)?), Box::new(go(b, states, before)?))
                    }
                    _ => d.clone(),
                })
            }
            go(d, states, &before)
        };
        let next: Vec<StaticDim> = next.iter().map(hypothesis).collect::<Option<_>>()?;
        if Some(&next) != before[j].as_ref() {
            return None;
        }
    }
    before.swap_remove(k)
}

/// The value of an `i64` atom as a static extent.
fn size_of_atom<'a>(cx: Cx<'a>, scopes: &mut Vec<Scope<'a>>, a: &Atom, depth: u32) -> Option<StaticDim> {
    match a {
        Atom::I64(n) => Some(StaticDim::Lit(*n)),
        Atom::Var(v) => match lookup(scopes, *v).ok()? {
            None => Some(StaticDim::Var(*v)),
            // (A mutable variable's `let` gives only its first value.)
            Some((e, 0)) if depth > 0 && !cx.f.var(*v).mutable => size_of_expr(cx, scopes, e, depth - 1),
            Some(_) => None,
        },
        _ => None,
    }
}

fn size_of_expr<'a>(cx: Cx<'a>, scopes: &mut Vec<Scope<'a>>, e: &'a Expr, depth: u32) -> Option<StaticDim> {
    match e {
        Expr::Atom(a) => size_of_atom(cx, scopes, a, depth),
        Expr::Dim { array, axis } => shape_of_var(cx, scopes, *array, depth)?.get(*axis as usize).cloned(),
        Expr::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b) => {
            let x = size_of_atom(cx, scopes, a, depth)?;
            let y = size_of_atom(cx, scopes, b, depth)?;
            Some(StaticDim::Bin(*op, Box::new(x), Box::new(y)))
        }
        _ => None,
    }
}

fn shape_of_atom<'a>(cx: Cx<'a>, scopes: &mut Vec<Scope<'a>>, a: &Atom, depth: u32) -> Option<Vec<StaticDim>> {
    match a {
        Atom::Var(v) if cx.f.ty(*v).rank > 0 => shape_of_var(cx, scopes, *v, depth),
        _ => Some(Vec::new()),
    }
}

/// The static extents of every axis of array `v`.
fn shape_of_var<'a>(cx: Cx<'a>, scopes: &mut Vec<Scope<'a>>, v: VarId, depth: u32) -> Option<Vec<StaticDim>> {
    match lookup(scopes, v).ok()? {
        None => Some((0..cx.f.ty(v).rank).map(|axis| StaticDim::DimOf(v, axis)).collect()),
        // (A mutable variable's `let` gives only its first value: a lazy
        // cotangent's `zeros [0]`.)
        Some((e, k)) if depth > 0 && !cx.f.var(v).mutable => shape_of_expr(cx, scopes, e, k, depth - 1),
        Some(_) => None,
    }
}

/// The static extents of value `k` of `e`.
fn shape_of_expr<'a>(
    cx: Cx<'a>,
    scopes: &mut Vec<Scope<'a>>,
    e: &'a Expr,
    k: usize,
    depth: u32,
) -> Option<Vec<StaticDim>> {
    if let Expr::Build { n, index, body } = e {
        let n = size_of_atom(cx, scopes, n, depth)?;
        scopes.push(Scope::new(Some(*index), body));
        let row = body.results.get(k).and_then(|r| shape_of_atom(cx, scopes, r, depth));
        scopes.pop();
        let mut dims = vec![n];
        dims.extend(row?);
        return Some(dims);
    }
    match e {
        Expr::If { cond, then_branch, else_branch } => {
            return shape_of_if(cx, scopes, (cond, then_branch, else_branch), k, depth)
        }
        Expr::Loop { index, states, init, body, .. } => {
            if matches!(e, Expr::Loop { n: Atom::I64(c), .. } if *c <= 0) {
                // No iteration: the initial state.
                return init.get(k).and_then(|a| shape_of_atom(cx, scopes, a, depth));
            }
            return shape_of_loop(cx, scopes, (*index, states, init, body), k, depth);
        }
        Expr::Call { func, args } => return shape_of_call(cx, scopes, (*func, args), k, depth),
        _ => {}
    }
    if k > 0 {
        return None;
    }
    match e {
        Expr::Atom(a) => shape_of_atom(cx, scopes, a, depth),
        Expr::ArrayLit { elems, .. } => {
            let len = i64::try_from(elems.len()).ok()?;
            let mut dims = vec![StaticDim::Lit(len)];
            dims.extend(shape_of_atom(cx, scopes, elems.first()?, depth)?);
            Some(dims)
        }
        Expr::Index { array, indices } => {
            let dims = shape_of_var(cx, scopes, *array, depth)?;
            dims.get(indices.len()..).map(<[StaticDim]>::to_vec)
        }
        Expr::Reshape { dims, .. } => dims.iter().map(|d| size_of_atom(cx, scopes, d, depth)).collect(),
        Expr::Update { array, .. } | Expr::ZerosLike(array) => shape_of_var(cx, scopes, *array, depth),
        Expr::Zeros(dims) => dims.iter().map(|d| size_of_atom(cx, scopes, d, depth)).collect(),
        _ => None,
    }
}
