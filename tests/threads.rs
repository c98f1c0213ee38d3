//! Parallel maps give the same bits on every number of threads: every
//! corpus program, the GMM example and the generated programs, compiled by
//! every backend, with every map on the pool (grain 0), on 1, 2 and 7
//! threads: values, jvps and vjps bitwise equal, and run-time errors the
//! same message (the first failing iteration's, in index order); the jvps
//! of maps and sums on the pool too (maps of several arrays).
//!
//! One test: the number of threads and the grain are the process's.

mod common;

use arrayad_ir::{FuncId, Program, Scalar, Value};
use common::{corpus_cases, json_value, Case, Rng};

/// A case compiled once by every backend of this build: its primal, jvp
/// and vjp, its arguments and the interpreter's values of the primal.
/// The code does not depend on the number of threads, which is read when
/// a map runs, so one compilation serves every number.
struct Compiled {
    args: Vec<Value>,
    reference: Result<Vec<Value>, String>,
    names: [String; 3],
    jits: Vec<(arrayad_codegen::Backend, arrayad_codegen::JitModule)>,
    seed: u64,
}

fn compile(case: &Case) -> Compiled {
    let program = arrayad_frontend::compile(&case.file, &case.source).expect("compiles");
    let program = arrayad_ad::expand_derivatives(program).expect("derivative operators expand");
    let fid = program.find(&case.func).expect("the function");
    let ptypes = program.func(fid).param_types();
    let args: Vec<Value> =
        case.args.as_array().expect("args").iter().zip(&ptypes).map(|(j, t)| json_value(j, *t)).collect();
    let active: Vec<bool> = ptypes.iter().map(|t| t.elem == Scalar::F64).collect();
    let prim = common::ad::prepare(&program, fid).expect("prepares");
    let jvp = common::ad::jvp(&program, fid, &active).expect("jvp");
    let vjp = common::ad::vjp(&program, fid, &active).expect("vjp");
    let single = Program { file: case.file.clone(), funcs: vec![prim.clone()] };
    let reference = arrayad_ir::interp::run(&single, FuncId(0), &args).map_err(|e| e.to_string());
    let names = [prim.name.clone(), jvp.name.clone(), vjp.name.clone()];
    let jits = common::jits(&case.file, &[prim, jvp, vjp]);
    Compiled { args, reference, names, jits, seed: 0x7ead5 ^ case.source.len() as u64 }
}

/// Every value of the compiled case's primal, jvp and vjp (random tangent
/// and cotangent, the same on every run), for each backend of this build,
/// or its error message, on the process's current number of threads.
fn outputs(c: &Compiled) -> Vec<Result<Vec<Value>, String>> {
    let mut rng = Rng(c.seed);
    let [prim, jvp, vjp] = &c.names;
    let mut out = Vec::new();
    for (_, jit) in &c.jits {
        out.push(jit.call(prim, &c.args).map_err(|e| e.to_string()));
        let Ok(values) = &c.reference else { continue };
        let mut jargs = c.args.clone();
        jargs.extend(c.args.iter().filter(|a| a.ty().elem == Scalar::F64).map(|a| common::random_like(a, &mut rng)));
        out.push(jit.call(jvp, &jargs).map_err(|e| e.to_string()));
        let mut vargs = c.args.clone();
        vargs.extend(values.iter().filter(|v| v.ty().elem == Scalar::F64).map(|v| common::random_like(v, &mut rng)));
        out.push(jit.call(vjp, &vargs).map_err(|e| e.to_string()));
    }
    out
}

/// Cases whose maps fail: an index out of bounds in some iterations (the
/// lowest one's is reported), or in one iteration chosen by an argument.
fn failing_cases() -> Vec<Case> {
    let src = "def gather(x: [n]f64, idx: [m]i64) -> [m]f64 = for i < m => x[idx[i]] * 2.0 + f64(i)\n\
               def rows(x: [n]f64, k: i64) -> [n]f64 = for i < n => if i == k then 1.0 / f64(i - k) + x[i + n] else x[i]\n\
               def pairs(x: [n]f64, k: i64) -> [n][2]f64 = for i < n => [x[i], if i >= k then x[i + n] else 2.0 * x[i]]\n";
    let case = |func: &str, args: serde_json::Value| Case {
        file: "failing.arr".into(),
        source: src.into(),
        func: func.into(),
        args,
        finite_differences: false,
    };
    let idx: Vec<i64> = (0..64)
        .map(|i| {
            if i == 41 {
                90
            } else if i == 57 {
                77
            } else {
                i % 5
            }
        })
        .collect();
    let x: Vec<f64> = (0..5).map(|i| i as f64 * 0.5).collect();
    let long: Vec<f64> = (0..64).map(|i| i as f64).collect();
    vec![
        case("gather", serde_json::json!([x, idx])),
        case("gather", serde_json::json!([x, (0..64).map(|i| i % 5).collect::<Vec<i64>>()])),
        case("rows", serde_json::json!([long, 33])),
        case("rows", serde_json::json!([long, 64])),
        // Array rows (a parallel map of rows of a static shape): the first
        // failing iteration's error, or none.
        case("pairs", serde_json::json!([long, 40])),
        case("pairs", serde_json::json!([long, 64])),
    ]
}

