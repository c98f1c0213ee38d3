//! Fusion of adjacent `for` loops (`passes::fuse_for`) on generated
//! backward-pass-like programs: chains of loops that read and add into
//! shared accumulators at offsets -1, 0 and +1 from the loop index, some of
//! them through copies. The fused program must give bitwise the results of
//! the unfused one under the reference interpreter, and the generator must
//! produce programs where fusion happens as well as ones where it must not.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::interp;
use arrayad_ir::passes::fuse_for::fuse_for_loops;
use arrayad_ir::program::*;
use arrayad_ir::types::Type;
use arrayad_ir::verify::verify_program;
use arrayad_ir::{ArrayValue, Value};
use common::{assert_same_results, bits, v, Rng, F1};

/// A program of `x: [n]f64` returning four accumulators after a chain of
/// 2 to 6 loops (one direction, sometimes another for one loop), each
/// doing 1 to 4 guarded reads and additions at `i + c`, `c` in -1..=1, or
/// at a literal `k + c` under `if i == k`.
/// Accumulator 3 is accumulator 2 under another name (a copy, or a
/// mutable variable) in some programs; accumulator 1 is copied after the
/// loops.
fn program(rng: &mut Rng) -> Program {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1, F1, F1, F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let mut accs: Vec<VarId> = (0..3).map(|k| b.let1(format!("a{k}"), Expr::ZerosLike(x), F1)).collect();
    accs.push(match rng.below(3) {
        0 => b.let1("a3", Expr::Atom(v(accs[2])), F1),
        1 => {
            // A mutable variable naming accumulator 2.
            let m = b.var("a3", F1);
            b.func.vars[m.index()].mutable = true;
            b.stmt(StmtKind::Let { vars: vec![m], expr: Expr::Atom(v(accs[2])) });
            m
        }
        _ => b.let1("a3", Expr::ZerosLike(x), F1),
    });
    let reverse = rng.below(2) == 0;
    for _ in 0..2 + rng.below(5) {
        let i = b.var("i", Type::I64);
        b.begin_block();
        let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![v(i)] });
        let mut value = xi;
        for _ in 0..1 + rng.below(4) {
            let c = rng.below(3) as i64 - 1;
            let acc = accs[rng.below(4) as usize];
            let literal = rng.below(4) == 0;
            let (j, inside) = if literal {
                // `if i == k then acc[k + c]` with a literal index (in
                // bounds: 1 <= k < n, c <= 0).
                let k = 1 + rng.below(3) as i64;
                let c = c.min(0);
                (Atom::I64(k + c), b.binary(BinOp::Eq, v(i), Atom::I64(k)))
            } else {
                let j = b.binary(BinOp::Add, v(i), Atom::I64(c));
                let ge = b.binary(BinOp::Ge, j, Atom::I64(0));
                let lt = b.binary(BinOp::Lt, j, n);
                (j, b.binary(BinOp::And, ge, lt))
            };
            let read = rng.below(2) == 0;
            if !read {
                value = b.binary(BinOp::Mul, value, Atom::F64(1.0 + rng.below(7) as f64 / 8.0));
            }
            b.begin_block();
            if read {
                // A read, added to the running value, then an addition.
                let t = b.let_one("t", Expr::Index { array: acc, indices: vec![j] });
                let scaled = b.binary(BinOp::Mul, t, Atom::F64(0.75));
                let sum = b.binary(BinOp::Add, scaled, value);
                b.stmt(StmtKind::AccAdd { acc: accs[rng.below(4) as usize], indices: vec![v(i)], value: sum });
            } else {
                b.stmt(StmtKind::AccAdd { acc, indices: vec![j], value });
            }
            let then_branch = b.end_block(vec![]);
            b.begin_block();
            if literal && rng.below(2) == 0 {
                // Where `i != k`: an addition at index 0 (no offset).
                b.stmt(StmtKind::AccAdd { acc: accs[rng.below(4) as usize], indices: vec![Atom::I64(0)], value });
            }
            let else_branch = b.end_block(vec![]);
            b.stmt(StmtKind::If { cond: inside, then_branch, else_branch });
        }
        let body = b.end_block(vec![]);
        let reverse = if rng.below(8) == 0 { !reverse } else { reverse };
        b.stmt(StmtKind::For { n, index: i, reverse, body });
    }
    // A copy made after the loops (which they cannot see).
    let copy = b.let1("copy", Expr::Atom(v(accs[1])), F1);
    f.body = b.finish(vec![v(accs[0]), v(copy), v(accs[2]), v(accs[3])]);
    let p = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&p).expect("generated program verifies");
    p
}

