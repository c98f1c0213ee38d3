//! The extents of the arrays a function's comprehensions built (and of the
//! accumulators of their cotangents, `zeros_like` them), handed to
//! the chunk functions that read them as checked facts.
//!
//! A function knows the extents of the arrays its comprehensions build
//! (`let q = for k < n => for j < d => ..` has extents `n` and `d`), and
//! its lowering proves an index `q[k, j]` in bounds from them
//! (`Lower::known_in_bounds`). A chunk function receives `q` as a
//! parameter and reads its extents from the array: without more, it checks
//! every such index, in the innermost loops of a vector jvp nine arrays at
//! a time (a value and eight tangents), and the loop exits the checks add
//! made LLVM's induction-variable simplification take seconds per chunk.
//! So the chunk binds `let t = dim q 1` at its entry and checks `t == d`
//! (or, when `d` is not at hand there, `t` against the same extent of
//! another of its arrays): its lowering then knows the equality, as the
//! function's did. The checks never fail (each states what a comprehension
//! of the function made) and run once per chunk.

use arrayad_ir::shape::{static_row_dims, StaticDim};
use arrayad_ir::visit::for_each_block;
use arrayad_ir::{Atom, Block, Expr, Function, Loc, Program, Scalar, Stmt, StmtKind, Type, VarId};
use std::collections::{HashMap, HashSet};

/// True when `body` (at any depth) binds or assigns a mutable variable,
/// or calls a function. [`static_row_dims`] reads a variable's `let` as
/// its value, which an assignment may change (reverse mode's lazy
/// cotangents start as `zeros [0]`), in the body or in a callee's: the
/// extents it gives are then only the default of a comprehension run zero
/// times, not facts.
fn rows_unsure(f: &Function, body: &Block) -> bool {
    let mut found = false;
    for_each_block(body, &mut |b| {
        found |= b.stmts.iter().any(|s| match &s.kind {
            StmtKind::Assign { .. } => true,
            StmtKind::Let { vars, expr } => matches!(expr, Expr::Call { .. }) || vars.iter().any(|v| f.var(*v).mutable),
            _ => false,
        });
    });
    found
}

/// `a` when it is a literal or an immutable variable: an extent a reshape
/// or a slice was given, which it checked not negative.
fn fixed(f: &Function, a: &Atom) -> Option<Atom> {
    match a {
        Atom::I64(c) if *c >= 0 => Some(*a),
        Atom::Var(v) if !f.var(*v).mutable => Some(*a),
        _ => None,
    }
}

/// The one immutable variable of `vars`, bound to a value computed from
/// the immutable array `array` (its extent, a view of it, a cotangent
/// shaped like it).
fn one_view(f: &Function, vars: &[VarId], array: VarId) -> Option<VarId> {
    match vars {
        [v] if !f.var(*v).mutable && !f.var(array).mutable => Some(*v),
        _ => None,
    }
}

/// What the top level of a function has told so far of its arrays'
/// extents ([`BuiltShapes::record`], statement by statement).
#[derive(Default)]
pub(super) struct BuiltShapes {
    /// Each immutable array bound by a comprehension or `zeros_like` at the
    /// top level: the extent of each axis, where it is known as a literal
    /// or an immutable `i64` variable.
    shapes: HashMap<VarId, Vec<Option<Atom>>>,
    /// `let v = dim a axis` at the top level: `(a, axis)` to `v`, the
    /// first such binding.
    dims: HashMap<(VarId, u8), VarId>,
    /// The variables of `dims` (never negative).
    dim_vars: HashSet<VarId>,
}

