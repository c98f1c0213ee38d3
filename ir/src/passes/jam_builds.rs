//! Unroll-and-jam of comprehensions of numbers: two points of
//! `a = build i < n => body` computed in one iteration, so that the loops
//! inside `body` run for both points at once, as two independent chains of
//! arithmetic that share their loop control and their loads of whatever
//! does not depend on the point (register blocking of a map of
//! reductions: a matrix-vector product per point becomes a product with
//! two vectors).
//!
//! GMM's primal computes, for every point `i`,
//!
//! ```text
//! let terms = build k < K => {
//!   let xc = build c < D => x[i, c] - means[k, c]
//!   let qx = build r < D => qdiags[k, r] * xc[r] + sum(build c < r => lower_qs[k, r, c] * xc[c])
//!   in alphas[k] + sum_qs[k] - 0.5 * sum(build r < D => qx[r] * qx[r]) }
//! in logsumexp(terms)
//! ```
//!
//! Each row of `qx` is a short sum whose length changes from one row to
//! the next: a chain of additions that waits on its own latency, ended by
//! a loop exit the branch predictor keeps missing. Jammed, the
//! comprehension over the points becomes
//!
//! ```text
//! let pairs = N / 2; let paired = pairs * 2; let odd = N - paired
//! let a0, a1 = build pair < pairs => {
//!   let twice = pair * 2; let i0 = twice + 0; let i1 = twice + 1
//!   let terms0, terms1 = build k < K => {
//!     let xc0, xc1 = build c < D => (x[i0, c] - means[k, c], x[i1, c] - means[k, c])
//!     let qx0, qx1 = build r < D => { .. sum(p0), sum(p1) of one build c < r .. }
//!     .. }
//!   .. logsumexp(terms0), logsumexp(terms1) }
//! let last = if odd > 0 then { let i = N - 1; body } else { 0.0 }
//! let a = build i < N => if i < paired then (if i is odd then a1 else a0)[i / 2] else last
//! ```
//!
//! where the row of the factor is read once for both points and the two
//! sums of one comprehension are computed in one loop
//! (`BlockFacts::fused_sum` in code generation), each with its own partial
//! sums. The last comprehension puts `n` numbers in order: it costs little
//! against bodies with loops in them, which is what this pass asks for.
//! Of a nest of comprehensions that qualify, the outermost is jammed (the
//! points, whose inner comprehensions then run for two points).
//!
//! # Rows of residuals
//!
//! The forward pass of a gradient computes the same loop nest as the
//! primal and keeps, per point, the rows its backward pass reads (GMM's
//! `Q_k (x_i - mu_k)` for every component: `[N][K][D]`). Putting such rows
//! in order after a jammed comprehension would copy them all once more, so
//! a comprehension at the top of a function whose results are rows of
//! `f64`s, one of them at least of numbers, with extents that do not
//! depend on the point ([`crate::shape::static_row_dims`]), is jammed
//! another way (`jam_rows`): each pair yields its two points' rows
//! stacked (`[r0, r1]`), an odd count computes its last point twice (the
//! second time as the second point of the last pair, `min(2 pair + 1, n -
//! 1)`), and each result is the stacked array viewed as one row per point,
//! `reshape(s, [2 pairs, rows..])[0:n]`, with no pass over the rows to put
//! them in order (code generation computes each row in its place in the
//! pair's literal, and the literal in its place in the stacked array:
//! `arrayad_codegen`'s `placed.rs`). The extents of the rows must be known
//! not negative before the comprehension runs (`never_negative`).
//!
//! # Legality
//!
//! A comprehension `let a.. = build i < n => body` is jammed when
//!
//! - its results are `f64` numbers (at most [`MAX_RESULTS`] of them), or,
//!   at the top of a function, arrays of `f64` rows whose extents do not
//!   depend on `i`, one of them at least of numbers;
//! - `n` is known to be at least 0 ([`super::fallible`]), and every
//!   statement at the top of `body` that may fail is a `maximum` or
//!   `minimum` of an array whose length does not depend on `i`, or a size
//!   check of two values that do not (each fails for every point or for
//!   none, with one message); every other statement may not fail. So the
//!   first error of the jammed comprehension, if any, is the first of
//!   these for its first point, as it was (and computing a point twice
//!   changes nothing);
//! - `body` is made of `let`s only (but for those size checks), at every
//!   depth, of expressions that
//!   neither call, allocate accumulators, update arrays, loop, nor touch
//!   the tape: the value of every binding is a function of the values it
//!   reads, wherever it is computed;
//! - `body` has a comprehension at its top level whose count does not
//!   depend on `i` (something both points share), and at most
//!   [`MAX_STMTS`] statements.
//!
//! Then every number is computed by the same operations on the same
//! operands as before: a statement that does not depend on `i` once for
//! both points, a comprehension whose count does not depend on `i` as one
//! comprehension with the results of both (its body interleaved the same
//! way), any other statement for the first point, then for the second.
//! Sums keep their order of summation. The results are those of the
//! comprehension as it was, bit for bit, on every backend and for every
//! number of threads.
//!
//! Before the checks, inside the bodies of comprehensions of numbers, the
//! extent of a slice `s = a[0:hi]` along its first axis is `hi`
//! (the slice was taken, so `0 <= hi <= dim a 0`), and a size check of a
//! size against itself is dropped: a `dot` of two slices of a row's length
//! checks their lengths equal, and the products' count becomes the row's.
//!
//! Code generation runs the pass on every function it compiles, before it
//! splits out parallel maps (`arrayad_codegen`'s `schedule.rs`): a jammed
//! function is no input for differentiation, which has no rule for a
//! primal comprehension of several results, and a jammed comprehension
//! runs in parallel as a map over pairs.

