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

fn source() -> String {
    std::fs::read_to_string(manifest_dir().join("examples/gmm.arr")).expect("examples/gmm.arr")
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

fn compile(backend: Backend) -> Module {
    let opts = Options::backend(backend).with_wrt(&["alphas", "means", "icf"]);
    Module::compile_with("examples/gmm.arr", &source(), opts).unwrap_or_else(|e| panic!("gmm.arr: {e}"))
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

    let (v, grad) = f.grad(&args).unwrap_or_else(|e| panic!("{label}: gmm grad failed: {e}"));
    assert_matches(&format!("{label} grad value"), &[v], &[ref_value]);
    assert_eq!(grad.len(), 6);
    assert!(grad[3].is_none() && grad[4].is_none() && grad[5].is_none(), "x, gamma, m are not differentiated");
    let flat: Vec<f64> = grad[..3]
        .iter()
        .flat_map(|g| g.as_ref().and_then(Value::f64_elements).expect("an f64 cotangent").to_vec())
        .collect();
    assert_matches(&format!("{label} gradient"), &flat, &ref_grad);
}

#[test]
fn gmm_generated_small_problem_jit_and_interp() {
    let inp = generate_gmm(3, 4, 30, 7);
    check_api(&compile(Backend::Cranelift), "d3 K4 n30 (cranelift)", &inp);
    check_api(&compile(Backend::Interp), "d3 K4 n30 (interp)", &inp);
}

#[test]
fn gmm_adbench_d2_k5_jit_and_interp() {
    let Some(path) = data_file("gmm_d2_K5.txt") else { return };
    let inp = read_gmm(&path).expect("readable ADBench file");
    check_api(&compile(Backend::Cranelift), "d2 K5 (cranelift)", &inp);
    check_api(&compile(Backend::Interp), "d2 K5 (interp)", &inp);
}

#[test]
fn gmm_adbench_d10_k25_jit_and_interp() {
    let Some(path) = data_file("gmm_d10_K25.txt") else { return };
    let inp = read_gmm(&path).expect("readable ADBench file");
    check_api(&compile(Backend::Cranelift), "d10 K25 (cranelift)", &inp);
    check_api(&compile(Backend::Interp), "d10 K25 (interp)", &inp);
}

#[test]
fn gmm_adbench_d20_k50_and_d64_k100_jit() {
    // The two larger files run on the JIT only (the interpreter would take
    // minutes); the reference gradient is the hand-derived one.
    for name in ["gmm_d20_K50.txt", "gmm_d64_K100.txt"] {
        let Some(path) = data_file(name) else { continue };
        let inp = read_gmm(&path).expect("readable ADBench file");
        check_api(&compile(Backend::Cranelift), &format!("{name} (cranelift)"), &inp);
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
    let dir = scratch("gmm", "c_driver");
    let root = manifest_dir();
    let out = arrayad(
        &root,
        &["build", "examples/gmm.arr", "-o", dir.join("libgmm.so").to_str().unwrap(), "--wrt", "alphas,means,icf"],
    );
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
        assert_matches(&format!("C {label} objective"), &[objective], &[ref_value]);
        assert_matches(&format!("C {label} gradient"), &grad, &ref_grad);
    }
}
