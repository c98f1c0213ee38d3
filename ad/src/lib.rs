//! Automatic differentiation of arrayad IR.
//!
//! - Forward mode ([`Which::Jvp`]): dual numbers as an IR-to-IR
//!   transformation (Krawiec et al., POPL 2022, Fig. 3).
//! - Reverse mode ([`Which::Vjp`], and [`Which::VjpRows`] for many
//!   cotangents after one forward pass): the monadic Delta translation of Krawiec et
//!   al. (Figs. 9-11, 15), compiled: the jvp's linear statements are the
//!   Delta bindings; they are unzipped from the primal statements into a
//!   forward pass that tapes only the residuals they need and a backward
//!   pass that is `eval` specialised to the static Delta program
//!   (DESIGN.md; Smeding's thesis, ch. 4.6).
//! - [`oracle`]: the runtime versions (dual numbers and a literal Delta
//!   store with `deltaLet`/`eval`), used as test oracles.
//!
//! Every entry point takes a prepared primal: calls inlined, optimised
//! ([`arrayad_ir::passes::prepare`]); [`expand_derivatives`] first turns
//! the derivative operators of a program (`grad`, `vjp`, `jvp` inside
//! definitions) into definitions of their own. The transformation runs
//! once per definition at compile time (the pipeline driver of the
//! `arrayad` crate orders the steps and caches their results).

mod delta_print;
mod forward;
mod lanes;
mod nested;
pub mod oracle;
mod reverse;
mod rules;

pub use delta_print::print_delta;
pub use forward::JvpOutput;
pub use lanes::{jvp_lane_count, jvp_lanes, JVP_LANES, MAX_JVP_LANES};
pub use nested::expand_derivatives;

use arrayad_ir::passes;
use arrayad_ir::{Expr, FuncId, Function, Program, Scalar, Signature, StmtKind};

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
    /// `arrayad_ir::passes::inline::check_inlining`).
    #[error("{0}")]
    TooLarge(String),
}

impl AdError {
    pub(crate) fn new(msg: impl Into<String>) -> AdError {
        AdError::Internal(msg.into())
    }
}

/// Checks that `func` with its calls inlined stays within the compiler's
/// limits ([`passes::inline::check_inlining`]), as [`AdError::TooLarge`].
fn check_size(program: &Program, func: FuncId) -> Result<(), AdError> {
    passes::inline::check_inlining(program, func).map_err(|e| AdError::TooLarge(e.located(program)))
}

/// The linearisation of a prepared primal ([`passes::prepare`]): its jvp,
/// unoptimised, with the linear variables marked. This is the Delta
/// program of the translation (Krawiec et al., Fig. 10: the linear
/// statements are the Delta bindings), which reverse mode unzips; `arrayad
/// emit --stage delta` prints it.
///
/// `active[k]` tells whether IR param `k` (flattened leaves) is
/// differentiated.
///
/// Errors: [`AdError::Internal`] for IR that breaks an invariant.
pub fn linearize(primal: &Function, active: &[bool]) -> Result<JvpOutput, AdError> {
    linearize_keeping(primal, active, None)
}

/// [`linearize`] of a primal whose calls of the definitions of a program
/// of `kept_calls` functions are kept ([`arrayad_ir::KeptKind`]): each
/// such call's tangents are one call of the callee's jvp, transposed to one
/// call of its vjp.
fn linearize_keeping(primal: &Function, active: &[bool], kept_calls: Option<usize>) -> Result<JvpOutput, AdError> {
    let mut lin = forward::jvp_with_calls(primal, active, None, kept_calls)?;
    if let Some(n) = kept_calls {
        // A linear call of a kept definition's jvp (or of its vjp's jvp)
        // never fails either (the call it mirrors ran first): its unused
        // primal results are safe.
        let mut safe = lin.linear.clone();
        arrayad_ir::visit::for_each_block(&lin.func.body, &mut |b| {
            for s in &b.stmts {
                if let StmtKind::Let { vars, expr: Expr::Call { func, .. } } = &s.kind {
                    let jvp = [arrayad_ir::KeptKind::Jvp, arrayad_ir::KeptKind::VjpJvp];
                    if arrayad_ir::KeptKind::of_callee(n, *func).is_some_and(|(_, k)| jvp.contains(&k)) {
                        safe.extend(vars.iter().copied());
                    }
                }
            }
        });
        passes::dce::dce_assuming_safe(&mut lin.func, &safe);
        return Ok(lin);
    }
    // Tangent statements never fail (each mirrors a primal one that ran
    // first): those whose values are unused go, whatever the analysis of
    // run-time errors could prove.
    passes::dce::dce_assuming_safe(&mut lin.func, &lin.linear);
    Ok(lin)
}

