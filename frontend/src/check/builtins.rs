//! The builtin functions (LANGUAGE.md section 4) and their typing.

use super::coerce::{as_f64, can_coerce, coerce};
use super::expr::{node, poison};
use super::Fx;
use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::span::Span;
use crate::tast::{TExpr, TKind};
use crate::types::Ty;
use arrayad_ir::{BinOp, ReduceOp, Scalar, Type, UnOp};

/// A builtin function.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Builtin {
    /// `exp`, `log`, ..., `abs`, `floor`, `ceil`: f64 -> f64, elementwise.
    Math(UnOp),
    /// `pow`, `atan2`, `min`, `max`: elementwise binary operations.
    Binary(BinOp),
    ToF64,
    ToI64,
    Length,
    Sum,
    /// `maximum`, `minimum`.
    Reduce(ReduceOp),
    Dot,
    /// `flatten(A)`: [n][m]T -> [n * m]T.
    Flatten,
    /// `reshape(A, (d1, ..., dk))`.
    Reshape,
    /// `concat(A, B)` along axis 0.
    Concat,
    /// `argmax(a)` (`true`), `argmin(a)`: [n]f64 -> i64.
    ArgExtreme(bool),
}

/// Names of all builtins.
pub(crate) const NAMES: &[&str] = &[
    "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "log1p", "expm1", "erf",
    "lgamma", "abs", "floor", "ceil", "pow", "atan2", "min", "max", "f64", "i64", "length", "sum", "maximum",
    "minimum", "dot", "sign", "flatten", "reshape", "concat", "argmin", "argmax",
];

/// The builtin called `name`, if any.
pub(crate) fn lookup(name: &str) -> Option<Builtin> {
    use Builtin::*;
    Some(match name {
        "exp" => Math(UnOp::Exp),
        "log" => Math(UnOp::Log),
        "sqrt" => Math(UnOp::Sqrt),
        "sin" => Math(UnOp::Sin),
        "cos" => Math(UnOp::Cos),
        "tan" => Math(UnOp::Tan),
        "tanh" => Math(UnOp::Tanh),
        "sinh" => Math(UnOp::Sinh),
        "cosh" => Math(UnOp::Cosh),
        "asin" => Math(UnOp::Asin),
        "acos" => Math(UnOp::Acos),
        "atan" => Math(UnOp::Atan),
        "log1p" => Math(UnOp::Log1p),
        "expm1" => Math(UnOp::Expm1),
        "erf" => Math(UnOp::Erf),
        "lgamma" => Math(UnOp::Lgamma),
        "abs" => Math(UnOp::Abs),
        "floor" => Math(UnOp::Floor),
        "ceil" => Math(UnOp::Ceil),
        "pow" => Binary(BinOp::Pow),
        "atan2" => Binary(BinOp::Atan2),
        "min" => Binary(BinOp::Min),
        "max" => Binary(BinOp::Max),
        "f64" => ToF64,
        "i64" => ToI64,
        "length" => Length,
        "sum" => Sum,
        "maximum" => Reduce(ReduceOp::Max),
        "minimum" => Reduce(ReduceOp::Min),
        "dot" => Dot,
        "sign" => Math(UnOp::Sign),
        "flatten" => Flatten,
        "reshape" => Reshape,
        "concat" => Concat,
        "argmax" => ArgExtreme(true),
        "argmin" => ArgExtreme(false),
        _ => return None,
    })
}

impl Builtin {
    fn arity(self) -> usize {
        match self {
            Builtin::Binary(_) | Builtin::Dot | Builtin::Reshape | Builtin::Concat => 2,
            _ => 1,
        }
    }
}

/// The static name of a binary builtin (for messages).
fn binary_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Pow => "pow",
        BinOp::Atan2 => "atan2",
        BinOp::Min => "min",
        _ => "max",
    }
}

/// Turns an integer-literal argument into `f64` if it can be.
fn prefer_f64(e: &mut TExpr) {
    if e.ty.leaf().is_some_and(|t| t.elem == Scalar::I64) {
        let t = as_f64(&e.ty);
        if can_coerce(e, &t) {
            coerce(e, &t);
        }
    }
}