#[test]
fn parallel_maps_give_the_same_bits_on_every_number_of_threads() {
    let mut cases = corpus_cases();
    cases.extend((0..24u64).map(common::generate::program));
    cases.extend(failing_cases());
    arrayad_runtime::set_parallel_grain(Some(0));
    let runs_before = arrayad_runtime::parallel_runs();
    let mut errors = 0;
    for case in &cases {
        let compiled = compile(case);
        arrayad_runtime::set_num_threads(Some(1));
        let one = outputs(&compiled);
        for threads in [2, 7] {
            arrayad_runtime::set_num_threads(Some(threads));
            let many = outputs(&compiled);
            assert_eq!(one.len(), many.len(), "{}:{}", case.file, case.func);
            for (k, (a, b)) in one.iter().zip(&many).enumerate() {
                match (a, b) {
                    (Ok(a), Ok(b)) => common::assert_bitwise(
                        &format!("{}:{} output {k} on {threads} threads", case.file, case.func),
                        a,
                        b,
                    ),
                    (Err(a), Err(b)) => assert_eq!(a, b, "{}:{} output {k} on {threads} threads", case.file, case.func),
                    _ => panic!("{}:{} output {k} on {threads} threads: {a:?} vs {b:?}", case.file, case.func),
                }
            }
        }
        errors += one.iter().filter(|r| r.is_err()).count();
    }
    maps_inside_maps_and_concurrent_callers();
    backward_loops_run_on_the_pool();
    long_reductions_are_the_interpreters();
    ba_blocks_are_the_interpreters();
    jvps_run_on_the_pool();
    row_blocks_are_the_interpreters();
    packed_gathers_run_on_the_pool();
    triangle_sums_run_on_the_pool();
    let runs = arrayad_runtime::parallel_runs() - runs_before;
    arrayad_runtime::set_num_threads(None);
    arrayad_runtime::set_parallel_grain(None);
    // The maps ran on the pool (not only on the calling thread), and the
    // failing cases failed.
    assert!(runs >= 100, "only {runs} maps ran on the pool");
    // Two failing cases, each failing once per backend (their derivatives
    // are not run).
    assert!(errors >= 2 * arrayad_codegen::Backend::available().len(), "only {errors} failing outputs");
}

