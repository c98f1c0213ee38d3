//! Indices that are a loop's index plus a literal, for the passes that
//! reason about which element an iteration touches ([`super::fuse_for`],
//! [`super::contract`]).

use crate::fx::FxHashMap;
use crate::program::{Atom, BinOp, Expr, Function, VarId};

/// What a walk of a loop body knows about its `i64` bindings relative to
/// the loop index `i`: `v = i + c` for a literal `c` (the offset of `v`),
/// and `t = (i + o == k)`, which in its `then` branch says `i == k - o`, so
/// that a literal index `k'` there is the offset `k' - (k - o)` (the
/// derivative of `x[0]` under `if i == 0` adds at offset 0).
pub(super) struct IndexOffsets {
    offsets: FxHashMap<VarId, i64>,
    tests: FxHashMap<VarId, i64>,
    index_is: Option<i64>,
}

impl IndexOffsets {
    /// The facts at the top of the body of a loop over `index`.
    pub(super) fn new(index: VarId) -> IndexOffsets {
        let mut offsets = FxHashMap::default();
        offsets.insert(index, 0);
        IndexOffsets { offsets, tests: FxHashMap::default(), index_is: None }
    }

    /// The offset of an index atom from the loop index, when known.
    pub(super) fn offset(&self, index: Option<&Atom>) -> Option<i64> {
        match index {
            Some(Atom::Var(v)) => self.offsets.get(v).copied(),
            Some(Atom::I64(k)) => self.index_is.and_then(|value| k.checked_sub(value)),
            _ => None,
        }
    }

    /// Records what `let vars = expr` of `f` says: an offset (`i + c`,
    /// `c + i`, `i - c`) or a test of the index for a value (`i + o ==
    /// k`). A mutable variable says nothing (it may be assigned later).
    pub(super) fn bind(&mut self, f: &Function, vars: &[VarId], expr: &Expr) {
        let [v] = vars else { return };
        if f.var(*v).mutable {
            return;
        }
        let lit = |x: &Atom| match x {
            Atom::I64(c) => Some(*c),
            _ => None,
        };
        match expr {
            Expr::Binary(BinOp::Eq, a, b) => {
                let value = match (a, b) {
                    (Atom::Var(x), Atom::I64(k)) | (Atom::I64(k), Atom::Var(x)) => {
                        self.offsets.get(x).and_then(|o| k.checked_sub(*o))
                    }
                    _ => None,
                };
                if let Some(value) = value {
                    self.tests.insert(*v, value);
                }
            }
            Expr::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
                let off = match (op, self.offset(Some(a)), self.offset(Some(b))) {
                    (BinOp::Add, Some(o), None) => lit(b).and_then(|c| o.checked_add(c)),
                    (BinOp::Add, None, Some(o)) => lit(a).and_then(|c| o.checked_add(c)),
                    (BinOp::Sub, Some(o), None) => lit(b).and_then(|c| o.checked_sub(c)),
                    _ => None,
                };
                if let Some(off) = off {
                    self.offsets.insert(*v, off);
                }
            }
            _ => {}
        }
    }

    /// Enters the `then` branch of `if cond`: where `cond` tests the loop
    /// index for a value, the branch knows it. Returns what to hand to
    /// [`Self::leave_then`].
    pub(super) fn enter_then(&mut self, cond: &Atom) -> Option<i64> {
        let known = self.index_is;
        if let Some(value) = cond.as_var().and_then(|c| self.tests.get(&c).copied()) {
            self.index_is = Some(value);
        }
        known
    }

    /// Leaves the `then` branch entered by [`Self::enter_then`].
    pub(super) fn leave_then(&mut self, known: Option<i64>) {
        self.index_is = known;
    }
}
