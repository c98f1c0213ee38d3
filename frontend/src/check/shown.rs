//! Types as messages show them: with the sizes of array axes by name
//! (`[n]f64`, `[n - 1][3]f64`) where the checker can tell them, and `_`
//! where it cannot (`[_]f64`: the size of a slice, of a value-dependent
//! comprehension, ...).
//!
//! Sizes are not part of the checker's types ([`Ty`]: element and rank;
//! sizes are checked at run time), so they are recovered for messages only:
//! from the declared types of parameters and annotations, and through the
//! operations that carry them (elementwise operations keep the shape,
//! `for i < n` adds an axis `n`, indexing drops axes, a call substitutes
//! the callee's size variables). The walk is bounded ([`DEPTH`]), so a
//! message costs a constant amount of work.

use super::Fx;
use crate::tast::{TExpr, TKind, TPat};
use crate::types::Ty;
use arrayad_ir::{BinOp, Scalar, SrcType};
use std::collections::HashMap;
use std::fmt;

/// How deep [`Fx::shown`] looks into an expression for sizes.
const DEPTH: u32 = 8;

/// A type with the sizes known for messages.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Shown {
    /// A scalar (`dims` empty) or an array; `None` for an unknown size.
    Leaf {
        elem: Scalar,
        dims: Vec<Option<String>>,
    },
    Tuple(Vec<Shown>),
    /// The type of an expression with a reported error.
    Error,
}

impl Shown {
    /// `ty` with every size unknown.
    pub(crate) fn of_ty(ty: &Ty) -> Shown {
        match ty {
            Ty::Leaf(t) => Shown::Leaf { elem: t.elem, dims: vec![None; t.rank as usize] },
            Ty::Tuple(ts) => Shown::Tuple(ts.iter().map(Shown::of_ty).collect()),
            Ty::Error => Shown::Error,
        }
    }

    /// A type as written.
    pub(crate) fn of_src(t: &SrcType) -> Shown {
        match t {
            SrcType::Scalar(s) => Shown::Leaf { elem: *s, dims: Vec::new() },
            SrcType::Array { elem, dims } => {
                Shown::Leaf { elem: *elem, dims: dims.iter().map(|d| Some(d.to_string())).collect() }
            }
            SrcType::Tuple(ts) => Shown::Tuple(ts.iter().map(Shown::of_src).collect()),
        }
    }

    /// True if this has the element types, ranks and tuple structure of `ty`.
    fn fits(&self, ty: &Ty) -> bool {
        match (self, ty) {
            (Shown::Leaf { elem, dims }, Ty::Leaf(t)) => *elem == t.elem && dims.len() == t.rank as usize,
            (Shown::Tuple(ss), Ty::Tuple(ts)) => ss.len() == ts.len() && ss.iter().zip(ts).all(|(s, t)| s.fits(t)),
            (Shown::Error, Ty::Error) => true,
            _ => false,
        }
    }

    /// The sizes of the axes of a leaf (empty for a tuple).
    fn dims(&self) -> &[Option<String>] {
        match self {
            Shown::Leaf { dims, .. } => dims,
            _ => &[],
        }
    }
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shown::Leaf { elem, dims } => {
                for d in dims {
                    write!(f, "[{}]", d.as_deref().unwrap_or("_"))?;
                }
                write!(f, "{elem}")
            }
            Shown::Tuple(ts) => {
                f.write_str("(")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
            Shown::Error => f.write_str("?"),
        }
    }
}

/// The leaf `ty` with axes `dims` (unknown where `dims` runs short).
fn leaf(ty: &Ty, mut dims: Vec<Option<String>>) -> Shown {
    match ty {
        Ty::Leaf(t) => {
            dims.resize(t.rank as usize, None);
            Shown::Leaf { elem: t.elem, dims }
        }
        other => Shown::of_ty(other),
    }
}

impl Fx<'_, '_> {
    /// The type of `e` with the sizes that can be told (see the module
    /// docs); always consistent with `e.ty`.
    pub(super) fn shown(&self, e: &TExpr) -> Shown {
        self.shown_at(e, DEPTH)
    }

