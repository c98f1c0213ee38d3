//! Loop-invariant code motion: scalar computations in the body of a
//! `build`, `loop` or `for` whose operands are all defined outside the body
//! move in front of it, so they run once instead of once per iteration (and,
//! before differentiation, are never taped per iteration).
//!
//! Expressions that cannot fail and have no effect move out of any loop
//! (atoms, unary operations, binary operations other than an `i64` division
//! or remainder by a divisor that is not a nonzero literal, extents):
//! running one of them when the loop would have run zero times only costs
//! its time, never an error. Out of a loop whose trip count is a literal of
//! at least 1, any binding without effect moves too (indexing, array
//! literals, comprehensions and branches of such bindings), as long as no
//! statement staying in front of it may fail (as [`super::fallible`]
//! judges it, from size facts): the first iteration would
//! have run it first, so the call fails with the same first error. A
//! Jacobian row by row, `for r < 2 => vjp(f, x, [0.0, 0.0] with [r] = 1.0)`,
//! so runs the forward pass of `f` once when that pass has no effect (no
//! loop that tapes: `ad` yields the scalar residuals of branches). What
//! moves reads only variables bound outside the loop (or moved before it),
//! none of them mutable or sharing elements with an accumulator (the body
//! may assign or add into them). Out-of-memory errors are not ordered:
//! where memory runs out depends on what is live, which code motion changes
//! anyway.
//! Inner bodies are processed first, so a computation invariant in several
//! nested loops leaves all of them.
//!
//! Linear in the size of the function (with the fallible analysis, computed
//! once): every binding gets its position in
//! a preorder numbering, and a loop body is the interval of positions it
//! spans, so "bound inside this loop" is two comparisons. A binding with
//! nested blocks that may leave a loop of literal trip count is walked
//! whole once per such loop around it: size times the nesting depth, which
//! the frontend bounds.

use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::types::Scalar;

/// Hoists the loop-invariant computations of every loop body of `f`.
pub fn licm(f: &mut Function) {
    let mut ctx = Ctx {
        fallible: Default::default(),
        mutable: HashSet::default(),
        accumulated: HashSet::default(),
        types: Vec::new(),
        pos: vec![u32::MAX; f.vars.len()],
        ranges: Vec::new(),
        next_loop: 0,
    };
    let mut counter = 0;
    ctx.number(&f.body, &mut counter);
    if ctx.ranges.is_empty() {
        // No counted loop: nothing to move (the analyses below are the
        // pass's whole cost on long straight-line code).
        return;
    }
    ctx.mutable = f.vars.iter().enumerate().filter(|(_, v)| v.mutable).map(|(i, _)| VarId(i as u32)).collect();
    ctx.types = f.vars.iter().map(|v| v.ty.elem).collect();
    ctx.accumulated = accumulated(f);
    ctx.fallible = super::fallible::analyse(f);
    let mut body = std::mem::take(&mut f.body);
    ctx.block(&mut body);
    f.body = body;
}

struct Ctx {
    /// Which statements may fail, analysed once before any motion (keyed by
    /// the variables bound, so it stays valid as bindings move).
    fallible: super::fallible::Fallible,
    mutable: HashSet<VarId>,
    /// Arrays that may share their elements with an accumulator
    /// ([`accumulated`]): their contents change in place, so reading them
    /// is never invariant.
    accumulated: HashSet<VarId>,
    types: Vec<Scalar>,
    /// The preorder position of each variable's binding (`u32::MAX` for
    /// parameters).
    pos: Vec<u32>,
    /// The positions `[start, end)` each loop spans, in preorder of loops.
    ranges: Vec<(u32, u32)>,
    /// The next loop of `ranges` the transformation meets.
    next_loop: usize,
}

/// The loop binders (index, states) and body of a loop statement.
fn as_loop(s: &StmtKind) -> Option<(Vec<VarId>, &Block)> {
    match s {
        StmtKind::Let { expr: Expr::Build { index, body, .. }, .. } | StmtKind::For { index, body, .. } => {
            Some((vec![*index], body))
        }
        StmtKind::Let { expr: Expr::Loop { index, states, body, .. }, .. } => {
            let mut b = vec![*index];
            b.extend(states.iter().copied());
            Some((b, body))
        }
        _ => None,
    }
}

