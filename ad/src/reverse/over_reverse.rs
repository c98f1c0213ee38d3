//! Reverse over reverse in one pass: reverse mode of a definition that
//! runs reverse mode inside (a `vjp` or `grad` operator in its body,
//! LANGUAGE.md section 10), at a constant factor of its cost.
//!
//! The operator's calls are kept as calls through differentiation and get a
//! rule of their own, as a primitive would. For `f: R^n -> R^m`, the
//! operator computes `P(x, u) = J(x)^T u` (with `f(x)` for `vjp`; `grad` is
//! `u = 1`). Its linearisation is
//!
//! ```text
//! dP = H_u(x) dx + J(x)^T du,    H_u = sum_k u_k * hess f_k(x)
//! ```
//!
//! and since every `hess f_k` is symmetric, so is `H_u`: the transpose,
//! given the cotangent `c` of `P` (shaped like `x`) and `c_y` of `f(x)`,
//! is
//!
//! ```text
//! ct_x += H_u(x) c + J(x)^T c_y,    ct_u += J(x) c
//! ```
//!
//! `H_u c` and `J c` are the tangents of one forward-over-reverse pass (the
//! jvp of the operator in the direction `c` of `x`: `forward.rs`, "Forward
//! over reverse"), and `J^T c_y` one more reverse pass of `f`. So the
//! backward pass runs, per call of the operator, one jvp of it (a constant
//! factor of `f`'s gradient) where differentiating by forward columns
//! (`by_columns.rs`) ran one pass per active input. This is the same linear
//! map that reverse mode of the operator's backward pass would compute
//! (its transposition), read through the symmetry of second derivatives
//! (Griewank and Walther, "Evaluating Derivatives", 2nd ed., ch. 5.3).
//!
//! The steps ([`StubCalls`]):
//!
//! 1. The primal is prepared with the operators' calls kept
//!    ([`passes::inline::inline_all_but`]).
//! 2. Forward mode (`forward.rs`) copies each such call and binds its
//!    tangents by one *linear call* of the operator's jvp in every f64
//!    argument: an ordinary statement of the jvp, which unzipping sees as
//!    one Delta binding.
//! 3. Unzipping transposes the linear call by the rule above
//!    (`rules/call.rs`): calls of the operator's jvp in the directions of
//!    `x` alone and of the operator itself.
//! 4. The vjp is inlined (calls and all) and optimised as usual. The
//!    inlined operators push and pop their own tape entries, balanced,
//!    inside the forward and backward passes.
//!
//! The many-row vjp runs the whole vjp once per row (a backward pass that
//! pushes cannot replay a rewound tape), from the same function.

use crate::forward::JvpOutput;
use crate::{passes, AdError};
use arrayad_ir::builder::Builder;
use arrayad_ir::{Atom, DiffOp, Expr, FuncId, Function, Program, Scalar, StmtKind, Type, VarId};
use std::collections::HashMap;

/// How to differentiate the calls of one `vjp`/`grad` operator (a stub of
/// `arrayad_ir::derivative`, expanded) of a definition `f`.
#[derive(Clone, Debug)]
pub(crate) struct StubRule {
    /// The number of params of `f` (the operator's first params, `x`);
    /// for a `vjp`, one cotangent param per result of `f` follows (`u`).
    pub n_x: usize,
    /// The operator's param types (`x` then `u`).
    pub params: Vec<Type>,
    /// The operator's result types: for a `vjp`, one per result of `f`
    /// (`y`), then one cotangent per param of `f`.
    pub results: Vec<Type>,
    /// The operator itself.
    pub op: FuncId,
    /// The jvp of the operator in every f64 param (the linear call: params
    /// = the operator's ++ one tangent per f64 param; results = the
    /// operator's ++ one tangent per f64 result).
    pub jvp_all: FuncId,
    /// The jvp of the operator in the f64 params of `x` only.
    pub jvp_x: FuncId,
    /// Its result types.
    pub jvp_x_results: Vec<Type>,
}

impl StubRule {
    /// The number of leading results that are `f`'s own (0 for `grad`).
    pub fn n_y(&self) -> usize {
        self.results.len() - self.n_x
    }
}

/// The rules of the linear calls, by the callee of the linear call.
pub(crate) type StubRules = HashMap<FuncId, StubRule>;