    fn shown_at(&self, e: &TExpr, depth: u32) -> Shown {
        // A scalar has no size to tell (every `let` asks: a program of
        // scalar arithmetic would otherwise walk each bound expression).
        if depth == 0 || matches!(&e.ty, Ty::Leaf(t) if t.rank == 0) {
            return Shown::of_ty(&e.ty);
        }
        let d = depth - 1;
        let array_dims = |x: &TExpr| self.shown_at(x, d).dims().to_vec();
        let s = match &e.kind {
            TKind::Var(id) => match self.locals.get(id.0).and_then(|l| l.shown.clone()) {
                Some(s) => s,
                None => Shown::of_ty(&e.ty),
            },
            TKind::Tuple(es) => Shown::Tuple(es.iter().map(|x| self.shown_at(x, d)).collect()),
            TKind::ArrayLit(es) => {
                let mut dims = vec![Some(es.len().to_string())];
                dims.extend(es.first().map(array_dims).unwrap_or_default());
                leaf(&e.ty, dims)
            }
            TKind::Let { body, .. } => self.shown_at(body, d),
            TKind::If { then_branch, .. } => self.shown_at(then_branch, d),
            TKind::Build { n, body, .. } => {
                let mut dims = vec![self.size_text(n, d)];
                dims.extend(array_dims(body));
                leaf(&e.ty, dims)
            }
            TKind::Loop { init, .. } | TKind::While { init, .. } => self.shown_at(init, d),
            TKind::Unary { arg, .. } => leaf(&e.ty, array_dims(arg)),
            TKind::Binary { op, lhs, rhs, .. } if !op.is_comparison() => {
                let (a, b) = (array_dims(lhs), array_dims(rhs));
                leaf(&e.ty, if a.len() >= b.len() { a } else { b })
            }
            TKind::Call { func, args } => self.call_shown(*func, args, &e.ty, d),
            TKind::Sum(a) => leaf(&e.ty, array_dims(a).get(1..).map(<[_]>::to_vec).unwrap_or_default()),
            TKind::Index { array, indices } => {
                let dims = array_dims(array);
                leaf(&e.ty, dims.get(indices.len()..).map(<[_]>::to_vec).unwrap_or_default())
            }
            TKind::Slice { array, .. } => {
                let mut dims = array_dims(array);
                if let Some(first) = dims.first_mut() {
                    *first = None;
                }
                leaf(&e.ty, dims)
            }
            TKind::Proj { tuple, index } => match self.shown_at(tuple, d) {
                Shown::Tuple(mut ts) if *index < ts.len() => ts.swap_remove(*index),
                _ => Shown::of_ty(&e.ty),
            },
            TKind::Update { array, .. } => self.shown_at(array, d),
            TKind::Reshape { dims, .. } => leaf(&e.ty, dims.iter().map(|x| self.size_text(x, d)).collect()),
            TKind::Flatten(a) => {
                let dims = array_dims(a);
                let first = match (dims.first(), dims.get(1)) {
                    (Some(Some(x)), Some(Some(y))) => Some(format!("{} * {}", operand(x), operand(y))),
                    _ => None,
                };
                leaf(&e.ty, std::iter::once(first).chain(dims.into_iter().skip(2)).collect())
            }
            TKind::Concat(a, b) => {
                let (mut x, y) = (array_dims(a), array_dims(b));
                if let Some(first) = x.first_mut() {
                    *first = match (first.take(), y.first()) {
                        (Some(p), Some(Some(q))) => Some(format!("{p} + {q}")),
                        _ => None,
                    };
                }
                leaf(&e.ty, x)
            }
            _ => Shown::of_ty(&e.ty),
        };
        if s.fits(&e.ty) {
            s
        } else {
            Shown::of_ty(&e.ty)
        }
    }

