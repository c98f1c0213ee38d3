//! Unroll-and-jam of backward loop nests: several iterations of a backward
//! loop over points run together, so that each element of a cotangent the
//! inner loops add into is loaded and stored once for all of them.
//!
//! After [`super::interchange`], GMM's backward pass is
//!
//! ```text
//! for k < K do
//!   for rev j < N do {                      // the points
//!     let xc = x[j] - means[k]; ..
//!     for rev r < D do {                    // the rows of the factor
//!       let lrow = lower_qs[k, r]; let ct_lrow = ct_lower_qs[k, r]; ..
//!       for c < r do {
//!         ct_xc[c] += lrow[c] * ct_qx[r]
//!         ct_lrow[c] += xc[c] * ct_qx[r]    // once per point and element
//!       } } }
//! ```
//!
//! Every element of `ct_lower_qs[k]` is loaded, added to and stored once per
//! point, and every row of the factor read once per point, in loops of at
//! most `D` iterations. This pass runs `F` iterations (the factor, 2 to
//! [`MAX_FACTOR`]) in one: `j`, `j - 1`, .. (`j`, `j + 1`, .. in a forward
//! loop), their statements interleaved: the statements that do not depend
//! on `j` (views of the factor and of its cotangent, extents) run once for
//! all; the inner loops whose counts do not depend on `j` become one loop
//! running every iteration's body; each other statement runs for each
//! iteration in turn, the earliest first. The `F` additions into an
//! element of `ct_lrow` follow each other, so the code generator keeps the
//! element in a register between them (and loads `lrow[c]` once). The
//! iterations a count leaves over (`n mod F`) run alone after the groups.
//!
//! Code generation runs the pass on every function it compiles
//! (`arrayad_codegen`'s `schedule.rs`), with the factor of its backend:
//! two on Cranelift, four on LLVM, whose vectorised row loop then loads
//! and stores an element of `ct_lrow` once per four points.
//!
//! # Legality
//!
//! A loop `for [rev] j < n do body` is jammed when
//!
//! - `body` may not fail ([`super::fallible`]), uses no tape, calls
//!   nothing, updates no array (`Update`), assigns only scalars it binds
//!   and clears (`AccZero`) only accumulators it makes;
//! - every accumulator not made by `body` that `body` adds into is added
//!   into by one statement of `body` only (through any views), and that
//!   statement's element (its indices composed with those of the views it
//!   adds through, the starts of slices added) either has `j` at some axis
//!   (two iterations add into different elements), or does not depend on
//!   `j` and has, for each loop of `body` around the statement, that loop's
//!   index at some axis with a start bound outside that loop (an iteration
//!   adds into each element at most once, at the same iterations of the
//!   inner loops as every other iteration);
//! - `body` reads none of those accumulators, nor any array that may share
//!   memory with one (`super::forward_loops::reads_only_to_add`).
//!
//! Then each element an accumulator of the loop receives its additions in
//! the loop's order: at most one from each iteration, all at the same
//! iterations of the inner loops, where the jammed body runs the earlier
//! iterations' statements first. Every other statement reads only what its
//! own iteration wrote or what the loop does not write. The results are
//! those of the loop as it was, bit for bit, and no error is reported that
//! the loop would not report. Not applied: when no such addition inside an
//! inner loop of a count independent of `j` exists (nothing would be
//! shared), and to bodies of more than [`MAX_STMTS`] statements.

use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, Loc, Stmt, StmtKind, VarId};
use crate::types::Type;
use crate::visit::{expr_uses, freshen_block, stmt_binds, Subst};

use super::forward_loops::{reads_only_to_add, Facts};

/// Bodies with more statements than this (at every depth) are not jammed:
/// the jammed loop holds `factor` copies of most of them.
pub const MAX_STMTS: usize = 400;

/// The most iterations [`jam_backward_nests`] runs together.
pub const MAX_FACTOR: usize = 8;

/// Loops nested in more loops and comprehensions than this are not looked
/// at.
const MAX_DEPTH: usize = 8;

