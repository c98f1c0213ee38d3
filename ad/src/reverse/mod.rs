//! Reverse mode: the monadic Delta translation of Krawiec et al. (POPL
//! 2022), compiled (DESIGN.md, "Reverse mode").
//!
//! The input is the jvp of a function (`forward.rs`), whose linear statements
//! are exactly the Delta bindings of the translation: `dy = c * dx` is
//! `Scale c (Var x)`, `dz = dx + dy` is `Add`, `dy = dA[i]` is `Index`,
//! `build`/`loop`/`if` carry their bodies' bindings. Every binding is a
//! `let` of its own, so sharing is explicit and each is evaluated once.
//!
//! The transformation *unzips* that program (Smeding's thesis, ch. 4.6):
//!
//! 1. The forward pass keeps the primal statements. At the end of every
//!    nested block (a `build`/`loop` iteration, an `if` branch) it pushes on
//!    the tape the residuals the Delta bindings of that block need and that
//!    cannot be recomputed cheaply (scale factors such as `cos x`, loop
//!    states, arrays — by reference, they live in the call's arena). Values
//!    bound at the top level stay in scope and are never taped.
//! 2. The backward pass is `eval` (Fig. 10/11) specialised to the static
//!    Delta program: bindings in reverse order, each linear variable's
//!    cotangent in a mutable local (scalars) or a zeroed, in-place
//!    accumulator buffer (arrays; views of a parent's accumulator for row
//!    and slice Deltas, so one-hot cotangents are never materialised).
//!    Nested blocks become reversed effect loops that pop their residuals
//!    (LIFO), recompute cheap ones (indexing, integer and simple float
//!    arithmetic), and run their own bindings backward.
//!
//! Cost: every primal statement gives O(1) backward statements of the same
//! asymptotic cost, so gradient time and tape size are O(primal time).
//!
//! That needs care where the primal moves an array without touching its
//! elements (an `if` choosing an array, a loop state passed through, swapped
//! with another or handed to an inner loop): O(1) per iteration in the
//! primal, but a zeroed accumulator per iteration, plus a whole-array add
//! for the move, would be O(size). So:
//!
//! - a seed consumed by its target alone (a build row, a loop carrier, an
//!   `if` result's cotangent) becomes the target's accumulator (an alias)
//!   when the target is bound in the block, loop states included;
//! - in nested blocks, an array cotangent that some path may leave at zero
//!   is *lazy*: a mutable variable holding a placeholder (an empty array)
//!   and a `live` flag, false while the cotangent is zero. Adding an owned
//!   buffer (a consumed cotangent) to a zero lazy cotangent takes the buffer
//!   over; adding anything else, indexing it or taking a view first
//!   materialises zeros (once, before the outermost backward loop below the
//!   cotangent's own block that needs it, not per element); a lazy value is
//!   added only when live. Loop carriers carry such a flag too. Cotangents
//!   that every path materialises anyway (see `forced`) are zeroed up front,
//!   as at the top level.

mod assemble;
mod block;
pub(crate) mod by_columns;
mod checkpoint;
pub(crate) mod over_reverse;
mod pops;
mod residuals;
mod rules;
mod state;
mod transpose;

use crate::forward::JvpOutput;
use crate::AdError;
use arrayad_ir::visit::{stmt_uses, Subst};
use arrayad_ir::{Atom, BinOp, Block, Expr, Function, Loc, ReduceOp, Scalar, Stmt, StmtKind, Type, UnOp, VarId};
use assemble::{assemble_rows, assemble_vjp};
use residuals::*;
use std::collections::{HashMap, HashSet};

/// The vjp of a jvp, unzipped but not yet assembled into a function: the
/// part [`vjp_function`] and [`vjp_rows_function`] share.
#[derive(Clone)]
struct Unzipped {
    /// The function under construction (its variable table holds every
    /// variable below); body, params and results are set by the caller.
    out: Function,
    /// The primal params.
    primal_params: Vec<VarId>,
    /// One cotangent variable per f64 result (the vjp's cotangent params).
    ct_outs: Vec<VarId>,
    /// The forward pass: the primal statements plus the pushes of nested
    /// blocks. Its top-level variables stay in scope for `bwd`.
    fwd: Vec<Stmt>,
    /// The backward pass: reads `ct_outs`, pops what `fwd` pushed.
    bwd: Vec<Stmt>,
    /// The primal results and their types.
    primal_results: Vec<Atom>,
    primal_types: Vec<Type>,
    /// The cotangent of each tangent param, as computed at the end of `bwd`.
    grads: Vec<VarId>,
    /// With checkpointing: the loops left taped, and why.
    uncheckpointed: Vec<crate::Uncheckpointed>,
}

