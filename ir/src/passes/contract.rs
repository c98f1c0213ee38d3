//! Array contraction of loop-local accumulators: an accumulator that only
//! one loop touches, each iteration at its own element and at the element
//! of the next iteration, becomes two scalars.
//!
//! Reverse mode gives every comprehension of the primal a zero-filled
//! cotangent array. Once the backward loops are fused ([`super::fuse_for`]),
//! many of them live inside one loop: RK4's stage cotangent
//! `ct_k[i - 1] += x[i] * ct; ...; let c = ct_k[i]` is added into at
//! `i - 1` by iteration `i` and read at `i` by the same iteration, after the
//! iteration `i + 1` (which ran just before, the loop being reversed) added
//! into it. Such an array costs a zero-fill and a stream through memory
//! per loop, where two registers do:
//!
//! ```text
//! let a = zeros_like x           let mut carry = 0.0
//! for rev i < n do {             for rev i < n do {
//!   a[i - 1] += u                  let mut cur = carry; let mut next = 0.0
//!   a[i] += v                      next := next + u
//!   let c = a[i]                   cur := cur + v
//!   ...                            let c = cur
//! }                                ...; carry := next }
//! ```
//!
//! # Legality
//!
//! `a` (rank 1, bound by `zeros`/`zeros_like` in the loop's block, its
//! binding infallible) qualifies when every use of it in the function is in
//! that one loop's body, outside any loop or comprehension nested in it (the
//! `if`s in between are fine), and is
//!
//! - `a[j] += v` with `j` the loop index plus 0 or plus the step `d` to the
//!   next iteration (`-1` for a reverse loop, `+1` for a forward one, a
//!   literal index under a test of the index counting as an offset, as in
//!   `super::offsets`), or
//! - a read `a[j]` with `j` at offset 0, known in bounds
//!   ([`super::fallible`]).
//!
//! Element `k` is then touched only by iteration `k` (offset 0) and by the
//! one before it (offset `d`): at the start of iteration `k` its value is
//! exactly what the previous iteration added at `d` (`carry`; 0 before the
//! first), and every access sees the same operations in the same order as
//! before, so values are bitwise the same (an addition `a[j] += v` is
//! `old + v` in both). Elements no iteration reaches at offset 0 are never
//! read, and `a` is dead after the loop. An addition at `d` from the last
//! iteration would have been out of bounds; reverse mode adds only where
//! an access succeeded ([`crate::program::StmtKind::AccAdd`]), so there is
//! none. Linear in the size of the function: each statement is scanned by
//! the nearest loop around it only.

use super::fallible::Fallible;
use super::offsets::IndexOffsets;
use crate::fx::FxHashMap;
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::types::{Scalar, Type};
use crate::visit::{stmt_uses_shallow, use_counts};

/// Contracts the qualifying accumulators of `f` in place (module docs).
pub fn contract_accumulators(f: &mut Function) {
    let mut any = false;
    crate::visit::for_each_block(&f.body, &mut |b| {
        any |= b.stmts.iter().any(|s| candidate(f, &s.kind).is_some());
    });
    if !any {
        return;
    }
    let fallible = super::fallible::analyse(f);
    let uses = use_counts(&f.body, f.vars.len());
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &uses, &fallible);
}

/// The accumulator a statement binds, when it is a contraction candidate:
/// `let a = zeros [n]` or `let a = zeros_like x` of rank 1, immutable.
fn candidate(f: &Function, kind: &StmtKind) -> Option<VarId> {
    match kind {
        StmtKind::Let { vars, expr: Expr::Zeros(_) | Expr::ZerosLike(_) }
            if vars.len() == 1 && !f.var(vars[0]).mutable && f.ty(vars[0]) == Type::array(Scalar::F64, 1) =>
        {
            Some(vars[0])
        }
        _ => None,
    }
}

/// The uses of a candidate found in one loop body.
#[derive(Default, Clone, Copy)]
struct Found {
    uses: u32,
    /// Some addition is at the next iteration's element.
    ahead: bool,
    /// Some use is not of the qualifying forms.
    bad: bool,
}

