//! Gathers hoisted out of the comprehension that repeats them.
//!
//! In `for i < n => body`, an element read `a[e_1, .., e_r]` of an array
//! `a` defined before the comprehension, nested in comprehensions of
//! `body` (`for k < K => for r < D => for c < r => .. a[k, f(k, r, c)] ..`),
//! whose indices are integer arithmetic on the indices of those nested
//! comprehensions and on values defined before `i`'s comprehension (through
//! `i64` bindings of the body made only of those), reads the same elements
//! in every iteration of `i`. When some index is computed (not an index
//! variable itself) the reads are a gather: the packed triangular storage
//! of `examples/gmm_packed.arr`, whose row `r` lies at stride `2 D - c - 1`
//! in `icf`. This pass reads them once, before the comprehension, into a
//! dense array `g[k, r, c]` with one axis per nested comprehension (an axis
//! whose count is an enclosing index, `c < r`, is as long as that index's
//! axis, and its positions past the count are 0 and never read), and the
//! body reads `g[k, r][0:r][c]` instead: row `r` becomes contiguous, as in
//! the hand-unpacked `examples/gmm.arr`.
//!
//! # Legality
//!
//! The values read are the same elements, so every result is the same, bit
//! for bit. `a` must not share elements with an accumulator
//! (`licm::accumulated`): the loop could add into it. Errors are kept by
//! versioning: building `g` does not fail (a read whose indices are out of
//! bounds is replaced by 0 and counted, and the extents are clamped at 0),
//! and the comprehension is two, both at the top level:
//!
//! ```text
//! let r0 = for i < (if ok then 0 else n) => body      // fails where it did
//! let r1 = for i' < (if ok then n else 0) => body'    // reads g
//! let r = if ok then r1 else r0
//! ```
//!
//! where `ok` holds when `g` was made and no read was out of bounds: the
//! hoisted body runs only then, and otherwise the original body, which
//! fails where it did, with its message (a negative `n` fails in the
//! original's comprehension, as `ok` needs `n >= 2`). Each body starts
//! with a check that its count is `n`, which cannot fail where it runs.
//! When every read is in bounds both bodies run the same statements in
//! the same order, except reads of `a` that cannot fail. Index arithmetic is wrapping `i64` (`add`, `sub`, `mul`, `min`,
//! `max`, and `div`/`rem` by a literal other than 0 and -1), which cannot
//! fail either. The memory the gathered arrays take is bounded: they are
//! made (their first axes are empty otherwise, and the original body runs)
//! only when the comprehension runs at least twice and they have together
//! at most `GROWTH` times the elements of the arrays they read (plus
//! `SLACK`), so that a call that fits in memory without them fits with
//! them, up to that factor of arrays it holds already. Each comprehension's
//! body has no branch and both stay at the top level: reverse mode stacks
//! the residuals of the one that runs by index, [`super::interchange`]
//! interchanges its backward nest, and code generation runs both on the
//! thread pool (a branch on `ok` in one comprehension's body, the first
//! form of this pass, taped every iteration's residuals and kept the
//! backward pass on one thread).
//!
//! Reverse mode differentiates the program after this pass: the cotangent
//! of `g` is accumulated over the iterations of `i` and added into `a`'s
//! once per element, where the original added each iteration's
//! contribution into `a`'s cotangent directly. The sums are the same terms
//! in another grouping, so a gradient may differ from the unhoisted
//! program's in the last bits (the value does not); compiled code and the
//! interpreter run the same hoisted program and agree bit for bit.
//!
//! The pass looks at the comprehensions of the function's top-level block
//! (where the loops over data points are) and runs once, after
//! [`super::optimize`]: the original body kept for the failing case still
//! holds the gather, and a second run would copy it again. It is linear in
//! the function: at most `MAX_GATHERS` gathers per comprehension, each
//! with at most `MAX_DEFS` statements of index arithmetic.

use crate::builder::Builder;
use crate::fx::{FxHashMap, FxHashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, ReduceOp, Stmt, StmtKind, UnOp, VarId};
use crate::types::{Scalar, Type};
use crate::visit::{freshen_block, Subst};

/// Comprehensions nested deeper than this under the hoisting one are not
/// looked into (each is an axis of the gathered array).
const MAX_AXES: usize = 4;

