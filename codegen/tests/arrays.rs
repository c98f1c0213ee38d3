//! Arrays: Build (nested, several results, array rows, empty), Loop with
//! scalar and array states, If, Index with views, Slice, Dim, Reduce,
//! ArrayLit; JIT against expected values and the interpreter.

mod common;
use arrayad_ir::builder::Builder;
use arrayad_ir::*;
use common::*;

fn idx(b: &mut Builder, a: VarId, is: &[Atom]) -> Atom {
    b.let_one("x", Expr::Index { array: a, indices: is.to_vec() })
}

fn dim(b: &mut Builder, a: VarId, axis: u8) -> Atom {
    b.let_one("d", Expr::Dim { array: a, axis })
}

fn arr(a: Atom) -> VarId {
    a.as_var().unwrap()
}

#[test]
fn nested_build_gives_a_matrix() {
    // m[i][j] = 10 i + j for i < n, j < m
    let p = program1(&[Type::I64, Type::I64], &[I2], |b, ps| {
        let (n, m) = (v(ps[0]), v(ps[1]));
        vec![build(b, n, |b, i| {
            build(b, m, |b, j| {
                let t = b.binary(BinOp::Mul, i, Atom::I64(10));
                b.binary(BinOp::Add, t, j)
            })
        })]
    });
    let r = run_both(&p, &[Value::I64(3), Value::I64(2)]).unwrap();
    assert_eq!(r, vec![arr_i64(&[3, 2], &[0, 1, 10, 11, 20, 21])]);
    // n == 0: the body is not run, and the inner extent is still m (a
    // count from outside: `arrayad_ir::shape::static_row_dims`).
    let r = run_both(&p, &[Value::I64(0), Value::I64(5)]).unwrap();
    assert_eq!(r, vec![arr_i64(&[0, 5], &[])]);
    // m == 0: rows of extent 0.
    let r = run_both(&p, &[Value::I64(4), Value::I64(0)]).unwrap();
    assert_eq!(r, vec![arr_i64(&[4, 0], &[])]);
}

#[test]
fn three_dimensional_build_and_views() {
    // t[i][j][k] = i*100 + j*10 + k; then t[1] (a view), t[1, 2] (a row), t[1, 2, 3]
    let p = program1(&[], &[I2, I1, Type::I64, I1], |b, _| {
        let t = build(b, Atom::I64(2), |b, i| {
            build(b, Atom::I64(3), |b, j| {
                build(b, Atom::I64(4), |b, k| {
                    let a = b.binary(BinOp::Mul, i, Atom::I64(100));
                    let c = b.binary(BinOp::Mul, j, Atom::I64(10));
                    let s = b.binary(BinOp::Add, a, c);
                    b.binary(BinOp::Add, s, k)
                })
            })
        });
        let t = arr(t);
        let m = idx(b, t, &[Atom::I64(1)]);
        let r = idx(b, t, &[Atom::I64(1), Atom::I64(2)]);
        let e = idx(b, t, &[Atom::I64(1), Atom::I64(2), Atom::I64(3)]);
        let r2 = idx(b, arr(m), &[Atom::I64(0)]);
        vec![m, r, e, r2]
    });
    let r = run_both(&p, &[]).unwrap();
    assert_eq!(r[0], arr_i64(&[3, 4], &[100, 101, 102, 103, 110, 111, 112, 113, 120, 121, 122, 123]));
    assert_eq!(r[1], arr_i64(&[4], &[120, 121, 122, 123]));
    assert_eq!(r[2], Value::I64(123));
    assert_eq!(r[3], arr_i64(&[4], &[100, 101, 102, 103]));
}

#[test]
fn build_with_several_results_and_array_rows() {
    // for i < n => (x[i] * 2, i, [x[i], -x[i]], x == x[i])
    let p = program1(&[F1], &[F1, I1, F2, common::B1], |b, ps| {
        let x = ps[0];
        let n = dim(b, x, 0);
        let i = b.var("i", Type::I64);
        b.begin_block();
        let e = idx(b, x, &[v(i)]);
        let d = b.binary(BinOp::Mul, e, Atom::F64(2.0));
        let ne = b.unary(UnOp::Neg, e);
        let row = b.let_one("row", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![e, ne] });
        let pos = b.binary(BinOp::Gt, e, Atom::F64(0.0));
        let blk = b.end_block(vec![d, v(i), row, pos]);
        b.let_infer("r", Expr::Build { n, index: i, body: blk }).into_iter().map(v).collect()
    });
    let r = run_both(&p, &[arr_f64(&[3], &[1.0, -2.0, 3.5])]).unwrap();
    assert_eq!(r[0], arr_f64(&[3], &[2.0, -4.0, 7.0]));
    assert_eq!(r[1], arr_i64(&[3], &[0, 1, 2]));
    assert_eq!(r[2], arr_f64(&[3, 2], &[1.0, -1.0, -2.0, 2.0, 3.5, -3.5]));
    assert_eq!(r[3], arr_bool(&[3], &[true, false, true]));
    // No rows: a literal row of 2 keeps its extent.
    let r = run_both(&p, &[arr_f64(&[0], &[])]).unwrap();
    assert_eq!(r[2], arr_f64(&[0, 2], &[]));
}