    /// The size an `i64` expression stands for, as text: a literal, a
    /// variable, `length(a)`, and `+ - * /` of those.
    fn size_text(&self, n: &TExpr, depth: u32) -> Option<String> {
        if depth == 0 {
            return None;
        }
        match &n.kind {
            TKind::Int(k) => Some(k.to_string()),
            TKind::Var(id) => self.locals.get(id.0).map(|l| l.name.clone()),
            TKind::Length(a) => self.shown_at(a, depth - 1).dims().first().cloned().flatten(),
            TKind::Binary { op: BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, sym, lhs, rhs, .. } => {
                let a = self.size_text(lhs, depth - 1)?;
                let b = self.size_text(rhs, depth - 1)?;
                Some(format!("{} {sym} {}", operand(&a), operand(&b)))
            }
            _ => None,
        }
    }

    /// The result of a call of definition `func` (not a stub): the declared
    /// result type with the callee's size variables replaced by the sizes
    /// of the arguments.
    fn call_shown(&self, func: usize, args: &[TExpr], ty: &Ty, depth: u32) -> Shown {
        let Some(sig) = self.g.sigs.get(func) else { return Shown::of_ty(ty) };
        let mut subst: HashMap<&str, Option<String>> = HashMap::new();
        for ((_, declared), arg) in sig.params_src.iter().zip(args) {
            bind_sizes(declared, &self.shown_at(arg, depth), &mut subst);
        }
        substitute(&sig.result_src, &subst)
    }

    /// Records what `pat` binds for messages: the parts of `shown`.
    pub(super) fn set_shown(&mut self, pat: &TPat, shown: Shown) {
        match (pat, shown) {
            (TPat::Bind(id), s) => {
                if let Some(l) = self.locals.get_mut(id.0) {
                    if s.fits(&l.ty) {
                        l.shown = Some(s);
                    }
                }
            }
            (TPat::Tuple(ps), Shown::Tuple(ss)) if ps.len() == ss.len() => {
                for (p, s) in ps.iter().zip(ss) {
                    self.set_shown(p, s);
                }
            }
            _ => {}
        }
    }
}

/// `text` as an operand of a binary size expression: parenthesised unless
/// it is a name or a number.
fn operand(text: &str) -> String {
    if text.chars().all(|c| c.is_alphanumeric() || c == '_') {
        text.to_string()
    } else {
        format!("({text})")
    }
}

/// Matches a declared parameter type against an argument's sizes: each
/// size variable of `declared` takes the argument's size on that axis.
fn bind_sizes<'a>(declared: &'a SrcType, arg: &Shown, subst: &mut HashMap<&'a str, Option<String>>) {
    match (declared, arg) {
        (SrcType::Array { dims, .. }, Shown::Leaf { dims: sizes, .. }) => {
            for (d, s) in dims.iter().zip(sizes) {
                if let arrayad_ir::SrcDim::Var(v) = d {
                    subst.entry(v.as_str()).or_insert_with(|| s.clone());
                }
            }
        }
        (SrcType::Tuple(ts), Shown::Tuple(ss)) => {
            for (t, s) in ts.iter().zip(ss) {
                bind_sizes(t, s, subst);
            }
        }
        _ => {}
    }
}

/// `t` with its size variables replaced by `subst` (a size expression or
/// an unbound variable becomes unknown).
fn substitute(t: &SrcType, subst: &HashMap<&str, Option<String>>) -> Shown {
    match t {
        SrcType::Scalar(s) => Shown::Leaf { elem: *s, dims: Vec::new() },
        SrcType::Array { elem, dims } => Shown::Leaf {
            elem: *elem,
            dims: dims
                .iter()
                .map(|d| match d {
                    arrayad_ir::SrcDim::Lit(n) => Some(n.to_string()),
                    arrayad_ir::SrcDim::Var(v) => subst.get(v.as_str()).cloned().flatten(),
                    arrayad_ir::SrcDim::Expr(_) => None,
                })
                .collect(),
        },
        SrcType::Tuple(ts) => Shown::Tuple(ts.iter().map(|t| substitute(t, subst)).collect()),
    }
}
