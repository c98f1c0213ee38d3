//! Scalar reductions of backward loops as sums: the additions that the
//! iterations of a backward loop make into one scalar cotangent become a
//! `sum` of their contributions, vectorised in the order of `sum`, and
//! run in parallel blocks when the loop is large (the code generator's
//! parallel sums).
//!
//! Reverse mode transposes a comprehension `for i < n => e` that reads a
//! scalar `m` bound outside it into a loop that adds each iteration's
//! contribution to the cotangent of `m`, a mutable scalar: a chain of
//! dependent additions, one per iteration, that neither vector lanes nor
//! threads can share out (lse's maximum, GMM's weights, a loss's scale):
//!
//! ```text
//! for rev i < n do {              let c' = build i' < n => { slice'; yield c' }
//!   slice                          let s = sum c'
//!   let t = add ct_m c             ct_m := add ct_m s
//!   ct_m := t                      for rev i < n do { slice; rest }
//!   rest
//! }
//! ```
//!
//! # Order
//!
//! This defines the order of these additions (docs/src/reference/builtins.md,
//! "Order of summation"): the contributions of the iterations are summed as
//! `sum` sums, in index order, and the sum is added to the cotangent once.
//! The interpreter runs the IR after this pass, as both backends do, so all
//! of them give the same bits; the runtime-Delta oracle adds in the
//! reverse order of the uses and agrees to rounding.
//!
//! # Legality
//!
//! A loop `for [rev] i < n` (`n` a literal of at least [`MIN_TRIPS`] or an
//! extent, so the comprehension cannot fail on its size) qualifies for a
//! mutable `f64` scalar `a` bound outside it when
//!
//! - its body may not fail ([`super::fallible`]): running part of it before
//!   the rest changes no error;
//! - `a` is used in the body exactly twice, by `let t = add a c` (or `add
//!   c a`) and `a := t` at the top level of the body, and `t` only by that
//!   assignment: the iterations add into `a` and nothing else reads it;
//! - the contribution `c` depends, within the body, only on `let`s at its
//!   top level without nested blocks, that neither pop the tape nor call,
//!   and that read no mutable variable and no accumulator (whose contents
//!   the loop may change): the slice computes the same values before the
//!   loop as in it.
//!
//! Linear in the size of the function times the depth of its loop nests
//! (each body is scanned by the loops around it).

use super::fallible::Fallible;
use crate::fx::{FxHashMap, FxHashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, Loc, ReduceOp, Stmt, StmtKind, VarId};
use crate::types::{Scalar, Type};
use crate::visit::{child_blocks, expr_uses, for_each_block, stmt_uses, Subst};

/// Loops of fewer iterations than this literal keep their additions (a
/// `sum` of a handful of elements costs more than the chain).
pub const MIN_TRIPS: i64 = 16;

/// Rewrites the scalar reductions of the backward loops of `f` as sums
/// (module docs).
pub fn sum_backward_reductions(f: &mut Function) {
    if !has_candidate(&f.body, f) {
        return;
    }
    drop_self_assignments(&mut f.body, &f.vars);
    let facts = Facts::of(f);
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &facts);
}

/// What the rewrite needs to know of the whole function.
struct Facts {
    fallible: Fallible,
    /// Variables bound by `dim` (never negative).
    extents: FxHashSet<VarId>,
    /// Accumulators and the arrays made from them (views): their contents
    /// change under reads.
    accumulators: FxHashSet<VarId>,
}

impl Facts {
    fn of(f: &Function) -> Facts {
        let mut extents = FxHashSet::default();
        let mut accumulators = FxHashSet::default();
        for_each_block(&f.body, &mut |b| {
            for s in &b.stmts {
                match &s.kind {
                    StmtKind::Let { vars, expr: Expr::Dim { .. } } => {
                        extents.extend(vars.iter().copied().filter(|v| !f.var(*v).mutable))
                    }
                    StmtKind::Let { vars, expr: Expr::Zeros(_) | Expr::ZerosLike(_) } => {
                        accumulators.extend(vars.iter().copied())
                    }
                    StmtKind::AccAdd { acc, .. } | StmtKind::AccZero { acc, .. } => {
                        accumulators.insert(*acc);
                    }
                    _ => {}
                }
            }
        });
        // Arrays computed from accumulators (rows, slices, copies), in
        // program order: a binding follows its operands.
        for_each_block(&f.body, &mut |b| {
            for s in &b.stmts {
                if let StmtKind::Let { vars, expr } = &s.kind {
                    let mut from = false;
                    expr_uses(expr, &mut |v| from |= accumulators.contains(&v));
                    if from {
                        accumulators.extend(vars.iter().copied().filter(|v| !f.ty(*v).is_scalar()));
                    }
                }
            }
        });
        Facts { fallible: super::fallible::analyse(f), extents, accumulators }
    }
}