/// The gradient of a log-sum-exp runs on the pool: the forward pass's
/// maximum, the count of its ties (a parallel sum), the exponentials (a
/// map) and their sum (a sum of the stored array, by blocks), the
/// additions into the maximum's cotangent as a parallel sum
/// (`arrayad_ir::passes::reductions`) and the one fused loop that adds
/// into the gradient as a loop of effects: six maps per call, with ties of
/// the maximum in different chunks. The gradient is the same bits on one
/// thread and on two.
fn backward_loops_run_on_the_pool() {
    use arrayad::{Arg, Module, Options};
    let src = "def lse(x: [n]f64) -> f64 = let m = maximum(x) in m + log(sum(for i < n => exp(x[i] - m)))\n";
    let x: Vec<f64> = (0..20_000).map(|i| if i % 5000 == 7 { 3.0 } else { ((i % 97) as f64 * 0.37).sin() }).collect();
    for backend in common::api_backends() {
        let m = Module::compile_with("lse.arr", src, Options::backend(backend)).unwrap();
        let lse = m.function("lse").unwrap();
        let grad = || {
            let r = lse.vjp(&[Arg::Vector(&x)], &[Some(Arg::F64(1.0))]).unwrap();
            r.cotangent.f64s("x").unwrap().iter().map(|v| v.to_bits()).collect::<Vec<u64>>()
        };
        arrayad_runtime::set_num_threads(Some(1));
        let one = grad();
        arrayad_runtime::set_num_threads(Some(2));
        let before = arrayad_runtime::parallel_runs();
        let two = grad();
        let runs = arrayad_runtime::parallel_runs() - before;
        assert_eq!(one, two, "{backend:?}: the gradient on two threads");
        assert_eq!(runs, 6, "{backend:?}: maps of the gradient that ran on the pool");
        // The ties (3.0, every 5000 elements) share the maximum's
        // cotangent.
        let g: Vec<f64> = one.iter().map(|b| f64::from_bits(*b)).collect();
        assert_eq!(g[7].to_bits(), g[5007].to_bits());
        assert!((g.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
}

/// Sums, maxima and minima of stored arrays longer than a block of sums
/// (`SUM_BLOCK`, from which they run by blocks on the pool), and the
/// derivatives of maxima with ties in several blocks: every backend's
/// values the interpreter's bits, on 1, 2 and 7 threads, and the
/// derivatives the same bits on every number of threads.
fn long_reductions_are_the_interpreters() {
    let src = "def total(x: [n]f64) -> f64 = sum(x)\n\
               def reduce(x: [n]f64) -> f64 = sum(x) * 1e-3 + maximum(x) - minimum(x)\n\
               def ties(x: [n]f64) -> f64 = let m = maximum(x) in m * sum(for i < n => x[i] * x[i])\n";
    let block = arrayad_ir::interp::ops::SUM_BLOCK;
    let mut cases = Vec::new();
    for n in [block - 1, block, block + 1, 3 * block + 17, 10 * block] {
        // Values of many magnitudes, and blocks of different scales (the
        // sum's rounding depends on the order of the blocks' sums), a
        // negative zero, and ties of the maximum in several blocks.
        let x: Vec<f64> = (0..n)
            .map(|i| match i % 1999 {
                5 => 7.5e9,
                6 => -0.0,
                k => {
                    let scale = 10f64.powi(3 * (i / block % 4) as i32);
                    ((k * 37 % 101) as f64 - 50.0) * 10f64.powi((i % 13) as i32 - 6) * scale + 0.1
                }
            })
            .collect();
        for func in ["total", "reduce", "ties"] {
            cases.push(Case {
                file: "long.arr".into(),
                source: src.into(),
                func: func.into(),
                args: serde_json::json!([x]),
                finite_differences: false,
            });
        }
    }
    for case in &cases {
        let program = arrayad_frontend::compile(&case.file, &case.source).expect("compiles");
        let fid = program.find(&case.func).expect("the function");
        let prim = common::ad::prepare(&program, fid).expect("prepares");
        let x = json_value(&case.args[0], program.func(fid).param_types()[0]);
        let single = Program { file: case.file.clone(), funcs: vec![prim.clone()] };
        let reference = arrayad_ir::interp::run(&single, FuncId(0), std::slice::from_ref(&x)).expect("runs");
        for (backend, jit) in common::jits(&case.file, std::slice::from_ref(&prim)) {
            for threads in [1, 2, 7] {
                arrayad_runtime::set_num_threads(Some(threads));
                let got = jit.call(&prim.name, std::slice::from_ref(&x)).expect("runs");
                common::assert_bitwise(
                    &format!("{}:{} {backend:?} on {threads} threads", case.file, case.func),
                    &reference,
                    &got,
                );
            }
        }
        let compiled = compile(case);
        arrayad_runtime::set_num_threads(Some(1));
        let one = outputs(&compiled);
        for threads in [2, 7] {
            arrayad_runtime::set_num_threads(Some(threads));
            for (a, b) in one.iter().zip(&outputs(&compiled)) {
                let (Ok(a), Ok(b)) = (a, b) else { panic!("{}:{}: {a:?} vs {b:?}", case.file, case.func) };
                common::assert_bitwise(&format!("{}:{} on {threads} threads", case.file, case.func), a, b);
            }
        }
    }
}

/// The backward nest of a mixture over components with large rows (a
/// 64 x 64 factor per component, 32 KiB) is interchanged and its chunks
/// run in blocks of components with the points outer
/// (`Lower::rows_by_blocks`: a component's rows of the factor and of its
/// cotangent, 64 KiB, make blocks of 3 of the 20 components on one
/// thread, the last of 2; smaller chunks on more): every backend's
/// gradient is the interpreter's bits on 1, 2 and 7 threads, and runs on
/// the pool. A triangular loop of effects (its inner count is the row)
/// keeps its loops.
fn row_blocks_are_the_interpreters() {
    let src = "def blocks(l: [k][d][d]f64, w: [k]f64, x: [n][d]i64) -> f64 =\n\
               \x20 sum(for i < n =>\n\
               \x20   let xi = for c < d => 0.1 * f64(x[i, c])\n\
               \x20   let terms = for j < k =>\n\
               \x20     let q = for r < d => dot(l[j, r], xi)\n\
               \x20     in w[j] - 0.5 * dot(q, q)\n\
               \x20   let mx = maximum(terms)\n\
               \x20   in mx + log(sum(for j < k => exp(terms[j] - mx))))\n";
    let program = arrayad_frontend::compile("blocks.arr", src).expect("compiles");
    let fid = program.find("blocks").expect("the function");
    let vjp = common::ad::vjp(&program, fid, &[true, true, false]).expect("vjp");
    // The nest the blocks are for: at the top level, a loop over the
    // components whose body is a loop over the points, reading the stacked
    // residuals `r[j, k, ..]` (`j` the point). Code generation runs it
    // several points at a time (`ir::passes::jam`: the groups' counts
    // before it, the points left over after it; `j` a point of the
    // group), on every backend.
    let interchanged = vjp.body.stmts.iter().any(|s| {
        let arrayad_ir::StmtKind::For { index: k, body, .. } = &s.kind else { return false };
        let loops: Vec<_> = body.stmts.iter().filter(|s| matches!(s.kind, arrayad_ir::StmtKind::For { .. })).collect();
        let [inner] = loops.as_slice() else { return false };
        let arrayad_ir::StmtKind::For { index: j, body: b, .. } = &inner.kind else { return false };
        let mut points = std::collections::HashSet::from([*j]);
        arrayad_ir::visit::block_binds(b, &mut |v| {
            points.insert(v);
        });
        b.stmts.iter().any(|s| {
            matches!(&s.kind, arrayad_ir::StmtKind::Let { expr: arrayad_ir::Expr::Index { indices, .. }, .. }
                if indices.len() >= 2
                    && indices[0].as_var().is_some_and(|j| points.contains(&j))
                    && indices[1] == arrayad_ir::Atom::Var(*k))
        })
    });
    assert!(interchanged, "blocks.arr: no interchanged nest reading residuals by point and component");
    // The arguments: `k` factors of `d x d` and weights from `factor(j,
    // r, c)` and `weight(j)`, 9 points, and the cotangent.
    let mixture = |k: usize, d: usize, factor: &dyn Fn(usize, usize, usize) -> f64, weight: &dyn Fn(usize) -> f64| {
        let l: Vec<Vec<Vec<f64>>> =
            (0..k).map(|j| (0..d).map(|r| (0..d).map(|c| factor(j, r, c)).collect()).collect()).collect();
        let w: Vec<f64> = (0..k).map(weight).collect();
        let x: Vec<Vec<i64>> = (0..9).map(|i| (0..d).map(|c| ((i * 5 + c * 3) % 11) as i64 - 5).collect()).collect();
        vec![
            json_value(&serde_json::json!(l), arrayad_ir::Type::array(Scalar::F64, 3)),
            json_value(&serde_json::json!(w), arrayad_ir::Type::array(Scalar::F64, 1)),
            json_value(&serde_json::json!(x), arrayad_ir::Type::array(Scalar::I64, 2)),
            Value::F64(0.75),
        ]
    };
    let lower = |j: usize, r: usize, c: usize| {
        if c <= r {
            ((j * 31 + r * 7 + c * 3) % 17) as f64 * 0.01 - 0.08
        } else {
            0.0
        }
    };
    let args = mixture(20, 64, &lower, &|j| (j as f64 * 0.3).sin());
    vjp_is_the_interpreters("blocks.arr", &vjp, &args, true);
    // Rows of 4 `f64`s (d = 2) of 1100 components: chunks of more than
    // the 64 rows a block keeps on the stack on two threads, so each chunk
    // keeps `ct_l`'s and `ct_w`'s rows block after block.
    let full = |j: usize, r: usize, c: usize| ((j * 29 + r * 7 + c * 3) % 19) as f64 * 0.02 - 0.2;
    let args = mixture(1100, 2, &full, &|j| (j as f64 * 0.37).cos());
    vjp_is_the_interpreters("blocks.arr", &vjp, &args, true);
    // `ct_w[j]`, one `f64` a component, is kept on the stack while a
    // block runs its points, so that two threads' blocks do not add into
    // one cache line (`codegen/src/lower/private_rows.rs`: a buffer of
    // 64 rows of up to 8 `f64`s); the factor's rows, 32 KiB at d = 64, are
    // not (their test at run time keeps them in place), 32 bytes at d = 2
    // are, and the bits above are the interpreter's either way.
    for backend in common::api_backends() {
        let m = arrayad::Module::compile_with("blocks.arr", src, arrayad::Options::backend(backend)).expect("compiles");
        let ir = m.function("blocks").expect("the function").backend_ir("vjp").expect("compiles").expect("IR");
        let buffer = match backend {
            arrayad::Backend::Llvm => "alloca [512 x i64]",
            _ => "explicit_slot 4096",
        };
        assert!(ir.contains(buffer), "blocks.arr ({backend:?}): no stack buffer of accumulator rows");
    }
    // A loop of effects over rows whose inner loop counts to the row
    // (`for r { for c < r { .. } }`, a triangle): not blocked, the
    // interpreter's bits.
    let src = "def tri(a: [n][n]f64) -> f64 = sum(for r < n => sum(for c < r => a[r, c] * a[r, c] * f64(c + 1)))\n";
    let program = arrayad_frontend::compile("tri.arr", src).expect("compiles");
    let fid = program.find("tri").expect("the function");
    let vjp = common::ad::vjp(&program, fid, &[true]).expect("vjp");
    let a: Vec<Vec<f64>> =
        (0..40).map(|r| (0..40).map(|c| ((r * 13 + c * 7) % 23) as f64 * 0.1 - 1.1).collect()).collect();
    let args = vec![json_value(&serde_json::json!(a), arrayad_ir::Type::array(Scalar::F64, 2)), Value::F64(1.5)];
    vjp_is_the_interpreters("tri.arr", &vjp, &args, false);
}

/// The gradient of `examples/gmm_packed.arr`, whose packed reads are
/// gathered into two comprehensions (`arrayad_ir::passes::gather`): it
/// tapes nothing, its backward nest is interchanged (a loop over the
/// components whose body is the loop over the points, which code generation
/// runs several at a time),
/// cannot fail and runs on the pool, the interpreter's bits on 1, 2 and 7 threads.
fn packed_gathers_run_on_the_pool() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(root.join("examples/gmm_packed.arr")).expect("the example");
    let program = arrayad_frontend::compile("gmm_packed.arr", &src).expect("compiles");
    let fid = program.find("gmm").expect("the function");
    let vjp = common::ad::vjp(&program, fid, &[true, true, true, false, false, false]).expect("vjp");
    // The component's body is the loop over the points (which code
    // generation runs several points per iteration, `arrayad_ir::passes::jam`)
    // and numbers.
    let nested = |s: &arrayad_ir::Stmt| {
        use arrayad_ir::StmtKind::{For, If, Let};
        let For { body, .. } = &s.kind else { return false };
        let loops = body.stmts.iter().filter(|s| matches!(s.kind, For { .. })).count();
        loops == 1 && body.stmts.iter().all(|s| matches!(s.kind, Let { .. } | For { .. } | If { .. }))
    };
    assert!(vjp.body.stmts.iter().any(nested), "gmm_packed.arr: no interchanged nest");
    // It cannot fail: its loops run only where the gathered array was made
    // (the count of the points is `if made then N else 0`), so it may run
    // on the pool.
    let fallible = arrayad_ir::passes::fallible::analyse(&vjp);
    assert!(
        vjp.body.stmts.iter().filter(|s| nested(s)).all(|s| !fallible.stmt(&s.kind)),
        "gmm_packed.arr: the interchanged nest may fail"
    );
    let (k, d, n) = (6usize, 9usize, 40usize);
    let t = d * (d + 1) / 2;
    let alphas: Vec<f64> = (0..k).map(|j| (j as f64 * 0.7).sin()).collect();
    let means: Vec<Vec<f64>> =
        (0..k).map(|j| (0..d).map(|c| ((j * 5 + c * 3) % 7) as f64 * 0.2 - 0.6).collect()).collect();
    let icf: Vec<Vec<f64>> =
        (0..k).map(|j| (0..t).map(|c| ((j * 11 + c * 5) % 13) as f64 * 0.05 - 0.3).collect()).collect();
    let x: Vec<Vec<f64>> =
        (0..n).map(|i| (0..d).map(|c| ((i * 7 + c * 13) % 17) as f64 * 0.1 - 0.8).collect()).collect();
    let args = vec![
        json_value(&serde_json::json!(alphas), arrayad_ir::Type::array(Scalar::F64, 1)),
        json_value(&serde_json::json!(means), arrayad_ir::Type::array(Scalar::F64, 2)),
        json_value(&serde_json::json!(icf), arrayad_ir::Type::array(Scalar::F64, 2)),
        json_value(&serde_json::json!(x), arrayad_ir::Type::array(Scalar::F64, 2)),
        Value::F64(1.0),
        Value::I64(0),
        Value::F64(1.0),
    ];
    vjp_is_the_interpreters("gmm_packed.arr", &vjp, &args, true);
}

/// GMM with the triangle's rows written as sums (`sum(for c < r =>
/// lower[r, c] * xc[c])`, not `dot` of prefixes): the backward loops over
/// the components of the unpacking of the factors and of the points'
/// nest fuse, so one loop reads the elements of the cotangent rows it
/// added into (`ct_lower_qs[k, r, c]`) and slices its own row of the
/// factors' cotangent (`ct_icf[k][0:D]`, a view of an accumulator, which
/// cannot fail). That loop still runs forward, cannot fail and runs on
/// the pool as a loop of effects, and the vjp gives the interpreter's bits
/// on 1, 2 and 7 threads.
fn triangle_sums_run_on_the_pool() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dot_form = std::fs::read_to_string(root.join("examples/gmm.arr")).expect("the example");
    let row = "dot(lower[r][0:r], xc[0:r])";
    assert!(dot_form.contains(row), "examples/gmm.arr computes a row of the triangle as {row}");
    let sum_form = dot_form.replace(row, "sum(for c < r => lower[r, c] * xc[c])");
    let (k, d, n) = (5usize, 7usize, 30usize);
    let t = d * (d + 1) / 2;
    let matrix = |rows: usize, cols: usize, seed: usize| -> Value {
        let m: Vec<Vec<f64>> =
            (0..rows).map(|i| (0..cols).map(|c| ((i * seed + c * 5 + 3) % 13) as f64 * 0.05 - 0.3).collect()).collect();
        json_value(&serde_json::json!(m), arrayad_ir::Type::array(Scalar::F64, 2))
    };
    let alphas: Vec<f64> = (0..k).map(|j| (j as f64 * 0.7).sin()).collect();
    let args = vec![
        json_value(&serde_json::json!(alphas), arrayad_ir::Type::array(Scalar::F64, 1)),
        matrix(k, d, 7),
        matrix(k, t, 11),
        matrix(n, d, 3),
        Value::F64(1.0),
        Value::I64(0),
        Value::F64(1.0),
    ];
    let mut pool_runs = Vec::new();
    for (file, src) in [("gmm.arr", &dot_form), ("gmm_sums.arr", &sum_form)] {
        let program = arrayad_frontend::compile(file, src).expect("compiles");
        let fid = program.find("gmm").expect("the function");
        let vjp = common::ad::vjp(&program, fid, &[true, true, true, false, false, false]).expect("vjp");
        // The top-level loops that read elements of accumulators (the
        // unpacking's backward loop, and in the sum form the nest fused
        // with it) run forward and cannot fail.
        use arrayad_ir::{Expr, StmtKind};
        let accumulators: std::collections::HashSet<arrayad_ir::VarId> = vjp
            .body
            .stmts
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Let { vars, expr: Expr::Zeros(_) | Expr::ZerosLike(_) } => Some(vars[0]),
                _ => None,
            })
            .collect();
        let fallible = arrayad_ir::passes::fallible::analyse(&vjp);
        let mut reading = 0;
        for s in &vjp.body.stmts {
            let StmtKind::For { reverse, body, .. } = &s.kind else { continue };
            let mut reads = false;
            arrayad_ir::visit::for_each_block(body, &mut |b| {
                reads |= b.stmts.iter().any(|s| {
                    matches!(&s.kind, StmtKind::Let { vars, expr: Expr::Index { array, .. } }
                        if accumulators.contains(array) && vjp.ty(vars[0]).is_scalar())
                });
            });
            if reads {
                assert!(!reverse && !fallible.stmt(&s.kind), "{file}: a loop reading its cotangents");
                reading += 1;
            }
        }
        assert!(reading >= 1, "{file}: no loop reads the cotangent of the unpacked factors");
        vjp_is_the_interpreters(file, &vjp, &args, true);
        let (_, jit) = common::jits(file, std::slice::from_ref(&vjp)).into_iter().next().expect("a backend");
        arrayad_runtime::set_num_threads(Some(2));
        let before = arrayad_runtime::parallel_runs();
        jit.call(&vjp.name, &args).expect("runs");
        pool_runs.push(arrayad_runtime::parallel_runs() - before);
        arrayad_runtime::set_num_threads(Some(1));
    }
    // The sum form's vjp runs eight maps on the pool with every map on
    // it (grain 0), the fused loop over the components one of them (seven
    // when it runs on the calling thread); the dot form's ten.
    assert_eq!(pool_runs, [10, 8], "maps on the pool: the dot form's, then the sums'");
}

