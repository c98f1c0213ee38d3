//! The row shape of a comprehension that runs zero times.
//!
//! `for i < n => [x[i], 1.0]` has type `[n][2]f64`; when `n == 0` no row is
//! computed, yet the result must still have the shape `[0][2]` (a
//! `[n][2]f64` result is checked against it, and its shape reaches the
//! caller). [`static_row_dims`] finds the extents of a [`Expr::Build`]'s
//! rows from what the body computes *before* it depends on the index: a
//! literal of `k` rows, a nested comprehension over a count fixed outside,
//! an index or view into an array from outside, a reshape to fixed
//! extents, and `+ - *` of such sizes. The interpreter and code generation
//! evaluate those extents before the loop and use them when it runs zero
//! times (the first row overrides them otherwise, so they are only ever a
//! default). A row shape that depends on the index (`for i < n => x[i:]`)
//! has no static form: such a comprehension keeps extent 0 in every inner
//! dimension when it runs zero times, as [`Expr::Build`] documents.

use crate::program::{Atom, BinOp, Block, Expr, Function, StmtKind, VarId};
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
/// chains of views): it runs in constant time per comprehension.
const DEPTH: u32 = 16;

/// The statically known extents of the rows of `build index < n => body`
/// in `f` (one entry per axis of the row, i.e. of `body.results[result]`),
/// or `None` when some extent depends on the index or on values computed
/// in the body (see the module docs). Scalar rows have no extents: `Some`
/// of an empty list.
pub fn static_row_dims(f: &Function, index: VarId, body: &Block, result: usize) -> Option<Vec<StaticDim>> {
    let row = body.results.get(result)?;
    let rank = f.atom_ty(row).rank as usize;
    if rank == 0 {
        return Some(Vec::new());
    }
    let mut scopes = vec![Scope::new(index, body)];
    let dims = shape_of_atom(f, &mut scopes, row, DEPTH)?;
    (dims.len() == rank).then_some(dims)
}

/// The row shape of result `result` of `build index < 0 => body` in `f`
/// for an evaluator: [`static_row_dims`] evaluated with the values of the
/// outer variables (`var`: an `i64`; `dim`: an array's extent), a negative
/// extent (which a row cannot have) taken as 0, as compiled code does.
/// `None` where the extents are not static or a lookup fails.
pub fn eval_static_row_shape(
    f: &Function,
    index: VarId,
    body: &Block,
    result: usize,
    var: &dyn Fn(VarId) -> Option<i64>,
    dim: &dyn Fn(VarId, u8) -> Option<i64>,
) -> Option<Vec<usize>> {
    let dims = static_row_dims(f, index, body, result)?;
    dims.iter().map(|d| d.eval(var, dim).map(|x| usize::try_from(x).unwrap_or(0))).collect()
}

/// The index and the definitions of one comprehension body: each variable
/// a `let` binds, with its expression and which of its values it is.
struct Scope<'a> {
    index: VarId,
    defs: HashMap<VarId, (&'a Expr, usize)>,
}

impl<'a> Scope<'a> {
    fn new(index: VarId, body: &'a Block) -> Scope<'a> {
        let mut defs = HashMap::new();
        for s in &body.stmts {
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
        if s.index == v {
            return Err(());
        }
        if let Some(d) = s.defs.get(&v) {
            return Ok(Some(*d));
        }
    }
    Ok(None)
}

/// The value of an `i64` atom as a static extent.
fn size_of_atom<'a>(f: &Function, scopes: &mut Vec<Scope<'a>>, a: &Atom, depth: u32) -> Option<StaticDim> {
    match a {
        Atom::I64(n) => Some(StaticDim::Lit(*n)),
        Atom::Var(v) => match lookup(scopes, *v).ok()? {
            None => Some(StaticDim::Var(*v)),
            Some((e, 0)) if depth > 0 => size_of_expr(f, scopes, e, depth - 1),
            Some(_) => None,
        },
        _ => None,
    }
}

fn size_of_expr<'a>(f: &Function, scopes: &mut Vec<Scope<'a>>, e: &'a Expr, depth: u32) -> Option<StaticDim> {
    match e {
        Expr::Atom(a) => size_of_atom(f, scopes, a, depth),
        Expr::Dim { array, axis } => shape_of_var(f, scopes, *array, depth)?.get(*axis as usize).cloned(),
        Expr::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b) => {
            let x = size_of_atom(f, scopes, a, depth)?;
            let y = size_of_atom(f, scopes, b, depth)?;
            Some(StaticDim::Bin(*op, Box::new(x), Box::new(y)))
        }
        _ => None,
    }
}

fn shape_of_atom<'a>(f: &Function, scopes: &mut Vec<Scope<'a>>, a: &Atom, depth: u32) -> Option<Vec<StaticDim>> {
    match a {
        Atom::Var(v) if f.ty(*v).rank > 0 => shape_of_var(f, scopes, *v, depth),
        _ => Some(Vec::new()),
    }
}

/// The static extents of every axis of array `v`.
fn shape_of_var<'a>(f: &Function, scopes: &mut Vec<Scope<'a>>, v: VarId, depth: u32) -> Option<Vec<StaticDim>> {
    match lookup(scopes, v).ok()? {
        None => Some((0..f.ty(v).rank).map(|axis| StaticDim::DimOf(v, axis)).collect()),
        Some((e, k)) if depth > 0 => shape_of_expr(f, scopes, e, k, depth - 1),
        Some(_) => None,
    }
}

/// The static extents of value `k` of `e`.
fn shape_of_expr<'a>(
    f: &Function,
    scopes: &mut Vec<Scope<'a>>,
    e: &'a Expr,
    k: usize,
    depth: u32,
) -> Option<Vec<StaticDim>> {
    if let Expr::Build { n, index, body } = e {
        let n = size_of_atom(f, scopes, n, depth)?;
        scopes.push(Scope::new(*index, body));
        let row = body.results.get(k).and_then(|r| shape_of_atom(f, scopes, r, depth));
        scopes.pop();
        let mut dims = vec![n];
        dims.extend(row?);
        return Some(dims);
    }
    if k > 0 {
        return None;
    }
    match e {
        Expr::Atom(a) => shape_of_atom(f, scopes, a, depth),
        Expr::ArrayLit { elems, .. } => {
            let len = i64::try_from(elems.len()).ok()?;
            let mut dims = vec![StaticDim::Lit(len)];
            dims.extend(shape_of_atom(f, scopes, elems.first()?, depth)?);
            Some(dims)
        }
        Expr::Index { array, indices } => {
            let dims = shape_of_var(f, scopes, *array, depth)?;
            dims.get(indices.len()..).map(<[StaticDim]>::to_vec)
        }
        Expr::Reshape { dims, .. } => dims.iter().map(|d| size_of_atom(f, scopes, d, depth)).collect(),
        Expr::Update { array, .. } => shape_of_var(f, scopes, *array, depth),
        _ => None,
    }
}
