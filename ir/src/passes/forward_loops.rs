//! Backward loops whose iterations are independent run forward.
//!
//! Reverse mode transposes `for i < n => e` into `for rev i < n do { .. }`,
//! whose iterations run from `n - 1` down to 0 so that they pop the tape
//! in the order the forward pass pushed. Many backward loops pop nothing
//! and add each iteration's contributions into elements of their own: the
//! cotangent of an elementwise map (`ct_x[i] += ..`), of a dot product's
//! operands, the rows of a triangular solve's factor. Running them
//! downwards costs a permutation of every vector the code generator loads
//! and stores (LLVM vectorises a descending loop with reversed vectors).
//! This pass clears `reverse` of every such loop (GMM's gradient at d64: the
//! inner loop over a row of the factor's cotangent, 185 -> 161 ms on one
//! thread).
//!
//! # Legality
//!
//! A loop `for rev i < n do body` runs forward when
//!
//! - `body` may not fail ([`super::fallible`]): the error of the lowest
//!   iteration would otherwise be met before that of the highest;
//! - `body` uses no tape and calls nothing, assigns only scalars it binds,
//!   and clears (`AccZero`) only accumulators it makes;
//! - every addition into an accumulator not made by `body` is into an
//!   element whose indices include `i` (`acc[.., i, ..] += v`), directly or
//!   through a view bound in `body` whose indices include `i` (and that
//!   view's rows and slices); all additions into one accumulator (one
//!   `zeros`/`zeros_like`, through any views) go through one variable
//!   bound outside the loop and have `i` at the same axis of it (`a[i, c]`
//!   and `a[c, i]` would both reach `a[c, c]` from different iterations);
//! - `body` reads none of those accumulators, nor any view of them, nor
//!   any array that may share memory with an accumulator through anything
//!   but a view, or whose memory is not known: the results of branches and
//!   loops, the states of loops, arrays popped from the tape, mutable
//!   arrays (it may read their extents); except elements of its own rows:
//!   `x = a[.., i, ..]` through the variable, and with `i` at the axis,
//!   through which every addition into `a`'s accumulator goes (or an
//!   element of a view of such a row), which only this iteration adds
//!   into. The backward loops of a comprehension and of the one it reads
//!   fuse so ([`super::fuse_for`]): GMM's unpacking of the factors, `for
//!   k, r, c => icf[k, ..]`, after the nest that adds into `ct_lower[k, r,
//!   c]`, reads that row of it.
//!
//! Additions into accumulators, and views of them, count as infallible
//! (reverse mode adds and views only at positions of accesses that
//! succeeded: [`super::fallible`]), so a loop of them reports no error in
//! either direction.
//!
//! Then each element the loop adds into receives its additions from one
//! iteration only, in that iteration's order, and no iteration reads what
//! another writes (an iteration reads only elements it alone adds into):
//! every order of the iterations gives the same bits. The
//! interpreter runs the IR after this pass, as both backends do.

use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, Block, Expr, Function, StmtKind, VarId};
use crate::visit::{block_binds, child_blocks, child_blocks_mut, expr_uses, for_each_block, stmt_uses_shallow};

use super::fallible::{self, Fallible};

/// Loops nested in more loops than this are left as they are: each
/// statement is then walked by at most this many legality checks.
const MAX_DEPTH: usize = 8;

/// Clears `reverse` of the backward loops of `f` whose iterations are
/// independent (module docs), at every depth up to `MAX_DEPTH`. Returns
/// whether it cleared any. Linear in the size of `f`.
pub fn run_independent_loops_forward(f: &mut Function) -> bool {
    let mut any_reverse = false;
    for_each_block(&f.body, &mut |b| {
        any_reverse |= b.stmts.iter().any(|s| matches!(s.kind, StmtKind::For { reverse: true, .. }));
    });
    if !any_reverse {
        return false;
    }
    let facts = Facts::of(f);
    // Whether each `for rev` loop qualifies, in the order of a walk of the
    // blocks (a block's statements, then the blocks nested in them, first
    // to last) that the rewrite below repeats; with the number of loops
    // around each block.
    let mut qualifies = Vec::new();
    let mut stack = vec![(&f.body, 0usize)];
    while let Some((b, depth)) = stack.pop() {
        let mut children = Vec::new();
        for s in &b.stmts {
            if let StmtKind::For { reverse: true, index, body, .. } = &s.kind {
                qualifies.push(depth < MAX_DEPTH && independent(f, &facts, *index, body));
            }
            let inner = depth + usize::from(matches!(s.kind, StmtKind::For { .. }));
            children.extend(child_blocks(&s.kind).map(|c| (c, inner)));
        }
        stack.extend(children.into_iter().rev());
    }
    if !qualifies.contains(&true) {
        return false;
    }
    let mut next = qualifies.into_iter();
    let mut stack = vec![&mut f.body];
    while let Some(b) = stack.pop() {
        let mut children = Vec::new();
        for s in &mut b.stmts {
            if let StmtKind::For { reverse: reverse @ true, .. } = &mut s.kind {
                *reverse = !next.next().unwrap_or(false);
            }
            children.extend(child_blocks_mut(&mut s.kind));
        }
        stack.extend(children.into_iter().rev());
    }
    true
}

