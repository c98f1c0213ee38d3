//! Accumulators written before they are read. The backward pass declares a
//! cotangent as a zero-filled accumulator (`let acc = zeros [n]`, or
//! `zeros_like a` of a rank-1 array) and then
//! adds into it; often its first use is a loop `for i < n` whose body adds
//! into `acc[i]`, unconditionally, at its top level (once, or several
//! times when backward loops were fused), and mentions `acc` nowhere else.
//! The first of those adds writes every element before anything reads
//! one, so the accumulator is allocated without zero-filling and that add
//! is lowered as a store of `0.0 + v`: the same bits as adding `v` into a
//! zero (`-0.0` included), without the memset and the load; the later
//! adds of the iteration add to what it stored. The IR and the
//! interpreter keep the zero-then-add semantics; only the lowering knows.
//!
//! The loop's count may be another variable than the accumulator's extent
//! (the backward pass takes one from a primal array, the other from
//! another array of the same size): equal values are then only known at
//! run time, so the loop is preceded by a zero-fill of the elements it
//! does not reach, `acc[clamp(count, 0, extent)..extent]`, which is empty
//! when they are equal. A count above the extent fails the add's bounds
//! check (at the first index out of range), as the zero-then-add form does.

use arrayad_ir::visit::{for_each_block, stmt_uses};
use arrayad_ir::{Atom, Block, Expr, FuncId, Function, StmtKind, VarId};
use std::collections::{HashMap, HashSet};

/// The accumulators of a function that are written first (module docs),
/// and for each loop body the accumulators whose first write it is.
#[derive(Default)]
pub(crate) struct FirstWrites {
    /// Accumulators allocated without zero-filling.
    unzeroed: HashSet<VarId>,
    /// Per loop body (by address; the IR outlives the lowering): the
    /// accumulators whose one add in it is a store.
    by_body: HashMap<*const Block, Vec<FirstWrite>>,
    /// Per call of a parallel loop of effects (`crate::parallel`, by the
    /// chunk's id): the accumulators its loop writes first.
    by_call: HashMap<FuncId, Vec<FirstWrite>>,
}

/// An accumulator a loop writes first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FirstWrite {
    /// The accumulator.
    pub(crate) acc: VarId,
    /// Whether the loop's count is another atom than the accumulator's
    /// extent: the elements from the count on are zero-filled before the
    /// loop (module docs).
    pub(crate) tail: bool,
}

impl FirstWrites {
    /// The accumulators of `f` written first, in one walk over every block
    /// (a block's statements are scanned for uses only while it has a
    /// candidate accumulator not yet used).
    pub(crate) fn new(f: &Function, callees: &crate::Callees) -> FirstWrites {
        let mut out = FirstWrites::default();
        for_each_block(&f.body, &mut |b| out.block(f, b, callees));
        out
    }

    fn block(&mut self, f: &Function, b: &Block, callees: &crate::Callees) {
        // Candidates: rank-1 accumulators of this block not used yet, with
        // their extent (`None`: `zeros_like` of a rank-1 array, whose
        // extent is that array's).
        let mut candidates: HashMap<VarId, Option<Atom>> = HashMap::new();
        for s in &b.stmts {
            if !candidates.is_empty() {
                let mut used = Vec::new();
                stmt_uses(&s.kind, &mut |v| {
                    if candidates.contains_key(&v) {
                        used.push(v)
                    }
                });
                used.sort_unstable();
                used.dedup();
                for acc in used {
                    let Some(n) = candidates.remove(&acc) else { continue };
                    // The extent and the count (and the index) must be
                    // immutable: the same atom then means the same value.
                    let fixed = |a: &Atom| !matches!(a, Atom::Var(v) if f.var(*v).mutable);
                    let first = |trips: &Atom| {
                        (fixed(trips) && n.as_ref().is_none_or(fixed))
                            .then(|| FirstWrite { acc, tail: n.as_ref() != Some(trips) })
                    };
                    match &s.kind {
                        StmtKind::For { n: trips, index, body, .. }
                            if !f.var(*index).mutable && writes_each_element_first(body, acc, *index) =>
                        {
                            if let Some(w) = first(trips) {
                                self.unzeroed.insert(acc);
                                self.by_body.entry(body as *const Block).or_default().push(w);
                            }
                        }
                        // A loop of effects split out for the pool, which
                        // writes `acc` (its argument `k`) first.
                        StmtKind::Let { expr: Expr::Call { func, args }, .. } => {
                            let map = callees.parallel_map(*func);
                            let writes = map.is_some_and(|m| {
                                args.iter().enumerate().any(|(k, a)| m.writes_first(k) && *a == Atom::Var(acc))
                            });
                            if let Some(w) = args.get(1).filter(|_| writes).and_then(first) {
                                self.unzeroed.insert(acc);
                                self.by_call.entry(*func).or_default().push(w);
                            }
                        }
                        _ => {}
                    }
                }
            }
            match &s.kind {
                StmtKind::Let { vars, expr: Expr::Zeros(dims) } => {
                    if let ([acc], [n]) = (vars.as_slice(), dims.as_slice()) {
                        candidates.insert(*acc, Some(*n));
                    }
                }
                StmtKind::Let { vars, expr: Expr::ZerosLike(like) } => {
                    if let [acc] = vars.as_slice() {
                        if f.ty(*like).rank == 1 {
                            candidates.insert(*acc, None);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Whether the accumulator bound to `acc` needs no zero-filling.
    pub(crate) fn unzeroed(&self, acc: VarId) -> bool {
        self.unzeroed.contains(&acc)
    }

    /// The accumulators whose first add in the loop body `body` is their
    /// first write (a store).
    pub(crate) fn written_in(&self, body: &Block) -> &[FirstWrite] {
        self.by_body.get(&(body as *const Block)).map_or(&[], Vec::as_slice)
    }

    /// The accumulators that the parallel loop of effects `func` writes
    /// first (its chunks store their first adds).
    pub(crate) fn written_by_call(&self, func: FuncId) -> &[FirstWrite] {
        self.by_call.get(&func).map_or(&[], Vec::as_slice)
    }
}

/// True when `body` (a loop body over `index`) mentions `acc` only in
/// statements of its own top level `acc[index] += v` with `v` not `acc`,
/// at least one.
fn writes_each_element_first(body: &Block, acc: VarId, index: VarId) -> bool {
    let mut mentions = 0usize;
    for s in &body.stmts {
        stmt_uses(&s.kind, &mut |v| mentions += usize::from(v == acc));
    }
    let adds = body
        .stmts
        .iter()
        .filter(|s| {
            matches!(&s.kind, StmtKind::AccAdd { acc: a, indices, value }
                if *a == acc && indices.as_slice() == [Atom::Var(index)] && *value != Atom::Var(acc))
        })
        .count();
    adds > 0 && mentions == adds
}