/// Whether `f` holds reverse-mode code (mutable variables, accumulators,
/// the tape, effect loops): a `vjp`/`grad` operator inlined into it.
pub(crate) fn has_reverse_code(f: &Function) -> bool {
    let mut hit = false;
    arrayad_ir::visit::for_each_block(&f.body, &mut |blk| {
        hit |= blk.stmts.iter().any(|s| match &s.kind {
            // (Zeros alone are not: forward mode makes zero tangents.)
            StmtKind::Let { expr, .. } => matches!(expr, Expr::Pop | Expr::TapeMark),
            StmtKind::CheckSize { .. } => false,
            _ => true,
        });
    });
    hit
}

/// Unzips a jvp into its forward and backward passes (module docs).
fn unzip(j: &JvpOutput, name: &str, checkpoint: bool) -> Result<Unzipped, AdError> {
    let jf = &j.func;
    if has_reverse_code(jf) {
        return Err(AdError::Unsupported(format!(
            "reverse mode of `{}`, which itself runs reverse mode (a `vjp` or `grad` inside it), is not \
             supported: differentiate it in forward mode (`jvp`, `--jvp`, `--jacobian` by columns, `--hessian`)",
            jf.name.trim_end_matches("_jvp")
        )));
    }
    let mut rev = Rev {
        out: jf.clone(),
        linear: &j.linear,
        primal_of: &j.primal_of,
        ct: HashMap::new(),
        views: HashSet::new(),
        owned_ct: HashSet::new(),
        live: HashMap::new(),
        level: HashMap::new(),
        for_depth: 0,
        pending: HashSet::new(),
        checkpoint,
        uncheckpointed: Vec::new(),
        setup: Vec::new(),
        yield_residuals: false,
        yielded: None,
        yield_rows: false,
        yielded_rows: Vec::new(),
        rows_built: Vec::new(),
        loc: Loc::default(),
        twins: Subst::default(),
        rules: &j.rules,
        kept_calls: j.kept_calls,
    };
    rev.out.name = name.to_string();
    let primal_params: Vec<VarId> = jf.params[..j.n_primal_params].to_vec();
    let tangent_params: Vec<VarId> = jf.params[j.n_primal_params..].to_vec();
    let primal_results: Vec<Atom> = jf.body.results[..j.n_primal_results].to_vec();
    let tangent_results: Vec<Atom> = jf.body.results[j.n_primal_results..].to_vec();

    // Cotangent inputs, one per tangent result.
    let mut ct_outs = Vec::new();
    let mut seeds = Vec::new();
    for (k, r) in tangent_results.iter().enumerate() {
        let ty = jf.result_types[j.n_primal_results + k];
        let c = rev.out.new_var("ct_out", ty);
        ct_outs.push(c);
        // The caller's cotangents are only read.
        seeds.push(Seed { target: *r, value: Expr::Atom(Atom::Var(c)), alias: false, live: None, owned: false });
    }
    // Cotangent accumulators of the tangent params are the linear binders
    // of the function body.
    let binders: Vec<(VarId, Decl)> = tangent_params.iter().map(|dp| (*dp, Decl::Zero)).collect();
    let (fwd, bwd) = rev.block(&jf.body, false, &[], &[], binders, seeds)?;
    let bwd = bwd.iter().map(|s| rev.twins.stmt(s)).collect();
    let grads = tangent_params.iter().map(|dp| rev.ct[dp]).collect();
    Ok(Unzipped {
        out: rev.out,
        primal_params,
        ct_outs,
        fwd,
        bwd,
        primal_results,
        primal_types: jf.result_types[..j.n_primal_results].to_vec(),
        grads,
        uncheckpointed: rev.uncheckpointed,
    })
}