/// A definition prepared for reverse over reverse (module docs).
pub(crate) struct StubCalls {
    /// The program, with the jvps of the operators added.
    pub program: Program,
    /// The definition.
    pub id: FuncId,
    /// Its primal with the operators' calls kept.
    pub primal: Function,
    /// The rules, by the function of the linear call
    /// ([`StubRule::jvp_all`]).
    pub rules: StubRules,
    /// The rules, by the operator (for forward mode).
    pub by_op: StubRules,
}

/// Whether `f` is an expanded `vjp` or `grad` operator.
fn is_reverse_stub(f: &Function) -> bool {
    matches!(DiffOp::parse_stub(&f.name), Some((DiffOp::Vjp | DiffOp::Grad, _)))
}

impl StubCalls {
    /// Prepares definition `id` of `program` (whose derivative operators
    /// are expanded) for reverse over reverse.
    ///
    /// Errors: those of forward mode on an operator ([`AdError`]).
    pub fn new(program: &Program, id: FuncId) -> Result<StubCalls, AdError> {
        let keep = |f: FuncId| is_reverse_stub(program.func(f));
        // Not optimised: the passes expect call-free code. The vjp made
        // from it is, once inlined.
        let primal = passes::inline::inline_all_but(program, id, &keep);
        let used = arrayad_ir::visit::called_functions(&primal.body);
        let mut out = program.clone();
        let mut rules = StubRules::new();
        let mut by_op = StubRules::new();
        for op in used {
            let stub = passes::prepare(program, op);
            let Some((diff, of)) = DiffOp::parse_stub(&stub.name) else {
                return Err(AdError::new(format!("kept call of `{}`, not a derivative operator", stub.name)));
            };
            let n_x = program
                .find(of)
                .map(|d| program.func(d).params.len())
                .ok_or_else(|| AdError::new(format!("derivative operator `{}` of an unknown definition", stub.name)))?;
            let params = stub.param_types();
            let n_params = params.len();
            if n_x > n_params || (diff == DiffOp::Grad && n_x != n_params) {
                return Err(AdError::new(format!("derivative operator `{}`: unexpected params", stub.name)));
            }
            let mut jvp = |active: Vec<bool>, suffix: &str| -> Result<(FuncId, Vec<Type>), AdError> {
                let mut f = crate::linearize(&stub, &active)?.func;
                f.name = format!("{}~{suffix}", stub.name);
                passes::optimize(&mut f);
                let types = f.result_types.clone();
                out.funcs.push(f);
                Ok((FuncId(out.funcs.len() as u32 - 1), types))
            };
            let (jvp_all, _) = jvp(vec![true; n_params], "jvp")?;
            let (jvp_x, jvp_x_results) = jvp((0..n_params).map(|k| k < n_x).collect(), "jvp_x")?;
            let rule = StubRule { n_x, params, results: stub.result_types.clone(), op, jvp_all, jvp_x, jvp_x_results };
            if rule.results.len() < n_x {
                return Err(AdError::new(format!("derivative operator `{}`: unexpected results", stub.name)));
            }
            by_op.insert(op, rule.clone());
            rules.insert(jvp_all, rule);
        }
        Ok(StubCalls { program: out, id, primal, rules, by_op })
    }

    /// `f` (which may call the program's functions) with every call
    /// inlined, optimised.
    pub fn inline(&self, f: Function) -> Function {
        inline_into(self.program.clone(), f)
    }

