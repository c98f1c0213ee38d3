//! IR -> machine code, one function at a time, generic over the backend's
//! [`Emitter`] (`emit.rs`).
//!
//! Every IR variable bound once is the emitted SSA value itself; loop
//! states and mutable variables become emitter variables (a scalar: one;
//! an array: its data pointer and one `i64` per axis), from which the
//! backend builds SSA form. Generated functions have the internal calling
//! convention `int32_t f(ctx *, const u64 *args, u64 *results)` (see the
//! crate docs); a failing run-time check branches to a cold block that
//! records the error in the context ([`arrayad_ir::Fault`]: one message
//! template per check) and returns its kind.

mod analysis;
mod call;
pub(crate) use analysis::{allocates, MAX_FUSED_SUMS};
pub(crate) use call::lower_frame_guard;
pub(crate) mod emit;
mod expr;
pub(crate) mod first_write;
mod inline_math;
mod memory;
mod pairs;
mod placed;
mod private_rows;
mod roots;
mod stmt;
mod sum;

use crate::error::CodegenError;
use arrayad_ir::{Atom, Expr, Fault, Loc, Scalar, StmtKind, VarId};
use arrayad_runtime::{Callee, RuntimeFn};
use emit::{Conv, Emitter, IntCC, IntOp, Mem, Ty};
use std::collections::HashSet;

pub(crate) type Result<T> = std::result::Result<T, CodegenError>;

/// The number of 8-byte slots a value of type `t` takes.
pub(crate) fn slots(t: arrayad_ir::Type) -> usize {
    1 + t.rank as usize
}

/// Lowers `f` through the emitter `b`, positioned at the start of the
/// function's (empty) entry block. `file` is the source file name of
/// messages; `callees` the definitions `f` calls (kept calls), if any.
pub(crate) fn lower_function<E: Emitter>(
    b: &mut E,
    file: &str,
    f: &arrayad_ir::Function,
    callees: &crate::Callees,
) -> Result<()> {
    let [ctx, args, results] = b.params();
    // Straight-line scalar code (such as the derivatives of small kept
    // definitions) has no loop, branch or array: the analyses of those
    // would find nothing in it.
    let straight = f.is_straight_line_scalar();
    let mut l = Lower {
        b,
        f,
        program: callees.program(),
        callees,
        call_buffers: None,
        dest_table: None,
        call_failed: None,
        defers_call_status: straight && call::calls_straight_line_code_only(f, callees),
        deferred_calls: false,
        rewinds_tape: call::rewinds_tape(f),
        file,
        ctx,
        vars: vec![None; f.vars.len()],
        loc: f.loc,
        rebound: rebound_vars(f),
        far: far_scalars(f),
        last_use: analysis::last_uses(f),
        blocks: if straight { analysis::BlockFacts::default() } else { analysis::BlockFacts::new(f) },
        in_place: if straight { analysis::InPlace::default() } else { analysis::InPlace::new(f, callees) },
        first_writes: if straight {
            first_write::FirstWrites::default()
        } else {
            first_write::FirstWrites::new(f, callees)
        },
        writing_first: Vec::new(),
        array_roots: None,
        in_bounds: Vec::new(),
        loop_rows: Vec::new(),
        successors: Default::default(),
        halving: Default::default(),
        zero_or: Default::default(),
        known: Known::new(),
        clock: 0,
        releasing: 0,
        destinations: destinations(f, callees),
        dest_next: None,
        dest_rows: Vec::new(),
        places: Default::default(),
        place_next: None,
        chunk_range: None,
        chunk_blocks: false,
        chunk_first_writes: Vec::new(),
        effects_chunk: false,
    };
    if let Some((args, results)) = call::call_buffer_slots(f) {
        let bytes = |n: usize| u32::try_from(8 * n.max(1)).map_err(|_| l.malformed("a call with too many values"));
        let (a, r) = (bytes(args)?, bytes(results)?);
        let (abuf, rbuf) = (l.b.stack_slot(a), l.b.stack_slot(r));
        l.call_buffers = Some((abuf, rbuf, args, results));
        l.check_stack_depth(abuf)?;
        l.take_destinations();
    }
    // Arguments.
    let types: Vec<arrayad_ir::Type> = f.params.iter().map(|p| l.var_ty(*p)).collect::<Result<_>>()?;
    for (p, val) in f.params.iter().zip(l.unpack(args, &types, Mem::Slots)) {
        l.def(*p, val)?;
    }
    if let Some(map) = callees.chunk(&f.name).cloned() {
        let [lo, hi, ..] = f.params.as_slice() else { return Err(l.malformed("a chunk function without its range")) };
        let range = (l.scalar(&Atom::Var(*lo))?, l.scalar(&Atom::Var(*hi))?);
        l.chunk_range = Some(range);
        l.chunk_blocks = map.blocks;
        l.chunk_first_writes =
            f.params.iter().enumerate().filter(|(k, _)| map.writes_first(*k)).map(|(_, p)| *p).collect();
        l.effects_chunk = map.rows.is_empty();
    }
    l.stmts(&f.body.stmts)?;
    if l.chunk_range.is_some() {
        return Err(l.malformed("a chunk function whose comprehension was not lowered in chunk mode"));
    }
    l.check_call_status();
    // Results.
    l.pack(results, &f.body.results, Mem::Slots)?;
    let zero = l.b.iconst(Ty::I32, 0);
    l.b.ret(zero);
    l.finish_calls();
    Ok(())
}

