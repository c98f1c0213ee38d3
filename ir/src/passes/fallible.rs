//! Which bindings may fail at run time (index out of bounds, a slice out of
//! range, an integer division by zero, a negative size, an irregular array,
//! `maximum` of an empty array, ...), so that the passes that remove or move
//! statements (dead code elimination, fusion) keep every run-time error of
//! the program, in the same order.
//!
//! The analysis is conservative: a binding is *infallible* only when that
//! is evident from facts about sizes, collected in program order and scoped
//! by block:
//!
//! - `n = dim a k`, `check_size a == b`, the first extent of a `build` (its
//!   bound), the shapes of `zeros`, `zeros_like`, reshapes, rows, slices
//!   and copies are equalities between sizes (a union-find with an undo
//!   log, so facts of a nested block are forgotten when it ends);
//! - inside `build`/`loop`/`for` over `i < n`, `0 <= i < n`, so `a[i]` is in
//!   bounds when `n` is known to equal `dim a 0` (likewise on every axis of
//!   a multi-index); in the branch where a comparison of `i` with a literal
//!   proves `i >= 1` (the `else` of `i == 0`), `0 <= i - 1 < n` as well (a
//!   recurrence `if i == 0 then x[0] else x[i] * y[i - 1]`); and index 0
//!   is in bounds of an axis whose extent equals the bound of a loop whose
//!   body is running;
//! - the bounds chain: in `for r < n => for c < r`, `0 <= c < r < n`, so
//!   `a[c]` is in bounds when `n` equals `dim a 0`;
//! - the iterations of a loop over `0..n` run `d` at a time
//!   ([`super::jam`]): with `h = n / d`, `e = h * d` and `r = n - e`
//!   (`0 <= r < d` when `n >= 0`), in the body of a loop over `p < h`,
//!   `t = p * d` and `s = t + r` are at least 0 and at most `n - d`, so
//!   `t + k` and `s + k` for a literal `0 <= k < d` are in `0..n`; in the
//!   `then` branch of `r > 0`, so are `r - 1` and `n - 1`;
//! - a size is non-negative when it equals an extent, a loop index or a
//!   non-negative literal, or picks one of two such sizes (`if c then n
//!   else 0`);
//! - a loop over a count `c = if p then n else 0` bound at the top level
//!   (or over `c / d` or `c`'s remainder by `d`, or the `then` branch of
//!   that remainder being above 0: `c` is not 0 there) runs only when `p`
//!   holds: in its body, so does every condition `p` is a conjunction of
//!   (`p = and q r`), and a size `e = if q then a else b`
//!   bound at the top level equals `a` (the two comprehensions of
//!   [`super::gather`]: the hoisted one reads the gathered array, whose
//!   first extent is `if made then K else 0`, only when it was made);
//! - the rows of a `build` are regular when each extent of the body's result
//!   equals a size bound outside the body; the row extents of a `build` of
//!   arrays are then those its body computes before it depends on the
//!   index (`crate::shape::static_dims_in`), when they are sizes known to
//!   be at least 0;
//! - `a[0:hi]` is in range when `hi` is the extent of `a`, or a loop index
//!   below it, and is `hi` long;
//! - once `a[i, j]` (or `a[lo:hi]`) has been evaluated, the same indices are
//!   in bounds for every array whose extents on those axes equal `a`'s (a
//!   tangent or a cotangent mirroring a primal access);
//! - a view of an accumulator (a row, slice, reshape or copy of a `zeros`
//!   or `zeros_like`, or of a view of one) cannot fail. This is a
//!   convention of the IR that differentiation makes, not a fact the
//!   analysis proves, and a pass that makes accumulators must keep it:
//!   reverse mode views a cotangent only where the forward pass viewed
//!   its primal, which succeeded before the backward pass began (so do
//!   the additions into accumulators, which count as infallible); forward
//!   mode views a tangent right after the view of its primal, of the same
//!   shape. The backward loop of `sum(icf[k][0:D])` slices
//!   `ct_icf[k][0:D]`, which no size fact proves.

use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, BinOp, Block, Expr, Function, ReduceOp, StmtKind, VarId};
use crate::types::Scalar;

/// The result of the analysis of one function.
#[derive(Debug, Default, Clone)]
pub struct Fallible {
    /// The variables of every `let` whose evaluation may fail.
    vars: HashSet<VarId>,
    /// The first variable of every `let` of a `build` whose count is known
    /// to be at least 0 where it is evaluated.
    nonneg_counts: HashSet<VarId>,
    /// Accumulators (immutable arrays bound to `zeros` or `zeros_like`)
    /// and the views of them (rows, slices, reshapes and copies of those),
    /// each with the accumulator whose memory it is.
    accumulator_roots: HashMap<VarId, VarId>,
}

impl Fallible {
    /// True when statement `s` (as analysed) may fail at run time.
    pub fn stmt(&self, s: &StmtKind) -> bool {
        match s {
            StmtKind::Let { vars, .. } => vars.first().is_none_or(|v| self.vars.contains(v)),
            StmtKind::CheckSize { .. } | StmtKind::TapeRewind(_) => true,
            StmtKind::For { body, .. } => self.block(body),
            StmtKind::If { then_branch, else_branch, .. } => self.block(then_branch) || self.block(else_branch),
            StmtKind::Assign { .. } | StmtKind::AccAdd { .. } | StmtKind::AccZero { .. } | StmtKind::Push(_) => false,
        }
    }

    /// Marks the bindings of `vars` as infallible (the caller knows better).
    pub fn assume_safe(&mut self, vars: &std::collections::HashSet<VarId>) {
        self.vars.retain(|v| !vars.contains(v));
    }

    /// True when `v`, the first variable of a `let` of a `build`, is bound
    /// to a comprehension whose count is known to be at least 0 (it can
    /// fail only in its body).
    pub fn count_nonneg(&self, v: VarId) -> bool {
        self.nonneg_counts.contains(&v)
    }

    /// The accumulator (an immutable array bound to `zeros` or
    /// `zeros_like`) whose memory `v` is, when `v` is that accumulator or
    /// a view of it (a row, slice, reshape or copy, at any depth), whose
    /// binding cannot fail (module docs).
    pub fn accumulator_root(&self, v: VarId) -> Option<VarId> {
        self.accumulator_roots.get(&v).copied()
    }

    /// True when any statement of `b` may fail.
    pub fn block(&self, b: &Block) -> bool {
        b.stmts.iter().any(|s| self.stmt(&s.kind))
    }
}

/// Analyses `f` (see the module docs).
pub fn analyse(f: &Function) -> Fallible {
    let mut a = Analysis {
        f,
        keys: HashMap::default(),
        parent: Vec::new(),
        size: Vec::new(),
        min_depth: Vec::new(),
        nonneg: Vec::new(),
        lit: Vec::new(),
        undo: Vec::new(),
        depth: vec![0; f.vars.len()],
        bound: HashMap::default(),
        compare: HashMap::default(),
        positive: HashSet::default(),
        running: Vec::new(),
        counts: HashMap::default(),
        quotients: HashMap::default(),
        multiples: HashMap::default(),
        remainders: HashMap::default(),
        leftover: HashMap::default(),
        strides: HashMap::default(),
        positive_remainders: Vec::new(),
        selected: HashMap::default(),
        conjuncts: HashMap::default(),
        accessed: HashMap::default(),
        accessed_log: Vec::new(),
        out: Fallible::default(),
    };
    a.block(&f.body, 0);
    a.out
}

/// An access evaluated earlier: `a[i, ...]` or `a[lo:hi]`.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Access {
    Index(Vec<Key>),
    Slice(Key, Key),
}

/// A size: an `i64` variable or literal, or an extent of an array.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Var(VarId),
    Lit(i64),
    Dim(VarId, u8),
}

