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

mod checkpoint;
mod pops;

use crate::forward::JvpOutput;
use crate::AdError;
use arrayad_ir::visit::{stmt_uses, Subst};
use arrayad_ir::{Atom, BinOp, Block, Expr, Function, Loc, ReduceOp, Scalar, Stmt, StmtKind, Type, UnOp, VarId};
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

/// Unzips a jvp into its forward and backward passes (module docs).
/// Whether `f` holds reverse-mode code (mutable variables, accumulators,
/// the tape, effect loops): a `vjp`/`grad` operator inlined into it.
pub(crate) mod by_columns;

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
        loc: Loc::default(),
        twins: Subst::default(),
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

/// The vjp and the many-row vjp of a jvp (as [`vjp_function`] and
/// [`vjp_rows_function`]), unzipping it once.
pub fn vjp_and_rows(
    j: &JvpOutput,
    vjp_name: &str,
    rows_name: &str,
    checkpoint: bool,
) -> Result<(Function, Function), AdError> {
    let u = unzip(j, vjp_name, checkpoint)?;
    let mut r = u.clone();
    r.out.name = rows_name.to_string();
    Ok((assemble_vjp(u), assemble_rows(r)))
}

/// Builds the vjp of a jvp: params = primal params ++ one cotangent per f64
/// result; results = primal results ++ cotangents of the tangent params.
pub fn vjp_function(j: &JvpOutput, name: &str, checkpoint: bool) -> Result<Function, AdError> {
    Ok(assemble_vjp(unzip(j, name, checkpoint)?))
}