/// Emits, in the current block, the recording of `fault` located at
/// `loc` of `file`, with the three `i64` values of its message, in the
/// context `ctx` (`arrayad_fail`), and the return of the kind recorded
/// (that of an earlier error of the call, if any, which the context keeps).
pub(crate) fn raise_at<E: Emitter>(
    b: &mut E,
    ctx: E::Value,
    file: &str,
    loc: arrayad_ir::Loc,
    fault: Fault<'_>,
    vals: [E::Value; 3],
) -> Result<()> {
    let msg = b.message(&fault.located_template(file, loc))?;
    let kind = b.iconst(Ty::I32, fault.kind().code() as i64);
    let [v1, v2, v3] = vals;
    // The kind recorded: an earlier error's when a failed call's status is
    // checked later (`Lower::defers_call_status`).
    let recorded = b.call(Callee::Runtime(RuntimeFn::Fail), &[ctx, kind, msg, v1, v2, v3])?;
    b.ret(recorded);
    Ok(())
}

/// How an IR variable lives in emitted code.
pub(crate) enum Repr<E: Emitter> {
    /// A variable bound once (the IR's scoping makes its definition dominate
    /// every use): the SSA values themselves, so that identical values stay
    /// recognisable (bounds-check elimination compares them).
    Fixed(Val<E::Value>),
    Scalar(E::Var),
    Array {
        ptr: E::Var,
        dims: Vec<E::Var>,
    },
    /// A scalar bound once and used far away ([`far_scalars`]), kept in a
    /// stack slot and loaded at each use.
    Slot(E::Slot, Ty),
}

/// An array at one program point: data pointer and extents.
#[derive(Clone, Debug)]
pub(crate) struct Arr<V> {
    pub ptr: V,
    pub dims: Vec<V>,
}

/// A lowered value.
#[derive(Clone, Debug)]
pub(crate) enum Val<V> {
    S(V),
    A(Arr<V>),
}

/// Bytes per element of an array of `s`.
pub(crate) fn elem_size(s: Scalar) -> i64 {
    match s {
        Scalar::Bool => 1,
        _ => 8,
    }
}

/// The variables bound more than once: loop states.
fn rebound_vars(f: &arrayad_ir::Function) -> HashSet<VarId> {
    let mut out = HashSet::new();
    arrayad_ir::visit::for_each_block(&f.body, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::Let { expr: Expr::Loop { states, .. } | Expr::While { states, .. }, .. } = &s.kind {
                out.extend(states.iter().copied());
            }
        }
    });
    out
}

/// Statements (counted at every depth) between the definition of a scalar
/// and its last use beyond which it is kept in a stack slot.
const FAR: u32 = 128;

/// The `f64` and `bool` variables bound outside every loop whose last use
/// (or assignment) comes more than [`FAR`] statements after their
/// definition, none of them in a loop (so that no hot loop loads them): the
/// forward values the backward pass reads, the cotangent accumulators of
/// values read twice far apart,
/// conditions of branches taken again backward. In SSA form each would be
/// live through every block in between, and the register allocator's work
/// grows with the number of such values times the number of blocks
/// (quadratic in the size of a function with many branches or checks);
/// from a stack slot each use loads it (where the allocator would have
/// spilled it anyway). Sizes (`i64`) stay SSA values, which bounds-check
/// elimination compares.
fn far_scalars(f: &arrayad_ir::Function) -> Vec<bool> {
    struct Walk {
        pos: u32,
        /// Position and loop depth of each definition.
        def: Vec<Option<(u32, u32)>>,
        /// Position of the last use and deepest loop depth of a use.
        last: Vec<(u32, u32)>,
    }
    impl Walk {
        fn used(&mut self, v: VarId, depth: u32) {
            if let Some(l) = self.last.get_mut(v.index()) {
                l.0 = self.pos;
                l.1 = l.1.max(depth);
            }
        }
        fn block(&mut self, b: &arrayad_ir::Block, depth: u32) {
            for s in &b.stmts {
                self.pos += 1;
                arrayad_ir::visit::stmt_uses_shallow(&s.kind, &mut |v| self.used(v, depth));
                let looped = !matches!(s.kind, StmtKind::If { .. } | StmtKind::Let { expr: Expr::If { .. }, .. });
                for nb in arrayad_ir::visit::child_blocks(&s.kind) {
                    self.block(nb, depth + u32::from(looped));
                }
                if let StmtKind::Let { vars, .. } = &s.kind {
                    for v in vars {
                        if let Some(d) = self.def.get_mut(v.index()) {
                            *d = Some((self.pos, depth));
                        }
                    }
                }
            }
            for r in &b.results {
                if let Atom::Var(v) = *r {
                    self.used(v, depth);
                }
            }
        }
    }
    let n = f.vars.len();
    let mut w = Walk { pos: 0, def: vec![None; n], last: vec![(0, 0); n] };
    w.block(&f.body, 0);
    (0..n)
        .map(|i| {
            let info = &f.vars[i];
            let scalar = info.ty.is_scalar() && matches!(info.ty.elem, Scalar::F64 | Scalar::Bool);
            match (w.def[i], w.last[i]) {
                (Some((at, 0)), (last, 0)) => scalar && last > at.saturating_add(FAR),
                _ => false,
            }
        })
        .collect()
}