impl Fx<'_, '_> {
    /// Checks a call of builtin `b` (named `name`) with checked arguments.
    pub(super) fn builtin(&mut self, b: Builtin, name: &str, mut args: Vec<TExpr>, span: Span) -> TExpr {
        let n = b.arity();
        if args.len() != n {
            let msg = format!(
                "`{name}` takes {n} argument{} but {} {} given",
                if n == 1 { "" } else { "s" },
                args.len(),
                if args.len() == 1 { "was" } else { "were" }
            );
            return self.fail(Code::ArgumentCount, span, msg);
        }
        if args.iter().any(|a| a.ty.has_error()) {
            return poison(span);
        }
        if n == 2 {
            let (Some(y), Some(x)) = (args.pop(), args.pop()) else { return poison(span) };
            return match b {
                Builtin::Binary(op) => self.arith(op, binary_name(op), x, y, span),
                Builtin::Reshape => self.reshape(x, y, span),
                Builtin::Concat => self.concat(x, y, span),
                _ => self.dot(x, y, span),
            };
        }
        let Some(mut a) = args.pop() else { return poison(span) };
        let found = self.shown(&a);
        let found_ty = a.ty.clone();
        match b {
            Builtin::Math(op) => {
                prefer_f64(&mut a);
                match a.ty.leaf() {
                    Some(t) if t.elem == Scalar::F64 => {
                        let ty = a.ty.clone();
                        node(TKind::Unary { op, arg: Box::new(a) }, ty, span, false)
                    }
                    _ => {
                        let d = Diagnostic::new(
                            Code::BuiltinArgument,
                            span,
                            format!("`{name}` expects an f64 or an array of f64, found {found}"),
                        );
                        let d = if found_ty.leaf().is_some_and(|t| t.elem == Scalar::I64) {
                            d.with_note("convert with `f64(i)`")
                        } else {
                            d
                        };
                        self.fail_with(d)
                    }
                }
            }
            Builtin::ToF64 => match a.ty.leaf() {
                Some(t) if t.elem == Scalar::F64 => a,
                Some(t) if t.elem == Scalar::I64 => {
                    let target = as_f64(&a.ty);
                    if a.flex && can_coerce(&a, &target) {
                        coerce(&mut a, &target);
                        a
                    } else {
                        node(TKind::Unary { op: UnOp::ToF64, arg: Box::new(a) }, target, span, false)
                    }
                }
                _ => self.fail(
                    Code::BuiltinArgument,
                    span,
                    format!("`f64` converts an i64 (or f64) value, found {found}"),
                ),
            },
            Builtin::ToI64 => match a.ty.leaf() {
                Some(t) if t.elem == Scalar::I64 => {
                    a.flex = false;
                    a
                }
                Some(t) if t.elem == Scalar::F64 => {
                    let ty = Ty::Leaf(t.with_elem(Scalar::I64));
                    node(TKind::Unary { op: UnOp::ToI64, arg: Box::new(a) }, ty, span, false)
                }
                _ => self.fail(
                    Code::BuiltinArgument,
                    span,
                    format!("`i64` converts an f64 (or i64) value, found {found}"),
                ),
            },
            Builtin::Length => match a.ty.leaf() {
                Some(t) if t.is_array() => node(TKind::Length(Box::new(a)), Ty::I64, span, false),
                _ => self.fail(Code::BuiltinArgument, span, format!("`length` expects an array, found {found}")),
            },
            Builtin::Sum => match a.ty.leaf() {
                Some(t) if t.is_array() && t.elem != Scalar::Bool => {
                    node(TKind::Sum(Box::new(a)), Ty::Leaf(t.row()), span, false)
                }
                _ => self.fail(
                    Code::BuiltinArgument,
                    span,
                    format!("`sum` expects an array of f64 or i64, found {found}"),
                ),
            },
            Builtin::Reduce(op) => {
                prefer_f64(&mut a);
                if a.ty.leaf() == Some(Type::array(Scalar::F64, 1)) {
                    node(TKind::Reduce(op, Box::new(a)), Ty::F64, span, false)
                } else {
                    self.fail(
                        Code::BuiltinArgument,
                        span,
                        format!("`{name}` expects a one-dimensional array of f64, found {found}"),
                    )
                }
            }
            Builtin::Flatten => match a.ty.leaf() {
                Some(t) if t.rank >= 2 => {
                    let ty = Ty::Leaf(Type { elem: t.elem, rank: t.rank - 1 });
                    node(TKind::Flatten(Box::new(a)), ty, span, false)
                }
                _ => self.fail(
                    Code::BuiltinArgument,
                    span,
                    format!("`flatten` expects an array of rank 2 or more, found {found}"),
                ),
            },
            Builtin::ArgExtreme(max) => {
                prefer_f64(&mut a);
                if a.ty.leaf() == Some(Type::array(Scalar::F64, 1)) {
                    node(TKind::ArgExtreme { max, array: Box::new(a) }, Ty::I64, span, false)
                } else {
                    self.fail(
                        Code::BuiltinArgument,
                        span,
                        format!("`{name}` expects a one-dimensional array of f64, found {found}"),
                    )
                }
            }
            Builtin::Binary(_) | Builtin::Dot | Builtin::Reshape | Builtin::Concat => poison(span),
        }
    }

