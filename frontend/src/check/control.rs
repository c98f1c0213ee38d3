//! Checking the forms that bind names or branch: `let` chains (with
//! patterns and annotations), `if`, `for` and `loop`.

use super::coerce::{can_coerce, coerce, conversion_hint, flexible_as_f64};
use super::expr::{node, poison};
use super::Fx;
use super::Shown;
use crate::ast::{Binding, DimKind, Expr, ForBinder, Ident, Pattern, PatternKind, TypeExpr};
use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::parser::MAX_RANK;
use crate::span::Span;
use crate::tast::{DimTarget, LocalId, ShapeCheck, TBinding, TExpr, TKind, TPat};
use crate::types::{join, rank_u8, src_type, type_leaves, Ty};

impl Fx<'_, '_> {
    /// `let PAT (: T)? = E ... in BODY`: each binding is in scope from the
    /// next one on.
    pub(super) fn let_chain(&mut self, bindings: &[Binding], body: &Expr, span: Span) -> TExpr {
        let mark = self.scope.mark();
        let mut out = Vec::new();
        for b in bindings {
            let mut value = self.expr(&b.value);
            let mut checks = Vec::new();
            if let Some(ann) = &b.ty {
                let (aty, cs) = self.annotation(ann);
                if can_coerce(&value, &aty) {
                    coerce(&mut value, &aty);
                    checks = cs;
                } else {
                    let msg =
                        format!("this value has type {} but the annotation says {}", self.shown(&value), src_type(ann));
                    let mut d = Diagnostic::new(Code::AnnotationType, b.value.span, msg);
                    if let Some(note) = conversion_hint(&value.ty, &aty) {
                        d = d.with_note(note);
                    }
                    self.fail_with(d);
                    value = poison(b.value.span);
                }
            }
            let pat = self.bind_pattern(&b.pat, &value.ty, &[]);
            let shown = match &b.ty {
                Some(ann) if !value.ty.has_error() => Shown::of_src(&src_type(ann)),
                _ => self.shown(&value),
            };
            self.set_shown(&pat, shown);
            if let (TPat::Bind(id), true) = (&pat, value.flex && value.ty == Ty::I64) {
                if let Some(l) = self.locals.get_mut(id.0) {
                    l.int_literal = true;
                }
            }
            out.push(TBinding { pat, value, checks });
        }
        let body = self.expr(body);
        self.scope.reset(mark);
        let (ty, flex) = (body.ty.clone(), body.flex);
        node(TKind::Let { bindings: out, body: Box::new(body) }, ty, span, flex)
    }

    /// The type of an annotation and the size checks its dimensions ask for
    /// (sizes in annotations are `i64` variables in scope or literals).
    fn annotation(&mut self, ann: &TypeExpr) -> (Ty, Vec<ShapeCheck>) {
        let ty = Ty::from_src(&src_type(ann));
        let mut checks = Vec::new();
        for (leaf, (_, te)) in type_leaves(ann).into_iter().enumerate() {
            let crate::ast::TypeKind::Array { dims, .. } = &te.kind else { continue };
            for (axis, d) in dims.iter().enumerate() {
                let axis = rank_u8(axis);
                let (target, shown) = match &d.kind {
                    DimKind::Lit(n) => (DimTarget::Lit(*n), n.to_string()),
                    DimKind::Var(v) => match self.scope.get(v) {
                        Some(id) if self.locals.get(id.0).is_some_and(|l| l.ty == Ty::I64) => {
                            (DimTarget::Local(id), v.clone())
                        }
                        _ => {
                            let msg = format!("unknown size `{v}`: sizes in annotations are i64 variables in scope");
                            self.fail(Code::UnknownSize, d.span, msg);
                            continue;
                        }
                    },
                    DimKind::Expr(e) => {
                        let lookup = |v: &str| {
                            self.scope.get(v).filter(|id| self.locals.get(id.0).is_some_and(|l| l.ty == Ty::I64))
                        };
                        match super::resolve_size(e, &lookup) {
                            Ok(t) => (DimTarget::Expr(Box::new(t)), e.to_string()),
                            Err(v) => {
                                let msg =
                                    format!("unknown size `{v}`: sizes in annotations are i64 variables in scope");
                                self.fail(Code::UnknownSize, d.span, msg);
                                continue;
                            }
                        }
                    }
                };
                let what = format!("annotated value axis {axis} must equal {shown}");
                checks.push(ShapeCheck { leaf, axis, target, what, span: d.span });
            }
        }
        (ty, checks)
    }

