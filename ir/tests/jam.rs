//! Unroll-and-jam of backward loop nests (`passes::jam`): a loop over points
//! whose inner loops add into elements fixed by their indices runs two,
//! three, four or eight points per iteration, with the bits of the original
//! under the reference interpreter, for counts that leave none, some or all
//! points over, backward and forward; loops that break a condition of the
//! module docs are left as they are; the indices of the groups and of the
//! points left over are known in bounds (`passes::fallible`), so the jammed
//! loop can still be split out and run on threads.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::passes::fallible;
use arrayad_ir::passes::jam::jam_backward_nests;
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_program;
use arrayad_ir::{interp, ArrayValue, Value};
use common::{bits, v, F1};

/// What the loop does besides the legal pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Twist {
    /// Nothing: the loop is jammed.
    None,
    /// A second statement adds into `tot` (`tot[r] += xj`): an element
    /// then receives two additions per point.
    TwiceIntoOne,
    /// The inner addition goes into `tot[0]`, whatever `r`: one element
    /// receives an addition per row.
    NotFixedByRow,
    /// It reads an element of an accumulator the loop adds into.
    ReadsWritten,
    /// It adds into a mutable scalar bound outside it.
    AssignsOuter,
    /// It reads `x[j + 1]`, which may be out of bounds.
    MayFail,
}

const TWISTS: [Twist; 5] =
    [Twist::TwiceIntoOne, Twist::NotFixedByRow, Twist::ReadsWritten, Twist::AssignsOuter, Twist::MayFail];

/// `f(x: [n]f64) -> ([n][n]f64, [n]f64, [n]f64, f64)`:
///
/// ```text
/// let ct = zeros [n, n]; let tot = zeros_like x; let own = zeros_like x
/// for [rev] j < n do {
///   let xj = x[j]; let loc = zeros_like x
///   for r < n do {
///     let xr = x[r]; let part = ct[r][0:r]
///     for c < r do { part[c] += xj * x[c]; loc[c] += xr * xj }
///     tot[r] += xr * xj
///   }
///   own[j] += sum loc
/// }
/// ```
///
/// with the twist's statements added.
fn program(twist: Twist, reverse: bool) -> Program {
    let m2 = Type { elem: Scalar::F64, rank: 2 };
    let (mut f, ps) = Function::with_params("f", &[F1], &[m2, F1, F1, Type::F64]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let ct = b.let1("ct", Expr::Zeros(vec![n, n]), m2);
    let tot = b.let1("tot", Expr::ZerosLike(x), F1);
    let own = b.let1("own", Expr::ZerosLike(x), F1);
    let s = b.var("s", Type::F64);
    b.func.vars[s.index()].mutable = true;
    b.stmt(StmtKind::Let { vars: vec![s], expr: Expr::Atom(Atom::F64(0.0)) });
    let (j, r, c) = (b.var("j", Type::I64), b.var("r", Type::I64), b.var("c", Type::I64));
    b.begin_block();
    let xj = b.let_one("xj", Expr::Index { array: x, indices: vec![v(j)] });
    let loc = b.let1("loc", Expr::ZerosLike(x), F1);
    match twist {
        Twist::ReadsWritten => {
            let seen = b.let_one("seen", Expr::Index { array: tot, indices: vec![Atom::I64(0)] });
            let t = b.binary(BinOp::Add, seen, xj);
            b.stmt(StmtKind::AccAdd { acc: own, indices: vec![v(j)], value: t });
        }
        Twist::AssignsOuter => {
            let t = b.binary(BinOp::Add, v(s), xj);
            b.stmt(StmtKind::Assign { var: s, value: t });
        }
        Twist::MayFail => {
            let k = b.binary(BinOp::Add, v(j), Atom::I64(1));
            let next = b.let_one("next", Expr::Index { array: x, indices: vec![k] });
            b.stmt(StmtKind::AccAdd { acc: loc, indices: vec![Atom::I64(0)], value: next });
        }
        _ => {}
    }
    b.begin_block();
    let xr = b.let_one("xr", Expr::Index { array: x, indices: vec![v(r)] });
    let row = b.let1("row", Expr::Index { array: ct, indices: vec![v(r)] }, F1);
    let part = b.let1("part", Expr::Slice { array: row, lo: Atom::I64(0), hi: v(r) }, F1);
    b.begin_block();
    let xc = b.let_one("xc", Expr::Index { array: x, indices: vec![v(c)] });
    let p = b.binary(BinOp::Mul, xj, xc);
    b.stmt(StmtKind::AccAdd { acc: part, indices: vec![v(c)], value: p });
    let q = b.binary(BinOp::Mul, xr, xj);
    b.stmt(StmtKind::AccAdd { acc: loc, indices: vec![v(c)], value: q });
    let inner = b.end_block(vec![]);
    b.stmt(StmtKind::For { n: v(r), index: c, reverse: false, body: inner });
    let t = b.binary(BinOp::Mul, xr, xj);
    let at = if twist == Twist::NotFixedByRow { Atom::I64(0) } else { v(r) };
    b.stmt(StmtKind::AccAdd { acc: tot, indices: vec![at], value: t });
    if twist == Twist::TwiceIntoOne {
        b.stmt(StmtKind::AccAdd { acc: tot, indices: vec![v(r)], value: xj });
    }
    let rows = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: r, reverse: false, body: rows });
    let sum = b.let_one("sum", Expr::Reduce { op: ReduceOp::Sum, array: loc });
    if twist != Twist::ReadsWritten {
        b.stmt(StmtKind::AccAdd { acc: own, indices: vec![v(j)], value: sum });
    }
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: j, reverse, body });
    f.body = b.finish(vec![v(ct), v(tot), v(own), v(s)]);
    Program { file: "jam.arr".into(), funcs: vec![f] }
}