fn block(f: &mut Function, b: Block, uses: &[u32], fallible: &Fallible) -> Block {
    let stmts: Vec<Stmt> = b
        .stmts
        .into_iter()
        .map(|s| Stmt { kind: super::inline::map_nested(s.kind, &mut |nb| block(f, nb, uses, fallible)), loc: s.loc })
        .collect();
    let mut candidates: FxHashMap<VarId, usize> = FxHashMap::default();
    for (position, s) in stmts.iter().enumerate() {
        if let Some(a) = candidate(f, &s.kind).filter(|_| !fallible.stmt(&s.kind)) {
            candidates.insert(a, position);
        }
    }
    if candidates.is_empty() {
        return Block { stmts, results: b.results };
    }
    // The accumulators each loop of the block contracts, with `ahead`.
    let mut plans: FxHashMap<usize, Vec<(VarId, bool)>> = FxHashMap::default();
    // The new binding of each contracted accumulator: `carry` or nothing.
    let mut replaced: FxHashMap<VarId, Option<VarId>> = FxHashMap::default();
    for (position, s) in stmts.iter().enumerate() {
        let StmtKind::For { index, reverse, body, .. } = &s.kind else { continue };
        let mut scan = Scan {
            f,
            fallible,
            candidates: &candidates,
            offsets: IndexOffsets::new(*index),
            step: if *reverse { -1 } else { 1 },
            found: FxHashMap::default(),
        };
        scan.block(body);
        let mut plan: Vec<(VarId, bool)> = scan
            .found
            .into_iter()
            .filter(|(a, u)| !u.bad && u.uses == uses[a.index()] && candidates[a] < position)
            .map(|(a, u)| (a, u.ahead))
            .collect();
        if plan.is_empty() {
            continue;
        }
        plan.sort_by_key(|(a, _)| candidates[a]);
        for (a, ahead) in &plan {
            let carry = ahead.then(|| f.new_mut_var(format!("{}_carry", f.var(*a).name), Type::F64));
            replaced.insert(*a, carry);
        }
        plans.insert(position, plan);
    }
    if plans.is_empty() {
        return Block { stmts, results: b.results };
    }
    let mut out = Vec::with_capacity(stmts.len());
    for (position, s) in stmts.into_iter().enumerate() {
        let loc = s.loc;
        if let Some(carry) = candidate(f, &s.kind).and_then(|a| replaced.get(&a)) {
            if let Some(carry) = carry {
                out.push(Stmt { kind: StmtKind::Let { vars: vec![*carry], expr: Expr::Atom(Atom::F64(0.0)) }, loc });
            }
            continue;
        }
        match (s.kind, plans.get(&position)) {
            (StmtKind::For { n, index, reverse, body }, Some(plan)) => {
                let body = contract_loop(f, index, reverse, body, plan, &replaced, loc);
                out.push(Stmt { kind: StmtKind::For { n, index, reverse, body }, loc });
            }
            (kind, _) => out.push(Stmt { kind, loc }),
        }
    }
    Block { stmts: out, results: b.results }
}

/// Finds the uses of candidates in a loop body, through its `if`s.
struct Scan<'a> {
    f: &'a Function,
    fallible: &'a Fallible,
    candidates: &'a FxHashMap<VarId, usize>,
    offsets: IndexOffsets,
    /// The offset of the next iteration's element.
    step: i64,
    found: FxHashMap<VarId, Found>,
}

impl Scan<'_> {
    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            self.stmt(&s.kind);
        }
        for a in &b.results {
            if let Atom::Var(v) = a {
                self.other_use(*v);
            }
        }
    }

    fn other_use(&mut self, v: VarId) {
        if self.candidates.contains_key(&v) {
            let u = self.found.entry(v).or_default();
            u.uses += 1;
            u.bad = true;
        }
    }

    fn stmt(&mut self, kind: &StmtKind) {
        match kind {
            StmtKind::AccAdd { acc, indices, value } if self.candidates.contains_key(acc) => {
                let off = self.offsets.offset(indices.first());
                let u = self.found.entry(*acc).or_default();
                u.uses += 1;
                u.ahead |= off == Some(self.step);
                u.bad |= indices.len() != 1 || !(off == Some(0) || off == Some(self.step));
                if let Atom::Var(v) = value {
                    self.other_use(*v);
                }
            }
            StmtKind::Let { expr: Expr::Index { array, indices }, .. } if self.candidates.contains_key(array) => {
                let read_here = indices.len() == 1 && self.offsets.offset(indices.first()) == Some(0);
                let safe = !self.fallible.stmt(kind);
                let u = self.found.entry(*array).or_default();
                u.uses += 1;
                u.bad |= !(read_here && safe);
            }
            StmtKind::If { cond, then_branch, else_branch }
            | StmtKind::Let { expr: Expr::If { cond, then_branch, else_branch }, .. } => {
                if let Atom::Var(v) = cond {
                    self.other_use(*v);
                }
                let known = self.offsets.enter_then(cond);
                self.block(then_branch);
                self.offsets.leave_then(known);
                self.block(else_branch);
            }
            _ => {
                // Uses nested deeper (in loops and comprehensions) are
                // not counted here, so they keep the counts short of all
                // uses and the accumulator as it is.
                stmt_uses_shallow(kind, &mut |v| self.other_use(v));
                if let StmtKind::Let { vars, expr } = kind {
                    self.offsets.bind(self.f, vars, expr);
                }
            }
        }
    }
}