/// Every backend's `vjp` of `args` is the interpreter's bits on 1, 2 and 7
/// threads, and, when `on_pool`, something of it ran on the pool on more
/// than one thread. Leaves one thread set.
fn vjp_is_the_interpreters(file: &str, vjp: &arrayad_ir::Function, args: &[Value], on_pool: bool) {
    let single = Program { file: file.into(), funcs: vec![vjp.clone()] };
    let reference = arrayad_ir::interp::run(&single, FuncId(0), args).expect("runs");
    for (backend, jit) in common::jits(file, std::slice::from_ref(vjp)) {
        for threads in [1, 2, 7] {
            arrayad_runtime::set_num_threads(Some(threads));
            let before = arrayad_runtime::parallel_runs();
            let got = jit.call(&vjp.name, args).expect("runs");
            common::assert_bitwise(&format!("{file} {backend:?} on {threads} threads"), &reference, &got);
            if on_pool && threads > 1 {
                assert!(arrayad_runtime::parallel_runs() > before, "{file} {backend:?}: nothing ran on the pool");
            }
        }
    }
    arrayad_runtime::set_num_threads(Some(1));
}

/// The jvps of maps and of sums run on the pool: the values and tangents
/// of a map are one parallel map of two arrays, the value and tangent of a
/// sum one parallel sum of two (`crate::parallel`'s maps of several
/// arrays). Every backend gives the interpreter's bits on 1, 2 and 7
/// threads with the maps on the pool, and a failing map the error of its
/// first failing iteration on every number of threads.
fn jvps_run_on_the_pool() {
    let src = "def wave(x: [n]f64) -> [n]f64 = for i < n => sin(x[i]) * x[i]\n\
               def lse(x: [n]f64) -> f64 = let m = maximum(x) in m + log(sum(for i < n => exp(x[i] - m)))\n\
               def bad(x: [n]f64, k: i64) -> [n]f64 = for i < n => if i >= k then x[i + n] else exp(x[i])\n";
    let program = arrayad_frontend::compile("jvps.arr", src).expect("compiles");
    let n = 3 * arrayad_ir::interp::ops::SUM_BLOCK + 5;
    let x: Vec<f64> = (0..n).map(|i| ((i % 89) as f64 * 0.41).sin() * 3.0).collect();
    let dx: Vec<f64> = (0..n).map(|i| ((i % 53) as f64 * 0.7).cos()).collect();
    let vector = |v: &[f64]| json_value(&serde_json::json!(v), arrayad_ir::Type::array(Scalar::F64, 1));
    // (function, arguments, maps of its jvp on the pool: the map of two
    // arrays; for lse the maximum, the count of its ties and the sum of
    // the exponentials and their tangents.)
    let cases = [
        ("wave", vec![vector(&x)], 1),
        ("lse", vec![vector(&x)], 3),
        ("bad", vec![vector(&x), Value::I64(5000)], 1),
        ("bad", vec![vector(&x), Value::I64(n as i64)], 1),
    ];
    for (func, args, maps) in cases {
        let fid = program.find(func).expect("the function");
        let active: Vec<bool> = program.func(fid).param_types().iter().map(|t| t.elem == Scalar::F64).collect();
        let jvp = common::ad::jvp(&program, fid, &active).expect("jvp");
        let mut jargs = args.clone();
        jargs.push(vector(&dx));
        let single = Program { file: "jvps.arr".into(), funcs: vec![jvp.clone()] };
        let reference = arrayad_ir::interp::run(&single, FuncId(0), &jargs);
        for (backend, jit) in common::jits("jvps.arr", std::slice::from_ref(&jvp)) {
            let mut first_error = None;
            for threads in [1, 2, 7] {
                arrayad_runtime::set_num_threads(Some(threads));
                let before = arrayad_runtime::parallel_runs();
                let got = jit.call(&jvp.name, &jargs);
                let runs = arrayad_runtime::parallel_runs() - before;
                let what = format!("{func} {backend:?} on {threads} threads");
                match (&reference, got) {
                    (Ok(want), Ok(got)) => {
                        common::assert_bitwise(&what, want, &got);
                        if threads > 1 {
                            assert_eq!(runs, maps, "{what}: maps of the jvp on the pool");
                        }
                    }
                    (Err(_), Err(e)) => {
                        let e = e.to_string();
                        assert!(e.contains("out of bounds"), "{what}: {e}");
                        assert_eq!(first_error.get_or_insert_with(|| e.clone()), &e, "{what}");
                        if threads > 1 {
                            assert!(runs >= 1, "{what}: the failing map ran on one thread");
                        }
                    }
                    (want, got) => panic!("{what}: {want:?} vs {got:?}"),
                }
            }
        }
    }
    forward_jacobians_run_on_the_pool();
}