#[test]
fn irregular_rows_are_an_error() {
    // for i < 3 => for j < i => 1.0
    let p = program1(&[], &[F2], |b, _| vec![build(b, Atom::I64(3), |b, i| build(b, i, |_, _| Atom::F64(1.0)))]);
    let msg = expect_err(run_both(&p, &[]), ErrorKind::IrregularArray, &["t.arr:3:7"]);
    assert_eq!(msg, "t.arr:3:7: irregular array: row 1 has shape [1] but row 0 has shape [0]");
}

#[test]
fn rows_of_the_same_size_and_another_shape_are_an_error_too() {
    // for i < 2 => for a < 2 + i => for c < 3 - i => 1.0: two rows of 6
    // elements, of shapes [2, 3] and [3, 2]. The second is computed where
    // it is stored (`placed.rs`), whose size it has: the shape check
    // still fails, with the interpreter's message.
    let p = program1(&[], &[F3], |b, _| {
        vec![build(b, Atom::I64(2), |b, i| {
            let rows = b.binary(BinOp::Add, Atom::I64(2), i);
            let cols = b.binary(BinOp::Sub, Atom::I64(3), i);
            build(b, rows, |b, _| build(b, cols, |_, _| Atom::F64(1.0)))
        })]
    });
    let msg = expect_err(run_both(&p, &[]), ErrorKind::IrregularArray, &["t.arr:3:7"]);
    assert_eq!(msg, "t.arr:3:7: irregular array: row 1 has shape [3, 2] but row 0 has shape [2, 3]");
}

#[test]
fn array_literals() {
    let p = program1(&[F1, F1], &[F2, F1, I1], |b, ps| {
        let m = b.let_one("m", Expr::ArrayLit { elem_ty: F1, elems: vec![v(ps[0]), v(ps[1]), v(ps[0])] });
        let s = b.let_one("s", Expr::ArrayLit { elem_ty: Type::F64, elems: vec![Atom::F64(1.5), Atom::F64(-2.0)] });
        let e = b.let_one("e", Expr::ArrayLit { elem_ty: Type::I64, elems: vec![] });
        vec![m, s, e]
    });
    let a = arr_f64(&[2], &[1.0, 2.0]);
    let c = arr_f64(&[2], &[3.0, 4.0]);
    let r = run_both(&p, &[a.clone(), c]).unwrap();
    assert_eq!(r[0], arr_f64(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 1.0, 2.0]));
    assert_eq!(r[1], arr_f64(&[2], &[1.5, -2.0]));
    assert_eq!(r[2], arr_i64(&[0], &[]));
    let msg = expect_err(run_both(&p, &[a, arr_f64(&[3], &[0.0; 3])]), ErrorKind::IrregularArray, &["t.arr:3:7"]);
    assert!(msg.contains("row 1 has shape [3] but row 0 has shape [2]"), "{msg}");
}

#[test]
fn slices_and_dims() {
    // x[lo:hi] of a matrix, its dims, and a slice of a slice
    let p = program1(&[F2, Type::I64, Type::I64], &[F2, Type::I64, Type::I64, F2], |b, ps| {
        let s = b.let_one("s", Expr::Slice { array: ps[0], lo: v(ps[1]), hi: v(ps[2]) });
        let d0 = dim(b, arr(s), 0);
        let d1 = dim(b, arr(s), 1);
        let s2 = b.let_one("s2", Expr::Slice { array: arr(s), lo: Atom::I64(1), hi: d0 });
        vec![s, d0, d1, s2]
    });
    let m = arr_f64(&[4, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]);
    let r = run_both(&p, &[m.clone(), Value::I64(1), Value::I64(3)]).unwrap();
    assert_eq!(r[0], arr_f64(&[2, 2], &[2., 3., 4., 5.]));
    assert_eq!((r[1].clone(), r[2].clone()), (Value::I64(2), Value::I64(2)));
    assert_eq!(r[3], arr_f64(&[1, 2], &[4., 5.]));
    let r = run_both(&p, &[m.clone(), Value::I64(3), Value::I64(4)]).unwrap();
    assert_eq!(r[0], arr_f64(&[1, 2], &[6., 7.]));
    assert_eq!(r[3], arr_f64(&[0, 2], &[]));
    for (lo, hi) in [(3, 2), (-1, 2), (0, 5), (5, 5)] {
        let msg = expect_err(
            run_both(&p, &[m.clone(), Value::I64(lo), Value::I64(hi)]),
            ErrorKind::SliceOutOfRange,
            &["t.arr:3:7", &format!("{lo}:{hi}")],
        );
        assert!(msg.contains("extent 4"), "{msg}");
    }
}

