//! Accumulators written before they are read. The backward pass declares a
//! cotangent as a zero-filled accumulator (`let acc = zeros [n]`, or
//! `zeros_like a` of a rank-1 array) and then
//! adds into it; often its first use is a loop `for i < n` whose body adds
//! into `acc[i]` once, unconditionally, and mentions `acc` nowhere else.
//! That loop writes every element before anything reads one, so the
//! accumulator is allocated without zero-filling and that add is lowered
//! as a store of `0.0 + v`: the same bits as adding `v` into a zero
//! (`-0.0` included), without the memset and the load. The IR and the
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
use arrayad_ir::{Atom, Block, Expr, Function, StmtKind, VarId};
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
    pub(crate) fn new(f: &Function) -> FirstWrites {
        let mut out = FirstWrites::default();
        for_each_block(&f.body, &mut |b| out.block(f, b));
        out
    }

    fn block(&mut self, f: &Function, b: &Block) {
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
                    if let StmtKind::For { n: trips, index, body, .. } = &s.kind {
                        // The extent and the index must be immutable: the
                        // same atom then means the same value.
                        let fixed = |a: &Atom| !matches!(a, Atom::Var(v) if f.var(*v).mutable);
                        if fixed(trips)
                            && n.as_ref().is_none_or(fixed)
                            && !f.var(*index).mutable
                            && writes_each_element_once(body, acc, *index)
                        {
                            self.unzeroed.insert(acc);
                            let first = FirstWrite { acc, tail: n.as_ref() != Some(trips) };
                            self.by_body.entry(body as *const Block).or_default().push(first);
                        }
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

    /// The accumulators whose one add in the loop body `body` is their
    /// first write (a store).
    pub(crate) fn written_in(&self, body: &Block) -> &[FirstWrite] {
        self.by_body.get(&(body as *const Block)).map_or(&[], Vec::as_slice)
    }
}

/// True when `body` (a loop body over `index`) mentions `acc` exactly once,
/// in a statement of its own top level `acc[index] += v` with `v` not
/// `acc`.
fn writes_each_element_once(body: &Block, acc: VarId, index: VarId) -> bool {
    let mut mentions = 0usize;
    for s in &body.stmts {
        stmt_uses(&s.kind, &mut |v| mentions += usize::from(v == acc));
    }
    mentions == 1
        && body.stmts.iter().any(|s| {
            matches!(&s.kind, StmtKind::AccAdd { acc: a, indices, value }
                if *a == acc && indices.as_slice() == [Atom::Var(index)] && *value != Atom::Var(acc))
        })
}
