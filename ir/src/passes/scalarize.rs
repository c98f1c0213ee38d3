//! Scalar replacement of small arrays: elements of array literals read at
//! literal indices are the literal's atoms, slices of literals with literal
//! bounds are literals, an index into a view (a row or a slice) is an index
//! into the viewed array, and an `if` whose branches both yield literals of
//! the same length yields their elements; an update of a literal at a
//! literal index is a literal. After [`super::unroll`], the
//! small fixed-size arrays of a program (`[3]f64` points, `[2]f64`
//! projections) are no longer arrays at all, and dead code elimination
//! removes the literals nobody reads.
//!
//! Every rewrite reads what the original read, after the original's checks
//! succeeded (an index into a view runs after the view was taken, in
//! bounds), so no run-time error is lost or added.

use crate::fx::FxHashMap as HashMap;
use crate::program::{Atom, BinOp, Block, Expr, Function, ReduceOp, Stmt, StmtKind, VarId};
use crate::types::{Scalar, Type};

/// What is known of an array variable's binding.
#[derive(Clone)]
enum Known {
    /// An array literal of scalars.
    Lit(Vec<Atom>),
    /// `a[i..]` dropping leading axes (a row view), `a` immutable.
    Row(VarId, Vec<Atom>),
    /// `a[lo:hi]` with a literal `lo`, `a` immutable.
    Slice(VarId, i64, i64),
}

/// Replaces small arrays by scalars in `f` (module docs).
pub fn scalarize(f: &mut Function) {
    // Without array variables there is nothing to replace: the body is not
    // rebuilt.
    if f.vars.iter().all(|v| v.ty.rank == 0) {
        return;
    }
    let mut known: HashMap<VarId, Known> = HashMap::default();
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &mut known);
}

fn block(f: &mut Function, b: Block, known: &mut HashMap<VarId, Known>) -> Block {
    let mut out = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let loc = s.loc;
        let kind = crate::passes::inline::map_nested(s.kind, &mut |nb| block(f, nb, known));
        let kind = match kind {
            StmtKind::Let { vars, expr } => {
                let expr = rewrite(f, known, expr);
                if let ([v], Expr::Reduce { op, array }) = (vars.as_slice(), &expr) {
                    if let Some(Known::Lit(elems)) = known.get(array) {
                        if let Some(result) = reduce_chain(f, *op, elems, loc, &mut out) {
                            out.push(Stmt { kind: StmtKind::Let { vars: vec![*v], expr: Expr::Atom(result) }, loc });
                            continue;
                        }
                    }
                }
                if let [v] = vars.as_slice() {
                    learn(f, known, *v, &expr);
                }
                match split_if(f, known, &vars, expr, loc, &mut out) {
                    Some(expr) => StmtKind::Let { vars, expr },
                    None => continue,
                }
            }
            k => k,
        };
        out.push(Stmt { kind, loc });
    }
    Block { stmts: out, results: b.results }
}

/// A reduction of literal elements as a chain of scalar operations, in the
/// order of the reduction's definition (an `f64` sum in partial sums
/// ([`sum_f64_chain`]), an `i64` sum folds from zero, `maximum` and
/// `minimum` from the first element), appended to `out`; `None` for
/// `maximum`/`minimum` of no elements (an error the reduction reports).
fn reduce_chain(f: &mut Function, op: ReduceOp, elems: &[Atom], loc: crate::Loc, out: &mut Vec<Stmt>) -> Option<Atom> {
    let ty = match elems.first() {
        Some(a) => f.atom_ty(a),
        None if op == ReduceOp::Sum => return Some(Atom::F64(0.0)),
        None => return None,
    };
    if ty.rank != 0 {
        return None;
    }
    let (start, rest, bop) = match op {
        ReduceOp::Sum if ty.elem == Scalar::F64 => return Some(sum_f64_chain(f, elems, loc, out)),
        ReduceOp::Sum => {
            let zero = if ty.elem == Scalar::F64 { Atom::F64(0.0) } else { Atom::I64(0) };
            (zero, elems, BinOp::Add)
        }
        ReduceOp::Max => (elems[0], &elems[1..], BinOp::Max),
        ReduceOp::Min => (elems[0], &elems[1..], BinOp::Min),
    };
    let mut acc = start;
    for e in rest {
        let v = f.new_var(op.name(), ty);
        out.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr: Expr::Binary(bop, acc, *e) }, loc });
        acc = Atom::Var(v);
    }
    Some(acc)
}