/// Index arithmetic deeper than this is not followed (the walk over it is
/// recursive).
const MAX_INDEX_DEPTH: usize = 64;

/// Gathers of at most this many reads (by literal counts) are left alone.
const FEW_READS: i64 = 64;

/// Index arithmetic of more statements than this is not followed.
const MAX_DEFS: usize = 64;

/// At most this many gathers are hoisted out of one comprehension.
const MAX_GATHERS: usize = 8;

/// The gathered arrays of a comprehension are made only when they have
/// together at most this many times the elements of the arrays they read
/// (plus [`SLACK`]): their memory stays within a small multiple of arrays
/// the caller already holds.
const GROWTH: f64 = 4.0;

/// See [`GROWTH`].
const SLACK: f64 = 65536.0;

/// One comprehension between the hoisting one and a gather.
#[derive(Clone, Copy)]
struct Axis {
    /// Its index variable.
    index: VarId,
    /// Its count.
    count: Atom,
}

/// How long an axis of the gathered array is.
#[derive(Clone, Copy)]
enum Extent {
    /// The comprehension's count, invariant (clamped at 0).
    Count(Atom),
    /// The comprehension counts up to the index of the enclosing axis
    /// given: as long as that axis, the positions at or past the index
    /// never read.
    Below(usize),
}

/// A gather found: `result = array[indices]` under `axes`.
struct Gather {
    result: VarId,
    array: VarId,
    indices: Vec<Atom>,
    axes: Vec<Axis>,
    extents: Vec<Extent>,
    /// The index arithmetic it needs (`var = x op y`), in an order that
    /// defines before use.
    defs: Vec<(VarId, BinOp, Atom, Atom)>,
}

/// Hoists the gathers of the top-level comprehensions of `f` (see the
/// module documentation). Returns whether it changed `f`.
pub fn hoist_gathers(f: &mut Function) -> bool {
    // Only a comprehension with another in its body can hold a gather:
    // most functions have none, and need no walk of their accumulators.
    let nested =
        |body: &Block| body.stmts.iter().any(|s| matches!(&s.kind, StmtKind::Let { expr: Expr::Build { .. }, .. }));
    if !f
        .body
        .stmts
        .iter()
        .any(|s| matches!(&s.kind, StmtKind::Let { expr: Expr::Build { body, .. }, .. } if nested(body)))
    {
        return false;
    }
    // Arrays that may share elements with an accumulator may change in the
    // loop: never gathered.
    let shared = super::licm::accumulated(f);
    let invariant = |f: &Function, v: VarId| !f.var(v).mutable && !shared.contains(&v);
    let mut body = std::mem::take(&mut f.body);
    let mut outer: FxHashSet<VarId> = f.params.iter().copied().filter(|v| invariant(f, *v)).collect();
    // Extents of arrays: counts known not to be negative.
    let mut nonnegative: FxHashSet<VarId> = FxHashSet::default();
    let mut changed = false;
    let mut stmts = Vec::with_capacity(body.stmts.len());
    for stmt in std::mem::take(&mut body.stmts) {
        let found = match &stmt.kind {
            StmtKind::Let { expr: Expr::Build { body, .. }, .. } => find_gathers(f, body, &outer),
            _ => Vec::new(),
        };
        if let StmtKind::Let { vars, expr } = &stmt.kind {
            outer.extend(vars.iter().copied().filter(|v| invariant(f, *v)));
            if let ([v], Expr::Dim { .. }) = (vars.as_slice(), expr) {
                nonnegative.insert(*v);
            }
        }
        if found.is_empty() {
            stmts.push(stmt);
            continue;
        }
        changed = true;
        hoist(f, stmt, &found, &nonnegative, &mut stmts);
    }
    body.stmts = stmts;
    f.body = body;
    changed
}

/// The gathers of one comprehension's body.
fn find_gathers(f: &Function, body: &Block, outer: &FxHashSet<VarId>) -> Vec<Gather> {
    let mut walk = Walk { f, outer, axes: Vec::new(), defs: FxHashMap::default(), found: Vec::new() };
    walk.block(body);
    walk.found
}

