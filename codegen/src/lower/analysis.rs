//! Facts about loop bodies that decide whether, and keeping what, the arena
//! can be reset after every iteration.

use arrayad_ir::visit::{block_binds, for_each_block};
use arrayad_ir::{Atom, Block, Expr, Function, StmtKind, VarId};
use std::collections::{HashMap, HashSet};

fn is_array(f: &Function, a: &Atom) -> bool {
    f.atom_ty(a).is_array()
}

/// What an iteration of a loop body leaves behind, when its memory can be
/// released at the end of the iteration: the mutable array variables bound
/// outside the body that it assigns (their values must survive the
/// release). Arrays the body pushes on the tape are then copied there
/// (`Lower::tape_push_array`), which costs their size per iteration: worth
/// it when the body allocates on every iteration (an allocating statement
/// at its top level: the copies cost at most what computing them did, and
/// the tape then holds only the residuals, not every intermediate array).
/// `None` (no release, arrays pushed by reference) when the body pushes
/// arrays but allocates only conditionally or in nested loops: a loop
/// state passed on unchanged and pushed costs O(1) by reference. Not so
/// for a body that also pops ([`BlockFacts::survivors`]; this function,
/// for blocks outside the walk, is conservative there): the backward pass
/// of a checkpointed segment, which recomputes the segment (pushing) and
/// runs its backward pass (popping) in one iteration, must release what
/// the iteration allocated, or memory grows with the number of segments.
pub(crate) fn survivors(f: &Function, body: &Block) -> Option<Vec<VarId>> {
    let mut pushed = false;
    let mut assigned: Vec<VarId> = Vec::new();
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Push(a) if is_array(f, a) => pushed = true,
                StmtKind::Assign { var, value } if is_array(f, value) && !assigned.contains(var) => assigned.push(*var),
                _ => {}
            }
        }
    });
    if pushed && !body.stmts.iter().any(|s| allocating(&s.kind)) {
        return None;
    }
    let mut inner = HashSet::new();
    block_binds(body, &mut |v| {
        inner.insert(v);
    });
    assigned.retain(|v| !inner.contains(v));
    Some(assigned)
}

/// [`survivors`] and [`allocates`] of every block of a function, from one
/// walk (asking each loop body alone would rescan the loops nested in it,
/// O(depth x size)). Keyed by the address of the block in the function,
/// which lowering does not move. The default holds no facts: each query
/// then computes its answer (straight-line code makes none: it has no
/// nested block).
#[derive(Default)]
pub(crate) struct BlockFacts {
    facts: HashMap<*const Block, Facts>,
    /// Some loop body both pushes on the tape and pops from it (nested
    /// blocks included): a checkpointed loop recomputing its segments.
    /// Pushes may then overwrite the slots of arrays popped earlier.
    pub(crate) interleaved_tape: bool,
    /// `s = sum y` computed together with `y = build i < n => r` as one
    /// loop, without the array ([`fused_sum_candidates`]; `y` maps to `s`):
    /// those whose body allocates nothing (a fused build nested in it does
    /// not count).
    fused_sums: HashMap<VarId, VarId>,
}

/// True for a statement that allocates an array from the arena. A call
/// of a generated function counts: its results and temporaries live in
/// the caller's arena (`lower/call.rs`); a kept callee's derivative
/// pushes and pops on the tape only within the call, balanced
/// (`arrayad_ir::KeptKind`; [`BlockFacts::interleaved_tape`]).
fn allocating(k: &StmtKind) -> bool {
    matches!(
        k,
        StmtKind::Let {
            expr: Expr::Build { .. }
                | Expr::ArrayLit { .. }
                | Expr::ZerosLike(_)
                | Expr::Zeros(_)
                | Expr::Update { .. }
                | Expr::Call { .. },
            ..
        }
    )
}

