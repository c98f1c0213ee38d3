//! The imperative forms of the backward pass: mutable variables, the tape,
//! accumulators, effect loops (forward and reverse) and branches, size checks.

mod common;
use arrayad_ir::builder::Builder;
use arrayad_ir::*;
use common::*;

fn idx(b: &mut Builder, a: VarId, is: &[Atom]) -> Atom {
    b.let_one("x", Expr::Index { array: a, indices: is.to_vec() })
}

fn for_(b: &mut Builder, n: Atom, reverse: bool, body: impl FnOnce(&mut Builder, Atom)) {
    let i = b.var("i", Type::I64);
    b.begin_block();
    body(b, v(i));
    let blk = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse, body: blk });
}

fn pop(b: &mut Builder, t: Type) -> Atom {
    v(b.let1("p", Expr::Pop, t))
}

/// Pushes i = 0..n-1 in a forward loop, pops them in a reverse loop into a
/// mutable accumulator `acc := acc * 10 + popped` (the order shows).
#[test]
fn tape_round_trip_in_reverse_order() {
    let p = program1(&[Type::I64], &[Type::I64, Type::F64], |b, ps| {
        let n = v(ps[0]);
        for_(b, n, false, |b, i| {
            b.stmt(StmtKind::Push(i));
            let f = b.unary(UnOp::ToF64, i);
            b.stmt(StmtKind::Push(f));
        });
        let acc = b.func.new_mut_var("acc", Type::I64);
        b.stmt(StmtKind::Let { vars: vec![acc], expr: Expr::Atom(Atom::I64(0)) });
        let facc = b.func.new_mut_var("facc", Type::F64);
        b.stmt(StmtKind::Let { vars: vec![facc], expr: Expr::Atom(Atom::F64(0.0)) });
        for_(b, n, true, |b, _| {
            let f = pop(b, Type::F64);
            let k = pop(b, Type::I64);
            let t = b.binary(BinOp::Mul, v(acc), Atom::I64(10));
            let t = b.binary(BinOp::Add, t, k);
            b.stmt(StmtKind::Assign { var: acc, value: t });
            let g = b.binary(BinOp::Add, v(facc), f);
            b.stmt(StmtKind::Assign { var: facc, value: g });
        });
        vec![v(acc), v(facc)]
    });
    assert_eq!(run_both(&p, &[Value::I64(4)]).unwrap(), vec![Value::I64(3210), Value::F64(6.0)]);
    assert_eq!(run_both(&p, &[Value::I64(0)]).unwrap(), vec![Value::I64(0), Value::F64(0.0)]);
    assert_eq!(run_both(&p, &[Value::I64(-3)]).unwrap(), vec![Value::I64(0), Value::F64(0.0)]);
    // Many entries: the tape grows (more than its first 1024 slots).
    let n = 100_000i64;
    let r = jit(&p).call("f", &[Value::I64(n)]).unwrap();
    assert_eq!(r[1], Value::F64((0..n).rev().map(|k| k as f64).fold(0.0, |a, b| a + b)));
}

#[test]
fn tape_holds_every_type_and_arrays_by_reference() {
    // push x (array), push b, push 2.5, push 7; pop in reverse; return them
    let p = program1(&[F2, Type::BOOL], &[Type::I64, Type::F64, Type::BOOL, F2, Type::F64], |b, ps| {
        b.stmt(StmtKind::Push(v(ps[0])));
        b.stmt(StmtKind::Push(v(ps[1])));
        b.stmt(StmtKind::Push(Atom::F64(2.5)));
        b.stmt(StmtKind::Push(Atom::I64(7)));
        let k = pop(b, Type::I64);
        let f = pop(b, Type::F64);
        let bo = pop(b, Type::BOOL);
        let a = pop(b, F2);
        let e = idx(b, a.as_var().unwrap(), &[Atom::I64(1), Atom::I64(0)]);
        vec![k, f, bo, a, e]
    });
    let m = arr_f64(&[2, 2], &[1., 2., 3., 4.]);
    let r = run_both(&p, &[m.clone(), Value::Bool(true)]).unwrap();
    assert_eq!(r, vec![Value::I64(7), Value::F64(2.5), Value::Bool(true), m, Value::F64(3.0)]);
}

