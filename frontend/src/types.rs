//! Types as the checker sees them: IR leaf types (element and rank; sizes
//! are checked at run time) and tuples of them.

use crate::ast::{DimKind, TypeExpr, TypeKind};
use arrayad_ir::{Scalar, SrcDim, SrcType, Type};
use std::fmt;

/// The type of a source expression.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Ty {
    /// A scalar or an array.
    Leaf(Type),
    /// A tuple of two or more types.
    Tuple(Vec<Ty>),
    /// The type of an expression that already has a reported error; it is
    /// compatible with everything, so one mistake is reported once.
    Error,
}

impl Ty {
    pub(crate) const F64: Ty = Ty::Leaf(Type::F64);
    pub(crate) const I64: Ty = Ty::Leaf(Type::I64);
    pub(crate) const BOOL: Ty = Ty::Leaf(Type::BOOL);

    /// True if an error type occurs anywhere inside.
    pub(crate) fn has_error(&self) -> bool {
        match self {
            Ty::Error => true,
            Ty::Leaf(_) => false,
            Ty::Tuple(ts) => ts.iter().any(Ty::has_error),
        }
    }

    /// The leaf type, if this is not a tuple.
    pub(crate) fn leaf(&self) -> Option<Type> {
        match self {
            Ty::Leaf(t) => Some(*t),
            _ => None,
        }
    }

    /// The IR types of the leaves, flattened left to right.
    pub(crate) fn leaves(&self) -> Vec<Type> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<Type>) {
        match self {
            Ty::Leaf(t) => out.push(*t),
            Ty::Tuple(ts) => ts.iter().for_each(|t| t.collect(out)),
            Ty::Error => {}
        }
    }

    /// Number of leaves.
    pub(crate) fn leaf_count(&self) -> usize {
        match self {
            Ty::Leaf(_) => 1,
            Ty::Tuple(ts) => ts.iter().map(Ty::leaf_count).sum(),
            Ty::Error => 0,
        }
    }

    /// The checker type of a source-level type.
    pub(crate) fn from_src(t: &SrcType) -> Ty {
        match t {
            SrcType::Scalar(s) => Ty::Leaf(Type::scalar(*s)),
            SrcType::Array { elem, dims } => Ty::Leaf(Type::array(*elem, rank_u8(dims.len()))),
            SrcType::Tuple(ts) => Ty::Tuple(ts.iter().map(Ty::from_src).collect()),
        }
    }
}

/// A rank as `u8` (ranks are limited far below 255 by the parser).
pub(crate) fn rank_u8(r: usize) -> u8 {
    u8::try_from(r).unwrap_or(u8::MAX)
}

/// The smallest type both `a` and `b` can take, where an integer-literal
/// `i64` may become an `f64` (the caller checks that it may).
pub(crate) fn join(a: &Ty, b: &Ty) -> Option<Ty> {
    match (a, b) {
        (Ty::Error, t) | (t, Ty::Error) => Some(t.clone()),
        (Ty::Leaf(x), Ty::Leaf(y)) => {
            if x == y {
                Some(a.clone())
            } else if x.rank == y.rank && is_int_float(x.elem, y.elem) {
                Some(Ty::Leaf(x.with_elem(Scalar::F64)))
            } else {
                None
            }
        }
        (Ty::Tuple(xs), Ty::Tuple(ys)) if xs.len() == ys.len() => {
            xs.iter().zip(ys).map(|(x, y)| join(x, y)).collect::<Option<Vec<_>>>().map(Ty::Tuple)
        }
        _ => None,
    }
}

fn is_int_float(a: Scalar, b: Scalar) -> bool {
    matches!((a, b), (Scalar::I64, Scalar::F64) | (Scalar::F64, Scalar::I64))
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Sizes are not part of the checker's types: `[_]` (messages
            // show them with their names where they can, `check::Shown`).
            Ty::Leaf(t) => {
                for _ in 0..t.rank {
                    f.write_str("[_]")?;
                }
                write!(f, "{}", t.elem)
            }
            Ty::Tuple(ts) => {
                f.write_str("(")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
            Ty::Error => f.write_str("?"),
        }
    }
}

/// The source-level type of a written type.
pub(crate) fn src_type(t: &TypeExpr) -> SrcType {
    match &t.kind {
        TypeKind::Scalar(s) => SrcType::Scalar(*s),
        TypeKind::Array { elem, dims } => SrcType::Array {
            elem: *elem,
            dims: dims
                .iter()
                .map(|d| match &d.kind {
                    DimKind::Var(v) => SrcDim::Var(v.clone()),
                    DimKind::Lit(n) => SrcDim::Lit(*n),
                    DimKind::Expr(e) => SrcDim::Expr(e.clone()),
                })
                .collect(),
        },
        TypeKind::Tuple(ts) => SrcType::Tuple(ts.iter().map(src_type).collect()),
    }
}

/// The leaves of a written type, flattened left to right, with the path of
/// tuple components leading to each (for messages and names).
pub(crate) fn type_leaves(t: &TypeExpr) -> Vec<(Vec<usize>, &TypeExpr)> {
    fn go<'a>(t: &'a TypeExpr, path: &mut Vec<usize>, out: &mut Vec<(Vec<usize>, &'a TypeExpr)>) {
        match &t.kind {
            TypeKind::Tuple(ts) => {
                for (i, c) in ts.iter().enumerate() {
                    path.push(i);
                    go(c, path, out);
                    path.pop();
                }
            }
            _ => out.push((path.clone(), t)),
        }
    }
    let mut out = Vec::new();
    go(t, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_types() {
        let f1 = Ty::Leaf(Type::array(Scalar::F64, 1));
        let i1 = Ty::Leaf(Type::array(Scalar::I64, 1));
        assert_eq!(join(&Ty::I64, &Ty::F64), Some(Ty::F64));
        assert_eq!(join(&i1, &f1), Some(f1.clone()));
        assert_eq!(join(&Ty::I64, &f1), None);
        assert_eq!(join(&Ty::BOOL, &Ty::F64), None);
        assert_eq!(
            join(&Ty::Tuple(vec![Ty::I64, Ty::F64]), &Ty::Tuple(vec![Ty::F64, Ty::I64])),
            Some(Ty::Tuple(vec![Ty::F64, Ty::F64]))
        );
        assert_eq!(Ty::Tuple(vec![Ty::I64, f1]).to_string(), "(i64, [_]f64)");
    }
}
