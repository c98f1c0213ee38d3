//! Interchange of backward loop nests: the backward loop of a
//! comprehension over points whose inner loop over components adds into
//! each component's row of the cotangents runs with the component outer,
//! so that one component's rows stay in cache while the points stream
//! through them, and the components run on the pool of threads (a loop of
//! effects of the code generator's parallel maps).
//!
//! Reverse mode transposes `for i < n => .. for k < m => ..` (GMM: a point,
//! then each component's contribution to it) into a backward loop over the
//! points whose body ends with a loop over the components adding into
//! `ct[k, ..]` for every point: the whole `m`-row accumulator is streamed
//! from memory once per point. The rewrite:
//!
//! ```text
//! for rev j < n do {                let s = build j' < n => { A'; yield v' }
//!   A                               for rev k < m do {
//!   for rev k < m do { B }            for rev j < n do { let v = s[j]; R; B }
//! }                                 }
//! ```
//!
//! `A` (the point's own backward code, with `j` renamed and its binders
//! fresh in `A'`) runs first, in a comprehension that stacks the values
//! `v` of `A` that `B` reads (Smeding's thesis, ch. 7: arrays by index);
//! `R` are the cheap bindings of `A` that `B` reads (views, reads of outer
//! arrays, integer arithmetic), recomputed instead of stacked.
//!
//! # Legality
//!
//! - Neither `A` nor `B` may fail ([`super::fallible`]), so running all of
//!   `A` first changes no error; neither touches the tape or calls. The
//!   count `n` is a literal or an extent, or picks one of those (`if c
//!   then n else 0`), never negative (a comprehension over a negative
//!   count fails where the loop runs zero times).
//! - `A` has no effect outside itself (accumulations into accumulators it
//!   makes, assignments of its own scalars; no array is assigned, which
//!   could make a variable of its own a view of anything): its iterations
//!   are independent, and it may run in any order.
//! - `B` adds, outside its own accumulators, only into rows `k` of
//!   accumulators bound outside the nest (`acc[k, ..] += v`, or through
//!   views `acc[k, ..]` and their slices); it assigns only its own
//!   scalars. So each element of those accumulators receives its
//!   additions from the iterations `(j, k)` of one `k`, in the order of
//!   `j`, before and after: the same bits. The rows of different `k` are
//!   disjoint.
//! - Neither `A` nor `B` reads those accumulators (but to add into them),
//!   nor any array made from them outside the nest.
//! - `B` reads of `A` only `f64` and `i64` scalars and vectors bound once
//!   with extents that are the same for every `j` (stacked: the memory of
//!   `n` such values, like the residuals), and cheap bindings.
//!
//! Only loops at the top of a function are rewritten. After the rewrite the
//! inner loop's additions are into rows of the outer index, so the nest
//! does not qualify again.

use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::types::{Scalar, Type};
use crate::visit::{block_binds, block_uses, expr_uses, for_each_block, stmt_uses, Subst};

use super::fallible::{self, Fallible};

/// Rewrites the backward loop nests of `f`'s top level that qualify
/// (module docs). Linear in the size of `f`.
pub fn interchange_backward_nests(f: &mut Function) {
    let candidate = |s: &Stmt| {
        matches!(&s.kind, StmtKind::For { body, .. }
        if matches!(body.stmts.last().map(|s| &s.kind), Some(StmtKind::For { .. })))
    };
    if !f.body.stmts.iter().any(candidate) {
        return;
    }
    let facts = Facts::of(f);
    let mut k = 0;
    while k < f.body.stmts.len() {
        if candidate(&f.body.stmts[k]) {
            if let Some(plan) = plan(f, &f.body.stmts[k], &facts) {
                let new = rewrite(f, k, plan);
                let n = new.len();
                f.body.stmts.splice(k..=k, new);
                k += n;
                continue;
            }
        }
        k += 1;
    }
}

/// What the legality checks need of the whole function.
struct Facts {
    fallible: Fallible,
    /// Accumulators bound at the top level (`zeros`, `zeros_like`).
    accumulators: HashSet<VarId>,
    /// Arrays bound or assigned at the top level from an accumulator
    /// (views, copies): they may share its memory.
    derived: HashSet<VarId>,
    /// Extents bound at the top level (`let n = dim a k`), and counts
    /// that pick one of them or a literal at least 0 (`let n = if c then
    /// m else 0`, the counts of `gather`'s two comprehensions): at least 0.
    extents: HashSet<VarId>,
}

