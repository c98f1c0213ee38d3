//! Backward loops run forward (`passes::forward_loops`): a loop whose iterations
//! add only into their own elements of outer accumulators, directly and
//! through a view of their row, loses `rev` and gives bitwise the results
//! of the original under the reference interpreter; loops that break a
//! condition of the module docs keep `rev`.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::passes::forward_loops::run_independent_loops_forward;
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_program;
use common::{assert_same_results, v, F1};

/// What the loop does besides the legal pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Twist {
    /// Nothing: the loop runs forward.
    None,
    /// It reads an element of an accumulator it adds into (another
    /// iteration's).
    ReadsWritten,
    /// It adds into element 0 of an accumulator, not element `i`.
    AddsElsewhere,
    /// It adds at `i` through two slices of one accumulator that start
    /// one element apart (iteration `i` adds into `i` and `i + 1`).
    OverlappingViews,
    /// It adds into a mutable scalar bound outside it (a chain of
    /// additions in the order of the iterations).
    AssignsOuter,
    /// It reads element 0 of the accumulator through the array popped
    /// after pushing it (the tape holds arrays by reference).
    ReadsThroughTape,
    /// Besides row `i` of `rows` (through its view), it adds into column
    /// `i` (`rows[c, i]`): `rows[a, b]` receives from iterations `a` and `b`.
    CrossesAxes,
}

/// `f(x: [n]f64) -> ([n]f64, [n][n]f64, f64)` (n >= 1: `tail` is `acc[1:n]`): `acc = zeros_like x`,
/// `rows = zeros [n, n]`, a mutable `s = 0.0`, and
///
/// ```text
/// for rev i < n do {
///   let xi = x[i]
///   acc[i] += xi * xi
///   let row = rows[i]
///   for c < n do { row[c] += xi * x[c] }
/// }
/// ```
///
/// with the twist's statements added.
fn program(twist: Twist) -> Program {
    let m2 = Type { elem: Scalar::F64, rank: 2 };
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1, m2, Type::F64]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let acc = b.let1("acc", Expr::ZerosLike(x), F1);
    let rows = b.let1("rows", Expr::Zeros(vec![n, n]), m2);
    let s = b.var("s", Type::F64);
    b.func.vars[s.index()].mutable = true;
    b.stmt(StmtKind::Let { vars: vec![s], expr: Expr::Atom(Atom::F64(0.0)) });
    let one = b.let_one("one", Expr::Atom(Atom::I64(1)));
    let head = b.let1("head", Expr::Slice { array: acc, lo: Atom::I64(0), hi: n }, F1);
    let tail = b.let1("tail", Expr::Slice { array: acc, lo: one, hi: n }, F1);
    let popped = (twist == Twist::ReadsThroughTape).then(|| {
        b.stmt(StmtKind::Push(v(acc)));
        b.let1("popped", Expr::Pop, F1)
    });
    let (i, c) = (b.var("i", Type::I64), b.var("c", Type::I64));
    b.begin_block();
    let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![v(i)] });
    let sq = b.binary(BinOp::Mul, xi, xi);
    b.stmt(StmtKind::AccAdd { acc, indices: vec![v(i)], value: sq });
    match twist {
        Twist::OverlappingViews => {
            // (`tail` has n - 1 elements: the loop runs n - 1 times.)
            b.stmt(StmtKind::AccAdd { acc: head, indices: vec![v(i)], value: sq });
            b.stmt(StmtKind::AccAdd { acc: tail, indices: vec![v(i)], value: sq });
        }
        Twist::ReadsWritten => {
            let seen = b.let_one("seen", Expr::Index { array: acc, indices: vec![Atom::I64(0)] });
            b.stmt(StmtKind::AccAdd { acc, indices: vec![v(i)], value: seen });
        }
        Twist::AddsElsewhere => b.stmt(StmtKind::AccAdd { acc, indices: vec![Atom::I64(0)], value: xi }),
        Twist::AssignsOuter => {
            let t = b.binary(BinOp::Add, v(s), xi);
            b.stmt(StmtKind::Assign { var: s, value: t });
        }
        Twist::ReadsThroughTape => {
            let seen = b.let_one("seen", Expr::Index { array: popped.unwrap(), indices: vec![Atom::I64(0)] });
            b.stmt(StmtKind::AccAdd { acc, indices: vec![v(i)], value: seen });
        }
        Twist::CrossesAxes | Twist::None => {}
    }
    let row = b.let1("row", Expr::Index { array: rows, indices: vec![v(i)] }, F1);
    b.begin_block();
    let xc = b.let_one("xc", Expr::Index { array: x, indices: vec![v(c)] });
    let r = b.binary(BinOp::Mul, xi, xc);
    b.stmt(StmtKind::AccAdd { acc: row, indices: vec![v(c)], value: r });
    if twist == Twist::CrossesAxes {
        let cc = b.binary(BinOp::Mul, xc, xc);
        b.stmt(StmtKind::AccAdd { acc: rows, indices: vec![v(c), v(i)], value: xc });
        b.stmt(StmtKind::AccAdd { acc: rows, indices: vec![v(c), v(i)], value: cc });
    }
    let inner = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: c, reverse: false, body: inner });
    let body = b.end_block(vec![]);
    let count = if twist == Twist::OverlappingViews { b.binary(BinOp::Sub, n, one) } else { n };
    b.stmt(StmtKind::For { n: count, index: i, reverse: true, body });
    f.body = b.finish(vec![v(acc), v(rows), v(s)]);
    Program { file: "forward.arr".into(), funcs: vec![f] }
}