/// The state of the lowering of one function.
pub(crate) struct Lower<'a, E: Emitter> {
    pub(crate) b: &'a mut E,
    f: &'a arrayad_ir::Function,
    /// The program whose definitions `f` calls (kept calls).
    program: Option<&'a arrayad_ir::Program>,
    /// Where `f`'s calls go, and which of them are parallel maps.
    callees: &'a crate::Callees,
    /// The argument and result buffers of every call (`call.rs`), with
    /// their sizes in slots.
    call_buffers: Option<(E::Value, E::Value, usize, usize)>,
    /// In a function that makes calls, the context's destination table
    /// (`ctx->dest`), read once at entry, where the context's is then
    /// cleared for the callees (`call.rs`).
    dest_table: Option<E::Value>,
    /// In a function that makes calls, the block that returns the status
    /// of a failed call, and the variable holding it: one for every call
    /// (`call.rs`).
    call_failed: Option<(E::Block, E::Var)>,
    /// The statuses of `f`'s calls are checked once, after its last
    /// statement, rather than after each call
    /// ([`call::calls_straight_line_code_only`]).
    defers_call_status: bool,
    /// When [`Self::defers_call_status`], whether a call was made, so
    /// that the context's error is checked at the end.
    deferred_calls: bool,
    /// `f` rewinds its tape: calls run their callee's tape above its end
    /// (`call.rs`).
    rewinds_tape: bool,
    file: &'a str,
    /// The `ctx` parameter.
    ctx: E::Value,
    vars: Vec<Option<Repr<E>>>,
    /// The location of the statement being lowered.
    loc: Loc,
    /// Variables assigned more than once (loop states, mutable variables):
    /// they live in emitter variables.
    rebound: HashSet<VarId>,
    /// The scalars kept in stack slots ([`far_scalars`]), by variable.
    far: Vec<bool>,
    /// The last statement of its block using each mutable variable
    /// ([`analysis::last_uses`]).
    last_use: std::collections::HashMap<VarId, usize>,
    /// The updates that run in place and the loop states copied at entry
    /// for them ([`analysis::InPlace`]).
    in_place: analysis::InPlace,
    /// What loop bodies allocate and keep ([`analysis::BlockFacts`]).
    blocks: analysis::BlockFacts,
    /// Accumulators written before they are read
    /// ([`first_write::FirstWrites`]).
    first_writes: first_write::FirstWrites,
    /// The accumulators whose first add in the loop body being lowered is
    /// their first write: stored, not added (`None` once that add is
    /// lowered).
    writing_first: Vec<Option<VarId>>,
    /// Where `f`'s arrays live (`roots.rs`), found on first use.
    array_roots: Option<roots::ArrayRoots>,
    /// `(i, n)`: `0 <= i < n` holds here (counted-loop indices).
    in_bounds: Vec<(E::Value, E::Value)>,
    /// The addresses of rows `a[p..]` computed before the loops being
    /// lowered, whose bodies read or add into `a[p.., i]` along their
    /// index ([`Lower::hoist_loop_rows`]): `(a, p.., address)`, innermost last.
    loop_rows: Vec<(VarId, Vec<Atom>, E::Value)>,
    /// `v -> x` for every `v = x + 1` (`i64`) lowered: the bound `r + 1`
    /// of a loop inside one over `r` (`for c < r + 1`) is at most the
    /// enclosing bound ([`Lower::known_in_bounds`]). Facts of SSA values,
    /// true wherever they are used.
    successors: std::collections::HashMap<E::Value, E::Value>,
    /// What the `i64` values computed for a loop run two iterations at a
    /// time are ([`Halving`]). Facts of SSA values, as `successors`.
    halving: std::collections::HashMap<E::Value, Halving<E::Value>>,
    /// `v -> d` for every `v = if c then d else 0` (or `0` then `d`)
    /// lowered: a loop over `0..v` that runs at all runs over `0..d`
    /// (`Lower::bound_is`; a comprehension that `ir::passes::gather` picks
    /// by a branch counts its points so). Facts of SSA values, as
    /// `successors`.
    zero_or: std::collections::HashMap<E::Value, E::Value>,
    /// Sizes known equal and integers computed in enclosing scopes.
    known: Known<E::Value>,
    /// Statements lowered so far (the age of a memoised value).
    clock: u32,
    /// How many enclosing loop bodies release their arena memory at the end
    /// of every iteration: inside one, an array pushed on the tape is
    /// copied there (its memory is about to be released or moved), outside
    /// all of them it is pushed by reference (`Lower::tape_push_array`).
    releasing: u32,
    /// The array results computed by an allocation of their own at the top
    /// of the function, by variable, with their result index: the
    /// allocation takes the caller's buffer when the context offers one of
    /// the right size ([`destinations`]).
    destinations: std::collections::HashMap<VarId, usize>,
    /// The result index whose buffer the next allocation may take (set
    /// while lowering the statement that binds a result of
    /// `destinations`).
    dest_next: Option<usize>,
    /// Of a comprehension or a parallel map of several arrays: the result
    /// index whose buffer each may take (set while lowering the statement
    /// that binds them; empty otherwise).
    dest_rows: Vec<Option<usize>>,
    /// The destinations of the rows computed in place (`placed.rs`) of
    /// the comprehensions whose iterations are being lowered: for such a
    /// row `y`, the address of its row in its comprehension's result and
    /// the row's size in bytes (the address is null before that result is
    /// allocated).
    places: std::collections::HashMap<VarId, (E::Value, E::Value)>,
    /// The destination the next allocation may take (`Lower::alloc_bytes`;
    /// set while allocating a comprehension's result that `places` has).
    place_next: Option<(E::Value, E::Value)>,
    /// In a chunk function of a parallel map (`crate::parallel`), the
    /// range `lo..hi` of the iterations its comprehension runs, taken by
    /// the first comprehension lowered (the one at its top): the loop runs
    /// only those, with the facts of the whole range (`0 <= i < n`: the
    /// runtime calls it with `0 <= lo <= hi <= n`), and its result holds
    /// their `hi - lo` rows.
    chunk_range: Option<(E::Value, E::Value)>,
    /// In a chunk function of a parallel sum, `chunk_range` counts blocks
    /// of `SUM_BLOCK` iterations, and row `b` is the sum of block `b`
    /// (`Lower::block_sums`).
    chunk_blocks: bool,
    /// In a chunk function of a loop of effects, the accumulators (its
    /// parameters) that the loop writes first (`ParallelMap::first_writes`):
    /// its caller did not zero-fill them.
    chunk_first_writes: Vec<VarId>,
    /// A chunk function of a loop of effects: the parameters it adds into
    /// are distinct accumulators of its caller (`roots.rs`).
    effects_chunk: bool,
}