#[derive(Default)]
struct Facts {
    /// An array is pushed on the tape (here or in a nested block).
    pushed: bool,
    /// Anything is pushed, anything is popped (here or nested).
    any_push: bool,
    any_pop: bool,
    /// A statement of the block itself (not of a nested one) allocates.
    allocates_here: bool,
    /// Something is allocated from the arena.
    allocates: bool,
    /// The array variables assigned inside and bound outside.
    assigned: Vec<VarId>,
}

impl BlockFacts {
    pub(crate) fn new(f: &Function) -> BlockFacts {
        struct Walk<'f> {
            f: &'f Function,
            /// The depth of the block binding each variable.
            bound_at: HashMap<VarId, usize>,
            /// The blocks being walked, outermost first, with the variables
            /// already among their survivors.
            open: Vec<(*const Block, Facts, HashSet<VarId>)>,
            done: HashMap<*const Block, Facts>,
            interleaved: bool,
            /// Calls and pops anywhere in the function.
            calls: bool,
            pops: bool,
            candidates: HashMap<VarId, VarId>,
            fused: HashMap<VarId, VarId>,
        }
        impl Walk<'_> {
            fn block(&mut self, b: &Block) {
                let d = self.open.len();
                self.open.push((b as *const Block, Facts::default(), HashSet::new()));
                for s in &b.stmts {
                    let mut bind = |v: VarId| {
                        self.bound_at.insert(v, d);
                    };
                    match &s.kind {
                        StmtKind::Let { vars, expr } => {
                            vars.iter().for_each(|v| bind(*v));
                            match expr {
                                Expr::Build { index, .. } => bind(*index),
                                Expr::Loop { index, states, .. } => {
                                    bind(*index);
                                    states.iter().for_each(|v| bind(*v));
                                }
                                Expr::While { states, .. } => states.iter().for_each(|v| bind(*v)),
                                _ => {}
                            }
                            // A build's allocation is decided after its body.
                            if allocating(&s.kind) && !matches!(expr, Expr::Build { .. }) {
                                self.open[d].1.allocates = true;
                                self.open[d].1.allocates_here = true;
                            }
                            if matches!(expr, Expr::Pop) {
                                self.open[d].1.any_pop = true;
                                self.pops = true;
                            }
                            if matches!(expr, Expr::Call { .. }) {
                                self.calls = true;
                            }
                        }
                        StmtKind::For { index, .. } => bind(*index),
                        StmtKind::Push(a) => {
                            self.open[d].1.any_push = true;
                            if is_array(self.f, a) {
                                self.open[d].1.pushed = true;
                            }
                        }
                        StmtKind::Assign { var, value } if is_array(self.f, value) => {
                            // A survivor of every open block inside the
                            // variable's own.
                            let from = self.bound_at.get(var).map_or(0, |dv| dv + 1);
                            for k in (from..=d).rev() {
                                let (_, facts, seen) = &mut self.open[k];
                                if !seen.insert(*var) {
                                    break;
                                }
                                facts.assigned.push(*var);
                            }
                        }
                        _ => {}
                    }
                    for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                        self.block(nb);
                    }
                    if let StmtKind::Let { vars, expr: Expr::Build { body, .. } } = &s.kind {
                        // Fused when every result is summed and the body
                        // allocates nothing.
                        let quiet = self.done.get(&(body as *const Block)).is_some_and(|facts| !facts.allocates);
                        if quiet && vars.iter().all(|y| self.candidates.contains_key(y)) {
                            for y in vars {
                                if let Some(s) = self.candidates.remove(y) {
                                    self.fused.insert(*y, s);
                                }
                            }
                        } else {
                            self.open[d].1.allocates = true;
                            self.open[d].1.allocates_here = true;
                        }
                    }
                }
                if let Some((key, facts, _)) = self.open.pop() {
                    if facts.any_push && facts.any_pop && !self.open.is_empty() {
                        self.interleaved = true;
                    }
                    if let Some((_, parent, _)) = self.open.last_mut() {
                        parent.pushed |= facts.pushed;
                        parent.any_push |= facts.any_push;
                        parent.any_pop |= facts.any_pop;
                        parent.allocates |= facts.allocates;
                    }
                    self.done.insert(key, facts);
                }
            }
        }
        let mut w = Walk {
            f,
            bound_at: HashMap::new(),
            open: Vec::new(),
            done: HashMap::new(),
            interleaved: false,
            calls: false,
            pops: false,
            candidates: fused_sum_candidates(f),
            fused: HashMap::new(),
        };
        w.block(&f.body);
        // A callee's derivative (`arrayad_ir::KeptKind`) pushes and pops
        // above the tape's top, over the slots this function popped.
        let interleaved_tape = w.interleaved || (w.calls && w.pops);
        BlockFacts { facts: w.done, interleaved_tape, fused_sums: w.fused }
    }

    /// The variable of `sum y` when the build binding `y` is computed as
    /// that sum, without the array.
    pub(crate) fn fused_sum(&self, y: VarId) -> Option<VarId> {
        self.fused_sums.get(&y).copied()
    }

    /// [`survivors`] of `body`, a block of the function.
    pub(crate) fn survivors(&self, f: &Function, body: &Block) -> Option<Vec<VarId>> {
        match self.facts.get(&(body as *const Block)) {
            Some(facts) if facts.pushed && !facts.allocates_here && !facts.any_pop => None,
            Some(facts) => Some(facts.assigned.clone()),
            None => survivors(f, body),
        }
    }

    /// True if `body` (or a block nested in it) pushes an array on the tape.
    pub(crate) fn pushes_arrays(&self, f: &Function, body: &Block) -> bool {
        match self.facts.get(&(body as *const Block)) {
            Some(facts) => facts.pushed,
            None => survivors(f, body).is_none(),
        }
    }

    /// [`allocates`] of `body`, a block of the function.
    pub(crate) fn allocates(&self, body: &Block) -> bool {
        match self.facts.get(&(body as *const Block)) {
            Some(facts) => facts.allocates,
            None => allocates(body),
        }
    }
}

