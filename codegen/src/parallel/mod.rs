//! Parallel maps, sums and extremes: a `for` comprehension at the top of a
//! function whose iterations are independent is split out into a chunk
//! function that
//! computes the rows of a range of iterations, and the function calls it
//! through the runtime (`arrayad_parallel_map` of the C runtime), which
//! runs the chunks on a pool of threads when the work pays for it and
//! calls the chunk function once, over all rows, otherwise.
//!
//! A comprehension is split out when
//! - it binds up to [`MAX_OUTPUTS`] arrays of `f64` or `i64` rows,
//!   numbers or arrays whose extents are the same in every iteration
//!   ([`rows_of`]: each iteration writes its own elements, so the rows,
//!   and everything computed from them, are the same bits for every
//!   number of threads): a value and its tangents (the jvp of a map), a
//!   forward pass's values and the residuals it stacks by index;
//! - its body has no effect outside itself: no tape entry (`Push`, `Pop`,
//!   `TapeMark`, `TapeRewind`), no accumulation (`AccAdd`, `AccZero`) but
//!   into accumulators it makes (`zeros`), no
//!   assignment of a variable bound outside it, and calls only of primal
//!   or jvp code (whose work is local to the call; the forward pass of a
//!   kept vjp leaves its residuals on the caller's tape);
//! - its rows, when they are arrays, are not carried out of a nested
//!   block (whose empty-loop extents `arrayad_ir::shape` reads from the
//!   comprehension itself); an array of numbers may be (rows of numbers
//!   have no extents: `gather`'s two comprehensions, one picked by a
//!   branch);
//! - and when only a `sum` reads each of its arrays (the lowering sums
//!   them without the arrays, `lower/sum.rs`): its body is heavy
//!   ([`HEAVY`]: a loop inside it), and its rows are summed after the map,
//!   in the one order of sums, the same bits as the fused loop; or its
//!   body is light, allocates nothing, and the comprehension and the sums
//!   stand at the top of the function: a parallel sum (of a value and its
//!   tangent, for a jvp), whose chunks sum whole blocks of [`SUM_BLOCK`]
//!   iterations ([`light_sums`]).
//!
//! A `maximum`, `minimum` or `sum` of an `f64` array at the top of a
//! function (of a stored array: not the sum of a comprehension, summed
//! without it) is split too, into a map over blocks of the array
//! ([`block_reduction`]).
//!
//! The chunk function of `let r = for i < n => body` (free variables
//! `v1..vk`) is `chunk(lo, hi, v1..vk) = for i < n => body` lowered in
//! chunk mode (`Lower::chunk_range`): its loop runs `i` over `lo..hi` only
//! and returns those `hi - lo` rows (of each array it binds), in the
//! destinations the runtime gives (the pool's threads write their rows in
//! place in the results). The
//! index keeps its facts (`0 <= i < n`, as the runtime calls it with
//! `0 <= lo <= hi <= n`), so the body's accesses are checked, or proven in
//! bounds, exactly as before. The function binds `r = call chunk(0, n,
//! v1..vk)`, which [`crate::Callees::parallel_map`] marks as a parallel
//! map: the call goes through the runtime. Run-time errors are those of
//! the comprehension, at its locations: a negative `n` fails in the chunk
//! function (the runtime runs it as written then); an error in an
//! iteration stops the map with the error of the lowest failing chunk,
//! whose lower iterations all ran, which is the first error in index
//! order.

mod shapes;

use crate::calls::Callees;
use crate::lower::first_write::FirstWrites;
use arrayad_ir::interp::ops::SUM_BLOCK;
use arrayad_ir::shape::StaticDim;
use arrayad_ir::visit::{block_binds, child_blocks, for_each_block, stmt_uses};
use arrayad_ir::{
    Atom, BinOp, Block, Expr, FuncId, Function, KeptKind, Loc, MathFn, ReduceOp, Scalar, Stmt, StmtKind, Type, UnOp,
    VarId,
};
use shapes::BuiltShapes;
use std::collections::{HashMap, HashSet};

/// The most comprehensions and loops split out of one function, and the
/// most reductions of arrays (each chunk function copies the function's
/// variable table: the pass stays linear). Apart, so that the sums of a
/// gradient's small arrays take no comprehension's place.
const MAX_MAPS: usize = 16;
const MAX_REDUCTIONS: usize = 8;

/// The weight of one statement in a loop nested in a comprehension's body
/// (its trip count is unknown here).
const LOOP_WEIGHT: u64 = 16;

/// The weight from which a comprehension whose rows only a `sum` reads
/// runs as a parallel map (its rows made, and summed after; a few hundred
/// rows keep the threads busy): a loop inside the body, or four calls of
/// the C library. Below it, the loop that sums without the array
/// (`lower/sum.rs`) is worth more, and it runs as a parallel sum of blocks
/// when it can ([`light_sums`]).
const HEAVY: u64 = 64;

/// The weight of a statement that calls a function of the C library
/// (`log`, `pow`, ...) or `exp` or `tanh` (inline), against 1 for an arithmetic
/// instruction.
const LIBM_WEIGHT: u64 = 16;

/// A block of [`SUM_BLOCK`] iterations of a parallel sum weighs the weight
/// of one iteration times `SUM_BLOCK / SUM_VECTOR_SPEEDUP`: its additions
/// and arithmetic run on vector lanes, several iterations per instruction,
/// so a parallel sum of plain arithmetic (a dot product) needs more
/// iterations than a map to pay for the threads.
const SUM_VECTOR_SPEEDUP: u64 = 16;

/// The most weight counted for one iteration.
const MAX_WEIGHT: u64 = 1 << 24;

/// The most axes of an array row of a parallel map (the runtime's layout
/// of a map's arrays has room for as many extents per array).
const MAX_ROW_RANK: usize = arrayad_runtime::PMAP_LAYOUT_WORDS - 2;

