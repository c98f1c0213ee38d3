//! The Delta machinery of Krawiec et al. (POPL 2022), Figure 10, at run
//! time: the `Delta` data type, the state monad `M` as a mutable
//! [`DeltaState`] (section 7.3: "a dynamically-growable mutable array"),
//! `deltaLet` ([`DeltaState::delta_let`]), `runDelta` ([`run_delta`]) and
//! `eval` ([`eval`], [`eval_binds`]) over a mutable `DeltaMap` indexed by
//! `DeltaId` (section 7.3).
//!
//! Sharing is explicit: every primitive's Delta is bound once, by
//! `deltaLet`, to a fresh id, and values carry only `Zero` or `Var id`
//! (the invariant of section 7.1), so a Delta is never copied and the
//! bindings are evaluated once each, from last to first: O(primal) even for
//! `let x1 = x + x in let x2 = x1 + x1 in ...`.

/// `type DeltaId = N` (Fig. 10): the name of a Delta binding or of an input
/// slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct DeltaId(pub usize);

/// `data Delta = Zero | Scale R Delta | Add Delta Delta | Var DeltaId | Let
/// DeltaId Delta Delta` (Fig. 10), with the n-ary `Add` of section 8 for
/// reductions. `Let` is not a constructor here: [`run_delta`] returns the
/// bindings as a list (the `DeltaBinds` that `runDelta` folds into nested
/// `Let`s), which [`eval_binds`] walks as `eval` walks the `Let` nest.
#[derive(Clone, PartialEq, Debug)]
pub enum Delta {
    /// No dependence on the inputs.
    Zero,
    /// `Scale r u`: `r` times `u`.
    Scale(f64, Box<Delta>),
    /// `Add u1 u2`.
    Add(Box<Delta>, Box<Delta>),
    /// `Add^n u_1 ... u_n` (section 8, multi-argument primitives), for
    /// reductions over arrays.
    AddN(Vec<Delta>),
    /// A reference to a binding or an input slot (explicit sharing).
    Var(DeltaId),
}

/// `type DeltaState = (DeltaId, DeltaBinds)` (Fig. 10): the supply of fresh
/// ids and the bindings made so far, in order. Ids below `first` are the
/// input slots (Fig. 11: the inputs are `Var 1 .. Var a`, the supply starts
/// at `a + 1`); binding `k` has id `first + k`.
#[derive(Clone, Debug, Default)]
pub struct DeltaState {
    first: usize,
    binds: Vec<Delta>,
}

impl DeltaState {
    /// A state whose supply starts after `inputs` input slots.
    pub fn new(inputs: usize) -> DeltaState {
        DeltaState { first: inputs, binds: Vec::new() }
    }

    /// `deltaLet : Delta -> M DeltaId` (Fig. 10): binds `delta` to a fresh
    /// id and returns the id.
    pub fn delta_let(&mut self, delta: Delta) -> DeltaId {
        self.binds.push(delta);
        DeltaId(self.first + self.binds.len() - 1)
    }

    /// The number of ids in use (input slots and bindings): the size of the
    /// `DeltaMap` array (section 7.3).
    pub fn next_id(&self) -> usize {
        self.first + self.binds.len()
    }

    /// The bindings `(id, delta)`, in the order they were made.
    pub fn binds(&self) -> impl DoubleEndedIterator<Item = (DeltaId, &Delta)> {
        self.binds.iter().enumerate().map(move |(k, d)| (DeltaId(self.first + k), d))
    }
}

/// `runDelta : DeltaId -> M (R, Delta) -> Delta` (Fig. 10): runs the
/// monadic computation `m` with the id supply starting at `first` and
/// returns its result with the bindings it made (the `Let` nest, as a list).
pub fn run_delta<R>(first: DeltaId, m: impl FnOnce(&mut DeltaState) -> R) -> (R, DeltaState) {
    let mut state = DeltaState::new(first.0);
    let r = m(&mut state);
    (r, state)
}

/// `type DeltaMap = Map DeltaId R` (Fig. 10) as a mutable array indexed by
/// id (section 7.3); `None` is an absent entry (`lookup` gives `Nothing`).
#[derive(Clone, Debug)]
pub struct DeltaMap {
    entries: Vec<Option<f64>>,
}

impl DeltaMap {
    /// `emptyMap`, sized for `ids` ids.
    pub fn new(ids: usize) -> DeltaMap {
        DeltaMap { entries: vec![None; ids] }
    }

    /// `addDelta`: adds to an existing entry, or creates one. Ids outside
    /// the map are ignored (they cannot occur for a map made for the
    /// state's ids).
    pub fn add_delta(&mut self, id: DeltaId, x: f64) {
        if let Some(e) = self.entries.get_mut(id.0) {
            *e = Some(e.map_or(x, |old| old + x));
        }
    }

    /// `lookup`.
    pub fn lookup(&self, id: DeltaId) -> Option<f64> {
        self.entries.get(id.0).copied().flatten()
    }

    /// `lookupOrZero`.
    pub fn lookup_or_zero(&self, id: DeltaId) -> f64 {
        self.lookup(id).unwrap_or(0.0)
    }

    /// `lookup` and `delete` at once.
    fn take(&mut self, id: DeltaId) -> Option<f64> {
        self.entries.get_mut(id.0).and_then(Option::take)
    }
}

/// `eval : R -> Delta -> DeltaMap -o DeltaMap` (Fig. 10), in place:
///
/// ```text
/// eval x Zero um          = um
/// eval x (Scale y u) um   = eval (x * y) u um
/// eval x (Add u1 u2) um   = eval x u2 (eval x u1 um)
/// eval x (Var uid) um     = addDelta uid x um
/// ```
///
/// With an explicit work stack, so that no Delta, however deep, can
/// overflow the call stack.
pub fn eval(x: f64, delta: &Delta, um: &mut DeltaMap) {
    let mut work: Vec<(f64, &Delta)> = vec![(x, delta)];
    while let Some((x, d)) = work.pop() {
        match d {
            Delta::Zero => {}
            Delta::Scale(y, u) => work.push((x * y, u)),
            // Pushed in reverse so that u1 is evaluated before u2.
            Delta::Add(u1, u2) => {
                work.push((x, u2));
                work.push((x, u1));
            }
            Delta::AddN(us) => work.extend(us.iter().rev().map(|u| (x, u))),
            Delta::Var(uid) => um.add_delta(*uid, x),
        }
    }
}

/// `eval` of the `Let` nest that `runDelta` builds from `state`'s bindings
/// (Fig. 10):
///
/// ```text
/// eval x (Let uid u1 u2) um = let um2 = eval x u2 um in
///                             case lookup uid um2 of
///                               Nothing -> um2
///                               Just x  -> eval x u1 (delete uid um2)
/// ```
///
/// The body `u2` (the result's Delta) has already been evaluated into `um`;
/// the bindings are then visited from last to first, each once, and a
/// binding that nothing reached (`Nothing`) is skipped.
pub fn eval_binds(state: &DeltaState, um: &mut DeltaMap) {
    for (uid, u1) in state.binds().rev() {
        if let Some(x) = um.take(uid) {
            eval(x, u1, um);
        }
    }
}
