//! The ADBench GMM objective (`examples/gmm.arr`) and its gradient with
//! respect to `alphas`, `means` and `icf`, against the plain-Rust reference
//! (`tests/gmm_reference`): through the Rust API on the Cranelift JIT and on
//! the interpreter, and through the C library built by `arrayad build` with
//! the example driver `examples/gmm/main.c`.
//!
//! Inputs: a generated d=3 K=4 n=30 problem, and every ADBench GMM file of
//! `../shared/data/adbench/gmm/` when present (d2 K5 and d10 K25 on both
//! backends, d20 K50 and d64 K100 on the JIT).

mod gmm_reference;
mod support;

use arrayad::{Arg, Backend, Module, Options, Value};
use gmm_reference::{format_gmm, generate_gmm, gmm_gradient, gmm_objective, read_gmm, GmmInput};
use std::path::{Path, PathBuf};
use support::{arrayad, have, run_in, scratch};

/// Per entry: `|a - b| <= 1e-10 * max(1, |b|)`.
const TOL: f64 = 1e-10;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_example(path: &str) -> String {
    std::fs::read_to_string(manifest_dir().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// An ADBench data file, or `None` (with a note) when it is not there.
fn data_file(name: &str) -> Option<PathBuf> {
    let p = manifest_dir().join("../shared/data/adbench/gmm").join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("note: {} not found: skipping it", p.display());
        None
    }
}

/// The compiling backends of this build.
fn compiled() -> Vec<Backend> {
    if cfg!(feature = "llvm") {
        vec![Backend::Cranelift, Backend::Llvm]
    } else {
        vec![Backend::Cranelift]
    }
}

fn compile(backend: Backend) -> Module {
    compile_example("examples/gmm.arr", backend)
}

fn compile_example(path: &str, backend: Backend) -> Module {
    let opts = Options::backend(backend).with_wrt(&["alphas", "means", "icf"]);
    Module::compile_with(path, &read_example(path), opts).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn assert_matches(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: {} entries, expected {}", got.len(), want.len());
    let mut worst = (0.0f64, 0usize);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let err = (a - b).abs() / b.abs().max(1.0);
        assert!(err <= TOL, "{what}[{i}]: {a:e} vs reference {b:e} (relative error {err:e})");
        if err > worst.0 {
            worst = (err, i);
        }
    }
    eprintln!("{what}: {} entries agree, worst relative error {:e} at {}", got.len(), worst.0, worst.1);
}

/// Objective and gradient of `inp` through the Rust API.
fn check_api(module: &Module, label: &str, inp: &GmmInput) {
    let f = module.function("gmm").expect("gmm is defined");
    let t = inp.icf_size();
    let (k, d, n) = (inp.k, inp.d, inp.n);
    let (sm, si, sx) = ([k, d], [k, t], [n, d]);
    let args = [
        Arg::Vector(&inp.alphas),
        Arg::Array { data: &inp.means, shape: &sm },
        Arg::Array { data: &inp.icf, shape: &si },
        Arg::Array { data: &inp.x, shape: &sx },
        Arg::F64(inp.gamma),
        Arg::I64(inp.m),
    ];
    let value = f.call(&args).unwrap_or_else(|e| panic!("{label}: gmm failed: {e}"));
    let objective = gmm_objective(inp);
    let (ref_value, ref_grad) = gmm_gradient(inp);
    assert_eq!(value.len(), 1);
    assert_matches(&format!("{label} objective"), &[value[0].as_f64().expect("an f64 result")], &[objective]);

    let gr = f.grad(&args).unwrap_or_else(|e| panic!("{label}: gmm grad failed: {e}"));
    let (v, grad) = (gr.value, gr.gradient);
    assert_matches(&format!("{label} grad value"), &[v], &[ref_value]);
    assert_eq!(grad.len(), 6);
    assert!(grad[3].is_none() && grad[4].is_none() && grad[5].is_none(), "x, gamma, m are not differentiated");
    let flat: Vec<f64> = grad.as_slice()[..3]
        .iter()
        .flat_map(|g| g.as_ref().and_then(Value::f64_elements).expect("an f64 cotangent").to_vec())
        .collect();
    assert_matches(&format!("{label} gradient"), &flat, &ref_grad);
}

#[test]
fn gmm_generated_small_problem_jit_and_interp() {
    let inp = generate_gmm(3, 4, 30, 7);
    for b in compiled() {
        check_api(&compile(b), &format!("d3 K4 n30 ({b:?})"), &inp);
    }
    check_api(&compile(Backend::Interp), "d3 K4 n30 (interp)", &inp);
}

#[test]
fn gmm_adbench_d2_k5_jit_and_interp() {
    let Some(path) = data_file("gmm_d2_K5.txt") else { return };
    let inp = read_gmm(&path).expect("readable ADBench file");
    for b in compiled() {
        check_api(&compile(b), &format!("d2 K5 ({b:?})"), &inp);
    }
    check_api(&compile(Backend::Interp), "d2 K5 (interp)", &inp);
}

#[test]
fn gmm_adbench_d10_k25_jit_and_interp() {
    let Some(path) = data_file("gmm_d10_K25.txt") else { return };
    let inp = read_gmm(&path).expect("readable ADBench file");
    for b in compiled() {
        check_api(&compile(b), &format!("d10 K25 ({b:?})"), &inp);
    }
    check_api(&compile(Backend::Interp), "d10 K25 (interp)", &inp);
}

#[test]
fn gmm_adbench_d20_k50_and_d64_k100_jit() {
    // The two larger files run on the JIT only (the interpreter would take
    // minutes); the reference gradient is the hand-derived one.
    for name in ["gmm_d20_K50.txt", "gmm_d64_K100.txt"] {
        let Some(path) = data_file(name) else { continue };
        let inp = read_gmm(&path).expect("readable ADBench file");
        for b in compiled() {
            check_api(&compile(b), &format!("{name} ({b:?})"), &inp);
        }
    }
}

#[test]
fn gmm_module_is_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Module>();
    let module = compile(Backend::Cranelift);
    let inputs: Vec<GmmInput> = (0..4).map(|s| generate_gmm(2, 3, 10, 100 + s)).collect();
    std::thread::scope(|scope| {
        for (i, inp) in inputs.iter().enumerate() {
            let module = &module;
            scope.spawn(move || {
                for _ in 0..5 {
                    check_api(module, &format!("thread {i}"), inp);
                }
            });
        }
    });
}