/// The most arrays one parallel map binds: a pointer and a count each,
/// then the extents of a row, in the runtime's result slots
/// ([`arrayad_runtime::PMAP_RESULT_SLOTS`]).
const MAX_OUTPUTS: usize = arrayad_runtime::PMAP_MAX_OUTPUTS;

/// How a call of a chunk function runs ([`crate::Callees::parallel_map`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParallelMap {
    /// Per array the map binds, the extents of its rows (none for rows of
    /// numbers), the same for every row (`arrayad_ir::shape::static_row_dims`),
    /// in terms of the function's variables at the call: the caller
    /// evaluates them for the runtime, which allocates the rows, and for
    /// the arrays' extents, since the runtime returns only the rows'
    /// pointer and count. Empty for a loop of effects, which binds none.
    pub rows: Vec<Vec<StaticDim>>,
    /// The statements of one row (an iteration, or a block of
    /// [`SUM_BLOCK`] iterations), loops nested in it counted
    /// [`LOOP_WEIGHT`] times per level: the runtime runs the map on the
    /// pool when the rows times this reach its grain.
    pub weight: i64,
    /// The rows are the block sums of a summed comprehension (a parallel
    /// sum): row `b` is the sum of iterations `b * SUM_BLOCK ..`, and the
    /// call's count is that of the iterations.
    pub blocks: bool,
    /// Of a loop of effects: bit `k` set when argument `k` of
    /// the call is an accumulator that the loop writes first
    /// (`lower::first_write`): the caller allocates it without
    /// zero-filling, and the chunk function stores its first add into
    /// each element.
    pub first_writes: u64,
}

impl ParallelMap {
    /// A map of `outputs` arrays of numbers (0: a loop of effects, which
    /// binds none).
    fn numbers(outputs: usize, weight: i64, blocks: bool, first_writes: u64) -> ParallelMap {
        ParallelMap { rows: vec![Vec::new(); outputs], weight, blocks, first_writes }
    }

    /// True when argument `k` of the call is an accumulator that the loop
    /// of effects writes first ([`ParallelMap::first_writes`]).
    pub(crate) fn writes_first(&self, k: usize) -> bool {
        k < 64 && self.first_writes >> k & 1 == 1
    }
}

