//! Forwarding of broadcast cotangents: an accumulator whose only write
//! adds one scalar into every element is that scalar wherever it is read.
//!
//! Reverse mode transposes `s = sum y` into a loop adding the cotangent of
//! `s` into every element of `y`'s cotangent, and the backward loop of the
//! comprehension that made `y` then reads that array element by element:
//!
//! ```text
//! let ct_y = zeros_like y         (removed when nothing else uses it)
//! for rev j < n do {              (removed)
//!   ct_y[j] += g
//! }
//! for rev i < n do {              for rev i < n do {
//!   let c = ct_y[i]                 let c = 0.0 + g
//!   ...                             ...
//! ```
//!
//! # Legality
//!
//! `a` (rank 1, bound by `zeros [e]` or `zeros_like y`, immutable)
//! qualifies when
//!
//! - exactly one statement writes it: `for [rev] j < N do { a[j] += g }`
//!   in `a`'s own block, `g` an immutable variable or a constant, and `N`
//!   the extent of `a` (`e`, the extent of the comprehension `y`, or
//!   `dim a 0`, `dim y 0`): every element is then `0.0 + g`, the bits of
//!   adding `g` into a zero, and no element is added into twice;
//! - every other use is a read `a[i]` in a statement after that loop, or
//!   its size.
//!
//! The loop goes, and a read becomes `0.0 + g` when `i` is the index of an
//! enclosing loop or comprehension whose count is the extent of `a` (so
//! the read cannot fail), else `a[i] + g` (the read of a zero, which
//! checks `i` as before). The zero array goes when no read or size of it
//! is left. Linear in the size of the function: one walk to classify the
//! uses, one to rewrite.

use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::types::{Scalar, Type};
use crate::visit::{child_blocks, stmt_uses_shallow};

/// Forwards the qualifying broadcast accumulators of `f` in place (module
/// docs).
pub fn forward_broadcasts(f: &mut Function) {
    let mut w = Walk {
        f,
        cands: HashMap::default(),
        dims: HashMap::default(),
        extents: HashMap::default(),
        loops: Vec::new(),
        depth: 0,
        checked_reads: HashSet::default(),
    };
    w.block(&f.body);
    let good: HashMap<VarId, Atom> =
        w.cands.into_iter().filter_map(|(a, c)| if c.bad { None } else { c.fill.map(|(_, g)| (a, g)) }).collect();
    if good.is_empty() {
        return;
    }
    let checked = w.checked_reads;
    let body = std::mem::take(&mut f.body);
    f.body = rewrite(f, body, &good, &checked);
}

/// What is known about one candidate accumulator.
struct Candidate {
    /// The array `zeros_like` copies the shape of.
    like: Option<VarId>,
    /// The fill loop's bound and added value, once seen.
    fill: Option<(Atom, Atom)>,
    /// The depth of the block binding it (the fill loop must be there).
    depth: usize,
    bad: bool,
}

struct Walk<'f> {
    f: &'f Function,
    cands: HashMap<VarId, Candidate>,
    /// `d = dim x 0`: `d` to `x`.
    dims: HashMap<VarId, VarId>,
    /// `y = build i < n => ...`: `y` to `n`; a candidate to its extent,
    /// when known.
    extents: HashMap<VarId, Atom>,
    /// The enclosing loops: index and count.
    loops: Vec<(VarId, Atom)>,
    /// The depth of the block being walked.
    depth: usize,
    /// The reads that may be out of bounds.
    checked_reads: HashSet<VarId>,
}