use super::jam::{each, once, shared_index};
use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, Loc, ReduceOp, Stmt, StmtKind, VarId};
use crate::shape::StaticDim;
use crate::types::Type;
use crate::visit::{expr_uses, for_each_block, Subst};

/// Bodies with more statements than this (at every depth) are not jammed:
/// the jammed comprehension holds two copies of most of them.
pub const MAX_STMTS: usize = 200;

/// The most results of a jammed comprehension: the jammed one has twice as
/// many, each summed in one fused loop when the original's were
/// (`arrayad_codegen`'s `MAX_FUSED_SUMS` is 16).
pub const MAX_RESULTS: usize = 8;

/// Comprehensions nested in more blocks than this are not looked at.
const MAX_DEPTH: usize = 8;

/// Jams the comprehensions of numbers of `f` that qualify (module docs),
/// the outermost of a nest; returns whether it jammed any. Linear in the
/// size of `f` (each comprehension's checks look at most at [`MAX_STMTS`]
/// statements, and a jammed body is copied at most twice).
pub fn jam_comprehensions(f: &mut Function) -> bool {
    if !has_candidates(f) {
        return false;
    }
    let mut body = std::mem::take(&mut f.body);
    canonicalise_sizes(f, &mut body, 0);
    f.body = body;
    let known = Known { fallible: super::fallible::analyse(f), extents: top_level_extents(f) };
    let body = std::mem::take(&mut f.body);
    let mut jammed = false;
    f.body = block(f, &known, body, 0, &mut jammed);
    jammed
}

/// What the checks of [`jammable`] know of `f`.
struct Known {
    /// Which statements may fail, and which counts are at least 0.
    fallible: super::fallible::Fallible,
    /// The variables bound at the top of `f` to an extent of an array
    /// (`let v = dim a axis`): never negative.
    extents: HashSet<VarId>,
}

/// The immutable variables bound at the top of `f` by `dim`.
fn top_level_extents(f: &Function) -> HashSet<VarId> {
    let mut extents = HashSet::default();
    for s in &f.body.stmts {
        if let StmtKind::Let { vars, expr: Expr::Dim { .. } } = &s.kind {
            extents.extend(vars.iter().copied().filter(|v| !f.var(*v).mutable));
        }
    }
    extents
}