/// The name of the definition a function comes from: without the
/// `.parK` of a chunk function (messages name the definition).
pub(crate) fn source_name(name: &str) -> &str {
    match name.rsplit_once(".par") {
        Some((host, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => name,
    }
}

/// A chunk function split out of a function.
pub(crate) struct Chunk {
    /// The id its caller's call names (not an id of the program: ids from
    /// `u32::MAX` down).
    pub id: FuncId,
    /// The chunk function, named `HOST.parK`.
    pub func: Function,
    /// How its call runs.
    pub map: ParallelMap,
    /// The index of the function it comes from in [`split`]'s list.
    pub host: usize,
}

/// Splits the comprehensions of `funcs` that can run in parallel out into
/// chunk functions (module docs): the functions, each rewritten to call its
/// chunks or unchanged (`None`), and the chunks. Linear in the size of the
/// functions.
pub(crate) fn split(funcs: &[&Function], callees: &Callees) -> (Vec<Option<Function>>, Vec<Chunk>) {
    let mut chunks = Vec::new();
    let mut out = Vec::with_capacity(funcs.len());
    for (h, f) in funcs.iter().enumerate() {
        out.push(split_function(f, h, callees, &mut chunks));
    }
    (out, chunks)
}

fn split_function(f: &Function, h: usize, callees: &Callees, chunks: &mut Vec<Chunk>) -> Option<Function> {
    if f.is_straight_line_scalar() {
        return None;
    }
    let counts = arrayad_ir::visit::use_counts(&f.body, f.vars.len());
    let (summed, carried) = summed_and_carried(f, &counts);
    let sums = light_sums(f, &counts);
    let built = arrayad_ir::visit::comprehension_results(&f.body);
    let mut host: Option<Function> = None;
    // The statements replaced by several, by index: the sums of parallel
    // sums (by the loop that adds the block sums), parallel maxima,
    // minima and sums of arrays.
    let mut replaced: HashMap<usize, Vec<Stmt>> = HashMap::new();
    let (mut made, mut reductions) = (0, 0);
    // The extents bound at the top (`let n = dim x 0`), the sizes computed
    // from them and from the other `i64` values of the top level by `+ - *`
    // and division by a literal (the pairs of a jammed comprehension, `n /
    // 2`: `arrayad_ir::passes::jam_builds`), and the checks of their
    // equalities, so far: a chunk function binds them again from its
    // arrays and those values (and checks again), so that its lowering
    // knows what the function's knows of them (bounds checks proven as
    // before, the points of pairs known in bounds). Each maps to the
    // arrays and values it is computed from (an `i64` value of the top
    // level that is not such a size, a count picked by a branch, to
    // itself).
    let mut extents: HashMap<VarId, Vec<VarId>> = HashMap::new();
    let top_level_size = |v: VarId| f.ty(v) == Type::I64 && !f.var(v).mutable;
    for p in f.params.iter().filter(|p| top_level_size(**p)) {
        extents.insert(*p, vec![*p]);
    }
    let mut facts: Vec<&Stmt> = Vec::new();
    // The extents of the arrays built so far, which a chunk function
    // reading them checks once and then knows (`shapes`).
    let mut shapes = BuiltShapes::default();
    // The location errors of a statement at 0:0 report: the last one
    // before it (as `Lower::stmts` keeps it).
    let mut at = f.loc;
    // The accumulators of `f` and those its loops write first (made when
    // a loop of effects is met).
    let mut accumulators: Option<Accumulators> = None;
    let mut first_writes: Option<FirstWrites> = None;
    for (k, s) in f.body.stmts.iter().enumerate() {
        shapes.record(f, callees.program(), s);
        let before = at;
        if s.loc.line != 0 {
            at = s.loc;
        }
        match &s.kind {
            StmtKind::Let { vars, expr: Expr::Dim { array, .. } } => {
                if let ([v], false) = (vars.as_slice(), f.var(*array).mutable) {
                    extents.insert(*v, vec![*array]);
                    facts.push(s);
                }
            }
            StmtKind::Let { vars, expr } => {
                let sources = match expr {
                    Expr::Binary(op, a, b) => derived_size(f, vars, *op, a, b, &extents),
                    Expr::If { cond, then_branch, else_branch } => {
                        picked_size(f, vars, cond, then_branch, else_branch, &extents)
                    }
                    _ => None,
                };
                match (sources, vars.as_slice()) {
                    (Some(sources), [v]) => {
                        extents.insert(*v, sources);
                        facts.push(s);
                    }
                    (None, [v]) if top_level_size(*v) => {
                        extents.insert(*v, vec![*v]);
                    }
                    _ => {}
                }
            }
            StmtKind::CheckSize { a, b, .. } => {
                let fixed = |x: &Atom| x.as_var().is_none_or(|v| !f.var(v).mutable);
                if fixed(a) && fixed(b) {
                    facts.push(s);
                }
            }
            _ => {}
        }
        if made == MAX_MAPS && reductions == MAX_REDUCTIONS {
            break;
        }
        if let StmtKind::Let { vars, expr: Expr::Reduce { op, array } } = &s.kind {
            if reductions == MAX_REDUCTIONS {
                continue;
            }
            let t = f.ty(*array);
            let ([m], false, Scalar::F64, 1) = (vars.as_slice(), f.var(*array).mutable, t.elem, t.rank) else {
                continue;
            };
            // A sum of a comprehension is summed without its array
            // (below, and `lower/sum.rs`).
            if *op == ReduceOp::Sum && summed.contains(array) && built.contains(array) {
                continue;
            }
            let host = host.get_or_insert_with(|| f.clone());
            let id = FuncId(u32::MAX - u32::try_from(chunks.len()).ok()?);
            let (stmts, mut func) = block_reduction(host, *op, *array, *m, s.loc, id, chunks.len());
            func.loc = before;
            replaced.insert(k, stmts);
            // A block of a sum is vectorised additions (as a block of a
            // parallel sum); of an extreme, compares and branches.
            let weight = match op {
                ReduceOp::Sum => SUM_BLOCK as u64 / SUM_VECTOR_SPEEDUP,
                ReduceOp::Max | ReduceOp::Min => SUM_BLOCK as u64,
            };
            let map = ParallelMap::numbers(1, weight as i64, false, 0);
            chunks.push(Chunk { id, func, map, host: h });
            reductions += 1;
            continue;
        }
        if made == MAX_MAPS {
            continue;
        }
        if let StmtKind::For { n, index, body, .. } = &s.kind {
            let accumulators = accumulators.get_or_insert_with(|| Accumulators::of(f));
            if !accumulators.effect_loop(f, *index, body, callees) {
                continue;
            }
            let w = weight(body);
            let id = FuncId(u32::MAX - u32::try_from(chunks.len()).ok()?);
            let free = free_vars(s, *index, body, &extents);
            // The accumulators the loop writes first, as the function
            // would lower it (arguments from 2 on are `free`).
            let writes = first_writes.get_or_insert_with(|| FirstWrites::new(f, callees));
            let first_writes = writes.written_in(body).iter().fold(0u64, |bits, w| {
                let arg = free.iter().position(|v| *v == w.acc).map(|k| k + 2);
                arg.filter(|k| *k < 64).map_or(bits, |k| bits | 1 << k)
            });
            let weight = i64::try_from(w).unwrap_or(i64::MAX);
            let map = ParallelMap::numbers(0, weight, false, first_writes);
            let (func, call) = split_out(f, s, *n, &[], &free, &facts, &shapes, id, chunks.len(), before);
            host.get_or_insert_with(|| f.clone()).body.stmts[k] = call;
            chunks.push(Chunk { id, func, map, host: h });
            made += 1;
            continue;
        }
        let StmtKind::Let { vars, expr: Expr::Build { n, index, body } } = &s.kind else { continue };
        if vars.is_empty() || vars.len() > MAX_OUTPUTS {
            continue;
        }
        let w = weight(body);
        // The lowering sums without the arrays when a sum reads each of
        // them, and nothing else, and they are few enough (each sum keeps
        // eight partial sums in one loop).
        let summed_light =
            vars.len() <= crate::lower::MAX_FUSED_SUMS && vars.iter().all(|r| summed.contains(r)) && w < HEAVY;
        // A parallel sum runs its body in the loop that sums, which keeps
        // no arena mark: only bodies that allocate nothing (as a fused sum).
        let sum: Option<Vec<(usize, VarId)>> = vars
            .iter()
            .map(|r| sums.get(r).copied())
            .collect::<Option<Vec<_>>>()
            .filter(|_| summed_light && !crate::lower::allocates(body));
        let map = match rows_of(f, *index, body, callees) {
            Some(mut map)
                if (!summed_light || sum.is_some())
                    && !vars.iter().any(|r| carried.contains(r))
                    && effect_free(body, callees) =>
            {
                let row = if sum.is_some() { w.saturating_mul(SUM_BLOCK as u64 / SUM_VECTOR_SPEEDUP) } else { w };
                map.weight = i64::try_from(row).unwrap_or(i64::MAX);
                map.blocks = sum.is_some();
                map
            }
            _ => continue,
        };
        let id = FuncId(u32::MAX - u32::try_from(chunks.len()).ok()?);
        let free = free_vars(s, *index, body, &extents);
        let (func, call) = split_out(f, s, *n, vars, &free, &facts, &shapes, id, chunks.len(), before);
        let host = host.get_or_insert_with(|| f.clone());
        host.body.stmts[k] = call;
        for (r, (j, total)) in vars.iter().zip(sum.into_iter().flatten()) {
            let add = add_block_sums(host, *r, total, f.body.stmts[j].loc);
            replaced.insert(j, add);
        }
        chunks.push(Chunk { id, func, map, host: h });
        made += 1;
    }
    if let Some(host) = host.as_mut().filter(|_| !replaced.is_empty()) {
        let stmts = std::mem::take(&mut host.body.stmts);
        host.body.stmts =
            stmts.into_iter().enumerate().flat_map(|(j, s)| replaced.remove(&j).unwrap_or_else(|| vec![s])).collect();
    }
    host
}

/// The light comprehensions of `f`'s top level that only a `sum` at its
/// top level reads (`y = for i < n => e` of `f64` results, then `s =
/// sum(y)`, `y` used nowhere else, `s` immutable; each of the arrays of a
/// value and its tangent likewise): each `y` maps to the index of the
/// sum's statement and `s`. Such a comprehension runs as a parallel
/// sum: its chunk function computes the sums of blocks of [`SUM_BLOCK`]
/// iterations (`Lower::chunk_range` in block mode), which the function
/// adds left to right ([`add_block_sums`]): the order of `sum`
/// (`arrayad_ir::interp::ops::sum_f64`), whatever the number of threads.
fn light_sums(f: &Function, counts: &[u32]) -> HashMap<VarId, (usize, VarId)> {
    let mut out = HashMap::new();
    for (j, s) in f.body.stmts.iter().enumerate() {
        if let StmtKind::Let { vars, expr: Expr::Reduce { op: ReduceOp::Sum, array } } = &s.kind {
            if let [total] = vars.as_slice() {
                let ty = f.ty(*array);
                if counts[array.index()] == 1 && ty.elem == Scalar::F64 && !f.var(*total).mutable {
                    out.insert(*array, (j, *total));
                }
            }
        }
    }
    // Only comprehensions bound at the top level, before their sums.
    let mut built = HashSet::new();
    for (k, s) in f.body.stmts.iter().enumerate() {
        if let StmtKind::Let { vars, expr: Expr::Build { .. } } = &s.kind {
            for y in vars {
                if out.get(y).is_some_and(|(j, _)| *j > k) {
                    built.insert(*y);
                }
            }
        }
    }
    out.retain(|y, _| built.contains(y));
    out
}

/// A parallel `m = maximum(x)`, `minimum(x)` or `sum(x)` of `f` (`x` an
/// array of `f64`): the statements that replace it, and the chunk function
/// (id `id`, the `k`th).
///
/// The reduction of blocks of [`SUM_BLOCK`] elements is a map over the
/// blocks, and `m` the reduction of theirs. That is the same value, bit
/// for bit:
/// - `maximum` is NaN when any element is, else the first largest element
///   (`arrayad_ir::interp::ops::max_f64`), and the first largest of the
///   blocks' first largest is the first largest (`minimum` likewise);
/// - `sum` is the left-to-right sum of the sums of its blocks of
///   [`SUM_BLOCK`] elements (`arrayad_ir::interp::ops::sum_f64`), and the
///   sum of a slice of one block is that block's sum ([`add_block_sums`]).
///
/// The function binds `n = dim x 0` and, when `n > SUM_BLOCK` (below,
/// one block: the reduction as written), `blocks = (n + SUM_BLOCK - 1) /
/// SUM_BLOCK`, calls the chunk `chunk(lo, hi, x, blocks) = for b < blocks
/// => reduce(x[b * SUM_BLOCK : min(b * SUM_BLOCK + SUM_BLOCK, n)])`, and
/// reduces its rows.
fn block_reduction(
    f: &mut Function,
    op: ReduceOp,
    x: VarId,
    m: VarId,
    loc: Loc,
    id: FuncId,
    k: usize,
) -> (Vec<Stmt>, Function) {
    let i64_ty = Type::scalar(Scalar::I64);
    let f64_ty = Type::scalar(Scalar::F64);
    let rows_ty = f.ty(x);
    let let1 = |v: VarId, expr: Expr| let1(v, expr, loc);
    let block = Atom::I64(SUM_BLOCK as i64);
    let (n, up, blocks) = (f.new_var("n", i64_ty), f.new_var("n", i64_ty), f.new_var("blocks", i64_ty));
    let big = f.new_var("big", Type::scalar(Scalar::Bool));
    let (rows, whole, parts) =
        (f.new_var(op.name(), f64_ty), f.new_var(op.name(), f64_ty), f.new_var("parts", rows_ty));
    // The chunk function's statement, with variables of `f` (its table is
    // `f`'s copied).
    let (b, lo, end, hi) =
        (f.new_var("b", i64_ty), f.new_var("lo", i64_ty), f.new_var("end", i64_ty), f.new_var("hi", i64_ty));
    let (part, reduced) = (f.new_var(f.var(x).name.clone(), rows_ty), f.new_var(op.name(), f64_ty));
    let body = Block {
        stmts: vec![
            let1(lo, Expr::Binary(BinOp::Mul, Atom::Var(b), block)),
            let1(end, Expr::Binary(BinOp::Add, Atom::Var(lo), block)),
            let1(hi, Expr::Binary(BinOp::Min, Atom::Var(end), Atom::Var(n))),
            let1(part, Expr::Slice { array: x, lo: Atom::Var(lo), hi: Atom::Var(hi) }),
            let1(reduced, Expr::Reduce { op, array: part }),
        ],
        results: vec![Atom::Var(reduced)],
    };
    let map = let1(parts, Expr::Build { n: Atom::Var(blocks), index: b, body });
    let count = let1(n, Expr::Dim { array: x, axis: 0 });
    let chunk = chunk_function(f, &[&count], &map, &[parts], &[x, blocks], k);
    let mut by_blocks = vec![
        let1(up, Expr::Binary(BinOp::Add, Atom::Var(n), Atom::I64(SUM_BLOCK as i64 - 1))),
        let1(blocks, Expr::Binary(BinOp::Div, Atom::Var(up), block)),
        let1(
            parts,
            Expr::Call { func: id, args: vec![Atom::I64(0), Atom::Var(blocks), Atom::Var(x), Atom::Var(blocks)] },
        ),
    ];
    match op {
        ReduceOp::Sum => by_blocks.extend(add_block_sums(f, parts, rows, loc)),
        _ => by_blocks.push(let1(rows, Expr::Reduce { op, array: parts })),
    }
    let then_branch = Block { stmts: by_blocks, results: vec![Atom::Var(rows)] };
    let else_branch =
        Block { stmts: vec![let1(whole, Expr::Reduce { op, array: x })], results: vec![Atom::Var(whole)] };
    let stmts = vec![
        count,
        let1(big, Expr::Binary(BinOp::Gt, Atom::Var(n), block)),
        let1(m, Expr::If { cond: Atom::Var(big), then_branch, else_branch }),
    ];
    (stmts, chunk)
}

/// `total = ((0.0 + sums[0]) + sums[1]) + ...`: the sum of the block sums
/// `sums` (bound by a parallel sum), left to right, as statements of `f`
/// (the count of blocks, and a loop).
/// Block sums are never `-0.0`, so starting from `0.0` changes no bits,
/// and an empty sum (no block) is `0.0`.
fn add_block_sums(f: &mut Function, sums: VarId, total: VarId, loc: Loc) -> Vec<Stmt> {
    let f64_ty = Type::scalar(Scalar::F64);
    let i64_ty = Type::scalar(Scalar::I64);
    let (blocks, b) = (f.new_var("blocks", i64_ty), f.new_var("b", i64_ty));
    let (acc, x, next) = (f.new_var("acc", f64_ty), f.new_var("block_sum", f64_ty), f.new_var("acc", f64_ty));
    let body = Block {
        stmts: vec![
            let1(x, Expr::Index { array: sums, indices: vec![Atom::Var(b)] }, loc),
            let1(next, Expr::Binary(BinOp::Add, Atom::Var(acc), Atom::Var(x)), loc),
        ],
        results: vec![Atom::Var(next)],
    };
    let count = let1(blocks, Expr::Dim { array: sums, axis: 0 }, loc);
    let init = vec![Atom::F64(0.0)];
    let fold = let1(total, Expr::Loop { n: Atom::Var(blocks), index: b, states: vec![acc], init, body }, loc);
    vec![count, fold]
}

/// `let v = expr` at `loc`.
fn let1(v: VarId, expr: Expr, loc: Loc) -> Stmt {
    Stmt { kind: StmtKind::Let { vars: vec![v], expr }, loc }
}

/// The rows of a comprehension `build index < n => body` as a map of
/// weight 0: up to [`MAX_OUTPUTS`] arrays of `f64` or `i64` rows, each of
/// numbers or of arrays whose extents are the same in every iteration
/// (`arrayad_ir::shape::static_row_dims`), of at most [`MAX_ROW_RANK`]
/// axes, within the runtime's result slots. A chunk allocates such rows
/// before its first iteration, in the runtime's destination
/// (`Lower::build`).
fn rows_of(f: &Function, index: VarId, body: &Block, callees: &Callees) -> Option<ParallelMap> {
    if body.results.is_empty() || body.results.len() > MAX_OUTPUTS {
        return None;
    }
    let mut rows = Vec::with_capacity(body.results.len());
    let mut slots = 0;
    for (k, r) in body.results.iter().enumerate() {
        let t = f.atom_ty(r);
        if !matches!(t.elem, Scalar::F64 | Scalar::I64) || usize::from(t.rank) > MAX_ROW_RANK {
            return None;
        }
        let dims = if t.is_scalar() {
            Vec::new()
        } else {
            arrayad_ir::shape::static_row_dims(f, callees.program(), index, body, k)?
        };
        if dims.len() != usize::from(t.rank) {
            return None;
        }
        // The pointer, the count, the extents of a row.
        slots += 2 + dims.len();
        rows.push(dims);
    }
    if slots > arrayad_runtime::PMAP_RESULT_SLOTS {
        return None;
    }
    Some(ParallelMap { rows, weight: 0, blocks: false, first_writes: 0 })
}

/// The arrays of `f` that only a `sum` reads (`counts`: the uses of each
/// variable), which the lowering sums without the array when a
/// comprehension makes them (`lower/sum.rs`), and the variables that a
/// nested block yields.
fn summed_and_carried(f: &Function, counts: &[u32]) -> (HashSet<VarId>, HashSet<VarId>) {
    let (mut summed, mut carried) = (HashSet::new(), HashSet::new());
    for_each_block(&f.body, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::Let { expr: Expr::Reduce { op: ReduceOp::Sum, array }, .. } = &s.kind {
                if counts.get(array.index()) == Some(&1) {
                    summed.insert(*array);
                }
            }
            for c in child_blocks(&s.kind) {
                carried.extend(c.results.iter().filter_map(Atom::as_var).filter(|v| f.ty(*v).rank > 1));
            }
        }
    });
    (summed, carried)
}