/// Jams the backward loops of `f` that qualify (module docs), `factor`
/// iterations together (2 to [`MAX_FACTOR`], clamped); returns
/// whether it jammed any. Linear in the size of `f` (each statement is
/// looked at by at most `MAX_DEPTH` legality checks, each of at most
/// [`MAX_STMTS`] statements; a jammed body is copied `factor` times).
pub fn jam_backward_nests(f: &mut Function, factor: usize) -> bool {
    if !has_candidates(f) {
        return false;
    }
    let facts = Facts::of(f);
    let body = std::mem::take(&mut f.body);
    let mut jammed = false;
    f.body = block(f, &facts, body, 0, factor.clamp(2, MAX_FACTOR), &mut jammed);
    jammed
}

/// Whether `f` has a loop with a loop at the top level of its body (what
/// [`jam_backward_nests`] looks for): a cheap test before its analyses.
pub fn has_candidates(f: &Function) -> bool {
    let mut candidate = false;
    crate::visit::for_each_block(&f.body, &mut |b| {
        candidate |= b.stmts.iter().any(|s| matches!(&s.kind, StmtKind::For { body, .. } if has_inner_for(body)));
    });
    candidate
}

/// Whether `b` has a loop at its top level (a nest whose inner loops the
/// two iterations can share).
fn has_inner_for(b: &Block) -> bool {
    b.stmts.iter().any(|s| matches!(s.kind, StmtKind::For { .. }))
}

/// `b` with its qualifying loops jammed, and those of the blocks nested in
/// it up to [`MAX_DEPTH`] (not inside a jammed loop).
fn block(f: &mut Function, facts: &Facts, b: Block, depth: usize, factor: usize, jammed: &mut bool) -> Block {
    let mut out = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let loc = s.loc;
        let variant = match &s.kind {
            StmtKind::For { index, body, .. } => jammable(f, facts, *index, body),
            _ => None,
        };
        match (s.kind, variant) {
            (StmtKind::For { n, index, reverse, body }, Some(variant)) => {
                *jammed = true;
                jam(f, n, index, reverse, body, &variant, factor, loc, &mut out);
            }
            (kind, _) if depth < MAX_DEPTH => {
                let inner = depth + usize::from(matches!(kind, StmtKind::For { .. } | StmtKind::Let { .. }));
                let kind = super::inline::map_nested(kind, &mut |nb| block(f, facts, nb, inner, factor, jammed));
                out.push(Stmt { kind, loc });
            }
            (kind, _) => out.push(Stmt { kind, loc }),
        }
    }
    Block { stmts: out, results: b.results }
}

/// One component of the element an addition reaches: `index` plus the
/// sum of `starts` (the starts of slices taken along that axis).
#[derive(Clone, Debug)]
struct Component {
    index: Atom,
    starts: Vec<Atom>,
}

/// An accumulator seen through views bound in the loop's body: the
/// variable bound outside the body it views, the components fixed so far,
/// and the starts of the slices along the view's first axis.
#[derive(Clone, Debug)]
struct View {
    outer: VarId,
    fixed: Vec<Component>,
    lead: Vec<Atom>,
}

impl View {
    fn index(&self, indices: &[Atom]) -> View {
        let mut fixed = self.fixed.clone();
        for (t, a) in indices.iter().enumerate() {
            fixed.push(Component { index: *a, starts: if t == 0 { self.lead.clone() } else { Vec::new() } });
        }
        View { outer: self.outer, fixed, lead: Vec::new() }
    }
}

/// The legality walk's state (module docs).
struct Check<'a> {
    f: &'a Function,
    facts: &'a Facts,
    index: VarId,
    /// Variables bound in the body, with the number of the body's loops
    /// around their binding (a loop's index: that loop's own number).
    level: HashMap<VarId, usize>,
    /// Variables whose value may differ between iterations of the loop.
    variant: HashSet<VarId>,
    /// Views of accumulators bound in the body (`None`: not followed).
    views: HashMap<VarId, Option<View>>,
    /// The loops of the body around the statement looked at: index, and
    /// whether the count is the same in every iteration.
    around: Vec<(VarId, bool)>,
    /// The number of statements adding into each accumulator made outside.
    written: HashMap<VarId, usize>,
    /// Whether some addition inside a shared inner loop would be jammed.
    pays: bool,
    ok: bool,
}

