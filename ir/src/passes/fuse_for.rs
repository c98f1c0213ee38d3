//! Fusion of adjacent `for` statements: the loops of a backward pass.
//!
//! Reverse mode turns each comprehension of the primal into one effect loop
//! (`for rev i < n do ...`) that reads the cotangent of its result and adds
//! into the cotangents of its operands, so a chain of comprehensions becomes
//! a chain of loops, each streaming its arrays through memory once. Two
//! adjacent loops `for i < n do B1; for i < n do B2` (same extent, same
//! direction) become `for i < n do { B1; B2 }` when that changes the value
//! of no location, not even by rounding.
//!
//! # Legality
//!
//! The loops' iterations interact only through the arrays and mutable
//! variables bound outside them. For each array `A` accessed by both loops,
//! at least once by a write (`A[..] += v`, `A[..] = 0`, or a use that may
//! create a reference to it), every access's first index must be the loop
//! index plus a literal offset (a literal `k` in the branch where
//! `i == j` holds is the offset `k - j`: the derivative of `x[0]` under
//! `if i == 0`): the first loop touches `A[k]` at iteration
//! `k - c1`, the second at `k - c2`. Fused, the first loop's accesses to
//! `A[k]` still precede the second's exactly when iteration `k - c1` runs no
//! later than `k - c2`: `c2 >= c1` for a reverse loop, `c2 <= c1` for a
//! forward one. Each loop's own accesses keep their order, so every
//! location sees the same operations in the same order and the result is
//! bitwise that of the unfused loops (no reassociation of sums). A mutable
//! variable assigned by one loop must not be used by the other, nor be
//! the loops' count.
//!
//! Two different variables are assumed to name different arrays only when
//! one of them cannot hold an accumulator (an immutable parameter, the
//! result of a `build`, a view of one: only accumulators are written) or
//! is a fresh accumulator (bound by `zeros`/`zeros_like` in the block of
//! the loops) that nothing refers to before the second loop (no copy,
//! assignment, view, yield, push, loop initial value or call argument of
//! it). Loops that use the tape (push, pop, marks) or call a function are
//! never fused, and at most one of the two may fail at run time, so the
//! first error of the fused loop is the first error of the two
//! ([`super::fallible`]; accumulations count as infallible there, as they
//! add into positions of accesses that already succeeded, the reverse
//! mode's invariant).
//!
//! Loops apart only by `let`s of scalars that read no array and no
//! variable the first loop assigns, and that cannot fail, are made
//! adjacent first: those `let`s move before the first loop (reverse mode
//! leaves such a `let` between the loops of a comprehension and of an
//! operand of it: the cotangent that the first loop's sum gives the
//! second).
//!
//! Linear in the size of the function: each loop is summarised once, and a
//! fused loop's summary is the union of its parts'.

use super::fallible::Fallible;
use super::offsets::IndexOffsets;
use crate::fx::{FxHashMap, FxHashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::visit::{child_blocks, stmt_uses_shallow, Subst};

/// Fuses adjacent compatible `for` statements of `f` in place.
pub fn fuse_for_loops(f: &mut Function) {
    if !has_candidates(&f.body) {
        return;
    }
    let aliasing = Aliasing::analyse(f);
    let fallible = super::fallible::analyse(f);
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, 0, &aliasing, &fallible);
}

/// Whether any block has two adjacent `for` statements of equal extent and
/// direction (the analyses are skipped otherwise).
fn has_candidates(b: &Block) -> bool {
    let mut found = false;
    crate::visit::for_each_block(b, &mut |b| {
        // Two loops of the same count and direction, with only `let`s
        // between them.
        let mut last: Option<(&Atom, bool)> = None;
        for s in &b.stmts {
            match &s.kind {
                StmtKind::For { n, reverse, .. } => {
                    found |= last == Some((n, *reverse));
                    last = Some((n, *reverse));
                }
                StmtKind::Let { .. } => {}
                _ => last = None,
            }
        }
    });
    found
}

/// Where an array variable's storage comes from, for the aliasing test.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Never an accumulator: a parameter, a `build`, an array literal, or a
    /// view or copy of one. Nothing writes into it.
    NotAccumulator,
    /// A fresh accumulator: `zeros`/`zeros_like`, immutable.
    FreshAccumulator,
    /// Anything else (mutable variables, pops, results of loops and
    /// branches, views of accumulators).
    Unknown,
}