impl Facts {
    fn of(f: &Function) -> Facts {
        let mut accumulators = HashSet::default();
        let mut derived = HashSet::default();
        let mut extents = HashSet::default();
        for s in &f.body.stmts {
            let (vars, expr) = match &s.kind {
                StmtKind::Let { vars, expr } => (vars, expr),
                StmtKind::Assign { var, value: Atom::Var(from) } => {
                    if accumulators.contains(from) || derived.contains(from) {
                        derived.insert(*var);
                    }
                    continue;
                }
                _ => continue,
            };
            match expr {
                // (A mutable variable may be assigned another array.)
                Expr::Zeros(_) | Expr::ZerosLike(_) if !vars.iter().any(|v| f.var(*v).mutable) => {
                    accumulators.extend(vars.iter().copied())
                }
                Expr::Dim { .. } if !vars.iter().any(|v| f.var(*v).mutable) => extents.extend(vars.iter().copied()),
                Expr::If { then_branch, else_branch, .. }
                    if vars.len() == 1
                        && !f.var(vars[0]).mutable
                        && [then_branch, else_branch].iter().all(|b| {
                            b.stmts.is_empty()
                                && match b.results.as_slice() {
                                    [Atom::I64(x)] => *x >= 0,
                                    [Atom::Var(v)] => extents.contains(v),
                                    _ => false,
                                }
                        }) =>
                {
                    extents.insert(vars[0]);
                }
                _ if vars.iter().any(|v| f.ty(*v).is_array()) => {
                    let mut from = false;
                    expr_uses(expr, &mut |u| from |= accumulators.contains(&u) || derived.contains(&u));
                    if from {
                        derived.extend(vars.iter().copied());
                    }
                }
                _ => {}
            }
        }
        Facts { fallible: fallible::analyse(f), accumulators, derived, extents }
    }
}

/// A nest that qualifies, and what its rewrite needs.
struct Plan {
    /// The values of `A` that `B` reads, stacked by the comprehension.
    stacked: Vec<VarId>,
    /// The statements of `A` recomputed before `B` (indices into `A`).
    recomputed: Vec<usize>,
}