/// Whether `for [rev] index < n do body` qualifies (module docs): if so,
/// the variables of `body` whose values may differ between iterations.
fn jammable(f: &Function, facts: &Facts, index: VarId, body: &Block) -> Option<HashSet<VarId>> {
    if !has_inner_for(body) || super::unroll::size_up_to(body, MAX_STMTS) > MAX_STMTS || facts.fallible.block(body) {
        return None;
    }
    let mut c = Check {
        f,
        facts,
        index,
        level: HashMap::default(),
        variant: HashSet::default(),
        views: HashMap::default(),
        around: Vec::new(),
        written: HashMap::default(),
        pays: false,
        ok: true,
    };
    c.variant.insert(index);
    c.block(body);
    if !c.ok || !c.pays {
        return None;
    }
    let written = c.written;
    let forbidden = |v: VarId| facts.tainted.contains(&v) || facts.root(v).is_some_and(|r| written.contains_key(&r));
    let views = c.views;
    reads_only_to_add(body, &|v| views.contains_key(&v), &|_, _| false, &forbidden).then_some(c.variant)
}

impl Check<'_> {
    fn bound_here(&self, v: VarId) -> bool {
        self.level.contains_key(&v)
    }

    fn invariant(&self, a: &Atom) -> bool {
        a.as_var().is_none_or(|v| !self.variant.contains(&v))
    }

    /// The accumulator `array` seen through the views bound in the body
    /// (`None`: not followed), or itself when bound outside the body.
    fn view_of(&self, array: VarId) -> Option<View> {
        if self.bound_here(array) {
            self.views.get(&array).cloned().flatten()
        } else {
            Some(View { outer: array, fixed: Vec::new(), lead: Vec::new() })
        }
    }

    fn bind(&mut self, v: VarId, variant: bool) {
        self.level.insert(v, self.around.len());
        if variant || self.f.var(v).mutable {
            self.variant.insert(v);
        }
    }

    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            if !self.ok {
                return;
            }
            self.stmt(&s.kind);
        }
    }

    fn stmt(&mut self, kind: &StmtKind) {
        match kind {
            StmtKind::Let { vars, expr } => self.let_(kind, vars, expr),
            StmtKind::Assign { var, .. } => {
                self.ok &= self.bound_here(*var) && self.f.ty(*var).is_scalar();
            }
            StmtKind::AccZero { acc, .. } => {
                self.ok &= self.facts.root(*acc).is_some_and(|r| self.bound_here(r));
            }
            StmtKind::AccAdd { acc, indices, .. } => self.add(*acc, indices),
            StmtKind::CheckSize { .. } => {}
            StmtKind::Push(_) | StmtKind::TapeRewind(_) => self.ok = false,
            StmtKind::For { n, index, body, .. } => {
                let same = self.invariant(n);
                self.around.push((*index, same));
                self.bind(*index, !same);
                self.block(body);
                self.around.pop();
            }
            StmtKind::If { then_branch, else_branch, .. } => {
                self.block(then_branch);
                self.block(else_branch);
            }
        }
    }

    fn let_(&mut self, kind: &StmtKind, vars: &[VarId], expr: &Expr) {
        // Nothing nested in an expression may have effects on the loop's
        // accumulators, nor use the tape or call.
        if crate::visit::child_blocks(kind).any(has_effects)
            || matches!(expr, Expr::Pop | Expr::TapeMark | Expr::Call { .. } | Expr::Update { .. })
        {
            self.ok = false;
            return;
        }
        let mut variant = matches!(expr, Expr::Zeros(_) | Expr::ZerosLike(_));
        expr_uses(expr, &mut |u| variant |= self.variant.contains(&u));
        let mut binders = Vec::new();
        stmt_binds(kind, &mut |v| binders.push(v));
        for v in binders {
            self.bind(v, variant);
        }
        // Views of accumulators.
        if vars.len() != 1 || self.facts.root(vars[0]).is_none() {
            return;
        }
        let view = match expr {
            Expr::Index { array, indices } => self.view_of(*array).map(|v| v.index(indices)),
            Expr::Slice { array, lo, .. } => self.view_of(*array).map(|mut v| {
                v.lead.push(*lo);
                v
            }),
            Expr::Atom(Atom::Var(array)) => self.view_of(*array),
            _ => None,
        };
        self.views.insert(vars[0], view);
    }

    /// An addition into `acc[indices]`.
    fn add(&mut self, acc: VarId, indices: &[Atom]) {
        let Some(root) = self.facts.root(acc) else {
            self.ok = false;
            return;
        };
        if self.bound_here(root) {
            return;
        }
        let count = self.written.entry(root).or_insert(0);
        *count += 1;
        if *count > 1 {
            self.ok = false;
            return;
        }
        let Some(view) = self.view_of(acc).map(|v| v.index(indices)) else {
            self.ok = false;
            return;
        };
        let invariant = |c: &Component| self.invariant(&c.index) && c.starts.iter().all(|a| self.invariant(a));
        let own =
            view.fixed.iter().any(|c| c.index == Atom::Var(self.index) && c.starts.iter().all(|a| self.invariant(a)));
        if own {
            return;
        }
        if !view.fixed.iter().all(invariant) {
            self.ok = false;
            return;
        }
        // Each loop around the addition fixes a component, with a start
        // bound outside it: one addition per element and iteration.
        let level = |a: &Atom| a.as_var().map_or(0, |v| self.level.get(&v).copied().unwrap_or(0));
        let injective = self.around.iter().enumerate().all(|(l, (i, _))| {
            view.fixed.iter().any(|c| c.index == Atom::Var(*i) && c.starts.iter().all(|a| level(a) <= l))
        });
        if !injective {
            self.ok = false;
            return;
        }
        self.pays |= !self.around.is_empty() && self.around.iter().all(|(_, same)| *same);
    }
}