#[test]
fn tape_underflow_is_reported_not_a_crash() {
    let p = program1(&[], &[Type::F64], |b, _| vec![pop(b, Type::F64)]);
    let e = jit(&p).call("f", &[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("tape"), "{}", e.message);
}

/// `acc = zeros_like(x)`; `acc[i, j] += x[i, j] * k`; `acc[i] += row`; and
/// the whole accumulated through a view `acc[1]`.
#[test]
fn accumulators_scalar_and_row_wise_through_views() {
    let p = program1(&[F2, F1], &[F2], |b, ps| {
        let (x, r) = (ps[0], ps[1]);
        let acc = b.let_one("acc", Expr::ZerosLike(x)).as_var().unwrap();
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let m = b.let_one("m", Expr::Dim { array: x, axis: 1 });
        for_(b, n, false, |b, i| {
            for_(b, m, true, |b, j| {
                let e = idx(b, x, &[i, j]);
                let e3 = b.binary(BinOp::Mul, e, Atom::F64(3.0));
                b.stmt(StmtKind::AccAdd { acc, indices: vec![i, j], value: e3 });
            });
            b.stmt(StmtKind::AccAdd { acc, indices: vec![i], value: v(r) });
        });
        let row1 = b.let_one("row1", Expr::Index { array: acc, indices: vec![Atom::I64(1)] }).as_var().unwrap();
        b.stmt(StmtKind::AccAdd { acc: row1, indices: vec![Atom::I64(0)], value: Atom::F64(100.0) });
        vec![v(acc)]
    });
    let x = arr_f64(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let r = arr_f64(&[3], &[0.5, 0.25, 0.125]);
    let out = run_both(&p, &[x.clone(), r]).unwrap();
    assert_eq!(out, vec![arr_f64(&[2, 3], &[3.5, 6.25, 9.125, 112.5, 15.25, 18.125])]);
    // A row of the wrong length is a size mismatch.
    let msg = expect_err(run_both(&p, &[x, arr_f64(&[2], &[0.0, 0.0])]), ErrorKind::SizeMismatch, &["t.arr:3:7"]);
    assert!(msg.contains("accumulation into `acc`"), "{msg}");
    assert!(msg.contains("2 and 3 differ"), "{msg}");
}

#[test]
fn accumulator_index_out_of_bounds() {
    let p = program1(&[F1, Type::I64], &[F1], |b, ps| {
        let acc = b.let_one("acc", Expr::ZerosLike(ps[0])).as_var().unwrap();
        b.stmt(StmtKind::AccAdd { acc, indices: vec![v(ps[1])], value: Atom::F64(1.0) });
        vec![v(acc)]
    });
    let x = arr_f64(&[3], &[0.0; 3]);
    assert_eq!(run_both(&p, &[x.clone(), Value::I64(2)]).unwrap(), vec![arr_f64(&[3], &[0., 0., 1.])]);
    expect_err(run_both(&p, &[x, Value::I64(3)]), ErrorKind::IndexOutOfBounds, &["t.arr:3:7", "index 3", "`acc`"]);
}

#[test]
fn effect_if_and_mutable_arrays() {
    // mut best := x; for i < n: if x[i] > 0 then best := (for j => x[j] + i) else ()
    let p = program1(&[F1], &[F1, Type::I64], |b, ps| {
        let x = ps[0];
        let best = b.func.new_mut_var("best", F1);
        b.stmt(StmtKind::Let { vars: vec![best], expr: Expr::Atom(v(x)) });
        let cnt = b.func.new_mut_var("cnt", Type::I64);
        b.stmt(StmtKind::Let { vars: vec![cnt], expr: Expr::Atom(Atom::I64(0)) });
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        for_(b, n, false, |b, i| {
            let e = idx(b, x, &[i]);
            let c = b.binary(BinOp::Gt, e, Atom::F64(0.0));
            b.begin_block();
            let fi = b.unary(UnOp::ToF64, i);
            let nb = build(b, n, |b, j| {
                let xj = idx(b, x, &[j]);
                b.binary(BinOp::Add, xj, fi)
            });
            b.stmt(StmtKind::Assign { var: best, value: nb });
            let c1 = b.binary(BinOp::Add, v(cnt), Atom::I64(1));
            b.stmt(StmtKind::Assign { var: cnt, value: c1 });
            let t = b.end_block(vec![]);
            b.begin_block();
            let e = b.end_block(vec![]);
            b.stmt(StmtKind::If { cond: c, then_branch: t, else_branch: e });
        });
        vec![v(best), v(cnt)]
    });
    let r = run_both(&p, &[arr_f64(&[3], &[1.0, -1.0, 2.0])]).unwrap();
    assert_eq!(r, vec![arr_f64(&[3], &[3.0, 1.0, 4.0]), Value::I64(2)]);
    let r = run_both(&p, &[arr_f64(&[2], &[-1.0, -1.0])]).unwrap();
    assert_eq!(r, vec![arr_f64(&[2], &[-1.0, -1.0]), Value::I64(0)]);
}

#[test]
fn check_size() {
    let p = program1(&[F1, F1], &[Type::F64], |b, ps| {
        let n = b.let_one("n", Expr::Dim { array: ps[0], axis: 0 });
        let m = b.let_one("m", Expr::Dim { array: ps[1], axis: 0 });
        b.stmt(StmtKind::CheckSize { a: n, b: m, what: "operands of `+` (100%)".into() });
        vec![Atom::F64(1.0)]
    });
    assert_eq!(run_both(&p, &[arr_f64(&[2], &[0.; 2]), arr_f64(&[2], &[0.; 2])]).unwrap(), vec![Value::F64(1.0)]);
    let msg =
        expect_err(run_both(&p, &[arr_f64(&[2], &[0.; 2]), arr_f64(&[3], &[0.; 3])]), ErrorKind::SizeMismatch, &[]);
    assert_eq!(msg, "t.arr:3:7: size mismatch: operands of `+` (100%): 2 and 3 differ");
}

/// A hand-written reverse pass over a loop: f(x) = prod_i x[i] by a loop
/// with the running product taped, then the gradient by a reverse For.
#[test]
fn hand_written_reverse_pass() {
    let p = program1(&[F1], &[Type::F64, F1], |b, ps| {
        let x = ps[0];
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let i = b.var("i", Type::I64);
        let s = b.var("s", Type::F64);
        b.begin_block();
        b.stmt(StmtKind::Push(v(s)));
        let e = idx(b, x, &[v(i)]);
        let s2 = b.binary(BinOp::Mul, v(s), e);
        let body = b.end_block(vec![s2]);
        let prod = b.let_one("prod", Expr::Loop { n, index: i, states: vec![s], init: vec![Atom::F64(1.0)], body });
        let dx = b.let_one("dx", Expr::ZerosLike(x)).as_var().unwrap();
        let ct = b.func.new_mut_var("ct", Type::F64);
        b.stmt(StmtKind::Let { vars: vec![ct], expr: Expr::Atom(Atom::F64(1.0)) });
        for_(b, n, true, |b, i| {
            let sprev = pop(b, Type::F64);
            let xi = idx(b, x, &[i]);
            let g = b.binary(BinOp::Mul, v(ct), sprev);
            b.stmt(StmtKind::AccAdd { acc: dx, indices: vec![i], value: g });
            let c2 = b.binary(BinOp::Mul, v(ct), xi);
            b.stmt(StmtKind::Assign { var: ct, value: c2 });
        });
        vec![prod, v(dx)]
    });
    let r = run_both(&p, &[arr_f64(&[4], &[2.0, 3.0, 5.0, 7.0])]).unwrap();
    assert_eq!(r, vec![Value::F64(210.0), arr_f64(&[4], &[105.0, 70.0, 42.0, 30.0])]);
}

/// One forward pass, many backward passes: a loop pushes `i` and the array
/// `x * i` (arena memory, by reference) for `i < n`; then
/// `build row < rows => { tape_rewind mark; acc := 0; g = zeros_like x;
/// for rev i < n { a = pop; k = pop; acc := acc * 10 + k + row; g += a };
/// yield acc, g }` pops the same entries for every row.
fn replay_program() -> Program {
    program1(&[Type::I64, Type::I64, F1], &[I1, F2, Type::BOOL], |b, ps| {
        let (n, rows, x) = (v(ps[0]), v(ps[1]), ps[2]);
        for_(b, n, false, |b, i| {
            b.stmt(StmtKind::Push(i));
            let fi = b.unary(UnOp::ToF64, i);
            let len = b.let_one("len", Expr::Dim { array: x, axis: 0 });
            let xs = build(b, len, |b, j| {
                let e = idx(b, x, &[j]);
                b.binary(BinOp::Mul, e, fi)
            });
            b.stmt(StmtKind::Push(xs));
        });
        let mark = b.let1("mark", Expr::TapeMark, Type::I64);
        let row = b.var("row", Type::I64);
        b.begin_block();
        b.stmt(StmtKind::TapeRewind(v(mark)));
        let acc = b.func.new_mut_var("acc", Type::I64);
        b.stmt(StmtKind::Let { vars: vec![acc], expr: Expr::Atom(Atom::I64(0)) });
        let g = b.let_one("g", Expr::ZerosLike(x)).as_var().unwrap();
        for_(b, n, true, |b, _| {
            let a = pop(b, F1);
            let k = pop(b, Type::I64);
            let t = b.binary(BinOp::Mul, v(acc), Atom::I64(10));
            let t = b.binary(BinOp::Add, t, k);
            let t = b.binary(BinOp::Add, t, v(row));
            b.stmt(StmtKind::Assign { var: acc, value: t });
            b.stmt(StmtKind::AccAdd { acc: g, indices: vec![], value: a });
        });
        let body = b.end_block(vec![v(acc), v(g)]);
        let (accs, gs) = (b.var("accs", I1), b.var("gs", F2));
        b.stmt(StmtKind::Let { vars: vec![accs, gs], expr: Expr::Build { n: rows, index: row, body } });
        // Whether the tape is empty now (after a row popped everything the
        // forward pass pushed). Marks count entries in the interpreter and
        // 8-byte slots in compiled code: only 0 means the same.
        let left = b.let1("left", Expr::TapeMark, Type::I64);
        let empty = b.binary(BinOp::Eq, v(left), Atom::I64(0));
        vec![v(accs), v(gs), empty]
    })
}

#[test]
fn tape_rewind_replays_the_forward_pass_for_every_row() {
    let p = replay_program();
    let x = arr_f64(&[2], &[1.5, -2.0]);
    let r = run_both(&p, &[Value::I64(3), Value::I64(4), x.clone()]).unwrap();
    // Row r pops k = 2, 1, 0: ((2 + r) * 10 + 1 + r) * 10 + 0 + r.
    let accs: Vec<i64> = (0..4).map(|r| ((2 + r) * 10 + 1 + r) * 10 + r).collect();
    // g = x * (0 + 1 + 2) in every row.
    let gs: Vec<f64> = (0..4).flat_map(|_| [4.5, -6.0]).collect();
    assert_eq!(r, vec![arr_i64(&[4], &accs), arr_f64(&[4, 2], &gs), Value::Bool(true)]);
    // No rows, no iterations.
    let r = run_both(&p, &[Value::I64(0), Value::I64(2), x.clone()]).unwrap();
    assert_eq!(r[0], arr_i64(&[2], &[0, 0]));
    let r = run_both(&p, &[Value::I64(3), Value::I64(0), x.clone()]).unwrap();
    assert_eq!(r[0], arr_i64(&[0], &[]));
    assert_eq!(r[2], Value::Bool(false));
    // A long forward pass: the tape grows (and moves) before the mark.
    let n = 20_000i64;
    let r = run_both(&p, &[Value::I64(n), Value::I64(3), x]).unwrap();
    let s = (n * (n - 1) / 2) as f64;
    assert_eq!(r[1], arr_f64(&[3, 2], &[1.5 * s, -2.0 * s, 1.5 * s, -2.0 * s, 1.5 * s, -2.0 * s]));
}

/// A rewind to a mark beyond the stored tape (or a negative one) is an
/// internal error of the generated code, reported, never a crash.
#[test]
fn tape_rewind_past_the_stored_tape_is_reported_not_a_crash() {
    let p = program1(&[Type::I64], &[Type::F64], |b, ps| {
        b.stmt(StmtKind::Push(Atom::F64(2.5)));
        let m = b.let1("m", Expr::TapeMark, Type::I64);
        let x = pop(b, Type::F64);
        b.stmt(StmtKind::TapeRewind(v(m)));
        let y = pop(b, Type::F64);
        b.stmt(StmtKind::TapeRewind(v(ps[0])));
        let z = pop(b, Type::F64);
        let s = b.binary(BinOp::Add, x, y);
        vec![b.binary(BinOp::Add, s, z)]
    });
    let m = jit(&p);
    assert_eq!(m.call("f", &[Value::I64(1)]).unwrap(), vec![Value::F64(7.5)]);
    assert_eq!(arrayad_ir::interp::run(&p, FuncId(0), &[Value::I64(1)]).unwrap(), vec![Value::F64(7.5)]);
    for bad in [2, -1, i64::MAX, i64::MIN] {
        let e = m.call("f", &[Value::I64(bad)]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{}", e.message);
        assert!(e.message.contains("tape rewind"), "{}", e.message);
        let e = arrayad_ir::interp::run(&p, FuncId(0), &[Value::I64(bad)]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{}", e.message);
    }
    // A push after pops discards them: the old mark is beyond the tape.
    let p = program1(&[], &[Type::F64], |b, _| {
        b.stmt(StmtKind::Push(Atom::F64(1.0)));
        b.stmt(StmtKind::Push(Atom::F64(2.0)));
        let m = b.let1("m", Expr::TapeMark, Type::I64);
        pop(b, Type::F64);
        pop(b, Type::F64);
        b.stmt(StmtKind::Push(Atom::F64(3.0)));
        b.stmt(StmtKind::TapeRewind(v(m)));
        vec![pop(b, Type::F64)]
    });
    let e = jit(&p).call("f", &[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{}", e.message);
    let e = arrayad_ir::interp::run(&p, FuncId(0), &[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{}", e.message);
}

/// An accumulator whose first use is a loop adding into each of its
/// elements once is allocated without zero-filling and written by stores
/// of `0.0 + v` (`lower/first_write.rs`): the values of zero-then-add bit
/// for bit (`-0.0 + 0.0` is `+0.0`), whatever the arena held before. One
/// whose loop covers fewer elements has the rest zero-filled; one that adds
/// under a branch or adds twice keeps its zeros; `zeros_like` is written
/// first as `zeros` is.
#[test]
fn accumulators_written_first_by_a_loop_match_zero_then_add() {
    let p = program1(&[F1], &[F1, F1, F1, F1, F1, F1], |b, ps| {
        let x = ps[0];
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let zeros = |b: &mut Builder, n: Atom| b.let1("acc", Expr::Zeros(vec![n]), F1);
        // Written first, by a reverse loop.
        let first = zeros(b, n);
        for_(b, n, true, |b, i| {
            let e = idx(b, x, &[i]);
            let e = b.binary(BinOp::Mul, e, Atom::F64(2.0));
            b.stmt(StmtKind::AccAdd { acc: first, indices: vec![i], value: e });
        });
        // A loop over one element fewer: the last stays zero.
        let short = zeros(b, n);
        let m = b.binary(BinOp::Sub, n, Atom::I64(1));
        for_(b, m, false, |b, i| {
            let e = idx(b, x, &[i]);
            b.stmt(StmtKind::AccAdd { acc: short, indices: vec![i], value: e });
        });
        // Under a branch: odd positions stay zero.
        let branch = zeros(b, n);
        for_(b, n, false, |b, i| {
            let r = b.binary(BinOp::Rem, i, Atom::I64(2));
            let even = b.binary(BinOp::Eq, r, Atom::I64(0));
            let e = idx(b, x, &[i]);
            b.begin_block();
            b.stmt(StmtKind::AccAdd { acc: branch, indices: vec![i], value: e });
            let then_branch = b.end_block(vec![]);
            b.begin_block();
            let else_branch = b.end_block(vec![]);
            b.stmt(StmtKind::If { cond: even, then_branch, else_branch });
        });
        // Added into twice in one iteration.
        let twice = zeros(b, n);
        for_(b, n, false, |b, i| {
            let e = idx(b, x, &[i]);
            b.stmt(StmtKind::AccAdd { acc: twice, indices: vec![i], value: e });
            b.stmt(StmtKind::AccAdd { acc: twice, indices: vec![i], value: Atom::F64(1.0) });
        });
        // The extent of an array, the count another variable of the same
        // value, a negative count.
        let like = b.let1("acc", Expr::ZerosLike(x), F1);
        let n2 = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        for_(b, n2, true, |b, i| {
            let e = idx(b, x, &[i]);
            b.stmt(StmtKind::AccAdd { acc: like, indices: vec![i], value: e });
        });
        let none = zeros(b, n);
        for_(b, Atom::I64(-3), false, |b, i| {
            b.stmt(StmtKind::AccAdd { acc: none, indices: vec![i], value: Atom::F64(1.0) });
        });
        vec![v(first), v(short), v(branch), v(twice), v(like), v(none)]
    });
    let x = [1.5, -0.0, 0.0, -2.0, f64::INFINITY];
    let r = run_both(&p, &[arr_f64(&[5], &x)]).unwrap();
    assert_eq!(r[4], arr_f64(&[5], &x));
    assert_eq!(r[5], arr_f64(&[5], &[0.0; 5]));
    assert_eq!(r[0], arr_f64(&[5], &[3.0, 0.0, 0.0, -4.0, f64::INFINITY]));
    let first = r[0].f64_elements().unwrap();
    assert_eq!(first[1].to_bits(), 0.0f64.to_bits(), "0.0 + -0.0 is +0.0");
    assert_eq!(r[1], arr_f64(&[5], &[1.5, 0.0, 0.0, -2.0, 0.0]));
    assert_eq!(r[2], arr_f64(&[5], &[1.5, 0.0, 0.0, 0.0, f64::INFINITY]));
    assert_eq!(r[3], arr_f64(&[5], &[2.5, 1.0, 1.0, -1.0, f64::INFINITY]));
    // Repeated calls reuse the kept arena, which holds the last call's
    // arrays: the unzeroed accumulator never shows them.
    let m = jit(&p);
    for k in 0..4 {
        let y: Vec<f64> = (0..1000).map(|i| (i * (k + 1)) as f64).collect();
        let args = [arr_f64(&[1000], &y)];
        let got = m.call("f", &args).unwrap();
        let want = arrayad_ir::interp::run(&p, FuncId(0), &args).unwrap();
        assert!(same_all(&got, &want), "call {k}");
    }
    assert_eq!(run_both(&p, &[arr_f64(&[0], &[])]).unwrap()[0], arr_f64(&[0], &[]));

    // A count above the extent fails the bounds check at the extent, as
    // the zero-then-add form does.
    let p = program1(&[F1], &[F1], |b, ps| {
        let x = ps[0];
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let acc = b.let1("acc", Expr::Zeros(vec![n]), F1);
        let more = b.binary(BinOp::Add, n, Atom::I64(1));
        for_(b, more, false, |b, i| {
            b.stmt(StmtKind::AccAdd { acc, indices: vec![i], value: Atom::F64(1.0) });
        });
        vec![v(acc)]
    });
    let e = run_both(&p, &[arr_f64(&[3], &[1.0, 2.0, 3.0])]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::IndexOutOfBounds, "{}", e.message);
}
