//! Rows computed in place: destination passing for the array rows of a
//! comprehension.
//!
//! A comprehension of array rows, `ys = build i < n => { ...; y = build
//! j < m => ...; yield y }`, stores each iteration's row `y` into row `i`
//! of its result. Without help, `y` is computed in memory of its own and
//! then copied. Reverse mode makes many such comprehensions: its forward
//! pass keeps every iteration's residuals (GMM's `Q_k (x_i - mu_k)` for
//! every point and component), in rows of rows, so each residual was
//! written once where it was computed and copied once per enclosing
//! comprehension.
//!
//! Here the row `y` is instead computed in its destination: while the
//! body of iteration `i` is lowered, the comprehension that binds `y`
//! allocates its result at the address of row `i` (`Lower::places`), and
//! the copy at the end of the iteration finds the row already there and
//! is skipped. Nested comprehensions chain: the destination of a row of
//! rows gives each of its own rows theirs.
//!
//! # Why values do not change
//!
//! The destination is only a hint, checked when the row is allocated: it
//! is taken when it exists (the result's memory is allocated before the
//! iteration runs: from the second iteration on, or from the first in a
//! chunk of a parallel map, whose rows have a static shape) and has exactly
//! the row's size in bytes; otherwise the row gets memory of its own and
//! is copied as before. The shape check of every row (`check_regular`)
//! runs as before, so an irregular row still fails with the same message;
//! it cannot write past its destination, whose size it has.
//!
//! The memory of row `i` belongs to no other value until the comprehension
//! ends, and no statement writes a row once its iteration is done; `y` is
//! not mutable, so only its own comprehension (and additions into it or
//! updates of it, which are writes of `y` itself) write that memory.
//!
//! # Aliasing
//!
//! A row computed in place is a view of the comprehension's result for
//! the alias analysis (`roots.rs`): its accesses take the scope of that
//! result rather than a scope of their own (which would tell LLVM that the
//! row and its comprehension's result never overlap).

use arrayad_ir::{Atom, Block, Expr, Function, StmtKind, VarId};
use std::collections::{HashMap, HashSet};

/// A literal of rows computed in its destination: `(k, lit, rows)` for
/// result `k`, the literal `lit`, and `rows[u] = Some(y_u)` for each of
/// its rows computed in part `u` of that destination ([`placed`]).
pub(super) type PlacedLiteral = (usize, VarId, Vec<Option<VarId>>);

/// What of `build index < n => body` is computed in its destination: the
/// rows (`(k, y)`: result `k` is the row `y`) and the literals of rows.
#[derive(Debug, Default)]
pub(super) struct Placed {
    pub(super) rows: Vec<(usize, VarId)>,
    pub(super) literals: Vec<PlacedLiteral>,
}

/// The rows and literals of rows of `build index < n => body` (in `f`)
/// computed in their destination ([`placed_rows`], [`placed_literals`]).
/// Linear in the size of `body`.
pub(super) fn placed(f: &Function, body: &Block) -> Placed {
    let built = arrayad_ir::visit::comprehension_results(body);
    let rows = placed_rows(f, body, &built);
    let literals = placed_literals(f, body, &built, &rows);
    Placed { rows, literals }
}

/// The rows of `build index < n => body` (in `f`) that are computed in
/// their destination: `(k, y)` for result `k` when it is the array `y`,
/// bound by a comprehension among the top-level statements of `body`
/// (`built`) to an immutable variable (each `y` at most once: the first
/// result that yields it).
fn placed_rows(f: &Function, body: &Block, built: &HashSet<VarId>) -> Vec<(usize, VarId)> {
    let mut placed: Vec<(usize, VarId)> = Vec::new();
    let mut seen: HashSet<VarId> = HashSet::new();
    for (k, r) in body.results.iter().enumerate() {
        if let Atom::Var(y) = r {
            if built.contains(y) && f.ty(*y).is_array() && !f.var(*y).mutable && seen.insert(*y) {
                placed.push((k, *y));
            }
        }
    }
    placed
}

