//! Which arrays of a function cannot share memory: the arrays it makes
//! (`zeros`, `zeros_like`, comprehensions: new memory) and its parameters
//! (which existed before the call). Two users:
//!
//! - the pair loops of a backend without a vectoriser (`pairs.rs`) skip
//!   the run-time overlap test of two rows that cannot share memory
//!   ([`ArrayRoots::apart`]);
//! - element loads and additions into accumulators are tagged with the
//!   alias scope of the array they access ([`ArrayRoots::scope`],
//!   [`Emitter::set_data_scope`]): LLVM's scoped `noalias` then knows that
//!   a loop adding into one accumulator while reading other arrays needs
//!   no run-time overlap check before it is vectorised (GMM's backward
//!   rows: `ct_xc[c] += l[c] * t; ct_l[c] += xc[c] * t`, four arrays).
//!
//! # Which arrays get a scope
//!
//! Two accesses tagged with different scopes are taken not to overlap, so
//! a scope is given only to arrays whose memory no other scoped array can
//! share while either is used:
//!
//! - an immutable array the function makes (new memory; a comprehension
//!   built in an output buffer overlaps no input: `docs/src/c-abi.md`). An
//!   array made in a loop's body is released at the end of the iteration,
//!   and an array of a later iteration may take its memory: the backend
//!   declares the scope where the array is made
//!   (`llvm.experimental.noalias.scope.decl`), so that LLVM gives each copy
//!   of the body its own scopes when it unrolls the loop, and no other
//!   transformation moves an access across an iteration of a loop that
//!   makes arrays;
//! - an immutable parameter the function does not write (loads of two
//!   parameters that overlap never conflict; a parameter and an array the
//!   function makes never overlap);
//! - in a chunk function of a parallel loop of effects
//!   (`crate::parallel`), also the parameters it adds into: each is a
//!   different accumulator made at its caller's top level, which the loop
//!   reads nowhere else.
//!
//! Views (rows, slices, reshapes, copies) take the scope of the array they
//! view. Arrays of unknown memory (loop states, the results of branches and
//! calls, arrays popped from the tape, mutable arrays) get none, and their
//! accesses are taken to overlap anything. At most [`MAX_SCOPES`] scopes
//! per function (each access lists every other scope).

use super::emit::Emitter;
use super::Lower;
use arrayad_ir::visit::for_each_block;
use arrayad_ir::{Atom, Expr, Function, StmtKind, VarId};
use std::collections::{HashMap, HashSet};

/// The most alias scopes of one function: arrays beyond them get none.
pub(super) const MAX_SCOPES: usize = 64;

/// Where the arrays of a function live (module docs).
pub(super) struct ArrayRoots {
    /// `v -> a` for every immutable `v` bound to a view of the array `a`
    /// (a slice, a row `a[i..]`, a reshape or the array itself), or to a
    /// view of a view of `a`, and so on; `a` is not a view.
    view_of: HashMap<VarId, VarId>,
    /// The immutable arrays bound to new memory: `zeros`, `zeros_like`
    /// and comprehensions (whose memory is new, or an output buffer that
    /// overlaps no input: `docs/src/c-abi.md`).
    fresh: HashSet<VarId>,
    /// The function's immutable parameters.
    params: HashSet<VarId>,
    /// In a chunk function of a parallel loop of effects, the parameters
    /// it adds into: distinct accumulators (module docs).
    distinct: HashSet<VarId>,
    /// The number of the alias scope of each array that has one.
    scopes: HashMap<VarId, u32>,
}