/// The index arithmetic a gather needs.
#[derive(Default)]
struct Defs {
    /// `var = x op y`, operands first.
    order: Vec<(VarId, BinOp, Atom, Atom)>,
    /// The axes each of them uses.
    axes: FxHashMap<VarId, u32>,
    /// How many were entered (recorded or still being classified).
    entered: usize,
}

struct Walk<'a> {
    f: &'a Function,
    outer: &'a FxHashSet<VarId>,
    axes: Vec<Axis>,
    /// The `i64` arithmetic bound in the blocks walked.
    defs: FxHashMap<VarId, (BinOp, Atom, Atom)>,
    found: Vec<Gather>,
}

impl Walk<'_> {
    fn block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            let StmtKind::Let { vars, expr } = &stmt.kind else { continue };
            match expr {
                Expr::Binary(op, a, b)
                    if vars.len() == 1 && self.f.ty(vars[0]) == Type::I64 && !self.f.var(vars[0]).mutable =>
                {
                    self.defs.insert(vars[0], (*op, *a, *b));
                }
                Expr::Index { array, indices } if vars.len() == 1 && self.found.len() < MAX_GATHERS => {
                    self.gather(vars[0], *array, indices)
                }
                Expr::Build { n, index, body } if self.axes.len() < MAX_AXES => {
                    self.axes.push(Axis { index: *index, count: *n });
                    self.block(body);
                    self.axes.pop();
                }
                _ => {}
            }
        }
    }

    /// Records `result = array[indices]` when it is a gather to hoist.
    fn gather(&mut self, result: VarId, array: VarId, indices: &[Atom]) {
        let ty = self.f.ty(array);
        if self.axes.is_empty()
            || !self.outer.contains(&array)
            || ty.elem != Scalar::F64
            || usize::from(ty.rank) != indices.len()
        {
            return;
        }
        // The axes' extents: invariant counts, or enclosing indices.
        let mut extents = Vec::with_capacity(self.axes.len());
        for (j, axis) in self.axes.iter().enumerate() {
            let extent = match axis.count {
                Atom::I64(_) => Extent::Count(axis.count),
                Atom::Var(v) if self.invariant_i64(v) => Extent::Count(axis.count),
                Atom::Var(v) => match self.axes[..j].iter().position(|a| a.index == v) {
                    Some(l) => Extent::Below(l),
                    None => return,
                },
                _ => return,
            };
            extents.push(extent);
        }
        // A few reads by literal counts (`p[4 * j]` for `j < 7`) cost less
        // than the second version of the body.
        let literal = self.axes.iter().try_fold(1i64, |n, a| match a.count {
            Atom::I64(c) => n.checked_mul(c.max(0)),
            _ => None,
        });
        if literal.is_some_and(|n| n <= FEW_READS) {
            return;
        }
        let mut used = 0u32;
        let mut computed = false;
        let mut defs = Defs::default();
        for a in indices {
            match self.classify(a, 0, &mut defs) {
                Some((axes, is_computed)) => {
                    used |= axes;
                    computed |= is_computed;
                }
                None => return,
            }
        }
        // Every axis must be used (an unused one would copy the gather
        // along it), and some index computed (a plain `a[k, r]` is already
        // read in order).
        if !computed || used != (1u32 << self.axes.len()) - 1 {
            return;
        }
        let defs = defs.order;
        self.found.push(Gather { result, array, indices: indices.to_vec(), axes: self.axes.clone(), extents, defs });
    }

    fn invariant_i64(&self, v: VarId) -> bool {
        self.outer.contains(&v) && self.f.ty(v) == Type::I64
    }

    /// For an index atom made of invariant values, the indices of the
    /// enclosing axes and wrapping arithmetic: the set of axes it uses (a
    /// bit per axis) and whether it is computed; its definitions are
    /// added to `defs` (operands first, each once). `None` when it is anything else.
    fn classify(&self, a: &Atom, depth: usize, defs: &mut Defs) -> Option<(u32, bool)> {
        let v = match a {
            Atom::I64(_) => return Some((0, false)),
            Atom::Var(v) => *v,
            _ => return None,
        };
        if self.invariant_i64(v) {
            return Some((0, false));
        }
        if let Some(j) = self.axes.iter().position(|x| x.index == v) {
            return Some((1 << j, false));
        }
        if let Some(&axes) = defs.axes.get(&v) {
            return Some((axes, true));
        }
        let &(op, x, y) = self.defs.get(&v)?;
        let divides = matches!(y, Atom::I64(c) if c != 0 && c != -1);
        let total = matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Min | BinOp::Max)
            || (matches!(op, BinOp::Div | BinOp::Rem) && divides);
        if !total || depth >= MAX_INDEX_DEPTH || defs.entered >= MAX_DEFS {
            return None;
        }
        defs.entered += 1;
        let (ux, _) = self.classify(&x, depth + 1, defs)?;
        let (uy, _) = self.classify(&y, depth + 1, defs)?;
        defs.order.push((v, op, x, y));
        defs.axes.insert(v, ux | uy);
        Some((ux | uy, true))
    }
}