/// Which variables may refer to the same array.
struct Aliasing {
    origin: Vec<Origin>,
    /// The nesting depth of the block binding each variable (0: the body).
    depth: Vec<u32>,
    /// For each variable, the position in its binding block of the first
    /// statement (at any depth inside it) where a reference to it may be
    /// made: a copy, an assignment, a view, a yield, a push, a loop's
    /// initial value, a call (`usize::MAX`: none; the block's length: its
    /// results).
    first_reference: Vec<usize>,
    /// The current statement's position at each depth of the walk.
    path: Vec<usize>,
}

impl Aliasing {
    fn analyse(f: &Function) -> Aliasing {
        let n = f.vars.len();
        let mut a = Aliasing {
            origin: vec![Origin::Unknown; n],
            depth: vec![0; n],
            first_reference: vec![usize::MAX; n],
            path: Vec::new(),
        };
        for p in f.params.iter().filter(|p| !f.var(**p).mutable) {
            a.origin[p.index()] = Origin::NotAccumulator;
        }
        a.block(f, &f.body, 0);
        a
    }

    fn mark(&mut self, atom: &Atom) {
        if let Atom::Var(v) = atom {
            self.reference(*v);
        }
    }

    fn reference(&mut self, v: VarId) {
        let at = self.path.get(self.depth[v.index()] as usize).copied().unwrap_or(0);
        let first = &mut self.first_reference[v.index()];
        *first = (*first).min(at);
    }

    fn block(&mut self, f: &Function, b: &Block, depth: u32) {
        self.path.push(0);
        for (position, s) in b.stmts.iter().enumerate() {
            self.path[depth as usize] = position;
            match &s.kind {
                StmtKind::Let { vars, expr } => {
                    let of = |a: &Aliasing, v: VarId| match a.origin[v.index()] {
                        Origin::NotAccumulator => Origin::NotAccumulator,
                        _ => Origin::Unknown,
                    };
                    let origin = match expr {
                        Expr::Build { .. } | Expr::ArrayLit { .. } => Origin::NotAccumulator,
                        Expr::Zeros(_) | Expr::ZerosLike(_) => Origin::FreshAccumulator,
                        Expr::Atom(Atom::Var(w)) => {
                            self.reference(*w);
                            of(self, *w)
                        }
                        Expr::Slice { array, .. } | Expr::Reshape { array, .. } => {
                            self.reference(*array);
                            of(self, *array)
                        }
                        Expr::Index { array, indices } if indices.len() < f.ty(*array).rank as usize => {
                            self.reference(*array);
                            of(self, *array)
                        }
                        Expr::Update { array, value, .. } => {
                            self.reference(*array);
                            self.mark(value);
                            Origin::Unknown
                        }
                        Expr::Loop { init, .. } | Expr::While { init, .. } => {
                            init.iter().for_each(|a| self.mark(a));
                            Origin::Unknown
                        }
                        Expr::Call { args, .. } => {
                            args.iter().for_each(|a| self.mark(a));
                            Origin::Unknown
                        }
                        _ => Origin::Unknown,
                    };
                    if let Expr::ArrayLit { elems, .. } = expr {
                        elems.iter().for_each(|a| self.mark(a));
                    }
                    for v in vars {
                        self.origin[v.index()] = if f.var(*v).mutable { Origin::Unknown } else { origin };
                        self.depth[v.index()] = depth;
                    }
                }
                StmtKind::Assign { value, .. } => self.mark(value),
                StmtKind::Push(value) => self.mark(value),
                _ => {}
            }
            for nb in child_blocks(&s.kind) {
                self.block(f, nb, depth + 1);
            }
        }
        // The function's results are not references that a loop of it
        // could see.
        if depth > 0 {
            self.path[depth as usize] = b.stmts.len();
            b.results.iter().for_each(|a| self.mark(a));
        }
        self.path.pop();
    }