impl ArrayRoots {
    /// The roots of `f`'s arrays (one pass over its statements);
    /// `writes_distinct_params`: `f` is a chunk function of a loop of
    /// effects, whose parameters that it adds into are distinct
    /// accumulators (module docs).
    pub(super) fn of(f: &Function, writes_distinct_params: bool) -> ArrayRoots {
        let mut view_of = HashMap::new();
        let mut fresh = HashSet::new();
        // Arrays written other than by building them: accumulators added
        // into or cleared, arrays updated (perhaps in place).
        let mut written = Vec::new();
        let mut added = Vec::new();
        for_each_block(&f.body, &mut |b| {
            for s in &b.stmts {
                let (vars, expr) = match &s.kind {
                    StmtKind::Let { vars, expr } => (vars, expr),
                    StmtKind::AccAdd { acc, .. } => {
                        written.push(*acc);
                        added.push(*acc);
                        continue;
                    }
                    StmtKind::AccZero { acc, .. } => {
                        written.push(*acc);
                        continue;
                    }
                    _ => continue,
                };
                if let Expr::Update { array, .. } = expr {
                    written.push(*array);
                }
                // The rows of a comprehension computed in place view its
                // result (`placed.rs`); their own comprehensions, in its
                // body, are visited after this one.
                if let Expr::Build { body, .. } = expr {
                    let placed = super::placed::placed(f, body);
                    for (k, y) in placed.rows {
                        if let Some(v) = vars.get(k) {
                            let root = view_of.get(v).copied().unwrap_or(*v);
                            view_of.insert(y, root);
                        }
                    }
                    // So do the literals of rows computed in place, and
                    // their rows.
                    for (k, lit, rows) in placed.literals {
                        if let Some(v) = vars.get(k) {
                            let root = view_of.get(v).copied().unwrap_or(*v);
                            view_of.insert(lit, root);
                            view_of.extend(rows.into_iter().flatten().map(|y| (y, root)));
                        }
                    }
                }
                if vars.iter().any(|v| f.var(*v).mutable) {
                    continue;
                }
                let source = match (vars.as_slice(), expr) {
                    (_, Expr::ZerosLike(_) | Expr::Zeros(_) | Expr::Build { .. }) => {
                        fresh.extend(vars.iter().copied().filter(|v| !view_of.contains_key(v)));
                        continue;
                    }
                    ([v], Expr::Slice { array, .. } | Expr::Reshape { array, .. }) => (*v, *array),
                    ([v], Expr::Index { array, indices }) if indices.len() < usize::from(f.ty(*array).rank) => {
                        (*v, *array)
                    }
                    ([v], Expr::Atom(Atom::Var(a))) if f.ty(*a).is_array() => (*v, *a),
                    _ => continue,
                };
                // A view's source is bound before it, in an enclosing
                // block or earlier in this one (visited first): its root
                // is known.
                let (v, a) = source;
                let root = view_of.get(&a).copied().unwrap_or(a);
                view_of.insert(v, root);
            }
        });
        let params: HashSet<VarId> = f.params.iter().copied().filter(|p| !f.var(*p).mutable).collect();
        let written: HashSet<VarId> = written.iter().map(|v| view_of.get(v).copied().unwrap_or(*v)).collect();
        let mut scoped: Vec<VarId> = fresh
            .iter()
            .copied()
            .chain(
                params
                    .iter()
                    .copied()
                    .filter(|p| f.ty(*p).is_array() && (writes_distinct_params || !written.contains(p))),
            )
            .collect();
        scoped.sort_unstable();
        scoped.truncate(MAX_SCOPES);
        let scopes = scoped.into_iter().zip(0..).collect();
        let distinct = if writes_distinct_params {
            let added: HashSet<VarId> = added.iter().map(|v| view_of.get(v).copied().unwrap_or(*v)).collect();
            params.iter().copied().filter(|p| f.ty(*p).is_array() && added.contains(p)).collect()
        } else {
            HashSet::new()
        };
        ArrayRoots { view_of, fresh, params, distinct, scopes }
    }

    /// The array `v` is a view of, through views of views.
    fn root(&self, v: VarId) -> VarId {
        self.view_of.get(&v).copied().unwrap_or(v)
    }

    /// True when the array `v` is a view of new memory or of a parameter.
    fn new_or_parameter(&self, v: VarId) -> bool {
        let r = self.root(v);
        self.fresh.contains(&r) || self.params.contains(&r)
    }

    /// True when rows of the arrays `a` and `b` never share memory: they
    /// are views of two different arrays, one of them new memory, the
    /// other new memory too or a parameter (which existed before it).
    pub(super) fn apart(&self, a: VarId, b: VarId) -> bool {
        let (ra, rb) = (self.root(a), self.root(b));
        ra != rb
            && self.new_or_parameter(a)
            && self.new_or_parameter(b)
            && (self.fresh.contains(&ra) || self.fresh.contains(&rb))
    }

    /// True when the rows of the accumulator `acc` never share memory with
    /// those of the array `x`: [`Self::apart`], or, in a chunk function of
    /// a parallel loop of effects, `acc` views one of the distinct
    /// accumulators it adds into and `x` views another of its parameters
    /// or new memory (module docs).
    pub(super) fn accumulator_apart(&self, acc: VarId, x: VarId) -> bool {
        let (ra, rx) = (self.root(acc), self.root(x));
        self.apart(acc, x) || (ra != rx && self.distinct.contains(&ra) && self.new_or_parameter(x))
    }

    /// The alias scope of the elements of the array `v` (a view of an
    /// array that has one: module docs), and the number of scopes.
    pub(super) fn scope(&self, v: VarId) -> Option<(u32, u32)> {
        self.scopes.get(&self.root(v)).map(|k| (*k, self.scopes.len() as u32))
    }

    /// The alias scope that the array `v` has of its own, where it is
    /// made: [`Self::scope`] unless `v` views another array (a row
    /// computed in place, `placed.rs`, views its comprehension's result,
    /// whose scope is declared where that is made).
    pub(super) fn own_scope(&self, v: VarId) -> Option<(u32, u32)> {
        if self.view_of.contains_key(&v) {
            return None;
        }
        self.scope(v)
    }
}

impl<E: Emitter> Lower<'_, E> {
    /// The roots of the function's arrays, made on first use.
    pub(super) fn array_roots(&mut self) -> &ArrayRoots {
        let writes = self.effects_chunk;
        self.array_roots.get_or_insert_with(|| ArrayRoots::of(self.f, writes))
    }

    /// The alias scope of the elements of `array`
    /// ([`Emitter::set_data_scope`]).
    pub(super) fn data_scope(&mut self, array: VarId) -> Option<(u32, u32)> {
        self.array_roots().scope(array)
    }

    /// The alias scope that `array` begins where it is made
    /// ([`ArrayRoots::own_scope`], [`Emitter::declare_data_scope`]).
    pub(super) fn made_scope(&mut self, array: VarId) -> Option<(u32, u32)> {
        self.array_roots().own_scope(array)
    }
}