/// True when the iterations of a comprehension whose body is `body` have
/// no effect outside themselves (module docs): additions into
/// accumulators that the body makes itself (`zeros`, `zeros_like`: the
/// cotangents of a vjp run per iteration) are its own; into anything
/// else, a view of an outer accumulator included, they are not.
fn effect_free(body: &Block, callees: &Callees) -> bool {
    let mut bound = HashSet::new();
    block_binds(body, &mut |v| {
        bound.insert(v);
    });
    let mut own = HashSet::new();
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::Let { vars, expr: Expr::Zeros(_) | Expr::ZerosLike(_) } = &s.kind {
                own.extend(vars.iter().copied());
            }
        }
    });
    let mut ok = true;
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            ok &= match &s.kind {
                StmtKind::Push(_) | StmtKind::TapeRewind(_) => false,
                StmtKind::AccAdd { acc, .. } | StmtKind::AccZero { acc, .. } => own.contains(acc),
                StmtKind::Assign { var, .. } => bound.contains(var),
                StmtKind::Let { expr: Expr::Pop | Expr::TapeMark, .. } => false,
                StmtKind::Let { expr: Expr::Call { func, .. }, .. } => local_call(*func, callees),
                _ => true,
            };
        }
    });
    ok
}

/// True for a call of primal or jvp code of a definition.
fn local_call(func: FuncId, callees: &Callees) -> bool {
    let Some(p) = callees.program() else { return false };
    matches!(KeptKind::of_callee(p.funcs.len(), func), Some((_, KeptKind::Primal | KeptKind::Jvp)))
}