/// True when some loop of `b` assigns a mutable `f64` at its top level.
fn has_candidate(b: &Block, f: &Function) -> bool {
    let mut found = false;
    for_each_block(b, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::For { body, .. } = &s.kind {
                found |= body.stmts.iter().any(|s| assigned_f64(f, &s.kind).is_some());
            }
        }
    });
    found
}

/// `a` of `a := v` when `a` is an `f64`.
fn assigned_f64(f: &Function, kind: &StmtKind) -> Option<VarId> {
    match kind {
        StmtKind::Assign { var, .. } if f.ty(*var) == Type::F64 => Some(*var),
        _ => None,
    }
}

fn block(f: &mut Function, b: Block, facts: &Facts) -> Block {
    let mut out = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let kind = super::inline::map_nested(s.kind, &mut |nb| block(f, nb, facts));
        let StmtKind::For { n, index, reverse, mut body } = kind else {
            out.push(Stmt { kind, loc: s.loc });
            continue;
        };
        let sized = match n {
            Atom::I64(k) => k >= MIN_TRIPS,
            Atom::Var(v) => facts.extents.contains(&v),
            _ => false,
        };
        if sized && !facts.fallible.block(&body) {
            let found = reductions(f, &body, index, facts);
            let mut gone = FxHashSet::default();
            for r in &found {
                out.extend(sum_of(f, &body, n, index, r, s.loc));
                gone.extend([r.add, r.assign]);
            }
            if !gone.is_empty() {
                let stmts = std::mem::take(&mut body.stmts);
                body.stmts = stmts.into_iter().enumerate().filter(|(k, _)| !gone.contains(k)).map(|(_, s)| s).collect();
            }
        }
        out.push(Stmt { kind: StmtKind::For { n, index, reverse, body }, loc: s.loc });
    }
    Block { stmts: out, results: b.results }
}

/// A reduction of a loop body: `let t = add a c` at `add`, `a := t` at
/// `assign`, and the statements `c` depends on (`slice`, in order).
struct Reduction {
    acc: VarId,
    contribution: Atom,
    add: usize,
    assign: usize,
    slice: Vec<usize>,
}

/// The reductions of a loop body (module docs), in the order of their
/// additions.
fn reductions(f: &Function, body: &Block, index: VarId, facts: &Facts) -> Vec<Reduction> {
    let targets: FxHashMap<VarId, usize> = body
        .stmts
        .iter()
        .enumerate()
        .filter_map(|(k, s)| assigned_f64(f, &s.kind).filter(|a| f.var(*a).mutable).map(|a| (a, k)))
        .collect();
    if targets.is_empty() {
        return Vec::new();
    }
    // The uses in the body of the targets and of the variables the body binds.
    let mut uses: FxHashMap<VarId, u32> = FxHashMap::default();
    for s in &body.stmts {
        stmt_uses(&s.kind, &mut |v| *uses.entry(v).or_default() += 1);
    }
    body.results.iter().filter_map(Atom::as_var).for_each(|v| *uses.entry(v).or_default() += 1);
    let binder: FxHashMap<VarId, usize> = body
        .stmts
        .iter()
        .enumerate()
        .flat_map(|(k, s)| match &s.kind {
            StmtKind::Let { vars, .. } => vars.iter().map(|v| (*v, k)).collect(),
            _ => Vec::new(),
        })
        .collect();
    let mut out = Vec::new();
    for (k, s) in body.stmts.iter().enumerate() {
        let StmtKind::Let { vars, expr: Expr::Binary(BinOp::Add, x, y) } = &s.kind else { continue };
        let [t] = vars.as_slice() else { continue };
        let (acc, contribution) = match (x, y) {
            (Atom::Var(a), c) if targets.contains_key(a) => (*a, *c),
            (c, Atom::Var(a)) if targets.contains_key(a) => (*a, *c),
            _ => continue,
        };
        // `a` bound outside the loop (the sum goes before it).
        if binder.contains_key(&acc) {
            continue;
        }
        let assign = targets[&acc];
        let assigns_t = matches!(&body.stmts[assign].kind, StmtKind::Assign { value: Atom::Var(v), .. } if v == t);
        if !assigns_t || assign < k || uses.get(&acc) != Some(&2) || uses.get(t) != Some(&1) {
            continue;
        }
        if contribution.as_var() == Some(acc) {
            continue;
        }
        if let Some(slice) = slice_of(f, body, contribution, index, &binder, facts) {
            out.push(Reduction { acc, contribution, add: k, assign, slice });
        }
    }
    out
}