/// Destination passing: the array results of `f` that a statement at the
/// top of its body allocates itself (a comprehension, each of its
/// results; `zeros`, `zeros_like`; a parallel map, each of its arrays),
/// with their result index (the first, for a result returned twice). Such a statement may
/// compute the result directly in the caller's buffer
/// (`arrayad_ctx::dest`, [`Lower::alloc_result`]); a result is never
/// updated in place (it is live to the end), and the statement runs once.
fn destinations(f: &arrayad_ir::Function, callees: &crate::Callees) -> std::collections::HashMap<VarId, usize> {
    let mut wanted = std::collections::HashMap::new();
    for (i, r) in f.body.results.iter().enumerate() {
        if let Atom::Var(v) = r {
            if f.ty(*v).is_array() && !f.var(*v).mutable {
                wanted.entry(*v).or_insert(i);
            }
        }
    }
    let mut out = std::collections::HashMap::new();
    for s in &f.body.stmts {
        if let StmtKind::Let { vars, expr } = &s.kind {
            // Each array of a comprehension of several results is its
            // own allocation (the arrays of a value and its tangent; the
            // several arrays of a chunk of a parallel map), and a parallel
            // map of several arrays offers each its buffer.
            let several = match expr {
                Expr::Build { body, .. } => body.results.len() == vars.len(),
                Expr::Call { func, .. } => callees.parallel_map(*func).is_some(),
                _ => false,
            };
            if several && vars.len() > 1 {
                for v in vars {
                    if let Some(i) = wanted.get(v) {
                        out.insert(*v, *i);
                    }
                }
                continue;
            }
            let own = match expr {
                Expr::Build { body, .. } => body.results.len() == 1,
                Expr::Zeros(_) | Expr::ZerosLike(_) => true,
                // A parallel map computes its rows in the buffer offered
                // (`Lower::call_def`).
                Expr::Call { func, .. } => callees.parallel_map(*func).is_some(),
                _ => false,
            };
            if let ([v], true) = (vars.as_slice(), own) {
                if let Some(i) = wanted.get(v) {
                    out.insert(*v, *i);
                }
            }
        }
    }
    out
}

/// The number of statements of `f` at every depth (the size the backends'
/// budgets count).
pub(crate) fn ir_size(f: &arrayad_ir::Function) -> usize {
    arrayad_ir::visit::stmt_count(&f.body)
}

/// A size as sizes are compared: a constant by its value (two `iconst`s
/// of the same number are the same size), anything else by SSA value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Size<V> {
    Const(i64),
    Val(V),
}

/// What an `i64` value is, from how it was computed, in the indices of the
/// points of a loop over `0..n` run `d` iterations at a time
/// (`arrayad_ir::passes::jam`; `d = 2` below, any literal `d >= 2` alike):
///
/// ```text
/// let pairs = n / 2; let paired = pairs * 2; let odd = n - paired
/// for rev pair < pairs do {
///   let twice = pair * 2; let j = twice + odd; let j1 = j + 1; .. }
/// for pair < pairs do {
///   let twice = pair * 2; let j = twice + 0; let j1 = twice + 1; .. }
/// for rev t < odd do { .. t .. }        for t < odd do { let j = paired + t; .. }
/// ```
///
/// Inside the loop `pairs >= 1`, so `n >= 2` and `odd` is `n mod 2`, 0 or
/// 1: `0 <= twice <= 2 pairs - 2 <= n - 2` and `0 <= j <= n - 2`, so that
/// `j` and `j + 1` are below `n` (`x + 0` has the fact of `x`); with `d`,
/// `j + c` for `c < d`. Inside a loop over `odd`, `odd >= 1`, so `0 <= t <
/// odd <= n` and `paired + t <= n - 1` ([`Lower::below_remainder`]). A
/// value defined inside the loop is used only inside it, where these hold
/// ([`Lower::known_in_bounds`]).
///
/// A comprehension of rows jammed two points at a time
/// (`arrayad_ir::passes::jam_builds`) runs over `pairs = n / 2 + odd`
/// pairs, the last of an odd `n` holding its last point twice:
///
/// ```text
/// let count = pairs + odd; let last = n - 1
/// build pair < count => {
///   let twice = pair * 2; let i0 = twice + 0; let next = twice + 1
///   let i1 = min(next, last); .. }
/// ```
///
/// Inside, `count >= 1`, so `n >= 1` and `0 <= twice <= 2 count - 2 <= n
/// - 1`; `next >= 1`, so `0 <= min(next, n - 1) <= n - 1`: both points
/// are below `n` ([`Halving::Below`]). The minimum is below `n` only when
/// its first operand is a point below `n` or its successor (which makes
/// `n >= 1` hold where it is used), never from `n - 1` alone, which is
/// negative when `n` is 0.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Halving<V> {
    /// `n / d`, for a literal `d >= 2`.
    Half(V, i64),
    /// `(n / d) * d`.
    Paired(V, i64),
    /// `n - (n / d) * d`.
    Odd(V, i64),
    /// `i * d`, `i` the index of a loop over `0..n / d`: `0 <= i * d <= n
    /// - d`.
    Twice(V, i64),
    /// `Twice(n, d) + Odd(n, d)`: `0 <= v <= n - d` too.
    Point(V, i64),
    /// `Half(n, 2) + Odd(n, 2)`: the number of pairs when the last may be
    /// a point twice.
    Pairs(V),
    /// `n - 1`.
    Last(V),
    /// A value `0 <= v <= n - 1`: `i * 2` of an index `i` below
    /// `Pairs(n)`, or `min(x, Last(n))` of such a value `x` or its
    /// successor, or `Twice(n, d) + c` or `Point(n, d) + c` for a literal
    /// `0 <= c < d` (the points of a loop run `d` iterations at a time,
    /// `arrayad_ir::passes::jam`).
    Below(V),
}