/// A forward Jacobian of many rows (`bench/calls.arr`'s `fit`, 28
/// columns: one pass of the vector jvp, a map of the value and its 28
/// tangents) runs on the pool, the same bits on 1, 2 and 7 threads.
fn forward_jacobians_run_on_the_pool() {
    use arrayad::{Arg, Module, Options};
    let src = "def fit(p: [28]f64, us: [m]i64) -> [m]f64 =\n\
               for i < m =>\n\
                 let t = f64(us[i]) * 1e-6\n\
                 in sum(for j < 7 => p[4 * j] * exp(-p[4 * j + 1] * t) * cos(p[4 * j + 2] * t + p[4 * j + 3]))\n";
    let p: Vec<f64> = (0..28).map(|k| 0.5 + 0.1 * (k as f64 * 1.3).sin()).collect();
    let us: Vec<i64> = (0..3000).map(|i| i * 37 % 100_000).collect();
    for backend in common::api_backends() {
        let m = Module::compile_with("fit.arr", src, Options::backend(backend)).unwrap();
        let fit = m.function("fit").unwrap();
        let args = [Arg::Vector(&p), Arg::I64Array { data: &us, shape: &[us.len()] }];
        let jacobian = || {
            let j = fit.jacobian(&args).unwrap();
            assert_eq!((j.rows, j.cols), (us.len(), 28));
            j.data.iter().map(|v| v.to_bits()).collect::<Vec<u64>>()
        };
        arrayad_runtime::set_num_threads(Some(1));
        let one = jacobian();
        for threads in [2, 7] {
            arrayad_runtime::set_num_threads(Some(threads));
            let before = arrayad_runtime::parallel_runs();
            assert_eq!(one, jacobian(), "{backend:?}: the Jacobian on {threads} threads");
            assert!(arrayad_runtime::parallel_runs() > before, "{backend:?}: the Jacobian ran on one thread");
        }
    }
}