    /// Whether `u` and `w` (different variables) may name the same array
    /// during the statements up to position `until` of a block at `depth`
    /// (two loops being fused, the later at `until`). A fresh accumulator
    /// bound in that block and referenced only after `until` is a new
    /// array each time the block runs, which nothing else names yet.
    fn may_alias(&self, u: VarId, w: VarId, depth: u32, until: usize) -> bool {
        let distinct = |v: VarId| match self.origin[v.index()] {
            Origin::NotAccumulator => true,
            Origin::FreshAccumulator => {
                let first = self.first_reference[v.index()];
                first == usize::MAX || (self.depth[v.index()] == depth && first > until)
            }
            Origin::Unknown => false,
        };
        !(distinct(u) || distinct(w))
    }
}

/// The offsets of a set of accesses to one array from the loop index:
/// the range of those that are the index plus a literal, and whether any
/// is not (another index, or a use of the whole array).
#[derive(Clone, Copy, Default)]
struct Offsets {
    range: Option<(i64, i64)>,
    unknown: bool,
}

impl Offsets {
    fn any(&self) -> bool {
        self.unknown || self.range.is_some()
    }

    fn add(&mut self, offset: Option<i64>) {
        match offset {
            None => self.unknown = true,
            Some(c) => self.merge(Offsets { range: Some((c, c)), unknown: false }),
        }
    }

    fn merge(&mut self, other: Offsets) {
        self.unknown |= other.unknown;
        self.range = match (self.range, other.range) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (r, None) | (None, r) => r,
        };
    }
}

/// A loop body's accesses to one array bound outside it: all of them, and
/// those that may write. Every pair of an access of the first loop and
/// one of the second, one of them writing, is ordered (the module docs)
/// exactly when the ranges are: the pairwise test in constant time.
#[derive(Clone, Copy, Default)]
struct Accesses {
    all: Offsets,
    writes: Offsets,
}

impl Accesses {
    fn merge(&mut self, other: Accesses) {
        self.all.merge(other.all);
        self.writes.merge(other.writes);
    }
}

/// Whether every access in `first` precedes, in the fused loop, every
/// access in `second` to the same location: reverse loops need the second
/// loop's offsets at least the first's, forward loops at most.
fn ordered(first: &Offsets, second: &Offsets, reverse: bool) -> bool {
    match (first.any() && second.any(), first.unknown || second.unknown, first.range, second.range) {
        (false, _, _, _) => true,
        (true, false, Some((min1, max1)), Some((min2, max2))) => {
            if reverse {
                max1 <= min2
            } else {
                min1 >= max2
            }
        }
        _ => false,
    }
}

/// What a loop body does to the variables bound outside it.
#[derive(Default)]
struct Summary {
    /// Accesses to outer arrays.
    arrays: FxHashMap<VarId, Accesses>,
    /// Outer variables read other than by element: scalars, and arrays
    /// whose shape is taken.
    scalars: FxHashSet<VarId>,
    /// Outer mutable variables assigned.
    assigned: FxHashSet<VarId>,
    /// Whether the body uses the tape or calls a function.
    tape: bool,
}

/// Summarises the body of `for index < n`.
fn summarise(f: &Function, index: VarId, body: &Block) -> Summary {
    let mut w = Walk { f, local: FxHashSet::default(), offsets: IndexOffsets::new(index), out: Summary::default() };
    w.local.insert(index);
    w.block(body);
    w.out
}

struct Walk<'f> {
    f: &'f Function,
    /// Variables bound inside the body so far.
    local: FxHashSet<VarId>,
    /// The indices that are the loop index plus a literal.
    offsets: IndexOffsets,
    out: Summary,
}