/// `examples/gmm_packed.arr` reads the triangular factors from `icf` in
/// the innermost loop; the optimiser gathers them once into dense rows
/// (`arrayad_ir::passes::gather`). Its objective and gradient are the
/// reference's, on every backend.
#[test]
fn gmm_packed_matches_the_reference() {
    let inp = generate_gmm(4, 3, 20, 11);
    for b in compiled() {
        check_api(&compile_example("examples/gmm_packed.arr", b), &format!("packed d4 K3 n20 ({b:?})"), &inp);
    }
    check_api(&compile_example("examples/gmm_packed.arr", Backend::Interp), "packed d4 K3 n20 (interp)", &inp);
    let Some(path) = data_file("gmm_d10_K25.txt") else { return };
    let inp = read_gmm(&path).expect("readable ADBench file");
    for b in compiled() {
        check_api(&compile_example("examples/gmm_packed.arr", b), &format!("packed d10 K25 ({b:?})"), &inp);
    }
}

/// The gather of `examples/gmm_packed.arr` is hoisted, its gradient tapes
/// nothing and interchanges, and the program still fails where it read out
/// of bounds (`icf` one column short), with
/// the same message on every backend, and runs with no data points.
#[test]
fn gmm_packed_gather_is_hoisted_and_keeps_errors() {
    let root = manifest_dir();
    let ir = arrayad(&root, &["emit", "--stage", "ir", "--function", "gmm", "examples/gmm_packed.arr"]);
    assert_eq!(ir.code, 0, "{ir:#?}");
    assert!(ir.stdout.contains("gathered_row"), "the packed read is not gathered:\n{}", ir.stdout);
    // The hoisted comprehension has no branch in its body: its gradient
    // tapes nothing (residuals stacked by index) and its backward nest is
    // interchanged (components outer, each adding into its own rows), so
    // that it runs on the pool of threads.
    let vjp = ["emit", "--stage", "vjp", "--function", "gmm", "--wrt", "alphas,means,icf", "examples/gmm_packed.arr"];
    let vjp = arrayad(&root, &vjp);
    assert_eq!(vjp.code, 0, "{vjp:#?}");
    assert!(!vjp.stdout.contains("pop"), "the packed gradient tapes residuals:\n{}", vjp.stdout);
    assert!(vjp.stdout.contains("stacked_ct_terms"), "the packed backward nest is not interchanged:\n{}", vjp.stdout);
    // The corpus programs of gathers (tests/programs/hoisted_gathers.arr,
    // whose values and derivatives the differential tests check): hoisted
    // where the indices do not use the point index, not elsewhere.
    for (func, hoisted) in [("packed_points", true), ("strided", true), ("two_axes", true), ("left_alone", false)] {
        let ir = arrayad(&root, &["emit", "--stage", "ir", "--function", func, "tests/programs/hoisted_gathers.arr"]);
        assert_eq!(ir.code, 0, "{ir:#?}");
        assert_eq!(ir.stdout.contains("gathered"), hoisted, "{func}:\n{}", ir.stdout);
    }
    // d = 3 needs T = 6 columns; 5 make the read of Q[2, 1] fail.
    let short = r#"[[0.1, 0.2], [[0.5, 0.1, 0.2], [0.3, 0.2, 0.1]],
        [[0.1, 0.2, 0.3, 0.4, 0.5], [0.1, 0.2, 0.3, 0.4, 0.5]], [[1, 2, 3], [0.5, 0.5, 0.5]], 1.0, 0]"#;
    let no_points = r#"[[0.1, 0.2], [[0.5, 0.1, 0.2], [0.3, 0.2, 0.1]],
        [[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]], [], 1.0, 0]"#;
    let mut backends = vec!["interp", "cranelift"];
    if cfg!(feature = "llvm") {
        backends.push("llvm");
    }
    let want =
        "examples/gmm_packed.arr:46:28: index out of bounds: index 5 is out of bounds for axis 1 of `icf`, of extent 5";
    // Per derivative asked (none, the gradient): each backend's output.
    let mut outputs: [Vec<String>; 2] = Default::default();
    for backend in backends {
        for (which, derivative) in [None, Some("--grad")].into_iter().enumerate() {
            let mut args = vec!["run", "examples/gmm_packed.arr", "gmm", "--backend", backend, "--args", short];
            args.extend(derivative);
            let out = arrayad(&root, &args);
            assert_ne!(out.code, 0, "{backend} {derivative:?}: a short icf must fail: {out:#?}");
            assert!(out.stderr.contains(want), "{backend} {derivative:?}: {}", out.stderr);
            args[6] = no_points;
            let out = arrayad(&root, &args);
            assert_eq!(out.code, 0, "{backend} {derivative:?}: no points: {out:#?}");
            outputs[which].push(out.stdout);
        }
    }
    for outs in &outputs {
        assert!(outs.windows(2).all(|w| w[0] == w[1]), "the backends differ: {outs:#?}");
    }
}