    /// Binds the names of `pat` to the parts of a value of type `ty`.
    /// `also` are names bound by the same construct (for duplicates).
    pub(super) fn bind_pattern(&mut self, pat: &Pattern, ty: &Ty, also: &[&str]) -> TPat {
        let mut seen: Vec<String> = also.iter().map(|s| s.to_string()).collect();
        self.bind_pat(pat, ty, &mut seen)
    }

    fn bind_pat(&mut self, pat: &Pattern, ty: &Ty, seen: &mut Vec<String>) -> TPat {
        match &pat.kind {
            PatternKind::Var(name) => {
                if seen.contains(name) {
                    self.fail(Code::BoundTwice, pat.span, format!("`{name}` is bound twice here"));
                }
                seen.push(name.clone());
                TPat::Bind(self.bind_local(name, ty.clone()))
            }
            PatternKind::Wildcard => TPat::Wild(ty.clone()),
            PatternKind::Tuple(ps) => {
                let tys: Vec<Ty> = match ty {
                    Ty::Tuple(ts) if ts.len() == ps.len() => ts.clone(),
                    Ty::Error => vec![Ty::Error; ps.len()],
                    _ => {
                        let msg = format!("this pattern has {} components but the value has type {}", ps.len(), ty);
                        self.fail(Code::TupleShape, pat.span, msg);
                        vec![Ty::Error; ps.len()]
                    }
                };
                TPat::Tuple(ps.iter().zip(&tys).map(|(p, t)| self.bind_pat(p, t, seen)).collect())
            }
        }
    }

    /// Gives two expressions a common type (integer literals become `f64`
    /// next to an `f64`); `None` if they have none.
    fn unify(a: &mut TExpr, b: &mut TExpr) -> Option<Ty> {
        let cand = join(&a.ty, &b.ty)?;
        if !can_coerce(a, &cand) || !can_coerce(b, &cand) {
            return None;
        }
        coerce(a, &cand);
        coerce(b, &cand);
        Some(cand)
    }

    /// `if C then A else B`: integer literals in one branch become f64 if
    /// the other is f64.
    pub(super) fn if_expr(&mut self, cond: &Expr, then_branch: &Expr, else_branch: &Expr, span: Span) -> TExpr {
        let mut c = self.expr(cond);
        if !c.ty.has_error() && c.ty != Ty::BOOL {
            let msg = format!("the condition of `if` must be a bool, found {}", self.shown(&c));
            c = self.fail(Code::ConditionNotBool, cond.span, msg);
        }
        let mut t = self.expr(then_branch);
        let mut e = self.expr(else_branch);
        let (tt, et) = (self.shown(&t), self.shown(&e));
        let ty = match Self::unify(&mut t, &mut e) {
            Some(ty) => ty,
            None => {
                let msg = format!("the branches of `if` have different types: {tt} and {et}");
                self.fail(Code::BranchTypes, else_branch.span, msg);
                Ty::Error
            }
        };
        let flex = t.flex && e.flex;
        let kind = TKind::If { cond: Box::new(c), then_branch: Box::new(t), else_branch: Box::new(e) };
        node(kind, ty, span, flex)
    }