/// Inputs of mixed magnitudes and signs, so that additions in another
/// order round differently.
fn input(n: usize, case: usize) -> Vec<Value> {
    let data: Vec<f64> = (0..n)
        .map(|k| {
            let m = ((k * 7919 + case * 31) % 13) as f64 - 6.0;
            m * 10f64.powi((k % 7) as i32 - 3) + 0.1 * (k as f64 + 1.0).sqrt()
        })
        .collect();
    vec![Value::Array(ArrayValue::f64(vec![n], data).expect("array"))]
}

fn printed(p: &Program) -> String {
    arrayad_ir::printer::print_program(p)
}

/// The top-level loops of `p`'s function.
fn top_loops(p: &Program) -> Vec<&Stmt> {
    p.funcs[0].body.stmts.iter().filter(|s| matches!(s.kind, StmtKind::For { .. })).collect()
}

#[test]
fn nests_run_several_points_at_a_time_with_the_same_bits() {
    for factor in [2, 3, 4, 8] {
        for reverse in [true, false] {
            let p = program(Twist::None, reverse);
            verify_program(&p).unwrap_or_else(|e| panic!("program fails to verify: {e:?}"));
            let mut q = p.clone();
            assert!(jam_backward_nests(&mut q.funcs[0], factor), "factor {factor}, reverse {reverse}: not jammed");
            verify_program(&q).unwrap_or_else(|e| panic!("jammed program fails to verify: {e:?}\n{}", printed(&q)));
            // One loop over groups of points, at the groups' count; its
            // body holds one loop over the rows, whose body holds one loop
            // over a row. Then the branch of the points left over.
            let loops = top_loops(&q);
            assert_eq!(loops.len(), 1, "{}", printed(&q));
            let StmtKind::For { n: Atom::Var(groups), body, .. } = &loops[0].kind else { panic!("{}", printed(&q)) };
            let name = if factor == 2 { "pairs" } else { "groups" };
            assert!(q.funcs[0].var(*groups).name.starts_with(name), "{}", printed(&q));
            let inner: Vec<&Stmt> = body.stmts.iter().filter(|s| matches!(s.kind, StmtKind::For { .. })).collect();
            assert_eq!(inner.len(), 1, "the points' row loops are not one:\n{}", printed(&q));
            for n in [0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 17] {
                for case in 0..3 {
                    let args = input(n, case);
                    let want = interp::run(&p, FuncId(0), &args).expect("original runs");
                    let got = interp::run(&q, FuncId(0), &args).unwrap_or_else(|e| panic!("jammed fails: {e:?}"));
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "factor {factor}, reverse {reverse}, n = {n}, case {case}:\n{}",
                        printed(&q)
                    );
                }
            }
            // The points' indices are in bounds, the group's and those
            // left over: nothing in the jammed loop, nor in the branch
            // after it, may fail (as nothing in the original could).
            let facts = fallible::analyse(&q.funcs[0]);
            assert!(!facts.block(body), "factor {factor}: the jammed body may fail:\n{}", printed(&q));
            let last = q.funcs[0].body.stmts.iter().rev().find(|s| matches!(s.kind, StmtKind::If { .. }));
            let last = last.unwrap_or_else(|| panic!("no branch of the points left over:\n{}", printed(&q)));
            assert!(!facts.stmt(&last.kind), "factor {factor}: the points left over may fail:\n{}", printed(&q));
            assert!(!fallible::analyse(&p.funcs[0]).stmt(&p.funcs[0].body.stmts.last().unwrap().kind));
        }
    }
}