/// A derivative of a definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Which {
    /// Forward mode: params = primal params ++ one tangent (same type) per
    /// active param with f64 elements; results = primal results ++ one
    /// tangent per f64 result.
    Jvp,
    /// Reverse mode: params = primal params ++ one cotangent (same type)
    /// per f64 result; results = primal results ++ one cotangent per
    /// active param with f64 elements. Cotangents of array params are
    /// fresh arrays; the caller's cotangent inputs are only read.
    Vjp,
    /// Reverse mode for many cotangents at once (dense Jacobians), one
    /// forward pass and then one backward pass per cotangent row (never
    /// checkpointed, [`AdOptions::checkpoint`]: the rows replay the
    /// forward pass's tape): params =
    /// primal params ++ for each f64 result a stack of `R` cotangents (the
    /// result's type with one more leading axis; every stack must have the
    /// same `R`, else a size mismatch); results = primal results ++ for
    /// each active param with f64 elements the stack of its `R`
    /// cotangents (row `r` is what [`Which::Vjp`] returns for cotangent row
    /// `r`). The forward pass runs once; its tape is replayed for every row
    /// ([`arrayad_ir::Expr::TapeMark`], [`arrayad_ir::StmtKind::TapeRewind`]).
    /// With no f64 result, `R` is 0.
    VjpRows,
    /// Vector forward mode ([`jvp_lanes`]): one pass computes the primal
    /// once and the tangents of [`jvp_lane_count`] directions (without
    /// `within`, [`JVP_LANES`]): params = primal
    /// params ++ for each lane, one tangent per active param with f64
    /// elements; results = primal results ++ for each lane, one tangent per
    /// f64 result (lane-major). Lane `l`'s tangents are bitwise what
    /// [`Which::Jvp`] returns for lane `l`'s directions. Only for a primal
    /// without reverse mode inside ([`has_vector_forward`]).
    JvpLanes,
    /// The Hessian-vector product ([`hvp`]) of a primal whose result is
    /// one f64, from the vjp (which is derived for it, but returned only
    /// when [`Which::Vjp`] is asked for too).
    Hvp,
}

/// True when the prepared primal has a vector forward mode
/// ([`Which::JvpLanes`]): it runs no reverse mode inside.
pub fn has_vector_forward(primal: &Function) -> bool {
    !reverse::has_reverse_code(primal)
}

/// True when the vector jvp of `primal` ([`Which::JvpLanes`]) is worth
/// compiling for the IR params marked in `active`: false when they are at
/// most one scalar. Its forward Jacobian then has one column, which one
/// jvp computes (the code of several lanes would do their tangent
/// arithmetic several times, and is the largest function of a long
/// straight-line definition), and `jvp_many` calls the jvp per direction:
/// it runs the primal once per direction rather than once per pass, a cost
/// this rarely used entry pays so that no build does.
pub fn lanes_pay(primal: &Function, active: &[bool]) -> bool {
    let mut scalars = 0;
    for (p, _) in primal.params.iter().zip(active).filter(|(_, a)| **a) {
        if primal.ty(*p).rank > 0 {
            return true;
        }
        scalars += 1;
    }
    scalars > 1
}