/// True when the extent `d` is at least 0 before a comprehension at the
/// top of the function runs: a literal at least 0, an array's extent, or
/// a variable bound to one (a count that the comprehension's body proves
/// not negative may still be negative when it runs zero times, where a
/// row's extent is taken as 0, and a `reshape` would fail on it).
fn never_negative(extents: &HashSet<VarId>, d: &StaticDim) -> bool {
    match d {
        StaticDim::Lit(c) => *c >= 0,
        StaticDim::DimOf(..) => true,
        StaticDim::Var(v) => extents.contains(v),
        StaticDim::Bin(..) => false,
    }
}

/// True when `f` has a comprehension this pass may jam (a quick test of its
/// shape, before [`jam_comprehensions`]'s analyses).
pub fn has_candidates(f: &Function) -> bool {
    let mut any = false;
    for_each_block(&f.body, &mut |b| any |= b.stmts.iter().any(|s| numbers_with_loops(f, &s.kind)));
    any
}

/// True when `s` binds a `build` of [`numbers_or_rows`] of at most
/// [`MAX_STMTS`] statements with a `build` at the top level of its body.
fn numbers_with_loops(f: &Function, s: &StmtKind) -> bool {
    let StmtKind::Let { vars, expr: Expr::Build { body, .. } } = s else { return false };
    numbers_or_rows(f, vars, body)
        && body.stmts.iter().any(|s| matches!(s.kind, StmtKind::Let { expr: Expr::Build { .. }, .. }))
        && small(body)
}

/// True when `vars = build .. => body` binds at most [`MAX_RESULTS`]
/// immutable arrays of `f64`s, at least one of them of numbers (the
/// others may be of rows: the residuals a reverse pass keeps per point).
fn numbers_or_rows(f: &Function, vars: &[VarId], body: &Block) -> bool {
    (1..=MAX_RESULTS).contains(&vars.len())
        && vars.iter().all(|v| !f.var(*v).mutable)
        && body.results.iter().all(|r| f.atom_ty(r).elem == crate::Scalar::F64)
        && body.results.iter().any(|r| f.atom_ty(r) == Type::F64)
}

/// True when `b` has at most [`MAX_STMTS`] statements (at every depth).
fn small(b: &Block) -> bool {
    let mut budget = MAX_STMTS;
    at_most(b, &mut budget)
}

/// True when `b` has at most `budget` statements (at every depth): a walk
/// of at most that many statements, whatever the size of `b`.
fn at_most(b: &Block, budget: &mut usize) -> bool {
    for s in &b.stmts {
        let Some(left) = budget.checked_sub(1) else { return false };
        *budget = left;
        if !crate::visit::child_blocks(&s.kind).all(|nb| at_most(nb, budget)) {
            return false;
        }
    }
    true
}

/// In the bodies of the comprehensions of [`numbers_with_loops`] in `b` (up
/// to [`MAX_DEPTH`]): `dim s 0` of a slice `s = a[0:hi]` replaced by `hi`,
/// and `check_size x == x` dropped (module docs).
fn canonicalise_sizes(f: &Function, b: &mut Block, depth: usize) {
    if depth >= MAX_DEPTH {
        return;
    }
    for s in &mut b.stmts {
        if numbers_with_loops(f, &s.kind) {
            if let StmtKind::Let { expr: Expr::Build { body, .. }, .. } = &mut s.kind {
                slice_lengths(body);
            }
            continue;
        }
        for nb in crate::visit::child_blocks_mut(&mut s.kind) {
            canonicalise_sizes(f, nb, depth + 1);
        }
    }
}