impl Walk<'_> {
    /// The branches of `if cond`: where `cond` tests the loop index for a
    /// value, the `then` branch knows it.
    fn branches(&mut self, cond: &Atom, then_branch: &Block, else_branch: &Block) {
        let known = self.offsets.enter_then(cond);
        self.block(then_branch);
        self.offsets.leave_then(known);
        self.block(else_branch);
    }

    fn access(&mut self, array: VarId, offset: Option<i64>, write: bool) {
        if !self.local.contains(&array) {
            let a = self.out.arrays.entry(array).or_default();
            a.all.add(offset);
            if write {
                a.writes.add(offset);
            }
        }
    }

    /// A use of `v` other than an element access: of an outer array, as a
    /// write anywhere (it may be copied and written through the copy).
    fn use_var(&mut self, v: VarId) {
        if self.local.contains(&v) {
            return;
        }
        if self.f.ty(v).rank > 0 {
            self.access(v, None, true);
        } else {
            self.out.scalars.insert(v);
        }
    }

    fn atom(&mut self, a: &Atom) {
        if let Atom::Var(v) = a {
            self.use_var(*v);
        }
    }

    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            self.stmt(&s.kind);
        }
        b.results.iter().for_each(|a| self.atom(a));
    }

    fn stmt(&mut self, kind: &StmtKind) {
        match kind {
            StmtKind::AccAdd { acc, indices, value } => {
                let off = self.offsets.offset(indices.first());
                self.access(*acc, off, true);
                indices.iter().for_each(|a| self.atom(a));
                self.atom(value);
            }
            StmtKind::AccZero { acc, indices } => {
                let off = self.offsets.offset(indices.first());
                self.access(*acc, off, true);
                indices.iter().for_each(|a| self.atom(a));
            }
            StmtKind::Assign { var, value } => {
                if !self.local.contains(var) {
                    self.out.assigned.insert(*var);
                }
                self.atom(value);
            }
            StmtKind::Push(_) | StmtKind::TapeRewind(_) => {
                self.out.tape = true;
                stmt_uses_shallow(kind, &mut |v| self.use_var(v));
            }
            StmtKind::Let { vars, expr } => {
                match expr {
                    Expr::Index { array, indices } => {
                        // A row is a view: writable through it.
                        let full = indices.len() == self.f.ty(*array).rank as usize;
                        let off = self.offsets.offset(indices.first());
                        self.access(*array, off, !full);
                        indices.iter().for_each(|a| self.atom(a));
                    }
                    // Only the shape.
                    // Only the shape: not an access to the elements, but a
                    // use of the variable (which the other loop may assign).
                    Expr::Dim { array, .. } | Expr::ZerosLike(array) => {
                        if !self.local.contains(array) {
                            self.out.scalars.insert(*array);
                        }
                    }
                    Expr::Call { .. } => {
                        self.out.tape = true;
                        stmt_uses_shallow(kind, &mut |v| self.use_var(v));
                    }
                    Expr::Pop | Expr::TapeMark => self.out.tape = true,
                    Expr::Binary(BinOp::Eq | BinOp::Add | BinOp::Sub, a, b) => {
                        self.offsets.bind(self.f, vars, expr);
                        self.atom(a);
                        self.atom(b);
                    }
                    _ => stmt_uses_shallow(kind, &mut |v| self.use_var(v)),
                }
                // Binders of nested blocks are local too.
                let mut binders = Vec::new();
                if let Expr::Build { index, .. } | Expr::Loop { index, .. } = expr {
                    binders.push(*index);
                }
                if let Expr::Loop { states, .. } | Expr::While { states, .. } = expr {
                    binders.extend(states.iter().copied());
                }
                self.local.extend(binders);
                if let Expr::If { cond, then_branch, else_branch } = expr {
                    self.branches(cond, then_branch, else_branch);
                } else {
                    for nb in child_blocks(kind) {
                        self.block(nb);
                    }
                }
                self.local.extend(vars.iter().copied());
            }
            StmtKind::For { index, .. } => {
                stmt_uses_shallow(kind, &mut |v| self.use_var(v));
                self.local.insert(*index);
                for nb in child_blocks(kind) {
                    self.block(nb);
                }
            }
            StmtKind::If { cond, then_branch, else_branch } => {
                self.atom(cond);
                self.branches(cond, then_branch, else_branch);
            }
            StmtKind::CheckSize { .. } => stmt_uses_shallow(kind, &mut |v| self.use_var(v)),
        }
    }
}

/// Pairs of arrays compared between two loops at most: beyond, the loops
/// stay apart (keeps the pass linear on loops over very many arrays).
const MAX_PAIRS: usize = 4096;