/// The derivatives [`derive()`] was asked for, each optimised and named
/// `NAME_jvp`, `NAME_vjp`, `NAME_vjp_rows` after the primal `NAME`.
#[derive(Clone, Debug, Default)]
pub struct Derivatives {
    /// Forward mode ([`Which::Jvp`]).
    pub jvp: Option<Function>,
    /// Reverse mode ([`Which::Vjp`]).
    pub vjp: Option<Function>,
    /// Reverse mode for many cotangent rows ([`Which::VjpRows`]).
    pub vjp_rows: Option<Function>,
    /// Vector forward mode ([`Which::JvpLanes`]).
    pub jvp_lanes: Option<Function>,
    /// The Hessian-vector product ([`Which::Hvp`]).
    pub hvp: Option<Function>,
    /// With [`AdOptions::checkpoint`]: the loops reverse mode left taped,
    /// as [`uncheckpointed_loops`] gives them (none when no reverse mode
    /// was asked for, or when it runs by forward columns).
    pub uncheckpointed: Vec<Uncheckpointed>,
}

impl Derivatives {
    /// Sets the derivative `which`.
    pub fn set(&mut self, which: Which, f: Function) {
        let slot = match which {
            Which::Jvp => &mut self.jvp,
            Which::Vjp => &mut self.vjp,
            Which::VjpRows => &mut self.vjp_rows,
            Which::JvpLanes => &mut self.jvp_lanes,
            Which::Hvp => &mut self.hvp,
        };
        *slot = Some(f);
    }