    /// `for i < N, j < M => E`: nested builds; the body is not a tuple.
    pub(super) fn for_expr(&mut self, binders: &[ForBinder], body: &Expr, span: Span) -> TExpr {
        let mark = self.scope.mark();
        let mut levels: Vec<(Option<LocalId>, TExpr)> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for b in binders {
            let n = self.expr(&b.bound);
            let n = self.expect_i64(n, "the number of iterations of `for`");
            let index = self.index_binder(&b.index, &names);
            names.push(&b.index.name);
            levels.push((index, n));
        }
        let body = self.expr(body);
        self.scope.reset(mark);
        let elem = match &body.ty {
            Ty::Error => return poison(span),
            Ty::Tuple(_) => {
                let msg = format!("arrays of tuples do not exist: the body of `for` has type {}", self.shown(&body));
                return self.fail(Code::ArrayOfTuples, body.span, msg);
            }
            Ty::Leaf(t) => *t,
        };
        if elem.rank as usize + levels.len() > MAX_RANK {
            return self.fail(Code::RankLimit, span, format!("arrays of rank above {MAX_RANK} are not supported"));
        }
        let mut cur = body;
        let mut t = elem;
        for (index, n) in levels.into_iter().rev() {
            t = t.lift();
            let flex = cur.flex;
            cur = node(TKind::Build { index, n: Box::new(n), body: Box::new(cur) }, Ty::Leaf(t), span, flex);
        }
        cur
    }

    /// Binds the index of a `for` or `loop` (nothing for `_`).
    fn index_binder(&mut self, index: &Ident, also: &[&str]) -> Option<LocalId> {
        if index.name == "_" {
            return None;
        }
        if also.contains(&index.name.as_str()) {
            self.fail(Code::BoundTwice, index.span, format!("`{}` is bound twice here", index.name));
        }
        Some(self.bind_local(&index.name, Ty::I64))
    }

    /// `loop PAT = INIT for i < N do BODY`: the state keeps the type of the
    /// initial value, except that an integer-literal initial value becomes
    /// f64 when the body needs it (`loop acc = 0 ... do acc + x[i]`).
    pub(super) fn loop_expr(
        &mut self,
        pat: &Pattern,
        init: &Expr,
        index: &Ident,
        count: &Expr,
        body: &Expr,
        span: Span,
    ) -> TExpr {
        let mut init_t = self.expr(init);
        let n = self.expr(count);
        let n = self.expect_i64(n, "the number of iterations of `loop`");
        let mark = self.scope.mark();
        let diag_mark = self.diags.len();
        let mut state_ty = init_t.ty.clone();
        let (mut tpat, mut tindex, mut tbody) = self.loop_body(pat, index, body, &state_ty, &init_t);
        let ok = self.diags.len() == diag_mark && can_coerce(&tbody, &state_ty);
        // `loop acc = 0 for ... do acc + x[i]`: retry with an f64 state.
        let f64_state = flexible_as_f64(&init_t);
        if !ok && init_t.flex && f64_state != state_ty && self.retries > 0 {
            self.retries -= 1;
            let first_errors = self.diags.split_off(diag_mark);
            self.scope.reset(mark);
            let (p2, i2, b2) = self.loop_body(pat, index, body, &f64_state, &init_t);
            if self.diags.len() == diag_mark && can_coerce(&b2, &f64_state) {
                coerce(&mut init_t, &f64_state);
                state_ty = f64_state;
                (tpat, tindex, tbody) = (p2, i2, b2);
            } else {
                self.diags.truncate(diag_mark);
                self.diags.extend(first_errors);
            }
        }
        self.scope.reset(mark);
        if can_coerce(&tbody, &state_ty) {
            coerce(&mut tbody, &state_ty);
        } else {
            let msg = format!(
                "the loop body has type {} but the loop state has type {}",
                self.shown(&tbody),
                self.shown(&init_t)
            );
            let mut d = Diagnostic::new(Code::LoopStateType, body.span, msg);
            if init_t.flex {
                d = d.with_note("the initial value fixes the type of the state: write `0.0` for an f64 zero");
            }
            self.fail_with(d);
        }
        let kind =
            TKind::Loop { pat: tpat, init: Box::new(init_t), index: tindex, n: Box::new(n), body: Box::new(tbody) };
        node(kind, state_ty, span, false)
    }

