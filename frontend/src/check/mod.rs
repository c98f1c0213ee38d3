//! Name resolution, type checking and size-variable analysis: the AST to
//! the typed AST ([`crate::tast`]).
//!
//! Every definition is checked, called or not. Errors do not stop the
//! checker: an ill-typed expression gets [`Ty::Error`], which is compatible
//! with everything, so each mistake is reported once and checking goes on.

mod builtins;
mod coerce;
mod control;
mod expr;
mod shown;
mod suggest;

pub(crate) use shown::Shown;

use crate::ast::{Def, DimKind, Program, TypeKind};
use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::span::{LineIndex, Span};
use crate::tast::{DimTarget, EntryStep, Local, LocalId, ShapeCheck, TDef, TPat};
use crate::types::{src_type, type_leaves, Ty};
use arrayad_ir::{DiffOp, Signature, SrcParam, SrcType};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// What the checker knows about a definition before checking bodies.
struct Sig {
    name: String,
    params: Vec<(String, Ty)>,
    result: Ty,
    /// The parameter types as written (with their sizes), for messages.
    params_src: Vec<(String, SrcType)>,
    /// The result type as written (with its sizes), for messages.
    result_src: SrcType,
}

/// The checked definitions and, for each, the definitions it calls (with
/// the span of each call site; a derivative operator calls the definition
/// it differentiates), and the derivative stubs the operators use
/// (`arrayad_ir::derivative`): stub `k` is called as function
/// `defs.len() + k`.
pub(crate) struct Checked {
    pub defs: Vec<TDef>,
    pub calls: Vec<Vec<(usize, Span)>>,
    pub stubs: Vec<Stub>,
}

/// A derivative stub: `op` applied to definition `of`.
#[derive(Clone, Debug)]
pub(crate) struct Stub {
    pub op: DiffOp,
    pub of: usize,
    /// The stub's source-level signature (module docs of
    /// `arrayad_ir::derivative`).
    pub signature: Signature,
}

impl Stub {
    /// The stub of `op` applied to a definition of signature `s`.
    fn new(op: DiffOp, of: usize, s: &Signature) -> Stub {
        let args = match s.params.as_slice() {
            [one] => one.ty.clone(),
            ps => SrcType::Tuple(ps.iter().map(|p| p.ty.clone()).collect()),
        };
        let (params, result) = match op {
            DiffOp::Jvp => {
                let mut ps = s.params.clone();
                ps.extend(s.params.iter().map(|p| SrcParam { name: format!("d{}", p.name), ty: p.ty.clone() }));
                (ps, SrcType::Tuple(vec![s.result.clone(), s.result.clone()]))
            }
            DiffOp::Vjp => {
                let mut ps = s.params.clone();
                ps.push(SrcParam { name: "ct".into(), ty: s.result.clone() });
                (ps, SrcType::Tuple(vec![s.result.clone(), args]))
            }
            DiffOp::Grad => (s.params.clone(), args),
        };
        Stub { op, of, signature: Signature { params, result } }
    }
}

/// Checks every definition of `program`. `broken` names definitions that
/// failed to parse: calls to them are not reported.
pub(crate) fn check_program(
    program: &Program,
    broken: &[String],
    lines: &LineIndex<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Checked {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut first_span: HashMap<String, Span> = HashMap::new();
    for (i, d) in program.defs.iter().enumerate() {
        let name = &d.name.name;
        if builtins::lookup(name).is_some() || DiffOp::from_keyword(name).is_some() {
            diags.push(Diagnostic::new(
                Code::BuiltinRedefined,
                d.name.span,
                format!("`{name}` is a builtin function and cannot be redefined"),
            ));
        } else if let Some(first) = first_span.get(name) {
            let (line, col) = lines.line_col(first.start);
            diags.push(
                Diagnostic::new(Code::DefinedTwice, d.name.span, format!("`{name}` is defined twice"))
                    .with_note(format!("the first definition of `{name}` is at line {line}, column {col}")),
            );
        } else {
            index.insert(name.clone(), i);
            first_span.insert(name.clone(), d.name.span);
        }
    }
    let sigs: Vec<Sig> = program
        .defs
        .iter()
        .map(|d| Sig {
            name: d.name.name.clone(),
            params: d.params.iter().map(|p| (p.name.name.clone(), Ty::from_src(&src_type(&p.ty)))).collect(),
            result: Ty::from_src(&src_type(&d.result)),
            params_src: d.params.iter().map(|p| (p.name.name.clone(), src_type(&p.ty))).collect(),
            result_src: src_type(&d.result),
        })
        .collect();
    let broken: HashSet<String> = broken.iter().cloned().collect();
    let globals = Globals { sigs: &sigs, index: &index, broken: &broken, stubs: RefCell::default() };
    let mut defs = Vec::new();
    let mut calls = Vec::new();
    for d in &program.defs {
        let (def, c) = check_def(&globals, d, diags);
        defs.push(def);
        calls.push(c);
    }
    let stubs = globals.stubs.take().into_iter().map(|(op, of)| Stub::new(op, of, &defs[of].signature)).collect();
    Checked { defs, calls, stubs }
}

/// Program-wide facts shared by the checks of all definitions.
struct Globals<'a> {
    sigs: &'a [Sig],
    index: &'a HashMap<String, usize>,
    broken: &'a HashSet<String>,
    /// The derivative stubs used so far: (operator, definition).
    stubs: RefCell<Vec<(DiffOp, usize)>>,
}

