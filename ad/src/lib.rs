//! Automatic differentiation of arrayad IR.
//!
//! - Forward mode ([`jvp`]): dual numbers as an IR-to-IR transformation
//!   (Krawiec et al., POPL 2022, Fig. 3).
//! - Reverse mode ([`vjp`], and [`vjp_rows`] for many cotangents after one
//!   forward pass): the monadic Delta translation of Krawiec et
//!   al. (Figs. 9-11, 15), compiled: the jvp's linear statements are the
//!   Delta bindings; they are unzipped from the primal statements into a
//!   forward pass that tapes only the residuals they need and a backward
//!   pass that is `eval` specialised to the static Delta program
//!   (DESIGN.md; Smeding's thesis, ch. 4.6).
//! - [`oracle`]: the runtime versions (dual numbers and a literal Delta
//!   store with `deltaLet`/`eval`), used as test oracles.
//!
//! Every entry point inlines calls first and optimises the result
//! ([`prepare`]); the transformation runs once per definition at compile
//! time.

mod delta_print;
mod forward;
mod nested;
pub mod oracle;
mod reverse;
mod rules;

pub use delta_print::print_delta;
pub use forward::JvpOutput;
pub use nested::expand_derivatives;

use arrayad_ir::passes;
use arrayad_ir::{FuncId, Function, Program, Scalar, Signature};

/// An error of the AD transformation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdError {
    /// An internal invariant of the IR it was given did not hold (user
    /// programs that type-check never cause one).
    #[error("differentiation failed: {0}")]
    Internal(String),
    /// A derivative the transformation does not compute (the message says
    /// which, and what to use instead).
    #[error("{0}")]
    Unsupported(String),
    /// The definition is too large or nested too deeply with its calls
    /// inlined (`FILE:LINE:COL: ...` of the call crossing the limit;
    /// [`check_size`]).
    #[error("{0}")]
    TooLarge(String),
}

impl AdError {
    pub(crate) fn new(msg: impl Into<String>) -> AdError {
        AdError::Internal(msg.into())
    }
}

/// Checks that `func` with its calls inlined stays within the compiler's
/// limits ([`passes::inline::check_inlining`]): [`AdError::TooLarge`]
/// names the call that crosses one. [`derive`], [`derive_with`], [`jvp`],
/// [`linearize`] and [`vjp`] check first; call it before [`prepare`].
pub fn check_size(program: &Program, func: FuncId) -> Result<(), AdError> {
    passes::inline::check_inlining(program, func).map_err(|e| AdError::TooLarge(e.located(program)))
}

/// [`check_size`] for each of `funcs`, and that together they stay within
/// the limit of a shared library
/// ([`passes::inline::InlineCosts::check_all`]), in time linear in the size
/// of the program.
pub fn check_sizes(program: &Program, funcs: &[FuncId]) -> Result<(), AdError> {
    passes::inline::InlineCosts::new(program, funcs).check_all(funcs).map_err(|e| AdError::TooLarge(e.located(program)))
}

/// The primal of `func` ready for code generation: every call inlined,
/// then simplified, fused, CSE'd and DCE'd.
pub fn prepare(program: &Program, func: FuncId) -> Function {
    let mut f = passes::inline::inline_all(program, func);
    passes::optimize(&mut f);
    f
}

/// Forward mode: the jvp function of `func`.
///
/// `active[k]` tells whether IR param `k` (flattened leaves) is
/// differentiated. The result has params = primal params ++ one tangent
/// (same type) per active param with f64 elements, and results = primal
/// results ++ one tangent per f64 result.
pub fn jvp(program: &Program, func: FuncId, active: &[bool]) -> Result<Function, AdError> {
    check_size(program, func)?;
    let prim = prepare(program, func);
    let j = forward::jvp_function(&prim, active)?;
    let mut out = j.func;
    // Tangent statements never fail (each mirrors a primal one that ran
    // first): those whose values are unused go, whatever the analysis of
    // run-time errors could prove.
    passes::dce::dce_assuming_safe(&mut out, &j.linear);
    passes::optimize(&mut out);
    Ok(out)
}

/// The unoptimised jvp with its linear variables marked: the Delta
/// program of the translation (for `arrayad emit --stage delta` and for
/// reverse mode).
pub fn linearize(program: &Program, func: FuncId, active: &[bool]) -> Result<JvpOutput, AdError> {
    check_size(program, func)?;
    let prim = prepare(program, func);
    let mut j = forward::jvp_function(&prim, active)?;
    passes::dce::dce_assuming_safe(&mut j.func, &j.linear);
    Ok(j)
}

/// Reverse mode: the vjp function of `func`.
///
/// `active` as for [`jvp`]. The result has params = primal params ++ one
/// cotangent (same type) per f64 result, and results = primal results ++
/// one cotangent per active param with f64 elements. Cotangents of array
/// params are fresh arrays; the caller's cotangent inputs are only read.
pub fn vjp(program: &Program, func: FuncId, active: &[bool]) -> Result<Function, AdError> {
    Ok(derive(program, func, active)?.vjp)
}