/// The statements of one iteration of `body`, a function of the C
/// library (`log`, `pow`, ...: `arrayad_ir::MathFn`) or `exp` and `tanh`
/// (inline, about a call's cost on Cranelift, `lower/inline_math.rs`) counted
/// [`LIBM_WEIGHT`] times, nested loops
/// [`LOOP_WEIGHT`] times per level.
fn weight(body: &Block) -> u64 {
    body.stmts.iter().fold(0u64, |w, s| {
        let nested: u64 = child_blocks(&s.kind).map(weight).fold(0, u64::saturating_add);
        let looped = matches!(
            &s.kind,
            StmtKind::For { .. }
                | StmtKind::Let { expr: Expr::Build { .. } | Expr::Loop { .. } | Expr::While { .. }, .. }
        );
        let nested = if looped { nested.saturating_mul(LOOP_WEIGHT) } else { nested };
        let own = match &s.kind {
            StmtKind::Let { expr: Expr::Unary(op, _), .. }
                if matches!(op, UnOp::Exp | UnOp::Tanh) || MathFn::of_unary(*op).is_some() =>
            {
                LIBM_WEIGHT
            }
            StmtKind::Let { expr: Expr::Binary(op, ..), .. } if MathFn::of_binary(*op).is_some() => LIBM_WEIGHT,
            _ => 1,
        };
        w.saturating_add(own).saturating_add(nested).min(MAX_WEIGHT)
    })
}