#[test]
fn index_bounds_are_checked_per_axis() {
    let p = program1(&[F2, Type::I64, Type::I64], &[Type::F64], |b, ps| vec![idx(b, ps[0], &[v(ps[1]), v(ps[2])])]);
    let m = arr_f64(&[2, 3], &[0., 1., 2., 3., 4., 5.]);
    assert_eq!(run_both(&p, &[m.clone(), Value::I64(1), Value::I64(2)]).unwrap(), vec![Value::F64(5.0)]);
    let msg = expect_err(run_both(&p, &[m.clone(), Value::I64(2), Value::I64(0)]), ErrorKind::IndexOutOfBounds, &[]);
    assert_eq!(msg, "t.arr:3:7: index out of bounds: index 2 is out of bounds for axis 0 of `p0`, of extent 2");
    expect_err(
        run_both(&p, &[m.clone(), Value::I64(0), Value::I64(3)]),
        ErrorKind::IndexOutOfBounds,
        &["axis 1", "index 3"],
    );
    expect_err(run_both(&p, &[m, Value::I64(-1), Value::I64(0)]), ErrorKind::IndexOutOfBounds, &["index -1"]);
}

#[test]
fn reductions() {
    let p = program1(&[F1, I1], &[Type::F64, Type::F64, Type::F64, Type::I64], |b, ps| {
        let s = b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: ps[0] });
        let mx = b.let_one("mx", Expr::Reduce { op: ReduceOp::Max, array: ps[0] });
        let mn = b.let_one("mn", Expr::Reduce { op: ReduceOp::Min, array: ps[0] });
        let si = b.let_one("si", Expr::Reduce { op: ReduceOp::Sum, array: ps[1] });
        vec![s, mx, mn, si]
    });
    let xs = [0.1, 0.2, 0.3, -5.0, 7.0, 1e-17];
    let r = run_both(&p, &[arr_f64(&[6], &xs), arr_i64(&[3], &[i64::MAX, 1, 5])]).unwrap();
    let seq = xs.iter().fold(0.0, |s, x| s + x);
    assert_eq!(r, vec![Value::F64(seq), Value::F64(7.0), Value::F64(-5.0), Value::I64(i64::MAX.wrapping_add(6))]);
    // NaN anywhere in maximum/minimum gives NaN.
    let r = run_both(&p, &[arr_f64(&[3], &[1.0, f64::NAN, 2.0]), arr_i64(&[0], &[])]).unwrap();
    assert!(r[1].as_f64().unwrap().is_nan() && r[2].as_f64().unwrap().is_nan());
    assert_eq!(r[3], Value::I64(0));
    // Empty: maximum is an error (sum would be 0).
    let msg = expect_err(run_both(&p, &[arr_f64(&[0], &[]), arr_i64(&[0], &[])]), ErrorKind::EmptyReduction, &[]);
    assert_eq!(msg, "t.arr:3:7: empty array: maximum of the empty array `p0`");
    let p =
        program1(&[F1], &[Type::F64], |b, ps| vec![b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: ps[0] })]);
    assert_eq!(run_both(&p, &[arr_f64(&[0], &[])]).unwrap(), vec![Value::F64(0.0)]);
}

