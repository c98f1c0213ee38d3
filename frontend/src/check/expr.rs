//! Checking expressions: literals, variables, operators, calls, indexing,
//! projections (the binding and branching forms are in `control`).

use super::coerce::{as_f64, can_coerce, coerce, conversion_hint};
use super::{builtins, Fx};
use crate::ast::{BinaryOp, Expr, ExprKind, Ident, UnaryOp};
use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::parser::MAX_RANK;
use crate::span::Span;
use crate::tast::{TExpr, TKind};
use crate::types::{join, rank_u8, Ty};
use arrayad_ir::{BinOp, DiffOp, Scalar, Type, UnOp};

/// A typed expression node.
pub(super) fn node(kind: TKind, ty: Ty, span: Span, flex: bool) -> TExpr {
    TExpr { kind, ty, span, flex }
}

/// The placeholder for an expression whose error has been reported.
pub(super) fn poison(span: Span) -> TExpr {
    node(TKind::Error, Ty::Error, span, false)
}

const CONVERSION_NOTE: &str = "there are no implicit conversions: use `f64(i)` or `i64(x)`";

impl Fx<'_, '_> {
    /// Reports an error and returns the placeholder expression.
    pub(super) fn fail(&mut self, code: Code, span: Span, msg: impl Into<String>) -> TExpr {
        self.report(Diagnostic::new(code, span, msg));
        poison(span)
    }

    pub(super) fn fail_with(&mut self, d: Diagnostic) -> TExpr {
        let span = d.span;
        self.report(d);
        poison(span)
    }