impl BuiltShapes {
    /// Records what the statement `s` of `f`'s top level tells: the
    /// extents of the arrays a comprehension or `zeros_like` binds, or a
    /// variable bound to an extent. `program`, where given, lets [`static_row_dims`] see
    /// through calls.
    pub(super) fn record(&mut self, f: &Function, program: Option<&Program>, s: &Stmt) {
        let StmtKind::Let { vars, expr } = &s.kind else { return };
        match expr {
            Expr::Dim { array, axis } => {
                if let Some(v) = one_view(f, vars, *array) {
                    self.dims.entry((*array, *axis)).or_insert(v);
                    self.dim_vars.insert(v);
                }
            }
            Expr::Build { n, index, body } => {
                // Whether the rows' static extents may not be theirs
                // (asked once).
                let mut unsure = None;
                for (j, r) in vars.iter().enumerate() {
                    let rank = usize::from(f.ty(*r).rank);
                    if f.var(*r).mutable || rank == 0 {
                        continue;
                    }
                    // Axis 0 is the count: a negative one fails before the
                    // array exists.
                    let mut axes = vec![fixed(f, n)];
                    match static_row_dims(f, program, *index, body, j)
                        .filter(|_| !*unsure.get_or_insert_with(|| rows_unsure(f, body)))
                    {
                        Some(rows) => axes.extend(rows.iter().map(|d| self.row_extent(d))),
                        None => axes.resize(rank, None),
                    }
                    if axes.len() == rank && axes.iter().any(Option::is_some) {
                        self.shapes.insert(*r, axes);
                    }
                }
            }
            // A reshape has the extents it names (checked not negative);
            // a slice from 0 the length it names, then the array's rows
            // (the stacked rows of a jammed comprehension,
            // `arrayad_ir::passes::jam_builds`).
            Expr::Reshape { array, dims } => {
                if let Some(r) = one_view(f, vars, *array) {
                    self.insert_known(r, dims.iter().map(|d| fixed(f, d)).collect());
                }
            }
            Expr::Slice { array, lo: Atom::I64(0), hi } => {
                if let Some(r) = one_view(f, vars, *array) {
                    let rows = self.known_axes(f, *array).into_iter().skip(1);
                    self.insert_known(r, std::iter::once(fixed(f, hi)).chain(rows).collect());
                }
            }
            // An accumulator has the shape of the array it is the
            // cotangent of.
            Expr::ZerosLike(a) => {
                if let Some(r) = one_view(f, vars, *a) {
                    self.insert_known(r, self.known_axes(f, *a));
                }
            }
            _ => {}
        }
    }

    /// What is known of the extents of array `a`: those recorded for it,
    /// else the variables bound to its extents.
    fn known_axes(&self, f: &Function, a: VarId) -> Vec<Option<Atom>> {
        match self.shapes.get(&a) {
            Some(axes) => axes.clone(),
            None => (0..f.ty(a).rank).map(|axis| self.dims.get(&(a, axis)).map(|v| Atom::Var(*v))).collect(),
        }
    }

    /// Records `axes` as the extents of `r` when one of them is known.
    fn insert_known(&mut self, r: VarId, axes: Vec<Option<Atom>>) {
        if axes.iter().any(Option::is_some) {
            self.shapes.insert(r, axes);
        }
    }

    /// The extent of the rows' axis `d` as an atom: only extents that are
    /// never negative (a comprehension run zero times takes a negative
    /// static extent as 0, which the atom would not be).
    fn row_extent(&self, d: &StaticDim) -> Option<Atom> {
        match d {
            StaticDim::Lit(c) if *c >= 0 => Some(Atom::I64(*c)),
            StaticDim::Var(v) if self.dim_vars.contains(v) => Some(Atom::Var(*v)),
            StaticDim::DimOf(a, axis) => self.dims.get(&(*a, *axis)).map(|v| Atom::Var(*v)),
            _ => None,
        }
    }

    /// Binds, in the chunk function `c` after the extents it binds again
    /// (`rebound`, its first statements), the extents of its array
    /// parameters `free` that the function knew, and checks them against
    /// what it knew (module docs).
    pub(super) fn check_extents(&self, c: &mut Function, free: &[VarId], rebound: &[&Stmt]) {
        let mut available: HashSet<VarId> = free.iter().copied().collect();
        for d in rebound {
            if let StmtKind::Let { vars, .. } = &d.kind {
                available.extend(vars.iter().copied());
            }
        }
        let mut out = Vec::new();
        // An extent not at hand in the chunk: the first parameter's axis
        // found of that extent, which the next ones are checked against.
        let mut first: HashMap<VarId, VarId> = HashMap::new();
        for r in free {
            let Some(axes) = self.shapes.get(r) else { continue };
            let name = c.var(*r).name.clone();
            for (axis, extent) in axes.iter().enumerate() {
                let (Some(extent), Ok(ax)) = (extent, u8::try_from(axis)) else { continue };
                let t = c.new_var(format!("dim_{name}"), Type::scalar(Scalar::I64));
                out.push(Stmt {
                    kind: StmtKind::Let { vars: vec![t], expr: Expr::Dim { array: *r, axis: ax } },
                    loc: Loc::default(),
                });
                let against = match extent {
                    Atom::Var(v) if !available.contains(v) => match first.get(v) {
                        Some(u) => Atom::Var(*u),
                        None => {
                            first.insert(*v, t);
                            continue;
                        }
                    },
                    e => *e,
                };
                let what = format!("axis {axis} of `{name}` and the extent the function gave it");
                out.push(Stmt { kind: StmtKind::CheckSize { a: Atom::Var(t), b: against, what }, loc: Loc::default() });
            }
        }
        let at = rebound.len().min(c.body.stmts.len());
        c.body.stmts.splice(at..at, out);
    }
}

