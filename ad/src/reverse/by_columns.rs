//! Reverse mode of code that itself runs reverse mode, by forward columns:
//! the fallback where the operators' own rule (`over_reverse.rs`) does not
//! apply (reverse-mode code that is not a call of a `vjp` or `grad`
//! operator, such as a `jvp` of a definition using `grad`, inlined; or a
//! primal given without its program).
//!
//! Unzipping needs purely functional linear code, and the forward
//! derivative of reverse-mode code is imperative (accumulators, the tape:
//! `forward.rs`, "Forward over reverse"). Such a definition's vjp is
//! computed from its jvp instead: one jvp per element of every active
//! parameter (the columns of the Jacobian, each a full forward pass with a
//! one-hot tangent), then each cotangent element is the inner product of
//! the result cotangents with the column of that element. The values are
//! exact (the same arithmetic as the jvp); the cost is the number of
//! active elements times a forward pass, so it suits small inner problems only.

use crate::forward::JvpOutput;
use arrayad_ir::builder::Builder;
use arrayad_ir::visit::{freshen_block, Subst};
use arrayad_ir::{Atom, BinOp, Block, Expr, Function, ReduceOp, Scalar, StmtKind, Type, VarId};

/// The extents of `x` (rank `ty.rank`) as atoms.
fn dims(b: &mut Builder, x: VarId, ty: Type) -> Vec<Atom> {
    (0..ty.rank).map(|axis| Atom::Var(b.let1("n", Expr::Dim { array: x, axis }, Type::I64))).collect()
}

/// The number of elements of a value of extents `ds`.
fn numel(b: &mut Builder, ds: &[Atom]) -> Atom {
    ds.iter().fold(Atom::I64(1), |acc, d| b.binary(BinOp::Mul, acc, *d))
}

/// Nested builds over the extents `ds` whose element at multi-index `i` is
/// `elem(b, flat(i))`, with `flat` the row-major position.
fn nest(b: &mut Builder, ds: &[Atom], flat: Atom, elem: &mut dyn FnMut(&mut Builder, Atom) -> Atom) -> Atom {
    let Some((n, rest)) = ds.split_first() else { return elem(b, flat) };
    let i = b.var("i", Type::I64);
    b.begin_block();
    let scaled = b.binary(BinOp::Mul, flat, *n);
    let pos = b.binary(BinOp::Add, scaled, Atom::Var(i));
    let inner = nest(b, rest, pos, elem);
    let body = b.end_block(vec![inner]);
    let ty = Type::array(Scalar::F64, ds.len() as u8);
    Atom::Var(b.let1("col", Expr::Build { n: *n, index: i, body }, ty))
}

/// `sum(a * c)` over every element of `a` and `c` (same shape, rank `rank`).
fn inner(b: &mut Builder, a: Atom, c: Atom, rank: u8) -> Atom {
    if rank == 0 {
        return b.binary(BinOp::Mul, a, c);
    }
    let (Atom::Var(av), Atom::Var(cv)) = (a, c) else { return Atom::F64(0.0) };
    let n = b.let_one("n", Expr::Dim { array: av, axis: 0 });
    let i = b.var("i", Type::I64);
    b.begin_block();
    let row_ty = Type::array(Scalar::F64, rank - 1);
    let ar = Atom::Var(b.let1("a", Expr::Index { array: av, indices: vec![Atom::Var(i)] }, row_ty));
    let cr = Atom::Var(b.let1("c", Expr::Index { array: cv, indices: vec![Atom::Var(i)] }, row_ty));
    let s = inner(b, ar, cr, rank - 1);
    let body = b.end_block(vec![s]);
    let terms = b.let1("terms", Expr::Build { n, index: i, body }, Type::array(Scalar::F64, 1));
    b.let_one("sum", Expr::Reduce { op: ReduceOp::Sum, array: terms })
}

/// One active parameter leaf: its variable, type and tangent parameter.
struct Leaf {
    x: VarId,
    ty: Type,
    tangent: VarId,
}