struct Analysis<'f> {
    f: &'f Function,
    keys: HashMap<Key, usize>,
    // Union-find over keys (union by size, no path compression, so that a
    // union can be undone), with per-class data: the smallest block depth
    // at which a member is bound, and whether a member is known >= 0.
    parent: Vec<usize>,
    size: Vec<usize>,
    min_depth: Vec<u32>,
    nonneg: Vec<bool>,
    /// The literal a class equals, if one of its members is a literal.
    lit: Vec<Option<i64>>,
    /// (child root, parent root, the parent's old min_depth, nonneg, lit).
    undo: Vec<(usize, usize, u32, bool, Option<i64>)>,
    /// The block depth at which each variable is bound, by variable
    /// (parameters and variables not yet bound: 0).
    depth: Vec<u32>,
    /// The bound `n` of each loop index, and of each `i - 1` computed
    /// where the loop index `i` is known to be at least 1: `0 <= v < n`.
    bound: HashMap<VarId, Atom>,
    /// Comparisons of an `i64` with a literal: `c = i OP k`, as `(i, OP, k)`
    /// with the variable on the left.
    compare: HashMap<VarId, (VarId, BinOp, i64)>,
    /// The variables bounded like loop indices (`0 <= v < n`, in `bound`)
    /// known to be at least 1 here (in the branch of a comparison that says
    /// so: the `else` of `i == 0`, the `then` of `i > 0`, ...).
    positive: HashSet<VarId>,
    /// The bounds of the loops whose bodies are being analysed, innermost
    /// last.
    running: Vec<Atom>,
    /// Counts that pick a size when a condition holds, bound at the top
    /// level: `c = if p then x else 0` as `c -> p` (the two
    /// comprehensions of [`super::gather`]). A loop over `c` runs only when
    /// `p` holds.
    counts: HashMap<VarId, VarId>,
    /// Sizes that depend on a condition, bound at the top level: `e = if
    /// q then a else b`, as `q -> [(e, a)]`.
    selected: HashMap<VarId, Vec<(VarId, Atom)>>,
    /// Conjunctions bound at the top level: `p = and q r`.
    conjuncts: HashMap<VarId, (Atom, Atom)>,
    /// Quotients, their multiples and remainders by a literal `d >= 1`:
    /// `h = n / d`, `e = h * d`, `r = n - e`, each as `(n, d)`.
    quotients: HashMap<VarId, (Atom, i64)>,
    multiples: HashMap<VarId, (Atom, i64)>,
    remainders: HashMap<VarId, (Atom, i64)>,
    /// Starts of runs of `d` iterations of a loop over `0..n`, as `(n,
    /// d)`: `0 <= t <= n - d` (`t = p * d`, `p` below a quotient `n / d`,
    /// or such a `t` plus the remainder of `n` by `d`, once: the flag
    /// says the remainder is added, and a second one is not).
    strides: HashMap<VarId, (Atom, i64, bool)>,
    /// Indices of loops over a remainder `r` of `n` by `d`, as `(n, d)`:
    /// `0 <= t < r <= n` while the loop runs (the iterations a loop run
    /// `d` at a time leaves over).
    leftover: HashMap<VarId, (Atom, i64)>,
    /// Remainders known to be at least 1 here (the `then` branch of `r >
    /// 0`).
    positive_remainders: Vec<VarId>,
    /// The arrays accessed with each index tuple or slice bounds, in scope.
    accessed: HashMap<Access, Vec<VarId>>,
    /// The accesses recorded, in order (to forget those of a nested block).
    accessed_log: Vec<Access>,
    out: Fallible,
}