    /// Checks an expression.
    pub(super) fn expr(&mut self, e: &Expr) -> TExpr {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(v) => self.int_literal(*v, false, span),
            ExprKind::Float(x) => node(TKind::Float(*x), Ty::F64, span, false),
            ExprKind::Bool(b) => node(TKind::Bool(*b), Ty::BOOL, span, false),
            ExprKind::Var(name) => self.var(name, span),
            ExprKind::Tuple(es) => {
                let cs: Vec<TExpr> = es.iter().map(|x| self.expr(x)).collect();
                let ty = Ty::Tuple(cs.iter().map(|c| c.ty.clone()).collect());
                let flex = cs.iter().any(|c| c.flex);
                node(TKind::Tuple(cs), ty, span, flex)
            }
            ExprKind::Array(es) => self.array_literal(es, span),
            ExprKind::Let { bindings, body } => self.let_chain(bindings, body, span),
            ExprKind::If { cond, then_branch, else_branch } => self.if_expr(cond, then_branch, else_branch, span),
            ExprKind::For { binders, body } => self.for_expr(binders, body, span),
            ExprKind::Loop { pat, init, index, count, body } => self.loop_expr(pat, init, index, count, body, span),
            ExprKind::While { pat, init, cond, body } => self.while_expr(pat, init, cond, body, span),
            ExprKind::Unary { op, operand } => self.unary(*op, operand, span),
            ExprKind::Binary { op, lhs, rhs, .. } => self.binary(*op, lhs, rhs, span),
            ExprKind::Call { func, args } => self.call(func, args, span),
            ExprKind::Index { array, indices } => self.index(array, indices, span),
            ExprKind::Slice { array, lo, hi } => self.slice(array, lo.as_deref(), hi.as_deref(), span),
            ExprKind::Proj { tuple, index, index_span } => self.proj(tuple, *index, *index_span, span),
            ExprKind::With { array, indices, value } => self.update(array, indices, value, span),
        }
    }

    /// `A with [i, ...] = V`: `V` has the type of an element (all indices)
    /// or of a row of `A`.
    fn update(&mut self, array: &Expr, indices: &[Expr], value: &Expr, span: Span) -> TExpr {
        let a = self.expr(array);
        let mut idx = Vec::new();
        for i in indices {
            let t = self.expr(i);
            idx.push(self.expect_i64(t, "an index"));
        }
        let mut v = self.expr(value);
        if a.ty.has_error() || v.ty.has_error() || idx.iter().any(|i| i.ty.has_error()) {
            return poison(span);
        }
        let t = match a.ty.leaf() {
            Some(t) if t.is_array() => t,
            _ => {
                return self.fail(
                    Code::NotAnArray,
                    array.span,
                    format!("only arrays can be updated, but this has type {}", self.shown(&a)),
                )
            }
        };
        if idx.len() > t.rank as usize {
            let msg = format!(
                "too many indices: an array of type {} has {} ax{} but {} indices are given",
                self.shown(&a),
                t.rank,
                if t.rank == 1 { "is" } else { "es" },
                idx.len()
            );
            return self.fail(Code::TooManyIndices, span, msg);
        }
        let want = Ty::Leaf(Type { elem: t.elem, rank: t.rank - rank_u8(idx.len()) });
        if !can_coerce(&v, &want) {
            let what = if idx.len() == t.rank as usize { "an element" } else { "a row" };
            let msg =
                format!("the new value has type {} but {what} of {} has type {want}", self.shown(&v), self.shown(&a));
            return self.fail(Code::UpdateValue, value.span, msg);
        }
        coerce(&mut v, &want);
        let ty = a.ty.clone();
        node(TKind::Update { array: Box::new(a), indices: idx, value: Box::new(v) }, ty, span, false)
    }

    /// An integer literal; `negated` for the operand of a unary minus (so
    /// that `-9223372036854775808` is allowed).
    fn int_literal(&mut self, v: u64, negated: bool, span: Span) -> TExpr {
        let value = if negated && v == 1u64 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(v).ok().map(|x| if negated { -x } else { x })
        };
        if negated && v == 0 {
            // Keep `-0` a negation, so that as an f64 it is -0.0.
            let zero = node(TKind::Int(0), Ty::I64, span, true);
            return node(TKind::Unary { op: UnOp::Neg, arg: Box::new(zero) }, Ty::I64, span, true);
        }
        match value {
            Some(x) => node(TKind::Int(x), Ty::I64, span, true),
            None => self.fail(
                Code::LiteralOutOfRange,
                span,
                format!("integer literal {v} is too large for i64 (the largest is {})", i64::MAX),
            ),
        }
    }

    /// The name of the variable `e`, if it is bound to an integer literal.
    fn int_literal_var(&self, e: &TExpr) -> Option<String> {
        match e.kind {
            TKind::Var(id) => self.locals.get(id.0).filter(|l| l.int_literal).map(|l| l.name.clone()),
            _ => None,
        }
    }

    fn var(&mut self, name: &str, span: Span) -> TExpr {
        if let Some(id) = self.scope.get(name) {
            let ty = self.locals.get(id.0).map_or(Ty::Error, |l| l.ty.clone());
            return node(TKind::Var(id), ty, span, false);
        }
        if self.g.index.contains_key(name) {
            let msg = format!("`{name}` is a definition, not a value: call it with `{name}(...)`");
            self.fail(Code::NotAValue, span, msg)
        } else if builtins::lookup(name).is_some() {
            let msg = format!("`{name}` is a builtin function, not a value: call it with `{name}(...)`");
            self.fail(Code::NotAValue, span, msg)
        } else {
            let d = Diagnostic::new(Code::UnknownVariable, span, format!("unknown variable `{name}`"));
            let d = match self.similar_variable(name) {
                Some(near) => d.with_note(format!("a variable with a similar name is in scope: `{near}`")),
                None => d,
            };
            self.fail_with(d)
        }
    }

    /// Requires an `i64` (integer literals are `i64` already).
    pub(super) fn expect_i64(&mut self, e: TExpr, what: &str) -> TExpr {
        if e.ty == Ty::I64 || e.ty.has_error() {
            e
        } else {
            let msg = format!("{what} must be an i64, found {}", self.shown(&e));
            let d = Diagnostic::new(Code::ExpectedI64, e.span, msg);
            let d = if e.ty == Ty::F64 { d.with_note("convert with `i64(x)`") } else { d };
            self.fail_with(d)
        }
    }

    fn array_literal(&mut self, es: &[Expr], span: Span) -> TExpr {
        if es.is_empty() {
            return self.fail_with(
                Diagnostic::new(
                    Code::ArrayLiteral,
                    span,
                    "empty array literal `[]`: its element type cannot be inferred",
                )
                .with_note("write an empty array as a comprehension, e.g. `for i < 0 => 0.0`"),
            );
        }
        let mut elems: Vec<TExpr> = es.iter().map(|x| self.expr(x)).collect();
        if elems.iter().any(|x| x.ty.has_error()) {
            return poison(span);
        }
        if let Some(t) = elems.iter().find(|x| matches!(x.ty, Ty::Tuple(_))) {
            let msg = format!("arrays of tuples do not exist: this element has type {}", self.shown(t));
            return self.fail(Code::ArrayOfTuples, t.span, msg);
        }
        let mut cand = elems[0].ty.clone();
        for x in &elems[1..] {
            match join(&cand, &x.ty) {
                Some(j) => cand = j,
                None => {
                    let msg = format!(
                        "the elements of an array literal must have the same type: found {} and {}",
                        self.shown(&elems[0]),
                        self.shown(x)
                    );
                    return self.fail(Code::ArrayLiteral, x.span, msg);
                }
            }
        }
        if let Some(x) = elems.iter().find(|x| !can_coerce(x, &cand)) {
            let msg = format!(
                "the elements of an array literal must have the same type: found {} and {}",
                self.shown(x),
                self.shown(&elems[0])
            );
            return self.fail(Code::ArrayLiteral, x.span, msg);
        }
        elems.iter_mut().for_each(|x| coerce(x, &cand));
        let Some(t) = cand.leaf() else { return poison(span) };
        if t.rank as usize >= MAX_RANK {
            return self.fail(Code::RankLimit, span, format!("arrays of rank above {MAX_RANK} are not supported"));
        }
        let flex = elems.iter().all(|x| x.flex);
        node(TKind::ArrayLit(elems), Ty::Leaf(t.lift()), span, flex)
    }

    fn unary(&mut self, op: UnaryOp, operand: &Expr, span: Span) -> TExpr {
        if let (UnaryOp::Neg, ExprKind::Int(v)) = (op, &operand.kind) {
            return self.int_literal(*v, true, span);
        }
        let a = self.expr(operand);
        if a.ty.has_error() {
            return poison(span);
        }
        match (op, a.ty.leaf()) {
            (UnaryOp::Neg, Some(t)) if t.elem != Scalar::Bool => {
                let (ty, flex) = (a.ty.clone(), a.flex);
                node(TKind::Unary { op: UnOp::Neg, arg: Box::new(a) }, ty, span, flex)
            }
            (UnaryOp::Not, Some(t)) if t == Type::BOOL => {
                node(TKind::Unary { op: UnOp::Not, arg: Box::new(a) }, Ty::BOOL, span, false)
            }
            (UnaryOp::Neg, _) => self.fail(
                Code::OperandTypes,
                span,
                format!("`-` applies to f64 and i64 values, found {}", self.shown(&a)),
            ),
            (UnaryOp::Not, _) => {
                self.fail(Code::OperandTypes, span, format!("`!` applies to a bool (scalar), found {}", self.shown(&a)))
            }
        }
    }

    fn binary(&mut self, op: BinaryOp, lhs: &Expr, rhs: &Expr, span: Span) -> TExpr {
        let a = self.expr(lhs);
        let b = self.expr(rhs);
        let bop = match op {
            BinaryOp::Or | BinaryOp::And => return self.logical(op, a, b, span),
            BinaryOp::Eq => BinOp::Eq,
            BinaryOp::Ne => BinOp::Ne,
            BinaryOp::Lt => BinOp::Lt,
            BinaryOp::Le => BinOp::Le,
            BinaryOp::Gt => BinOp::Gt,
            BinaryOp::Ge => BinOp::Ge,
            BinaryOp::Add => BinOp::Add,
            BinaryOp::Sub => BinOp::Sub,
            BinaryOp::Mul => BinOp::Mul,
            BinaryOp::Div => BinOp::Div,
            BinaryOp::Rem => BinOp::Rem,
            BinaryOp::Pow => BinOp::Pow,
        };
        self.arith(bop, op.symbol(), a, b, span)
    }

    fn logical(&mut self, op: BinaryOp, a: TExpr, b: TExpr, span: Span) -> TExpr {
        let sym = op.symbol();
        let mut bad = false;
        for x in [&a, &b] {
            if !x.ty.has_error() && x.ty != Ty::BOOL {
                let msg = format!("the operands of `{sym}` must be bools, found {}", self.shown(x));
                self.fail(Code::OperandTypes, x.span, msg);
                bad = true;
            }
        }
        if bad || a.ty.has_error() || b.ty.has_error() {
            return poison(span);
        }
        let kind = if op == BinaryOp::And {
            TKind::And(Box::new(a), Box::new(b))
        } else {
            TKind::Or(Box::new(a), Box::new(b))
        };
        node(kind, Ty::BOOL, span, false)
    }

    /// A binary scalar operation (operator or builtin named `sym`),
    /// elementwise when an operand is an array.
    pub(super) fn arith(&mut self, op: BinOp, sym: &'static str, mut a: TExpr, mut b: TExpr, span: Span) -> TExpr {
        if a.ty.has_error() || b.ty.has_error() {
            return poison(span);
        }
        let (Some(ta), Some(tb)) = (a.ty.leaf(), b.ty.leaf()) else {
            return self.fail(
                Code::OperandTypes,
                span,
                format!("`{sym}` cannot be applied to tuples (found {} and {})", self.shown(&a), self.shown(&b)),
            );
        };
        if op.is_comparison() && (ta.is_array() || tb.is_array()) {
            let msg = format!("comparisons are scalar only: `{sym}` of {} and {}", self.shown(&a), self.shown(&b));
            return self.fail(Code::RankMismatch, span, msg);
        }
        // Integer literals become f64 next to an f64 (or for f64-only operations).
        let f64_only = matches!(op, BinOp::Pow | BinOp::Atan2);
        for (x, other) in [(&mut a, tb.elem), (&mut b, ta.elem)] {
            let wants_f64 = f64_only || other == Scalar::F64;
            if wants_f64 && x.ty.leaf().is_some_and(|t| t.elem == Scalar::I64) {
                let target = as_f64(&x.ty);
                if can_coerce(x, &target) {
                    coerce(x, &target);
                }
            }
        }
        let (Some(ta), Some(tb)) = (a.ty.leaf(), b.ty.leaf()) else { return poison(span) };
        // The operand types as messages show them, formatted only for a
        // message (every arithmetic operation passes here).
        let kinds = |fx: &Self| format!("{} and {}", fx.shown(&a), fx.shown(&b));
        let elem = ta.elem;
        let class_ok = |e: Scalar| match op {
            BinOp::Pow | BinOp::Atan2 => e == Scalar::F64,
            BinOp::Rem => e == Scalar::I64,
            BinOp::Eq | BinOp::Ne => true,
            _ => e != Scalar::Bool,
        };
        if !class_ok(ta.elem) || !class_ok(tb.elem) {
            let need = match op {
                BinOp::Pow | BinOp::Atan2 => "f64 operands",
                BinOp::Rem => "i64 operands",
                _ => "f64 or i64 operands",
            };
            let msg = format!("`{sym}` needs {need}, found {}", kinds(self));
            let mut d = Diagnostic::new(Code::OperandTypes, span, msg);
            if ta.elem != tb.elem || f64_only {
                d = d.with_note(CONVERSION_NOTE);
            }
            return self.fail_with(d);
        }
        if ta.elem != tb.elem {
            let msg = format!("the operands of `{sym}` have different types: {}", kinds(self));
            let mut d = Diagnostic::new(Code::MixedNumbers, span, msg).with_note(CONVERSION_NOTE);
            for x in [&a, &b] {
                if let Some(name) = self.int_literal_var(x) {
                    d = d.with_note(format!(
                        "`{name}` is an i64 because it is bound to an integer literal: write it with a decimal \
                         point (`1.0`) or annotate it (`let {name}: f64 = ...`)"
                    ));
                }
            }
            return self.fail_with(d);
        }
        if ta.is_array() && tb.is_array() && ta.rank != tb.rank {
            let msg = format!("elementwise `{sym}` needs arrays of the same rank, found {}", kinds(self));
            return self.fail(Code::RankMismatch, span, msg);
        }
        let rank = ta.rank.max(tb.rank);
        let out_elem = if op.is_comparison() { Scalar::Bool } else { elem };
        let flex = a.flex
            && b.flex
            && matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max);
        let kind = TKind::Binary { op, sym, lhs: Box::new(a), rhs: Box::new(b) };
        node(kind, Ty::Leaf(Type { elem: out_elem, rank }), span, flex)
    }

    /// `jvp(f, ARGS, TANGENTS)`, `vjp(f, ARGS, COTANGENT)`, `grad(f, ARGS)`
    /// (LANGUAGE.md section 10): a call of the stub of `op` applied to `f`.
    fn derivative(&mut self, op: DiffOp, args: &[Expr], span: Span) -> TExpr {
        let usage = match op {
            DiffOp::Jvp => "jvp(f, ARGS, TANGENTS)",
            DiffOp::Vjp => "vjp(f, ARGS, COTANGENT)",
            DiffOp::Grad => "grad(f, ARGS)",
        };
        let want = if op == DiffOp::Grad { 2 } else { 3 };
        if args.len() != want {
            for a in args.iter().skip(1) {
                self.expr(a);
            }
            return self.fail(Code::ArgumentCount, span, format!("`{op}` takes {want} arguments: {usage}"));
        }
        let ExprKind::Var(fname) = &args[0].kind else {
            self.expr(&args[0]);
            return self.fail(
                Code::DiffTarget,
                args[0].span,
                format!("the first argument of `{op}` must name a definition: {usage}"),
            );
        };
        let fspan = args[0].span;
        let mut targs: Vec<TExpr> = args[1..].iter().map(|a| self.expr(a)).collect();
        if builtins::lookup(fname).is_some() || DiffOp::from_keyword(fname).is_some() {
            let d = Diagnostic::new(
                Code::DiffTarget,
                fspan,
                format!("`{op}` differentiates definitions, and `{fname}` is a builtin"),
            )
            .with_note(format!("wrap it in a definition: def g(x: f64) -> f64 = {fname}(x)"));
            return self.fail_with(d);
        }
        let Some(&idx) = self.g.index.get(fname.as_str()) else {
            if self.g.broken.contains(fname.as_str()) {
                return poison(span);
            }
            if self.scope.get(fname).is_some() {
                let msg = format!("`{fname}` is a variable: `{op}` takes the name of a definition");
                return self.fail(Code::NotAValue, fspan, msg);
            }
            return self.unknown_function(fname, fspan);
        };
        let Some(sig) = self.g.sigs.get(idx) else { return poison(span) };
        self.calls.push((idx, fspan));
        if sig.params.is_empty() {
            return self.fail(
                Code::NothingToDifferentiate,
                fspan,
                format!("`{fname}` has no parameters: there is nothing to differentiate"),
            );
        }
        let params = match sig.params.as_slice() {
            [(_, t)] => t.clone(),
            ps => Ty::Tuple(ps.iter().map(|(_, t)| t.clone()).collect()),
        };
        let result = sig.result.clone();
        let shape_note = if sig.params.len() == 1 {
            format!("`{fname}` has one parameter: ARGS is one expression of its type")
        } else {
            format!("`{fname}` has {} parameters: ARGS is a tuple with one component each", sig.params.len())
        };
        let mut bad = false;
        let wanted = match op {
            DiffOp::Jvp => vec![("ARGS", params.clone()), ("TANGENTS", params.clone())],
            DiffOp::Vjp => vec![("ARGS", params.clone()), ("COTANGENT", result.clone())],
            DiffOp::Grad => vec![("ARGS", params.clone())],
        };
        // The same types as written (with the sizes of `fname`'s signature).
        let params_src = match sig.params_src.as_slice() {
            [(_, t)] => t.clone(),
            ps => arrayad_ir::SrcType::Tuple(ps.iter().map(|(_, t)| t.clone()).collect()),
        };
        let result_src = sig.result_src.clone();
        for (arg, (what, ty)) in targs.iter_mut().zip(&wanted) {
            let declared = if *what == "COTANGENT" { &result_src } else { &params_src };
            if can_coerce(arg, ty) {
                coerce(arg, ty);
            } else {
                let d = Diagnostic::new(
                    Code::DiffArgumentType,
                    arg.span,
                    format!("{what} of `{op}` has type {}, but `{fname}` needs {declared}", self.shown(arg)),
                )
                .with_note(if *what == "COTANGENT" {
                    format!("a cotangent has the type of `{fname}`'s result")
                } else {
                    shape_note.clone()
                });
                self.report(d);
                bad = true;
            }
        }
        if op == DiffOp::Grad && result != Ty::F64 && !result.has_error() {
            let d = Diagnostic::new(
                Code::GradResultNotF64,
                fspan,
                format!("`grad` needs a definition whose result is one f64, but `{fname}` returns {}", sig.result_src),
            )
            .with_note("use `vjp` with a cotangent of the result's type");
            self.report(d);
            bad = true;
        }
        if bad {
            return poison(span);
        }
        let ty = match op {
            DiffOp::Jvp => Ty::Tuple(vec![result.clone(), result]),
            DiffOp::Vjp => Ty::Tuple(vec![result, params]),
            DiffOp::Grad => params,
        };
        let stub = self.g.stub(op, idx);
        node(TKind::Call { func: stub, args: targs }, ty, span, false)
    }

    fn call(&mut self, func: &Ident, args: &[Expr], span: Span) -> TExpr {
        let name = func.name.as_str();
        if let Some(op) = DiffOp::from_keyword(name) {
            if !self.g.index.contains_key(name) {
                return self.derivative(op, args, span);
            }
        }
        let mut targs: Vec<TExpr> = args.iter().map(|a| self.expr(a)).collect();
        if let Some(b) = builtins::lookup(name) {
            return self.builtin(b, name, targs, span);
        }
        let Some(&idx) = self.g.index.get(name) else {
            if self.g.broken.contains(name) {
                return poison(span);
            }
            if self.scope.get(name).is_some() {
                return self.fail(Code::NotAValue, func.span, format!("`{name}` is a variable, not a function"));
            }
            return self.unknown_function(name, func.span);
        };
        let Some(sig) = self.g.sigs.get(idx) else { return poison(span) };
        self.calls.push((idx, func.span));
        if targs.len() != sig.params.len() {
            let n = sig.params.len();
            let msg = format!(
                "`{name}` takes {n} argument{} but {} {} given",
                if n == 1 { "" } else { "s" },
                targs.len(),
                if targs.len() == 1 { "was" } else { "were" }
            );
            return self.fail(Code::ArgumentCount, span, msg);
        }
        let mut bad = false;
        for (k, (arg, (pname, pty))) in targs.iter_mut().zip(&sig.params).enumerate() {
            if can_coerce(arg, pty) {
                coerce(arg, pty);
            } else {
                let declared = sig.params_src.get(k).map_or_else(|| pty.to_string(), |(_, t)| t.to_string());
                let msg = format!(
                    "argument {} of `{}` has type {}, but the parameter `{pname}` has type {declared}",
                    k + 1,
                    sig.name,
                    self.shown(arg)
                );
                let mut d = Diagnostic::new(Code::ArgumentType, arg.span, msg);
                if let Some(note) = conversion_hint(&arg.ty, pty) {
                    d = d.with_note(note);
                }
                self.fail_with(d);
                bad = true;
            }
        }
        if bad {
            return poison(span);
        }
        let ty = sig.result.clone();
        node(TKind::Call { func: idx, args: targs }, ty, span, false)
    }

    fn index(&mut self, array: &Expr, indices: &[Expr], span: Span) -> TExpr {
        let a = self.expr(array);
        let mut idx = Vec::new();
        for i in indices {
            let t = self.expr(i);
            idx.push(self.expect_i64(t, "an index"));
        }
        if a.ty.has_error() || idx.iter().any(|i| i.ty.has_error()) {
            return poison(span);
        }
        let t = match a.ty.leaf() {
            Some(t) if t.is_array() => t,
            _ => {
                return self.fail(
                    Code::NotAnArray,
                    array.span,
                    format!("only arrays can be indexed, but this has type {}", self.shown(&a)),
                )
            }
        };
        if idx.len() > t.rank as usize {
            let msg = format!(
                "too many indices: an array of type {} has {} ax{} but {} indices are given",
                self.shown(&a),
                t.rank,
                if t.rank == 1 { "is" } else { "es" },
                idx.len()
            );
            return self.fail(Code::TooManyIndices, span, msg);
        }
        let ty = Type { elem: t.elem, rank: t.rank - rank_u8(idx.len()) };
        node(TKind::Index { array: Box::new(a), indices: idx }, Ty::Leaf(ty), span, false)
    }

    fn slice(&mut self, array: &Expr, lo: Option<&Expr>, hi: Option<&Expr>, span: Span) -> TExpr {
        let a = self.expr(array);
        let bound = |fx: &mut Self, e: Option<&Expr>| {
            e.map(|e| {
                let t = fx.expr(e);
                Box::new(fx.expect_i64(t, "a slice bound"))
            })
        };
        let lo = bound(self, lo);
        let hi = bound(self, hi);
        let bad_bound = lo.iter().chain(hi.iter()).any(|b| b.ty.has_error());
        if a.ty.has_error() || bad_bound {
            return poison(span);
        }
        match a.ty.leaf() {
            Some(t) if t.is_array() => node(TKind::Slice { array: Box::new(a), lo, hi }, Ty::Leaf(t), span, false),
            _ => self.fail(
                Code::NotAnArray,
                array.span,
                format!("only arrays can be sliced, but this has type {}", self.shown(&a)),
            ),
        }
    }

    fn proj(&mut self, tuple: &Expr, index: u32, index_span: Span, span: Span) -> TExpr {
        let t = self.expr(tuple);
        let i = index as usize;
        match &t.ty {
            Ty::Error => poison(span),
            Ty::Tuple(ts) => match ts.get(i) {
                Some(c) => {
                    let ty = c.clone();
                    node(TKind::Proj { tuple: Box::new(t), index: i }, ty, span, false)
                }
                None => {
                    let msg = format!("a tuple of type {} has no component {index}", self.shown(&t));
                    self.fail(Code::TupleShape, index_span, msg)
                }
            },
            other => {
                let msg = format!("`.{index}` selects a tuple component, but this has type {other}");
                self.fail(Code::TupleShape, tuple.span, msg)
            }
        }
    }
}