/// With checkpointing on, the loops of the jvp `j` that its vjp leaves
/// taped (every iteration's residuals kept), and why, in the order the
/// unzipping meets them.
///
/// Errors: as [`vjp_function`].
pub fn uncheckpointed_loops(j: &JvpOutput) -> Result<Vec<crate::Uncheckpointed>, AdError> {
    Ok(unzip(j, &j.func.name, true)?.uncheckpointed)
}

/// The loops a checkpointed unzipping left taped ([`uncheckpointed_loops`]),
/// returned with the functions made from it.
pub type Taped = Vec<crate::Uncheckpointed>;

/// The vjp and the many-row vjp of a jvp (as [`vjp_function`] and
/// [`vjp_rows_function`]), unzipping it once (twice when checkpointing:
/// the rows are not checkpointed).
pub fn vjp_and_rows(
    j: &JvpOutput,
    vjp_name: &str,
    rows_name: &str,
    checkpoint: bool,
) -> Result<(Function, Function, Taped), AdError> {
    let mut u = unzip(j, vjp_name, checkpoint)?;
    let taped = std::mem::take(&mut u.uncheckpointed);
    // The rows are never checkpointed ([`vjp_rows_function`]).
    let mut r = if checkpoint { unzip(j, rows_name, false)? } else { u.clone() };
    r.out.name = rows_name.to_string();
    Ok((assemble_vjp(u), assemble_rows(r), taped))
}

/// Builds the vjp of a jvp: params = primal params ++ one cotangent per f64
/// result; results = primal results ++ cotangents of the tangent params.
pub fn vjp_function(j: &JvpOutput, name: &str, checkpoint: bool) -> Result<(Function, Taped), AdError> {
    let mut u = unzip(j, name, checkpoint)?;
    let taped = std::mem::take(&mut u.uncheckpointed);
    Ok((assemble_vjp(u), taped))
}

/// Builds the many-row vjp of a jvp: one forward pass, then one backward
/// pass per cotangent row.
///
/// Params = primal params ++ per f64 result a stack of `R` cotangents (one
/// more leading axis than the result); results = primal results ++ per
/// tangent param the stack of its `R` cotangents (row `r` answers cotangent
/// row `r`). The body is the forward pass, a check that every cotangent
/// stack has `R` rows, a [`Expr::TapeMark`] and
/// `build row < R => { tape_rewind mark; ct_out = ct_rows[row]; backward }`:
/// the backward pass pops what the forward pass pushed, and the rewind
/// replays the tape for the next row. With no f64 result, `R` is 0.
///
/// Loops are not checkpointed here: the backward pass of a checkpointed
/// loop pushes the residuals of each segment it recomputes over the
/// popped slots, which the next row pops again; every residual stays on
/// the tape instead.
pub fn vjp_rows_function(j: &JvpOutput, name: &str) -> Result<Function, AdError> {
    Ok(assemble_rows(unzip(j, name, false)?))
}

/// How a loop runs: `n` times with an index, or while a condition holds.
#[derive(Clone, Copy)]
pub(super) enum LoopHead<'a> {
    Counted(Atom, VarId),
    While(&'a Block),
}

/// Where the cotangent of a block result comes from.
struct Seed {
    /// The linear result atom of the block.
    target: Atom,
    /// An expression (over backward-pass variables) giving its cotangent.
    value: Expr,
    /// True when the seed is consumed by this target alone (a build row
    /// view, a loop carrier, an `if` result's cotangent), so the target may
    /// take it as its own accumulator instead of adding it to a zeroed one;
    /// the block aliases it when the target is bound here (by a structured
    /// or arithmetic `let`, or as a loop state) and receives no other seed.
    alias: bool,
    /// For a lazily materialised cotangent (module docs), its flag: false
    /// while the cotangent is zero and the value a mere placeholder.
    live: Option<VarId>,
    /// True when the value's buffer is consumed by this seed alone, so that
    /// a zero target may take it over rather than add it.
    owned: bool,
}