impl Globals<'_> {
    /// The function index of the stub of `op` applied to definition `of`
    /// (registered on first use).
    fn stub(&self, op: DiffOp, of: usize) -> usize {
        let mut stubs = self.stubs.borrow_mut();
        let k = match stubs.iter().position(|s| *s == (op, of)) {
            Some(k) => k,
            None => {
                stubs.push((op, of));
                stubs.len() - 1
            }
        };
        self.sigs.len() + k
    }
}

/// Names in scope: a stack of bindings with a map for lookup.
#[derive(Default)]
struct Scope {
    stack: Vec<String>,
    map: HashMap<String, Vec<LocalId>>,
}

impl Scope {
    fn push(&mut self, name: &str, id: LocalId) {
        self.stack.push(name.to_string());
        self.map.entry(name.to_string()).or_default().push(id);
    }
    fn mark(&self) -> usize {
        self.stack.len()
    }
    fn reset(&mut self, mark: usize) {
        while self.stack.len() > mark {
            if let Some(name) = self.stack.pop() {
                if let Some(ids) = self.map.get_mut(&name) {
                    ids.pop();
                }
            }
        }
    }
    fn get(&self, name: &str) -> Option<LocalId> {
        self.map.get(name).and_then(|ids| ids.last().copied())
    }
    /// The names in scope, in no particular order.
    fn names(&self) -> impl Iterator<Item = &str> {
        self.map.iter().filter(|(_, ids)| !ids.is_empty()).map(|(name, _)| name.as_str())
    }
}

/// How many times per definition a `loop` whose initial state is an
/// integer literal is re-checked with an `f64` state (bounds the work on
/// nested loops).
const RETRY_BUDGET: usize = 32;

/// A suggestion for a size variable `v` of the result type that no
/// parameter type binds: write it into the first array parameter's type.
fn size_variable_hint(def: &Def, v: &str) -> Option<String> {
    let p = def.params.iter().find(|p| matches!(p.ty.kind, TypeKind::Array { .. }))?;
    let SrcType::Array { elem, mut dims } = src_type(&p.ty) else { return None };
    if matches!(&dims[0], arrayad_ir::SrcDim::Expr(_)) {
        return None;
    }
    let first = std::mem::replace(&mut dims[0], arrayad_ir::SrcDim::Var(v.to_string()));
    let example = SrcType::Array { elem, dims };
    Some(format!(
        "size variables come from the arguments: if `{v}` is the length of `{}` (now `{first}`), write `{}: {example}`",
        p.name.name, p.name.name
    ))
}

/// The checker of one definition body.
struct Fx<'g, 'd> {
    g: &'g Globals<'g>,
    diags: &'d mut Vec<Diagnostic>,
    locals: Vec<Local>,
    scope: Scope,
    calls: Vec<(usize, Span)>,
    retries: usize,
}

impl Fx<'_, '_> {
    fn new_local(&mut self, name: &str, ty: Ty) -> LocalId {
        let id = LocalId(self.locals.len());
        self.locals.push(Local { name: name.to_string(), ty, int_literal: false, shown: None });
        id
    }