impl Analysis<'_> {
    fn key(&mut self, k: Key) -> usize {
        if let Some(&id) = self.keys.get(&k) {
            return id;
        }
        let (depth, nonneg) = match k {
            Key::Lit(x) => (0, x >= 0),
            Key::Var(v) => (self.depth.get(v.index()).copied().unwrap_or(0), false),
            Key::Dim(v, _) => (self.depth.get(v.index()).copied().unwrap_or(0), true),
        };
        let id = self.parent.len();
        self.parent.push(id);
        self.size.push(1);
        self.min_depth.push(depth);
        self.nonneg.push(nonneg);
        self.lit.push(if let Key::Lit(x) = k { Some(x) } else { None });
        self.keys.insert(k, id);
        id
    }

    fn atom_key(&mut self, a: &Atom) -> Option<usize> {
        match a {
            Atom::Var(v) => Some(self.key(Key::Var(*v))),
            Atom::I64(x) => Some(self.key(Key::Lit(*x))),
            _ => None,
        }
    }

    fn find(&self, mut x: usize) -> usize {
        while self.parent[x] != x {
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        if self.size[a] > self.size[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.undo.push((a, b, self.min_depth[b], self.nonneg[b], self.lit[b]));
        self.parent[a] = b;
        self.size[b] += self.size[a];
        self.min_depth[b] = self.min_depth[b].min(self.min_depth[a]);
        self.nonneg[b] |= self.nonneg[a];
        self.lit[b] = self.lit[b].or(self.lit[a]);
    }

    fn rollback(&mut self, mark: usize) {
        while self.undo.len() > mark {
            let (a, b, depth, nonneg, lit) = self.undo.pop().expect("undo entry");
            self.parent[a] = a;
            self.size[b] -= self.size[a];
            self.min_depth[b] = depth;
            self.nonneg[b] = nonneg;
            self.lit[b] = lit;
        }
    }

    /// The literal value of extent `axis` of `array`, when known.
    fn lit_dim(&mut self, array: VarId, axis: u8) -> Option<i64> {
        let k = self.key(Key::Dim(array, axis));
        let r = self.find(k);
        self.lit[r]
    }

    fn same(&mut self, a: Key, b: Key) -> bool {
        let (a, b) = (self.key(a), self.key(b));
        self.find(a) == self.find(b)
    }

    fn union_keys(&mut self, a: Key, b: Key) {
        let (a, b) = (self.key(a), self.key(b));
        self.union(a, b);
    }

    fn rank(&self, v: VarId) -> u8 {
        self.f.ty(v).rank
    }

    fn access_key(a: &Atom) -> Option<Key> {
        match a {
            Atom::Var(v) => Some(Key::Var(*v)),
            Atom::I64(x) => Some(Key::Lit(*x)),
            _ => None,
        }
    }

    fn access_index(&self, indices: &[Atom]) -> Option<Access> {
        indices.iter().map(Self::access_key).collect::<Option<Vec<Key>>>().map(Access::Index)
    }

    fn access_slice(&self, lo: &Atom, hi: &Atom) -> Option<Access> {
        Some(Access::Slice(Self::access_key(lo)?, Self::access_key(hi)?))
    }

    /// True when `access` was evaluated earlier (in scope) on an array
    /// whose first `axes` extents equal `array`'s.
    fn accessed_like(&mut self, array: VarId, axes: u8, access: Option<Access>) -> bool {
        let Some(arrays) = access.and_then(|a| self.accessed.get(&a)).cloned() else { return false };
        arrays.iter().any(|&b| (0..axes).all(|axis| self.same(Key::Dim(b, axis), Key::Dim(array, axis))))
    }

    /// Records that `v` is bound at block depth `depth`.
    fn set_depth(&mut self, v: VarId, depth: u32) {
        if let Some(d) = self.depth.get_mut(v.index()) {
            *d = depth;
        }
    }

    /// `index` runs over `0..n` in a nested block at `depth`.
    /// An index below a remainder `r` of `m` by `d` is below `m` too (`r
    /// <= m` whenever `r >= 1`): its bound is `m`, the extent of the
    /// arrays it indexes.
    fn enter_loop(&mut self, index: VarId, n: Atom, depth: u32) {
        self.set_depth(index, depth);
        let n = match n.as_var().and_then(|r| self.remainders.get(&r)) {
            Some(&(m, d)) => {
                self.leftover.insert(index, (m, d));
                m
            }
            None => n,
        };
        self.bound.insert(index, n);
        let k = self.key(Key::Var(index));
        self.nonneg[k] = true;
    }

    /// [`Self::block`] for the body of a loop over `0..n`: while it runs,
    /// `n >= 1`, so index 0 is in bounds of an axis of extent `n`.
    /// When `n` is a count `if p then x else 0`, `p` holds while the body
    /// runs, and so does every condition `p` is a conjunction of: the sizes
    /// selected by them equal their `then` sizes there.
    fn loop_body(&mut self, n: Atom, body: &Block, depth: u32) -> (bool, Vec<bool>) {
        let mark = self.undo.len();
        if let Some(p) = n.as_var().and_then(|h| self.count_condition(h)) {
            self.assume(p);
        }
        self.running.push(n);
        let out = self.block(body, depth);
        self.running.pop();
        self.rollback(mark);
        out
    }

    /// The condition `p` of a count `c = if p then x else 0` that holds
    /// when `n` is at least 1: `n` is `c` itself, or a quotient `c / d`
    /// (at least 1 only when `c >= d >= 1`, so `c` is not 0), or a
    /// remainder of `c` by `d` (not 0 only when `c` is not).
    fn count_condition(&self, n: VarId) -> Option<VarId> {
        let c = match self.quotients.get(&n).or_else(|| self.remainders.get(&n)) {
            Some(&(Atom::Var(c), _)) => c,
            Some(_) => return None,
            None => n,
        };
        self.counts.get(&c).copied()
    }

    /// Unites each size selected by `p`, or by a condition `p` is a
    /// conjunction of, with the size it is when the condition holds.
    fn assume(&mut self, p: VarId) {
        /// The most conditions followed (the walk stays linear).
        const MAX_CONDITIONS: usize = 16;
        let mut todo = vec![p];
        let mut seen = 0;
        while let Some(q) = todo.pop() {
            seen += 1;
            if seen > MAX_CONDITIONS {
                break;
            }
            for (e, a) in self.selected.get(&q).cloned().unwrap_or_default() {
                if let (Some(ek), Some(ak)) = (self.atom_key(&Atom::Var(e)), self.atom_key(&a)) {
                    self.union(ek, ak);
                }
            }
            if let Some(&(x, y)) = self.conjuncts.get(&q) {
                todo.extend([x, y].iter().filter_map(Atom::as_var));
            }
        }
    }

    /// Whether `0 <= i < dim array axis`: `i` is bounded by a size equal
    /// to the extent (a loop index, or `i - 1` where that index is at
    /// least 1), or by another such bounded variable that is (`c < r` in
    /// `for r < n => for c < r`, with `n` the extent: `c < r < n`).
    fn below_extent(&mut self, i: VarId, array: VarId, axis: u8) -> bool {
        /// The most bounds followed (nested triangular loops).
        const MAX_CHAIN: usize = 4;
        let d = self.key(Key::Dim(array, axis));
        let mut at = i;
        for _ in 0..MAX_CHAIN {
            let Some(n) = self.bound.get(&at).copied() else { return false };
            match self.atom_key(&n) {
                Some(nk) if self.find(nk) == self.find(d) => return true,
                _ => {}
            }
            match n {
                Atom::Var(w) => at = w,
                _ => return false,
            }
        }
        false
    }

    /// Whether axis `axis` of `array` has an extent that a running loop's
    /// bound equals (so it is at least 1).
    fn nonempty_axis(&mut self, array: VarId, axis: u8) -> bool {
        let d = self.key(Key::Dim(array, axis));
        let d = self.find(d);
        for k in (0..self.running.len()).rev() {
            let n = self.running[k];
            if self.atom_key(&n).is_some_and(|nk| self.find(nk) == d) {
                return true;
            }
        }
        false
    }

    /// True when `array[lo:hi]` is a prefix of `array` known in range:
    /// `lo` is 0 and `hi` the extent, or a loop index below it (`0 <= hi
    /// < n`, `n` the extent).
    fn prefix(&mut self, array: VarId, lo: &Atom, hi: &Atom) -> bool {
        if *lo != Atom::I64(0) {
            return false;
        }
        let d = self.key(Key::Dim(array, 0));
        let d = self.find(d);
        let equal = |a: &mut Self, x: &Atom| a.atom_key(x).is_some_and(|k| a.find(k) == d);
        if equal(self, hi) {
            return true;
        }
        match hi {
            Atom::Var(i) => match self.bound.get(i).copied() {
                Some(n) => equal(self, &n),
                None => false,
            },
            _ => false,
        }
    }

    /// A size that is certainly >= 0.
    fn nonneg_size(&mut self, n: &Atom) -> bool {
        match n {
            Atom::I64(x) => *x >= 0,
            Atom::Var(_) => {
                let k = self.atom_key(n).expect("a size variable");
                let r = self.find(k);
                self.nonneg[r]
            }
            _ => false,
        }
    }

    /// Analyses `b` at nesting `depth`; returns whether any statement may
    /// fail, and for each array result whether all its extents equal sizes
    /// bound outside the block (at a depth below `depth`).
    fn block(&mut self, b: &Block, depth: u32) -> (bool, Vec<bool>) {
        let mark = self.undo.len();
        let accessed_mark = self.accessed_log.len();
        let mut fails = false;
        for s in &b.stmts {
            fails |= self.stmt(&s.kind, depth);
        }
        let invariant = b
            .results
            .iter()
            .map(|r| match r {
                Atom::Var(v) => (0..self.rank(*v)).all(|axis| {
                    let k = self.key(Key::Dim(*v, axis));
                    let root = self.find(k);
                    self.min_depth[root] < depth
                }),
                _ => true,
            })
            .collect();
        self.rollback(mark);
        while self.accessed_log.len() > accessed_mark {
            let a = self.accessed_log.pop().expect("access");
            if let Some(arrays) = self.accessed.get_mut(&a) {
                arrays.pop();
            }
        }
        (fails, invariant)
    }

    fn stmt(&mut self, s: &StmtKind, depth: u32) -> bool {
        match s {
            StmtKind::Let { vars, expr } => {
                for v in vars {
                    self.set_depth(*v, depth);
                }
                if let (Expr::Build { n, .. }, Some(v)) = (expr, vars.first()) {
                    if self.nonneg_size(n) {
                        self.out.nonneg_counts.insert(*v);
                    }
                }
                let fails = !self.accumulator_view(vars, expr) && self.expr(expr, depth);
                if fails {
                    self.out.vars.extend(vars.iter().copied());
                }
                self.facts(vars, expr);
                fails || vars.is_empty()
            }
            StmtKind::CheckSize { a, b, .. } => {
                if let (Some(a), Some(b)) = (self.atom_key(a), self.atom_key(b)) {
                    self.union(a, b);
                }
                true
            }
            StmtKind::For { n, index, body, .. } => {
                self.enter_loop(*index, *n, depth + 1);
                self.loop_body(*n, body, depth + 1).0
            }
            StmtKind::If { cond, then_branch, else_branch } => self.branches(cond, then_branch, else_branch, depth),
            StmtKind::TapeRewind(_) => true,
            StmtKind::Assign { .. } | StmtKind::AccAdd { .. } | StmtKind::AccZero { .. } | StmtKind::Push(_) => false,
        }
    }

    /// Whether `vars = expr` views an accumulator: a row, a slice or a
    /// reshape of an accumulator or of a view of one, or a copy of one
    /// (`zeros`, `zeros_like` make one). Records `vars` as such, with
    /// the accumulator ([`Fallible::accumulator_root`]). Reverse
    /// mode views a cotangent only where the forward pass viewed its
    /// primal, which succeeded before the backward pass began (as for
    /// additions into accumulators, which count as infallible): such a view
    /// cannot fail (the code generators keep its checks).
    fn accumulator_view(&mut self, vars: &[VarId], expr: &Expr) -> bool {
        let [v] = vars[..] else { return false };
        if self.f.var(v).mutable || !self.f.ty(v).is_array() {
            return false;
        }
        let root = match expr {
            Expr::Zeros(_) | Expr::ZerosLike(_) => Some(v),
            Expr::Index { array, .. }
            | Expr::Slice { array, .. }
            | Expr::Reshape { array, .. }
            | Expr::Atom(Atom::Var(array)) => self.out.accumulator_root(*array),
            _ => None,
        };
        if let Some(root) = root {
            self.out.accumulator_roots.insert(v, root);
        }
        root.is_some()
    }

    /// Whether evaluating `expr` may fail; analyses its nested blocks.
    fn expr(&mut self, expr: &Expr, depth: u32) -> bool {
        match expr {
            Expr::Atom(_)
            | Expr::Dim { .. }
            | Expr::Unary(..)
            | Expr::ZerosLike(_)
            | Expr::Zeros(_)
            | Expr::Pop
            | Expr::TapeMark => false,
            Expr::Binary(op, a, b) => {
                let int = match a {
                    Atom::Var(v) => self.f.ty(*v).elem == Scalar::I64 && self.f.ty(*v).rank == 0,
                    Atom::I64(_) => true,
                    _ => false,
                };
                matches!(op, BinOp::Div | BinOp::Rem) && int && !matches!(b, Atom::I64(d) if *d != 0)
            }
            Expr::Index { array, indices } => {
                let by_bounds = indices.iter().enumerate().all(|(axis, i)| {
                    if let Atom::I64(k) = i {
                        return self.lit_dim(*array, axis as u8).is_some_and(|d| 0 <= *k && *k < d)
                            || (*k == 0 && self.nonempty_axis(*array, axis as u8));
                    }
                    let Atom::Var(i) = i else { return false };
                    self.below_extent(*i, *array, axis as u8)
                });
                !by_bounds && !self.accessed_like(*array, indices.len() as u8, self.access_index(indices))
            }
            Expr::Slice { array, lo, hi } => {
                let by_literals = match (lo, hi, self.lit_dim(*array, 0)) {
                    (Atom::I64(l), Atom::I64(h), Some(d)) => 0 <= *l && l <= h && *h <= d,
                    _ => false,
                };
                !by_literals
                    && !self.prefix(*array, lo, hi)
                    && !self.accessed_like(*array, 1, self.access_slice(lo, hi))
            }
            // (The element count of a reshape, and the indices and row
            // shape of an update, are not tracked.)
            Expr::Call { .. } | Expr::Reshape { .. } | Expr::Update { .. } => true,
            Expr::Reduce { op, .. } => *op != ReduceOp::Sum,
            Expr::ArrayLit { elem_ty, elems } => {
                if elem_ty.rank == 0 || elems.len() < 2 {
                    return false;
                }
                let Some(Atom::Var(first)) = elems.first().copied() else { return true };
                !elems.iter().all(|e| match e {
                    Atom::Var(e) => (0..elem_ty.rank).all(|axis| self.same(Key::Dim(first, axis), Key::Dim(*e, axis))),
                    _ => false,
                })
            }
            Expr::Build { n, index, body } => {
                self.enter_loop(*index, *n, depth + 1);
                let (fails, invariant) = self.loop_body(*n, body, depth + 1);
                // The rows of an array-valued build must have one shape.
                let regular = body.results.iter().zip(&invariant).all(|(r, inv)| match r {
                    Atom::Var(v) if self.rank(*v) > 0 => *inv,
                    _ => true,
                });
                fails || !regular || !self.nonneg_size(n)
            }
            Expr::Loop { n, index, states, body, .. } => {
                self.enter_loop(*index, *n, depth + 1);
                for s in states {
                    self.set_depth(*s, depth + 1);
                }
                let (fails, _) = self.loop_body(*n, body, depth + 1);
                fails || !self.nonneg_size(n)
            }
            Expr::While { states, cond, body, .. } => {
                for s in states {
                    self.set_depth(*s, depth + 1);
                }
                let c = self.block(cond, depth + 1).0;
                self.block(body, depth + 1).0 || c
            }
            Expr::If { cond, then_branch, else_branch } => self.branches(cond, then_branch, else_branch, depth),
        }
    }

    /// Analyses the branches of `if cond`; whether either may fail. A loop
    /// index that `cond` (or its negation) proves at least 1 is known so in
    /// that branch.
    fn branches(&mut self, cond: &Atom, then_branch: &Block, else_branch: &Block, depth: u32) -> bool {
        let (in_then, in_else) = match cond {
            Atom::Var(c) => match self.compare.get(c) {
                Some(&(i, op, k)) if self.bound.contains_key(&i) => match (op, k) {
                    // i == 0: i >= 1 otherwise.
                    (BinOp::Eq, 0) | (BinOp::Lt, 1) | (BinOp::Le, 0) => (None, Some(i)),
                    (BinOp::Ne, 0) | (BinOp::Gt, 0) | (BinOp::Ge, 1) => (Some(i), None),
                    _ => (None, None),
                },
                _ => (None, None),
            },
            _ => (None, None),
        };
        let branch = |a: &mut Self, b: &Block, positive: Option<VarId>| {
            let added = positive.is_some_and(|i| a.positive.insert(i));
            let fails = a.block(b, depth + 1).0;
            if let (true, Some(i)) = (added, positive) {
                a.positive.remove(&i);
            }
            fails
        };
        // A remainder `r > 0` (the last iteration of a loop run `d` at a
        // time).
        let remainder = match cond {
            Atom::Var(c) => match self.compare.get(c) {
                Some(&(r, BinOp::Gt, 0) | &(r, BinOp::Ge, 1)) if self.remainders.contains_key(&r) => Some(r),
                _ => None,
            },
            _ => None,
        };
        if let Some(r) = remainder {
            self.positive_remainders.push(r);
            let mark = self.undo.len();
            if let Some(p) = self.count_condition(r) {
                self.assume(p);
            }
            let t = branch(self, then_branch, None);
            self.rollback(mark);
            self.positive_remainders.pop();
            return branch(self, else_branch, None) || t;
        }
        let t = branch(self, then_branch, in_then);
        branch(self, else_branch, in_else) || t
    }

    /// The extents of the array rows of `vars = build index < n => body`,
    /// known from what the body computes before it depends on the index
    /// (`crate::shape::static_dims_in`): each equals its row axis of the
    /// array when it is a size known to be at least 0 (a comprehension
    /// that runs zero times may have rows of a negative static extent,
    /// which is then 0).
    fn row_facts(&mut self, vars: &[VarId], index: VarId, body: &Block) {
        let arrays: Vec<(VarId, Atom)> =
            vars.iter().zip(&body.results).filter(|(w, _)| self.rank(**w) > 1).map(|(w, r)| (*w, *r)).collect();
        if arrays.is_empty() {
            return;
        }
        let rows: Vec<Atom> = arrays.iter().map(|(_, r)| *r).collect();
        let shapes = crate::shape::static_dims_in(self.f, index, &body.stmts, &rows);
        for ((w, _), dims) in arrays.iter().zip(shapes) {
            for (axis, d) in dims.iter().flatten().enumerate() {
                self.row_fact(*w, axis, d);
            }
        }
    }

    /// Row axis `axis` of `w` (its axis `axis + 1`) has the static extent
    /// `d` ([`Self::row_facts`]).
    fn row_fact(&mut self, w: VarId, axis: usize, d: &crate::shape::StaticDim) {
        use crate::shape::StaticDim;
        let key = match d {
            StaticDim::Lit(x) if *x >= 0 => Key::Lit(*x),
            StaticDim::Var(v) => Key::Var(*v),
            StaticDim::DimOf(a, ax) => Key::Dim(*a, *ax),
            _ => return,
        };
        let id = self.key(key);
        let root = self.find(id);
        if let (true, Ok(axis)) = (self.nonneg[root], u8::try_from(axis + 1)) {
            self.union_keys(Key::Dim(w, axis), key);
        }
    }

    /// True when `v` is bound once, at the top level (its facts hold for
    /// the rest of the function).
    fn top_level(&self, v: VarId) -> bool {
        self.depth.get(v.index()).is_some_and(|d| *d == 0) && !self.f.var(v).mutable
    }

    /// A literal, or a variable that keeps its value (not mutable): facts
    /// about it hold wherever it is in scope.
    fn fixed(&self, a: &Atom) -> bool {
        a.as_var().is_none_or(|v| !self.f.var(v).mutable)
    }

    /// The facts of [`Analysis::quotients`] and the maps after it about
    /// `v = a op b`, an `i64` binding.
    fn runs(&mut self, v: VarId, op: BinOp, a: Atom, b: Atom) {
        if self.f.var(v).mutable {
            return;
        }
        let lit = |x: Atom| if let Atom::I64(k) = x { Some(k) } else { None };
        // `v` is in `0..n`.
        let below = |s: &mut Self, n: Atom| {
            s.bound.insert(v, n);
            let k = s.key(Key::Var(v));
            s.nonneg[k] = true;
        };
        match op {
            BinOp::Div => {
                if let Some(d) = lit(b).filter(|d| *d >= 1 && self.fixed(&a)) {
                    self.quotients.insert(v, (a, d));
                }
            }
            BinOp::Mul => {
                for (x, y) in [(a, b), (b, a)] {
                    let (Some(x), Some(d)) = (x.as_var(), lit(y)) else { continue };
                    if let Some(&q) = self.quotients.get(&x).filter(|q| q.1 == d) {
                        self.multiples.insert(v, q);
                        return;
                    }
                    // `x` below a quotient `h = n / d`: `0 <= x * d <= n - d`.
                    let h = self.bound.get(&x).and_then(Atom::as_var);
                    if let Some(&q) = h.and_then(|h| self.quotients.get(&h)).filter(|q| q.1 == d) {
                        self.strides.insert(v, (q.0, q.1, false));
                        below(self, q.0);
                        return;
                    }
                }
            }
            BinOp::Sub if lit(b) == Some(1) => {
                let n = self.positive_remainders.iter().rev().find_map(|r| {
                    let (n, _) = self.remainders[r];
                    (a == Atom::Var(*r) || a == n).then_some(n)
                });
                if let Some(n) = n {
                    below(self, n);
                }
            }
            BinOp::Sub => {
                if let Some(&m) = b.as_var().and_then(|e| self.multiples.get(&e)).filter(|m| m.0 == a) {
                    self.remainders.insert(v, m);
                }
            }
            BinOp::Add => {
                for (x, y) in [(a, b), (b, a)] {
                    let Some(&(n, d, shifted)) = x.as_var().and_then(|t| self.strides.get(&t)) else { continue };
                    match y {
                        Atom::I64(k) if (0..d).contains(&k) => below(self, n),
                        Atom::Var(r) if !shifted && self.remainders.get(&r) == Some(&(n, d)) => {
                            self.strides.insert(v, (n, d, true));
                            below(self, n);
                        }
                        _ => continue,
                    }
                    return;
                }
                // `e + t`, `e = (n / d) * d` and `t` below `n - e`: below `n`.
                for (x, y) in [(a, b), (b, a)] {
                    let (Some(x), Some(y)) = (x.as_var(), y.as_var()) else { continue };
                    if let Some(&m) = self.multiples.get(&x).filter(|m| self.leftover.get(&y) == Some(m)) {
                        below(self, m.0);
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    /// Size equalities established by binding `vars` to `expr`.
    fn facts(&mut self, vars: &[VarId], expr: &Expr) {
        let Some(&v) = vars.first() else { return };
        // A view of an accumulator, known not to fail without a check of
        // its own, proves nothing of the other arrays of its extents.
        let access = match expr {
            _ if self.out.accumulator_roots.contains_key(&v) => None,
            Expr::Index { array, indices } => self.access_index(indices).map(|a| (a, *array)),
            Expr::Slice { array, lo, hi } => self.access_slice(lo, hi).map(|a| (a, *array)),
            _ => None,
        };
        if let Some((a, array)) = access {
            self.accessed.entry(a.clone()).or_default().push(array);
            self.accessed_log.push(a);
        }
        if let Expr::Binary(op, a, b) = expr {
            if self.f.ty(v) == crate::types::Type::I64 {
                self.runs(v, *op, *a, *b);
            }
        }
        // A mutable variable may be assigned another value (an array
        // another shape) after its binding: what the binding says of it
        // does not hold where it is read (a mutable boolean bound to a
        // comparison and then assigned, read by a branch).
        if vars.iter().any(|w| self.f.var(*w).mutable) {
            return;
        }
        match expr {
            Expr::Binary(op @ (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), a, b)
                if self.fixed(a) && self.fixed(b) =>
            {
                let flipped = match op {
                    BinOp::Lt => BinOp::Gt,
                    BinOp::Le => BinOp::Ge,
                    BinOp::Gt => BinOp::Lt,
                    BinOp::Ge => BinOp::Le,
                    op => *op,
                };
                match (a, b) {
                    (Atom::Var(i), Atom::I64(k)) => {
                        self.compare.insert(v, (*i, *op, *k));
                    }
                    (Atom::I64(k), Atom::Var(i)) => {
                        self.compare.insert(v, (*i, flipped, *k));
                    }
                    _ => {}
                }
            }
            // i - 1 where the loop index i < n is at least 1: 0 <= v < n.
            Expr::Binary(BinOp::Sub, Atom::Var(i), Atom::I64(1)) if self.positive.contains(i) => {
                if let Some(n) = self.bound.get(i).copied() {
                    self.bound.insert(v, n);
                    let k = self.key(Key::Var(v));
                    self.nonneg[k] = true;
                }
            }
            Expr::Dim { array, axis } => self.union_keys(Key::Var(v), Key::Dim(*array, *axis)),
            Expr::Binary(BinOp::And, x, y) if self.top_level(v) && self.fixed(x) && self.fixed(y) => {
                self.conjuncts.insert(v, (*x, *y));
            }
            Expr::If { cond: Atom::Var(q), then_branch, else_branch }
                if self.top_level(v)
                    && !self.f.var(*q).mutable
                    && self.f.ty(v) == crate::types::Type::I64
                    && then_branch.stmts.is_empty()
                    && else_branch.stmts.is_empty() =>
            {
                let (&[a], &[b]) = (then_branch.results.as_slice(), else_branch.results.as_slice()) else { return };
                if self.nonneg_size(&a) && self.nonneg_size(&b) {
                    let k = self.key(Key::Var(v));
                    let r = self.find(k);
                    self.nonneg[r] = true;
                }
                if !self.fixed(&a) {
                    return;
                }
                self.selected.entry(*q).or_default().push((v, a));
                if b == Atom::I64(0) {
                    self.counts.insert(v, *q);
                }
            }
            Expr::Atom(Atom::Var(x)) => {
                for axis in 0..self.rank(v) {
                    self.union_keys(Key::Dim(v, axis), Key::Dim(*x, axis));
                }
                if self.rank(v) == 0 && self.f.ty(v).elem == Scalar::I64 {
                    self.union_keys(Key::Var(v), Key::Var(*x));
                }
            }
            Expr::Atom(Atom::I64(x)) => self.union_keys(Key::Var(v), Key::Lit(*x)),
            Expr::ZerosLike(p) | Expr::Update { array: p, .. } => {
                for axis in 0..self.rank(v) {
                    self.union_keys(Key::Dim(v, axis), Key::Dim(*p, axis));
                }
            }
            Expr::Reshape { dims, .. } | Expr::Zeros(dims) => {
                for (axis, d) in dims.iter().enumerate() {
                    if let Some(dk) = self.atom_key(d) {
                        let k = self.key(Key::Dim(v, axis as u8));
                        self.union(k, dk);
                    }
                }
            }
            Expr::Index { array, indices } => {
                let skip = indices.len() as u8;
                for axis in 0..self.rank(v) {
                    self.union_keys(Key::Dim(v, axis), Key::Dim(*array, axis + skip));
                }
            }
            Expr::Slice { array, lo, hi } => {
                for axis in 1..self.rank(v) {
                    self.union_keys(Key::Dim(v, axis), Key::Dim(*array, axis));
                }
                match (lo, hi) {
                    (Atom::I64(l), Atom::I64(h)) => self.union_keys(Key::Dim(v, 0), Key::Lit(h.wrapping_sub(*l))),
                    // `a[0:hi]` is `hi` long (when it does not fail, `hi`
                    // is at least 0).
                    (Atom::I64(0), Atom::Var(h)) => self.union_keys(Key::Dim(v, 0), Key::Var(*h)),
                    _ => {}
                }
            }
            Expr::ArrayLit { elems, .. } => self.union_keys(Key::Dim(v, 0), Key::Lit(elems.len() as i64)),
            Expr::Build { n, index, body } => {
                for w in vars {
                    if self.rank(*w) > 0 {
                        if let Some(nk) = self.atom_key(n) {
                            let d = self.key(Key::Dim(*w, 0));
                            self.union(d, nk);
                        }
                    }
                }
                self.row_facts(vars, *index, body);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::types::Type;

    /// `f(x: [n]f64, k: i64)`: the function and its two params.
    fn func() -> (Function, VarId, VarId) {
        let (f, ps) = Function::with_params("f", &[Type::array(Scalar::F64, 1), Type::I64], &[Type::F64]);
        (f, ps[0], ps[1])
    }

    /// `x[0]` may fail outside a loop over `dim x 0` (after it) and in a
    /// loop over another size, and cannot inside it (the body runs only
    /// when the extent is at least 1); `x[1]` may.
    #[test]
    fn index_zero_is_safe_inside_a_loop_over_the_extent() {
        let (mut f, x, k) = func();
        let mut b = Builder::new(&mut f);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let (i, j) = (b.var("i", Type::I64), b.var("j", Type::I64));
        b.begin_block();
        let first = b.let1("a", Expr::Index { array: x, indices: vec![Atom::I64(0)] }, Type::F64);
        let second = b.let1("s", Expr::Index { array: x, indices: vec![Atom::I64(1)] }, Type::F64);
        let body = b.end_block(vec![Atom::Var(first)]);
        b.let1("y", Expr::Build { n: Atom::Var(n), index: i, body }, Type::array(Scalar::F64, 1));
        b.begin_block();
        let other = b.let1("t", Expr::Index { array: x, indices: vec![Atom::I64(0)] }, Type::F64);
        let body = b.end_block(vec![Atom::Var(other)]);
        b.let1("z", Expr::Build { n: Atom::Var(k), index: j, body }, Type::array(Scalar::F64, 1));
        let outside = b.let1("o", Expr::Index { array: x, indices: vec![Atom::I64(0)] }, Type::F64);
        f.body = b.finish(vec![Atom::Var(outside)]);
        let a = analyse(&f);
        let fails = |v: VarId| a.vars.contains(&v);
        assert!(fails(outside), "x[0] where x may be empty");
        assert!(!fails(first), "x[0] in a loop over dim x 0");
        assert!(fails(second), "x[1]");
        assert!(fails(other), "x[0] in a loop over another size");
    }

    /// A row, a slice of it, a copy and a reshape of an accumulator
    /// (`zeros_like m`) cannot fail: the code that makes them mirrors
    /// views of the primal that succeeded (here the primal's views come
    /// after them, so that they prove nothing of the cotangent's). The
    /// primal's views may fail, and so may an element read from an
    /// accumulator at an unknown index.
    #[test]
    fn views_of_accumulators_cannot_fail() {
        let (mut f, x, k) = func();
        let mut b = Builder::new(&mut f);
        let two_d = Type::array(Scalar::F64, 2);
        let row_ty = Type::array(Scalar::F64, 1);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let m = b.let1("m", Expr::Reshape { array: x, dims: vec![Atom::Var(k), Atom::I64(2)] }, two_d);
        let acc = b.let1("acc", Expr::ZerosLike(m), two_d);
        let copy = b.let1("copy", Expr::Atom(Atom::Var(acc)), two_d);
        let row = b.let1("row", Expr::Index { array: copy, indices: vec![Atom::I64(0)] }, row_ty);
        let part = b.let1("part", Expr::Slice { array: copy, lo: Atom::I64(1), hi: Atom::Var(k) }, two_d);
        let flat = b.let1("flat", Expr::Reshape { array: acc, dims: vec![Atom::Var(n)] }, row_ty);
        let elem = b.let1("e", Expr::Index { array: acc, indices: vec![Atom::Var(k), Atom::I64(0)] }, Type::F64);
        let primal_row = b.let1("prow", Expr::Index { array: m, indices: vec![Atom::I64(0)] }, row_ty);
        let primal_part = b.let1("ppart", Expr::Slice { array: m, lo: Atom::I64(1), hi: Atom::Var(k) }, two_d);
        f.body = b.finish(vec![Atom::Var(elem)]);
        let a = analyse(&f);
        let fails = |v: VarId| a.vars.contains(&v);
        for (v, what) in [(acc, "zeros_like"), (copy, "a copy"), (row, "a row"), (part, "a slice"), (flat, "a reshape")]
        {
            assert!(!fails(v), "{what} of an accumulator");
        }
        assert!(fails(m), "a reshape of the parameter");
        assert!(fails(primal_row) && fails(primal_part), "views of the parameter");
        assert!(fails(elem), "an element of an accumulator at an unknown index");
    }

    /// `for i < n => if i == 0 then x[i - 1] else x[i - 1]` (and `i > 0`,
    /// `0 < i`, `i != 1`): `i - 1` is in bounds in the branch where
    /// `i >= 1`, not in the other, and `i - 2` in neither.
    #[test]
    fn the_previous_index_is_safe_where_the_index_is_at_least_one() {
        for (op, lhs_var, lit, positive_in_then) in [
            (BinOp::Eq, true, 0, Some(false)),
            (BinOp::Gt, true, 0, Some(true)),
            (BinOp::Lt, false, 0, Some(true)),
            (BinOp::Ne, true, 1, None),
        ] {
            let (mut f, x, _) = func();
            let mut b = Builder::new(&mut f);
            let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
            let i = b.var("i", Type::I64);
            b.begin_block();
            let (l, r) = if lhs_var { (Atom::Var(i), Atom::I64(lit)) } else { (Atom::I64(lit), Atom::Var(i)) };
            let c = b.let1("c", Expr::Binary(op, l, r), Type::BOOL);
            let branch = |b: &mut Builder, by: i64| {
                b.begin_block();
                let prev = b.binary(BinOp::Sub, Atom::Var(i), Atom::I64(by));
                let e = b.let1("e", Expr::Index { array: x, indices: vec![prev] }, Type::F64);
                (b.end_block(vec![Atom::Var(e)]), e)
            };
            let (then_branch, in_then) = branch(&mut b, 1);
            let (else_branch, in_else) = branch(&mut b, 1);
            let r = b.let1("r", Expr::If { cond: Atom::Var(c), then_branch, else_branch }, Type::F64);
            let (two_back, by_two) = {
                let (then_branch, e) = branch(&mut b, 2);
                let (else_branch, _) = branch(&mut b, 2);
                (b.let1("r2", Expr::If { cond: Atom::Var(c), then_branch, else_branch }, Type::F64), e)
            };
            let body = b.end_block(vec![Atom::Var(r)]);
            let y = b.let1("y", Expr::Build { n: Atom::Var(n), index: i, body }, Type::array(Scalar::F64, 1));
            f.body = b.finish(vec![Atom::Var(y)]);
            let a = analyse(&f);
            let fails = |v: VarId| a.vars.contains(&v);
            let case = format!("{op:?} {lit} (variable on the left: {lhs_var})");
            match positive_in_then {
                Some(true) => assert!(!fails(in_then) && fails(in_else), "{case}"),
                Some(false) => assert!(fails(in_then) && !fails(in_else), "{case}"),
                // i != 1 holds for i = 0.
                None => assert!(fails(in_then), "{case}"),
            }
            assert!(fails(by_two) && fails(two_back), "{case}: x[i - 2]");
        }
    }

    /// `for i < n => { mut c = i > 0; c := true; if c then x[i - 1] else
    /// 0 }`: the branch reads `c` after it was assigned, so `i - 1` may be
    /// out of bounds.
    #[test]
    fn a_mutable_comparison_proves_nothing_about_the_index() {
        let (mut f, x, _) = func();
        let c = f.new_mut_var("c", Type::BOOL);
        let mut b = Builder::new(&mut f);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let i = b.var("i", Type::I64);
        b.begin_block();
        b.stmt(StmtKind::Let { vars: vec![c], expr: Expr::Binary(BinOp::Gt, Atom::Var(i), Atom::I64(0)) });
        b.stmt(StmtKind::Assign { var: c, value: Atom::Bool(true) });
        b.begin_block();
        let prev = b.binary(BinOp::Sub, Atom::Var(i), Atom::I64(1));
        let e = b.let1("e", Expr::Index { array: x, indices: vec![prev] }, Type::F64);
        let then_branch = b.end_block(vec![Atom::Var(e)]);
        let else_branch = Block { stmts: Vec::new(), results: vec![Atom::F64(0.0)] };
        let r = b.let1("r", Expr::If { cond: Atom::Var(c), then_branch, else_branch }, Type::F64);
        let body = b.end_block(vec![Atom::Var(r)]);
        let y = b.let1("y", Expr::Build { n: Atom::Var(n), index: i, body }, Type::array(Scalar::F64, 1));
        f.body = b.finish(vec![Atom::Var(y)]);
        let a = analyse(&f);
        assert!(a.vars.contains(&e), "x[i - 1] where c was assigned true");
    }

    #[test]
    fn indices_bounded_by_the_extent_are_safe_others_may_fail() {
        let (mut f, x, k) = func();
        let mut b = Builder::new(&mut f);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let unknown = b.let1("a", Expr::Index { array: x, indices: vec![Atom::Var(k)] }, Type::F64);
        let again = b.let1("b", Expr::Index { array: x, indices: vec![Atom::Var(k)] }, Type::F64);
        let div = b.let1("q", Expr::Binary(BinOp::Div, Atom::I64(10), Atom::Var(k)), Type::I64);
        let half = b.let1("h", Expr::Binary(BinOp::Div, Atom::Var(k), Atom::I64(2)), Type::I64);
        let i = b.var("i", Type::I64);
        b.begin_block();
        let e = b.let1("e", Expr::Index { array: x, indices: vec![Atom::Var(i)] }, Type::F64);
        let shifted = b.binary(BinOp::Add, Atom::Var(i), Atom::I64(1));
        let g = b.let1("g", Expr::Index { array: x, indices: vec![shifted] }, Type::F64);
        let body = b.end_block(vec![Atom::Var(e)]);
        let y = b.let1("y", Expr::Build { n: Atom::Var(n), index: i, body }, Type::array(Scalar::F64, 1));
        let j = b.var("j", Type::I64);
        b.begin_block();
        let body = b.end_block(vec![Atom::F64(1.0)]);
        let neg = b.let1("w", Expr::Build { n: Atom::Var(k), index: j, body }, Type::array(Scalar::F64, 1));
        let body = b.finish(vec![Atom::Var(unknown)]);
        f.body = body;
        let a = analyse(&f);
        let fails = |v: VarId| a.vars.contains(&v);
        assert!(!fails(n));
        assert!(fails(unknown), "x[k] may be out of bounds");
        assert!(!fails(again), "x[k] again, after it succeeded");
        assert!(fails(div), "10 / k may divide by zero");
        assert!(!fails(half));
        assert!(!fails(e), "x[i] for i < dim x 0");
        assert!(fails(g), "x[i + 1]");
        assert!(fails(y), "its body may fail");
        assert!(fails(neg), "k may be negative");
    }

    #[test]
    fn checked_sizes_and_regular_rows() {
        let (mut f, x, k) = func();
        let mut b = Builder::new(&mut f);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        b.stmt(StmtKind::CheckSize { a: Atom::Var(k), b: Atom::Var(n), what: "k".into() });
        let i = b.var("i", Type::I64);
        b.begin_block();
        let e = b.let1("e", Expr::Index { array: x, indices: vec![Atom::Var(i)] }, Type::F64);
        let body = b.end_block(vec![Atom::Var(e)]);
        let y = b.let1("y", Expr::Build { n: Atom::Var(k), index: i, body }, Type::array(Scalar::F64, 1));
        // Rows of a loop-invariant extent (a copy of x each) are regular.
        let r = b.var("r", Type::I64);
        b.begin_block();
        let body = b.end_block(vec![Atom::Var(x)]);
        let rows = b.let1("rows", Expr::Build { n: Atom::I64(3), index: r, body }, Type::array(Scalar::F64, 2));
        // Rows whose extent depends on the row may be irregular.
        let r2 = b.var("r", Type::I64);
        let j = b.var("j", Type::I64);
        b.begin_block();
        b.begin_block();
        let inner_body = b.end_block(vec![Atom::F64(0.0)]);
        let row =
            b.let1("row", Expr::Build { n: Atom::Var(r2), index: j, body: inner_body }, Type::array(Scalar::F64, 1));
        let body = b.end_block(vec![Atom::Var(row)]);
        let tri = b.let1("tri", Expr::Build { n: Atom::I64(3), index: r2, body }, Type::array(Scalar::F64, 2));
        let body = b.finish(vec![Atom::F64(0.0)]);
        f.body = body;
        let a = analyse(&f);
        assert!(!a.vars.contains(&e), "k == dim x 0 was checked");
        assert!(!a.vars.contains(&y));
        assert!(!a.vars.contains(&rows));
        assert!(!a.vars.contains(&row), "a size that is a loop index is not negative");
        assert!(a.vars.contains(&tri), "rows of extents 0, 1, 2");
    }

    /// `for r < n => for c < r => x[c]`: `c < r < n = dim x 0`, in bounds;
    /// `for r < k => for c < r => x[c]` (another size) may fail.
    #[test]
    fn indices_below_an_index_below_the_extent_are_safe() {
        for (extent, safe) in [(true, true), (false, false)] {
            let (mut f, x, k) = func();
            let mut b = Builder::new(&mut f);
            let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
            let count = if extent { Atom::Var(n) } else { Atom::Var(k) };
            let (r, c) = (b.var("r", Type::I64), b.var("c", Type::I64));
            b.begin_block();
            b.begin_block();
            let e = b.let1("e", Expr::Index { array: x, indices: vec![Atom::Var(c)] }, Type::F64);
            let inner = b.end_block(vec![Atom::Var(e)]);
            let row =
                b.let1("row", Expr::Build { n: Atom::Var(r), index: c, body: inner }, Type::array(Scalar::F64, 1));
            let s = b.let1("s", Expr::Reduce { op: ReduceOp::Sum, array: row }, Type::F64);
            let body = b.end_block(vec![Atom::Var(s)]);
            b.let1("y", Expr::Build { n: count, index: r, body }, Type::array(Scalar::F64, 1));
            f.body = b.finish(vec![Atom::F64(0.0)]);
            let a = analyse(&f);
            assert_eq!(!a.vars.contains(&e), safe, "x[c] for c < r < {}", if extent { "dim x 0" } else { "k" });
        }
    }

    /// `let m = if ok then n else 0` (`ok = and p q`) and `let e = if p
    /// then n else 1`: in a loop over `m`, `ok` and so `p` hold, `m` and `e`
    /// equal `n = dim x 0`: `x[i]` is in bounds for `i < m` and for `j < e`
    /// inside it; in a loop over `m2 = if q2 then n else 0` (a condition
    /// not among them) a read of `x` below `e` may fail.
    #[test]
    fn a_loop_over_a_picked_count_runs_only_when_its_condition_holds() {
        let (mut f, x, k) = func();
        let mut b = Builder::new(&mut f);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let p = b.let1("p", Expr::Binary(BinOp::Ge, Atom::Var(k), Atom::I64(2)), Type::BOOL);
        let q = b.let1("q", Expr::Binary(BinOp::Le, Atom::Var(k), Atom::I64(9)), Type::BOOL);
        let q2 = b.let1("q2", Expr::Binary(BinOp::Le, Atom::Var(k), Atom::I64(5)), Type::BOOL);
        let ok = b.let1("ok", Expr::Binary(BinOp::And, Atom::Var(p), Atom::Var(q)), Type::BOOL);
        let pick = |b: &mut Builder, cond: VarId, otherwise: i64, name: &str| {
            let then_branch = Block { stmts: Vec::new(), results: vec![Atom::Var(n)] };
            let else_branch = Block { stmts: Vec::new(), results: vec![Atom::I64(otherwise)] };
            b.let1(name, Expr::If { cond: Atom::Var(cond), then_branch, else_branch }, Type::I64)
        };
        let m = pick(&mut b, ok, 0, "m");
        let e = pick(&mut b, p, 1, "e");
        let m2 = pick(&mut b, q2, 0, "m2");
        let mut reads = Vec::new();
        for count in [m, m2] {
            let (i, j) = (b.var("i", Type::I64), b.var("j", Type::I64));
            b.begin_block();
            let direct = b.let1("a", Expr::Index { array: x, indices: vec![Atom::Var(i)] }, Type::F64);
            b.begin_block();
            let below = b.let1("c", Expr::Index { array: x, indices: vec![Atom::Var(j)] }, Type::F64);
            let inner = b.end_block(vec![Atom::Var(below)]);
            b.let1("row", Expr::Build { n: Atom::Var(e), index: j, body: inner }, Type::array(Scalar::F64, 1));
            let body = b.end_block(vec![Atom::Var(direct)]);
            let y = b.let1("y", Expr::Build { n: Atom::Var(count), index: i, body }, Type::array(Scalar::F64, 1));
            reads.push((direct, below, y));
        }
        f.body = b.finish(vec![Atom::F64(0.0)]);
        let a = analyse(&f);
        let fails = |v: VarId| a.vars.contains(&v);
        let (direct, below, y) = reads[0];
        assert!(!fails(direct) && !fails(below) && !fails(y), "in the loop over m, ok and p hold");
        let (direct, below, _) = reads[1];
        assert!(!fails(direct), "in the loop over m2, q2 holds: m2 == n");
        assert!(fails(below), "p is not known in the loop over m2");
    }

    /// `m = if p then n else 0` run two iterations at a time: in a loop over
    /// `h = m / 2`, and in the `then` branch of `r > 0` for the remainder
    /// `r = m - h * 2`, `m` is not 0, so `p` holds and `e = if p then n
    /// else 1` equals `n = dim x 0`: reads of `x` below `e` are in bounds.
    /// Below a quotient of `m2 = if q then n else 0` they may fail.
    #[test]
    fn the_pairs_and_the_remainder_of_a_picked_count_run_only_when_its_condition_holds() {
        let (mut f, x, k) = func();
        let mut b = Builder::new(&mut f);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let p = b.let1("p", Expr::Binary(BinOp::Ge, Atom::Var(k), Atom::I64(2)), Type::BOOL);
        let q = b.let1("q", Expr::Binary(BinOp::Le, Atom::Var(k), Atom::I64(9)), Type::BOOL);
        let pick = |b: &mut Builder, cond: VarId, otherwise: i64, name: &str| {
            let then_branch = Block { stmts: Vec::new(), results: vec![Atom::Var(n)] };
            let else_branch = Block { stmts: Vec::new(), results: vec![Atom::I64(otherwise)] };
            b.let1(name, Expr::If { cond: Atom::Var(cond), then_branch, else_branch }, Type::I64)
        };
        let m = pick(&mut b, p, 0, "m");
        let e = pick(&mut b, p, 1, "e");
        let m2 = pick(&mut b, q, 0, "m2");
        // A row of `x` read below `e`: the read and the row.
        let below_e = |b: &mut Builder| {
            let j = b.var("j", Type::I64);
            b.begin_block();
            let read = b.let1("c", Expr::Index { array: x, indices: vec![Atom::Var(j)] }, Type::F64);
            let inner = b.end_block(vec![Atom::Var(read)]);
            b.let1("row", Expr::Build { n: Atom::Var(e), index: j, body: inner }, Type::array(Scalar::F64, 1));
            read
        };
        let mut pairs = Vec::new();
        for count in [m, m2] {
            let h = b.let1("h", Expr::Binary(BinOp::Div, Atom::Var(count), Atom::I64(2)), Type::I64);
            let t = b.var("t", Type::I64);
            b.begin_block();
            let read = below_e(&mut b);
            let body = b.end_block(vec![Atom::F64(0.0)]);
            b.let1("y", Expr::Build { n: Atom::Var(h), index: t, body }, Type::array(Scalar::F64, 1));
            pairs.push(read);
        }
        let h = b.let1("h", Expr::Binary(BinOp::Div, Atom::Var(m), Atom::I64(2)), Type::I64);
        let paired = b.let1("paired", Expr::Binary(BinOp::Mul, Atom::Var(h), Atom::I64(2)), Type::I64);
        let r = b.let1("r", Expr::Binary(BinOp::Sub, Atom::Var(m), Atom::Var(paired)), Type::I64);
        let odd = b.let1("odd", Expr::Binary(BinOp::Gt, Atom::Var(r), Atom::I64(0)), Type::BOOL);
        b.begin_block();
        let last = below_e(&mut b);
        let then_branch = b.end_block(vec![Atom::F64(0.0)]);
        let else_branch = Block { stmts: Vec::new(), results: vec![Atom::F64(0.0)] };
        b.let1("z", Expr::If { cond: Atom::Var(odd), then_branch, else_branch }, Type::F64);
        f.body = b.finish(vec![Atom::F64(0.0)]);
        let a = analyse(&f);
        let fails = |v: VarId| a.vars.contains(&v);
        assert!(!fails(pairs[0]), "in the loop over m / 2, p holds");
        assert!(!fails(last), "where the remainder of m by 2 is above 0, p holds");
        assert!(fails(pairs[1]), "p is not known in the loop over m2 / 2");
    }
}
