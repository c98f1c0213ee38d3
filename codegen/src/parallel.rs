//! Parallel maps: a `for` comprehension at the top of a function whose
//! iterations are independent is split out into a chunk function that
//! computes the rows of a range of iterations, and the function calls it
//! through the runtime (`arrayad_parallel_map` of the C runtime), which
//! runs the chunks on a pool of threads when the work pays for it and
//! calls the chunk function once, over all rows, otherwise.
//!
//! A comprehension is split out when
//! - it binds one array of `f64` or `i64` rows (scalar rows: each
//!   iteration writes its own element, so the rows, and everything
//!   computed from them, are the same bits for every number of threads);
//! - its body has no effect outside itself: no tape entry (`Push`, `Pop`,
//!   `TapeMark`, `TapeRewind`), no accumulation (`AccAdd`, `AccZero`), no
//!   assignment of a variable bound outside it, and calls only of primal
//!   or jvp code (whose work is local to the call; the forward pass of a
//!   kept vjp leaves its residuals on the caller's tape);
//! - its rows are not summed where they are made (`sum` of the array:
//!   the lowering fuses that loop without the array, `lower/sum.rs`)
//!   unless its body is heavy ([`HEAVY`]: a loop inside it), nor carried
//!   out of a nested block (whose empty-loop extents `arrayad_ir::shape`
//!   reads from the comprehension itself). Summed rows are summed after
//!   the map, in the one order of sums: the same bits as the fused loop.
//!
//! The chunk function of `let r = for i < n => body` (free variables
//! `v1..vk`) is `chunk(lo, hi, v1..vk) = for i < n => body` lowered in
//! chunk mode (`Lower::chunk_range`): its loop runs `i` over `lo..hi` only
//! and returns those `hi - lo` rows, in the destination the runtime gives
//! (the pool's threads write their rows in place in the result). The
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

use crate::calls::Callees;
use arrayad_ir::visit::{block_binds, child_blocks, for_each_block, stmt_uses};
use arrayad_ir::{Atom, Block, Expr, FuncId, Function, KeptKind, Loc, Scalar, Stmt, StmtKind, Type, VarId};
use std::collections::{HashMap, HashSet};

/// The most comprehensions split out of one function (each chunk function
/// copies the function's variable table: the pass stays linear).
const MAX_MAPS: usize = 8;

/// The weight of one statement in a loop nested in a comprehension's body
/// (its trip count is unknown here).
const LOOP_WEIGHT: u64 = 16;

/// The weight from which a comprehension whose rows are summed runs in
/// parallel (its rows then made, and summed after): below it, the loop
/// that sums without the array (`lower/sum.rs`) is worth more.
const HEAVY: u64 = 64;

/// The most weight counted for one iteration.
const MAX_WEIGHT: u64 = 1 << 24;