/// The columns of the Jacobian for leaf `k`: a build over its elements
/// yielding, per f64 result, the jvp's tangent of that result for a
/// one-hot tangent of the element (the other leaves' tangents zero).
fn columns(b: &mut Builder, lin: &JvpOutput, jvp_body: &Block, leaves: &[Leaf], k: usize) -> (Atom, Vec<VarId>) {
    let ds = dims(b, leaves[k].x, leaves[k].ty);
    let n = numel(b, &ds);
    let e = b.var("e", Type::I64);
    b.begin_block();
    let mut subst = Subst::default();
    for (m, leaf) in leaves.iter().enumerate() {
        let t = if m == k {
            let dm = dims(b, leaf.x, leaf.ty);
            nest(b, &dm, Atom::I64(0), &mut |b, flat| {
                let hit = b.binary(BinOp::Eq, flat, Atom::Var(e));
                b.begin_block();
                let one = b.end_block(vec![Atom::F64(1.0)]);
                b.begin_block();
                let zero = b.end_block(vec![Atom::F64(0.0)]);
                crate::rules::select(b, hit, one, zero)
            })
        } else if leaf.ty.rank == 0 {
            Atom::F64(0.0)
        } else {
            Atom::Var(b.let1("zero", Expr::ZerosLike(leaf.x), leaf.ty))
        };
        subst.map.insert(leaf.tangent, t);
    }
    let copy = freshen_block(b.func, jvp_body, &[], &mut subst);
    for s in copy.stmts {
        b.loc = s.loc;
        b.stmt(s.kind);
    }
    let tangents: Vec<Atom> = copy.results[lin.n_primal_results..].to_vec();
    let body = b.end_block(tangents.clone());
    let vars: Vec<VarId> = tangents
        .iter()
        .map(|t| {
            let ty = b.func.atom_ty(t).lift();
            b.var("cols", ty)
        })
        .collect();
    b.stmt(StmtKind::Let { vars: vars.clone(), expr: Expr::Build { n, index: e, body } });
    (n, vars)
}

/// The cotangent of leaf `leaf` given result cotangents `cts` (one per f64
/// result) and that leaf's columns: element `e` is the sum over results of
/// `sum(ct * column[e])`, laid out in the leaf's shape.
fn cotangent(b: &mut Builder, leaf: &Leaf, n: Atom, cols: &[VarId], cts: &[Atom]) -> Atom {
    let e = b.var("e", Type::I64);
    b.begin_block();
    let mut s = Atom::F64(0.0);
    for (c, ct) in cols.iter().zip(cts) {
        let rank = b.func.ty(*c).rank - 1;
        let col = Atom::Var(b.let1(
            "col",
            Expr::Index { array: *c, indices: vec![Atom::Var(e)] },
            Type::array(Scalar::F64, rank),
        ));
        let term = inner(b, *ct, col, rank);
        s = b.binary(BinOp::Add, s, term);
    }
    let body = b.end_block(vec![s]);
    let flat = b.let1("flat", Expr::Build { n, index: e, body }, Type::array(Scalar::F64, 1));
    let laid_out = |b: &mut Builder| {
        let ds = dims(b, leaf.x, leaf.ty);
        nest(b, &ds, Atom::I64(0), &mut |b, pos| b.let_one("g", Expr::Index { array: flat, indices: vec![pos] }))
    };
    if leaf.ty.rank < 2 {
        return laid_out(b);
    }
    // A build of no rows has inner extents 0: a leaf without elements
    // (`[0][2]f64`) gets zeros of its own shape.
    let empty = b.binary(BinOp::Eq, n, Atom::I64(0));
    b.begin_block();
    let zero = Atom::Var(b.let1("zero", Expr::ZerosLike(leaf.x), leaf.ty));
    let then_b = b.end_block(vec![zero]);
    b.begin_block();
    let g = laid_out(b);
    let else_b = b.end_block(vec![g]);
    crate::rules::select(b, empty, then_b, else_b)
}

/// The vjp and many-row vjp of `lin` (the jvp of `prim`) by forward
/// columns, with the signatures of [`super::vjp_function`] and
/// [`super::vjp_rows_function`].
pub(crate) fn vjp_and_rows(lin: &JvpOutput, prim: &Function, vjp_name: &str, rows_name: &str) -> (Function, Function) {
    (build(lin, prim, vjp_name, false), build(lin, prim, rows_name, true))
}