/// What is known at a point of the lowering, scoped by block: sizes checked
/// equal, and integer constants and differences computed in enclosing
/// scopes (reused so that equal sizes are the same SSA value, for bounds
/// checks, unless [`FAR`] statements old: a constant shared through a whole
/// function is live through all of it). Hash tables with an undo log, so a
/// lookup costs the same however much is known.
pub(crate) struct Known<V> {
    memo: std::collections::HashMap<Memo<V>, (V, u32)>,
    /// `(a, b)` and `(b, a)` for every `a == b` checked.
    equal: HashSet<(Size<V>, Size<V>)>,
    /// The `i64` constant of every memoised constant value.
    consts: std::collections::HashMap<V, i64>,
    /// The value of every size checked equal to a constant.
    checked_consts: std::collections::HashMap<V, i64>,
    /// For a size checked equal to an earlier one (`check_size a == b`:
    /// `a` to `b`'s representative), the value that stands for both.
    canon: std::collections::HashMap<V, V>,
    log: Vec<Undo<V>>,
}

enum Undo<V> {
    Memo(Memo<V>, Option<(V, u32)>),
    Equal(Size<V>, Size<V>),
    CheckedConst(V),
    Canon(V),
}

impl<V: Copy + Eq + std::hash::Hash> Known<V> {
    fn new() -> Self {
        Known {
            memo: Default::default(),
            equal: Default::default(),
            consts: Default::default(),
            checked_consts: Default::default(),
            canon: Default::default(),
            log: Vec::new(),
        }
    }

    /// The current state, to return to with [`Self::restore`].
    pub(crate) fn mark(&self) -> usize {
        self.log.len()
    }

    /// Forgets what was learnt since `mark`.
    pub(crate) fn restore(&mut self, mark: usize) {
        while self.log.len() > mark {
            match self.log.pop() {
                Some(Undo::Memo(k, Some(old))) => {
                    self.memo.insert(k, old);
                }
                Some(Undo::Memo(k, None)) => {
                    self.memo.remove(&k);
                }
                Some(Undo::Equal(a, b)) => {
                    self.equal.remove(&(a, b));
                    self.equal.remove(&(b, a));
                }
                Some(Undo::CheckedConst(v)) => {
                    self.checked_consts.remove(&v);
                }
                Some(Undo::Canon(v)) => {
                    self.canon.remove(&v);
                }
                None => break,
            }
        }
    }

    fn remember(&mut self, k: Memo<V>, v: V, at: u32) {
        let old = self.memo.insert(k, (v, at));
        self.log.push(Undo::Memo(k, old));
    }

    fn size(&self, v: V) -> Size<V> {
        match self.consts.get(&v) {
            Some(x) => Size::Const(*x),
            None => Size::Val(v),
        }
    }

    /// Records `a == b`; `b` (its representative) stands for `a` from
    /// here on ([`Self::canon`]).
    pub(crate) fn add_equal(&mut self, a: V, b: V) {
        let rep = self.canon(b);
        if rep != a && !self.canon.contains_key(&a) {
            self.canon.insert(a, rep);
            self.log.push(Undo::Canon(a));
        }
        let (a, b) = (self.size(a), self.size(b));
        if a != b && self.equal.insert((a, b)) {
            self.equal.insert((b, a));
            self.log.push(Undo::Equal(a, b));
        }
        if let (Size::Val(v), Size::Const(x)) | (Size::Const(x), Size::Val(v)) = (a, b) {
            if self.checked_consts.insert(v, x).is_none() {
                self.log.push(Undo::CheckedConst(v));
            }
        }
    }

    /// The value that stands for size `v` here: one checked equal to it
    /// earlier, else `v`. Bounds checks and offsets compare and multiply
    /// by it, so that arrays checked to have one shape (the tangents of
    /// the vector forward mode, one per lane) share their checks, which
    /// the backend then merges rather than branching on each.
    pub(crate) fn canon(&self, v: V) -> V {
        self.canon.get(&v).copied().unwrap_or(v)
    }

    /// The constant `v` is known to hold here: a literal, or a size
    /// checked equal to one.
    pub(crate) fn const_value(&self, v: V) -> Option<i64> {
        self.consts.get(&v).or_else(|| self.checked_consts.get(&v)).copied()
    }

    /// True when `a == b` is known.
    pub(crate) fn same(&self, a: V, b: V) -> bool {
        let (a, b) = (self.size(a), self.size(b));
        a == b || self.equal.contains(&(a, b))
    }
}

/// A memoised integer computation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Memo<V> {
    Const(i64),
    Sub(V, V),
}

impl<E: Emitter> Clone for Repr<E> {
    fn clone(&self) -> Self {
        match self {
            Repr::Fixed(v) => Repr::Fixed(v.clone()),
            Repr::Scalar(v) => Repr::Scalar(*v),
            Repr::Array { ptr, dims } => Repr::Array { ptr: *ptr, dims: dims.clone() },
            Repr::Slot(s, t) => Repr::Slot(*s, *t),
        }
    }
}