/// Emits, for the comprehension `stmt` and its gathers, the gathered
/// arrays and `stmt` with its two bodies into `out`.
fn hoist(f: &mut Function, stmt: Stmt, found: &[Gather], nonnegative: &FxHashSet<VarId>, out: &mut Vec<Stmt>) {
    let StmtKind::Let { vars, expr: Expr::Build { n, index, body } } = stmt.kind else {
        unreachable!("only comprehensions are searched");
    };
    let loc = stmt.loc;
    let mut b = Builder::new(f);
    b.loc = loc;
    // Gathered only for a comprehension of two iterations or more, and
    // when the gathered arrays together have at most [`GROWTH`] times the
    // elements of the arrays they read (plus [`SLACK`]), counted as `f64`,
    // which cannot overflow.
    let mut axes = Vec::with_capacity(found.len());
    let mut size = Atom::F64(0.0);
    let mut read = Atom::F64(0.0);
    let mut arrays = FxHashSet::default();
    for g in found {
        let dims: Vec<Atom> =
            (0..g.indices.len()).map(|a| b.let_one("extent", Expr::Dim { array: g.array, axis: a as u8 })).collect();
        let (extents, elements) = gather_extents(&mut b, g, nonnegative);
        size = b.binary(BinOp::Add, size, elements);
        if arrays.insert(g.array) {
            let elements = element_count(&mut b, &dims);
            read = b.binary(BinOp::Add, read, elements);
        }
        axes.push((extents, dims));
    }
    let budget = b.binary(BinOp::Mul, read, Atom::F64(GROWTH));
    let budget = b.binary(BinOp::Add, budget, Atom::F64(SLACK));
    let fits = b.binary(BinOp::Le, size, budget);
    let twice = b.binary(BinOp::Ge, n, Atom::I64(2));
    let hoist_them = b.binary(BinOp::And, twice, fits);
    let mut gathered = Vec::with_capacity(found.len());
    let mut misses = Atom::I64(0);
    for (g, (extents, dims)) in found.iter().zip(axes) {
        let array = gather_array(&mut b, g, hoist_them, extents, &dims);
        misses = b.binary(BinOp::Add, misses, array.misses);
        gathered.push(array);
    }
    let all_in_bounds = b.binary(BinOp::Eq, misses, Atom::I64(0));
    let use_them = b.binary(BinOp::And, hoist_them, all_in_bounds);
    // The hoisted body: the same body reading the gathered arrays by rows,
    // viewed before the innermost comprehension (`g[k, r][0:r]`, then
    // `row[c]` in `for c < r`) as in a hand-unpacked program: a read of
    // the whole index in the innermost loop would compute the offset of
    // the row in every iteration (Cranelift does not move it out of the
    // loop), and the slice as long as the loop's count makes its reads
    // known in bounds (also in the unrolled rounds of a sum). The slice
    // keeps the view from being folded into the whole index again
    // (`scalarize` folds rows, not slices of run-time bounds).
    let mut hoisted = body.clone();
    let mut reads = Reads::default();
    for (g, arr) in found.iter().zip(&gathered) {
        let mut indices: Vec<Atom> = g.axes.iter().map(|a| Atom::Var(a.index)).collect();
        let last = indices.pop().expect("a gather lies under at least one comprehension");
        let depth = g.axes.len();
        if depth == 1 {
            reads.replace.insert(g.result, (arr.array, vec![last]));
            continue;
        }
        let row = b.var("gathered_row", Type::array(Scalar::F64, 1));
        let slice = b.var("gathered_slice", Type::array(Scalar::F64, 1));
        let views = reads.views.entry(g.axes[depth - 1].index).or_default();
        views.push((row, Expr::Index { array: arr.array, indices }));
        views.push((slice, Expr::Slice { array: row, lo: Atom::I64(0), hi: arr.last_count }));
        reads.replace.insert(g.result, (slice, vec![last]));
    }
    replace_reads(&mut hoisted, &reads, loc, 0);
    // The hoisted comprehension has an index of its own.
    let mut fresh = Subst::default();
    let mut hoisted = freshen_block(b.func, &hoisted, &[index], &mut fresh);
    let Some(Atom::Var(hoisted_index)) = fresh.map.get(&index).copied() else {
        unreachable!("freshen_block maps the extra binders to fresh variables")
    };
    // Two comprehensions at the top level, each counting `n` when its body
    // is the one to run and 0 otherwise, and a branch that picks the rows
    // of the one that ran: each is a comprehension of the top level whose
    // body has no branch (reverse mode stacks its residuals by index, its
    // backward loop nest interchanges, and both run on the pool), where
    // one comprehension with a branch in its body would tape each
    // iteration's residuals.
    let count = |b: &mut Builder, then_count: Atom, else_count: Atom| {
        let then_branch = Block { stmts: Vec::new(), results: vec![then_count] };
        let else_branch = Block { stmts: Vec::new(), results: vec![else_count] };
        b.let_one("count", Expr::If { cond: use_them, then_branch, else_branch })
    };
    let hoisted_count = count(&mut b, n, Atom::I64(0));
    let original_count = count(&mut b, Atom::I64(0), n);
    // In an iteration of either body, its count is `n` and the first axis
    // of a gathered array is as long as its comprehension's count: checks
    // that cannot fail there, from which the lowering knows the reads of
    // those axes in bounds.
    let check = |a: Atom, b: Atom, what: &str| Stmt { kind: StmtKind::CheckSize { a, b, what: what.into() }, loc };
    let counted = "the count of a comprehension";
    let checks = [check(hoisted_count, n, counted)].into_iter().chain(
        gathered.iter().filter_map(|g| g.first).map(|(a, count)| check(a, count, "the first axis of a gathered array")),
    );
    hoisted.stmts.splice(0..0, checks);
    let mut body = body;
    body.stmts.insert(0, check(original_count, n, counted));
    let types: Vec<Type> = vars.iter().map(|v| b.func.ty(*v)).collect();
    let hoisted_rows: Vec<VarId> = types.iter().map(|t| b.var("rows", *t)).collect();
    let original_rows: Vec<VarId> = types.iter().map(|t| b.var("rows", *t)).collect();
    b.stmt(StmtKind::Let { vars: original_rows.clone(), expr: Expr::Build { n: original_count, index, body } });
    b.stmt(StmtKind::Let {
        vars: hoisted_rows.clone(),
        expr: Expr::Build { n: hoisted_count, index: hoisted_index, body: hoisted },
    });
    let then_branch = Block { stmts: Vec::new(), results: hoisted_rows.into_iter().map(Atom::Var).collect() };
    let else_branch = Block { stmts: Vec::new(), results: original_rows.into_iter().map(Atom::Var).collect() };
    b.stmt(StmtKind::Let { vars, expr: Expr::If { cond: use_them, then_branch, else_branch } });
    out.extend(b.finish(Vec::new()).stmts);
}