/// The `f64` sum of `elems` in the order of [`crate::interp::ops::sum_f64`]:
/// each block of [`crate::interp::ops::SUM_BLOCK`] elements summed by
/// [`sum_f64_block_chain`], the block sums added left to right.
fn sum_f64_chain(f: &mut Function, elems: &[Atom], loc: crate::Loc, out: &mut Vec<Stmt>) -> Atom {
    use crate::interp::ops::SUM_BLOCK;
    let mut blocks = elems.chunks(SUM_BLOCK);
    let Some(first) = blocks.next() else { return Atom::F64(0.0) };
    let mut acc = sum_f64_block_chain(f, first, loc, out);
    for block in blocks {
        let s = sum_f64_block_chain(f, block, loc, out);
        acc = add_f64(f, acc, s, loc, out);
    }
    acc
}

/// The `f64` sum of one block in the order of
/// [`crate::interp::ops::sum_f64_block`]: of the first `m = 8 * (k / 8)`,
/// element `i` added into partial `i % 8` (a fold from `0.0`), the
/// partials combined in the fixed tree
/// ([`crate::interp::ops::combine_partial_sums`]), then the rest added one
/// by one (to `0.0` when `m = 0`).
fn sum_f64_block_chain(f: &mut Function, elems: &[Atom], loc: crate::Loc, out: &mut Vec<Stmt>) -> Atom {
    use crate::interp::ops::SUM_LANES;
    let m = elems.len() / SUM_LANES * SUM_LANES;
    let mut acc = Atom::F64(0.0);
    if m > 0 {
        let mut level: Vec<Atom> = vec![Atom::F64(0.0); SUM_LANES];
        for (i, e) in elems[..m].iter().enumerate() {
            level[i % SUM_LANES] = add_f64(f, level[i % SUM_LANES], *e, loc, out);
        }
        while level.len() > 1 {
            let half = level.len() / 2;
            level = (0..half).map(|k| add_f64(f, level[k], level[k + half], loc, out)).collect();
        }
        acc = level[0];
    }
    for e in &elems[m..] {
        acc = add_f64(f, acc, *e, loc, out);
    }
    acc
}

/// `a + b` (`f64`), bound to a new variable appended to `out`.
fn add_f64(f: &mut Function, a: Atom, b: Atom, loc: crate::Loc, out: &mut Vec<Stmt>) -> Atom {
    let v = f.new_var("sum", Type::F64);
    out.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr: Expr::Binary(BinOp::Add, a, b) }, loc });
    Atom::Var(v)
}

/// Records what the binding `v = e` tells about `v`.
fn learn(f: &Function, known: &mut HashMap<VarId, Known>, v: VarId, e: &Expr) {
    if f.var(v).mutable {
        return;
    }
    let immutable = |a: &VarId| !f.var(*a).mutable;
    match e {
        Expr::ArrayLit { elem_ty, elems } if elem_ty.is_scalar() => {
            known.insert(v, Known::Lit(elems.clone()));
        }
        Expr::Index { array, indices } if f.ty(v).is_array() && immutable(array) => {
            let (base, mut idx) = match known.get(array) {
                Some(Known::Row(b, i)) => (*b, i.clone()),
                _ => (*array, Vec::new()),
            };
            idx.extend(indices.iter().copied());
            known.insert(v, Known::Row(base, idx));
        }
        Expr::Slice { array, lo: Atom::I64(lo), hi: Atom::I64(hi) } if immutable(array) && hi >= lo => {
            known.insert(v, Known::Slice(*array, *lo, *hi));
        }
        _ => {}
    }
}