/// Reverse mode for many cotangents at once (dense Jacobians): the
/// `NAME_vjp_rows` function of `func`, one forward pass and then one
/// backward pass per cotangent row.
///
/// `active` as for [`jvp`]. The result has params = primal params ++ for
/// each f64 result a stack of `R` cotangents (the result's type with one
/// more leading axis: `[R]f64` for an f64 result, `[R][n]f64` for an
/// `[n]f64` one; every stack must have the same `R`, else a size mismatch),
/// and results = primal results ++ for each active param with f64 elements
/// the stack of its `R` cotangents (row `r` is what [`vjp`] returns for
/// cotangent row `r`). The forward pass runs once; its tape is replayed
/// for every row ([`arrayad_ir::Expr::TapeMark`],
/// [`arrayad_ir::StmtKind::TapeRewind`]). With no f64 result, `R` is 0.
pub fn vjp_rows(program: &Program, func: FuncId, active: &[bool]) -> Result<Function, AdError> {
    Ok(derive(program, func, active)?.vjp_rows)
}

/// Every compiled form of one definition, from one run of the pipeline:
/// the primal prepared once ([`prepare`]), forward mode run once, and
/// both reverse-mode functions unzipped from that one linearisation.
#[derive(Clone, Debug)]
pub struct Derivatives {
    /// The optimised, inlined primal ([`prepare`]).
    pub primal: Function,
    /// Forward mode ([`jvp`]).
    pub jvp: Function,
    /// Reverse mode ([`vjp`]).
    pub vjp: Function,
    /// Reverse mode for many cotangent rows ([`vjp_rows`]).
    pub vjp_rows: Function,
}

/// How reverse mode is compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AdOptions {
    /// Checkpoint every counted loop: the gradient of a loop of `n`
    /// iterations keeps O(sqrt(n)) saved states and one segment of
    /// residuals instead of the residuals of all `n` iterations, for one
    /// more run of the loop body (`reverse/checkpoint.rs`). Array states of
    /// a checkpointed loop must keep their shape.
    pub checkpoint: bool,
}

/// The primal, jvp, vjp and many-row vjp of `func` (see the functions of
/// the same names), preparing the primal and running forward mode once.
pub fn derive(program: &Program, func: FuncId, active: &[bool]) -> Result<Derivatives, AdError> {
    check_size(program, func)?;
    derive_prepared(prepare(program, func), active, AdOptions::default())
}

/// [`derive`] with options.
pub fn derive_with(program: &Program, func: FuncId, active: &[bool], opts: AdOptions) -> Result<Derivatives, AdError> {
    check_size(program, func)?;
    derive_prepared(prepare(program, func), active, opts)
}

/// One of the derivatives of [`derive_prepared`], for a caller that needs
/// only that one (`arrayad run --grad` needs the vjp alone): the same
/// function, without the work of the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Which {
    /// Forward mode ([`Derivatives::jvp`]).
    Jvp,
    /// Reverse mode ([`Derivatives::vjp`]).
    Vjp,
    /// Reverse mode for many cotangent rows ([`Derivatives::vjp_rows`]).
    VjpRows,
}

/// The derivative `which` of a primal already [`prepare`]d, equal to that
/// field of [`derive_prepared`]'s result.
pub fn derive_one(primal: &Function, active: &[bool], opts: AdOptions, which: Which) -> Result<Function, AdError> {
    let mut lin = forward::jvp_function(primal, active)?;
    passes::dce::dce_assuming_safe(&mut lin.func, &lin.linear);
    let name = &primal.name;
    let by_columns = reverse::has_reverse_code(primal);
    let mut f = match which {
        Which::Jvp => lin.func,
        Which::Vjp if by_columns => reverse::by_columns::vjp_function(&lin, primal, &format!("{name}_vjp")),
        Which::Vjp => reverse::vjp_function(&lin, &format!("{name}_vjp"), opts.checkpoint)?,
        Which::VjpRows if by_columns => {
            reverse::by_columns::vjp_rows_function(&lin, primal, &format!("{name}_vjp_rows"))
        }
        Which::VjpRows => reverse::vjp_rows_function(&lin, &format!("{name}_vjp_rows"), opts.checkpoint)?,
    };
    passes::optimize(&mut f);
    Ok(f)
}