/// Whether `b` adds into, clears or assigns anything, uses the tape or
/// calls, at any depth.
fn has_effects(b: &Block) -> bool {
    let mut found = false;
    crate::visit::for_each_block(b, &mut |blk| {
        found |= blk.stmts.iter().any(|s| {
            matches!(
                s.kind,
                StmtKind::AccAdd { .. }
                    | StmtKind::AccZero { .. }
                    | StmtKind::Assign { .. }
                    | StmtKind::Push(_)
                    | StmtKind::TapeRewind(_)
                    | StmtKind::Let { expr: Expr::Pop | Expr::TapeMark | Expr::Call { .. } | Expr::Update { .. }, .. }
            )
        })
    });
    found
}

/// Appends to `out` the jammed form of `for [rev] index < n do body`,
/// `F = factor` iterations per iteration:
///
/// ```text
/// let g = n / F; let e = g * F; let rest = n - e
/// for rev p < g do {                   for p < g do {
///   let base = p * F                     let base = p * F
///   let j0 = base + rest                 let j0 = base + 0; ..
///   let j1 = j0 + 1; ..                  let j(F-1) = base + (F - 1)
///   body[j(F-1)] jammed .. with body[j0] body[j0] jammed .. with body[j(F-1)]
/// }                                    }
/// let more = rest > 0
/// if more then {                       if more then {
///   for rev index < rest do body         for t < rest do { let index = e + t; body }
/// }                                    }
/// ```
///
/// With `F = 2` the iterations left over are one, and the branch runs
/// `body` once, at `index = rest - 1` (reverse) or `n - 1`. The
/// iterations of a group run in the loop's order (a reverse loop's highest
/// point first), the groups too, and those left over after them, as they
/// did. (The fallible analysis and code generation know all these indices
/// below `n`: `p * F + c` for `0 <= c < F` and `p` below `n / F`, `p * F +
/// rest + c` likewise, an index `t` below `rest`, and `e + t`.)
#[allow(clippy::too_many_arguments)]
fn jam(
    f: &mut Function,
    n: Atom,
    index: VarId,
    reverse: bool,
    body: Block,
    variant: &HashSet<VarId>,
    factor: usize,
    loc: Loc,
    out: &mut Vec<Stmt>,
) {
    let let_ = |v: VarId, expr: Expr| Stmt { kind: StmtKind::Let { vars: vec![v], expr }, loc };
    let bin = |op: BinOp, a: Atom, b: Atom| Expr::Binary(op, a, b);
    let (g, e, rest) =
        if factor == 2 { pair_counts(f, n, loc, out) } else { group_counts(f, n, factor as i64, loc, out) };
    let p = f.new_var(if factor == 2 { "pair" } else { "group" }, Type::I64);
    let base = f.new_var(if factor == 2 { "twice" } else { "base" }, Type::I64);
    let name = f.var(index).name.clone();
    // points[u]: the iteration the `u`-th copy runs, the earliest first.
    let points: Vec<VarId> = (0..factor).map(|_| f.new_var(&name, Type::I64)).collect();
    let mut stmts = vec![let_(base, bin(BinOp::Mul, Atom::Var(p), Atom::I64(factor as i64)))];
    if reverse {
        let low = points[factor - 1];
        stmts.push(let_(low, bin(BinOp::Add, Atom::Var(base), Atom::Var(rest))));
        for (u, &point) in points.iter().enumerate().rev().skip(1) {
            stmts.push(let_(point, bin(BinOp::Add, Atom::Var(low), Atom::I64((factor - 1 - u) as i64))));
        }
    } else {
        for (u, &point) in points.iter().enumerate() {
            stmts.push(let_(point, bin(BinOp::Add, Atom::Var(base), Atom::I64(u as i64))));
        }
    }
    let mut copies: Vec<Subst> = points
        .iter()
        .map(|&point| {
            let mut c = Subst::default();
            c.map.insert(index, Atom::Var(point));
            c
        })
        .collect();
    interleave(f, &body, variant, &mut copies, &mut stmts);
    out.push(Stmt {
        kind: StmtKind::For { n: Atom::Var(g), index: p, reverse, body: Block { stmts, results: Vec::new() } },
        loc,
    });
    // The iterations left over: the original body.
    let more = f.new_var(if factor == 2 { "has_odd" } else { "more" }, Type::BOOL);
    out.push(let_(more, bin(BinOp::Gt, Atom::Var(rest), Atom::I64(0))));
    let then_stmts = if factor == 2 {
        let last =
            if reverse { bin(BinOp::Sub, Atom::Var(rest), Atom::I64(1)) } else { bin(BinOp::Sub, n, Atom::I64(1)) };
        let mut once = vec![let_(index, last)];
        once.extend(body.stmts);
        once
    } else if reverse {
        vec![Stmt { kind: StmtKind::For { n: Atom::Var(rest), index, reverse, body }, loc }]
    } else {
        let t = f.new_var("t", Type::I64);
        let mut each = vec![let_(index, bin(BinOp::Add, Atom::Var(e), Atom::Var(t)))];
        each.extend(body.stmts);
        let body = Block { stmts: each, results: Vec::new() };
        vec![Stmt { kind: StmtKind::For { n: Atom::Var(rest), index: t, reverse, body }, loc }]
    };
    out.push(Stmt {
        kind: StmtKind::If {
            cond: Atom::Var(more),
            then_branch: Block { stmts: then_stmts, results: Vec::new() },
            else_branch: Block::default(),
        },
        loc,
    });
}