/// The expression with reads of known arrays replaced.
fn rewrite(f: &Function, known: &HashMap<VarId, Known>, e: Expr) -> Expr {
    match e {
        Expr::Index { array, indices } => match (known.get(&array), indices.as_slice()) {
            (Some(Known::Lit(elems)), [Atom::I64(k)]) if (0..elems.len() as i64).contains(k) => {
                Expr::Atom(elems[*k as usize])
            }
            (Some(Known::Row(base, prefix)), _) => {
                let mut idx = prefix.clone();
                idx.extend(indices.iter().copied());
                rewrite(f, known, Expr::Index { array: *base, indices: idx })
            }
            (Some(Known::Slice(base, lo, hi)), [Atom::I64(k), rest @ ..]) if (0..hi - lo).contains(k) => {
                let mut idx = vec![Atom::I64(lo + k)];
                idx.extend(rest.iter().copied());
                rewrite(f, known, Expr::Index { array: *base, indices: idx })
            }
            _ => Expr::Index { array, indices },
        },
        Expr::Slice { array, lo: Atom::I64(lo), hi: Atom::I64(hi) } => match known.get(&array) {
            Some(Known::Lit(elems)) if 0 <= lo && lo <= hi && hi as usize <= elems.len() => {
                Expr::ArrayLit { elem_ty: f.ty(array).row(), elems: elems[lo as usize..hi as usize].to_vec() }
            }
            _ => Expr::Slice { array, lo: Atom::I64(lo), hi: Atom::I64(hi) },
        },
        // An update of a literal at a literal index is the literal with
        // one element replaced (the index is checked here, in bounds).
        Expr::Update { array, indices, value } => match (known.get(&array), indices.as_slice()) {
            (Some(Known::Lit(elems)), [Atom::I64(k)]) if (0..elems.len() as i64).contains(k) => {
                let mut elems = elems.clone();
                elems[*k as usize] = value;
                Expr::ArrayLit { elem_ty: f.ty(array).row(), elems }
            }
            _ => Expr::Update { array, indices, value },
        },
        e => e,
    }
}

/// `let r = if c then {.. yield a} else {.. yield b}` with `a`, `b` array
/// literals of one length `n` (and `r` otherwise known nowhere): the branches
/// yield the `n` elements instead, bound to fresh scalars, and `r` is their
/// literal. Returns the expression to bind when nothing was split.
fn split_if(
    f: &mut Function,
    known: &mut HashMap<VarId, Known>,
    vars: &[VarId],
    expr: Expr,
    loc: crate::Loc,
    out: &mut Vec<Stmt>,
) -> Option<Expr> {
    let Expr::If { cond, mut then_branch, mut else_branch } = expr else { return Some(expr) };
    let lit_of = |b: &Block, k: usize| match b.results.get(k) {
        Some(Atom::Var(v)) => match known.get(v) {
            Some(Known::Lit(e)) => Some(e.clone()),
            _ => None,
        },
        _ => None,
    };
    let mut split: Vec<(usize, Vec<Atom>, Vec<Atom>)> = Vec::new();
    for (k, v) in vars.iter().enumerate() {
        let ty = f.ty(*v);
        if ty.rank != 1 || f.var(*v).mutable {
            continue;
        }
        if let (Some(a), Some(b)) = (lit_of(&then_branch, k), lit_of(&else_branch, k)) {
            if a.len() == b.len() && !a.is_empty() {
                split.push((k, a, b));
            }
        }
    }
    if split.is_empty() {
        return Some(Expr::If { cond, then_branch, else_branch });
    }
    // The split arrays leave the `if`'s results; their elements join them.
    let mut new_vars: Vec<VarId> = vars.to_vec();
    for (k, _, _) in split.iter().rev() {
        new_vars.remove(*k);
        then_branch.results.remove(*k);
        else_branch.results.remove(*k);
    }
    let mut lits: Vec<(VarId, Vec<Atom>)> = Vec::new();
    for (k, a, b) in split {
        let v = vars[k];
        let elem = Type::scalar(f.ty(v).elem);
        let name = f.var(v).name.clone();
        let scalars: Vec<VarId> = (0..a.len()).map(|j| f.new_var(format!("{name}_{j}"), elem)).collect();
        then_branch.results.extend(a);
        else_branch.results.extend(b);
        new_vars.extend(scalars.iter().copied());
        lits.push((v, scalars.iter().map(|s| Atom::Var(*s)).collect()));
    }
    out.push(Stmt { kind: StmtKind::Let { vars: new_vars, expr: Expr::If { cond, then_branch, else_branch } }, loc });
    for (v, elems) in lits {
        let elem_ty = f.ty(v).row();
        known.insert(v, Known::Lit(elems.clone()));
        out.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr: Expr::ArrayLit { elem_ty, elems } }, loc });
    }
    None
}