    /// The derivative `which`, taken out, if it was asked for.
    pub fn take(&mut self, which: Which) -> Option<Function> {
        match which {
            Which::Jvp => self.jvp.take(),
            Which::Vjp => self.vjp.take(),
            Which::VjpRows => self.vjp_rows.take(),
            Which::JvpLanes => self.jvp_lanes.take(),
            Which::Hvp => self.hvp.take(),
        }
    }
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

/// The derivatives `wanted` of a prepared primal ([`passes::prepare`]),
/// from one linearisation ([`linearize`]); the vjp and the many-row vjp,
/// when both are wanted, from one unzipping. A primal that runs reverse
/// mode inside (a `grad` or `vjp` in its body) is differentiated in
/// reverse with those operators' calls kept and given their own rule
/// (`reverse/over_reverse.rs`), which needs `within`, the program and
/// definition the primal was prepared from; without it, or for other
/// reverse-mode code inside, by forward columns (`reverse/by_columns.rs`).
///
/// `active[k]` tells whether IR param `k` (flattened leaves) is
/// differentiated.
///
/// Errors: [`AdError::Unsupported`] for a derivative the transformation
/// does not compute; [`AdError::Internal`] for IR that breaks an
/// invariant.
pub fn derive(
    primal: &Function,
    active: &[bool],
    opts: AdOptions,
    wanted: &[Which],
    within: Option<(&Program, FuncId)>,
) -> Result<Derivatives, AdError> {
    if wanted.is_empty() {
        return Ok(Derivatives::default());
    }
    let want = |w| wanted.contains(&w);
    // Calls the primal keeps are of `within`'s definitions.
    let kept_calls = within.map(|(p, _)| p.funcs.len());
    let lin = arrayad_ir::timing::time("linearize", || linearize_keeping(primal, active, kept_calls))?;
    let name = &primal.name;
    let (vjp_name, rows_name) = (format!("{name}_vjp"), format!("{name}_vjp_rows"));
    // Reverse mode of reverse-mode code: by the rule of the `vjp`/`grad`
    // operators, else by forward columns.
    let by_columns = reverse::has_reverse_code(primal);
    type Unzipped = (Option<Function>, Option<Function>, Vec<Uncheckpointed>);
    let unzip = || -> Result<Unzipped, AdError> {
        let reverse_wanted = (want(Which::Vjp) || want(Which::Hvp), want(Which::VjpRows));
        if let (true, Some((program, id)), (true, _) | (_, true)) = (by_columns, within, reverse_wanted) {
            let names = (vjp_name.as_str(), rows_name.as_str());
            let by_rule =
                reverse::over_reverse::vjp_and_rows(program, id, active, opts.checkpoint, reverse_wanted, names)?;
            if let Some(done) = by_rule {
                return Ok(done);
            }
        }
        Ok(match reverse_wanted {
            (true, true) if by_columns => {
                let (v, r) = reverse::by_columns::vjp_and_rows(&lin, primal, &vjp_name, &rows_name);
                (Some(v), Some(r), Vec::new())
            }
            (true, true) => {
                let (v, r, taped) = reverse::vjp_and_rows(&lin, &vjp_name, &rows_name, opts.checkpoint)?;
                (Some(v), Some(r), taped)
            }
            (true, false) if by_columns => {
                (Some(reverse::by_columns::vjp_function(&lin, primal, &vjp_name)), None, Vec::new())
            }
            (true, false) => {
                let (v, taped) = reverse::vjp_function(&lin, &vjp_name, opts.checkpoint)?;
                (Some(v), None, taped)
            }
            (false, true) if by_columns => {
                (None, Some(reverse::by_columns::vjp_rows_function(&lin, primal, &rows_name)), Vec::new())
            }
            (false, true) => (None, Some(reverse::vjp_rows_function(&lin, &rows_name)?), Vec::new()),
            (false, false) => (None, None, Vec::new()),
        })
    };
    let (vjp, vjp_rows, uncheckpointed) = arrayad_ir::timing::time("unzip and transpose", unzip)?;
    let jvp_lanes = match want(Which::JvpLanes) {
        true => {
            let lanes = within.map_or(JVP_LANES, |(p, id)| jvp_lane_count(&p.func(id).signature, active));
            Some(arrayad_ir::timing::time("vector forward mode", || jvp_lanes(&lin, lanes))?)
        }
        false => None,
    };
    let mut jvp = want(Which::Jvp).then(|| checking_tangents(lin));
    if let (Some(f), Some(n)) = (jvp.as_mut(), kept_calls) {
        forward::fuse_kept_calls(f, n);
    }
    let mut out = Derivatives { jvp, vjp, vjp_rows, jvp_lanes, hvp: None, uncheckpointed };
    // The functions are optimised independently, on several threads; the
    // hvp is derived from the optimised vjp, in the same task.
    enum Task<'a> {
        Optimize(&'a mut Function),
        VjpThenHvp(&'a mut Function, &'a mut Option<Result<Function, AdError>>),
    }
    let mut hvp_out = None;
    let mut tasks = Vec::new();
    if let Some(v) = out.vjp.as_mut() {
        tasks.push(match want(Which::Hvp) {
            true => Task::VjpThenHvp(v, &mut hvp_out),
            false => Task::Optimize(v),
        });
    }
    tasks.extend([&mut out.vjp_rows, &mut out.jvp_lanes, &mut out.jvp].into_iter().flatten().map(Task::Optimize));
    let run = |task: Task<'_>| match task {
        Task::Optimize(f) => passes::optimize(f),
        Task::VjpThenHvp(v, h) => {
            passes::optimize(v);
            *h = Some(hvp(primal, v, active, within.map(|(p, _)| p)));
        }
    };
    // Threads pay only for large functions: starting them costs more than
    // optimising a small definition's derivatives.
    let work: usize = tasks
        .iter()
        .map(|t| match t {
            Task::Optimize(f) | Task::VjpThenHvp(f, _) => arrayad_ir::visit::stmt_count(&f.body),
        })
        .sum();
    if work < PARALLEL_MIN_STMTS {
        tasks.into_iter().for_each(run);
    } else {
        arrayad_ir::stack::for_each_parallel(tasks, arrayad_ir::stack::COMPILER_STACK, run);
    }
    out.hvp = hvp_out.transpose()?;
    if !want(Which::Vjp) {
        out.vjp = None;
    }
    Ok(out)
}

/// The function of `lin` checking at its entry that its tangent params
/// have their primal params' extents ([`lanes::shape_checks`]), as the
/// vector forward mode does: callers pass such tangents, so the checks
/// never fail, and code generation then knows a tangent indexed by its
/// primal's loop index to be in bounds. For every jvp that is compiled
/// ([`Which::Jvp`], [`hvp`], [`vjp_jvp`]).
fn checking_tangents(lin: JvpOutput) -> Function {
    let mut f = lin.func;
    let tangents: Vec<_> = f.params[lin.n_primal_params..].iter().map(|&p| (p, p)).collect();
    let mut stmts = lanes::shape_checks(&mut f, &lin.primal_of, &tangents);
    stmts.append(&mut f.body.stmts);
    f.body.stmts = stmts;
    f
}