fn loops(b: &Block) -> usize {
    b.stmts.iter().filter(|s| matches!(s.kind, StmtKind::For { .. })).count()
}

#[test]
fn fused_loops_give_bitwise_the_unfused_results() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut fused_programs, mut kept_apart) = (0, 0);
    for case in 0..400 {
        let p = program(&mut rng);
        let mut q = p.clone();
        fuse_for_loops(&mut q.funcs[0]);
        verify_program(&q).unwrap_or_else(|e| panic!("case {case}: fused program fails to verify: {e:?}"));
        let (before, after) = (loops(&p.funcs[0].body), loops(&q.funcs[0].body));
        if after < before {
            fused_programs += 1;
        }
        if after > 1 {
            kept_apart += 1;
        }
        assert_same_results(&p, &q, case, &[0, 1, 2, 7], "fused");
    }
    assert!(fused_programs >= 100, "only {fused_programs} of 400 programs had loops fused");
    assert!(kept_apart >= 100, "only {kept_apart} of 400 programs kept loops apart");
}

/// `for i < m do { a[i] += x[i]; m := 1 }; for i < m do b[i] += 1.0` with a
/// mutable count: the second loop runs once, so fusing would change `b`.
#[test]
fn loops_over_a_count_the_first_assigns_stay_apart() {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1, F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let m = b.var("m", Type::I64);
    b.func.vars[m.index()].mutable = true;
    b.stmt(StmtKind::Let { vars: vec![m], expr: Expr::Atom(n) });
    let a = b.let1("a", Expr::ZerosLike(x), F1);
    let c = b.let1("c", Expr::ZerosLike(x), F1);
    let (i, j) = (b.var("i", Type::I64), b.var("j", Type::I64));
    b.begin_block();
    let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![v(i)] });
    b.stmt(StmtKind::AccAdd { acc: a, indices: vec![v(i)], value: xi });
    b.stmt(StmtKind::Assign { var: m, value: Atom::I64(1) });
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n: v(m), index: i, reverse: false, body });
    b.begin_block();
    b.stmt(StmtKind::AccAdd { acc: c, indices: vec![v(j)], value: Atom::F64(1.0) });
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n: v(m), index: j, reverse: false, body });
    f.body = b.finish(vec![v(a), v(c)]);
    let got = kept_apart(f);
    assert_eq!(got[1].f64_elements(), Some(&[1.0, 0.0, 0.0][..]));
}

/// Fuses `f`'s loops, asserts its two loops stay apart and that the
/// results are bitwise those of the unfused function at `x = [1, 2, 3]`,
/// and returns them.
fn kept_apart(f: Function) -> Vec<Value> {
    let p = Program { file: "t.arr".into(), funcs: vec![f] };
    verify_program(&p).expect("verifies");
    let mut q = p.clone();
    fuse_for_loops(&mut q.funcs[0]);
    assert_eq!(loops(&q.funcs[0].body), 2, "{}", arrayad_ir::printer::print_program(&q));
    let args = [Value::Array(ArrayValue::f64(vec![3], vec![1.0, 2.0, 3.0]).expect("array"))];
    let got = interp::run(&q, FuncId(0), &args).expect("runs");
    assert_eq!(bits(&got), bits(&interp::run(&p, FuncId(0), &args).expect("runs")));
    got
}

/// `for i < n do m := zeros [i]; for j < n do out[j] += f64(dim m 0)`: the
/// second loop reads only the shape of `m`, which the first assigns, so
/// fusing would change `out`.
#[test]
fn a_loop_reading_the_shape_of_what_the_other_assigns_stays_apart() {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let m = b.var("m", F1);
    b.func.vars[m.index()].mutable = true;
    b.stmt(StmtKind::Let { vars: vec![m], expr: Expr::ZerosLike(x) });
    let out = b.let1("out", Expr::ZerosLike(x), F1);
    let (i, j) = (b.var("i", Type::I64), b.var("j", Type::I64));
    b.begin_block();
    let a = b.let_one("a", Expr::Zeros(vec![v(i)]));
    b.stmt(StmtKind::Assign { var: m, value: a });
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse: false, body });
    b.begin_block();
    let d = b.let_one("d", Expr::Dim { array: m, axis: 0 });
    let e = b.unary(UnOp::ToF64, d);
    b.stmt(StmtKind::AccAdd { acc: out, indices: vec![v(j)], value: e });
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: j, reverse: false, body });
    f.body = b.finish(vec![v(out)]);
    let got = kept_apart(f);
    assert_eq!(got[0].f64_elements(), Some(&[2.0, 2.0, 2.0][..]));
}