/// [`canonicalise_sizes`] of one body: the lengths of its zero-based slices
/// substituted for their `dim`s, at every depth.
fn slice_lengths(body: &mut Block) {
    let mut his: HashMap<VarId, Atom> = HashMap::default();
    let mut lengths = Subst::default();
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { vars, expr: Expr::Slice { lo: Atom::I64(0), hi, .. } } => {
                    his.insert(vars[0], *hi);
                }
                StmtKind::Let { vars, expr: Expr::Dim { array, axis: 0 } } => {
                    if let Some(hi) = his.get(array) {
                        // In program order, so `hi` is itself resolved.
                        lengths.map.insert(vars[0], lengths.atom(hi));
                    }
                }
                _ => {}
            }
        }
    });
    if lengths.map.is_empty() {
        return;
    }
    // The `dim`s go first: the substitution renames binders too.
    crate::visit::for_each_block_mut(body, &mut |b| {
        b.stmts.retain(|s| match &s.kind {
            StmtKind::Let { vars, expr: Expr::Dim { .. } } => !lengths.map.contains_key(&vars[0]),
            _ => true,
        });
    });
    *body = lengths.block(body);
    crate::visit::for_each_block_mut(body, &mut |b| {
        b.stmts.retain(|s| !matches!(&s.kind, StmtKind::CheckSize { a, b, .. } if a == b));
    });
}

/// `b` with its qualifying comprehensions jammed, the outermost of each
/// nest, up to [`MAX_DEPTH`].
fn block(f: &mut Function, known: &Known, b: Block, depth: usize, jammed: &mut bool) -> Block {
    let mut out = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let loc = s.loc;
        let plan = match &s.kind {
            StmtKind::Let { vars, expr: Expr::Build { index, body, .. } } => {
                // Rows are stacked at the top of a function only (a
                // forward pass's residuals): a nest's inner comprehension
                // of rows runs for one point of the outer one, which a
                // parallel map splits out whole.
                jammable(f, known, vars, *index, body).filter(|plan| plan.rows.is_none() || depth == 0)
            }
            _ => None,
        };
        match (s.kind, plan) {
            (StmtKind::Let { vars, expr: Expr::Build { n, index, body } }, Some(plan)) => {
                *jammed = true;
                match plan.rows {
                    None => jam(f, vars, n, index, body, &plan.variant, loc, &mut out),
                    Some(rows) => jam_rows(f, vars, n, index, body, &plan.variant, &rows, loc, &mut out),
                }
            }
            (kind, _) if depth < MAX_DEPTH => {
                let kind = super::inline::map_nested(kind, &mut |nb| block(f, known, nb, depth + 1, jammed));
                out.push(Stmt { kind, loc });
            }
            (kind, _) => out.push(Stmt { kind, loc }),
        }
    }
    Block { stmts: out, results: b.results }
}

/// How a comprehension that qualifies is jammed.
struct Plan {
    /// The variables of its body that depend on the point.
    variant: HashSet<VarId>,
    /// With results of rows: the extents of every result's row (none for
    /// a number), the same for every point ([`jam_rows`]).
    rows: Option<Vec<Vec<StaticDim>>>,
}

/// How to jam `let vars = build index < n => body`, when it qualifies
/// (module docs).
fn jammable(f: &Function, known: &Known, vars: &[VarId], index: VarId, body: &Block) -> Option<Plan> {
    let fallible = &known.fallible;
    if !numbers_or_rows(f, vars, body) || !fallible.count_nonneg(vars[0]) || !small(body) || !pure_lets(f, body) {
        return None;
    }
    // Rows whose extents do not depend on the point, so that they stack
    // into one regular array wherever they are computed.
    let rows = if body.results.iter().all(|r| f.atom_ty(r).is_scalar()) {
        None
    } else {
        let dims: Option<Vec<Vec<StaticDim>>> =
            (0..body.results.len()).map(|k| crate::shape::static_row_dims(f, None, index, body, k)).collect();
        let dims = dims?;
        if !dims.iter().flatten().all(|d| never_negative(&known.extents, d)) {
            return None;
        }
        Some(dims)
    };
    let mut variant = HashSet::default();
    variant.insert(index);
    mark_variant(body, &mut variant);
    let invariant = |a: &Atom| a.as_var().is_none_or(|v| !variant.contains(&v));
    // Arrays whose length does not depend on the point: made at the top of
    // the body by comprehensions over counts that do not.
    let mut uniform: HashSet<VarId> = HashSet::default();
    let mut shared = false;
    for s in &body.stmts {
        // A size check of values that do not depend on the point fails
        // for every point or for none, with one message (a gathered
        // array's extents, checked in the body that reads it).
        if let StmtKind::CheckSize { a, b, .. } = &s.kind {
            if invariant(a) && invariant(b) {
                continue;
            }
            return None;
        }
        let StmtKind::Let { vars, expr } = &s.kind else { return None };
        if let Expr::Build { n, .. } = expr {
            if invariant(n) {
                shared = true;
                uniform.extend(vars.iter().copied());
            }
        }
        if fallible.stmt(&s.kind) {
            // The one failure allowed: an extreme of an empty array, which
            // fails for every point or for none, with one message.
            match expr {
                Expr::Reduce { op: ReduceOp::Max | ReduceOp::Min, array }
                    if !variant.contains(array) || uniform.contains(array) => {}
                _ => return None,
            }
        }
    }
    shared.then_some(Plan { variant, rows })
}