/// What the legality checks need of the whole function (here and in
/// [`super::jam`]).
pub(super) struct Facts {
    /// Which bindings may fail, and the accumulator each accumulator and
    /// view of one is the memory of ([`Fallible::accumulator_root`]).
    pub(super) fallible: Fallible,
    /// Arrays that may share memory with an accumulator other than as one
    /// of those views: made by an expression that uses one, assigned one,
    /// and (whatever they use) the results of branches and loops, the
    /// states of loops, arrays popped from the tape and mutable arrays.
    pub(super) tainted: HashSet<VarId>,
}

impl Facts {
    pub(super) fn of(f: &Function) -> Facts {
        let mut facts = Facts { fallible: fallible::analyse(f), tainted: HashSet::default() };
        // Blocks in pre-order: a variable is bound before the blocks nested
        // after its binding can use it.
        for_each_block(&f.body, &mut |b| {
            for s in &b.stmts {
                match &s.kind {
                    StmtKind::Let { vars, expr } => facts.bind(f, vars, expr),
                    StmtKind::Assign { var, value: Atom::Var(from) } if facts.may_share(*from) => {
                        facts.tainted.insert(*var);
                    }
                    _ => {}
                }
            }
        });
        facts
    }

    fn bind(&mut self, f: &Function, vars: &[VarId], expr: &Expr) {
        // The array states of a loop may start as, or become, anything the
        // loop reads.
        if let Expr::Loop { states, .. } | Expr::While { states, .. } = expr {
            self.tainted.extend(states.iter().copied().filter(|v| f.ty(*v).is_array()));
        }
        if !vars.iter().any(|v| f.ty(*v).is_array()) {
            return;
        }
        let mutable = vars.iter().any(|v| f.var(*v).mutable);
        match expr {
            // An accumulator, or a view of one.
            _ if vars.len() == 1 && self.root(vars[0]).is_some() => {}
            // Fresh arrays (rows are copied in).
            Expr::Build { .. } if !mutable => {}
            // What a branch or a loop yields, and an array popped from the
            // tape (which holds arrays by reference), may be an
            // accumulator; a mutable array may be assigned one later.
            Expr::If { .. } | Expr::Loop { .. } | Expr::While { .. } | Expr::Pop => {
                self.tainted.extend(vars.iter().copied())
            }
            _ if mutable => self.tainted.extend(vars.iter().copied()),
            // The rest have no nested blocks: `expr_uses` reads the
            // statement only.
            _ => {
                let mut from = false;
                expr_uses(expr, &mut |u| from |= self.may_share(u));
                if from {
                    self.tainted.extend(vars.iter().copied());
                }
            }
        }
    }

    fn may_share(&self, v: VarId) -> bool {
        self.root(v).is_some() || self.tainted.contains(&v)
    }

    /// The accumulator whose memory `v` is, when `v` is an accumulator or
    /// a view of one ([`Fallible::accumulator_root`]).
    pub(super) fn root(&self, v: VarId) -> Option<VarId> {
        self.fallible.accumulator_root(v)
    }
}