/// Whether the top-level statement `s` is a nest that qualifies (module
/// docs), and how to rewrite it.
fn plan(f: &Function, s: &Stmt, facts: &Facts) -> Option<Plan> {
    let StmtKind::For { n, index: j, body, .. } = &s.kind else { return None };
    // The comprehension over `n` fails where the loop runs zero times: `n`
    // must be at least 0.
    let counted = match n {
        Atom::I64(x) => *x >= 0,
        Atom::Var(v) => facts.extents.contains(v),
        _ => false,
    };
    if !counted {
        return None;
    }
    let (last, a) = body.stmts.split_last()?;
    let StmtKind::For { n: m, index: k, body: b, .. } = &last.kind else { return None };
    if facts.fallible.block(body) {
        return None;
    }
    let mut in_a = HashSet::default();
    for st in a {
        if let StmtKind::Let { vars, .. } = &st.kind {
            in_a.extend(vars.iter().copied());
        }
    }
    if m.as_var().is_some_and(|v| in_a.contains(&v) || v == *j) {
        return None;
    }
    // `A`: effects on its own variables only.
    let a_block = Block { stmts: a.to_vec(), results: vec![] };
    if !effects_within(f, &a_block) {
        return None;
    }
    // `B`: its own effects, and additions into rows `k` of outer
    // accumulators, directly or through views of such rows.
    let mut b_all = HashSet::default();
    block_binds(b, &mut |v| {
        b_all.insert(v);
    });
    let b_own = own_accumulators(b);
    let mut own_rows: HashMap<VarId, VarId> = HashMap::default();
    let mut written: HashSet<VarId> = HashSet::default();
    let mut ok = true;
    let at_k = |indices: &[Atom]| indices.first() == Some(&Atom::Var(*k));
    for_each_block(b, &mut |blk| {
        for st in &blk.stmts {
            match &st.kind {
                StmtKind::Let { vars, expr: Expr::Index { array, indices } }
                    if vars.len() == 1 && f.ty(vars[0]).is_array() =>
                {
                    if facts.accumulators.contains(array) && at_k(indices) {
                        own_rows.insert(vars[0], *array);
                    } else if let Some(root) = own_rows.get(array).copied() {
                        own_rows.insert(vars[0], root);
                    }
                }
                StmtKind::Let { vars, expr: Expr::Slice { array, .. } } if vars.len() == 1 => {
                    if let Some(root) = own_rows.get(array).copied() {
                        own_rows.insert(vars[0], root);
                    }
                }
                StmtKind::AccAdd { acc, indices, .. } => {
                    if let Some(root) = own_rows.get(acc) {
                        written.insert(*root);
                    } else if facts.accumulators.contains(acc) && at_k(indices) {
                        written.insert(*acc);
                    } else {
                        ok &= b_own.contains(acc);
                    }
                }
                StmtKind::AccZero { acc, .. } => ok &= b_own.contains(acc),
                // (An array assigned may become a view of anything.)
                StmtKind::Assign { var, .. } => ok &= b_all.contains(var) && f.ty(*var).is_scalar(),
                StmtKind::Push(_) | StmtKind::TapeRewind(_) => ok = false,
                StmtKind::Let { expr: Expr::Pop | Expr::TapeMark | Expr::Call { .. }, .. } => ok = false,
                _ => {}
            }
        }
    });
    if !ok || written.is_empty() {
        return None;
    }
    // No read of the written accumulators, of their views, or of arrays
    // made from accumulators at the top level, but to add into rows `k`.
    let forbidden = |v: VarId| written.contains(&v) || facts.derived.contains(&v);
    let mut uses_forbidden = false;
    block_uses(&a_block, &mut |v| uses_forbidden |= forbidden(v) || own_rows.contains_key(&v));
    if uses_forbidden {
        return None;
    }
    for_each_block(b, &mut |blk| {
        for st in &blk.stmts {
            match &st.kind {
                StmtKind::AccAdd { acc, indices, value } => {
                    let outer = own_rows.contains_key(acc) || written.contains(acc);
                    if !outer {
                        ok &= !forbidden(*acc);
                    }
                    for u in indices.iter().chain([value]).filter_map(Atom::as_var) {
                        ok &= !forbidden(u) && !own_rows.contains_key(&u);
                    }
                }
                StmtKind::Let { vars, expr: Expr::Index { array, .. } | Expr::Slice { array, .. } }
                    if vars.len() == 1 && own_rows.contains_key(&vars[0]) =>
                {
                    // A view of an own row: its indices are read.
                    ok &= written.contains(array) || own_rows.contains_key(array);
                    let mut idx = Vec::new();
                    stmt_uses(&st.kind, &mut |u| idx.push(u));
                    ok &= idx.iter().all(|u| *u == *array || (!forbidden(*u) && !own_rows.contains_key(u)));
                }
                kind => crate::visit::stmt_uses_shallow(kind, &mut |u| {
                    ok &= !forbidden(u) && !own_rows.contains_key(&u);
                }),
            }
        }
        for r in blk.results.iter().filter_map(Atom::as_var) {
            ok &= !forbidden(r) && !own_rows.contains_key(&r);
        }
    });
    if !ok {
        return None;
    }
    // What `B` reads of `A`: recomputed when cheap, else stacked.
    let mut read_of_a: HashSet<VarId> = HashSet::default();
    block_uses(b, &mut |v| {
        if in_a.contains(&v) {
            read_of_a.insert(v);
        }
    });
    let mut cheap: HashSet<VarId> = HashSet::default();
    for st in a {
        if let StmtKind::Let { vars, expr } = &st.kind {
            if vars.len() == 1 && !f.var(vars[0]).mutable && is_cheap(f, vars[0], expr) {
                let mut from_outside = true;
                expr_uses(expr, &mut |u| from_outside &= !in_a.contains(&u) || cheap.contains(&u));
                if from_outside {
                    cheap.insert(vars[0]);
                }
            }
        }
    }
    // The cheap bindings needed, with those they read.
    let mut needed: HashSet<VarId> = read_of_a.iter().copied().filter(|v| cheap.contains(v)).collect();
    let mut recomputed = Vec::new();
    for (i, st) in a.iter().enumerate().rev() {
        if let StmtKind::Let { vars, expr } = &st.kind {
            if vars.len() == 1 && needed.contains(&vars[0]) {
                recomputed.push(i);
                expr_uses(expr, &mut |u| {
                    if cheap.contains(&u) {
                        needed.insert(u);
                    }
                });
            }
        }
    }
    recomputed.reverse();
    let mut stacked: Vec<VarId> = Vec::new();
    for st in a {
        if let StmtKind::Let { vars, .. } = &st.kind {
            stacked.extend(vars.iter().copied().filter(|v| read_of_a.contains(v) && !cheap.contains(v)));
        }
    }
    // Accumulators of `A` are read at their final values, which the
    // comprehension yields. Stacked values: numbers and vectors of extents
    // the same for every `j`, bound once (a mutable variable's extents may
    // change).
    let vectors: Vec<Atom> = stacked.iter().filter(|v| f.ty(**v).rank == 1).map(|v| Atom::Var(*v)).collect();
    let dims = crate::shape::static_dims_in(f, *j, a, &vectors);
    if dims.iter().any(Option::is_none) {
        return None;
    }
    let stackable = |v: VarId| {
        let t = f.ty(v);
        t.rank <= 1 && matches!(t.elem, Scalar::F64 | Scalar::I64) && !f.var(v).mutable
    };
    if !stacked.iter().copied().all(stackable) {
        return None;
    }
    Some(Plan { stacked, recomputed })
}