/// The variables the comprehension statement `s` uses and does not bind,
/// in order of first use, except the extents of `extents` (bound by `dim`
/// of an array, or computed from such extents and other `i64` values,
/// which [`extent_facts`] binds again): their arrays and values instead.
fn free_vars(s: &Stmt, index: VarId, body: &Block, extents: &HashMap<VarId, Vec<VarId>>) -> Vec<VarId> {
    let mut bound = HashSet::from([index]);
    block_binds(body, &mut |v| {
        bound.insert(v);
    });
    let mut seen = HashSet::new();
    let mut used = Vec::new();
    stmt_uses(&s.kind, &mut |v| {
        if !bound.contains(&v) && seen.insert(v) {
            used.push(v);
        }
    });
    let (mut free, mut passed) = (Vec::new(), HashSet::new());
    for v in used {
        for v in extents.get(&v).map_or(std::slice::from_ref(&v), Vec::as_slice) {
            if passed.insert(*v) {
                free.push(*v);
            }
        }
    }
    free
}

/// The arrays and values the size `vars = a op b` is computed from, when
/// it is an `i64` sum, difference or product of literals and sizes of
/// `extents`, or one divided by a literal other than 0 and -1 (which a
/// chunk function computes again, without error, as the function did).
fn derived_size(
    f: &Function,
    vars: &[VarId],
    op: BinOp,
    a: &Atom,
    b: &Atom,
    extents: &HashMap<VarId, Vec<VarId>>,
) -> Option<Vec<VarId>> {
    let [v] = vars else { return None };
    let divisor = matches!((op, b), (BinOp::Div, Atom::I64(d)) if *d != 0 && *d != -1);
    if f.var(*v).mutable || f.ty(*v) != Type::I64 || !(matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul) || divisor) {
        return None;
    }
    let mut arrays = Vec::new();
    for x in [a, b] {
        size_sources(x, extents, &mut arrays)?;
    }
    Some(arrays)
}

/// Adds to `sources` the arrays and values the size `x` is computed from
/// (none for a literal): `None` when `x` is no size of `extents`.
fn size_sources(x: &Atom, extents: &HashMap<VarId, Vec<VarId>>, sources: &mut Vec<VarId>) -> Option<()> {
    match x {
        Atom::I64(_) => {}
        Atom::Var(u) => {
            for w in extents.get(u)? {
                if !sources.contains(w) {
                    sources.push(*w);
                }
            }
        }
        _ => return None,
    }
    Some(())
}

/// The arrays and values the size `vars = if cond then a else b` is
/// computed from, when it is an `i64` picked by an immutable condition
/// between literals and sizes of `extents` (the count of points of a
/// comprehension that `arrayad_ir::passes::gather` picks by a branch: `n`
/// or 0), which a chunk function computes again: the condition's lowering
/// then knows that a loop over `0..count` that runs at all runs over
/// `0..n` (`Lower::zero_or`).
fn picked_size(
    f: &Function,
    vars: &[VarId],
    cond: &Atom,
    then_branch: &Block,
    else_branch: &Block,
    extents: &HashMap<VarId, Vec<VarId>>,
) -> Option<Vec<VarId>> {
    let [v] = vars else { return None };
    if f.var(*v).mutable || f.ty(*v) != Type::I64 || !then_branch.stmts.is_empty() || !else_branch.stmts.is_empty() {
        return None;
    }
    let mut sources = Vec::new();
    match cond {
        Atom::Bool(_) => {}
        Atom::Var(c) if !f.var(*c).mutable => sources.push(*c),
        _ => return None,
    }
    for r in then_branch.results.iter().chain(&else_branch.results) {
        size_sources(r, extents, &mut sources)?;
    }
    Some(sources)
}