/// The literals of rows among the results of `build index < n => body`
/// (in `f`) that are computed in their destination, their rows too: `(k,
/// lit, rows)` for result `k` when it is the array `lit = [y0, y1, ..]`,
/// bound among the top-level statements of `body` to an immutable
/// variable (each `lit` at most once: the first result that yields it),
/// with `rows[u] = Some(y_u)` when `y_u` is an array bound by a
/// comprehension among those statements (`built`) to an immutable
/// variable, used once in `body` (by the literal), neither an earlier row
/// of a literal nor one of the placed `rows` ([`placed_rows`]).
///
/// Row `u` of the literal's destination (`1 / len` of it, the rows of a
/// literal being of one shape) is then `y_u`'s destination, and the
/// literal's copies of its rows find them in place (a comprehension of
/// rows jammed two points at a time yields `[r0, r1]`:
/// `arrayad_ir::passes::jam_builds`). As for [`placed_rows`], a
/// destination is a hint taken only when it holds exactly the row's bytes,
/// and the rows of a literal occupy disjoint parts of it.
fn placed_literals(f: &Function, body: &Block, built: &HashSet<VarId>, rows: &[(usize, VarId)]) -> Vec<PlacedLiteral> {
    let mut taken: HashSet<VarId> = rows.iter().map(|(_, y)| *y).collect();
    let literals: HashMap<VarId, &[Atom]> = body
        .stmts
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Let { vars, expr: Expr::ArrayLit { elem_ty, elems } }
                if vars.len() == 1 && elem_ty.is_array() =>
            {
                Some((vars[0], elems.as_slice()))
            }
            _ => None,
        })
        .collect();
    let mut placed = Vec::new();
    for (k, r) in body.results.iter().enumerate() {
        let Atom::Var(lit) = r else { continue };
        let Some(elems) = literals.get(lit) else { continue };
        if elems.is_empty() || f.var(*lit).mutable || !taken.insert(*lit) {
            continue;
        }
        let rows: Vec<Option<VarId>> = elems
            .iter()
            .map(|e| match e {
                Atom::Var(y) if built.contains(y) && !f.var(*y).mutable && taken.insert(*y) => Some(*y),
                _ => None,
            })
            .collect();
        placed.push((k, *lit, rows));
    }
    // A row used elsewhere than in its literal keeps its own memory: after
    // the literal it is dead, and an update of it in place would write into
    // the literal's destination.
    let mut uses: HashMap<VarId, u32> =
        placed.iter().flat_map(|(_, _, rows)| rows.iter().flatten().map(|y| (*y, 0))).collect();
    if !uses.is_empty() {
        arrayad_ir::visit::block_uses(body, &mut |v| {
            if let Some(c) = uses.get_mut(&v) {
                *c += 1;
            }
        });
        for (_, _, rows) in &mut placed {
            for row in rows.iter_mut() {
                if row.is_some_and(|y| uses.get(&y) != Some(&1)) {
                    *row = None;
                }
            }
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::placed;
    use arrayad_ir::builder::Builder;
    use arrayad_ir::{Atom, Block, Expr, Function, Scalar, StmtKind, Type};

    const F1: Type = Type { elem: Scalar::F64, rank: 1 };
    const F2: Type = Type { elem: Scalar::F64, rank: 2 };

    /// The body of `for i < dim x 0 => { y = for j < 3 => 1.0; s = x[i];
    /// z = y; yield RESULTS }` for `results(y, s, z)`; `mutable` makes `y`
    /// a mutable variable.
    fn body(results: impl Fn(Atom, Atom, Atom) -> Vec<Atom>, mutable: bool) -> (Function, Block) {
        let (mut f, ps) = Function::with_params("f", &[F2], &[]);
        let mut b = Builder::new(&mut f);
        b.begin_block();
        let j = b.var("j", Type::I64);
        b.begin_block();
        let row = b.end_block(vec![Atom::F64(1.0)]);
        let y = b.let_one("y", Expr::Build { n: Atom::I64(3), index: j, body: row });
        let i = b.var("i", Type::I64);
        let s = b.let_one("s", Expr::Index { array: ps[0], indices: vec![Atom::Var(i)] });
        let z = b.let_one("z", Expr::Atom(y));
        let blk = b.end_block(results(y, s, z));
        drop(b);
        if mutable {
            let y = blk.stmts.iter().find_map(|st| match &st.kind {
                StmtKind::Let { vars, expr: Expr::Build { .. } } => Some(vars[0]),
                _ => None,
            });
            f.vars[y.unwrap().0 as usize].mutable = true;
        }
        assert_eq!(f.ty(blk.results[0].as_var().unwrap()), F1);
        (f, blk)
    }

    #[test]
    fn rows_bound_by_a_comprehension_of_the_body_are_placed_once() {
        let (f, blk) = body(|y, _, _| vec![y], false);
        assert_eq!(placed(&f, &blk).rows, vec![(0, blk.results[0].as_var().unwrap())]);
        // The same row yielded twice: placed for the first result only.
        let (f, blk) = body(|y, s, _| vec![s, y, y], false);
        assert_eq!(placed(&f, &blk).rows, vec![(1, blk.results[1].as_var().unwrap())]);
    }

    #[test]
    fn views_copies_and_mutable_rows_are_not_placed() {
        // A row of an outer array (a view) and another name for the row.
        let (f, blk) = body(|_, s, z| vec![s, z], false);
        assert_eq!(placed(&f, &blk).rows, vec![]);
        let (f, blk) = body(|y, _, _| vec![y], true);
        assert_eq!(placed(&f, &blk).rows, vec![]);
    }

    /// The body of `for i < dim x 0 => { y = for j < 3 => 1.0; w = for j <
    /// 3 => 1.0; s = x[i]; lit = [ELEMS]; yield RESULTS }` for
    /// `elems(y, w, s)` and `results(lit, y)`.
    fn literal_body(
        elems: impl Fn(Atom, Atom, Atom) -> Vec<Atom>,
        results: impl Fn(Atom, Atom) -> Vec<Atom>,
    ) -> (Function, Block) {
        literal_body_reading(elems, results, false)
    }

    /// [`literal_body`], with `t = sum y` after the literal when `read`.
    fn literal_body_reading(
        elems: impl Fn(Atom, Atom, Atom) -> Vec<Atom>,
        results: impl Fn(Atom, Atom) -> Vec<Atom>,
        read: bool,
    ) -> (Function, Block) {
        let (mut f, ps) = Function::with_params("f", &[F2], &[]);
        let mut b = Builder::new(&mut f);
        b.begin_block();
        let row = |b: &mut Builder, name: &str| {
            let j = b.var("j", Type::I64);
            b.begin_block();
            let body = b.end_block(vec![Atom::F64(1.0)]);
            b.let_one(name, Expr::Build { n: Atom::I64(3), index: j, body })
        };
        let y = row(&mut b, "y");
        let w = row(&mut b, "w");
        let i = b.var("i", Type::I64);
        let s = b.let_one("s", Expr::Index { array: ps[0], indices: vec![Atom::Var(i)] });
        let lit = b.let_one("lit", Expr::ArrayLit { elem_ty: F1, elems: elems(y, w, s) });
        if read {
            let Atom::Var(y) = y else { unreachable!("a variable") };
            b.let_one("t", Expr::Reduce { op: arrayad_ir::ReduceOp::Sum, array: y });
        }
        let blk = b.end_block(results(lit, y));
        drop(b);
        (f, blk)
    }

    #[test]
    fn rows_of_a_literal_yielded_are_placed_in_its_destination() {
        let var = |a: Atom| a.as_var().unwrap();
        // `[y, w]`: both rows, each at its part of the literal.
        let (f, blk) = literal_body(|y, w, _| vec![y, w], |lit, _| vec![lit]);
        let lit = var(blk.results[0]);
        let rows = literal_rows(&blk);
        assert_eq!(placed(&f, &blk).literals, vec![(0, lit, vec![Some(rows[0]), Some(rows[1])])]);
        // A view among the rows, and a row used twice: neither placed.
        let (f, blk) = literal_body(|y, _, s| vec![s, y, y], |lit, _| vec![lit]);
        let lit = var(blk.results[0]);
        assert_eq!(placed(&f, &blk).literals, vec![(0, lit, vec![None, None, None])]);
        // A row used after the literal too (which an update in place could
        // write) keeps its memory.
        let (f, blk) = literal_body_reading(|y, w, _| vec![y, w], |lit, _| vec![lit], true);
        let (lit, rows) = (var(blk.results[0]), literal_rows(&blk));
        assert_eq!(placed(&f, &blk).literals, vec![(0, lit, vec![None, Some(rows[1])])]);
        // A row that is a placed row of the comprehension itself keeps
        // that place.
        let (f, blk) = literal_body(|y, w, _| vec![y, w], |lit, y| vec![y, lit]);
        let (lit, rows) = (var(blk.results[1]), literal_rows(&blk));
        assert_eq!(placed(&f, &blk).literals, vec![(1, lit, vec![None, Some(rows[1])])]);
        // A literal yielded twice: placed for the first result only.
        let (f, blk) = literal_body(|y, w, _| vec![y, w], |lit, _| vec![lit, lit]);
        assert_eq!(placed(&f, &blk).literals.len(), 1);
    }

    /// The rows `y` and `w` that [`literal_body`] binds.
    fn literal_rows(blk: &Block) -> Vec<arrayad_ir::VarId> {
        blk.stmts
            .iter()
            .filter_map(|st| match &st.kind {
                StmtKind::Let { vars, expr: Expr::Build { .. } } => Some(vars[0]),
                _ => None,
            })
            .collect()
    }
}