/// Whether the iterations of `for rev index < n do body` are independent
/// (module docs).
fn independent(f: &Function, facts: &Facts, index: VarId, body: &Block) -> bool {
    if facts.fallible.block(body) {
        return false;
    }
    let mut bound = HashSet::default();
    bound.insert(index);
    block_binds(body, &mut |v| {
        bound.insert(v);
    });
    // The axis of an access's indices that is `i` (the first, if several).
    let axis_of_i = |indices: &[Atom]| indices.iter().position(|a| *a == Atom::Var(index));
    // Views bound in the body of rows of outer accumulators at `i`, with
    // the outer variable they view and the axis of it that `i` fixes.
    let mut own_rows: HashMap<VarId, (VarId, usize)> = HashMap::default();
    // Accumulator written -> the one outer variable it is written through,
    // and the one axis of that variable at which every write has `i`.
    let mut written: HashMap<VarId, (VarId, usize)> = HashMap::default();
    let mut ok = true;
    let mut write = |root: VarId, through: (VarId, usize), ok: &mut bool| {
        *ok &= *written.entry(root).or_insert(through) == through;
    };
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { vars, expr: Expr::Index { array, indices } }
                    if vars.len() == 1 && f.ty(vars[0]).is_array() =>
                {
                    if let Some(outer) = own_rows.get(array).copied() {
                        own_rows.insert(vars[0], outer);
                    } else if let Some(axis) = axis_of_i(indices)
                        .filter(|_| !bound.contains(array) && facts.root(*array).is_some_and(|r| !bound.contains(&r)))
                    {
                        own_rows.insert(vars[0], (*array, axis));
                    }
                }
                StmtKind::Let { vars, expr: Expr::Slice { array, .. } | Expr::Reshape { array, .. } }
                    if vars.len() == 1 && own_rows.contains_key(array) =>
                {
                    let outer = own_rows[array];
                    own_rows.insert(vars[0], outer);
                }
                StmtKind::Let { expr: Expr::Pop | Expr::TapeMark | Expr::Call { .. }, .. }
                | StmtKind::Push(_)
                | StmtKind::TapeRewind(_) => ok = false,
                StmtKind::Assign { var, .. } => ok &= bound.contains(var) && f.ty(*var).is_scalar(),
                StmtKind::AccZero { acc, .. } => ok &= facts.root(*acc).is_some_and(|r| bound.contains(&r)),
                StmtKind::AccAdd { acc, indices, .. } => match facts.root(*acc) {
                    None => ok = false,
                    Some(r) if bound.contains(&r) => {}
                    Some(r) => {
                        if let Some(outer) = own_rows.get(acc) {
                            write(r, *outer, &mut ok);
                        } else if let Some(axis) = axis_of_i(indices).filter(|_| !bound.contains(acc)) {
                            write(r, (*acc, axis), &mut ok);
                        } else {
                            ok = false;
                        }
                    }
                },
                _ => {}
            }
        }
    });
    if !ok || written.is_empty() {
        return false;
    }
    // No read of the accumulators written (but to add into them, to view
    // a row to add into, or to read an element of the iteration's own
    // row), nor of an array that may share memory with an accumulator
    // other than as a view.
    let forbidden = |v: VarId| {
        own_rows.contains_key(&v)
            || facts.tainted.contains(&v)
            || facts.root(v).is_some_and(|r| written.contains_key(&r))
    };
    // An element every write of its accumulator leaves to this iteration:
    // read through the variable and at the axis at which every write has
    // `i`, directly or through a view of such a row.
    let own_element = |array: VarId, indices: &[Atom]| {
        let Some(root) = facts.root(array) else { return false };
        let Some(&through) = written.get(&root) else { return false };
        match own_rows.get(&array) {
            Some(&outer) => outer == through,
            None => !bound.contains(&array) && axis_of_i(indices).map(|axis| (array, axis)) == Some(through),
        }
    };
    reads_only_to_add(body, &|v| own_rows.contains_key(&v), &own_element, &forbidden)
}

/// Whether `body` uses no variable for which `forbidden` holds but to add
/// into it (the accumulator of an `AccAdd`), to view it (the array of an
/// `Index`, `Slice` or `Reshape` binding a variable for which `view`
/// holds), to read an element for which `own` holds (`x = a[p..]`, a
/// scalar, `own(a, p..)`), or to read its extents. Used by the legality
/// checks of loops that reorder additions into accumulators:
/// [`independent`] and [`super::jam`].
pub(super) fn reads_only_to_add(
    body: &Block,
    view: &dyn Fn(VarId) -> bool,
    own: &dyn Fn(VarId, &[Atom]) -> bool,
    forbidden: &dyn Fn(VarId) -> bool,
) -> bool {
    let mut ok = true;
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { vars, expr: Expr::Index { array, indices } }
                    if !view(vars[0]) && own(*array, indices) =>
                {
                    ok &= !indices.iter().filter_map(Atom::as_var).any(forbidden);
                }
                StmtKind::AccAdd { indices, value, .. } => {
                    ok &= !indices.iter().chain([value]).filter_map(Atom::as_var).any(forbidden);
                }
                StmtKind::Let { vars, expr: Expr::Index { indices, .. } | Expr::Reshape { dims: indices, .. } }
                    if view(vars[0]) =>
                {
                    ok &= !indices.iter().filter_map(Atom::as_var).any(forbidden);
                }
                StmtKind::Let { vars, expr: Expr::Slice { lo, hi, .. } } if view(vars[0]) => {
                    ok &= !lo.as_var().into_iter().chain(hi.as_var()).any(forbidden);
                }
                // An extent reads no element.
                StmtKind::Let { expr: Expr::Dim { .. }, .. } => {}
                kind => stmt_uses_shallow(kind, &mut |u| ok &= !forbidden(u)),
            }
        }
        ok &= !b.results.iter().filter_map(Atom::as_var).any(forbidden);
    });
    ok
}