/// `loop (s, a) = (0, x) for i < n do (s + a[0], a * 2)` (an array state).
#[test]
fn loops_with_scalar_and_array_states() {
    let p = program1(&[F1, Type::I64], &[Type::F64, F1], |b, ps| {
        let x = ps[0];
        let i = b.var("i", Type::I64);
        let s = b.var("s", Type::F64);
        let a = b.var("a", F1);
        b.begin_block();
        let a0 = idx(b, a, &[Atom::I64(0)]);
        let s2 = b.binary(BinOp::Add, v(s), a0);
        let n = dim(b, a, 0);
        let a2 = build(b, n, |b, j| {
            let e = idx(b, a, &[j]);
            b.binary(BinOp::Mul, e, Atom::F64(2.0))
        });
        let body = b.end_block(vec![s2, a2]);
        b.let_infer(
            "r",
            Expr::Loop { n: v(ps[1]), index: i, states: vec![s, a], init: vec![Atom::F64(0.0), v(x)], body },
        )
        .into_iter()
        .map(v)
        .collect()
    });
    let r = run_both(&p, &[arr_f64(&[2], &[1.0, 3.0]), Value::I64(3)]).unwrap();
    assert_eq!(r, vec![Value::F64(1.0 + 2.0 + 4.0), arr_f64(&[2], &[8.0, 24.0])]);
    let r = run_both(&p, &[arr_f64(&[2], &[1.0, 3.0]), Value::I64(0)]).unwrap();
    assert_eq!(r, vec![Value::F64(0.0), arr_f64(&[2], &[1.0, 3.0])]);
    let msg = expect_err(run_both(&p, &[arr_f64(&[2], &[1.0, 3.0]), Value::I64(-2)]), ErrorKind::NegativeSize, &[]);
    assert_eq!(msg, "t.arr:3:7: negative size: -2 iterations");
}

/// A scalar loop whose body allocates (the arena is reset per iteration):
/// `loop s = 0 for i < n do s + sum(for j < 1000 => f64(i + j))`.
#[test]
fn allocating_loop_bodies_run_in_constant_memory() {
    let p = program1(&[Type::I64], &[Type::F64], |b, ps| {
        let i = b.var("i", Type::I64);
        let s = b.var("s", Type::F64);
        b.begin_block();
        let t = build(b, Atom::I64(1000), |b, j| {
            let k = b.binary(BinOp::Add, v(i), j);
            b.unary(UnOp::ToF64, k)
        });
        let su = b.let_one("su", Expr::Reduce { op: ReduceOp::Sum, array: arr(t) });
        let s2 = b.binary(BinOp::Add, v(s), su);
        let body = b.end_block(vec![s2]);
        vec![b.let_one("r", Expr::Loop { n: v(ps[0]), index: i, states: vec![s], init: vec![Atom::F64(0.0)], body })]
    });
    let n = 20_000i64; // 20000 * 8000 bytes = 160 MB if nothing were freed
    let want: f64 = (0..n).map(|i| (0..1000).map(|j| (i + j) as f64).fold(0.0, |a, b| a + b)).fold(0.0, |a, b| a + b);
    assert_eq!(jit(&p).call("f", &[Value::I64(n)]).unwrap(), vec![Value::F64(want)]);
    assert_eq!(run_both(&p, &[Value::I64(50)]).unwrap().len(), 1);
}

#[test]
fn if_expressions_yield_arrays_and_scalars() {
    // if c then (x, 1) else (x[0:1], 2)
    let p = program1(&[Type::BOOL, F1], &[F1, Type::I64], |b, ps| {
        b.begin_block();
        let t = b.end_block(vec![v(ps[1]), Atom::I64(1)]);
        b.begin_block();
        let s = b.let_one("s", Expr::Slice { array: ps[1], lo: Atom::I64(0), hi: Atom::I64(1) });
        let e = b.end_block(vec![s, Atom::I64(2)]);
        b.let_infer("r", Expr::If { cond: v(ps[0]), then_branch: t, else_branch: e }).into_iter().map(v).collect()
    });
    let x = arr_f64(&[2], &[5.0, 6.0]);
    assert_eq!(run_both(&p, &[Value::Bool(true), x.clone()]).unwrap(), vec![x.clone(), Value::I64(1)]);
    assert_eq!(run_both(&p, &[Value::Bool(false), x]).unwrap(), vec![arr_f64(&[1], &[5.0]), Value::I64(2)]);
}

#[test]
fn negative_build_size_and_bool_arrays() {
    let p = program1(&[Type::I64, common::B1], &[common::B1], |b, ps| {
        let bs = ps[1];
        vec![build(b, v(ps[0]), |b, i| {
            let e = idx(b, bs, &[i]);
            b.unary(UnOp::Not, e)
        })]
    });
    let bools = arr_bool(&[3], &[true, false, true]);
    assert_eq!(run_both(&p, &[Value::I64(3), bools.clone()]).unwrap(), vec![arr_bool(&[3], &[false, true, false])]);
    let msg = expect_err(run_both(&p, &[Value::I64(-1), bools]), ErrorKind::NegativeSize, &[]);
    assert_eq!(msg, "t.arr:3:7: negative size: -1 iterations");
}