/// Of `facts` (the extents bound at the top of a function, the sizes
/// computed from them and the checks of their equalities, in order), those
/// a chunk function with the free variables `free` binds again: the
/// extents of its arrays, the sizes computed from those, and the checks
/// between them (or constants).
fn extent_facts<'a>(facts: &[&'a Stmt], free: &[VarId]) -> Vec<&'a Stmt> {
    let free: HashSet<VarId> = free.iter().copied().collect();
    let mut bound = HashSet::new();
    let mut out = Vec::new();
    for s in facts {
        let known = |x: &Atom| x.as_var().is_none_or(|v| bound.contains(&v) || free.contains(&v));
        let keep = match &s.kind {
            StmtKind::Let { vars, expr: Expr::Dim { array, .. } } if free.contains(array) => {
                bound.extend(vars.iter().copied());
                true
            }
            StmtKind::Let { vars, expr: Expr::Binary(_, a, b) } if known(a) && known(b) => {
                bound.extend(vars.iter().copied());
                true
            }
            StmtKind::Let { vars, expr: Expr::If { cond, then_branch, else_branch } }
                if known(cond) && then_branch.results.iter().chain(&else_branch.results).all(known) =>
            {
                bound.extend(vars.iter().copied());
                true
            }
            StmtKind::CheckSize { a, b, .. } => {
                [a, b].iter().all(|x| x.as_var().is_none_or(|v| bound.contains(&v) || free.contains(&v)))
            }
            _ => false,
        };
        if keep {
            out.push(*s);
        }
    }
    out
}

/// The chunk function `id` (the `k`th) of the comprehension `s` of `f` over
/// `n` iterations, binding `results`, or of the loop of effects `s`
/// (`results` is empty), whose free variables are `free` (`facts`: the
/// extents and checks of `f`'s top level so far, and the extents of the
/// arrays it built), and the statement that calls it in place of `s`.
/// Errors of the chunk function before its loop report `at`.
#[allow(clippy::too_many_arguments)]
fn split_out(
    f: &Function,
    s: &Stmt,
    n: Atom,
    results: &[VarId],
    free: &[VarId],
    facts: &[&Stmt],
    shapes: &BuiltShapes,
    id: FuncId,
    k: usize,
    at: Loc,
) -> (Function, Stmt) {
    let rebound = extent_facts(facts, free);
    let mut func = chunk_function(f, &rebound, s, results, free, k);
    shapes.check_extents(&mut func, free, &rebound);
    func.loc = at;
    let mut args = vec![Atom::I64(0), n];
    args.extend(free.iter().map(|v| Atom::Var(*v)));
    let vars = results.to_vec();
    (func, Stmt { kind: StmtKind::Let { vars, expr: Expr::Call { func: id, args } }, loc: s.loc })
}

/// The chunk function of the comprehension `s` of `f`, binding `rs`, or
/// of the loop of effects `s` (`rs` is empty): params `lo`, `hi` and the
/// free variables `free` (read-only there), the extents `rebound`, the
/// statement, and `rs` (nothing for a loop).
fn chunk_function(f: &Function, rebound: &[&Stmt], s: &Stmt, rs: &[VarId], free: &[VarId], k: usize) -> Function {
    // The facts at 0:0: errors keep the location of the statement.
    let mut stmts: Vec<Stmt> = rebound.iter().map(|d| Stmt { kind: d.kind.clone(), loc: Loc::default() }).collect();
    stmts.push(s.clone());
    let mut c = Function {
        name: format!("{}.par{k}", f.name),
        params: Vec::new(),
        body: Block { stmts, results: rs.iter().map(|r| Atom::Var(*r)).collect() },
        vars: f.vars.clone(),
        result_types: rs.iter().map(|r| f.ty(*r)).collect(),
        signature: f.signature.clone(),
        loc: s.loc,
    };
    let lo = c.new_var("lo", Type::scalar(Scalar::I64));
    let hi = c.new_var("hi", Type::scalar(Scalar::I64));
    for v in free {
        c.vars[v.index()].mutable = false;
    }
    c.params = [lo, hi].into_iter().chain(free.iter().copied()).collect();
    c
}

/// The accumulators of a function (`zeros`, `zeros_like` at its top
/// level) and the arrays made from accumulators anywhere in it (views of
/// them, copies: they may share their memory), for the loops of effects.
struct Accumulators {
    /// Accumulators bound at the top level.
    top: HashSet<VarId>,
    /// Every variable bound by a `let` that reads an accumulator or one of
    /// these, or assigned one of them, but the accumulators of `top` and the arrays a `build` makes
    /// (new memory, whose values a loop after it cannot change: the
    /// stacked cotangents of an interchanged nest).
    derived: HashSet<VarId>,
    /// `arrayad_ir::passes::fallible` of the function.
    fallible: arrayad_ir::passes::fallible::Fallible,
}

impl Accumulators {
    fn of(f: &Function) -> Accumulators {
        let mut top = HashSet::new();
        for s in &f.body.stmts {
            if let StmtKind::Let { vars, expr: Expr::Zeros(_) | Expr::ZerosLike(_) } = &s.kind {
                top.extend(vars.iter().copied().filter(|v| !f.var(*v).mutable));
            }
        }
        let mut derived = HashSet::new();
        for_each_block(&f.body, &mut |b| {
            for s in &b.stmts {
                match &s.kind {
                    StmtKind::Let { vars, expr } => {
                        let mut from = false;
                        arrayad_ir::visit::expr_uses(expr, &mut |v| from |= top.contains(&v) || derived.contains(&v));
                        let fresh = matches!(expr, Expr::Build { .. });
                        if (from && !fresh) || matches!(expr, Expr::Zeros(_) | Expr::ZerosLike(_)) {
                            derived.extend(vars.iter().copied().filter(|v| !top.contains(v)));
                        }
                    }
                    // A mutable array given an accumulator (an owned
                    // cotangent) shares its memory from then on.
                    StmtKind::Assign { var, value: Atom::Var(a) } if top.contains(a) || derived.contains(a) => {
                        derived.insert(*var);
                    }
                    _ => {}
                }
            }
        });
        Accumulators { top, derived, fallible: arrayad_ir::passes::fallible::analyse(f) }
    }