/// True when `b` is made of `let`s only, at every depth, of immutable
/// variables and of expressions whose values depend only on their operands
/// (module docs), but for size checks at its top level (which
/// [`jammable`] checks further).
fn pure_lets(f: &Function, b: &Block) -> bool {
    let mut pure = true;
    let top = b as *const Block;
    for_each_block(b, &mut |b| {
        pure &= b.stmts.iter().all(|s| match &s.kind {
            StmtKind::CheckSize { .. } => std::ptr::eq(b, top),
            StmtKind::Let { vars, expr } => {
                vars.iter().all(|v| !f.var(*v).mutable)
                    && matches!(
                        expr,
                        Expr::Atom(_)
                            | Expr::Unary(..)
                            | Expr::Binary(..)
                            | Expr::Index { .. }
                            | Expr::Slice { .. }
                            | Expr::Dim { .. }
                            | Expr::Reduce { .. }
                            | Expr::ArrayLit { .. }
                            | Expr::Reshape { .. }
                            | Expr::Build { .. }
                            | Expr::If { .. }
                    )
            }
            _ => false,
        });
    });
    pure
}

/// Adds to `variant` the variables bound in `b` (at every depth) whose
/// values depend on one of it.
fn mark_variant(b: &Block, variant: &mut HashSet<VarId>) {
    for s in &b.stmts {
        for nb in crate::visit::child_blocks(&s.kind) {
            mark_variant(nb, variant);
        }
        let StmtKind::Let { vars, expr } = &s.kind else { continue };
        let mut depends = false;
        expr_uses(expr, &mut |u| depends |= variant.contains(&u));
        if depends {
            variant.extend(vars.iter().copied());
        }
    }
}