impl Ctx {
    /// Numbers the bindings of `b` in preorder and records the span of
    /// every loop.
    fn number(&mut self, b: &Block, counter: &mut u32) {
        for s in &b.stmts {
            if let StmtKind::Let { vars, .. } = &s.kind {
                for v in vars {
                    if let Some(p) = self.pos.get_mut(v.index()) {
                        *p = *counter;
                    }
                }
                *counter += 1;
            }
            if let Some((binders, body)) = as_loop(&s.kind) {
                let k = self.ranges.len();
                self.ranges.push((*counter, 0));
                for v in binders {
                    if let Some(p) = self.pos.get_mut(v.index()) {
                        *p = *counter;
                    }
                }
                *counter += 1;
                self.number(body, counter);
                self.ranges[k].1 = *counter;
            } else {
                for child in crate::visit::child_blocks(&s.kind) {
                    self.number(child, counter);
                }
            }
        }
    }

    /// Processes the loops of `b` (their bodies first), inserting what
    /// leaves each loop body in front of the loop.
    fn block(&mut self, b: &mut Block) {
        // The statements hoisted before each statement, by its index: a
        // block nothing leaves is not rebuilt.
        let mut hoists: Vec<(usize, Vec<Stmt>)> = Vec::new();
        for (i, s) in b.stmts.iter_mut().enumerate() {
            let hoisted = match &mut s.kind {
                StmtKind::Let { expr: Expr::Build { n, index, body } | Expr::Loop { n, index, body, .. }, .. }
                | StmtKind::For { n, index, body, .. } => {
                    let range = self.ranges.get(self.next_loop).copied().unwrap_or((0, u32::MAX));
                    self.next_loop += 1;
                    self.block(body);
                    let count = match n {
                        Atom::I64(c) if *c >= 1 => Some(*c),
                        _ => None,
                    };
                    self.hoist(body, range, count.map(|c| (*index, c)))
                }
                StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. }
                | StmtKind::If { then_branch, else_branch, .. } => {
                    self.block(then_branch);
                    self.block(else_branch);
                    Vec::new()
                }
                // Nothing leaves a while loop (it may run zero times): its
                // blocks are processed in place, in `number`'s order.
                StmtKind::Let { expr: Expr::While { cond, body, .. }, .. } => {
                    self.block(cond);
                    self.block(body);
                    Vec::new()
                }
                _ => Vec::new(),
            };
            if !hoisted.is_empty() {
                hoists.push((i, hoisted));
            }
        }
        if hoists.is_empty() {
            return;
        }
        let stmts = std::mem::take(&mut b.stmts);
        let mut out = Vec::with_capacity(stmts.len() + hoists.iter().map(|(_, h)| h.len()).sum::<usize>());
        let mut hoists = hoists.into_iter().peekable();
        for (i, s) in stmts.into_iter().enumerate() {
            if let Some((_, h)) = hoists.next_if(|(j, _)| *j == i) {
                out.extend(h);
            }
            out.push(s);
        }
        b.stmts = out;
    }

    /// Removes from a loop body spanning the positions `range` the
    /// statements that may leave it, in order. `runs` is the loop's index
    /// and its trip count when that is a literal of at least 1: then a
    /// binding without effect that may fail (an index, a comprehension, a
    /// branch, at any depth) leaves too, provided no statement that stays
    /// in front of it may fail. The first iteration would have run it, with
    /// the same operands, before anything else could fail, so the first
    /// error of the call is the same (out of memory excepted: where memory
    /// runs out depends on what is live, which code motion changes anyway).
    fn hoist(&self, body: &mut Block, range: (u32, u32), runs: Option<(VarId, i64)>) -> Vec<Stmt> {
        let mut moved: HashSet<VarId> = HashSet::default();
        let invariant = |v: VarId, moved: &HashSet<VarId>| {
            if self.mutable.contains(&v) {
                return false;
            }
            let p = self.pos.get(v.index()).copied().unwrap_or(u32::MAX);
            !(range.0 <= p && p < range.1) || moved.contains(&v)
        };
        // Whether a statement that stays may fail: nothing after it leaves
        // unless it cannot fail either.
        let mut may_fail = false;
        // The lengths of the array literals bound in the body.
        let mut literal_len: HashMap<VarId, usize> = HashMap::default();
        let mut hoisted = Vec::new();
        let stmts = std::mem::take(&mut body.stmts);
        for s in stmts {
            if let StmtKind::Let { vars, expr: Expr::ArrayLit { elem_ty, elems } } = &s.kind {
                if elem_ty.is_scalar() {
                    literal_len.insert(vars[0], elems.len());
                }
            }
            let movable = match &s.kind {
                StmtKind::Let { vars, expr } if vars.iter().all(|v| !self.mutable.contains(v)) => {
                    (self.pure_infallible(expr)
                        && atoms(expr).all(|a| match a {
                            Atom::Var(v) => invariant(v, &moved),
                            _ => true,
                        }))
                        || (runs.is_some() && !may_fail && {
                            let mut free = Vec::new();
                            self.effect_free(expr, &mut HashSet::default(), &mut free)
                                && free.into_iter().all(|v| invariant(v, &moved) && !self.accumulated.contains(&v))
                                && !vars.iter().any(|v| self.accumulated.contains(v))
                        })
                }
                _ => false,
            };
            if movable {
                if let StmtKind::Let { vars, .. } = &s.kind {
                    moved.extend(vars.iter().copied());
                }
                hoisted.push(s);
            } else {
                // (Only read when `runs`.)
                may_fail = may_fail || (runs.is_some() && self.may_fail(&s.kind, runs, &literal_len));
                body.stmts.push(s);
            }
        }
        hoisted
    }

    /// True when `e` has no effect at any depth (no tape, no call, no
    /// mutable variable, no `while`, whose trip count is unbounded), adding
    /// to `inner` the variables it binds and to `free` those it reads that
    /// it does not bind.
    fn effect_free(&self, e: &Expr, inner: &mut HashSet<VarId>, free: &mut Vec<VarId>) -> bool {
        let uses = |a: &Atom, inner: &HashSet<VarId>, free: &mut Vec<VarId>| {
            if let Atom::Var(v) = a {
                if !inner.contains(v) {
                    free.push(*v);
                }
            }
        };
        match e {
            Expr::Pop | Expr::TapeMark | Expr::Call { .. } | Expr::While { .. } => false,
            Expr::Build { n, index, body } => {
                uses(n, inner, free);
                inner.insert(*index);
                self.effect_free_block(body, inner, free)
            }
            Expr::Loop { n, index, states, init, body } => {
                uses(n, inner, free);
                init.iter().for_each(|a| uses(a, inner, free));
                inner.insert(*index);
                inner.extend(states.iter().copied());
                self.effect_free_block(body, inner, free)
            }
            Expr::If { cond, then_branch, else_branch } => {
                uses(cond, inner, free);
                self.effect_free_block(then_branch, inner, free) && self.effect_free_block(else_branch, inner, free)
            }
            _ => {
                crate::visit::expr_uses(e, &mut |v| {
                    if !inner.contains(&v) {
                        free.push(v);
                    }
                });
                true
            }
        }
    }

    /// [`Self::effect_free`] for every statement of `b` (bindings of
    /// immutable variables and size checks) and its results.
    fn effect_free_block(&self, b: &Block, inner: &mut HashSet<VarId>, free: &mut Vec<VarId>) -> bool {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { vars, expr } if vars.iter().all(|v| !self.mutable.contains(v)) => {
                    if !self.effect_free(expr, inner, free) {
                        return false;
                    }
                    inner.extend(vars.iter().copied());
                }
                StmtKind::CheckSize { a, b, .. } => {
                    free.extend([a, b].into_iter().filter_map(|x| x.as_var()).filter(|v| !inner.contains(v)))
                }
                _ => return false,
            }
        }
        free.extend(b.results.iter().filter_map(|a| a.as_var()).filter(|v| !inner.contains(v)));
        true
    }

    /// Whether a statement that stays in the body may fail or not end:
    /// what [`fallible`](super::fallible) cannot rule out, a `while` at any
    /// depth (it may run forever) and an accumulation (whose indices and
    /// shapes are those of accesses that succeeded, which the analysis
    /// does not check); except the update at the loop index of a literal
    /// of scalars at least as long as the trip count (`runs`,
    /// `literal_len`), the one-hot cotangent `[0.0, 0.0] with [r] = 1.0`
    /// of a Jacobian's row `r`.
    fn may_fail(&self, s: &StmtKind, runs: Option<(VarId, i64)>, literal_len: &HashMap<VarId, usize>) -> bool {
        match s {
            StmtKind::Let { expr: Expr::Update { array, indices, .. }, .. }
                if matches!(
                    (runs, indices.as_slice(), literal_len.get(array)),
                    (Some((index, count)), [Atom::Var(i)], Some(&len)) if *i == index && count as u64 <= len as u64
                ) =>
            {
                false
            }
            StmtKind::AccAdd { .. } | StmtKind::AccZero { .. } => true,
            _ => self.fallible.stmt(s) || has_while(s),
        }
    }

    /// True for expressions that cannot fail and have no effect.
    fn pure_infallible(&self, e: &Expr) -> bool {
        match e {
            Expr::Atom(_) | Expr::Unary(..) | Expr::Dim { .. } => true,
            Expr::Binary(BinOp::Div | BinOp::Rem, a, b) => {
                let int = match a {
                    Atom::Var(v) => self.types.get(v.index()) != Some(&Scalar::F64),
                    Atom::F64(_) => false,
                    _ => true,
                };
                !int || matches!(b, Atom::I64(d) if *d != 0)
            }
            Expr::Binary(..) => true,
            _ => false,
        }
    }
}