/// Appends to `out` the statements of `b` for every iteration of a group
/// (module docs), one substitution each: a statement that does not depend
/// on the iteration once, with fresh binders (recorded in every
/// substitution); a loop or branch whose count or condition does not
/// depend on it once, its body interleaved; any other statement for each
/// iteration in turn, the earliest first.
fn interleave(f: &mut Function, b: &Block, variant: &HashSet<VarId>, copies: &mut [Subst], out: &mut Vec<Stmt>) {
    let shared = |a: &Atom| a.as_var().is_none_or(|v| !variant.contains(&v));
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Let { vars, .. } if !vars.iter().any(|v| variant.contains(v)) => once(f, s, copies, out),
            StmtKind::For { n, index, reverse, body } if shared(n) => {
                let i = shared_index(f, *index, copies);
                let mut stmts = Vec::new();
                interleave(f, body, variant, copies, &mut stmts);
                let n = copies[0].atom(n);
                out.push(Stmt {
                    kind: StmtKind::For { n, index: i, reverse: *reverse, body: Block { stmts, results: Vec::new() } },
                    loc: s.loc,
                });
            }
            StmtKind::If { cond, then_branch, else_branch } if shared(cond) => {
                let (mut t, mut e) = (Vec::new(), Vec::new());
                interleave(f, then_branch, variant, copies, &mut t);
                interleave(f, else_branch, variant, copies, &mut e);
                out.push(Stmt {
                    kind: StmtKind::If {
                        cond: copies[0].atom(cond),
                        then_branch: Block { stmts: t, results: Vec::new() },
                        else_branch: Block { stmts: e, results: Vec::new() },
                    },
                    loc: s.loc,
                });
            }
            _ => each(f, s, copies, out),
        }
    }
}