/// BA's Jacobian blocks of many observations in one call
/// (`examples/ba.arr`): a parallel map of `[3][15]` rows, each the vjps of
/// an observation (accumulators of its own). The blocks are the
/// interpreter's bits on every backend and number of threads, and the map
/// runs on the pool.
fn ba_blocks_are_the_interpreters() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ba.arr");
    let source = std::fs::read_to_string(file).expect("examples/ba.arr");
    let program = arrayad_frontend::compile("ba.arr", &source).expect("compiles");
    let program = arrayad_ad::expand_derivatives(program).expect("derivative operators expand");
    let fid = program.find("ba_jacobian_blocks").expect("ba_jacobian_blocks");
    let prim = common::ad::prepare(&program, fid).expect("prepares");
    let mut rng = Rng(0xba);
    let mut rows = |k: usize, lo: f64, hi: f64| -> serde_json::Value {
        let row = |rng: &mut Rng| (0..k).map(|_| lo + (hi - lo) * rng.unit()).collect::<Vec<f64>>();
        serde_json::json!((0..300).map(|_| row(&mut rng)).collect::<Vec<_>>())
    };
    let ws: Vec<f64> = (0..300).map(|i| 0.5 + f64::from(i % 7) * 0.1).collect();
    let json = [rows(11, -0.5, 0.5), rows(3, 2.0, 4.0), serde_json::json!(ws), rows(2, -1.0, 1.0)];
    let ptypes = program.func(fid).param_types();
    let args: Vec<Value> = json.iter().zip(&ptypes).map(|(j, t)| json_value(j, *t)).collect();
    let single = Program { file: "ba.arr".into(), funcs: vec![prim.clone()] };
    let reference = arrayad_ir::interp::run(&single, FuncId(0), &args).expect("runs");
    for (backend, jit) in common::jits("ba.arr", std::slice::from_ref(&prim)) {
        for threads in [1, 2, 7] {
            arrayad_runtime::set_num_threads(Some(threads));
            let before = arrayad_runtime::parallel_runs();
            let got = jit.call(&prim.name, &args).expect("runs");
            common::assert_bitwise(&format!("ba_jacobian_blocks {backend:?} on {threads} threads"), &reference, &got);
            if threads > 1 {
                assert!(arrayad_runtime::parallel_runs() > before, "{backend:?}: the blocks ran on one thread");
            }
        }
    }
}

