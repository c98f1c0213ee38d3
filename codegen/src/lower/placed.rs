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

use arrayad_ir::{Atom, Block, Function, VarId};
use std::collections::HashSet;

/// The rows of `build index < n => body` (in `f`) that are computed in
/// their destination: `(k, y)` for result `k` when it is the array `y`,
/// bound by a comprehension among the top-level statements of `body` to
/// an immutable variable (each `y` at most once: the first result that
/// yields it).
pub(super) fn placed_rows(f: &Function, body: &Block) -> Vec<(usize, VarId)> {
    let built = arrayad_ir::visit::comprehension_results(body);
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

#[cfg(test)]
mod tests {
    use super::placed_rows;
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
        assert_eq!(placed_rows(&f, &blk), vec![(0, blk.results[0].as_var().unwrap())]);
        // The same row yielded twice: placed for the first result only.
        let (f, blk) = body(|y, s, _| vec![s, y, y], false);
        assert_eq!(placed_rows(&f, &blk), vec![(1, blk.results[1].as_var().unwrap())]);
    }

    #[test]
    fn views_copies_and_mutable_rows_are_not_placed() {
        // A row of an outer array (a view) and another name for the row.
        let (f, blk) = body(|_, s, z| vec![s, z], false);
        assert_eq!(placed_rows(&f, &blk), vec![]);
        let (f, blk) = body(|y, _, _| vec![y], true);
        assert_eq!(placed_rows(&f, &blk), vec![]);
    }
}