impl<E: Emitter> Lower<'_, E> {
    fn malformed(&self, msg: impl Into<String>) -> CodegenError {
        CodegenError::malformed(&self.f.name, msg)
    }

    fn var_ty(&self, v: VarId) -> Result<arrayad_ir::Type> {
        self.f.vars.get(v.index()).map(|i| i.ty).ok_or_else(|| self.malformed(format!("unknown variable %{}", v.0)))
    }

    fn var_name(&self, v: VarId) -> String {
        self.f.vars.get(v.index()).map(|i| i.name.clone()).unwrap_or_else(|| format!("%{}", v.0))
    }
    /// Loads a scalar of type `s` from slot `slot` of `slots` (a bool
    /// from 0/1), memory of kind `mem`.
    fn load_slot(&mut self, slots: E::Value, slot: i32, s: Scalar, mem: Mem) -> E::Value {
        match s {
            Scalar::Bool => {
                let v = self.b.load(Ty::I64, slots, slot * 8, mem);
                self.b.convert(Conv::I64ToBool, v)
            }
            s => self.b.load(Ty::of(s), slots, slot * 8, mem),
        }
    }

    /// Stores a scalar of type `s` into slot `slot` of `slots` (a bool as
    /// 0/1), memory of kind `mem`.
    fn store_slot(&mut self, slots: E::Value, slot: i32, s: Scalar, v: E::Value, mem: Mem) {
        match s {
            Scalar::Bool => {
                let w = self.b.convert(Conv::BoolToI64, v);
                self.b.store(Ty::I64, w, slots, slot * 8, mem);
            }
            s => self.b.store(Ty::of(s), v, slots, slot * 8, mem),
        }
    }

    /// Stores `atoms` into the 8-byte slots at `buf` (the internal calling
    /// convention: a scalar one slot, an array its pointer then its
    /// extents), memory of kind `mem`.
    fn pack(&mut self, buf: E::Value, atoms: &[Atom], mem: Mem) -> Result<()> {
        let mut slot = 0i32;
        for a in atoms {
            let elem = self.f.atom_ty(a).elem;
            match self.atom(a)? {
                Val::S(v) => {
                    self.store_slot(buf, slot, elem, v, mem);
                    slot += 1;
                }
                Val::A(arr) => {
                    self.b.store(Ty::Ptr, arr.ptr, buf, slot * 8, mem);
                    for (k, d) in arr.dims.iter().enumerate() {
                        self.b.store(Ty::I64, *d, buf, (slot + 1 + k as i32) * 8, mem);
                    }
                    slot += 1 + arr.dims.len() as i32;
                }
            }
        }
        Ok(())
    }

    /// Loads values of `types` from the 8-byte slots at `buf` ([`Self::pack`]'s
    /// layout), memory of kind `mem`.
    fn unpack(&mut self, buf: E::Value, types: &[arrayad_ir::Type], mem: Mem) -> Vec<Val<E::Value>> {
        let mut out = Vec::with_capacity(types.len());
        let mut slot = 0i32;
        for t in types {
            if t.is_scalar() {
                out.push(Val::S(self.load_slot(buf, slot, t.elem, mem)));
                slot += 1;
            } else {
                let ptr = self.b.load(Ty::Ptr, buf, slot * 8, mem);
                let dims = (0..t.rank as i32).map(|a| self.b.load_extent(buf, (slot + 1 + a) * 8, mem)).collect();
                slot += 1 + t.rank as i32;
                out.push(Val::A(Arr { ptr, dims }));
            }
        }
        out
    }

    /// Fresh emitter variables for a value of type `t`.
    fn fresh_repr(&mut self, t: arrayad_ir::Type) -> Repr<E> {
        if t.is_scalar() {
            Repr::Scalar(self.b.declare_var(Ty::of(t.elem)))
        } else {
            let ptr = self.b.declare_var(Ty::Ptr);
            let dims = (0..t.rank).map(|_| self.b.declare_var(Ty::I64)).collect();
            Repr::Array { ptr, dims }
        }
    }

    /// Gives the emitter variables of `r` back (its scope has ended).
    fn release_repr(&mut self, r: Repr<E>) {
        match r {
            Repr::Fixed(_) | Repr::Slot(..) => {}
            Repr::Scalar(v) => self.b.release_var(v),
            Repr::Array { ptr, dims } => {
                self.b.release_var(ptr);
                dims.into_iter().for_each(|d| self.b.release_var(d));
            }
        }
    }

    /// Ends the scope of IR variable `v` (a loop state after its loop, a
    /// mutable variable after its block): its emitter variables may be
    /// reused.
    pub(crate) fn release_ir_var(&mut self, v: VarId) {
        if let Some(slot) = self.vars.get_mut(v.index()) {
            if matches!(slot, Some(Repr::Scalar(_) | Repr::Array { .. })) {
                if let Some(r) = slot.take() {
                    self.release_repr(r);
                }
            }
        }
    }

    /// Ends the scope of the mutable variables bound at the top of the
    /// blocks nested in `kind` (after the statement is lowered).
    pub(crate) fn release_nested_scopes(&mut self, kind: &StmtKind) {
        for b in arrayad_ir::visit::child_blocks(kind) {
            for s in &b.stmts {
                if let StmtKind::Let { vars, .. } = &s.kind {
                    for v in vars {
                        if self.f.var(*v).mutable {
                            self.release_ir_var(*v);
                        }
                    }
                }
            }
        }
    }

    fn def_repr(&mut self, r: &Repr<E>, v: Val<E::Value>) -> Result<()> {
        match (r, v) {
            (Repr::Fixed(_), _) => return Err(self.malformed("a variable bound twice")),
            (Repr::Slot(s, t), Val::S(x)) => self.b.slot_store(*t, x, *s),
            (Repr::Scalar(var), Val::S(x)) => self.b.def_var(*var, x),
            (Repr::Array { ptr, dims }, Val::A(a)) if dims.len() == a.dims.len() => {
                self.b.def_var(*ptr, a.ptr);
                for (d, x) in dims.iter().zip(a.dims) {
                    self.b.def_var(*d, x);
                }
            }
            _ => return Err(self.malformed("a value of the wrong kind or rank")),
        }
        Ok(())
    }

    fn use_repr(&mut self, r: &Repr<E>) -> Val<E::Value> {
        match r {
            Repr::Fixed(v) => v.clone(),
            Repr::Slot(s, t) => Val::S(self.b.slot_load(*t, *s)),
            Repr::Scalar(v) => Val::S(self.b.use_var(*v)),
            Repr::Array { ptr, dims } => {
                let ptr = self.b.use_var(*ptr);
                let dims = dims.iter().map(|d| self.b.use_var(*d)).collect();
                Val::A(Arr { ptr, dims })
            }
        }
    }

    /// Binds (or, for mutable variables and loop states, rebinds) an IR variable.
    fn def(&mut self, v: VarId, val: Val<E::Value>) -> Result<()> {
        let t = self.var_ty(v)?;
        let r = match &self.vars[v.index()] {
            Some(r) => r.clone(),
            None if !self.f.var(v).mutable && !self.rebound.contains(&v) => {
                let repr = match val {
                    Val::S(x) if self.far.get(v.index()).copied().unwrap_or(false) => {
                        let ty = Ty::of(t.elem);
                        let s = self.b.slot();
                        self.b.slot_store(ty, x, s);
                        Repr::Slot(s, ty)
                    }
                    val => Repr::Fixed(val),
                };
                self.vars[v.index()] = Some(repr);
                return Ok(());
            }
            None => {
                let r = if t.is_scalar() && self.far.get(v.index()).copied().unwrap_or(false) {
                    Repr::Slot(self.b.slot(), Ty::of(t.elem))
                } else {
                    self.fresh_repr(t)
                };
                self.vars[v.index()] = Some(r.clone());
                r
            }
        };
        self.def_repr(&r, val)
    }

    /// The current value of an IR variable.
    fn use_ir_var(&mut self, v: VarId) -> Result<Val<E::Value>> {
        match self.vars.get(v.index()).cloned().flatten() {
            Some(r) => Ok(self.use_repr(&r)),
            None => Err(self.malformed(format!("`{}` (%{}) used before it is bound", self.var_name(v), v.0))),
        }
    }

    fn atom(&mut self, a: &Atom) -> Result<Val<E::Value>> {
        Ok(match a {
            Atom::Var(v) => self.use_ir_var(*v)?,
            Atom::F64(x) => Val::S(self.b.fconst(*x)),
            Atom::I64(x) => Val::S(self.memo_const(*x)),
            Atom::Bool(x) => Val::S(self.b.iconst(Ty::Bool, *x as i64)),
        })
    }

    /// The `i64` constant `x`, shared within the current scope (unless made
    /// [`FAR`] statements ago).
    pub(crate) fn memo_const(&mut self, x: i64) -> E::Value {
        let k = Memo::Const(x);
        match self.known.memo.get(&k) {
            Some(&(v, at)) if self.clock.saturating_sub(at) <= FAR => v,
            _ => {
                let v = self.b.iconst(Ty::I64, x);
                self.known.consts.insert(v, x);
                self.known.remember(k, v, self.clock);
                v
            }
        }
    }

    /// `a - b` (`i64`), shared within the current scope (unless made [`FAR`]
    /// statements ago).
    pub(crate) fn memo_sub(&mut self, a: E::Value, b: E::Value) -> E::Value {
        let k = Memo::Sub(a, b);
        match self.known.memo.get(&k) {
            Some(&(v, at)) if self.clock.saturating_sub(at) <= FAR => v,
            _ => {
                let v = self.b.int(IntOp::Sub, a, b);
                self.known.remember(k, v, self.clock);
                v
            }
        }
    }

    fn scalar(&mut self, a: &Atom) -> Result<E::Value> {
        match self.atom(a)? {
            Val::S(v) => Ok(v),
            Val::A(_) => Err(self.malformed("an array where a scalar is expected")),
        }
    }

    fn array(&mut self, v: VarId) -> Result<Arr<E::Value>> {
        match self.use_ir_var(v)? {
            Val::A(a) => Ok(a),
            Val::S(_) => Err(self.malformed(format!("`{}` is not an array", self.var_name(v)))),
        }
    }

    fn array_atom(&mut self, a: &Atom) -> Result<Arr<E::Value>> {
        match self.atom(a)? {
            Val::A(a) => Ok(a),
            Val::S(_) => Err(self.malformed("a scalar where an array is expected")),
        }
    }

    /// The `i64` constant `x` (not shared).
    fn iconst(&mut self, x: i64) -> E::Value {
        self.b.iconst(Ty::I64, x)
    }

    /// `a + k` for an `i64` `a`.
    fn add_imm(&mut self, a: E::Value, k: i64) -> E::Value {
        let c = self.iconst(k);
        self.b.int(IntOp::Add, a, c)
    }

    /// `a <cc> k` for an `i64` `a`.
    fn icmp_imm(&mut self, cc: IntCC, a: E::Value, k: i64) -> E::Value {
        let c = self.iconst(k);
        self.b.icmp(cc, a, c)
    }

    /// Emits, in the current block, the recording of `fault` (with up to
    /// three `i64` values) and the return of its kind.
    pub(super) fn raise(&mut self, fault: Fault<'_>, vals: &[E::Value]) -> Result<()> {
        let mut val = |i: usize| match vals.get(i) {
            Some(v) => *v,
            None => self.iconst(0),
        };
        let args = [val(0), val(1), val(2)];
        raise_at(self.b, self.ctx, self.file, self.loc, fault, args)
    }

    /// Checks that a row of extents `dims` has the extents `first` of row 0
    /// (IrregularArray otherwise; the message shows both shapes).
    fn check_regular(&mut self, row: E::Value, dims: &[E::Value], first: &[E::Value]) -> Result<()> {
        let mut ok: Option<E::Value> = None;
        for (d, f) in dims.iter().zip(first) {
            let eq = self.b.icmp(IntCC::Eq, *d, *f);
            ok = Some(match ok {
                None => eq,
                Some(o) => self.b.int(IntOp::And, o, eq),
            });
        }
        let Some(ok) = ok else { return Ok(()) };
        let cont = self.branch_to_cold(ok);
        let rank = dims.len();
        let shapes = self.b.stack_slot((16 * rank) as u32);
        for (k, v) in dims.iter().chain(first).enumerate() {
            self.b.store(Ty::I64, *v, shapes, (8 * k) as i32, Mem::Stack);
        }
        let a = shapes;
        let off = self.iconst((8 * rank) as i64);
        let b = self.b.ptr_offset(shapes, off);
        let fault = Fault::IrregularRows;
        let msg = self.b.message(&fault.located_template(self.file, self.loc))?;
        let k = self.b.iconst(Ty::I32, fault.kind().code() as i64);
        let r = self.iconst(rank as i64);
        let recorded = self.b.call(Callee::Runtime(RuntimeFn::FailShapes), &[self.ctx, k, msg, row, r, a, b])?;
        self.b.ret(recorded);
        self.b.switch_to(cont);
        Ok(())
    }

    /// Branches on `ok` (a truth value): to a new block, returned, when it
    /// holds, else to a cold block, where the emitter is left to emit the
    /// failure (which must end in a return).
    fn branch_to_cold(&mut self, ok: E::Value) -> E::Block {
        let cold = self.b.create_block();
        self.b.set_cold(cold);
        let cont = self.b.create_block();
        self.b.brif(ok, cont, cold);
        self.b.seal(cold);
        self.b.seal(cont);
        self.b.switch_to(cold);
        cont
    }

    /// Continues when `ok` (a truth value) holds; otherwise raises `fault`
    /// from a cold block.
    fn check(&mut self, ok: E::Value, fault: Fault<'_>, vals: &[E::Value]) -> Result<()> {
        let cont = self.branch_to_cold(ok);
        self.raise(fault, vals)?;
        self.b.switch_to(cont);
        Ok(())
    }

    /// A counted loop: `body(i)` for `i` from `start` up to `n - 1`, or from
    /// `n - 1` down to `start` when `reverse` (the loop is rotated: one test
    /// before it and one per iteration).
    fn counted_loop(
        &mut self,
        start: E::Value,
        n: E::Value,
        reverse: bool,
        body: &mut dyn FnMut(&mut Self, E::Value) -> Result<()>,
    ) -> Result<()> {
        self.counted_loop_within(start, n, n, reverse, body)
    }

    /// [`Self::counted_loop`] from `start` up to `n - 1`, where the caller
    /// knows `0 <= start` and `n <= bound`: the index has the facts of
    /// `0 <= i < bound`.
    fn counted_loop_within(
        &mut self,
        start: E::Value,
        n: E::Value,
        bound: E::Value,
        reverse: bool,
        body: &mut dyn FnMut(&mut Self, E::Value) -> Result<()>,
    ) -> Result<()> {
        // A loop up to an enclosing loop's index (`for c < r`: a row of a
        // triangle) is short for most of its runs.
        let short = self.in_bounds.iter().any(|(i, _)| *i == n);
        let ivar = self.b.declare_var(Ty::I64);
        let body_blk = self.b.create_block();
        let exit = self.b.create_block();
        let (first, enter) = if reverse {
            let first = self.add_imm(n, -1);
            (first, self.b.icmp(IntCC::Sge, first, start))
        } else {
            (start, self.b.icmp(IntCC::Slt, start, n))
        };
        self.b.def_var(ivar, first);
        self.b.brif(enter, body_blk, exit);
        self.b.switch_to(body_blk);
        let i = self.b.use_var(ivar);
        // Every caller starts at a non-negative value: 0 <= i < bound.
        self.in_bounds.push((i, bound));
        let memo = self.known.mark();
        let r = body(self, i);
        self.known.restore(memo);
        self.in_bounds.pop();
        r?;
        let (next, again) = if reverse {
            let next = self.add_imm(i, -1);
            (next, self.b.icmp(IntCC::Sge, next, start))
        } else {
            let next = self.add_imm(i, 1);
            (next, self.b.icmp(IntCC::Slt, next, n))
        };
        self.b.def_var(ivar, next);
        self.b.brif(again, body_blk, exit);
        if short {
            self.b.mark_short_loop();
        }
        // All predecessors of the loop header and the exit are known now:
        // sealing here keeps loop-invariant variables out of block params.
        self.b.seal(body_blk);
        self.b.seal(exit);
        self.b.switch_to(exit);
        self.b.release_var(ivar);
        Ok(())
    }

    /// Two-way branch on `cond`; each arm runs its closure; control joins after.
    fn if_else(
        &mut self,
        cond: E::Value,
        then_: &mut dyn FnMut(&mut Self) -> Result<()>,
        else_: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let t = self.b.create_block();
        let e = self.b.create_block();
        let join = self.b.create_block();
        self.b.brif(cond, t, e);
        self.b.seal(t);
        self.b.seal(e);
        // Values computed in one arm do not dominate the other or the join.
        let memo = self.known.mark();
        self.b.switch_to(t);
        then_(self)?;
        self.known.restore(memo);
        self.b.jump(join);
        self.b.switch_to(e);
        else_(self)?;
        self.known.restore(memo);
        self.b.jump(join);
        self.b.seal(join);
        self.b.switch_to(join);
        Ok(())
    }
}