/// Appends to `out` the jammed form of `let vars = build index < n =>
/// body` (module docs), which binds `vars` as the original did.
#[allow(clippy::too_many_arguments)]
fn jam(
    f: &mut Function,
    vars: Vec<VarId>,
    n: Atom,
    index: VarId,
    body: Block,
    variant: &HashSet<VarId>,
    loc: Loc,
    out: &mut Vec<Stmt>,
) {
    let let_ = |vars: Vec<VarId>, expr: Expr| Stmt { kind: StmtKind::Let { vars, expr }, loc };
    let bin = |op: BinOp, a: Atom, b: Atom| Expr::Binary(op, a, b);
    let i64_var = |f: &mut Function, name: &str| f.new_var(name, Type::I64);
    let (h, e, odd) = super::jam::pair_counts(f, n, loc, out);

    // The pairs: points `2 pair` and `2 pair + 1`.
    let (p, stmts, copies) = pair_body(f, index, &body, variant, None, loc);
    let name = f.var(index).name.clone();
    let results: Vec<Atom> = copies.iter().flat_map(|c| body.results.iter().map(|r| c.atom(r))).collect();
    let halves: [Vec<VarId>; 2] =
        std::array::from_fn(|_| vars.iter().map(|v| (f.var(*v).name.clone(), f.var(*v).ty)).collect::<Vec<_>>())
            .map(|named| named.into_iter().map(|(name, ty)| f.new_var(name, ty)).collect());
    out.push(let_(halves.concat(), Expr::Build { n: Atom::Var(h), index: p, body: Block { stmts, results } }));

    // The last point of an odd count: the original body, its index bound
    // to it (the fallible analysis knows `n - 1` in `0..n` when `odd > 0`).
    let has_odd = f.new_var("has_odd", Type::BOOL);
    out.push(let_(vec![has_odd], bin(BinOp::Gt, Atom::Var(odd), Atom::I64(0))));
    let last: Vec<VarId> = vars.iter().map(|v| f.new_var(format!("{}_last", f.var(*v).name), Type::F64)).collect();
    let mut rest = vec![let_(vec![index], bin(BinOp::Sub, n, Atom::I64(1)))];
    rest.extend(body.stmts);
    out.push(let_(
        last.clone(),
        Expr::If {
            cond: Atom::Var(has_odd),
            then_branch: Block { stmts: rest, results: body.results },
            else_branch: Block { stmts: Vec::new(), results: vec![Atom::F64(0.0); vars.len()] },
        },
    ));

    // The results in the order of the points.
    let j = i64_var(f, &name);
    let (q, q2, bit) = (i64_var(f, "pair"), i64_var(f, "twice"), i64_var(f, "second"));
    let (in_pairs, is_second) = (f.new_var("in_pairs", Type::BOOL), f.new_var("is_second", Type::BOOL));
    let fresh_f64s = |f: &mut Function| -> Vec<VarId> { vars.iter().map(|_| f.new_var("elem", Type::F64)).collect() };
    let (picked, from0, from1) = (fresh_f64s(f), fresh_f64s(f), fresh_f64s(f));
    let read = |half: &[VarId], to: &[VarId]| -> Vec<Stmt> {
        half.iter()
            .zip(to)
            .map(|(a, v)| let_(vec![*v], Expr::Index { array: *a, indices: vec![Atom::Var(q)] }))
            .collect()
    };
    let atoms = |vs: &[VarId]| vs.iter().map(|v| Atom::Var(*v)).collect::<Vec<_>>();
    let paired_branch = Block {
        stmts: vec![
            let_(vec![q], bin(BinOp::Div, Atom::Var(j), Atom::I64(2))),
            let_(vec![q2], bin(BinOp::Mul, Atom::Var(q), Atom::I64(2))),
            let_(vec![bit], bin(BinOp::Sub, Atom::Var(j), Atom::Var(q2))),
            let_(vec![is_second], bin(BinOp::Gt, Atom::Var(bit), Atom::I64(0))),
            let_(
                picked.clone(),
                Expr::If {
                    cond: Atom::Var(is_second),
                    then_branch: Block { stmts: read(&halves[1], &from1), results: atoms(&from1) },
                    else_branch: Block { stmts: read(&halves[0], &from0), results: atoms(&from0) },
                },
            ),
        ],
        results: atoms(&picked),
    };
    let ordered: Vec<VarId> = fresh_f64s(f);
    out.push(let_(
        vars,
        Expr::Build {
            n,
            index: j,
            body: Block {
                stmts: vec![
                    let_(vec![in_pairs], bin(BinOp::Lt, Atom::Var(j), Atom::Var(e))),
                    let_(
                        ordered.clone(),
                        Expr::If {
                            cond: Atom::Var(in_pairs),
                            then_branch: paired_branch,
                            else_branch: Block { stmts: Vec::new(), results: atoms(&last) },
                        },
                    ),
                ],
                results: atoms(&ordered),
            },
        },
    ));
}