impl Walk<'_> {
    /// `n` with every `dim x 0` of an array `x` of known extent replaced
    /// by that extent.
    fn canon(&self, mut n: Atom) -> Atom {
        // Each step goes to an earlier binding; a few suffice in practice.
        for _ in 0..16 {
            match n {
                Atom::Var(d) => match self.dims.get(&d).and_then(|x| self.extents.get(x)) {
                    Some(e) => n = *e,
                    None => break,
                },
                _ => break,
            }
        }
        n
    }

    /// Whether `n` is the extent of candidate `c`, bound to `a`.
    fn is_extent(&self, c: &Candidate, a: VarId, n: &Atom) -> bool {
        let cn = self.canon(*n);
        let mut known = self.extents.get(&a).into_iter().chain(c.fill.as_ref().map(|(m, _)| m));
        if known.any(|e| self.canon(*e) == cn) {
            return true;
        }
        match n {
            Atom::Var(d) => self.dims.get(d).is_some_and(|x| *x == a || Some(*x) == c.like),
            _ => false,
        }
    }

    fn block(&mut self, b: &Block) {
        self.depth += 1;
        for s in &b.stmts {
            self.stmt(&s.kind);
        }
        self.depth -= 1;
        for r in &b.results {
            if let Atom::Var(v) = r {
                self.spoil(*v);
            }
        }
    }

    fn spoil(&mut self, v: VarId) {
        if let Some(c) = self.cands.get_mut(&v) {
            c.bad = true;
        }
    }

    fn stmt(&mut self, kind: &StmtKind) {
        match kind {
            StmtKind::Let { vars, expr } => {
                if let [v] = vars.as_slice() {
                    match expr {
                        Expr::Dim { array, axis: 0 } => {
                            // The zero array stays as long as its size is used.
                            self.dims.insert(*v, *array);
                            return;
                        }
                        Expr::Build { n, .. } => {
                            self.extents.insert(*v, *n);
                        }
                        Expr::Zeros(_) | Expr::ZerosLike(_)
                            if !self.f.var(*v).mutable && self.f.ty(*v) == Type::array(Scalar::F64, 1) =>
                        {
                            let (extent, like) = match expr {
                                Expr::ZerosLike(y) => (self.extents.get(y).copied(), Some(*y)),
                                Expr::Zeros(dims) => (dims.first().copied(), None),
                                _ => (None, None),
                            };
                            if let Some(e) = extent {
                                self.extents.insert(*v, e);
                            }
                            let depth = self.depth;
                            self.cands.insert(*v, Candidate { like, depth, fill: None, bad: false });
                        }
                        Expr::Index { array, indices } if self.cands.contains_key(array) => {
                            match (indices.as_slice(), self.cands.get(array)) {
                                ([i], Some(c)) if c.fill.is_some() => {
                                    let safe = self
                                        .loops
                                        .iter()
                                        .rev()
                                        .any(|(j, n)| Atom::Var(*j) == *i && self.is_extent(c, *array, n));
                                    if !safe {
                                        self.checked_reads.insert(*v);
                                    }
                                }
                                _ => self.spoil(*array),
                            }
                            return;
                        }
                        _ => {}
                    }
                }
            }
            StmtKind::For { n, index, body, .. } => {
                if let [Stmt { kind: StmtKind::AccAdd { acc, indices, value }, .. }] = body.stmts.as_slice() {
                    let fill = match (self.cands.get(acc), indices.as_slice(), value) {
                        (Some(c), [Atom::Var(j)], g)
                            if j == index && c.fill.is_none() && !c.bad && c.depth == self.depth =>
                        {
                            let g_ok = match g {
                                Atom::Var(g) => !self.f.var(*g).mutable && g != index && g != acc,
                                _ => true,
                            };
                            g_ok && self.is_extent(c, *acc, n)
                        }
                        _ => false,
                    };
                    if fill {
                        if let Some(c) = self.cands.get_mut(acc) {
                            c.fill = Some((*n, *value));
                        }
                        return;
                    }
                }
            }
            _ => {}
        }
        // Any other use spoils a candidate.
        stmt_uses_shallow(kind, &mut |v| {
            if let Some(c) = self.cands.get_mut(&v) {
                c.bad = true;
            }
        });
        self.nested(kind);
    }

    /// Walks the blocks nested in `kind`, with the loop it makes.
    fn nested(&mut self, kind: &StmtKind) {
        let lp = match kind {
            StmtKind::Let { expr: Expr::Build { n, index, .. } | Expr::Loop { n, index, .. }, .. }
            | StmtKind::For { n, index, .. } => Some((*index, *n)),
            _ => None,
        };
        if let Some(l) = lp {
            self.loops.push(l);
        }
        for b in child_blocks(kind) {
            self.block(b);
        }
        if lp.is_some() {
            self.loops.pop();
        }
    }
}

/// Drops the fill loops of `good` and turns their reads into `0.0 + g`, or
/// into `a[i] + g` (a read of the zero, which checks `i`) where `checked`.
fn rewrite(f: &mut Function, b: Block, good: &HashMap<VarId, Atom>, checked: &HashSet<VarId>) -> Block {
    let mut stmts = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let kind = match s.kind {
            StmtKind::For { ref body, .. } if matches!(body.stmts.as_slice(), [Stmt { kind: StmtKind::AccAdd { acc, .. }, .. }] if good.contains_key(acc)) =>
            {
                continue;
            }
            StmtKind::Let { vars, expr: Expr::Index { array, indices } } if good.contains_key(&array) => {
                let zero = if vars.iter().any(|v| checked.contains(v)) {
                    let t = f.new_var("zero", Type::F64);
                    let read = StmtKind::Let { vars: vec![t], expr: Expr::Index { array, indices } };
                    stmts.push(Stmt { kind: read, loc: s.loc });
                    Atom::Var(t)
                } else {
                    Atom::F64(0.0)
                };
                StmtKind::Let { vars, expr: Expr::Binary(BinOp::Add, zero, good[&array]) }
            }
            kind => crate::passes::inline::map_nested(kind, &mut |nb| rewrite(f, nb, good, checked)),
        };
        stmts.push(Stmt { kind, loc: s.loc });
    }
    Block { stmts, results: b.results }
}