/// The rewrite of the hoisted body's reads.
#[derive(Default)]
struct Reads {
    /// Per gather's result: the array (or row) and indices it reads now.
    replace: FxHashMap<VarId, (VarId, Vec<Atom>)>,
    /// Per innermost comprehension (by its index): the views to bind
    /// before it.
    views: FxHashMap<VarId, Vec<(VarId, Expr)>>,
}

/// Rewrites, in `block` and the comprehensions nested in it (at most
/// [`MAX_AXES`] deep, `depth` so far), the reads of `reads.replace`, and
/// binds the views of `reads.views` before their comprehensions.
fn replace_reads(block: &mut Block, reads: &Reads, loc: crate::program::Loc, depth: usize) {
    let mut stmts = Vec::with_capacity(block.stmts.len());
    for mut stmt in std::mem::take(&mut block.stmts) {
        if let StmtKind::Let { vars, expr } = &mut stmt.kind {
            match expr {
                Expr::Index { .. } if vars.len() == 1 => {
                    if let Some((array, indices)) = reads.replace.get(&vars[0]) {
                        *expr = Expr::Index { array: *array, indices: indices.clone() };
                    }
                }
                Expr::Build { index, body, .. } if depth < MAX_AXES => {
                    for (view, expr) in reads.views.get(index).into_iter().flatten() {
                        stmts.push(Stmt { kind: StmtKind::Let { vars: vec![*view], expr: expr.clone() }, loc });
                    }
                    replace_reads(body, reads, loc, depth + 1);
                }
                _ => {}
            }
        }
        stmts.push(stmt);
    }
    block.stmts = stmts;
}