#[test]
fn huge_builds_are_out_of_memory_not_crashes() {
    let p = program1(&[Type::I64], &[F1], |b, ps| vec![build(b, v(ps[0]), |_, _| Atom::F64(1.0))]);
    let m = jit(&p);
    for n in [i64::MAX, 1 << 61, 1 << 50] {
        let e = m.call("f", &[Value::I64(n)]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfMemory, "{}", e.message);
        assert!(e.message.starts_with("t.arr:3:7: out of memory: "), "{}", e.message);
    }
    let e = m.call("f", &[Value::I64(i64::MAX)]).unwrap_err();
    assert_eq!(e.message, "t.arr:3:7: out of memory: the size of an array overflows");
    // Overflow of the product of extents of an array-row build.
    let p = program1(&[Type::I64], &[F2], |b, ps| {
        let n = v(ps[0]);
        vec![build(b, n, |b, _| build(b, n, |_, _| Atom::F64(0.0)))]
    });
    let e = jit(&p).call("f", &[Value::I64(1 << 32)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfMemory, "{}", e.message);
}

#[test]
fn several_functions_in_one_module_and_threads() {
    let p1 = program1(&[Type::F64], &[Type::F64], |b, ps| vec![b.binary(BinOp::Mul, v(ps[0]), Atom::F64(3.0))]);
    let mut p2 =
        program1(&[F1], &[Type::F64], |b, ps| vec![b.let_one("s", Expr::Reduce { op: ReduceOp::Sum, array: ps[0] })]);
    p2.funcs[0].name = "g".into();
    for backend in Backend::available() {
        let funcs = [p1.funcs[0].clone(), p2.funcs[0].clone()];
        let callees = arrayad_codegen::Callees::none();
        let kept = JitModule::compile_keeping_ir(backend, &TargetOptions::host(), "t.arr", &funcs, &callees).unwrap();
        let text = kept.backend_ir("g").unwrap();
        assert!(text.contains("function") || text.contains("define"), "{text}");
        let m = JitModule::compile_with(backend, &TargetOptions::host(), "t.arr", &funcs).unwrap();
        assert_eq!(m.functions(), vec!["f", "g"]);
        assert!(m.backend_ir("g").is_none(), "IR is kept only when asked for");
        assert!(kept.backend_ir("nope").is_none());
        let m = std::sync::Arc::new(m);
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for k in 0..200 {
                        let x = (t * 1000 + k) as f64;
                        assert_eq!(m.call("f", &[Value::F64(x)]).unwrap(), vec![Value::F64(3.0 * x)]);
                        let a = arr_f64(&[3], &[x, 1.0, 2.0]);
                        assert_eq!(m.call("g", &[a]).unwrap(), vec![Value::F64(x + 3.0)]);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // Duplicate names are an error.
        let dup = [p1.funcs[0].clone(), p1.funcs[0].clone()];
        assert!(JitModule::compile_with(backend, &TargetOptions::host(), "t.arr", &dup).is_err());
    }
}

#[test]
fn call_checks_its_arguments() {
    let p = program1(&[F2, Type::I64], &[Type::F64], |_, _| vec![Atom::F64(0.0)]);
    let m = jit(&p);
    let bad = |args: &[Value]| m.call("f", args).unwrap_err().kind;
    assert_eq!(bad(&[]), ErrorKind::InvalidArgument);
    assert_eq!(bad(&[arr_f64(&[2], &[1.0, 2.0]), Value::I64(1)]), ErrorKind::InvalidArgument);
    assert_eq!(bad(&[arr_f64(&[1, 1], &[1.0]), Value::F64(1.0)]), ErrorKind::InvalidArgument);
    let broken = Value::Array(ArrayValue { shape: vec![2, 2], data: ArrayData::F64(vec![1.0]) });
    assert_eq!(bad(&[broken, Value::I64(1)]), ErrorKind::InvalidArgument);
    assert_eq!(m.call("missing", &[]).unwrap_err().kind, ErrorKind::InvalidArgument);
}

#[test]
fn calls_are_rejected_cleanly() {
    let (mut f, ps) = Function::with_params("f", &[Type::F64], &[Type::F64]);
    let mut b = arrayad_ir::builder::Builder::new(&mut f);
    let c = b.let1("c", Expr::Call { func: FuncId(1), args: vec![v(ps[0])] }, Type::F64);
    f.body = b.finish(vec![v(c)]);
    for backend in Backend::available() {
        let e =
            JitModule::compile_with(backend, &TargetOptions::host(), "t.arr", std::slice::from_ref(&f)).unwrap_err();
        assert!(e.to_string().contains("call"), "{e}");
    }
}