/// The scalars standing for a contracted accumulator in one loop body.
struct Scalars {
    /// Its element at the loop index.
    cur: VarId,
    /// Its element at the next iteration's index, when added into.
    next: Option<VarId>,
}

/// The body of the loop over `index` with the accumulators of `plan`
/// contracted: each iteration starts `cur` from `carry` (or 0) and `next`
/// from 0, and hands `next` to `carry` at its end.
fn contract_loop(
    f: &mut Function,
    index: VarId,
    reverse: bool,
    body: Block,
    plan: &[(VarId, bool)],
    replaced: &FxHashMap<VarId, Option<VarId>>,
    loc: crate::program::Loc,
) -> Block {
    let mut head = Vec::new();
    let mut tail = Vec::new();
    let mut scalars: FxHashMap<VarId, Scalars> = FxHashMap::default();
    for (a, ahead) in plan {
        let name = f.var(*a).name.clone();
        let cur = f.new_mut_var(format!("{name}_cur"), Type::F64);
        let carry = replaced.get(a).copied().flatten();
        let start = carry.map_or(Atom::F64(0.0), Atom::Var);
        head.push(Stmt { kind: StmtKind::Let { vars: vec![cur], expr: Expr::Atom(start) }, loc });
        let next = match (ahead, carry) {
            (true, Some(carry)) => {
                let next = f.new_mut_var(format!("{name}_next"), Type::F64);
                head.push(Stmt { kind: StmtKind::Let { vars: vec![next], expr: Expr::Atom(Atom::F64(0.0)) }, loc });
                tail.push(Stmt { kind: StmtKind::Assign { var: carry, value: Atom::Var(next) }, loc });
                Some(next)
            }
            _ => None,
        };
        scalars.insert(*a, Scalars { cur, next });
    }
    let mut rewrite =
        Rewrite { f, offsets: IndexOffsets::new(index), scalars: &scalars, step: if reverse { -1 } else { 1 } };
    let mut body = rewrite.block(body);
    head.append(&mut body.stmts);
    head.append(&mut tail);
    Block { stmts: head, results: body.results }
}

/// Replaces the accesses to contracted accumulators in a loop body (the
/// same walk as [`Scan`]'s, so the offsets agree).
struct Rewrite<'a> {
    f: &'a mut Function,
    offsets: IndexOffsets,
    scalars: &'a FxHashMap<VarId, Scalars>,
    step: i64,
}

impl Rewrite<'_> {
    fn block(&mut self, b: Block) -> Block {
        let mut out = Vec::with_capacity(b.stmts.len());
        for s in b.stmts {
            self.stmt(s, &mut out);
        }
        Block { stmts: out, results: b.results }
    }

    fn branches(&mut self, cond: &Atom, then_branch: Block, else_branch: Block) -> (Block, Block) {
        let known = self.offsets.enter_then(cond);
        let t = self.block(then_branch);
        self.offsets.leave_then(known);
        (t, self.block(else_branch))
    }

    fn stmt(&mut self, s: Stmt, out: &mut Vec<Stmt>) {
        let loc = s.loc;
        let kind = match s.kind {
            StmtKind::AccAdd { acc, indices, value } if self.scalars.contains_key(&acc) => {
                // Scan admitted only the offsets 0 and the step (which
                // gave the accumulator its `next`).
                let sc = &self.scalars[&acc];
                let target = match (self.offsets.offset(indices.first()) == Some(self.step), sc.next) {
                    (true, Some(next)) => next,
                    _ => sc.cur,
                };
                let sum = self.f.new_var(format!("{}_add", self.f.var(target).name), Type::F64);
                out.push(Stmt {
                    kind: StmtKind::Let { vars: vec![sum], expr: Expr::Binary(BinOp::Add, Atom::Var(target), value) },
                    loc,
                });
                StmtKind::Assign { var: target, value: Atom::Var(sum) }
            }
            StmtKind::Let { vars, expr: Expr::Index { array, .. } } if self.scalars.contains_key(&array) => {
                StmtKind::Let { vars, expr: Expr::Atom(Atom::Var(self.scalars[&array].cur)) }
            }
            StmtKind::If { cond, then_branch, else_branch } => {
                let (then_branch, else_branch) = self.branches(&cond, then_branch, else_branch);
                StmtKind::If { cond, then_branch, else_branch }
            }
            StmtKind::Let { vars, expr: Expr::If { cond, then_branch, else_branch } } => {
                let (then_branch, else_branch) = self.branches(&cond, then_branch, else_branch);
                StmtKind::Let { vars, expr: Expr::If { cond, then_branch, else_branch } }
            }
            kind => {
                if let StmtKind::Let { vars, expr } = &kind {
                    self.offsets.bind(self.f, vars, expr);
                }
                kind
            }
        };
        out.push(Stmt { kind, loc });
    }
}