fn assemble_vjp(u: Unzipped) -> Function {
    let mut out = u.out;
    let mut stmts = u.fwd;
    // Each array cotangent must have the shape of its result.
    let f64_results: Vec<Atom> =
        u.primal_results.iter().filter(|r| out.atom_ty(r).elem == Scalar::F64).copied().collect();
    for (r, c) in f64_results.iter().zip(&u.ct_outs) {
        let (Atom::Var(r), ty) = (*r, out.ty(*c)) else { continue };
        for axis in 0..ty.rank {
            let dc = out.new_var("n", Type::I64);
            let dr = out.new_var("n", Type::I64);
            let loc = out.loc;
            stmts.push(Stmt { kind: StmtKind::Let { vars: vec![dc], expr: Expr::Dim { array: *c, axis } }, loc });
            stmts.push(Stmt { kind: StmtKind::Let { vars: vec![dr], expr: Expr::Dim { array: r, axis } }, loc });
            stmts.push(Stmt {
                kind: StmtKind::CheckSize {
                    a: Atom::Var(dc),
                    b: Atom::Var(dr),
                    what: format!("the cotangent's axis {axis} must equal the result's"),
                },
                loc,
            });
        }
    }
    stmts.extend(u.bwd);
    let mut results = u.primal_results;
    let mut rtypes = u.primal_types;
    for c in &u.grads {
        results.push(Atom::Var(*c));
        rtypes.push(out.ty(*c));
    }
    out.body = Block { stmts, results };
    out.params = u.primal_params;
    out.params.extend(u.ct_outs);
    out.result_types = rtypes;
    out
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
pub fn vjp_rows_function(j: &JvpOutput, name: &str, checkpoint: bool) -> Result<Function, AdError> {
    Ok(assemble_rows(unzip(j, name, checkpoint)?))
}

fn assemble_rows(u: Unzipped) -> Function {
    let mut out = u.out;
    let mut stmts = u.fwd;
    let stmt = |kind| Stmt { kind, loc: Loc::default() };
    let ct_rows: Vec<VarId> = u.ct_outs.iter().map(|c| out.new_var("ct_rows", out.ty(*c).lift())).collect();
    let mut results = u.primal_results;
    let mut rtypes = u.primal_types;
    let rows = match ct_rows.first() {
        Some(&first) => {
            let r = out.new_var("rows", Type::I64);
            stmts.push(stmt(StmtKind::Let { vars: vec![r], expr: Expr::Dim { array: first, axis: 0 } }));
            for (k, &c) in ct_rows.iter().enumerate().skip(1) {
                let rk = out.new_var("rows", Type::I64);
                stmts.push(stmt(StmtKind::Let { vars: vec![rk], expr: Expr::Dim { array: c, axis: 0 } }));
                stmts.push(stmt(StmtKind::CheckSize {
                    a: Atom::Var(rk),
                    b: Atom::Var(r),
                    what: format!("the row counts of cotangent {k} and of cotangent 0"),
                }));
            }
            Atom::Var(r)
        }
        None => Atom::I64(0),
    };
    if !u.grads.is_empty() {
        let mark = out.new_var("tape_mark", Type::I64);
        stmts.push(stmt(StmtKind::Let { vars: vec![mark], expr: Expr::TapeMark }));
        let row = out.new_var("row", Type::I64);
        let mut body = vec![stmt(StmtKind::TapeRewind(Atom::Var(mark)))];
        for (c, cr) in u.ct_outs.iter().zip(&ct_rows) {
            body.push(stmt(StmtKind::Let {
                vars: vec![*c],
                expr: Expr::Index { array: *cr, indices: vec![Atom::Var(row)] },
            }));
        }
        body.extend(u.bwd);
        let body = Block { stmts: body, results: u.grads.iter().map(|c| Atom::Var(*c)).collect() };
        let stacks: Vec<VarId> = u.grads.iter().map(|c| out.new_var("grad_rows", out.ty(*c).lift())).collect();
        stmts.push(stmt(StmtKind::Let { vars: stacks.clone(), expr: Expr::Build { n: rows, index: row, body } }));
        for s in stacks {
            results.push(Atom::Var(s));
            rtypes.push(out.ty(s));
        }
    }
    out.body = Block { stmts, results };
    out.params = u.primal_params;
    out.params.extend(ct_rows);
    out.result_types = rtypes;
    out
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
}

/// The linear arrays bound in `blk` whose cotangents the backward pass of
/// `blk` certainly makes accumulators whatever the path taken: builds and
/// array literals (whose transpositions read their cotangents), arrays
/// indexed, sliced, summed or listed in a literal at the top of `blk`, any
/// variable used in the body of a build or loop there (what such a body
/// needs is materialised before the backward loop), and results of `blk`
/// whose seeds are not consumed by them. Such a cotangent is zeroed when
/// declared; the others are lazy (a zero that costs no O(size) work per
/// iteration).
fn forced(blk: &Block, plain_seeds: &[Seed]) -> HashSet<VarId> {
    let mut set = HashSet::new();
    for s in &blk.stmts {
        let StmtKind::Let { vars, expr } = &s.kind else { continue };
        match expr {
            Expr::Build { body, .. } => {
                set.extend(vars.iter().copied());
                arrayad_ir::visit::block_uses(body, &mut |v| {
                    set.insert(v);
                });
            }
            Expr::Loop { body, .. } | Expr::While { body, .. } => arrayad_ir::visit::block_uses(body, &mut |v| {
                set.insert(v);
            }),
            Expr::ArrayLit { elems, .. } => {
                set.extend(vars.iter().copied());
                set.extend(elems.iter().filter_map(|e| e.as_var()));
            }
            Expr::Index { array, .. }
            | Expr::Slice { array, .. }
            | Expr::Reshape { array, .. }
            | Expr::Reduce { array, .. } => {
                set.insert(*array);
            }
            _ => {}
        }
    }
    for s in plain_seeds.iter().filter(|s| !s.owned) {
        if let Atom::Var(v) = s.target {
            set.insert(v);
        }
    }
    set
}

/// Calls `f` on every expression of `stmts`, at any depth.
fn for_each_expr(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    for s in stmts {
        if let StmtKind::Let { expr, .. } = &s.kind {
            f(expr);
        }
        for b in arrayad_ir::visit::child_blocks(&s.kind) {
            for_each_expr(&b.stmts, f);
        }
    }
}

/// True when `a` is used in `pre` and `stmts` only for its extents (`dim`,
/// `zeros_like`).
fn shape_only(pre: &[Stmt], stmts: &[Stmt], a: VarId) -> bool {
    let (mut all, mut shape) = (0usize, 0usize);
    for part in [pre, stmts] {
        for s in part {
            stmt_uses(&s.kind, &mut |v| all += (v == a) as usize);
        }
        for_each_expr(part, &mut |e| match e {
            Expr::Dim { array, .. } | Expr::ZerosLike(array) if *array == a => shape += 1,
            _ => {}
        });
    }
    all == shape
}

/// Replaces `dim a k` by the `k`-th variable of `shapes[a]` and
/// `zeros_like a` by `zeros` of those variables, at any depth.
fn rewrite_shapes(stmts: &mut [Stmt], shapes: &HashMap<VarId, Vec<VarId>>) {
    for s in stmts {
        match &mut s.kind {
            StmtKind::Let { expr, .. } => match expr {
                Expr::Dim { array, axis } => {
                    if let Some(d) = shapes.get(array).and_then(|ds| ds.get(*axis as usize)) {
                        *expr = Expr::Atom(Atom::Var(*d));
                    }
                }
                Expr::ZerosLike(array) => {
                    if let Some(ds) = shapes.get(array) {
                        *expr = Expr::Zeros(ds.iter().map(|d| Atom::Var(*d)).collect());
                    }
                }
                Expr::Build { body, .. } | Expr::Loop { body, .. } => rewrite_shapes(&mut body.stmts, shapes),
                Expr::While { cond, body, .. } => {
                    rewrite_shapes(&mut cond.stmts, shapes);
                    rewrite_shapes(&mut body.stmts, shapes);
                }
                Expr::If { then_branch, else_branch, .. } => {
                    rewrite_shapes(&mut then_branch.stmts, shapes);
                    rewrite_shapes(&mut else_branch.stmts, shapes);
                }
                _ => {}
            },
            StmtKind::For { body, .. } => rewrite_shapes(&mut body.stmts, shapes),
            StmtKind::If { then_branch, else_branch, .. } => {
                rewrite_shapes(&mut then_branch.stmts, shapes);
                rewrite_shapes(&mut else_branch.stmts, shapes);
            }
            _ => {}
        }
    }
}

/// Expressions cheap enough to recompute in the backward pass rather than
/// tape.
fn is_cheap(e: &Expr) -> bool {
    match e {
        Expr::Atom(_) | Expr::Index { .. } | Expr::Slice { .. } | Expr::Reshape { .. } | Expr::Dim { .. } => true,
        Expr::Unary(op, _) => matches!(
            op,
            UnOp::Neg | UnOp::Not | UnOp::ToF64 | UnOp::ToI64 | UnOp::Abs | UnOp::Floor | UnOp::Ceil | UnOp::Sign
        ),
        Expr::Binary(op, _, _) => !matches!(op, BinOp::Pow | BinOp::Atan2 | BinOp::Polygamma),
        // A choice between two atoms (`if j % 2 == 0 then 1.0 else -1.0`).
        Expr::If { then_branch, else_branch, .. } => {
            [then_branch, else_branch].iter().all(|b| b.stmts.is_empty() && b.results.len() == 1)
        }
        // A comprehension of cheap scalar expressions (`x[i] - means[k]`,
        // `concat(c[0:j], c[j + 1:k])`): recomputing its O(n) elements
        // costs what writing and reading them on the tape would, and keeps
        // nothing alive.
        Expr::Build { body, .. } => body.results.len() == 1 && body.stmts.iter().all(is_cheap_row_stmt),
        _ => false,
    }
}

/// A statement a cheap comprehension's body may hold: one binding of a
/// cheap expression, or of a branch between blocks of such bindings (the
/// recomputed comprehension's binders are all fresh: `fresh_binders`).
/// The nesting of branches is the program's, which the frontend bounds.
fn is_cheap_row_stmt(s: &Stmt) -> bool {
    let StmtKind::Let { vars, expr } = &s.kind else { return false };
    vars.len() == 1
        && match expr {
            Expr::Build { .. } => false,
            Expr::If { then_branch, else_branch, .. } => {
                [then_branch, else_branch].iter().all(|b| b.results.len() == 1 && b.stmts.iter().all(is_cheap_row_stmt))
            }
            _ => is_cheap(expr),
        }
}

impl Rev<'_> {
    fn is_lin(&self, a: &Atom) -> Option<VarId> {
        match a {
            Atom::Var(v) if self.linear.contains(v) => Some(*v),
            _ => None,
        }
    }

    /// True when `expr` binds a linear variable at any depth (in its nested
    /// blocks, for a structured expression).
    fn binds_linear(&self, expr: &Expr) -> bool {
        let mut hit = false;
        let mut check = |v: VarId| hit |= self.linear.contains(&v);
        match expr {
            Expr::Build { body, .. } => arrayad_ir::visit::block_binds(body, &mut check),
            Expr::Loop { states, body, .. } | Expr::While { states, body, .. } => {
                states.iter().for_each(|v| check(*v));
                arrayad_ir::visit::block_binds(body, &mut check);
            }
            Expr::If { then_branch, else_branch, .. } => {
                arrayad_ir::visit::block_binds(then_branch, &mut check);
                arrayad_ir::visit::block_binds(else_branch, &mut check);
            }
            _ => {}
        }
        hit
    }

    /// A copy of `e` whose nested binders (a recomputed comprehension's
    /// index and locals) are fresh variables, so that no variable is bound
    /// twice.
    fn fresh_binders(&mut self, e: &Expr) -> Expr {
        let Expr::Build { n, index, body } = e else { return e.clone() };
        let mut rename = Subst::default();
        let body = arrayad_ir::visit::freshen_block(&mut self.out, body, &[*index], &mut rename);
        Expr::Build { n: *n, index: rename.var(*index), body }
    }

    fn new_var(&mut self, name: &str, ty: Type) -> VarId {
        self.out.new_var(name, ty)
    }

    fn let1(&mut self, out: &mut Vec<Stmt>, name: &str, e: Expr, ty: Type) -> Atom {
        let v = self.new_var(name, ty);
        out.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr: e }, loc: self.loc });
        Atom::Var(v)
    }

    fn push(&self, out: &mut Vec<Stmt>, kind: StmtKind) {
        out.push(Stmt { kind, loc: self.loc });
    }

    /// Declares the cotangent of linear variable `v` (see [`Decl`]). An
    /// array cotangent starting at zero is lazy when `lazy` (in nested
    /// blocks): a mutable variable holding a placeholder (an empty array)
    /// and a flag, false until something is added to it.
    fn declare_ct(&mut self, v: VarId, decl: Decl, lazy: bool, out: &mut Vec<Stmt>) {
        let ty = self.out.ty(v).with_elem(Scalar::F64);
        let name = format!("ct_{}", self.out.var(v).name.trim_start_matches('d'));
        if ty.is_scalar() {
            let c = self.out.new_mut_var(name, ty);
            let init = match decl {
                Decl::Alias { expr, .. } => expr,
                _ => Expr::Atom(Atom::F64(0.0)),
            };
            self.push(out, StmtKind::Let { vars: vec![c], expr: init });
            self.ct.insert(v, c);
            return;
        }
        let p = self.primal_of.get(&v).copied().unwrap_or(v);
        let (expr, live) = match decl {
            Decl::View { parent, expr } => {
                self.need_live(parent, out);
                (expr, None)
            }
            Decl::Alias { expr, live, owned } => {
                if owned {
                    self.owned_ct.insert(v);
                }
                (expr, live.map(Atom::Var))
            }
            // The placeholder of a zero lazy cotangent is never read (only
            // replaced): an empty array, so that the primal array is not
            // kept (nor taped) for it.
            Decl::Zero if lazy => {
                self.owned_ct.insert(v);
                (Expr::Zeros(vec![Atom::I64(0); ty.rank as usize]), Some(Atom::Bool(false)))
            }
            Decl::Zero => {
                self.owned_ct.insert(v);
                (Expr::ZerosLike(p), None)
            }
        };
        let c = match live {
            Some(l) => {
                let c = self.out.new_mut_var(name.clone(), ty);
                let f = self.out.new_mut_var(format!("live_{}", name.trim_start_matches("ct_")), Type::BOOL);
                self.push(out, StmtKind::Let { vars: vec![c], expr });
                self.push(out, StmtKind::Let { vars: vec![f], expr: Expr::Atom(l) });
                self.live.insert(v, f);
                self.level.insert(v, self.for_depth);
                c
            }
            None => {
                let c = self.new_var(&name, ty);
                self.push(out, StmtKind::Let { vars: vec![c], expr });
                c
            }
        };
        self.ct.insert(v, c);
    }

    /// Makes the lazy cotangent of `x` an accumulator (zeros unless already
    /// live) before `out` uses it in place: right here when `x` is declared
    /// in this backward loop body, else before the loop (so once, not per
    /// element of an inner loop).
    fn need_live(&mut self, x: VarId, out: &mut Vec<Stmt>) {
        let Some(&flag) = self.live.get(&x) else { return };
        if self.level[&x] != self.for_depth {
            self.pending.insert(x);
            return;
        }
        let c = self.ct[&x];
        let p = self.primal_of.get(&x).copied().unwrap_or(x);
        let z = self.new_var("zeros", self.out.ty(c));
        let make = vec![
            Stmt { kind: StmtKind::Let { vars: vec![z], expr: Expr::ZerosLike(p) }, loc: self.loc },
            Stmt { kind: StmtKind::Assign { var: c, value: Atom::Var(z) }, loc: self.loc },
            Stmt { kind: StmtKind::Assign { var: flag, value: Atom::Bool(true) }, loc: self.loc },
        ];
        self.push(
            out,
            StmtKind::If {
                cond: Atom::Var(flag),
                then_branch: Block::default(),
                else_branch: Block { stmts: make, results: vec![] },
            },
        );
    }

    /// Materialises, before the backward loop just built, the lazy
    /// cotangents its body needs (`pending` of the body; `saved` is the
    /// enclosing body's).
    fn flush_pending(&mut self, saved: HashSet<VarId>, out: &mut Vec<Stmt>) {
        let mut pend: Vec<VarId> = std::mem::replace(&mut self.pending, saved).into_iter().collect();
        pend.sort();
        for x in pend {
            self.need_live(x, out);
        }
    }

    /// `ct(target) += value` (nothing for a literal target: a zero tangent).
    fn accumulate(&mut self, target: &Atom, value: Atom, out: &mut Vec<Stmt>) {
        self.accumulate_from(target, value, None, false, out);
    }

    /// `ct(target) += value`, where the array `value` is a lazy cotangent
    /// with flag `vlive` (nothing to add while false), and `owned` tells
    /// that its buffer is consumed here: a lazy target still zero then
    /// takes it over instead of materialising zeros and adding.
    fn accumulate_from(&mut self, target: &Atom, value: Atom, vlive: Option<VarId>, owned: bool, out: &mut Vec<Stmt>) {
        let Some(t) = self.is_lin(target) else { return };
        let Some(&c) = self.ct.get(&t) else { return };
        if self.out.ty(c).is_scalar() {
            let s = self.let1(out, "ct", Expr::Binary(BinOp::Add, Atom::Var(c), value), Type::F64);
            self.push(out, StmtKind::Assign { var: c, value: s });
            return;
        }
        let mut body = Vec::new();
        let add = StmtKind::AccAdd { acc: c, indices: vec![], value };
        match self.live.get(&t).copied() {
            Some(flag) if owned => {
                let take = vec![
                    Stmt { kind: StmtKind::Assign { var: c, value }, loc: self.loc },
                    Stmt { kind: StmtKind::Assign { var: flag, value: Atom::Bool(true) }, loc: self.loc },
                ];
                self.push(
                    &mut body,
                    StmtKind::If {
                        cond: Atom::Var(flag),
                        then_branch: Block { stmts: vec![Stmt { kind: add, loc: self.loc }], results: vec![] },
                        else_branch: Block { stmts: take, results: vec![] },
                    },
                );
            }
            _ => {
                self.need_live(t, &mut body);
                self.push(&mut body, add);
            }
        }
        match vlive {
            Some(l) => self.push(
                out,
                StmtKind::If {
                    cond: Atom::Var(l),
                    then_branch: Block { stmts: body, results: vec![] },
                    else_branch: Block::default(),
                },
            ),
            None => out.extend(body),
        }
    }

    /// Unzips block `blk` of the jvp program into forward statements and
    /// backward statements.
    ///
    /// - `nested`: false only for the function body, whose primal values
    ///   stay in scope for the backward pass; a nested block tapes or
    ///   recomputes them.
    /// - `binders`: the block's primal binders (loop index, primal loop
    ///   states); `binder_twins` maps those that the backward loop provides
    ///   for free (its own index) to their backward variables.
    /// - `lin_binders`: linear variables bound on entry (tangent params,
    ///   linear loop states) with the declaration of their cotangent.
    /// - `seeds`: the cotangents of the block's linear results.
    ///
    /// The statements made for the enclosing statement after this returns
    /// carry its location again.
    #[allow(clippy::too_many_arguments)]
    fn block(
        &mut self,
        blk: &Block,
        nested: bool,
        binders: &[VarId],
        binder_twins: &[(VarId, VarId)],
        lin_binders: Vec<(VarId, Decl)>,
        seeds: Vec<Seed>,
    ) -> Result<(Vec<Stmt>, Vec<Stmt>), AdError> {
        let outer = self.loc;
        let r = self.block_stmts(blk, nested, binders, binder_twins, lin_binders, seeds);
        self.loc = outer;
        r
    }

    /// [`Self::block`] without the restoring of the location.
    #[allow(clippy::too_many_arguments)]
    fn block_stmts(
        &mut self,
        blk: &Block,
        nested: bool,
        binders: &[VarId],
        binder_twins: &[(VarId, VarId)],
        lin_binders: Vec<(VarId, Decl)>,
        seeds: Vec<Seed>,
    ) -> Result<(Vec<Stmt>, Vec<Stmt>), AdError> {
        let mut fwd: Vec<Stmt> = Vec::new();
        let mut decls: Vec<Stmt> = Vec::new();
        let mut chunks: Vec<Vec<Stmt>> = Vec::new();
        // Primal variables bound here, in order, with cheap definitions.
        let mut bound: Vec<VarId> = binders.to_vec();
        let mut defs: HashMap<VarId, (Expr, Loc)> = HashMap::new();

        // Seeds that can become the target's own accumulator.
        let mut alias: HashMap<VarId, Decl> = HashMap::new();
        let mut plain_seeds = Vec::new();
        let mut counts: HashMap<VarId, usize> = HashMap::new();
        for s in &seeds {
            if let Atom::Var(v) = s.target {
                *counts.entry(v).or_default() += 1;
            }
        }
        let bound_by_let: HashSet<VarId> = blk
            .stmts
            .iter()
            .flat_map(|s| match &s.kind {
                StmtKind::Let { vars, expr }
                    if !matches!(expr, Expr::Index { .. } | Expr::Slice { .. } | Expr::Reshape { .. }) =>
                {
                    vars.clone()
                }
                _ => vec![],
            })
            .collect();
        // A linear loop state returned as (exactly one) result of the body
        // takes the incoming cotangent as its own accumulator too, so a
        // state passed through (or permuted) costs nothing per iteration.
        let lin_bound: HashSet<VarId> = lin_binders.iter().map(|(v, _)| *v).collect();
        for s in seeds {
            match s.target {
                Atom::Var(v)
                    if s.alias
                        && counts[&v] == 1
                        && (bound_by_let.contains(&v) || lin_bound.contains(&v))
                        && self.linear.contains(&v) =>
                {
                    alias.insert(v, Decl::Alias { expr: s.value, live: s.live, owned: s.owned });
                }
                _ => plain_seeds.push(s),
            }
        }

        let forced = if nested { forced(blk, &plain_seeds) } else { HashSet::new() };
        for (v, decl) in lin_binders {
            let decl = alias.remove(&v).unwrap_or(decl);
            let lazy = nested && !forced.contains(&v);
            self.declare_ct(v, decl, lazy, &mut decls);
        }

        for s in &blk.stmts {
            let loc = s.loc;
            self.loc = loc;
            let StmtKind::Let { vars, expr } = &s.kind else {
                // Size checks belong to the primal program.
                fwd.push(s.clone());
                continue;
            };
            let any_linear = vars.iter().any(|v| self.linear.contains(v));
            let structured =
                matches!(expr, Expr::Build { .. } | Expr::Loop { .. } | Expr::While { .. } | Expr::If { .. });
            if !any_linear && !structured {
                if vars.len() == 1 && is_cheap(expr) {
                    defs.insert(vars[0], (expr.clone(), loc));
                }
                bound.extend(vars);
                fwd.push(s.clone());
                continue;
            }
            if !any_linear && !self.binds_linear(expr) {
                // A primal build/loop/if: no linear statement inside. (One
                // whose linear values are all dead inside, say a loop with a
                // tangent state whose result is unused, still goes through
                // its rule: its body mentions tangents, which the forward
                // pass does not have.)
                if vars.len() == 1 && is_cheap(expr) {
                    defs.insert(vars[0], (expr.clone(), loc));
                }
                bound.extend(vars);
                fwd.push(s.clone());
                continue;
            }
            // Declare the cotangents of the linear variables bound here.
            for v in vars.iter().filter(|v| self.linear.contains(v)) {
                let view = match expr {
                    Expr::Index { array, indices } if self.out.ty(*v).is_array() => self.ct.get(array).map(|c| {
                        Decl::View { parent: *array, expr: Expr::Index { array: *c, indices: indices.clone() } }
                    }),
                    Expr::Slice { array, lo, hi } => self
                        .ct
                        .get(array)
                        .map(|c| Decl::View { parent: *array, expr: Expr::Slice { array: *c, lo: *lo, hi: *hi } }),
                    Expr::Reshape { array, dims } => self
                        .ct
                        .get(array)
                        .map(|c| Decl::View { parent: *array, expr: Expr::Reshape { array: *c, dims: dims.clone() } }),
                    _ => None,
                };
                if view.is_some() {
                    self.views.insert(*v);
                }
                let decl = view.or_else(|| alias.remove(v)).unwrap_or(Decl::Zero);
                let lazy = nested && !forced.contains(v);
                self.declare_ct(*v, decl, lazy, &mut decls);
            }
            bound.extend(vars.iter().filter(|v| !self.linear.contains(v)));
            let mut chunk = Vec::new();
            match expr {
                Expr::Build { n, index, body } => {
                    self.build_rule(vars, *n, *index, body, loc, &mut fwd, &mut chunk)?;
                    // The primal half of the comprehension, when cheap, is
                    // recomputed rather than taped like any cheap binding.
                    if let Some(Stmt { kind: StmtKind::Let { vars: pv, expr: pe @ Expr::Build { .. } }, loc }) =
                        fwd.last()
                    {
                        if pv.len() == 1 && is_cheap(pe) {
                            defs.insert(pv[0], (pe.clone(), *loc));
                        }
                    }
                }
                Expr::While { states, init, cond, body } => {
                    self.loop_rule(vars, LoopHead::While(cond), states, init, body, loc, &mut fwd, &mut chunk)?;
                    // The trip count: a primal value of this block (taped
                    // when the block is nested).
                    for (v, _) in std::mem::take(&mut self.setup) {
                        bound.push(v);
                    }
                }
                Expr::Loop { n, index, states, init, body } => {
                    let head = LoopHead::Counted(*n, *index);
                    self.loop_rule(vars, head, states, init, body, loc, &mut fwd, &mut chunk)?;
                    // A checkpointed loop binds its segment sizes and saved
                    // states in front of it: primal values of this block.
                    for (v, def) in std::mem::take(&mut self.setup) {
                        if let Some(d) = def.filter(|(e, _)| is_cheap(e)) {
                            defs.insert(v, d);
                        }
                        bound.push(v);
                    }
                }
                Expr::If { cond, then_branch, else_branch } => {
                    self.if_rule(vars, *cond, then_branch, else_branch, loc, &mut fwd, &mut chunk)?
                }
                _ => self.transpose(vars[0], expr, &mut chunk)?,
            }
            chunks.push(chunk);
        }

        let mut bwd = decls;
        for s in plain_seeds {
            let value = match s.value {
                Expr::Atom(a) => a,
                e => {
                    let ty = self.out.atom_ty(&s.target).with_elem(Scalar::F64);
                    self.let1(&mut bwd, "seed", e, ty)
                }
            };
            self.accumulate_from(&s.target, value, s.live, s.owned, &mut bwd);
        }
        for c in chunks.into_iter().rev() {
            bwd.extend(c);
        }

        if !nested {
            return Ok((fwd, bwd));
        }

        // Residuals: primal variables bound here that the backward code uses.
        let bound_set: HashSet<VarId> = bound.iter().copied().collect();
        let mut needed: HashSet<VarId> = HashSet::new();
        for s in &bwd {
            stmt_uses(&s.kind, &mut |v| {
                if bound_set.contains(&v) {
                    needed.insert(v);
                }
            });
        }
        let given: HashMap<VarId, VarId> = binder_twins.iter().copied().collect();
        let mut work: Vec<VarId> = needed.iter().copied().collect();
        while let Some(v) = work.pop() {
            if given.contains_key(&v) {
                continue;
            }
            if let Some((e, _)) = defs.get(&v) {
                arrayad_ir::visit::expr_uses(e, &mut |u| {
                    if bound_set.contains(&u) && needed.insert(u) {
                        work.push(u);
                    }
                });
            }
        }
        let mut taped = Vec::new();
        let mut recompute = Vec::new();
        for v in &bound {
            if !needed.contains(v) {
                continue;
            }
            if let Some(t) = given.get(v) {
                self.twins.map.insert(*v, Atom::Var(*t));
                continue;
            }
            let twin = self.new_var(&self.out.var(*v).name.clone(), self.out.ty(*v));
            self.twins.map.insert(*v, Atom::Var(twin));
            match defs.get(v) {
                Some((e, loc)) => {
                    let e = self.fresh_binders(e);
                    recompute.push(Stmt { kind: StmtKind::Let { vars: vec![*v], expr: e }, loc: *loc })
                }
                None => taped.push(*v),
            }
        }
        // An array the backward code reads only for its extents is not
        // taped (that would keep it alive): its extents are.
        let mut shapes: HashMap<VarId, Vec<VarId>> = HashMap::new();
        let mut taped_slots = Vec::new();
        for v in taped {
            let ty = self.out.ty(v);
            if ty.is_array() && shape_only(&recompute, &bwd, v) {
                let mut dims = Vec::new();
                for axis in 0..ty.rank {
                    let d = self.new_var(&format!("dim_{}", self.out.var(v).name), Type::I64);
                    fwd.push(Stmt {
                        kind: StmtKind::Let { vars: vec![d], expr: Expr::Dim { array: v, axis } },
                        loc: self.loc,
                    });
                    let twin = self.new_var(&format!("dim_{}", self.out.var(v).name), Type::I64);
                    self.twins.map.insert(d, Atom::Var(twin));
                    dims.push(d);
                }
                taped_slots.extend(dims.iter().copied());
                shapes.insert(v, dims);
            } else {
                taped_slots.push(v);
            }
        }
        let taped = taped_slots;
        if !shapes.is_empty() {
            rewrite_shapes(&mut recompute, &shapes);
            rewrite_shapes(&mut bwd, &shapes);
        }
        for v in &taped {
            self.push(&mut fwd, StmtKind::Push(Atom::Var(*v)));
        }
        let pops: Vec<Stmt> = taped
            .iter()
            .rev()
            .map(|v| Stmt { kind: StmtKind::Let { vars: vec![*v], expr: Expr::Pop }, loc: self.loc })
            .collect();
        let prefix = pops::interleave(pops, recompute.into_iter().chain(bwd).collect());
        // The backward code reads the twins: renamed once, by `unzip`.
        Ok((fwd, prefix))
    }

    /// Backward statements of one linear binding `dy = e` (the `eval` case
    /// of each Delta constructor, Krawiec et al. Fig. 10).
    fn transpose(&mut self, dy: VarId, e: &Expr, out: &mut Vec<Stmt>) -> Result<(), AdError> {
        let g = Atom::Var(self.ct[&dy]);
        match e {
            Expr::Atom(a) => {
                // A copy: its cotangent is consumed by the copied value.
                let live = self.live.get(&dy).copied();
                self.accumulate_from(a, g, live, true, out)
            }
            Expr::Unary(UnOp::Neg, a) => {
                if self.is_lin(a).is_some() {
                    let t = self.let1(out, "ct", Expr::Unary(UnOp::Neg, g), Type::F64);
                    self.accumulate(a, t, out);
                }
            }
            Expr::Binary(BinOp::Add, a, b) => {
                self.accumulate(a, g, out);
                self.accumulate(b, g, out);
            }
            Expr::Binary(BinOp::Sub, a, b) => {
                self.accumulate(a, g, out);
                if self.is_lin(b).is_some() {
                    let t = self.let1(out, "ct", Expr::Unary(UnOp::Neg, g), Type::F64);
                    self.accumulate(b, t, out);
                }
            }
            Expr::Binary(BinOp::Mul, a, b) => {
                let (l, c) = if self.is_lin(a).is_some() { (a, b) } else { (b, a) };
                if self.is_lin(l).is_some() {
                    let t = self.let1(out, "ct", Expr::Binary(BinOp::Mul, *c, g), Type::F64);
                    self.accumulate(l, t, out);
                }
            }
            Expr::Binary(BinOp::Div, a, b) => {
                if self.is_lin(a).is_some() {
                    let t = self.let1(out, "ct", Expr::Binary(BinOp::Div, g, *b), Type::F64);
                    self.accumulate(a, t, out);
                }
            }
            Expr::Index { array, indices } => {
                if let Some(&c) = self.ct.get(array) {
                    if self.out.ty(dy).is_scalar() {
                        self.need_live(*array, out);
                        self.push(out, StmtKind::AccAdd { acc: c, indices: indices.clone(), value: g });
                    } else if !self.views.contains(&dy) {
                        return Err(AdError::new("the cotangent of a row is not a view of its parent's"));
                    }
                    // A row's cotangent is a view of the parent's: its
                    // contributions are already there.
                }
            }
            Expr::Slice { array, .. } => {
                if self.ct.contains_key(array) && !self.views.contains(&dy) {
                    return Err(AdError::new("the cotangent of a slice is not a view of its parent's"));
                }
            }
            Expr::Reshape { array, .. } => {
                if self.ct.contains_key(array) && !self.views.contains(&dy) {
                    return Err(AdError::new("the cotangent of a reshape is not a view of its parent's"));
                }
            }
            Expr::Update { array, indices, value } => self.update_rule(dy, *array, indices, *value, out)?,
            Expr::Reduce { op: ReduceOp::Sum, array } => {
                if let Some(&c) = self.ct.get(array) {
                    self.need_live(*array, out);
                    let n = self.let1(out, "n", Expr::Dim { array: c, axis: 0 }, Type::I64);
                    let j = self.new_var("j", Type::I64);
                    let body = Block {
                        stmts: vec![Stmt {
                            kind: StmtKind::AccAdd { acc: c, indices: vec![Atom::Var(j)], value: g },
                            loc: self.loc,
                        }],
                        results: vec![],
                    };
                    self.push(out, StmtKind::For { n, index: j, reverse: false, body });
                }
            }
            Expr::ArrayLit { elems, elem_ty } => {
                if elems.iter().any(|el| self.is_lin(el).is_some()) {
                    self.need_live(dy, out);
                }
                for (k, el) in elems.iter().enumerate() {
                    if self.is_lin(el).is_some() {
                        let gv = g.as_var().ok_or_else(|| AdError::new("array cotangent is not a variable"))?;
                        let t = self.let1(
                            out,
                            "ct",
                            Expr::Index { array: gv, indices: vec![Atom::I64(k as i64)] },
                            elem_ty.with_elem(Scalar::F64),
                        );
                        self.accumulate(el, t, out);
                    }
                }
            }
            Expr::ZerosLike(_) | Expr::Zeros(_) => {}
            other => return Err(AdError::new(format!("no transposition rule for linear expression {other:?}"))),
        }
        Ok(())
    }

    /// `dy = dA with [indices] = dv`: the cotangent of `dv` is the result's
    /// at `indices`, that of `dA` the result's with `indices` zeroed. When
    /// the result's cotangent buffer is its own (nothing reads it after
    /// this), that position is cleared in place and the buffer handed to
    /// `dA` (O(1) when `dA`'s cotangent is still zero: a loop state updated
    /// in place costs O(1) backward too); otherwise a cleared copy is added.
    /// Nothing when the result's cotangent is a zero lazy one.
    fn update_rule(
        &mut self,
        dy: VarId,
        array: VarId,
        indices: &[Atom],
        value: Atom,
        out: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        let g = self.ct[&dy];
        let live = self.live.get(&dy).copied();
        let mut body = Vec::new();
        let row_ty = self.out.atom_ty(&value).with_elem(Scalar::F64);
        let at = Expr::Index { array: g, indices: indices.to_vec() };
        if self.is_lin(&value).is_some() {
            let t = self.let1(&mut body, "ct", at.clone(), row_ty);
            self.accumulate(&value, t, &mut body);
        }
        if self.is_lin(&Atom::Var(array)).is_some() {
            if self.owned_ct.contains(&dy) {
                self.push(&mut body, StmtKind::AccZero { acc: g, indices: indices.to_vec() });
                self.accumulate_from(&Atom::Var(array), Atom::Var(g), None, true, &mut body);
            } else {
                let zero = if row_ty.is_scalar() {
                    Atom::F64(0.0)
                } else {
                    let row = self.let1(&mut body, "ct_row", at, row_ty);
                    let row = row.as_var().ok_or_else(|| AdError::new("a row cotangent is not a variable"))?;
                    self.let1(&mut body, "zeros", Expr::ZerosLike(row), row_ty)
                };
                let ty = self.out.ty(g);
                let masked =
                    self.let1(&mut body, "ct", Expr::Update { array: g, indices: indices.to_vec(), value: zero }, ty);
                self.accumulate_from(&Atom::Var(array), masked, None, true, &mut body);
            }
        }
        match live {
            Some(l) => self.push(
                out,
                StmtKind::If {
                    cond: Atom::Var(l),
                    then_branch: Block { stmts: body, results: vec![] },
                    else_branch: Block::default(),
                },
            ),
            None => out.extend(body),
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn build_rule(
        &mut self,
        vars: &[VarId],
        n: Atom,
        index: VarId,
        body: &Block,
        loc: Loc,
        fwd: &mut Vec<Stmt>,
        chunk: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        let ib = self.new_var("i", Type::I64);
        let mut seeds = Vec::new();
        for (k, v) in vars.iter().enumerate() {
            if self.linear.contains(v) {
                let c = self.ct[v];
                seeds.push(Seed {
                    target: body.results[k],
                    value: Expr::Index { array: c, indices: vec![Atom::Var(ib)] },
                    alias: true,
                    live: None,
                    owned: false,
                });
            }
        }
        let saved = std::mem::take(&mut self.pending);
        self.for_depth += 1;
        let body_result = self.block(body, true, &[index], &[(index, ib)], vec![], seeds);
        self.for_depth -= 1;
        let (fbody, bbody) = body_result?;
        self.flush_pending(saved, chunk);
        // The backward loop reads the rows of the result's cotangents.
        for v in vars.iter().filter(|v| self.linear.contains(v)) {
            self.need_live(*v, chunk);
        }
        let pvars: Vec<VarId> = vars.iter().copied().filter(|v| !self.linear.contains(v)).collect();
        let presults: Vec<Atom> =
            vars.iter().zip(&body.results).filter(|(v, _)| !self.linear.contains(v)).map(|(_, r)| *r).collect();
        let fblock = Block { stmts: fbody, results: presults };
        if !pvars.is_empty() {
            fwd.push(Stmt { kind: StmtKind::Let { vars: pvars, expr: Expr::Build { n, index, body: fblock } }, loc });
        } else if arrayad_ir::passes::dce::block_has_effect(&fblock) {
            fwd.push(Stmt { kind: StmtKind::For { n, index, reverse: false, body: fblock }, loc });
        }
        chunk.push(Stmt {
            kind: StmtKind::For { n, index: ib, reverse: true, body: Block { stmts: bbody, results: vec![] } },
            loc,
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn loop_rule(
        &mut self,
        vars: &[VarId],
        head: LoopHead<'_>,
        states: &[VarId],
        init: &[Atom],
        body: &Block,
        loc: Loc,
        fwd: &mut Vec<Stmt>,
        chunk: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        // A while loop runs back over its recorded trip count; its index
        // (unused by its body) is fresh.
        let (n, index) = match head {
            LoopHead::Counted(n, index) => (Some(n), index),
            LoopHead::While(_) => (None, self.new_var("i", Type::I64)),
        };
        let ib = self.new_var("i", Type::I64);
        let mut binders = vec![index];
        let mut lin_binders = Vec::new();
        let mut seeds = Vec::new();
        let mut carriers = Vec::new();
        for (k, st) in states.iter().enumerate() {
            if self.linear.contains(st) {
                let ty = self.out.ty(*st).with_elem(Scalar::F64);
                let cs = self.out.new_mut_var("ct_state", ty);
                chunk.push(Stmt {
                    kind: StmtKind::Let { vars: vec![cs], expr: Expr::Atom(Atom::Var(self.ct[&vars[k]])) },
                    loc: self.loc,
                });
                // An array carrier has a flag too: false while it is zero.
                let cl = if ty.is_array() {
                    let cl = self.out.new_mut_var("live_state", Type::BOOL);
                    let init_live = match self.live.get(&vars[k]) {
                        Some(f) => Atom::Var(*f),
                        None => Atom::Bool(true),
                    };
                    chunk.push(Stmt {
                        kind: StmtKind::Let { vars: vec![cl], expr: Expr::Atom(init_live) },
                        loc: self.loc,
                    });
                    Some(cl)
                } else {
                    None
                };
                // The incoming state's cotangent is shaped like the incoming
                // state (`declare_ct` zeroes one like the primal state, a
                // residual of the iteration), not like the carrier: a state
                // may change its extents from one iteration to the next.
                lin_binders.push((*st, Decl::Zero));
                // The carrier is consumed by this seed alone: the target may
                // take it as its accumulator.
                seeds.push(Seed {
                    target: body.results[k],
                    value: Expr::Atom(Atom::Var(cs)),
                    alias: true,
                    live: cl,
                    owned: true,
                });
                carriers.push((k, cs, cl));
            } else {
                binders.push(*st);
            }
        }
        // After the body's bindings ran backward, the carriers take the
        // cotangents of this iteration's incoming states.
        let saved = std::mem::take(&mut self.pending);
        self.for_depth += 1;
        let body_result = self.block(body, true, &binders, &[(index, ib)], lin_binders, seeds);
        self.for_depth -= 1;
        let (fbody, mut bbody) = body_result?;
        self.flush_pending(saved, chunk);
        for (k, cs, cl) in &carriers {
            let c = self.ct[&states[*k]];
            bbody.push(Stmt { kind: StmtKind::Assign { var: *cs, value: Atom::Var(c) }, loc: self.loc });
            if let Some(cl) = cl {
                let live = match self.live.get(&states[*k]) {
                    Some(f) => Atom::Var(*f),
                    None => Atom::Bool(true),
                };
                bbody.push(Stmt { kind: StmtKind::Assign { var: *cl, value: live }, loc: self.loc });
            }
        }
        let pidx: Vec<usize> = (0..states.len()).filter(|k| !self.linear.contains(&states[*k])).collect();
        let pvars: Vec<VarId> = pidx.iter().map(|k| vars[*k]).collect();
        let pstates: Vec<VarId> = pidx.iter().map(|k| states[*k]).collect();
        let presults: Vec<Atom> = pidx.iter().map(|k| body.results[*k]).collect();
        if self.checkpoint {
            if let Some(reason) = checkpoint::not_applicable(&self.out, &head, &pstates) {
                self.uncheckpointed.push(crate::Uncheckpointed { loc, reason });
            }
        }
        if let (LoopHead::Counted(n, _), true) = (head, self.checkpoint && checkpoint::applies(&self.out, &pstates)) {
            let parts = checkpoint::LoopParts {
                n,
                index,
                index_twin: ib,
                vars: pvars,
                states: pstates,
                init: pidx.iter().map(|k| init[*k]).collect(),
                fwd: fbody,
                results: presults,
                bwd: bbody,
                loc,
            };
            let before = fwd.len();
            checkpoint::checkpointed(&mut self.out, parts, fwd, chunk);
            // Every binding but the last statement (the loop) is setup.
            for s in &fwd[before..fwd.len() - 1] {
                if let StmtKind::Let { vars, expr } = &s.kind {
                    for v in vars {
                        self.setup.push((*v, (vars.len() == 1).then(|| (expr.clone(), s.loc))));
                    }
                }
            }
        } else if let LoopHead::While(cond) = head {
            // Forward: the loop with a trip counter; backward: a reverse
            // counted loop over the trip count.
            let count = self.new_var("trips", Type::I64);
            let counter = self.new_var("trip", Type::I64);
            let next = self.new_var("trip", Type::I64);
            let mut stmts = vec![
                Stmt { kind: StmtKind::Let { vars: vec![index], expr: Expr::Atom(Atom::Var(counter)) }, loc },
                Stmt {
                    kind: StmtKind::Let {
                        vars: vec![next],
                        expr: Expr::Binary(BinOp::Add, Atom::Var(counter), Atom::I64(1)),
                    },
                    loc,
                },
            ];
            stmts.extend(fbody);
            let mut results = presults;
            results.push(Atom::Var(next));
            let mut all_vars = pvars;
            all_vars.push(count);
            self.setup.push((count, None));
            let mut all_states = pstates;
            all_states.push(counter);
            let mut all_init: Vec<Atom> = pidx.iter().map(|k| init[*k]).collect();
            all_init.push(Atom::I64(0));
            fwd.push(Stmt {
                kind: StmtKind::Let {
                    vars: all_vars,
                    expr: Expr::While {
                        states: all_states,
                        init: all_init,
                        cond: cond.clone(),
                        body: Block { stmts, results },
                    },
                },
                loc,
            });
            chunk.push(Stmt {
                kind: StmtKind::For {
                    n: Atom::Var(count),
                    index: ib,
                    reverse: true,
                    body: Block { stmts: bbody, results: vec![] },
                },
                loc,
            });
        } else {
            let n = n.unwrap_or(Atom::I64(0));
            let fblock = Block { stmts: fbody, results: presults };
            if !pvars.is_empty() {
                fwd.push(Stmt {
                    kind: StmtKind::Let {
                        vars: pvars,
                        expr: Expr::Loop {
                            n,
                            index,
                            states: pstates,
                            init: pidx.iter().map(|k| init[*k]).collect(),
                            body: fblock,
                        },
                    },
                    loc,
                });
            } else if arrayad_ir::passes::dce::block_has_effect(&fblock) {
                fwd.push(Stmt { kind: StmtKind::For { n, index, reverse: false, body: fblock }, loc });
            }
            chunk.push(Stmt {
                kind: StmtKind::For { n, index: ib, reverse: true, body: Block { stmts: bbody, results: vec![] } },
                loc,
            });
        }
        for (k, cs, cl) in carriers {
            self.accumulate_from(&init[k], Atom::Var(cs), cl, true, chunk);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn if_rule(
        &mut self,
        vars: &[VarId],
        cond: Atom,
        then_branch: &Block,
        else_branch: &Block,
        loc: Loc,
        fwd: &mut Vec<Stmt>,
        chunk: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        let mut branches = Vec::new();
        for br in [then_branch, else_branch] {
            let seeds: Vec<Seed> = vars
                .iter()
                .enumerate()
                .filter(|(_, v)| self.linear.contains(v))
                .map(|(k, v)| Seed {
                    target: br.results[k],
                    value: Expr::Atom(Atom::Var(self.ct[v])),
                    alias: true,
                    live: self.live.get(v).copied(),
                    owned: true,
                })
                .collect();
            let (f, b) = self.block(br, true, &[], &[], vec![], seeds)?;
            let presults: Vec<Atom> =
                vars.iter().zip(&br.results).filter(|(v, _)| !self.linear.contains(v)).map(|(_, r)| *r).collect();
            branches.push((Block { stmts: f, results: presults }, Block { stmts: b, results: vec![] }));
        }
        let (fe, be) = branches.pop().expect("two branches");
        let (ft, bt) = branches.pop().expect("two branches");
        let pvars: Vec<VarId> = vars.iter().copied().filter(|v| !self.linear.contains(v)).collect();
        if !pvars.is_empty() {
            fwd.push(Stmt {
                kind: StmtKind::Let { vars: pvars, expr: Expr::If { cond, then_branch: ft, else_branch: fe } },
                loc,
            });
        } else if arrayad_ir::passes::dce::block_has_effect(&ft) || arrayad_ir::passes::dce::block_has_effect(&fe) {
            fwd.push(Stmt { kind: StmtKind::If { cond, then_branch: ft, else_branch: fe }, loc });
        }
        chunk.push(Stmt { kind: StmtKind::If { cond, then_branch: bt, else_branch: be }, loc });
        Ok(())
    }
}