/// The variables of `f` that may share their elements with an accumulator
/// (the target of an `+=` or a zeroing, `AccAdd`/`AccZero`): every variable
/// connected to one by a copy or an assignment, a view (index, slice,
/// reshape), an update (which may reuse its array), a branch's result, a
/// loop's state or a call (whose result may be an argument); arrays popped
/// from the tape count as accumulators (the tape holds them by
/// reference).
/// Linear: one union-find over the bindings.
pub(super) fn accumulated(f: &Function) -> HashSet<VarId> {
    accumulator_classes(f).into_keys().collect()
}

/// The variables of [`accumulated`], each with its class: two variables
/// may share elements only when their classes are equal (the classes of a
/// union-find over the same connections; a class is the index of one of
/// its variables).
pub(super) fn accumulator_classes(f: &Function) -> HashMap<VarId, u32> {
    let mut parent: Vec<u32> = (0..f.vars.len() as u32).collect();
    fn root(parent: &mut [u32], v: u32) -> u32 {
        let mut r = v;
        while parent[r as usize] != r {
            r = parent[r as usize];
        }
        let mut v = v;
        while parent[v as usize] != r {
            let next = parent[v as usize];
            parent[v as usize] = r;
            v = next;
        }
        r
    }
    fn union(parent: &mut [u32], a: VarId, b: &Atom) {
        if let Atom::Var(b) = b {
            if a.index() < parent.len() && b.index() < parent.len() {
                let (ra, rb) = (root(parent, a.0), root(parent, b.0));
                parent[ra as usize] = rb;
            }
        }
    }
    let mut targets = Vec::new();
    crate::visit::for_each_block(&f.body, &mut |b| {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { vars, expr } => match expr {
                    Expr::Atom(a) => union(&mut parent, vars[0], a),
                    Expr::Index { array, .. }
                    | Expr::Slice { array, .. }
                    | Expr::Reshape { array, .. }
                    | Expr::Update { array, .. } => union(&mut parent, vars[0], &Atom::Var(*array)),
                    Expr::If { then_branch, else_branch, .. } => {
                        for (k, v) in vars.iter().enumerate() {
                            for br in [then_branch, else_branch] {
                                if let Some(r) = br.results.get(k) {
                                    union(&mut parent, *v, r);
                                }
                            }
                        }
                    }
                    // A callee may return an array argument; the tape holds
                    // arrays by reference.
                    Expr::Call { args, .. } => {
                        for v in vars {
                            for a in args {
                                union(&mut parent, *v, a);
                            }
                        }
                    }
                    Expr::Pop => targets.extend(vars.iter().copied().filter(|v| f.var(*v).ty.is_array())),
                    Expr::Loop { states, init, body, .. } | Expr::While { states, init, body, .. } => {
                        for (k, st) in states.iter().enumerate() {
                            if let Some(v) = vars.get(k) {
                                union(&mut parent, *v, &Atom::Var(*st));
                            }
                            for a in init.get(k).into_iter().chain(body.results.get(k)) {
                                union(&mut parent, *st, a);
                            }
                        }
                    }
                    _ => {}
                },
                StmtKind::Assign { var, value } => union(&mut parent, *var, value),
                StmtKind::AccAdd { acc, .. } | StmtKind::AccZero { acc, .. } => targets.push(*acc),
                _ => {}
            }
        }
    });
    let marked: HashSet<u32> =
        targets.into_iter().filter(|v| v.index() < f.vars.len()).map(|v| root(&mut parent, v.0)).collect();
    if marked.is_empty() {
        return HashMap::default();
    }
    (0..f.vars.len() as u32)
        .filter_map(|v| {
            let r = root(&mut parent, v);
            marked.contains(&r).then_some((VarId(v), r))
        })
        .collect()
}

/// True when `s` runs a `while` loop at any depth.
fn has_while(s: &StmtKind) -> bool {
    matches!(s, StmtKind::Let { expr: Expr::While { .. }, .. })
        || crate::visit::child_blocks(s).into_iter().any(|b| b.stmts.iter().any(|s| has_while(&s.kind)))
}

/// The atoms an expression of [`Ctx::pure_infallible`]'s kinds reads.
fn atoms(e: &Expr) -> impl Iterator<Item = Atom> {
    let v: Vec<Atom> = match e {
        Expr::Atom(a) | Expr::Unary(_, a) => vec![*a],
        Expr::Binary(_, a, b) => vec![*a, *b],
        Expr::Dim { array, .. } => vec![Atom::Var(*array)],
        _ => vec![],
    };
    v.into_iter()
}