/// The accumulators `b` makes (`zeros`, `zeros_like`, at any depth) and
/// the views of them it binds.
fn own_accumulators(b: &Block) -> HashSet<VarId> {
    let mut own = HashSet::default();
    for_each_block(b, &mut |blk| {
        for st in &blk.stmts {
            let StmtKind::Let { vars, expr } = &st.kind else { continue };
            match expr {
                Expr::Zeros(_) | Expr::ZerosLike(_) => own.extend(vars.iter().copied()),
                Expr::Index { array, .. } | Expr::Slice { array, .. } | Expr::Reshape { array, .. }
                    if own.contains(array) =>
                {
                    own.extend(vars.iter().copied())
                }
                _ => {}
            }
        }
    });
    own
}

/// True when every effect of `b` (accumulations, assignments of scalars)
/// is on a variable it binds (an accumulator it makes, or a view of one),
/// and `b` touches no tape and calls nothing.
fn effects_within(f: &Function, b: &Block) -> bool {
    let own = own_accumulators(b);
    let mut bound = HashSet::default();
    block_binds(b, &mut |v| {
        bound.insert(v);
    });
    let mut ok = true;
    for_each_block(b, &mut |blk| {
        for st in &blk.stmts {
            ok &= match &st.kind {
                StmtKind::AccAdd { acc, .. } | StmtKind::AccZero { acc, .. } => own.contains(acc),
                StmtKind::Assign { var, .. } => bound.contains(var) && f.ty(*var).is_scalar(),
                StmtKind::Push(_) | StmtKind::TapeRewind(_) => false,
                StmtKind::Let { expr: Expr::Pop | Expr::TapeMark | Expr::Call { .. }, .. } => false,
                _ => true,
            };
        }
    });
    ok
}

/// A binding cheap to recompute for every component: a view or element of
/// an array, an extent, a copy of an atom, integer arithmetic.
fn is_cheap(f: &Function, v: VarId, e: &Expr) -> bool {
    match e {
        Expr::Atom(_) | Expr::Index { .. } | Expr::Slice { .. } | Expr::Dim { .. } | Expr::Reshape { .. } => true,
        Expr::Unary(..) | Expr::Binary(..) => f.ty(v).elem == Scalar::I64,
        _ => false,
    }
}

/// The statements that replace the nest at `f.body.stmts[at]` (module
/// docs).
fn rewrite(f: &mut Function, at: usize, plan: Plan) -> Vec<Stmt> {
    let s = f.body.stmts[at].clone();
    let StmtKind::For { n, index: j, reverse: rev_j, mut body } = s.kind else { return vec![s] };
    let Some(Stmt { kind: StmtKind::For { n: m, index: k, reverse: rev_k, body: b }, loc: inner_loc }) =
        body.stmts.pop()
    else {
        return vec![Stmt { kind: StmtKind::For { n, index: j, reverse: rev_j, body }, loc: s.loc }];
    };
    let a = body;
    let mut stmts = Vec::new();
    let mut inner = Vec::new();
    if !plan.stacked.is_empty() {
        // `A` with fresh binders and index, yielding the stacked values.
        let mut subst = Subst::default();
        let results: Vec<Atom> = plan.stacked.iter().map(|v| Atom::Var(*v)).collect();
        let copy = crate::visit::freshen_block(f, &Block { stmts: a.stmts.clone(), results }, &[j], &mut subst);
        let stacks: Vec<VarId> = plan
            .stacked
            .iter()
            .map(|v| {
                let t = f.ty(*v);
                let name = format!("stacked_{}", f.var(*v).name);
                f.new_var(&name, Type { elem: t.elem, rank: t.rank + 1 })
            })
            .collect();
        let build = Expr::Build { n, index: subst.var(j), body: copy };
        stmts.push(Stmt { kind: StmtKind::Let { vars: stacks.clone(), expr: build }, loc: s.loc });
        for (v, stack) in plan.stacked.iter().zip(&stacks) {
            let read = Expr::Index { array: *stack, indices: vec![Atom::Var(j)] };
            inner.push(Stmt { kind: StmtKind::Let { vars: vec![*v], expr: read }, loc: s.loc });
        }
    }
    inner.extend(plan.recomputed.iter().map(|i| a.stmts[*i].clone()));
    inner.extend(b.stmts);
    let points = Stmt {
        kind: StmtKind::For { n, index: j, reverse: rev_j, body: Block { stmts: inner, results: vec![] } },
        loc: s.loc,
    };
    stmts.push(Stmt {
        kind: StmtKind::For { n: m, index: k, reverse: rev_k, body: Block { stmts: vec![points], results: vec![] } },
        loc: inner_loc,
    });
    stmts
}
