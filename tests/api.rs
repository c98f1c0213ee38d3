//! The Rust host API (LANGUAGE.md section 9): compiling, calling with
//! borrowed data of every type, derivatives, `wrt`, both backends, and the
//! error variants.

use arrayad::{Arg, Backend, Error, ErrorKind, Module, Options, Value};

const SOURCE: &str = "\
def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])
def scale(a: f64, v: [n]f64) -> [n]f64 = a * v
def pick(m: [r][c]f64, flags: [r]bool, i: i64) -> (f64, i64) =
  (if flags[i] then sum(m[i]) else 0.0, r * c)
def tup(p: (f64, [2]f64), k: [k2]i64) -> f64 = p.0 * p.1[1] + f64(sum(k))
def get(x: [n]f64, i: i64) -> f64 = x[i]
";

fn both() -> [Module; 2] {
    [
        Module::compile("api.arr", SOURCE).expect("compiles"),
        Module::compile_with("api.arr", SOURCE, Options::backend(Backend::Interp)).expect("compiles"),
    ]
}

fn f64s(v: &Option<Value>) -> Vec<f64> {
    v.as_ref().and_then(Value::f64_elements).expect("f64 data").to_vec()
}

#[test]
fn module_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Module>();
    assert_send_sync::<arrayad::Function>();
    assert_send_sync::<Error>();
}

#[test]
fn calls_with_every_argument_type() {
    for m in both() {
        let pick = m.function("pick").unwrap();
        let data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let flags = [true, false];
        let args =
            [Arg::Array { data: &data, shape: &[2, 3] }, Arg::BoolArray { data: &flags, shape: &[2] }, Arg::I64(0)];
        assert_eq!(pick.call(&args).unwrap(), vec![Value::F64(6.0), Value::I64(6)]);
        let args = [args[0], args[1], Arg::I64(1)];
        assert_eq!(pick.call(&args).unwrap(), vec![Value::F64(0.0), Value::I64(6)]);

        // Tuple parameters take one argument per component.
        let tup = m.function("tup").unwrap();
        assert_eq!(tup.arg_names(), ["p.0", "p.1", "k"]);
        assert_eq!(tup.active(), [true, true, false]);
        let ks = [1i64, 2, 3];
        let p1 = [10.0, 20.0];
        let args = [Arg::F64(0.5), Arg::Vector(&p1), Arg::I64Array { data: &ks, shape: &[3] }];
        assert_eq!(tup.call(&args).unwrap(), vec![Value::F64(16.0)]);
        let gr = tup.grad(&args).unwrap();
        let (v, g) = (gr.value, gr.gradient);
        assert_eq!(v, 16.0);
        assert_eq!(g[0], Some(Value::F64(20.0)));
        assert_eq!(f64s(&g[1]), [0.0, 0.5]);
        assert_eq!(g[2], None);

        // Results can be passed back in as arguments.
        let scale = m.function("scale").unwrap();
        let out = scale.call(&[Arg::F64(2.0), Arg::Vector(&[1.0, 2.0])]).unwrap();
        let again = scale.call(&[Arg::F64(2.0), Arg::Value(&out[0])]).unwrap();
        assert_eq!(f64s(&Some(again[0].clone())), [4.0, 8.0]);
    }
}

#[test]
fn derivatives_agree_with_each_other() {
    for m in both() {
        let f = m.function("scale").unwrap();
        let v = [1.0, -2.0, 3.0];
        let args = [Arg::F64(1.5), Arg::Vector(&v)];
        // jvp with a zero tangent for `a` (None) and t for v.
        let t = [0.5, 0.25, -1.0];
        let j = f.jvp(&args, &[None, Some(Arg::Vector(&t))]).unwrap();
        assert_eq!(f64s(&j.tangent[0]), [0.75, 0.375, -1.5]);
        // vjp: <ct, J t> == <J^T ct, t> with t = (ta, tv)
        let ct = [1.0, 2.0, 3.0];
        let r = f.vjp(&args, &[Some(Arg::Vector(&ct))]).unwrap();
        let ta = 0.3;
        let j = f.jvp(&args, &[Some(Arg::F64(ta)), Some(Arg::Vector(&t))]).unwrap();
        let lhs: f64 = ct.iter().zip(f64s(&j.tangent[0])).map(|(a, b)| a * b).sum();
        let da = r.cotangent[0].as_ref().and_then(Value::as_f64).unwrap();
        let rhs: f64 = da * ta + f64s(&r.cotangent[1]).iter().zip(&t).map(|(a, b)| a * b).sum::<f64>();
        assert!((lhs - rhs).abs() < 1e-12, "{lhs} vs {rhs}");
        // The Jacobian's rows are the vjps of unit cotangents.
        let jac = f.jacobian(&args).unwrap();
        assert_eq!((jac.rows, jac.cols), (3, 4));
        for row in 0..3 {
            let mut e = [0.0; 3];
            e[row] = 1.0;
            let r = f.vjp(&args, &[Some(Arg::Vector(&e))]).unwrap();
            let mut want = vec![r.cotangent[0].as_ref().and_then(Value::as_f64).unwrap()];
            want.extend(f64s(&r.cotangent[1]));
            assert_eq!(jac.row(row), &want[..]);
        }
    }
}