    fn bind_local(&mut self, name: &str, ty: Ty) -> LocalId {
        let id = self.new_local(name, ty);
        if name != "_" {
            self.scope.push(name, id);
        }
        id
    }

    fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }
}

/// A size expression with its variables resolved by `lookup`, or the
/// first variable it does not know.
pub(super) fn resolve_size(
    e: &arrayad_ir::SizeExpr,
    lookup: &dyn Fn(&str) -> Option<LocalId>,
) -> Result<crate::tast::TSize, String> {
    use crate::tast::TSize;
    Ok(match e {
        arrayad_ir::SizeExpr::Var(v) => TSize::Local(lookup(v).ok_or_else(|| v.clone())?),
        arrayad_ir::SizeExpr::Lit(n) => TSize::Lit(*n),
        arrayad_ir::SizeExpr::Bin(op, a, b) => {
            TSize::Bin(*op, Box::new(resolve_size(a, lookup)?), Box::new(resolve_size(b, lookup)?))
        }
    })
}

/// The expression that gives a body its value: the body of a `let` chain.
fn result_expr(e: &crate::ast::Expr) -> &crate::ast::Expr {
    match &e.kind {
        crate::ast::ExprKind::Let { body, .. } => result_expr(body),
        _ => e,
    }
}

/// Describes a parameter leaf for messages: `x`, or `p.1` inside a tuple.
fn leaf_label(name: &str, path: &[usize]) -> String {
    let mut s = name.to_string();
    for i in path {
        s.push_str(&format!(".{i}"));
    }
    s
}