/// The most results of one build that are summed in one fused loop (a
/// forward pass sums a value and its tangent, a vector forward pass a value
/// and the tangent of each lane): each sum keeps eight partial sums.
pub(crate) const MAX_FUSED_SUMS: usize = 16;

/// The most results of a build of a literal extent below `SUM_LANES` that
/// are summed in one fused loop: such a sum is the left-to-right sum, one
/// accumulator per result (a vector forward pass of up to 32 lanes over a
/// short `sum(for j < 7 => ...)`).
const MAX_FUSED_SHORT_SUMS: usize = 64;

/// The pairs `y = build i < n => r` (an `f64` result of a build of at
/// most [`MAX_FUSED_SUMS`] results, or [`MAX_FUSED_SHORT_SUMS`] when `n`
/// is a literal below `SUM_LANES`) and `s = sum y` in one block, where the sum is
/// `y`'s only use and neither is mutable: `y` maps to `s`. When every
/// result of the build is such a `y`, code generation may compute the sums
/// where the build is, as one loop over its body adding in the order of
/// `sum` (`Lower::sum_lanes`): the body runs in the same order and place
/// as the build's, and nothing between the statements can read a sum.
fn fused_sum_candidates(f: &Function) -> HashMap<VarId, VarId> {
    let counts = arrayad_ir::visit::use_counts(&f.body, f.vars.len());
    let mut out = HashMap::new();
    for_each_block(&f.body, &mut |b| {
        let mut builds = HashSet::new();
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { vars, expr: Expr::Build { n, body, .. } }
                    if vars.len() <= MAX_FUSED_SUMS
                        || (vars.len() <= MAX_FUSED_SHORT_SUMS
                            && matches!(n, Atom::I64(c) if (0..arrayad_ir::interp::ops::SUM_LANES as i64).contains(c))) =>
                {
                    for (y, r) in vars.iter().zip(&body.results) {
                        let t = f.atom_ty(r);
                        if t.is_scalar() && t.elem == arrayad_ir::Scalar::F64 && !f.var(*y).mutable {
                            builds.insert(*y);
                        }
                    }
                }
                StmtKind::Let { vars, expr: Expr::Reduce { op: arrayad_ir::ReduceOp::Sum, array } } => {
                    if let [s] = vars.as_slice() {
                        if builds.contains(array) && counts[array.index()] == 1 && !f.var(*s).mutable {
                            out.insert(*array, *s);
                        }
                    }
                }
                _ => {}
            }
        }
    });
    out
}