/// Runs `examples/gmm/main.c` against a `libgmm.so` built by the CLI on the
/// input file `input` and returns (objective, gradient).
fn run_c_driver(dir: &Path, input: &Path) -> (f64, Vec<f64>) {
    let out = run_in(dir, "./gmm", &[input.to_str().unwrap()], None);
    assert_eq!(out.code, 0, "the gmm driver failed: {out:#?}");
    let mut lines = out.stdout.lines();
    let objective = lines
        .next()
        .and_then(|l| l.strip_prefix("objective "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no objective line: {}", out.stdout));
    let count: usize = lines
        .next()
        .and_then(|l| l.strip_prefix("gradient "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no gradient line: {}", out.stdout));
    let grad: Vec<f64> = lines.map(|l| l.trim().parse().expect("a gradient entry")).collect();
    assert_eq!(grad.len(), count, "gradient count line says {count}");
    (objective, grad)
}

#[test]
fn gmm_c_library_and_example_driver() {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C path");
        return;
    }
    for backend in compiled() {
        c_library_and_example_driver_on(backend);
    }
}

fn c_library_and_example_driver_on(backend: Backend) {
    let name = if backend == Backend::Llvm { "llvm" } else { "cranelift" };
    let dir = scratch("gmm", &format!("c_driver_{name}"));
    let root = manifest_dir();
    let lib = dir.join("libgmm.so");
    let args =
        ["build", "examples/gmm.arr", "-o", lib.to_str().unwrap(), "--wrt", "alphas,means,icf", "--backend", name];
    let out = arrayad(&root, &args);
    assert_eq!(out.code, 0, "arrayad build examples/gmm.arr failed: {out:#?}");
    let d = dir.to_str().unwrap();
    let main_c = root.join("examples/gmm/main.c");
    let out = run_in(
        &dir,
        "cc",
        &[
            "-std=c99",
            "-O2",
            "-Wall",
            "-Werror",
            main_c.to_str().unwrap(),
            "-o",
            "gmm",
            &format!("-I{d}"),
            &format!("-L{d}"),
            "-lgmm",
            &format!("-Wl,-rpath,{d}"),
            "-lm",
        ],
        None,
    );
    assert_eq!(out.code, 0, "compiling examples/gmm/main.c failed: {out:#?}");

    // A generated problem, always; the ADBench d2 K5 file when present.
    let generated = generate_gmm(3, 4, 30, 11);
    let gen_path = dir.join("generated.txt");
    std::fs::write(&gen_path, format_gmm(&generated)).unwrap();
    let mut cases = vec![("generated d3 K4 n30", gen_path, generated)];
    if let Some(p) = data_file("gmm_d2_K5.txt") {
        let inp = read_gmm(&p).expect("readable ADBench file");
        cases.push(("d2 K5", p, inp));
    }
    for (label, path, inp) in cases {
        let (objective, grad) = run_c_driver(&dir, &path);
        let (ref_value, ref_grad) = gmm_gradient(&inp);
        assert_matches(&format!("C {label} objective ({name})"), &[objective], &[ref_value]);
        assert_matches(&format!("C {label} gradient ({name})"), &grad, &ref_grad);
    }
}

/// The GMM example built for aarch64 by every backend (`--target`, the
/// aarch64 C compiler) and run under qemu-aarch64 prints the objective and
/// gradient of the x86-64 build, which equal the hand-derived reference.
#[test]
fn gmm_for_aarch64_under_qemu_matches_x86_64() {
    for tool in ["aarch64-linux-gnu-gcc", "qemu-aarch64", "cc"] {
        if !have(tool) {
            eprintln!(
                "note: no `{tool}`: skipping the aarch64 GMM test (apt-get install gcc-aarch64-linux-gnu qemu-user)"
            );
            return;
        }
    }
    let root = manifest_dir();
    let generated = generate_gmm(4, 3, 25, 5);
    let (ref_value, ref_grad) = gmm_gradient(&generated);
    for backend in compiled() {
        let name = if backend == Backend::Llvm { "llvm" } else { "cranelift" };
        let dir = scratch("gmm", &format!("aarch64_{name}"));
        let input = dir.join("input.txt");
        std::fs::write(&input, format_gmm(&generated)).unwrap();
        let mut results = Vec::new();
        for (triple, cc) in [("x86_64-unknown-linux-gnu", "cc"), ("aarch64-unknown-linux-gnu", "aarch64-linux-gnu-gcc")]
        {
            let sub = dir.join(triple);
            std::fs::create_dir_all(&sub).unwrap();
            let lib = sub.join("libgmm.so");
            let args = [
                "build",
                "examples/gmm.arr",
                "-o",
                lib.to_str().unwrap(),
                "--wrt",
                "alphas,means,icf",
                "--backend",
                name,
                "--target",
                triple,
            ];
            let out = arrayad(&root, &args);
            assert_eq!(out.code, 0, "{name} {triple}: {out:#?}");
            let main_c = root.join("examples/gmm/main.c");
            let cargs = ["-std=c99", "-O2", main_c.to_str().unwrap(), "-o", "gmm", "-I.", "-L.", "-lgmm"];
            let mut cargs: Vec<&str> = cargs.to_vec();
            cargs.extend(["-Wl,-rpath,$ORIGIN", "-lm"]);
            let out = run_in(&sub, cc, &cargs, None);
            assert_eq!(out.code, 0, "{cc}: {out:#?}");
            let exe = sub.join("gmm");
            let out = if triple.starts_with("aarch64") {
                run_in(
                    &sub,
                    "qemu-aarch64",
                    &["-L", "/usr/aarch64-linux-gnu", exe.to_str().unwrap(), input.to_str().unwrap()],
                    None,
                )
            } else {
                run_in(&sub, exe.to_str().unwrap(), &[input.to_str().unwrap()], None)
            };
            assert_eq!(out.code, 0, "{name} {triple} run: {out:#?}");
            let mut lines = out.stdout.lines();
            let value: f64 = lines.next().and_then(|l| l.strip_prefix("objective ")).unwrap().trim().parse().unwrap();
            lines.next();
            let grad: Vec<f64> = lines.map(|l| l.trim().parse().unwrap()).collect();
            assert_matches(&format!("{name} {triple} objective"), &[value], &[ref_value]);
            assert_matches(&format!("{name} {triple} gradient"), &grad, &ref_grad);
            results.push((value, grad));
        }
        assert_matches(&format!("{name}: aarch64 vs x86-64"), &results[1].1, &results[0].1);
        assert_matches(&format!("{name}: aarch64 vs x86-64 objective"), &[results[1].0], &[results[0].0]);
    }
}