#[test]
fn loops_breaking_a_condition_are_left_alone() {
    for twist in TWISTS {
        for reverse in [true, false] {
            let p = program(twist, reverse);
            verify_program(&p).unwrap_or_else(|e| panic!("{twist:?}: program fails to verify: {e:?}"));
            let mut q = p.clone();
            assert!(!jam_backward_nests(&mut q.funcs[0], 4), "{twist:?}: jammed");
            assert_eq!(printed(&q), printed(&p), "{twist:?}: rewritten");
        }
    }
}

/// The index of a case of [`remainders_are_added_to_strides_once`], from
/// `s` and `r`.
type IndexOf = fn(&mut Builder, Atom, Atom) -> Atom;

/// `for p < n / 2 do { let t = p * 2; let s = t + r; ... x[i] }` with `r =
/// n - n / 2 * 2`: `s` and `s + 1` are in bounds, `s + 2` and `s + r + 1`
/// (the remainder added twice) may not be.
#[test]
fn remainders_are_added_to_strides_once() {
    let cases: [(&str, IndexOf, bool); 4] = [
        ("s", |_, s, _| s, false),
        ("s + 1", |b, s, _| b.binary(BinOp::Add, s, Atom::I64(1)), false),
        ("s + 2", |b, s, _| b.binary(BinOp::Add, s, Atom::I64(2)), true),
        (
            "s + r + 1",
            |b, s, r| {
                let twice = b.binary(BinOp::Add, s, r);
                b.binary(BinOp::Add, twice, Atom::I64(1))
            },
            true,
        ),
    ];
    for (name, index, may_fail) in cases {
        let (mut f, ps) = Function::with_params("f", &[F1], &[Type::F64]);
        let x = ps[0];
        let mut b = Builder::new(&mut f);
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let h = b.binary(BinOp::Div, n, Atom::I64(2));
        let e = b.binary(BinOp::Mul, h, Atom::I64(2));
        let r = b.binary(BinOp::Sub, n, e);
        let tot = b.var("tot", Type::F64);
        b.func.vars[tot.index()].mutable = true;
        b.stmt(StmtKind::Let { vars: vec![tot], expr: Expr::Atom(Atom::F64(0.0)) });
        let p = b.var("p", Type::I64);
        b.begin_block();
        let t = b.binary(BinOp::Mul, v(p), Atom::I64(2));
        let s = b.binary(BinOp::Add, t, r);
        let i = index(&mut b, s, r);
        let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![i] });
        let sum = b.binary(BinOp::Add, v(tot), xi);
        b.stmt(StmtKind::Assign { var: tot, value: sum });
        let body = b.end_block(vec![]);
        b.stmt(StmtKind::For { n: h, index: p, reverse: false, body });
        f.body = b.finish(vec![v(tot)]);
        let prog = Program { file: "strides.arr".into(), funcs: vec![f] };
        verify_program(&prog).unwrap_or_else(|e| panic!("{name}: program fails to verify: {e:?}"));
        let f = &prog.funcs[0];
        let facts = fallible::analyse(f);
        let StmtKind::For { body, .. } =
            &f.body.stmts.iter().rev().find(|s| matches!(s.kind, StmtKind::For { .. })).unwrap().kind
        else {
            unreachable!()
        };
        assert_eq!(facts.block(body), may_fail, "x[{name}]:\n{}", printed(&prog));
        if may_fail {
            // n = 3: p = 0, r = 1, s = 1, and the index is 3.
            let args = input(3, 0);
            assert!(interp::run(&prog, FuncId(0), &args).is_err(), "x[{name}] is in bounds at n = 3");
        }
    }
}