/// How the cotangent of a linear variable starts.
enum Decl {
    /// Zero.
    Zero,
    /// A view of the cotangent of `parent` (a row or slice binding).
    View { parent: VarId, expr: Expr },
    /// The value of a seed (an alias), lazy when `live` is given; `owned`
    /// when the seed's buffer is consumed by it alone.
    Alias { expr: Expr, live: Option<VarId>, owned: bool },
}

struct Rev<'a> {
    out: Function,
    linear: &'a HashSet<VarId>,
    primal_of: &'a HashMap<VarId, VarId>,
    /// The cotangent variable of each linear variable.
    ct: HashMap<VarId, VarId>,
    /// Linear variables whose cotangent is a view of a parent accumulator.
    views: HashSet<VarId>,
    /// Linear array variables whose cotangent buffer is theirs alone (a
    /// fresh accumulator, or a consumed seed): the backward pass of an
    /// update may clear part of it and hand the rest on.
    owned_ct: HashSet<VarId>,
    /// The flag of each lazily materialised array cotangent (module docs):
    /// while false the cotangent is zero and its variable a placeholder.
    live: HashMap<VarId, VarId>,
    /// The loop nesting (of backward loops) at which each lazy cotangent is
    /// declared.
    level: HashMap<VarId, usize>,
    /// The loop nesting of the block being unzipped.
    for_depth: usize,
    /// Lazy cotangents declared outside the backward loop being built that
    /// its body needs materialised: they are materialised before the loop.
    pending: HashSet<VarId>,
    /// Checkpoint every counted loop (`checkpoint.rs`).
    checkpoint: bool,
    /// With `checkpoint`: the loops left taped, and why.
    uncheckpointed: Vec<crate::Uncheckpointed>,
    /// The bindings a checkpointed loop put in front of itself in the
    /// forward pass, for the enclosing block's residuals.
    setup: Vec<(VarId, Option<(Expr, Loc)>)>,
    /// Set by the `if` rule for the branch it unzips next: when that
    /// block's residuals are all scalars, it yields them instead of taping
    /// them (`rules/branch.rs`), and leaves them in `yielded`.
    yield_residuals: bool,
    /// The residuals the last branch unzipped with `yield_residuals`
    /// yields, in order (`None` when it taped them).
    yielded: Option<Vec<VarId>>,
    /// Set by the `build` rule for the body it unzips next: that block
    /// yields its scalar residuals, and its arrays of the same extents in
    /// every iteration, as extra results of the forward comprehension
    /// instead of taping them, and its backward block reads row `i` of the
    /// stacked arrays (`rules/build.rs`); it leaves them in `yielded_rows`.
    yield_rows: bool,
    /// Each residual the last body unzipped with `yield_rows` yields, with
    /// the array of the forward comprehension that stacks it.
    yielded_rows: Vec<(VarId, VarId)>,
    /// Set by the `build` rule for the body it unzips next, when the
    /// comprehension is a statement of the function's body: each scalar
    /// result of the body with the array of the forward pass's
    /// comprehension holding it. A result that the body binds, that the
    /// backward body needs and that is not cheap to recompute (an `exp`)
    /// is read back from that array rather than taped: the array holds it
    /// already, and stays in scope until the backward pass.
    rows_built: Vec<(VarId, VarId)>,
    /// The location of the primal statement being unzipped: the statements
    /// made for it carry it, so that a run-time error in them (out of
    /// memory on the tape, a size check) names the source statement.
    loc: Loc,
    /// The backward variable of every primal variable of a nested block
    /// that its backward code reads (popped, recomputed or the backward
    /// loop's index). Each primal variable is bound in one block, so one
    /// substitution applied once to the whole backward pass at the end
    /// renames the backward code of every block (renaming each block's
    /// backward code as it is made would copy nested code once per
    /// enclosing block). Forward code inside backward code is fresh
    /// (`checkpoint.rs`).
    twins: Subst,
    /// The rules of the linear calls (`over_reverse.rs`).
    rules: &'a over_reverse::StubRules,
    /// The number of functions of the program whose kept definitions'
    /// jvps the linear calls may call ([`arrayad_ir::KeptKind`]).
    kept_calls: Option<usize>,
}