/// The vjp alone (see [`vjp_and_rows`]).
pub(crate) fn vjp_function(lin: &JvpOutput, prim: &Function, name: &str) -> Function {
    build(lin, prim, name, false)
}

/// The many-row vjp alone (see [`vjp_and_rows`]).
pub(crate) fn vjp_rows_function(lin: &JvpOutput, prim: &Function, name: &str) -> Function {
    build(lin, prim, name, true)
}

fn build(lin: &JvpOutput, prim: &Function, name: &str, rows: bool) -> Function {
    let mut g = lin.func.clone();
    g.name = name.to_string();
    let jvp_body = std::mem::take(&mut g.body);
    let np = lin.n_primal_params;
    let tangent_params: Vec<VarId> = g.params[np..].to_vec();
    // The active leaves: the primal params the jvp gave a tangent param,
    // in order (each has the type of its param).
    let mut tangents = tangent_params.iter();
    let leaves: Vec<Leaf> = prim
        .params
        .iter()
        .filter_map(|&x| {
            let ty = prim.ty(x);
            let t = tangents.clone().next().copied().filter(|t| lin.primal_of.get(t) == Some(&x))?;
            tangents.next();
            Some(Leaf { x, ty, tangent: t })
        })
        .collect();
    let f64_results: Vec<Type> = prim.result_types.iter().copied().filter(|t| t.elem == Scalar::F64).collect();
    let cts: Vec<VarId> =
        f64_results.iter().map(|t| if rows { g.new_var("ct_rows", t.lift()) } else { g.new_var("ct", *t) }).collect();
    let mut b = Builder::new(&mut g);
    b.loc = prim.loc;
    // The primal, once (the jvp extends the primal's variable table).
    for s in &prim.body.stmts {
        b.loc = s.loc;
        b.stmt(s.kind.clone());
    }
    b.loc = prim.loc;
    let mut results = prim.body.results.clone();
    let rows_n = cts.first().filter(|_| rows).map(|c| {
        let r = b.let1("rows", Expr::Dim { array: *c, axis: 0 }, Type::I64);
        for (k, c) in cts.iter().enumerate().skip(1) {
            let rk = b.let1("rows", Expr::Dim { array: *c, axis: 0 }, Type::I64);
            b.stmt(StmtKind::CheckSize {
                a: Atom::Var(rk),
                b: Atom::Var(r),
                what: format!("the row counts of cotangent {k} and of cotangent 0"),
            });
        }
        Atom::Var(r)
    });
    for k in 0..leaves.len() {
        let (n, cols) = columns(&mut b, lin, &jvp_body, &leaves, k);
        let g_k = match rows_n {
            None => {
                let cts: Vec<Atom> = cts.iter().map(|c| Atom::Var(*c)).collect();
                cotangent(&mut b, &leaves[k], n, &cols, &cts)
            }
            Some(r_n) => {
                let r = b.var("row", Type::I64);
                b.begin_block();
                let row_cts: Vec<Atom> = cts
                    .iter()
                    .map(|c| {
                        let ty = b.func.ty(*c);
                        let row_ty = Type::array(Scalar::F64, ty.rank - 1);
                        Atom::Var(b.let1("ct", Expr::Index { array: *c, indices: vec![Atom::Var(r)] }, row_ty))
                    })
                    .collect();
                let gk = cotangent(&mut b, &leaves[k], n, &cols, &row_cts);
                let body = b.end_block(vec![gk]);
                let ty = leaves[k].ty.lift();
                Atom::Var(b.let1("ct_rows", Expr::Build { n: r_n, index: r, body }, ty))
            }
        };
        results.push(g_k);
    }
    let body = b.finish(results);
    let mut rtypes = prim.result_types.clone();
    rtypes.extend(leaves.iter().map(|l| if rows { l.ty.lift() } else { l.ty }));
    g.body = body;
    g.params = prim.params.clone();
    g.params.extend(cts);
    g.result_types = rtypes;
    g
}