    /// `loop PAT = INIT while C do BODY`: typed like a counted loop (the
    /// same retry with an f64 state for an integer-literal initial value);
    /// `C` is a bool over the state.
    pub(super) fn while_expr(&mut self, pat: &Pattern, init: &Expr, cond: &Expr, body: &Expr, span: Span) -> TExpr {
        let mut init_t = self.expr(init);
        let mark = self.scope.mark();
        let diag_mark = self.diags.len();
        let mut state_ty = init_t.ty.clone();
        let (mut tpat, mut tcond, mut tbody) = self.while_body(pat, cond, body, &state_ty, &init_t);
        let ok = self.diags.len() == diag_mark && can_coerce(&tbody, &state_ty);
        let f64_state = flexible_as_f64(&init_t);
        if !ok && init_t.flex && f64_state != state_ty && self.retries > 0 {
            self.retries -= 1;
            let first_errors = self.diags.split_off(diag_mark);
            self.scope.reset(mark);
            let (p2, c2, b2) = self.while_body(pat, cond, body, &f64_state, &init_t);
            if self.diags.len() == diag_mark && can_coerce(&b2, &f64_state) {
                coerce(&mut init_t, &f64_state);
                state_ty = f64_state;
                (tpat, tcond, tbody) = (p2, c2, b2);
            } else {
                self.diags.truncate(diag_mark);
                self.diags.extend(first_errors);
            }
        }
        self.scope.reset(mark);
        if can_coerce(&tbody, &state_ty) {
            coerce(&mut tbody, &state_ty);
        } else {
            let msg = format!(
                "the loop body has type {} but the loop state has type {}",
                self.shown(&tbody),
                self.shown(&init_t)
            );
            let mut d = Diagnostic::new(Code::LoopStateType, body.span, msg);
            if init_t.flex {
                d = d.with_note("the initial value fixes the type of the state: write `0.0` for an f64 zero");
            }
            self.fail_with(d);
        }
        let kind = TKind::While { pat: tpat, init: Box::new(init_t), cond: Box::new(tcond), body: Box::new(tbody) };
        node(kind, state_ty, span, false)
    }

    /// Binds the state pattern and checks the condition and body of a while
    /// loop.
    fn while_body(
        &mut self,
        pat: &Pattern,
        cond: &Expr,
        body: &Expr,
        state: &Ty,
        init: &TExpr,
    ) -> (TPat, TExpr, TExpr) {
        let tpat = self.bind_pattern(pat, state, &[]);
        self.set_shown(&tpat, self.shown(init));
        let mut tcond = self.expr(cond);
        if !tcond.ty.has_error() && tcond.ty != Ty::BOOL {
            let msg = format!("the condition of a while loop must be a bool, found {}", self.shown(&tcond));
            tcond = self.fail(Code::ConditionNotBool, cond.span, msg);
        }
        let tbody = self.expr(body);
        (tpat, tcond, tbody)
    }

    /// Binds the state pattern and index and checks the body of a loop.
    fn loop_body(
        &mut self,
        pat: &Pattern,
        index: &Ident,
        body: &Expr,
        state: &Ty,
        init: &TExpr,
    ) -> (TPat, Option<LocalId>, TExpr) {
        let tpat = self.bind_pattern(pat, state, &[]);
        self.set_shown(&tpat, self.shown(init));
        let names = pattern_names(pat);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let tindex = self.index_binder(index, &names);
        let tbody = self.expr(body);
        (tpat, tindex, tbody)
    }
}

/// The names a pattern binds.
fn pattern_names(p: &Pattern) -> Vec<String> {
    match &p.kind {
        PatternKind::Var(n) => vec![n.clone()],
        PatternKind::Wildcard => vec![],
        PatternKind::Tuple(ps) => ps.iter().flat_map(pattern_names).collect(),
    }
}
