//! Integer literals where an `f64` is expected (LANGUAGE.md section 3).
//!
//! An expression built only from integer literals (`2`, `-1`, `2 * 3`,
//! `[1, 2]`, `if c then 0 else 1`, `(0, x)`) is "flexible": it is an `i64`
//! unless an `f64` is expected, and then every literal in it becomes an
//! `f64`. [`can_coerce`] asks whether an expression can take a type,
//! [`coerce`] rewrites it.

use crate::tast::{TExpr, TKind};
use crate::types::Ty;
use arrayad_ir::{Scalar, Type, UnOp};

/// The same shape with `f64` elements.
pub(super) fn as_f64(t: &Ty) -> Ty {
    match t {
        Ty::Leaf(l) => Ty::Leaf(l.with_elem(Scalar::F64)),
        other => other.clone(),
    }
}

/// The type `e` would have if its flexible parts became `f64`.
pub(super) fn flexible_as_f64(e: &TExpr) -> Ty {
    match (&e.kind, &e.ty) {
        (TKind::Tuple(cs), _) => Ty::Tuple(cs.iter().map(flexible_as_f64).collect()),
        (_, Ty::Leaf(t)) if e.flex && t.elem == Scalar::I64 => Ty::Leaf(t.with_elem(Scalar::F64)),
        _ => e.ty.clone(),
    }
}

/// True if `e` has type `target`, or can take it by turning integer
/// literals into `f64` literals.
pub(super) fn can_coerce(e: &TExpr, target: &Ty) -> bool {
    if e.ty == *target || e.ty.has_error() || target.has_error() {
        return true;
    }
    if !e.flex {
        return false;
    }
    let row = |t: &Ty| match t {
        Ty::Leaf(l) if l.rank >= 1 => Some(Ty::Leaf(l.row())),
        _ => None,
    };
    match &e.kind {
        TKind::Int(_) => *target == Ty::F64,
        TKind::Unary { op: UnOp::Neg, arg } => can_coerce(arg, target),
        TKind::Binary { lhs, rhs, .. } => {
            leaf_to_f64(&e.ty, target) && can_coerce(lhs, &as_f64(&lhs.ty)) && can_coerce(rhs, &as_f64(&rhs.ty))
        }
        TKind::If { then_branch, else_branch, .. } => {
            can_coerce(then_branch, target) && can_coerce(else_branch, target)
        }
        TKind::Let { body, .. } => can_coerce(body, target),
        TKind::ArrayLit(es) => row(target).is_some_and(|r| es.iter().all(|x| can_coerce(x, &r))),
        TKind::Build { body, .. } => row(target).is_some_and(|r| can_coerce(body, &r)),
        TKind::Tuple(cs) => match target {
            Ty::Tuple(ts) if ts.len() == cs.len() => cs.iter().zip(ts).all(|(c, t)| can_coerce(c, t)),
            _ => false,
        },
        _ => false,
    }
}

/// True if `from` is an `i64` leaf and `to` the same shape of `f64`.
fn leaf_to_f64(from: &Ty, to: &Ty) -> bool {
    match (from, to) {
        (Ty::Leaf(a), Ty::Leaf(b)) => a.elem == Scalar::I64 && *b == Type { elem: Scalar::F64, rank: a.rank },
        _ => false,
    }
}

/// Gives `e` the type `target`; call only when [`can_coerce`] holds.
pub(super) fn coerce(e: &mut TExpr, target: &Ty) {
    if e.ty == *target || e.ty.has_error() || target.has_error() {
        return;
    }
    let row = |t: &Ty| match t {
        Ty::Leaf(l) if l.rank >= 1 => Ty::Leaf(l.row()),
        other => other.clone(),
    };
    match &mut e.kind {
        TKind::Int(v) => {
            let x = *v as f64;
            e.kind = TKind::Float(x);
        }
        TKind::Unary { arg, .. } => coerce(arg, target),
        TKind::Binary { lhs, rhs, .. } => {
            let (lt, rt) = (as_f64(&lhs.ty), as_f64(&rhs.ty));
            coerce(lhs, &lt);
            coerce(rhs, &rt);
        }
        TKind::If { then_branch, else_branch, .. } => {
            coerce(then_branch, target);
            coerce(else_branch, target);
        }
        TKind::Let { body, .. } => coerce(body, target),
        TKind::ArrayLit(es) => {
            let r = row(target);
            es.iter_mut().for_each(|x| coerce(x, &r));
        }
        TKind::Build { body, .. } => coerce(body, &row(target)),
        TKind::Tuple(cs) => {
            if let Ty::Tuple(ts) = target {
                cs.iter_mut().zip(ts).for_each(|(c, t)| coerce(c, t));
            }
        }
        _ => {}
    }
    e.ty = target.clone();
    e.flex = false;
}

/// A note for a value of type `found` where `want` is expected, when a
/// conversion builtin bridges them: `f64(...)` for an `i64` where an `f64`
/// is expected, `i64(...)` the other way (also elementwise on arrays).
pub(super) fn conversion_hint(found: &Ty, want: &Ty) -> Option<&'static str> {
    let (Ty::Leaf(f), Ty::Leaf(w)) = (found, want) else { return None };
    match (f.elem, w.elem) {
        _ if f.rank != w.rank => None,
        (Scalar::I64, Scalar::F64) => Some("convert with `f64(...)`: there are no implicit conversions"),
        (Scalar::F64, Scalar::I64) => {
            Some("convert with `i64(...)` (truncation toward zero): there are no implicit conversions")
        }
        _ => None,
    }
}