/// How a call of a chunk function runs ([`crate::Callees::parallel_map`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParallelMap {
    /// Bytes of one row (8: `f64` or `i64`).
    pub elem: i64,
    /// The statements of one iteration, loops nested in it counted
    /// [`LOOP_WEIGHT`] times per level: the runtime runs the map on the
    /// pool when the iterations times this reach its grain.
    pub weight: i64,
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
    let (reduced, carried) = reduced_and_carried(f);
    let mut host: Option<Function> = None;
    let mut made = 0;
    // The extents bound at the top (`let n = dim x 0`) and the checks of
    // their equalities, so far: a chunk function binds them again from its
    // arrays (and checks again), so that its lowering knows what the
    // function's knows of them (bounds checks proven as before).
    let mut extents: HashMap<VarId, VarId> = HashMap::new();
    let mut facts: Vec<&Stmt> = Vec::new();
    // The location errors of a statement at 0:0 report: the last one
    // before it (as `Lower::stmts` keeps it).
    let mut at = f.loc;
    for (k, s) in f.body.stmts.iter().enumerate() {
        let before = at;
        if s.loc.line != 0 {
            at = s.loc;
        }
        match &s.kind {
            StmtKind::Let { vars, expr: Expr::Dim { array, .. } } => {
                if let ([v], false) = (vars.as_slice(), f.var(*array).mutable) {
                    extents.insert(*v, *array);
                    facts.push(s);
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
        if made == MAX_MAPS {
            break;
        }
        let StmtKind::Let { vars, expr: Expr::Build { n, index, body } } = &s.kind else { continue };
        let [r] = vars.as_slice() else { continue };
        let w = weight(body);
        let summed_light = reduced.contains(r) && w < HEAVY;
        let map = match row_bytes(f, body) {
            Some(elem) if !summed_light && !carried.contains(r) && effect_free(body, callees) => {
                ParallelMap { elem, weight: i64::try_from(w).unwrap_or(1) }
            }
            _ => continue,
        };
        let id = FuncId(u32::MAX - u32::try_from(chunks.len()).ok()?);
        let free = free_vars(s, *index, body, &extents);
        let rebound = extent_facts(&facts, &free);
        let mut func = chunk_function(f, &rebound, s, *r, &free, chunks.len());
        func.loc = before;
        let mut args = vec![Atom::I64(0), *n];
        args.extend(free.iter().map(|v| Atom::Var(*v)));
        let call = Stmt { kind: StmtKind::Let { vars: vec![*r], expr: Expr::Call { func: id, args } }, loc: s.loc };
        host.get_or_insert_with(|| f.clone()).body.stmts[k] = call;
        chunks.push(Chunk { id, func, map, host: h });
        made += 1;
    }
    host
}

/// The bytes of a row of a comprehension of one `f64` or `i64` result.
fn row_bytes(f: &Function, body: &Block) -> Option<i64> {
    let [row] = body.results.as_slice() else { return None };
    let t = f.atom_ty(row);
    (t.is_scalar() && matches!(t.elem, Scalar::F64 | Scalar::I64)).then_some(8)
}

/// The arrays of `f` that a reduction reads (`sum`, ...), and the
/// variables that a nested block yields.
fn reduced_and_carried(f: &Function) -> (HashSet<VarId>, HashSet<VarId>) {
    let (mut reduced, mut carried) = (HashSet::new(), HashSet::new());
    for_each_block(&f.body, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::Let { expr: Expr::Reduce { array, .. }, .. } = &s.kind {
                reduced.insert(*array);
            }
            for c in child_blocks(&s.kind) {
                carried.extend(c.results.iter().filter_map(Atom::as_var));
            }
        }
    });
    (reduced, carried)
}

/// True when the iterations of a comprehension whose body is `body` have
/// no effect outside themselves (module docs).
fn effect_free(body: &Block, callees: &Callees) -> bool {
    let mut bound = HashSet::new();
    block_binds(body, &mut |v| {
        bound.insert(v);
    });
    let mut ok = true;
    for_each_block(body, &mut |b| {
        for s in &b.stmts {
            ok &= match &s.kind {
                StmtKind::Push(_) | StmtKind::TapeRewind(_) | StmtKind::AccAdd { .. } | StmtKind::AccZero { .. } => {
                    false
                }
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

/// The statements of one iteration of `body`, nested loops counted
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
        w.saturating_add(1).saturating_add(nested).min(MAX_WEIGHT)
    })
}

/// The variables the comprehension statement `s` uses and does not bind,
/// in order of first use, except the extents of `extents` (bound by `dim`
/// of an array, which [`extent_facts`] binds again): their arrays instead.
fn free_vars(s: &Stmt, index: VarId, body: &Block, extents: &HashMap<VarId, VarId>) -> Vec<VarId> {
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
        let v = extents.get(&v).copied().unwrap_or(v);
        if passed.insert(v) {
            free.push(v);
        }
    }
    free
}

/// Of `facts` (the extents bound at the top of a function and the checks
/// of their equalities, in order), those a chunk function with the free
/// variables `free` binds again: the extents of its arrays, and the checks
/// between them (or constants).
fn extent_facts<'a>(facts: &[&'a Stmt], free: &[VarId]) -> Vec<&'a Stmt> {
    let free: HashSet<VarId> = free.iter().copied().collect();
    let mut bound = HashSet::new();
    let mut out = Vec::new();
    for s in facts {
        let keep = match &s.kind {
            StmtKind::Let { vars, expr: Expr::Dim { array, .. } } if free.contains(array) => {
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

/// The chunk function of the comprehension `s` of `f`, binding `r`:
/// params `lo`, `hi` and the free variables `free` (read-only there), the
/// extents `rebound`, the statement, and `r`.
fn chunk_function(f: &Function, rebound: &[&Stmt], s: &Stmt, r: VarId, free: &[VarId], k: usize) -> Function {
    // The facts at 0:0: errors keep the location of the statement.
    let mut stmts: Vec<Stmt> = rebound.iter().map(|d| Stmt { kind: d.kind.clone(), loc: Loc::default() }).collect();
    stmts.push(s.clone());
    let mut c = Function {
        name: format!("{}.par{k}", f.name),
        params: Vec::new(),
        body: Block { stmts, results: vec![Atom::Var(r)] },
        vars: f.vars.clone(),
        result_types: vec![f.ty(r)],
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