    /// True when the loop `for i < n do body` (`i` is `index`) at the top
    /// of `f` is a loop of effects whose iterations may run in any order
    /// and at once: it cannot fail, its only effects outside itself are
    /// additions `a[i, ..] += v` into accumulators `a` of the top level at
    /// the loop's index (so each iteration adds into its own rows),
    /// directly or through views of those rows (`let w = a[i, ..]`, their
    /// rows and slices, bound in the body and used only to add into), it
    /// reads none of those (nor any array that may share their memory)
    /// but by element of its own rows (`x = a[i, ..]`, `x = w[..]`: what
    /// this iteration added, after the backward loops of a comprehension
    /// and of the comprehension it reads fused; their extents count as no
    /// read),
    /// reads the other accumulators of the top level only by element
    /// (makes no view of them to add into), uses no tape, assigns no
    /// variable bound outside it, and calls only primal or jvp code. Every
    /// element then receives the same additions in the same order,
    /// whatever the order of the iterations.
    fn effect_loop(&self, f: &Function, index: VarId, body: &Block, callees: &Callees) -> bool {
        if self.fallible.block(body) {
            return false;
        }
        let mut bound = HashSet::from([index]);
        block_binds(body, &mut |v| {
            bound.insert(v);
        });
        let mut ok = true;
        let mut written = HashSet::new();
        // The views of the loop's own rows of top-level accumulators, with
        // the accumulator.
        let mut own_rows: HashMap<VarId, VarId> = HashMap::new();
        for_each_block(body, &mut |b| {
            for s in &b.stmts {
                ok &= match &s.kind {
                    StmtKind::Let { vars, expr: Expr::Index { array, indices } }
                        if vars.len() == 1 && f.ty(vars[0]).is_array() && self.top.contains(array) =>
                    {
                        if indices.first() == Some(&Atom::Var(index)) {
                            own_rows.insert(vars[0], *array);
                        }
                        true
                    }
                    StmtKind::Let { vars, expr: Expr::Index { array, .. } | Expr::Slice { array, .. } }
                        if vars.len() == 1 && f.ty(vars[0]).is_array() && own_rows.contains_key(array) =>
                    {
                        let root = own_rows[array];
                        own_rows.insert(vars[0], root);
                        true
                    }
                    StmtKind::AccAdd { acc, .. } if own_rows.contains_key(acc) => {
                        written.insert(own_rows[acc]);
                        true
                    }
                    StmtKind::AccZero { acc, .. } if own_rows.contains_key(acc) => false,
                    StmtKind::AccAdd { acc, indices, .. } if !bound.contains(acc) => {
                        written.insert(*acc);
                        self.top.contains(acc) && indices.first() == Some(&Atom::Var(index))
                    }
                    StmtKind::AccAdd { .. } => true,
                    StmtKind::AccZero { acc, .. } | StmtKind::Assign { var: acc, .. } => bound.contains(acc),
                    StmtKind::Push(_) | StmtKind::TapeRewind(_) => false,
                    StmtKind::Let { expr: Expr::Pop | Expr::TapeMark, .. } => false,
                    StmtKind::Let { expr: Expr::Call { func, .. }, .. } => local_call(*func, callees),
                    _ => true,
                };
            }
        });
        if !ok || written.is_empty() {
            return false;
        }
        // No read of an accumulator written (but as the target of an
        // addition) or of an array that may share memory with one; the
        // other accumulators of the top level are read only by element (a
        // view of one made in the body could be added into anywhere).
        for_each_block(body, &mut |b| {
            for s in &b.stmts {
                let scalars = matches!(&s.kind, StmtKind::Let { vars, .. }
                    if vars.iter().all(|v| f.ty(*v).is_scalar()));
                let mut read = |v: VarId| {
                    ok &= (bound.contains(&v) && !own_rows.contains_key(&v))
                        || !(bound.contains(&v)
                            || written.contains(&v)
                            || self.derived.contains(&v)
                            || (self.top.contains(&v) && !scalars))
                };
                match &s.kind {
                    StmtKind::AccAdd { acc, indices, value } => {
                        if bound.contains(acc) && !own_rows.contains_key(acc) {
                            read(*acc);
                        }
                        indices.iter().chain([value]).filter_map(Atom::as_var).for_each(&mut read);
                    }
                    // An element of the loop's own row of an accumulator,
                    // which no other iteration adds into: its indices are
                    // read.
                    StmtKind::Let { vars, expr: Expr::Index { array, indices } }
                        if scalars
                            && (own_rows.contains_key(array)
                                || (self.top.contains(array) && indices.first() == Some(&Atom::Var(index)))) =>
                    {
                        indices.iter().filter_map(Atom::as_var).for_each(&mut read);
                    }
                    // A view of an own row: its indices are read.
                    StmtKind::Let { vars, expr: Expr::Index { indices, .. } } if own_rows.contains_key(&vars[0]) => {
                        indices.iter().filter_map(Atom::as_var).for_each(&mut read);
                    }
                    StmtKind::Let { vars, expr: Expr::Slice { lo, hi, .. } } if own_rows.contains_key(&vars[0]) => {
                        [lo, hi].into_iter().filter_map(Atom::as_var).for_each(&mut read);
                    }
                    // An extent reads no element.
                    StmtKind::Let { expr: Expr::Dim { .. }, .. } => {}
                    kind => arrayad_ir::visit::stmt_uses_shallow(kind, &mut read),
                }
            }
            b.results.iter().filter_map(Atom::as_var).for_each(|v| {
                ok &= (bound.contains(&v) && !own_rows.contains_key(&v))
                    || !(bound.contains(&v)
                        || written.contains(&v)
                        || self.derived.contains(&v)
                        || self.top.contains(&v))
            });
        });
        ok
    }
}