#[cfg(test)]
mod tests {
    use crate::calls::Callees;
    use arrayad_ir::builder::Builder;
    use arrayad_ir::{Atom, BinOp, Expr, Function, ReduceOp, Scalar, StmtKind, Type, UnOp, VarId};

    fn dim(b: &mut Builder, x: VarId, axis: u8) -> Atom {
        b.let_one("n", Expr::Dim { array: x, axis })
    }

    /// `q = for k < n => for j < d => x[k, j] * 2` (its rows through a
    /// mutable variable when `imperative`), then the map `for i < n =>
    /// exp(sum(for j < d => q[i, j]))`, whose chunk function reads `q`:
    /// the axes of `q` the chunk checks at its entry, with what.
    fn checked_extents_of_q(imperative: bool) -> (Vec<(u8, Atom)>, Atom, Atom) {
        let f2 = Type { elem: Scalar::F64, rank: 2 };
        let f1 = Type { elem: Scalar::F64, rank: 1 };
        let (mut f, ps) = Function::with_params("f", &[f2], &[f1]);
        let mut b = Builder::new(&mut f);
        let x = ps[0];
        let (n, d) = (dim(&mut b, x, 0), dim(&mut b, x, 1));
        let inner = |b: &mut Builder, row: VarId, at: Atom, scale: bool| {
            let j = b.var("j", Type::scalar(Scalar::I64));
            b.begin_block();
            let e = b.let_one("e", Expr::Index { array: row, indices: vec![at, Atom::Var(j)] });
            let e = if scale { b.binary(BinOp::Mul, e, Atom::F64(2.0)) } else { e };
            let body = b.end_block(vec![e]);
            b.let_one("row", Expr::Build { n: d, index: j, body })
        };
        let k = b.var("k", Type::scalar(Scalar::I64));
        b.begin_block();
        let mut row = inner(&mut b, x, Atom::Var(k), true);
        if imperative {
            let m = b.func.new_mut_var("m", f1);
            b.stmt(StmtKind::Let { vars: vec![m], expr: Expr::Atom(row) });
            row = Atom::Var(m);
        }
        let body = b.end_block(vec![row]);
        let Atom::Var(q) = b.let_one("q", Expr::Build { n, index: k, body }) else { unreachable!() };
        let i = b.var("i", Type::scalar(Scalar::I64));
        b.begin_block();
        let Atom::Var(row) = inner(&mut b, q, Atom::Var(i), false) else { unreachable!() };
        let s = b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: row });
        let e = b.unary(UnOp::Exp, s);
        let body = b.end_block(vec![e]);
        let r = b.let_one("r", Expr::Build { n, index: i, body });
        f.body = b.finish(vec![r]);

        let (_, chunks) = super::super::split(&[&f], &Callees::none());
        // (`q` is a map too: the chunk of `r` is the one reading it.)
        let Some(chunk) = chunks.iter().find(|c| c.func.params.contains(&q)) else { panic!("no chunk reads q") };
        let mut dims_of_q = std::collections::HashMap::new();
        let mut checked = Vec::new();
        for s in &chunk.func.body.stmts {
            match &s.kind {
                StmtKind::Let { vars, expr: Expr::Dim { array, axis } } if *array == q => {
                    dims_of_q.insert(vars[0], *axis);
                }
                StmtKind::CheckSize { a: Atom::Var(t), b, .. } => {
                    if let Some(axis) = dims_of_q.get(t) {
                        checked.push((*axis, *b));
                    }
                }
                _ => {}
            }
        }
        (checked, n, d)
    }

    /// The chunk checks both extents of `q` against the function's `n`
    /// and `d` (bound again in it from `x`).
    #[test]
    fn a_chunk_knows_the_extents_of_the_arrays_the_function_built() {
        let (checked, n, d) = checked_extents_of_q(false);
        assert_eq!(checked, vec![(0, n), (1, d)]);
    }

    /// Rows made through a mutable variable: only the count is a fact
    /// ([`super::rows_unsure`]).
    #[test]
    fn rows_through_mutable_variables_tell_only_the_count() {
        let (checked, n, _) = checked_extents_of_q(true);
        assert_eq!(checked, vec![(0, n)]);
    }
}