/// The body of the comprehension over pairs of points of `build index < n
/// => body`: the pair's index, its statements (`body`'s for both points,
/// [`interleave`]d) and the substitutions that give each point's values.
/// The points are `2 pair` and `2 pair + 1`, or, with `last`, `2 pair` and
/// `min(2 pair + 1, last)`.
fn pair_body(
    f: &mut Function,
    index: VarId,
    body: &Block,
    variant: &HashSet<VarId>,
    last: Option<Atom>,
    loc: Loc,
) -> (VarId, Vec<Stmt>, [Subst; 2]) {
    let let_ = |vars: Vec<VarId>, expr: Expr| Stmt { kind: StmtKind::Let { vars, expr }, loc };
    let p = f.new_var("pair", Type::I64);
    let name = f.var(index).name.clone();
    let (first, second) = (f.new_var(&name, Type::I64), f.new_var(&name, Type::I64));
    let twice = f.new_var("twice", Type::I64);
    let mut stmts = vec![
        let_(vec![twice], Expr::Binary(BinOp::Mul, Atom::Var(p), Atom::I64(2))),
        let_(vec![first], Expr::Binary(BinOp::Add, Atom::Var(twice), Atom::I64(0))),
    ];
    match last {
        None => stmts.push(let_(vec![second], Expr::Binary(BinOp::Add, Atom::Var(twice), Atom::I64(1)))),
        Some(last) => {
            let next = f.new_var("next", Type::I64);
            stmts.push(let_(vec![next], Expr::Binary(BinOp::Add, Atom::Var(twice), Atom::I64(1))));
            stmts.push(let_(vec![second], Expr::Binary(BinOp::Min, Atom::Var(next), last)));
        }
    }
    let mut copies = [Subst::default(), Subst::default()];
    copies[0].map.insert(index, Atom::Var(first));
    copies[1].map.insert(index, Atom::Var(second));
    interleave(f, body, variant, &mut copies, &mut stmts);
    (p, stmts, copies)
}

/// Appends to `out` the jammed form of `let vars = build index < n =>
/// body` whose results are rows (`rows`: their extents, the same for every
/// point; numbers among them have none), which binds `vars` as the
/// original did, without a pass that copies the rows into the order of
/// the points (code generation computes each row in its place in the
/// pair's literal, and the literal in its place in the stacked array):
///
/// ```text
/// let count = n / 2 + (n - 2 (n / 2)); let last = n - 1   // this shape: `Halving::Pairs`
/// let s.. = build pair < count => {
///   let i0 = 2 pair; let i1 = min(2 pair + 1, last)
///   .. body for both points ..
///   yield [r0, r1].. }                  // s: [count][2][rows..]
/// let a = reshape(s, [2 count, rows..])[0:n]..
/// ```
///
/// An odd `n` computes its last point twice, the second time as the pair's
/// second point, which the slice then leaves out: the body is pure, and
/// fails, if at all, for every point alike (module docs), so the values
/// and the first error are the original's. The rows' extents are never
/// negative ([`never_negative`]), and a shape with an extent 0 has no
/// elements whatever its other extents (`ops::element_count`), so the
/// reshape's product is the stacked array's element count, which that
/// array's allocation checked first. The reshape and the slice are views
/// of the stacked array.
#[allow(clippy::too_many_arguments)]
fn jam_rows(
    f: &mut Function,
    vars: Vec<VarId>,
    n: Atom,
    index: VarId,
    body: Block,
    variant: &HashSet<VarId>,
    rows: &[Vec<StaticDim>],
    loc: Loc,
    out: &mut Vec<Stmt>,
) {
    let let_ = |vars: Vec<VarId>, expr: Expr| Stmt { kind: StmtKind::Let { vars, expr }, loc };
    let (h, _, odd) = super::jam::pair_counts(f, n, loc, out);
    let (count, last, points) =
        (f.new_var("pairs", Type::I64), f.new_var("last", Type::I64), f.new_var("points", Type::I64));
    out.push(let_(vec![count], Expr::Binary(BinOp::Add, Atom::Var(h), Atom::Var(odd))));
    out.push(let_(vec![last], Expr::Binary(BinOp::Sub, n, Atom::I64(1))));
    let (p, mut stmts, copies) = pair_body(f, index, &body, variant, Some(Atom::Var(last)), loc);
    let mut results = Vec::with_capacity(body.results.len());
    for r in &body.results {
        let ty = f.atom_ty(r);
        let both = f.new_var("both", Type::array(ty.elem, ty.rank + 1));
        stmts.push(let_(vec![both], Expr::ArrayLit { elem_ty: ty, elems: vec![copies[0].atom(r), copies[1].atom(r)] }));
        results.push(Atom::Var(both));
    }
    let stacked: Vec<VarId> = vars
        .iter()
        .map(|v| {
            let (name, ty) = (format!("{}_pairs", f.var(*v).name), f.var(*v).ty);
            f.new_var(name, Type::array(ty.elem, ty.rank + 1))
        })
        .collect();
    out.push(let_(stacked.clone(), Expr::Build { n: Atom::Var(count), index: p, body: Block { stmts, results } }));
    out.push(let_(vec![points], Expr::Binary(BinOp::Mul, Atom::Var(count), Atom::I64(2))));
    for ((v, s), dims) in vars.iter().zip(&stacked).zip(rows) {
        let mut shape = vec![Atom::Var(points)];
        shape.extend(dims.iter().map(|d| static_atom(f, d, loc, out)));
        let flat = f.new_var(format!("{}_points", f.var(*v).name), f.var(*v).ty);
        out.push(let_(vec![flat], Expr::Reshape { array: *s, dims: shape }));
        out.push(let_(vec![*v], Expr::Slice { array: flat, lo: Atom::I64(0), hi: n }));
    }
}