/// The statements (at every depth) of the functions [`derive`] optimises
/// below which it optimises them one after another on the calling thread:
/// a thread's start costs about what optimising this many does.
const PARALLEL_MIN_STMTS: usize = 2_000;

/// A loop that checkpointing ([`AdOptions::checkpoint`]) leaves taped:
/// every iteration's residuals stay on the tape until the backward pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uncheckpointed {
    /// The loop's source location.
    pub loc: arrayad_ir::Loc,
    /// Why it is not checkpointed, as a sentence for a warning.
    pub reason: String,
}

/// The loops of the vjp of a prepared primal ([`passes::prepare`]) that checkpointing leaves
/// taped (while loops, loops without a primal state, loops with integer or
/// boolean array states), in the order the unzipping meets them. A function
/// that runs reverse mode inside is differentiated by forward columns,
/// without a tape: none.
///
/// Costs one linearisation and one unzipping; meant for warnings.
///
/// Errors: as [`derive()`].
pub fn uncheckpointed_loops(primal: &Function, active: &[bool]) -> Result<Vec<Uncheckpointed>, AdError> {
    uncheckpointed_loops_in(primal, active, None)
}

/// [`uncheckpointed_loops`] of a primal that keeps calls of the
/// definitions of `within` (those calls' own loops are not reported).
///
/// Errors: as [`derive()`].
pub fn uncheckpointed_loops_in(
    primal: &Function,
    active: &[bool],
    within: Option<&Program>,
) -> Result<Vec<Uncheckpointed>, AdError> {
    if reverse::has_reverse_code(primal) {
        return Ok(Vec::new());
    }
    reverse::uncheckpointed_loops(&linearize_keeping(primal, active, within.map(|p| p.funcs.len()))?)
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
/// forward over reverse (Pearlmutter 1994): forward mode ([`Which::Jvp`]'s
/// transformation, which reads reverse-mode code: `forward.rs`) of the
/// gradient, i.e. of its `vjp` (of the prepared `primal`, as
/// [`Derivatives::vjp`]) with cotangent 1.
///
/// `active` as for [`derive()`]. The result has params = primal params ++ one
/// tangent `t` per active param with f64 elements, and results = the value
/// ++ one gradient entry per active param ++ one entry of `H t` per active
/// param (each shaped like its param).
///
/// A vjp that calls the definitions of `within` and their vjps (kept calls,
/// [`arrayad_ir::KeptKind`]) has their tangents from calls of their jvps
/// and of the jvps of their vjps ([`vjp_jvp`]).
///
/// Errors: [`AdError::Unsupported`] when the result is not one f64.
pub fn hvp(primal: &Function, vjp: &Function, active: &[bool], within: Option<&Program>) -> Result<Function, AdError> {
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
    let mut f = checking_tangents(linearize_keeping(&g, active, within.map(|p| p.funcs.len()))?);
    if let Some(p) = within {
        forward::fuse_kept_calls(&mut f, p.funcs.len());
    }
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

/// The jvp in every f64 param of the vjp of a definition kept as a call
/// ([`arrayad_ir::KeptKind::VjpJvp`]; the vjp as [`Which::Vjp`] with every
/// f64 param active), which Hessian-vector products of its callers call
/// ([`hvp`]). Its own calls of `within`'s definitions and their vjps stay
/// calls, of their jvps and the jvps of their vjps.
///
/// Params = the vjp's params ++ one tangent per f64 param of the vjp;
/// results = the vjp's results ++ one tangent per f64 result. Optimised.
///
/// Errors: [`AdError::Internal`] for IR that breaks an invariant.
pub fn vjp_jvp(vjp: &Function, within: &Program) -> Result<Function, AdError> {
    let active: Vec<bool> = vjp.params.iter().map(|p| vjp.ty(*p).elem == Scalar::F64).collect();
    let mut f = checking_tangents(linearize_keeping(vjp, &active, Some(within.funcs.len()))?);
    forward::fuse_kept_calls(&mut f, within.funcs.len());
    f.name = format!("{}_jvp", vjp.name);
    passes::optimize(&mut f);
    Ok(f)
}