    /// `reshape(A, (d1, ..., dk))`: the extents are i64 values (one i64 for
    /// rank 1).
    fn reshape(&mut self, a: TExpr, dims: TExpr, span: Span) -> TExpr {
        let elem = match a.ty.leaf() {
            Some(t) if t.is_array() => t.elem,
            _ => {
                return self.fail(
                    Code::BuiltinArgument,
                    a.span,
                    format!("`reshape` reshapes an array, found {}", self.shown(&a)),
                )
            }
        };
        let ds = match dims.kind {
            TKind::Tuple(ds) => ds,
            _ => vec![dims],
        };
        if ds.iter().any(|d| d.ty != Ty::I64) {
            let found: Vec<String> = ds.iter().map(|d| d.ty.to_string()).collect();
            return self.fail_with(
                Diagnostic::new(
                    Code::BuiltinArgument,
                    span,
                    format!("the extents of `reshape` must be i64 values, found ({})", found.join(", ")),
                )
                .with_note("write them as a tuple: `reshape(a, (n, m))`"),
            );
        }
        if ds.len() > crate::parser::MAX_RANK {
            return self.fail(
                Code::RankLimit,
                span,
                format!("arrays of rank above {} are not supported", crate::parser::MAX_RANK),
            );
        }
        let ty = Ty::Leaf(Type::array(elem, crate::types::rank_u8(ds.len())));
        node(TKind::Reshape { array: Box::new(a), dims: ds }, ty, span, false)
    }

    /// `concat(A, B)`: arrays of one element type and rank, along axis 0.
    fn concat(&mut self, mut a: TExpr, mut b: TExpr, span: Span) -> TExpr {
        let both_arrays = a.ty.leaf().is_some_and(|t| t.is_array()) && b.ty.leaf().is_some_and(|t| t.is_array());
        let common = crate::types::join(&a.ty, &b.ty).filter(|t| can_coerce(&a, t) && can_coerce(&b, t));
        match common {
            Some(t) if both_arrays => {
                coerce(&mut a, &t);
                coerce(&mut b, &t);
                node(TKind::Concat(Box::new(a), Box::new(b)), t, span, false)
            }
            _ => self.fail(
                Code::BuiltinArgument,
                span,
                format!(
                    "`concat` joins two arrays of one element type and rank, found {} and {}",
                    self.shown(&a),
                    self.shown(&b)
                ),
            ),
        }
    }

    fn dot(&mut self, mut x: TExpr, mut y: TExpr, span: Span) -> TExpr {
        prefer_f64(&mut x);
        prefer_f64(&mut y);
        let want = Some(Type::array(Scalar::F64, 1));
        if x.ty.leaf() == want && y.ty.leaf() == want {
            node(TKind::Dot(Box::new(x), Box::new(y)), Ty::F64, span, false)
        } else {
            let msg = format!(
                "`dot` expects two one-dimensional arrays of f64, found {} and {}",
                self.shown(&x),
                self.shown(&y)
            );
            self.fail(Code::BuiltinArgument, span, msg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves() {
        for n in NAMES {
            assert!(lookup(n).is_some(), "{n}");
        }
        assert!(lookup("logsumexp").is_none());
    }
}