/// A map whose iterations call a definition kept as a call that has a map
/// of its own (which runs on the calling thread inside the pool's), and
/// four threads calling at once (one gets the pool, the others run
/// alone): every result the same bits as on one thread.
fn maps_inside_maps_and_concurrent_callers() {
    use arrayad::{Arg, Module, Options};
    let src =
        "def inner(x: [n]f64, s: f64) -> f64 = let y = for i < n => sin(x[i] * s) + s in y[0] * y[n - 1] + y[n / 2]\n\
               def outer(x: [n]f64) -> [n]f64 = for j < n => inner(x, f64(j)) * x[j] + inner(x, 0.5 * f64(j))\n";
    let x: Vec<f64> = (0..300).map(|i| (i as f64 * 0.37).sin()).collect();
    for backend in common::api_backends() {
        let m = Module::compile_with("nested.arr", src, Options::backend(backend).with_keep_calls_above(1)).unwrap();
        let outer = m.function("outer").unwrap();
        let run = || {
            let v = outer.call(&[Arg::Vector(&x)]).unwrap();
            let r = outer.vjp(&[Arg::Vector(&x)], &[Some(Arg::Vector(&x))]).unwrap();
            (v, r.cotangent.f64s("x").unwrap().to_vec())
        };
        arrayad_runtime::set_num_threads(Some(1));
        let (v1, g1) = run();
        arrayad_runtime::set_num_threads(Some(7));
        let (v7, g7) = run();
        common::assert_bitwise(&format!("nested maps, {backend:?}"), &v1, &v7);
        assert_eq!(
            g1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            g7.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4).map(|_| scope.spawn(run)).collect();
            for h in handles {
                let (v, g) = h.join().unwrap();
                common::assert_bitwise(&format!("concurrent callers, {backend:?}"), &v1, &v);
                assert_eq!(g, g1, "concurrent callers' gradients, {backend:?}");
            }
        });
    }
}