/// The extents of the axes of a gather's array, clamped at 0 (a count
/// known not to be negative as it is), and its element count (an `f64`).
fn gather_extents(b: &mut Builder, g: &Gather, nonnegative: &FxHashSet<VarId>) -> (Vec<Atom>, Atom) {
    let mut extents: Vec<Atom> = Vec::with_capacity(g.axes.len());
    for e in &g.extents {
        let extent = match *e {
            Extent::Count(count) => match count {
                Atom::I64(c) if c >= 0 => count,
                Atom::Var(v) if nonnegative.contains(&v) => count,
                _ => b.binary(BinOp::Max, count, Atom::I64(0)),
            },
            Extent::Below(l) => extents[l],
        };
        extents.push(extent);
    }
    let size = element_count(b, &extents);
    (extents, size)
}

/// The product of `extents` (`i64`s), as an `f64`, which cannot overflow.
fn element_count(b: &mut Builder, extents: &[Atom]) -> Atom {
    let mut count = Atom::F64(1.0);
    for &e in extents {
        let e = b.unary(UnOp::ToF64, e);
        count = b.binary(BinOp::Mul, count, e);
    }
    count
}

/// A gathered array as [`gather_array`] emits it.
struct Gathered {
    /// The array: one axis per comprehension.
    array: VarId,
    /// How many of its reads were out of bounds (an `i64`).
    misses: Atom,
    /// How far its innermost comprehension reads along its last axis: that
    /// comprehension's count (an enclosing index, or a count known not to
    /// be negative), else the axis's extent.
    last_count: Atom,
    /// The extent of its first axis and the count it equals when the
    /// array is used, when that count is known not to be negative.
    first: Option<(Atom, Atom)>,
}

/// Emits the gathered array of `g` (one axis per comprehension of the
/// given clamped `extents`, 0 where nothing is read) and the number of its
/// reads that are out of bounds; neither fails. The first axis is empty
/// unless `hoist` holds. `dims` are the extents of the array read.
fn gather_array(b: &mut Builder, g: &Gather, hoist: Atom, mut extents: Vec<Atom>, dims: &[Atom]) -> Gathered {
    let then_branch = Block { stmts: Vec::new(), results: vec![extents[0]] };
    let else_branch = Block { stmts: Vec::new(), results: vec![Atom::I64(0)] };
    let first_extent = b.let_one("extent", Expr::If { cond: hoist, then_branch, else_branch });
    let first = match g.extents[0] {
        Extent::Count(count) if count == extents[0] => Some((first_extent, count)),
        _ => None,
    };
    let last = g.axes.len() - 1;
    let last_count = match (g.extents[last], extents[last]) {
        (Extent::Below(_), _) => g.axes[last].count,
        (Extent::Count(count), extent) if count == extent => count,
        (_, extent) => extent,
    };
    for (j, e) in g.extents.iter().enumerate() {
        if j == 0 || matches!(e, Extent::Below(0)) {
            extents[j] = first_extent;
        }
    }
    // The values: `build j0 < e0 => .. build jm < em => a[..] or 0`.
    let array = nest(b, &extents, Scalar::F64, false, &mut |b, indices| {
        let (counted, at, in_bounds) = element_index(b, g, indices, dims);
        let read = b.binary(BinOp::And, counted, in_bounds);
        b.begin_block();
        let elem = b.let_one("elem", Expr::Index { array: g.array, indices: at });
        let then_branch = b.end_block(vec![elem]);
        let else_branch = Block { stmts: Vec::new(), results: vec![Atom::F64(0.0)] };
        b.let_one("gathered", Expr::If { cond: read, then_branch, else_branch })
    });
    // The misses: `sum(for j0 < e0 => .. sum(for jm < em => 1 or 0))`, a
    // nest of its own, so that its `i64` sums fuse into loops.
    let misses = nest(b, &extents, Scalar::I64, true, &mut |b, indices| {
        let (counted, _, in_bounds) = element_index(b, g, indices, dims);
        let out_of_bounds = b.unary(UnOp::Not, in_bounds);
        let missed = b.binary(BinOp::And, counted, out_of_bounds);
        let then_branch = Block { stmts: Vec::new(), results: vec![Atom::I64(1)] };
        let else_branch = Block { stmts: Vec::new(), results: vec![Atom::I64(0)] };
        b.let_one("missed", Expr::If { cond: missed, then_branch, else_branch })
    });
    let Atom::Var(array) = array else { unreachable!("a nest without sums yields its array") };
    Gathered { array, misses, last_count, first }
}