/// Appends to `out` `let pairs = n / 2; let paired = pairs * 2; let odd
/// = n - paired`, the counts of a loop over `0..n` run two iterations at a
/// time (the form the fallibility analysis and code generation know:
/// `Halving` in `arrayad_codegen`); returns `(pairs, paired, odd)`.
pub(super) fn pair_counts(f: &mut Function, n: Atom, loc: Loc, out: &mut Vec<Stmt>) -> (VarId, VarId, VarId) {
    let (h, e, odd) = (f.new_var("pairs", Type::I64), f.new_var("paired", Type::I64), f.new_var("odd", Type::I64));
    push_counts(n, 2, [h, e, odd], loc, out);
    (h, e, odd)
}

/// Appends to `out` `let groups = n / d; let grouped = groups * d; let
/// rest = n - grouped`, the counts of a loop over `0..n` run `d`
/// iterations at a time; returns `(groups, grouped, rest)`.
fn group_counts(f: &mut Function, n: Atom, d: i64, loc: Loc, out: &mut Vec<Stmt>) -> (VarId, VarId, VarId) {
    let (g, e, rest) = (f.new_var("groups", Type::I64), f.new_var("grouped", Type::I64), f.new_var("rest", Type::I64));
    push_counts(n, d, [g, e, rest], loc, out);
    (g, e, rest)
}

fn push_counts(n: Atom, d: i64, [q, e, r]: [VarId; 3], loc: Loc, out: &mut Vec<Stmt>) {
    let let_ = |v: VarId, expr: Expr| Stmt { kind: StmtKind::Let { vars: vec![v], expr }, loc };
    out.push(let_(q, Expr::Binary(BinOp::Div, n, Atom::I64(d))));
    out.push(let_(e, Expr::Binary(BinOp::Mul, Atom::Var(q), Atom::I64(d))));
    out.push(let_(r, Expr::Binary(BinOp::Sub, n, Atom::Var(e))));
}

/// Appends `s`, which does not depend on the iteration, to `out` once, with
/// fresh binders recorded in every substitution.
pub(super) fn once(f: &mut Function, s: &Stmt, copies: &mut [Subst], out: &mut Vec<Stmt>) {
    let one = Block { stmts: vec![s.clone()], results: Vec::new() };
    let Some((head, rest)) = copies.split_first_mut() else { return };
    let copy = freshen_block(f, &one, &[], head);
    stmt_binds(&s.kind, &mut |v| {
        let nv = head.map[&v];
        for c in rest.iter_mut() {
            c.map.insert(v, nv);
        }
    });
    out.extend(copy.stmts);
}

/// A fresh index for a loop (or comprehension) `index` that the iterations
/// run as one, recorded in every substitution.
pub(super) fn shared_index(f: &mut Function, index: VarId, copies: &mut [Subst]) -> VarId {
    let info = f.var(index).clone();
    let i = f.new_var(info.name, info.ty);
    for c in copies.iter_mut() {
        c.map.insert(index, Atom::Var(i));
    }
    i
}

/// Appends `s` to `out` for each iteration in turn, the earliest first
/// (each with its substitution and fresh binders).
pub(super) fn each(f: &mut Function, s: &Stmt, copies: &mut [Subst], out: &mut Vec<Stmt>) {
    let one = Block { stmts: vec![s.clone()], results: Vec::new() };
    for c in copies.iter_mut() {
        out.extend(freshen_block(f, &one, &[], c).stmts);
    }
}