/// Whether `second` may run fused after `first` (see the module docs).
fn fusable(first: &Summary, second: &Summary, reverse: bool, aliasing: &Aliasing, depth: u32, until: usize) -> bool {
    if first.tape || second.tape {
        return false;
    }
    let used = |s: &Summary, v: &VarId| s.scalars.contains(v) || s.assigned.contains(v) || s.arrays.contains_key(v);
    if first.assigned.iter().any(|v| used(second, v)) || second.assigned.iter().any(|v| used(first, v)) {
        return false;
    }
    if first.arrays.len().saturating_mul(second.arrays.len()) > MAX_PAIRS {
        return false;
    }
    for (u, au) in &first.arrays {
        for (w, aw) in &second.arrays {
            if !au.writes.any() && !aw.writes.any() {
                continue;
            }
            if u != w {
                if aliasing.may_alias(*u, *w, depth, until) {
                    return false;
                }
                continue;
            }
            if !ordered(&au.writes, &aw.all, reverse) || !ordered(&au.all, &aw.writes, reverse) {
                return false;
            }
        }
    }
    true
}

impl Summary {
    fn absorb(&mut self, other: Summary) {
        for (v, a) in other.arrays {
            self.arrays.entry(v).or_default().merge(a);
        }
        self.scalars.extend(other.scalars);
        self.assigned.extend(other.assigned);
        self.tape |= other.tape;
    }
}

fn block(f: &Function, b: Block, depth: u32, aliasing: &Aliasing, fallible: &Fallible) -> Block {
    let mut out: Vec<Stmt> = Vec::with_capacity(b.stmts.len());
    // The summary and fallibility of the last statement of `out` when it
    // is a `for`.
    let mut last: Option<(Summary, bool)> = None;
    for (position, s) in b.stmts.into_iter().enumerate() {
        let loc = s.loc;
        let kind = super::inline::map_nested(s.kind, &mut |nb| block(f, nb, depth + 1, aliasing, fallible));
        let StmtKind::For { n, index, reverse, body } = kind else {
            // A scalar `let` between two loops goes before the first, when
            // that loop cannot change what it reads: the loops become
            // adjacent.
            if let Some((prev, _)) = &last {
                if before_loop(f, &kind, prev, fallible) {
                    out.insert(out.len() - 1, Stmt { kind, loc });
                    continue;
                }
            }
            out.push(Stmt { kind, loc });
            last = None;
            continue;
        };
        let summary = summarise(f, index, &body);
        let fails = fallible.block(&body);
        if let (
            Some((prev, prev_fails)),
            Some(Stmt { kind: StmtKind::For { n: pn, index: pi, reverse: pr, body: pb }, .. }),
        ) = (last.as_mut(), out.last_mut())
        {
            // (A count the first loop assigns would be read before it ran.)
            let count_assigned =
                n.as_var().is_some_and(|v| prev.assigned.contains(&v) || summary.assigned.contains(&v));
            if *pn == n
                && *pr == reverse
                && !count_assigned
                && !(*prev_fails && fails)
                && fusable(prev, &summary, reverse, aliasing, depth, position)
            {
                let mut rename = Subst::default();
                rename.map.insert(index, Atom::Var(*pi));
                pb.stmts.extend(body.stmts.iter().map(|s| rename.stmt(s)));
                prev.absorb(summary);
                *prev_fails |= fails;
                continue;
            }
        }
        out.push(Stmt { kind: StmtKind::For { n, index, reverse, body }, loc });
        last = Some((summary, fails));
    }
    Block { stmts: out, results: b.results }
}

/// True when `kind`, just after a loop summarised by `prev`, may run before
/// it instead: a `let` of immutable scalars without nested blocks, that
/// cannot fail, neither uses the tape nor calls, and reads only scalars the
/// loop does not assign.
fn before_loop(f: &Function, kind: &StmtKind, prev: &Summary, fallible: &Fallible) -> bool {
    let StmtKind::Let { vars, expr } = kind else { return false };
    if matches!(expr, Expr::Pop | Expr::TapeMark | Expr::Call { .. })
        || child_blocks(kind).next().is_some()
        || fallible.stmt(kind)
        || vars.iter().any(|v| f.var(*v).mutable || !f.ty(*v).is_scalar())
    {
        return false;
    }
    let mut ok = true;
    crate::visit::expr_uses(expr, &mut |v| ok &= f.ty(v).is_scalar() && !prev.assigned.contains(&v));
    ok
}