    /// The many-row vjp ([`crate::Which::VjpRows`]) from the vjp `vjp`
    /// (calls not yet inlined, as the unzipping made it): the primal once,
    /// then the whole vjp once per cotangent row. Inlined, optimised.
    pub fn rows(&self, lin: &JvpOutput, vjp: Function, name: &str) -> Function {
        let mut p = self.program.clone();
        let n_results = lin.n_primal_results;
        let vjp_params = vjp.param_types();
        let vjp_results = vjp.result_types.clone();
        p.funcs.push(vjp);
        let vjp_id = FuncId(p.funcs.len() as u32 - 1);
        let primal = p.func(self.id);
        let prim_params = primal.param_types();
        let prim_results = primal.result_types.clone();
        let n_params = prim_params.len();
        let ct_types: Vec<Type> = vjp_params[n_params..].to_vec();
        let grad_types: Vec<Type> = vjp_results[n_results..].to_vec();
        let mut params_ty = prim_params.clone();
        params_ty.extend(ct_types.iter().map(|t| t.lift()));
        let results_ty: Vec<Type> = prim_results.iter().copied().chain(grad_types.iter().map(|t| t.lift())).collect();
        let (mut f, params) = Function::with_params(name, &params_ty, &results_ty);
        f.signature = primal.signature.clone();
        f.loc = primal.loc;
        let (xs, ct_rows) = params.split_at(n_params);
        let mut b = Builder::new(&mut f);
        b.loc = primal.loc;
        let ys: Vec<VarId> = prim_results.iter().map(|t| b.var("y", *t)).collect();
        let args: Vec<Atom> = xs.iter().map(|v| Atom::Var(*v)).collect();
        b.stmt(StmtKind::Let { vars: ys.clone(), expr: Expr::Call { func: self.id, args: args.clone() } });
        let mut results: Vec<Atom> = ys.iter().map(|v| Atom::Var(*v)).collect();
        let (count, rows) = super::assemble::row_count(b.func, ct_rows);
        for s in count {
            b.stmt(s);
        }
        if !grad_types.is_empty() {
            let row = b.var("row", Type::I64);
            b.begin_block();
            let mut call_args = args;
            for (c, t) in ct_rows.iter().zip(&ct_types) {
                let ct = b.let1("ct", Expr::Index { array: *c, indices: vec![Atom::Var(row)] }, *t);
                call_args.push(Atom::Var(ct));
            }
            let outs: Vec<VarId> = vjp_results.iter().map(|t| b.var("out", *t)).collect();
            b.stmt(StmtKind::Let { vars: outs.clone(), expr: Expr::Call { func: vjp_id, args: call_args } });
            let body = b.end_block(outs[n_results..].iter().map(|v| Atom::Var(*v)).collect());
            let stacks: Vec<VarId> = grad_types.iter().map(|t| b.var("grad_rows", t.lift())).collect();
            b.stmt(StmtKind::Let { vars: stacks.clone(), expr: Expr::Build { n: rows, index: row, body } });
            results.extend(stacks.iter().map(|v| Atom::Var(*v)));
        }
        let body = b.finish(results);
        f.body = body;
        inline_into(p, f)
    }
}

/// `f`, added to `program`, with every call inlined; optimised.
fn inline_into(mut program: Program, f: Function) -> Function {
    program.funcs.push(f);
    let id = FuncId(program.funcs.len() as u32 - 1);
    let mut g = passes::inline::inline_all(&program, id);
    passes::optimize(&mut g);
    g
}

/// Whether `t` has f64 elements.
pub(crate) fn is_f64(t: &Type) -> bool {
    t.elem == Scalar::F64
}

/// The vjp and the many-row vjp, each when asked for, with the loops
/// checkpointing left taped.
pub(crate) type VjpAndRows = (Option<Function>, Option<Function>, super::Taped);

/// The vjp (when `want_vjp`) and the many-row vjp (when `want_rows`) of
/// definition `id` of `program`, whose prepared primal runs reverse mode
/// inside, by the operators' rule (module docs), inlined and optimised;
/// with the loops checkpointing left taped. `None` when the definition
/// runs reverse mode inside other than through `vjp`/`grad` calls (a `jvp`
/// of a definition that contains one), which the caller then
/// differentiates by forward columns.
///
/// Errors: as [`crate::derive`].
pub(crate) fn vjp_and_rows(
    program: &Program,
    id: FuncId,
    active: &[bool],
    checkpoint: bool,
    (want_vjp, want_rows): (bool, bool),
    (vjp_name, rows_name): (&str, &str),
) -> Result<Option<VjpAndRows>, AdError> {
    let calls = StubCalls::new(program, id)?;
    if super::has_reverse_code(&calls.primal) {
        return Ok(None);
    }
    let mut lin = crate::forward::jvp_with_calls(&calls.primal, active, Some(&calls), None)?;
    passes::dce::dce_assuming_safe(&mut lin.func, &lin.linear);
    let (vjp, taped) = super::vjp_function(&lin, vjp_name, checkpoint)?;
    let rows = want_rows.then(|| calls.rows(&lin, vjp.clone(), rows_name));
    let vjp = want_vjp.then(|| calls.inline(vjp));
    Ok(Some((vjp, rows, taped)))
}