/// True when running `body` may allocate from the arena.
pub(crate) fn allocates(body: &Block) -> bool {
    let mut any = false;
    for_each_block(body, &mut |b| {
        any |= b.stmts.iter().any(|s| allocating(&s.kind));
    });
    any
}

/// For every mutable variable, the index (in the block that declares it) of
/// the last statement that uses or assigns it, at any depth: after that
/// statement its emitter variables are free (one walk of the function,
/// remembering the statement index at every depth of the current path).
/// A variable that a block's results read has no entry (it lives to the
/// end of its block).
pub(crate) fn last_uses(f: &Function) -> HashMap<VarId, usize> {
    struct Walk<'f> {
        f: &'f Function,
        depth: HashMap<VarId, usize>,
        last: HashMap<VarId, usize>,
        path: Vec<usize>,
    }
    impl Walk<'_> {
        fn used(&mut self, v: VarId) {
            if let Some(&d) = self.depth.get(&v) {
                match self.path.get(d) {
                    Some(&i) => {
                        self.last.insert(v, i);
                    }
                    // Read by the results of its own block.
                    None => {
                        self.last.remove(&v);
                    }
                }
            }
        }
        fn block(&mut self, b: &Block) {
            let d = self.path.len();
            self.path.push(0);
            for (i, s) in b.stmts.iter().enumerate() {
                self.path[d] = i;
                arrayad_ir::visit::stmt_uses_shallow(&s.kind, &mut |v| self.used(v));
                for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                    self.block(nb);
                }
                if let StmtKind::Let { vars, .. } = &s.kind {
                    for v in vars {
                        if self.f.var(*v).mutable {
                            self.depth.insert(*v, d);
                            self.last.insert(*v, i);
                        }
                    }
                }
            }
            self.path.pop();
            for r in &b.results {
                if let Atom::Var(v) = *r {
                    self.used(v);
                }
            }
        }
    }
    let mut w = Walk { f, depth: HashMap::new(), last: HashMap::new(), path: Vec::new() };
    w.block(&f.body);
    w.last
}

/// Which functional updates (`A with [i] = v`, [`Expr::Update`]) write into
/// their array's buffer instead of a copy (LANGUAGE.md section 11: O(1)
/// when `A` is not used afterwards).
///
/// An update runs in place when its array is *owned* and dead afterwards:
/// the array, and every view or copy of it bound in the same block (its
/// alias class), is bound by a fresh allocation of that block (a build,
/// literal, zeros or another update) or is a loop state the body owns, is
/// never pushed on the tape, stored in a mutable variable or read by a
/// branch or loop that yields arrays (whose results may be it), and the
/// update is the last use of its elements in the block (the block's
/// results count as uses after every statement; `dim` and `zeros_like`
/// read only extents, which an update keeps). A loop state is owned by its body when the
/// body's result for it is the state itself or a fresh allocation of the
/// body (distinct for distinct states); the loop then copies the state's
/// initial value once at entry ([`InPlace::copy_init`]) unless that value
/// is itself owned and dead after the loop. Everything else copies, which
/// is always right. One walk of the function.
#[derive(Default)]
pub(crate) struct InPlace {
    /// The result variables of the updates that run in place.
    pub updates: HashSet<VarId>,
    /// Loop states whose initial value the loop copies at entry (their
    /// updates in the body run in place).
    pub copy_init: HashSet<VarId>,
    /// The chunk functions of parallel maps that `f` calls
    /// (`crate::parallel`): such a call reads its arguments only while it
    /// runs and returns a fresh array, as the comprehension it replaces.
    maps: HashSet<arrayad_ir::FuncId>,
}