/// Emits `build j0 < extents[0] => .. build jm < extents[m] => leaf(j0..jm)`
/// (fresh indices; `leaf` yields a scalar of type `elem`), each build
/// summed when `sum`; the result (the array, or the sum).
fn nest(
    b: &mut Builder,
    extents: &[Atom],
    elem: Scalar,
    sum: bool,
    leaf: &mut dyn FnMut(&mut Builder, &[VarId]) -> Atom,
) -> Atom {
    let indices: Vec<VarId> = extents.iter().map(|_| b.var("j", Type::I64)).collect();
    nest_level(b, extents, &indices, 0, elem, sum, leaf)
}

fn nest_level(
    b: &mut Builder,
    extents: &[Atom],
    indices: &[VarId],
    j: usize,
    elem: Scalar,
    sum: bool,
    leaf: &mut dyn FnMut(&mut Builder, &[VarId]) -> Atom,
) -> Atom {
    b.begin_block();
    let value =
        if j + 1 < extents.len() { nest_level(b, extents, indices, j + 1, elem, sum, leaf) } else { leaf(b, indices) };
    let block = b.end_block(vec![value]);
    let rank = if sum { 1 } else { (extents.len() - j) as u8 };
    let rows = b.var(if sum { "misses" } else { "gathered" }, Type::array(elem, rank));
    b.stmt(StmtKind::Let { vars: vec![rows], expr: Expr::Build { n: extents[j], index: indices[j], body: block } });
    if sum {
        b.let_one("misses", Expr::Reduce { op: ReduceOp::Sum, array: rows })
    } else {
        Atom::Var(rows)
    }
}

/// At one position of the gathered array (`indices`, the axes'
/// indices): whether the comprehensions count it, the indices of its read
/// of the gathered array, and whether they are in bounds (`dims`).
fn element_index(b: &mut Builder, g: &Gather, indices: &[VarId], dims: &[Atom]) -> (Atom, Vec<Atom>, Atom) {
    let mut counted = Atom::Bool(true);
    for (j, e) in g.extents.iter().enumerate() {
        if let Extent::Below(l) = *e {
            let below = b.binary(BinOp::Lt, Atom::Var(indices[j]), Atom::Var(indices[l]));
            counted = b.binary(BinOp::And, counted, below);
        }
    }
    // The index arithmetic, on these indices.
    let mut subst = Subst::default();
    for (axis, &j) in g.axes.iter().zip(indices) {
        subst.map.insert(axis.index, Atom::Var(j));
    }
    for &(d, op, x, y) in &g.defs {
        let v = b.binary(op, subst.atom(&x), subst.atom(&y));
        subst.map.insert(d, v);
    }
    let at: Vec<Atom> = g.indices.iter().map(|a| subst.atom(a)).collect();
    let mut in_bounds = Atom::Bool(true);
    for (i, d) in at.iter().zip(dims) {
        let lo = b.binary(BinOp::Ge, *i, Atom::I64(0));
        let hi = b.binary(BinOp::Lt, *i, *d);
        let both = b.binary(BinOp::And, lo, hi);
        in_bounds = b.binary(BinOp::And, in_bounds, both);
    }
    (counted, at, in_bounds)
}