fn check_def(g: &Globals<'_>, def: &Def, diags: &mut Vec<Diagnostic>) -> (TDef, Vec<(usize, Span)>) {
    let mut fx = Fx { g, diags, locals: Vec::new(), scope: Scope::default(), calls: Vec::new(), retries: RETRY_BUDGET };

    // Size variables, in order of first appearance, and the entry checks
    // (located at the definition: a call with mismatched sizes fails there).
    let mut sizes: Vec<(String, LocalId)> = Vec::new();
    let mut origin: Vec<String> = Vec::new();
    let mut entry = Vec::new();
    let mut deferred = Vec::new();
    let mut leaf = 0usize;
    for p in &def.params {
        for (path, te) in type_leaves(&p.ty) {
            if let TypeKind::Array { dims, .. } = &te.kind {
                let label = leaf_label(&p.name.name, &path);
                for (axis, d) in dims.iter().enumerate() {
                    let axis = crate::types::rank_u8(axis);
                    match &d.kind {
                        DimKind::Var(v) => match sizes.iter().position(|(n, _)| n == v) {
                            Some(k) => entry.push(EntryStep::Check(ShapeCheck {
                                leaf,
                                axis,
                                target: DimTarget::Local(sizes[k].1),
                                what: format!("argument `{label}` axis {axis} must equal {v} ({})", origin[k]),
                                span: def.keyword,
                            })),
                            None => {
                                let local = fx.new_local(v, Ty::I64);
                                sizes.push((v.clone(), local));
                                origin.push(format!("axis {axis} of argument `{label}`"));
                                entry.push(EntryStep::Bind { leaf, axis, local, span: def.keyword });
                            }
                        },
                        DimKind::Lit(n) => entry.push(EntryStep::Check(ShapeCheck {
                            leaf,
                            axis,
                            target: DimTarget::Lit(*n),
                            what: format!("argument `{label}` axis {axis} must equal {n}"),
                            span: def.keyword,
                        })),
                        // Checked once every size variable is bound.
                        DimKind::Expr(e) => deferred.push((leaf, axis, e, d.span, label.clone())),
                    }
                }
            }
            leaf += 1;
        }
    }
    for (leaf, axis, e, span, label) in deferred {
        match resolve_size(e, &|v| sizes.iter().find(|(n, _)| n == v).map(|(_, l)| *l)) {
            Ok(t) => entry.push(EntryStep::Check(ShapeCheck {
                leaf,
                axis,
                target: DimTarget::Expr(Box::new(t)),
                what: format!("argument `{label}` axis {axis} must equal {e}"),
                span: def.keyword,
            })),
            Err(v) => fx.report(
                Diagnostic::new(
                    Code::SizeOnlyInExpressions,
                    span,
                    format!("size variable `{v}` occurs only inside size expressions"),
                )
                .with_note(format!(
                    "the arguments determine a size variable where it is a whole dimension: give `{v}` a \
                         dimension of its own in some parameter type (e.g. `[{v}]`)"
                )),
            ),
        }
    }
    for (name, local) in &sizes {
        fx.scope.push(name, *local);
    }

    // Parameters.
    let mut params = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for p in &def.params {
        let name = p.name.name.as_str();
        if !seen.insert(name) {
            fx.report(Diagnostic::new(Code::BoundTwice, p.name.span, format!("duplicate parameter `{name}`")));
        } else if sizes.iter().any(|(n, _)| n == name) {
            fx.report(
                Diagnostic::new(
                    Code::ParamIsSize,
                    p.name.span,
                    format!("`{name}` is both a parameter and a size variable"),
                )
                .with_note(format!("size variables are bound by the array types; drop the parameter `{name}`")),
            );
        }
        let declared = src_type(&p.ty);
        let local = fx.bind_local(name, Ty::from_src(&declared));
        fx.set_shown(&TPat::Bind(local), Shown::of_src(&declared));
        params.push(local);
    }

    // The result type: its size variables must come from the parameters.
    let result = Ty::from_src(&src_type(&def.result));
    let mut result_checks = Vec::new();
    let tuple_result = matches!(def.result.kind, TypeKind::Tuple(_));
    for (leaf, (path, te)) in type_leaves(&def.result).into_iter().enumerate() {
        if let TypeKind::Array { dims, .. } = &te.kind {
            let label = if tuple_result { leaf_label("result", &path) } else { "result".to_string() };
            for (axis, d) in dims.iter().enumerate() {
                let axis = crate::types::rank_u8(axis);
                let (target, shown) = match &d.kind {
                    DimKind::Var(v) => match sizes.iter().find(|(n, _)| n == v) {
                        Some(&(_, local)) => (DimTarget::Local(local), v.clone()),
                        None => {
                            let mut diag = Diagnostic::new(
                                Code::ResultSizeUnbound,
                                d.span,
                                format!("size variable `{v}` of the result type does not occur in any parameter type"),
                            );
                            if def.params.iter().any(|p| &p.name.name == v) {
                                diag = diag.with_note(format!(
                                    "`{v}` is a parameter, not a size variable: sizes are bound by array parameter types"
                                ));
                            } else if let Some(note) = size_variable_hint(def, v) {
                                diag = diag.with_note(note);
                            }
                            fx.report(diag);
                            continue;
                        }
                    },
                    DimKind::Lit(n) => (DimTarget::Lit(*n), n.to_string()),
                    DimKind::Expr(e) => {
                        match resolve_size(e, &|v| sizes.iter().find(|(n, _)| n == v).map(|(_, l)| *l)) {
                            Ok(t) => (DimTarget::Expr(Box::new(t)), e.to_string()),
                            Err(v) => {
                                fx.report(Diagnostic::new(
                                    Code::ResultSizeUnbound,
                                    d.span,
                                    format!(
                                        "size variable `{v}` of the result type does not occur in any parameter type"
                                    ),
                                ));
                                continue;
                            }
                        }
                    }
                };
                result_checks.push(ShapeCheck {
                    leaf,
                    axis,
                    target,
                    what: format!("{label} axis {axis} must equal {shown}"),
                    span: d.span,
                });
            }
        }
    }

    // The body.
    let mut body = fx.expr(&def.body);
    if coerce::can_coerce(&body, &result) {
        coerce::coerce(&mut body, &result);
    } else {
        let msg = format!(
            "the body of `{}` has type {} but the declared result type is {}",
            def.name.name,
            fx.shown(&body),
            src_type(&def.result)
        );
        let mut d = Diagnostic::new(Code::ResultType, result_expr(&def.body).span, msg);
        if let Some(note) = coerce::conversion_hint(&body.ty, &result) {
            d = d.with_note(note);
        }
        fx.report(d);
    }

    let signature = Signature {
        params: def.params.iter().map(|p| SrcParam { name: p.name.name.clone(), ty: src_type(&p.ty) }).collect(),
        result: src_type(&def.result),
    };
    let calls = std::mem::take(&mut fx.calls);
    let tdef = TDef {
        name: def.name.name.clone(),
        params,
        entry,
        body,
        result,
        result_checks,
        locals: fx.locals,
        signature,
        keyword: def.keyword,
    };
    (tdef, calls)
}