const TWISTS: [Twist; 6] = [
    Twist::ReadsWritten,
    Twist::AddsElsewhere,
    Twist::OverlappingViews,
    Twist::AssignsOuter,
    Twist::CrossesAxes,
    Twist::ReadsThroughTape,
];

/// Whether the top-level loop of `p`'s function still runs backwards.
fn reversed(p: &Program) -> bool {
    p.funcs[0].body.stmts.iter().any(|s| matches!(s.kind, StmtKind::For { reverse: true, .. }))
}

#[test]
fn independent_loops_run_forward_with_the_same_bits() {
    let p = program(Twist::None);
    verify_program(&p).unwrap_or_else(|e| panic!("program fails to verify: {e:?}"));
    let mut q = p.clone();
    assert!(run_independent_loops_forward(&mut q.funcs[0]));
    verify_program(&q).unwrap_or_else(|e| panic!("rewritten program fails to verify: {e:?}"));
    assert!(!reversed(&q), "still reversed:\n{}", arrayad_ir::printer::print_program(&q));
    for case in 0..3 {
        assert_same_results(&p, &q, case, &[1, 2, 3, 9, 16], "forward");
    }
}

#[test]
fn loops_breaking_a_condition_keep_rev() {
    for twist in TWISTS {
        let p = program(twist);
        verify_program(&p).unwrap_or_else(|e| panic!("{twist:?}: program fails to verify: {e:?}"));
        let mut q = p.clone();
        assert!(!run_independent_loops_forward(&mut q.funcs[0]), "{twist:?}: rewritten");
        assert_eq!(
            arrayad_ir::printer::print_program(&q),
            arrayad_ir::printer::print_program(&p),
            "{twist:?}: rewritten"
        );
    }
}

/// The twists would change the results if the loop ran forward: the
/// checks above are not vacuous.
#[test]
fn the_twists_change_bits_when_reordered() {
    for twist in TWISTS {
        let p = program(twist);
        let mut q = p.clone();
        for s in &mut q.funcs[0].body.stmts {
            if let StmtKind::For { reverse, .. } = &mut s.kind {
                *reverse = false;
            }
        }
        // (Whether an order of additions rounds differently depends on the
        // numbers: some of these inputs show it for every twist.)
        let inputs: [fn(usize) -> f64; 3] = [
            |k| 0.1 + k as f64 * 1e-3 + (k * k) as f64 * 7.0,
            |k| (k as f64 + 0.5).sqrt() * 3.7 + (k * k * k) as f64 * 1e-3,
            |k| 1.0 / (k as f64 + 0.3) + k as f64 * 0.7,
        ];
        let differs = inputs.iter().any(|x| {
            let data: Vec<f64> = (0..9).map(x).collect();
            let args = [arrayad_ir::Value::Array(arrayad_ir::ArrayValue::f64(vec![9], data).unwrap())];
            let a = arrayad_ir::interp::run(&p, FuncId(0), &args).unwrap();
            let b = arrayad_ir::interp::run(&q, FuncId(0), &args).unwrap();
            format!("{a:?}") != format!("{b:?}")
        });
        assert!(differs, "{twist:?}: the same results either way");
    }
}