/// The value of the extent `d` (of variables bound outside the
/// comprehension) as an atom, its statements appended to `out`.
fn static_atom(f: &mut Function, d: &StaticDim, loc: Loc, out: &mut Vec<Stmt>) -> Atom {
    let bind = |f: &mut Function, expr: Expr, out: &mut Vec<Stmt>| {
        let v = f.new_var("extent", Type::I64);
        out.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr }, loc });
        Atom::Var(v)
    };
    match d {
        StaticDim::Lit(k) => Atom::I64(*k),
        StaticDim::Var(v) => Atom::Var(*v),
        StaticDim::DimOf(a, axis) => bind(f, Expr::Dim { array: *a, axis: *axis }, out),
        StaticDim::Bin(op, a, b) => {
            let (a, b) = (static_atom(f, a, loc, out), static_atom(f, b, loc, out));
            bind(f, Expr::Binary(*op, a, b), out)
        }
    }
}

/// Appends to `out` the statements of `b` for both points (module docs):
/// a statement that does not depend on the point once, with fresh binders
/// (recorded in both substitutions); a comprehension whose count does not
/// depend on it once, with the results of both, its body interleaved; any
/// other statement for the first point, then for the second.
fn interleave(f: &mut Function, b: &Block, variant: &HashSet<VarId>, copies: &mut [Subst; 2], out: &mut Vec<Stmt>) {
    let shared = |a: &Atom| a.as_var().is_none_or(|v| !variant.contains(&v));
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Let { vars, .. } if !vars.iter().any(|v| variant.contains(v)) => once(f, s, copies, out),
            StmtKind::CheckSize { a, b, .. } if shared(a) && shared(b) => once(f, s, copies, out),
            StmtKind::Let { vars, expr: Expr::Build { n, index, body } }
                if shared(n) && body.results.len() <= MAX_RESULTS =>
            {
                let i = shared_index(f, *index, copies);
                let mut stmts = Vec::new();
                interleave(f, body, variant, copies, &mut stmts);
                let results = copies.iter().flat_map(|c| body.results.iter().map(|r| c.atom(r))).collect();
                let mut both = Vec::with_capacity(2 * vars.len());
                for c in copies.iter_mut() {
                    for v in vars {
                        let info = f.var(*v).clone();
                        let nv = f.new_var(info.name, info.ty);
                        c.map.insert(*v, Atom::Var(nv));
                        both.push(nv);
                    }
                }
                let n = copies[0].atom(n);
                out.push(Stmt {
                    kind: StmtKind::Let {
                        vars: both,
                        expr: Expr::Build { n, index: i, body: Block { stmts, results } },
                    },
                    loc: s.loc,
                });
            }
            _ => each(f, s, copies, out),
        }
    }
}