#[test]
fn wrt_restricts_the_active_parameters() {
    let m = Module::compile_with("api.arr", SOURCE, Options::default().with_wrt(&["w"])).unwrap();
    let f = m.function("f").unwrap();
    assert_eq!(f.active(), [false, true]);
    let x = [1.0, 2.0];
    let gr = f.grad(&[Arg::Vector(&x), Arg::Vector(&[3.0, 4.0])]).unwrap();
    let (_, g) = (gr.value, gr.gradient);
    assert_eq!(g[0], None);
    assert_eq!(f64s(&g[1]), x);
    // A tangent for an inactive parameter is refused.
    let e = f.jvp(&[Arg::Vector(&x), Arg::Vector(&x)], &[Some(Arg::Vector(&x)), None]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // Unknown names are usage errors.
    let e = Module::compile_with("api.arr", SOURCE, Options::default().with_wrt(&["nope"])).unwrap_err();
    assert!(matches!(&e, Error::Usage(m) if m.contains("`nope`")), "{e}");
}

#[test]
fn errors_are_typed_values() {
    let e = Module::compile("bad.arr", "def f(x: f64) -> f64 =\n  x + true\n").unwrap_err();
    assert!(matches!(&e, Error::Compile(d) if d.render().contains("bad.arr:2:3") && d.render().contains('^')), "{e}");
    let Error::Compile(d) = &e else { unreachable!() };
    assert_eq!(d.entries().len(), 1);
    assert_eq!((d.entries()[0].1, d.entries()[0].2), (2, 3));
    // The error is a std error with Display.
    let boxed: Box<dyn std::error::Error> = Box::new(e.clone());
    assert!(boxed.to_string().contains("bad.arr:2:3"));
    assert_eq!(e.exit_code(), 1);

    for m in both() {
        assert!(matches!(m.function("nope"), Err(Error::Usage(_))));
        let f = m.function("f").unwrap();
        let x = [1.0, 2.0];
        // wrong count, wrong type, inconsistent shape
        assert!(matches!(f.call(&[Arg::Vector(&x)]), Err(Error::InvalidArgument(_))));
        assert!(matches!(f.call(&[Arg::Vector(&x), Arg::F64(1.0)]), Err(Error::InvalidArgument(_))));
        let e = f.call(&[Arg::Vector(&x), Arg::Array { data: &x, shape: &[3] }]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // size mismatch between arguments: a run-time error at the definition
        let e = f.call(&[Arg::Vector(&x), Arg::Vector(&[1.0])]).unwrap_err();
        assert_eq!(e.runtime_kind(), Some(ErrorKind::SizeMismatch));
        assert!(e.to_string().starts_with("api.arr:1:1: size mismatch"), "{e}");
        assert_eq!(e.exit_code(), 3);
        // grad of a non-scalar function
        let s = m.function("scale").unwrap();
        assert!(matches!(s.grad(&[Arg::F64(1.0), Arg::Vector(&x)]), Err(Error::Usage(_))));
        // cotangent of the wrong shape
        let e = s.vjp(&[Arg::F64(1.0), Arg::Vector(&x)], &[Some(Arg::Vector(&[1.0]))]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // run-time errors in the derivatives too
        let g = m.function("get").unwrap();
        for r in [
            g.call(&[Arg::Vector(&x), Arg::I64(2)]).map(|_| ()),
            g.grad(&[Arg::Vector(&x), Arg::I64(2)]).map(|_| ()),
            g.jvp(&[Arg::Vector(&x), Arg::I64(-1)], &[None, None]).map(|_| ()),
            g.jacobian(&[Arg::Vector(&x), Arg::I64(7)]).map(|_| ()),
        ] {
            let e = r.unwrap_err();
            assert_eq!(e.runtime_kind(), Some(ErrorKind::IndexOutOfBounds), "{e}");
            assert!(e.to_string().starts_with("api.arr:6:"), "{e}");
        }
    }
}

#[test]
fn precompile_builds_everything() {
    let m = Module::compile("api.arr", SOURCE).unwrap();
    m.precompile().unwrap();
    assert_eq!(m.functions().map(|f| f.name().to_string()).collect::<Vec<_>>(), ["f", "scale", "pick", "tup", "get"]);
    let clif = m.function("f").unwrap().backend_ir("vjp").unwrap();
    assert!(clif.is_some_and(|c| c.contains("function")));
    let clif = m.function("f").unwrap().backend_ir("vjp_rows").unwrap();
    assert!(clif.is_some_and(|c| c.contains("function")));
    assert!(matches!(m.function("f").unwrap().backend_ir("nope"), Err(Error::Usage(_))));
}

#[test]
fn jacobian_rows_split_over_the_result_leaves() {
    // Result leaves [2]f64, i64, f64: 3 rows <= 6 columns, reverse mode
    // (one forward pass, one backward pass per row).
    let src = "def split(x: [n]f64, w: [n]f64, k: i64) -> ([2]f64, i64, f64) =\n  \
               ([x[0] * w[1], x[1] + w[0] * w[0]], k + n, sum(x * w))\n";
    let (x, w) = ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0]);
    #[rustfmt::skip]
    let want = [-1.0, 0.0, 0.0, 0.0, 1.0, 0.0,
                0.0, 1.0, 0.0, 1.0, 0.0, 0.0,
                0.5, -1.0, 2.0, 1.0, 2.0, 3.0];
    for backend in [Backend::Cranelift, Backend::Interp] {
        let m = Module::compile_with("jac.arr", src, Options::backend(backend)).unwrap();
        let f = m.function("split").unwrap();
        let args = [Arg::Vector(&x), Arg::Vector(&w), Arg::I64(7)];
        let jac = f.jacobian(&args).unwrap();
        assert_eq!((jac.rows, jac.cols), (3, 6));
        assert_eq!(jac.data, want);
        assert_eq!(jac.value, f.call(&args).unwrap());
        assert_eq!(jac.value[1], Value::I64(10));
        // Row 1 is the vjp of the unit cotangent of element 1 of leaf 0.
        let r = f.vjp(&args, &[Some(Arg::Vector(&[0.0, 1.0])), None, Some(Arg::F64(0.0))]).unwrap();
        let row: Vec<f64> = f64s(&r.cotangent[0]).into_iter().chain(f64s(&r.cotangent[1])).collect();
        assert_eq!(jac.row(1), &row[..]);
        // With only w active: 3 rows, 3 columns, still by rows.
        let m = Module::compile_with("jac.arr", src, Options::backend(backend).with_wrt(&["w"])).unwrap();
        let jac = m.function("split").unwrap().jacobian(&args).unwrap();
        assert_eq!((jac.rows, jac.cols), (3, 3));
        assert_eq!(jac.data, [0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
    }
}

#[test]
fn results_by_name_into_buffers_and_per_call_wrt() {
    for m in both() {
        let f = m.function("f").unwrap();
        let (x, w) = ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0]);
        let args = [Arg::Vector(&x), Arg::Vector(&w)];
        let g = f.grad(&args).unwrap();
        assert_eq!(g.gradient.names(), ["x", "w"]);
        assert_eq!(g.gradient.f64s("w"), Some(&x[..]));
        assert_eq!(g.gradient.shape("x"), Some(&[3][..]));
        assert!(g.gradient.get("nope").is_none());
        // Into buffers: the same numbers.
        let (mut dx, mut dw) = ([0.0; 3], [0.0; 3]);
        let v = f.grad_into(&args, &mut [&mut dx, &mut dw]).unwrap();
        assert_eq!(v, g.value);
        assert_eq!(Some(&dx[..]), g.gradient.f64s("x"));
        assert_eq!(dw, x);
        // Buffers of the wrong count or length are refused.
        assert!(matches!(f.grad_into(&args, &mut [&mut dx]), Err(Error::InvalidArgument(_))));
        let mut short = [0.0; 2];
        assert!(matches!(f.grad_into(&args, &mut [&mut dx, &mut short]), Err(Error::InvalidArgument(_))));
        // Per call: only w, then only x, from one module.
        let fw = f.with_wrt(&["w"]).unwrap();
        assert_eq!(fw.active(), [false, true]);
        let gw = fw.grad(&args).unwrap();
        assert!(gw.gradient.get("x").is_none());
        assert_eq!(gw.gradient.f64s("w"), Some(&x[..]));
        let mut only = [0.0; 3];
        fw.grad_into(&args, &mut [&mut only]).unwrap();
        assert_eq!(only, x);
        assert!(matches!(f.with_wrt(&["q"]), Err(Error::Usage(_))));
        // vjp into buffers.
        let s = m.function("scale").unwrap();
        let sargs = [Arg::F64(2.0), Arg::Vector(&x)];
        let (mut out, mut da, mut dv) = ([0.0; 3], [0.0], [0.0; 3]);
        s.vjp_into(
            &sargs,
            &[Some(Arg::Vector(&[1.0, 1.0, 1.0]))],
            &mut [arrayad::Out::F64s(&mut out)],
            &mut [&mut da, &mut dv],
        )
        .unwrap();
        assert_eq!((out, da, dv), ([2.0, 4.0, 6.0], [6.0], [2.0; 3]));
        // call into buffers, of every type.
        let pick = m.function("pick").unwrap();
        let data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let pargs = [
            Arg::Array { data: &data, shape: &[2, 3] },
            Arg::BoolArray { data: &[true, false], shape: &[2] },
            Arg::I64(0),
        ];
        let (mut a, mut b) = (0.0, 0i64);
        pick.call_into(&pargs, &mut [arrayad::Out::F64(&mut a), arrayad::Out::I64(&mut b)]).unwrap();
        assert_eq!((a, b), (6.0, 6));
        let e = pick.call_into(&pargs, &mut [arrayad::Out::F64(&mut a), arrayad::Out::F64(&mut 0.0)]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
}

#[test]
fn functions_are_owned_handles() {
    // A handle outlives the Module value it came from and moves to threads.
    let f = {
        let m = Module::compile("api.arr", SOURCE).unwrap();
        m.function("f").unwrap()
    };
    let handles: Vec<_> = (0..4)
        .map(|k| {
            let f = f.clone();
            std::thread::spawn(move || {
                let x = [k as f64, 1.0];
                f.grad(&[Arg::Vector(&x), Arg::Vector(&[2.0, 3.0])]).unwrap().value
            })
        })
        .collect();
    for (k, h) in handles.into_iter().enumerate() {
        let v = h.join().unwrap();
        // (The language's exp, `arrayad_ir::inline_math::exp`.)
        assert_eq!(v, 2.0 * k as f64 + 3.0 + arrayad_ir::inline_math::exp(k as f64));
    }
}

#[test]
fn modules_come_from_files() {
    let dir = std::env::temp_dir().join(format!("arrayad-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.arr");
    std::fs::write(&path, "def f(x: f64) -> f64 = x * 3.0\n").unwrap();
    let m = Module::from_file(&path).unwrap();
    assert_eq!(m.function("f").unwrap().call(&[Arg::F64(2.0)]).unwrap(), [Value::F64(6.0)]);
    std::fs::write(&path, b"def f(x: f64) -> f64 = x\xff\n").unwrap();
    let e = Module::from_file(&path).unwrap_err();
    assert!(matches!(&e, Error::Compile(d) if d.render().contains("not valid UTF-8")), "{e}");
    let e = Module::from_file(dir.join("missing.arr")).unwrap_err();
    assert!(matches!(e, Error::Io(_)), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With literal active extents the vector jvp carries a lane per column
/// (20 here, `arrayad_ad::jvp_lane_count`): the forward Jacobian (more
/// rows than columns) is one pass, and `jvp_many` goes 20 directions to a
/// pass, the last padded; every column and every tangent is bitwise the
/// jvp of its direction, and the value bitwise the call's.
#[test]
fn forward_jacobians_go_a_lane_per_literal_column() {
    let src = "def fit(p: [20]f64, ts: [m]f64) -> [m]f64 =\n  \
               for i < m => sum(for j < 5 => p[4 * j] * exp(-p[4 * j + 1] * ts[i]) * cos(p[4 * j + 2] * ts[i] + p[4 * j + 3]))\n";
    let p: Vec<f64> = (0..20).map(|k| 0.1 + 0.05 * k as f64 * if k % 2 == 0 { 1.0 } else { -1.0 }).collect();
    let ts: Vec<f64> = (0..30).map(|i| 0.07 * i as f64).collect();
    let unit = |c: usize| -> Vec<f64> { (0..20).map(|k| if k == c { 1.0 } else { 0.0 }).collect() };
    for backend in [Backend::Cranelift, Backend::Interp] {
        let m = Module::compile_with("fit.arr", src, Options::backend(backend).with_wrt(&["p"])).unwrap();
        let f = m.function("fit").unwrap();
        let args = [Arg::Vector(&p), Arg::Vector(&ts)];
        let jac = f.jacobian(&args).unwrap();
        assert_eq!((jac.rows, jac.cols), (30, 20));
        assert_eq!(jac.value, f.call(&args).unwrap(), "{backend:?}");
        for c in 0..20 {
            let e = unit(c);
            let j = f.jvp(&args, &[Some(Arg::Vector(&e)), None]).unwrap();
            let column: Vec<f64> = (0..30).map(|r| jac.data[r * 20 + c]).collect();
            assert_eq!(column, f64s(&j.tangent[0]), "{backend:?}: column {c}");
        }
        // 45 directions: passes of 20, 20 and 5 (padded).
        let dirs: Vec<Vec<f64>> =
            (0..45).map(|d| (0..20).map(|k| ((d * 7 + k * 3) % 11) as f64 - 5.0).collect()).collect();
        let directions: Vec<Vec<Option<Arg<'_>>>> = dirs.iter().map(|d| vec![Some(Arg::Vector(d)), None]).collect();
        let many = f.jvp_many(&args, &directions).unwrap();
        assert_eq!(many.value, jac.value);
        assert_eq!(many.tangents.len(), 45);
        for (d, dir) in dirs.iter().enumerate() {
            let j = f.jvp(&args, &[Some(Arg::Vector(dir)), None]).unwrap();
            assert_eq!(many.tangents[d], j.tangent, "{backend:?}: direction {d}");
        }
    }
}

/// The control bits of the calling thread's MXCSR (x86-64): its modes,
/// without the exception flags that arithmetic sets.
#[cfg(target_arch = "x86_64")]
fn mxcsr_modes() -> u32 {
    let mut csr: u32 = 0;
    // SAFETY: `stmxcsr` stores the thread's control word into `csr`.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack)) };
    csr & !0x3f
}

/// `Options::with_flush_subnormals`: every call of JIT code flushes
/// subnormal numbers to zero, on one thread and on several (a parallel map
/// and its gradient), and gives the caller its mode back; without it,
/// IEEE's subnormal numbers.
#[cfg(target_arch = "x86_64")]
#[test]
fn flushing_modules_flush_subnormal_numbers_in_every_call() {
    let src = "def scaled(x: [n]f64) -> [n]f64 = for i < n => x[i] * 1e-300\n\
               def energy(x: [n]f64) -> f64 = sum(for i < n => x[i] * x[i] * 1e-290) * 1e-10\n";
    let x: Vec<f64> = (0..100_000).map(|i| 1e-10 * (1.0 + i as f64 / 1e5)).collect();
    let mut backends = vec![Backend::Cranelift];
    if cfg!(feature = "llvm") {
        backends.push(Backend::Llvm);
    }
    let before = mxcsr_modes();
    // Every map on the threads, however small (other tests of this binary
    // too, which then still give the same bits).
    arrayad_runtime::set_parallel_grain(Some(0));
    for backend in backends {
        for flush in [false, true] {
            let m =
                Module::compile_with("tiny.arr", src, Options::backend(backend).with_flush_subnormals(flush)).unwrap();
            for threads in [1, 7] {
                arrayad::set_num_threads(Some(threads));
                let runs = arrayad_runtime::parallel_runs();
                let scaled = f64s(&m.function("scaled").unwrap().call(&[Arg::Vector(&x)]).unwrap().pop());
                let grad = m.function("energy").unwrap().grad(&[Arg::Vector(&x)]).unwrap();
                let values: Vec<f64> = scaled.into_iter().chain(f64s(&grad.gradient[0])).collect();
                assert_eq!(values.len(), 200_000);
                let what = format!("{backend:?}, flush {flush}, {threads} threads");
                if flush {
                    assert!(values.iter().all(|v| *v == 0.0), "{what}: not flushed");
                } else {
                    assert!(values.iter().all(|v| *v > 0.0 && *v < f64::MIN_POSITIVE), "{what}: not subnormal");
                }
                assert_eq!(mxcsr_modes(), before, "{what}: the caller's mode changed");
                if threads > 1 {
                    assert!(arrayad_runtime::parallel_runs() > runs, "{what}: nothing ran on the threads");
                }
            }
        }
    }
    arrayad::set_num_threads(None);
    arrayad_runtime::set_parallel_grain(None);
}