impl InPlace {
    pub(crate) fn new(f: &Function, callees: &crate::Callees) -> InPlace {
        let mut out = InPlace::default();
        for s in &f.body.stmts {
            if let StmtKind::Let { expr: Expr::Call { func, .. }, .. } = &s.kind {
                if callees.parallel_map(*func).is_some() {
                    out.maps.insert(*func);
                }
            }
        }
        out.block(f, &f.body, &HashSet::new());
        out
    }

    /// Analyses `b`, whose loop states `owned` (if `b` is a loop body) are
    /// owned by it; returns the owned states that an update in `b` writes in
    /// place.
    fn block(&mut self, f: &Function, b: &Block, owned: &HashSet<VarId>) -> HashSet<VarId> {
        let mut root: HashMap<VarId, VarId> = owned.iter().map(|s| (*s, *s)).collect();
        let mut fresh: HashSet<VarId> = owned.clone();
        let mut last: HashMap<VarId, usize> = HashMap::new();
        let mut escaped: HashSet<VarId> = HashSet::new();
        let mut nested_uses: Vec<HashSet<VarId>> = Vec::with_capacity(b.stmts.len());
        for (i, s) in b.stmts.iter().enumerate() {
            let mut inner = HashSet::new();
            // Uses of the elements (at any depth) and escapes. (The extents
            // of an array updated in place do not change: `dim` and
            // `zeros_like` of it may come later.)
            data_uses_shallow(&s.kind, &mut |v| {
                if let Some(r) = root.get(&v) {
                    last.insert(*r, i);
                }
            });
            for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                for_each_block(nb, &mut |blk| {
                    for t in &blk.stmts {
                        data_uses_shallow(&t.kind, &mut |v| {
                            if let Some(r) = root.get(&v) {
                                last.insert(*r, i);
                                inner.insert(*r);
                            }
                        });
                    }
                    for a in &blk.results {
                        if let Some(r) = a.as_var().and_then(|v| root.get(&v)) {
                            last.insert(*r, i);
                            inner.insert(*r);
                        }
                    }
                });
                nested_escapes(f, nb, &mut root.clone(), &mut escaped);
            }
            escapes(f, &s.kind, &root, &mut escaped);
            // The array results of a branch or loop may be any array it
            // reads (a branch yielding a row of one, a loop that runs zero
            // times), and those of a call any array argument (but a
            // parallel map's): those are shared from here on.
            if let StmtKind::Let { vars, expr } = &s.kind {
                let shares = match expr {
                    Expr::If { .. } | Expr::Loop { .. } | Expr::While { .. } => true,
                    Expr::Call { func, .. } => !self.maps.contains(func),
                    _ => false,
                };
                if shares && vars.iter().any(|v| f.ty(*v).is_array()) {
                    data_uses_shallow(&s.kind, &mut |v| {
                        if let Some(r) = root.get(&v) {
                            escaped.insert(*r);
                        }
                    });
                    escaped.extend(inner.iter().copied());
                }
            }
            nested_uses.push(inner);
            // Roots of the arrays bound here.
            if let StmtKind::Let { vars, expr } = &s.kind {
                if let [v] = vars.as_slice() {
                    if f.ty(*v).is_array() && !f.var(*v).mutable {
                        match expr {
                            Expr::Build { .. }
                            | Expr::ArrayLit { .. }
                            | Expr::ZerosLike(_)
                            | Expr::Zeros(_)
                            | Expr::Update { .. } => {
                                root.insert(*v, *v);
                                fresh.insert(*v);
                            }
                            Expr::Call { func, .. } if self.maps.contains(func) => {
                                root.insert(*v, *v);
                                fresh.insert(*v);
                            }
                            Expr::Atom(Atom::Var(x))
                            | Expr::Index { array: x, .. }
                            | Expr::Slice { array: x, .. }
                            | Expr::Reshape { array: x, .. } => {
                                if let Some(r) = root.get(x).copied() {
                                    root.insert(*v, r);
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        for r in &b.results {
            if let Some(r) = r.as_var().and_then(|v| root.get(&v)) {
                last.insert(*r, usize::MAX);
            }
        }
        let unique = |r: VarId, at: usize| fresh.contains(&r) && !escaped.contains(&r) && last.get(&r) == Some(&at);
        let mut written = HashSet::new();
        for (i, s) in b.stmts.iter().enumerate() {
            let StmtKind::Let { vars, expr } = &s.kind else {
                for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                    self.block(f, nb, &HashSet::new());
                }
                continue;
            };
            match expr {
                Expr::Update { array, .. } => {
                    if let (Some(&r), [y]) = (root.get(array), vars.as_slice()) {
                        if unique(r, i) {
                            self.updates.insert(*y);
                            if owned.contains(&r) {
                                written.insert(r);
                            }
                        }
                    }
                }
                Expr::Loop { states, init, body, .. } | Expr::While { states, init, body, .. } => {
                    let own = owned_states(f, states, body);
                    let in_place = self.block(f, body, &own);
                    if let Expr::While { cond, .. } = expr {
                        self.block(f, cond, &HashSet::new());
                    }
                    let mut claimed = HashSet::new();
                    for (s, a) in states.iter().zip(init) {
                        if !in_place.contains(s) {
                            continue;
                        }
                        // The initial buffer becomes the state's: it must be
                        // owned here, dead after the loop and unread by it.
                        let r = a.as_var().and_then(|x| root.get(&x).copied());
                        let reuse =
                            r.is_some_and(|r| unique(r, i) && !nested_uses[i].contains(&r) && claimed.insert(r));
                        if !reuse {
                            self.copy_init.insert(*s);
                        }
                    }
                }
                _ => {
                    for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                        self.block(f, nb, &HashSet::new());
                    }
                }
            }
        }
        written
    }
}

/// The variables whose elements `kind` reads or writes, not counting its
/// nested blocks nor the arrays it reads only for their extents (`dim`,
/// `zeros_like`).
fn data_uses_shallow(kind: &StmtKind, f: &mut dyn FnMut(VarId)) {
    match kind {
        StmtKind::Let { expr: Expr::Dim { .. } | Expr::ZerosLike(_), .. } => {}
        _ => arrayad_ir::visit::stmt_uses_shallow(kind, f),
    }
}

/// Adds to `escaped` the roots of arrays that `kind` pushes on the tape or
/// stores in a mutable variable (shallow: not its nested blocks).
fn escapes(f: &Function, kind: &StmtKind, root: &HashMap<VarId, VarId>, escaped: &mut HashSet<VarId>) {
    let mut esc = |a: &Atom| {
        if let Some(r) = a.as_var().and_then(|v| root.get(&v)) {
            escaped.insert(*r);
        }
    };
    match kind {
        StmtKind::Push(a) => esc(a),
        StmtKind::Assign { value, .. } => esc(value),
        // A mutable variable taking the buffer (a lazy cotangent).
        StmtKind::Let { vars, expr: Expr::Atom(a) } if vars.iter().any(|v| f.var(*v).mutable) => esc(a),
        _ => {}
    }
}

/// [`escapes`] in `b` and the blocks nested in it, following the views and
/// copies bound there back to the roots of `root` (which it extends).
fn nested_escapes(f: &Function, b: &Block, root: &mut HashMap<VarId, VarId>, escaped: &mut HashSet<VarId>) {
    for s in &b.stmts {
        escapes(f, &s.kind, root, escaped);
        if let StmtKind::Let { vars, expr } = &s.kind {
            if let (
                [v],
                Expr::Atom(Atom::Var(x))
                | Expr::Index { array: x, .. }
                | Expr::Slice { array: x, .. }
                | Expr::Reshape { array: x, .. },
            ) = (vars.as_slice(), expr)
            {
                if let Some(r) = root.get(x).copied() {
                    root.insert(*v, r);
                }
            }
        }
        for nb in arrayad_ir::visit::child_blocks(&s.kind) {
            nested_escapes(f, nb, root, escaped);
        }
    }
}

/// The array states of a loop that its body owns: the body's result for the
/// state is the state itself or a fresh allocation bound at the top of the
/// body, distinct for distinct states.
fn owned_states(f: &Function, states: &[VarId], body: &Block) -> HashSet<VarId> {
    let fresh: HashSet<VarId> = body
        .stmts
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Let { vars, expr }
                if vars.len() == 1
                    && matches!(
                        expr,
                        Expr::Build { .. }
                            | Expr::ArrayLit { .. }
                            | Expr::ZerosLike(_)
                            | Expr::Zeros(_)
                            | Expr::Update { .. }
                    ) =>
            {
                Some(vars[0])
            }
            _ => None,
        })
        .collect();
    let mut seen = HashSet::new();
    let mut own = HashSet::new();
    for (s, r) in states.iter().zip(&body.results) {
        let ok = f.ty(*s).is_array()
            && !f.var(*s).mutable
            && r.as_var().is_some_and(|w| (w == *s || fresh.contains(&w)) && seen.insert(w));
        if ok {
            own.insert(*s);
        }
    }
    own
}

#[cfg(test)]
mod tests {
    use super::{fused_sum_candidates, MAX_FUSED_SUMS};
    use arrayad_ir::builder::Builder;
    use arrayad_ir::{Atom, BinOp, Block, Expr, Function, Loc, ReduceOp, Scalar, Signature, SrcType, StmtKind, Type};

    /// `let y_0, ..., y_{w-1} = build j < n => (x[j] * 0, ..., x[j] * (w -
    /// 1))` and `s_k = sum y_k` for each result: how many of the sums
    /// [`fused_sum_candidates`] fuses.
    fn fused(width: usize, n: i64) -> usize {
        let mut f = Function {
            name: "f".into(),
            params: vec![],
            body: Block::default(),
            vars: vec![],
            result_types: vec![Type::F64; width],
            signature: Signature { params: vec![], result: SrcType::Scalar(Scalar::F64) },
            loc: Loc::default(),
        };
        let x = f.new_var("x", Type::array(Scalar::F64, 1));
        f.params.push(x);
        let mut b = Builder::new(&mut f);
        let j = b.var("j", Type::I64);
        b.begin_block();
        let e = b.let1("e", Expr::Index { array: x, indices: vec![Atom::Var(j)] }, Type::F64);
        let rows: Vec<Atom> = (0..width).map(|k| b.binary(BinOp::Mul, Atom::Var(e), Atom::F64(k as f64))).collect();
        let body = b.end_block(rows);
        let ys: Vec<_> = (0..width).map(|_| b.var("y", Type::array(Scalar::F64, 1))).collect();
        b.stmt(StmtKind::Let { vars: ys.clone(), expr: Expr::Build { n: Atom::I64(n), index: j, body } });
        let sums: Vec<Atom> = ys
            .iter()
            .map(|y| Atom::Var(b.let1("s", Expr::Reduce { op: ReduceOp::Sum, array: *y }, Type::F64)))
            .collect();
        f.body = b.finish(sums);
        fused_sum_candidates(&f).len()
    }

    #[test]
    fn short_sums_of_many_results_fuse() {
        // A value and 32 lanes over a literal extent below eight: one loop.
        assert_eq!(fused(33, 7), 33);
        // Eight elements or more keep eight partials per sum: at most 16.
        assert_eq!(fused(33, 8), 0);
        assert_eq!(fused(MAX_FUSED_SUMS, 100), MAX_FUSED_SUMS);
        assert_eq!(fused(65, 7), 0);
    }
}