/// [`derive`] from a primal already [`prepare`]d.
pub fn derive_prepared(primal: Function, active: &[bool], opts: AdOptions) -> Result<Derivatives, AdError> {
    let mut lin = forward::jvp_function(&primal, active)?;
    passes::dce::dce_assuming_safe(&mut lin.func, &lin.linear);
    let mut jvp = lin.func.clone();
    passes::optimize(&mut jvp);
    let name = &primal.name;
    let (vjp_name, rows_name) = (format!("{name}_vjp"), format!("{name}_vjp_rows"));
    // Reverse mode of reverse-mode code: by forward columns.
    let (mut vjp, mut vjp_rows) = if reverse::has_reverse_code(&primal) {
        reverse::by_columns::vjp_and_rows(&lin, &primal, &vjp_name, &rows_name)
    } else {
        reverse::vjp_and_rows(&lin, &vjp_name, &rows_name, opts.checkpoint)?
    };
    passes::optimize(&mut vjp);
    passes::optimize(&mut vjp_rows);
    Ok(Derivatives { primal, jvp, vjp, vjp_rows })
}

/// A loop that checkpointing ([`AdOptions::checkpoint`]) leaves taped:
/// every iteration's residuals stay on the tape until the backward pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uncheckpointed {
    /// The loop's source location.
    pub loc: arrayad_ir::Loc,
    /// Why it is not checkpointed, as a sentence for a warning.
    pub reason: String,
}

/// The loops of the vjp of a [`prepare`]d primal that checkpointing leaves
/// taped (while loops, loops without a primal state, loops with integer or
/// boolean array states), in the order the unzipping meets them. A function
/// that runs reverse mode inside is differentiated by forward columns,
/// without a tape: none.
///
/// Costs one linearisation and one unzipping; meant for warnings.
///
/// Errors: as [`derive_prepared`].
pub fn uncheckpointed_loops(primal: &Function, active: &[bool]) -> Result<Vec<Uncheckpointed>, AdError> {
    if reverse::has_reverse_code(primal) {
        return Ok(Vec::new());
    }
    let mut lin = forward::jvp_function(primal, active)?;
    passes::dce::dce_assuming_safe(&mut lin.func, &lin.linear);
    reverse::uncheckpointed_loops(&lin)
}

/// Which IR params (flattened leaves) of a definition are active, given the
/// `--wrt` names (`None`: every param with f64 parts). A leaf is active
/// when its source param is listed and its elements are f64.
pub fn active_leaves(sig: &Signature, wrt: Option<&[String]>) -> Vec<bool> {
    let mut out = Vec::new();
    for p in &sig.params {
        let listed = wrt.is_none_or(|w| w.iter().any(|n| n == &p.name));
        for t in p.ty.leaves() {
            out.push(listed && t.elem == Scalar::F64);
        }
    }
    out
}

/// Which source params of a definition are active (see [`active_leaves`]).
pub fn active_params(sig: &Signature, wrt: Option<&[String]>) -> Vec<bool> {
    sig.params
        .iter()
        .map(|p| {
            wrt.is_none_or(|w| w.iter().any(|n| n == &p.name)) && p.ty.leaves().iter().any(|t| t.elem == Scalar::F64)
        })
        .collect()
}

/// The Hessian-vector product of a definition with one f64 result, by
/// forward over reverse (Pearlmutter 1994): forward mode ([`jvp`]'s
/// transformation, which reads reverse-mode code: `forward.rs`) of the
/// gradient, i.e. of its `vjp` (of the prepared `primal`, as
/// [`Derivatives::vjp`]) with cotangent 1.
///
/// `active` as for [`jvp`]. The result has params = primal params ++ one
/// tangent `t` per active param with f64 elements, and results = the value
/// ++ one gradient entry per active param ++ one entry of `H t` per active
/// param (each shaped like its param).
///
/// Errors: [`AdError::Unsupported`] when the result is not one f64.
pub fn hvp(primal: &Function, vjp: &Function, active: &[bool]) -> Result<Function, AdError> {
    use arrayad_ir::{Atom, Expr, Stmt, StmtKind, Type};
    if primal.result_types != [Type::F64] {
        return Err(AdError::Unsupported(format!(
            "the Hessian needs a function whose result is one f64, but `{}` returns {}",
            primal.name, primal.signature.result
        )));
    }
    // The gradient function: the vjp with its cotangent parameter bound to 1.
    let mut g = vjp.clone();
    let ct = g.params.pop().ok_or_else(|| AdError::new("vjp without a cotangent parameter"))?;
    let loc = g.loc;
    g.body.stmts.insert(0, Stmt { kind: StmtKind::Let { vars: vec![ct], expr: Expr::Atom(Atom::F64(1.0)) }, loc });
    g.name = format!("{}_hvp", primal.name);
    let n_grads = g.result_types.len() - 1;
    let j = forward::jvp_function(&g, active)?;
    let mut f = j.func;
    passes::dce::dce_assuming_safe(&mut f, &j.linear);
    // Results: value, gradient, d value, d gradient: drop d value.
    let keep = 1 + n_grads;
    if f.body.results.len() != 2 * keep {
        return Err(AdError::new(format!("hvp of `{}`: unexpected results", primal.name)));
    }
    f.body.results.remove(keep);
    f.result_types.remove(keep);
    passes::optimize(&mut f);
    Ok(f)
}