/// The statements of `body` that `c` depends on, in order, when each is a
/// `let` the slice may run before the loop (module docs).
fn slice_of(
    f: &Function,
    body: &Block,
    c: Atom,
    index: VarId,
    binder: &FxHashMap<VarId, usize>,
    facts: &Facts,
) -> Option<Vec<usize>> {
    let mut slice = FxHashSet::default();
    let mut work: Vec<VarId> = c.as_var().into_iter().collect();
    while let Some(v) = work.pop() {
        if v == index {
            continue;
        }
        // A mutable variable changes under the loop (assigned anywhere in
        // it, or inside the body's own blocks), an accumulator too.
        if f.var(v).mutable || facts.accumulators.contains(&v) {
            return None;
        }
        // Bound outside the loop: read as it is before it.
        let Some(&k) = binder.get(&v) else { continue };
        if !slice.insert(k) {
            continue;
        }
        let kind = &body.stmts[k].kind;
        let StmtKind::Let { expr, .. } = kind else { return None };
        if child_blocks(kind).next().is_some() || matches!(expr, Expr::Pop | Expr::TapeMark | Expr::Call { .. }) {
            return None;
        }
        expr_uses(expr, &mut |u| work.push(u));
    }
    let mut slice: Vec<usize> = slice.into_iter().collect();
    slice.sort_unstable();
    Some(slice)
}

/// The statements that make reduction `r` of `body` before the loop: its
/// slice in a comprehension, its `sum`, and the one addition into the
/// cotangent.
fn sum_of(f: &mut Function, body: &Block, n: Atom, index: VarId, r: &Reduction, loc: Loc) -> Vec<Stmt> {
    let slice =
        Block { stmts: r.slice.iter().map(|&k| body.stmts[k].clone()).collect(), results: vec![r.contribution] };
    let mut subst = Subst::default();
    let slice = crate::visit::freshen_block(f, &slice, &[index], &mut subst);
    let row_index = subst.var(index);
    let name = f.var(r.acc).name.clone();
    let rows = f.new_var(format!("{name}_rows"), Type::array(Scalar::F64, 1));
    let total = f.new_var(format!("{name}_sum"), Type::F64);
    let added = f.new_var(format!("{name}_add"), Type::F64);
    let let1 = |v: VarId, expr: Expr| Stmt { kind: StmtKind::Let { vars: vec![v], expr }, loc };
    vec![
        let1(rows, Expr::Build { n, index: row_index, body: slice }),
        let1(total, Expr::Reduce { op: ReduceOp::Sum, array: rows }),
        let1(added, Expr::Binary(BinOp::Add, Atom::Var(r.acc), Atom::Var(total))),
        Stmt { kind: StmtKind::Assign { var: r.acc, value: Atom::Var(added) }, loc },
    ]
}

/// Removes the assignments `a := t` of a variable to the value it holds
/// (`let t = a` earlier in the same block, `t` immutable, `a` not assigned
/// since, at any depth): reverse mode passes the cotangent of a loop's invariant state
/// through each iteration so (`ct := ct'` with `ct' = ct`), which leaves
/// the loop assigning a variable bound outside it. Linear in the size of
/// `b` times the depth of its nesting.
fn drop_self_assignments(b: &mut Block, vars: &[crate::program::VarInfo]) {
    for s in &mut b.stmts {
        for c in crate::visit::child_blocks_mut(&mut s.kind) {
            drop_self_assignments(c, vars);
        }
    }
    // `t` of `let t = a` -> (`a`, how many times `a` was assigned before).
    let mut read: FxHashMap<VarId, (VarId, u32)> = FxHashMap::default();
    let mut assigned: FxHashMap<VarId, u32> = FxHashMap::default();
    let stmts = std::mem::take(&mut b.stmts);
    for s in stmts {
        match &s.kind {
            // `t` immutable: it keeps the value read.
            StmtKind::Let { vars: bound, expr: Expr::Atom(Atom::Var(a)) }
                if bound.len() == 1 && !vars[bound[0].index()].mutable =>
            {
                read.insert(bound[0], (*a, assigned.get(a).copied().unwrap_or(0)));
            }
            StmtKind::Assign { var, value: Atom::Var(t) } => {
                let held = assigned.get(var).copied().unwrap_or(0);
                if read.get(t) == Some(&(*var, held)) {
                    continue;
                }
                *assigned.entry(*var).or_default() += 1;
            }
            StmtKind::Assign { var, .. } => *assigned.entry(*var).or_default() += 1,
            kind => {
                for c in child_blocks(kind) {
                    for_each_block(c, &mut |nb| {
                        for s in &nb.stmts {
                            if let StmtKind::Assign { var, .. } = &s.kind {
                                *assigned.entry(*var).or_default() += 1;
                            }
                        }
                    });
                }
            }
        }
        b.stmts.push(s);
    }
}
