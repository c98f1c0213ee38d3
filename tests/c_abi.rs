//! The C ABI of `arrayad build` (LANGUAGE.md section 8): a shared library
//! built by the CLI, used from a C program compiled with
//! `cc -std=c99 -Wall -Werror`; values, gradients, jvp, vjp, Jacobian,
//! error codes and last-error messages; the header as C++; the library's
//! dynamic dependencies.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use support::{arrayad, assert_close_all, have, run_in, scratch};

const PROGRAM: &str = "\
def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])
def get(x: [n]f64, i: i64) -> f64 = x[i]
def add(x: [n]f64, y: [m]f64) -> [n]f64 = x + y
def count(k: i64) -> f64 = sum(for i < k => 1.0)
def scale(a: f64, v: [n]f64) -> [n]f64 = a * v
def pair(a: f64, p: (f64, i64)) -> (f64, [2]f64) = (a * p.0, [a, f64(p.1)])
def split(x: [n]f64, w: [n]f64, k: i64) -> ([2]f64, i64, f64) = ([x[0] * w[1], x[1] + w[0] * w[0]], k + n, sum(x * w))
";

/// The C driver: prints `key value...` lines that the test parses.
const MAIN_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include "libprog.h"

static void print(const char *key, const double *v, int n) {
    int i;
    printf("%s", key);
    for (i = 0; i < n; i++) printf(" %.17g", v[i]);
    printf("\n");
}

int main(void) {
    const double x[3] = {1.0, 2.0, 3.0};
    const double w[3] = {0.5, -1.0, 2.0};
    const double tx[3] = {1.0, 0.0, -1.0};
    const double tw[3] = {2.0, 2.0, 2.0};
    const double v[3] = {1.0, 2.0, 3.0};
    const double ct3[3] = {1.0, 10.0, 100.0};
    double value = 0, tangent = 0, dx[3], dw[3], out3[3], dv[3], jac[12], da = 0;
    double p0 = 0, p1[2], pjac[6];
    int32_t rc;

    rc = f(3, x, w, &value);
    printf("f_rc %d\n", (int)rc);
    print("f", &value, 1);

    rc = f_grad(3, x, w, &value, dx, dw);
    printf("f_grad_rc %d\n", (int)rc);
    print("f_grad_value", &value, 1);
    print("f_grad_dx", dx, 3);
    print("f_grad_dw", dw, 3);

    rc = f_jvp(3, x, w, tx, tw, &value, &tangent);
    printf("f_jvp_rc %d\n", (int)rc);
    print("f_jvp_value", &value, 1);
    print("f_jvp_tangent", &tangent, 1);

    /* outputs are overwritten, not added to */
    memset(dx, 0x7f, sizeof dx);
    rc = f_vjp(3, x, w, 2.0, &value, dx, dw);
    printf("f_vjp_rc %d\n", (int)rc);
    print("f_vjp_dx", dx, 3);
    print("f_vjp_dw", dw, 3);

    rc = f_jacobian(3, x, w, &value, jac);
    printf("f_jacobian_rc %d\n", (int)rc);
    print("f_jacobian", jac, 6);

    rc = scale_vjp(3, 2.0, v, ct3, out3, &da, dv);
    printf("scale_vjp_rc %d\n", (int)rc);
    print("scale_vjp_value", out3, 3);
    print("scale_vjp_da", &da, 1);
    print("scale_vjp_dv", dv, 3);

    rc = scale_jacobian(3, 2.0, v, out3, jac);
    printf("scale_jacobian_rc %d\n", (int)rc);
    print("scale_jacobian", jac, 12);

    rc = pair_jacobian(2.0, 3.0, 4, &p0, p1, pjac);
    printf("pair_jacobian_rc %d\n", (int)rc);
    print("pair_value", &p0, 1);
    print("pair_value1", p1, 2);
    print("pair_jacobian", pjac, 6);

    {
        /* result leaves [2]f64, i64, f64: 3 rows <= 6 columns (reverse mode) */
        double s0[2], s2 = 0, sjac[18];
        int64_t s1 = 0;
        rc = split_jacobian(3, x, w, 7, s0, &s1, &s2, sjac);
        printf("split_jacobian_rc %d\n", (int)rc);
        print("split_value0", s0, 2);
        printf("split_value1 %lld\n", (long long)s1);
        print("split_value2", &s2, 1);
        print("split_jacobian", sjac, 18);
    }

    rc = f_jacobian(3, x, w, &value, NULL);
    printf("f_jacobian_null_rc %d\n", (int)rc);
    printf("f_jacobian_null_msg %s\n", prog_last_error());

    rc = get_jacobian(3, x, 5, &value, jac);
    printf("get_jacobian_oob_rc %d\n", (int)rc);
    printf("get_jacobian_oob_msg %s\n", prog_last_error());

    rc = get(3, x, 2, &value);
    printf("get_ok_rc %d\n", (int)rc);
    print("get_ok", &value, 1);

    rc = get(3, x, 5, &value);
    printf("get_oob_rc %d\n", (int)rc);
    printf("get_oob_msg %s\n", prog_last_error());
    printf("get_oob_code_is_macro %d\n", rc == PROG_ERR_INDEX_OUT_OF_BOUNDS);

    rc = get_grad(3, x, -1, &value, dx);
    printf("get_grad_oob_rc %d\n", (int)rc);

    rc = add(3, 2, x, v, out3);
    printf("add_mismatch_rc %d\n", (int)rc);
    printf("add_mismatch_msg %s\n", prog_last_error());

    rc = count(-1, &value);
    printf("count_negative_rc %d\n", (int)rc);
    printf("count_negative_msg %s\n", prog_last_error());

    rc = count(4, &value);
    printf("count_ok_rc %d\n", (int)rc);
    print("count_ok", &value, 1);
    return 0;
}
"#;

/// Builds `libprog.so` + `libprog.h` in a scratch directory and compiles
/// and runs the C driver; returns its output lines by key.
struct Built {
    dir: PathBuf,
}

/// The backends of this build: `cranelift`, and `llvm` with the feature.
fn backends() -> Vec<&'static str> {
    if cfg!(feature = "llvm") {
        vec!["cranelift", "llvm"]
    } else {
        vec!["cranelift"]
    }
}

fn build(name: &str, backend: &str) -> Option<Built> {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C ABI test");
        return None;
    }
    let dir = scratch("c_abi", name);
    std::fs::write(dir.join("prog.arr"), PROGRAM).unwrap();
    // The generated C compiles without a warning (gcc's warnings cost time
    // quadratic in the size of the file: every one rereads its lines).
    let werror = dir.join("cc-werror");
    std::fs::write(&werror, "#!/bin/sh\nexec cc -Wall -Werror \"$@\"\n").unwrap();
    std::fs::set_permissions(&werror, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cc = werror.to_str().unwrap();
    let out = arrayad(&dir, &["build", "prog.arr", "-o", "libprog.so", "--backend", backend, "--cc", cc]);
    assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
    assert!(dir.join("libprog.so").is_file() && dir.join("libprog.h").is_file(), "build wrote no library/header");
    Some(Built { dir })
}

/// Compiles the C program `main` in `dir` against `lib<lib>.so` there,
/// into `dir/main`.
fn compile_main(dir: &Path, main: &str, lib: &str) {
    std::fs::write(dir.join("main.c"), main).unwrap();
    let out = run_in(
        dir,
        "cc",
        &[
            "-std=c99",
            "-Wall",
            "-Werror",
            "main.c",
            "-o",
            "main",
            "-I.",
            "-L.",
            &format!("-l{lib}"),
            "-Wl,-rpath,$ORIGIN",
            "-lm",
        ],
        None,
    );
    assert_eq!(out.code, 0, "cc failed: {out:#?}");
}

fn compile_and_run(dir: &Path, main: &str, lib: &str) -> HashMap<String, String> {
    compile_main(dir, main, lib);
    let out = run_in(dir, dir.join("main").to_str().unwrap(), &[], None);
    assert_eq!(out.code, 0, "the C program failed: {out:#?}");
    key_values(&out.stdout)
}

/// The `KEY VALUE` lines of a C program's output.
fn key_values(stdout: &str) -> HashMap<String, String> {
    stdout.lines().filter_map(|l| l.split_once(' ').map(|(k, v)| (k.to_string(), v.to_string()))).collect()
}

fn numbers(lines: &HashMap<String, String>, key: &str) -> Vec<f64> {
    let line = lines.get(key).unwrap_or_else(|| panic!("no line `{key}` in the C output"));
    line.split_whitespace().map(|t| t.parse().unwrap_or_else(|_| panic!("{key}: not a number: {t}"))).collect()
}

fn code(lines: &HashMap<String, String>, key: &str) -> i32 {
    lines.get(key).unwrap_or_else(|| panic!("no line `{key}`")).trim().parse().unwrap()
}

#[test]
fn c_program_gets_values_derivatives_and_errors() {
    for backend in backends() {
        c_program_gets_values_derivatives_and_errors_on(backend);
    }
}

fn c_program_gets_values_derivatives_and_errors_on(backend: &str) {
    let Some(b) = build(&format!("main-{backend}"), backend) else { return };
    let lines = compile_and_run(&b.dir, MAIN_C, "prog");
    let e1 = 1f64.exp();
    let value = 0.5 - 2.0 + 6.0 + e1;
    let grad_x = [0.5 + e1, -1.0, 2.0];
    let grad_w = [1.0, 2.0, 3.0];

    for key in ["f_rc", "f_grad_rc", "f_jvp_rc", "f_vjp_rc", "f_jacobian_rc", "scale_vjp_rc", "scale_jacobian_rc"] {
        assert_eq!(code(&lines, key), 0, "{key}: {}", lines.get(&key.replace("_rc", "_msg")).map_or("", |s| s));
    }
    assert_close_all("f", &numbers(&lines, "f"), &[value], 1e-15);
    assert_close_all("f_grad value", &numbers(&lines, "f_grad_value"), &[value], 1e-15);
    assert_close_all("f_grad dx", &numbers(&lines, "f_grad_dx"), &grad_x, 1e-15);
    assert_close_all("f_grad dw", &numbers(&lines, "f_grad_dw"), &grad_w, 1e-15);
    assert_close_all("f_jvp value", &numbers(&lines, "f_jvp_value"), &[value], 1e-15);
    let tangent = grad_x[0] - grad_x[2] + 2.0 * (grad_w[0] + grad_w[1] + grad_w[2]);
    assert_close_all("f_jvp tangent", &numbers(&lines, "f_jvp_tangent"), &[tangent], 1e-14);
    let twice = |v: &[f64]| v.iter().map(|x| 2.0 * x).collect::<Vec<_>>();
    assert_close_all("f_vjp dx", &numbers(&lines, "f_vjp_dx"), &twice(&grad_x), 1e-15);
    assert_close_all("f_vjp dw", &numbers(&lines, "f_vjp_dw"), &twice(&grad_w), 1e-15);
    let jac: Vec<f64> = grad_x.iter().chain(&grad_w).copied().collect();
    assert_close_all("f_jacobian", &numbers(&lines, "f_jacobian"), &jac, 1e-15);

    // scale(a, v) = a * v: vjp with ct = (1, 10, 100)
    assert_close_all("scale value", &numbers(&lines, "scale_vjp_value"), &[2.0, 4.0, 6.0], 0.0);
    assert_close_all("scale da", &numbers(&lines, "scale_vjp_da"), &[1.0 + 20.0 + 300.0], 0.0);
    assert_close_all("scale dv", &numbers(&lines, "scale_vjp_dv"), &[2.0, 20.0, 200.0], 0.0);
    // Jacobian [3 rows][4 cols]: column 0 is v, then 2 * identity.
    #[rustfmt::skip]
    let want = [1.0, 2.0, 0.0, 0.0,
                2.0, 0.0, 2.0, 0.0,
                3.0, 0.0, 0.0, 2.0];
    assert_close_all("scale_jacobian", &numbers(&lines, "scale_jacobian"), &want, 0.0);
    // Tuples: pair(a, (p0, p1)) = (a p0, [a, p1]); columns a, p0.
    assert_eq!(code(&lines, "pair_jacobian_rc"), 0);
    assert_close_all("pair value", &numbers(&lines, "pair_value"), &[6.0], 0.0);
    assert_close_all("pair value 1", &numbers(&lines, "pair_value1"), &[2.0, 4.0], 0.0);
    assert_close_all("pair_jacobian", &numbers(&lines, "pair_jacobian"), &[3.0, 2.0, 1.0, 0.0, 0.0, 0.0], 0.0);

    // Several result leaves, one of them not f64: the one-hot cotangent rows
    // of the reverse-mode Jacobian split across the f64 leaves; columns x, w.
    assert_eq!(code(&lines, "split_jacobian_rc"), 0);
    assert_close_all("split value 0", &numbers(&lines, "split_value0"), &[-1.0, 2.25], 0.0);
    assert_eq!(code(&lines, "split_value1"), 10);
    assert_close_all("split value 2", &numbers(&lines, "split_value2"), &[value - e1], 1e-15);
    #[rustfmt::skip]
    let want = [-1.0, 0.0, 0.0, 0.0, 1.0, 0.0,
                0.0, 1.0, 0.0, 1.0, 0.0, 0.0,
                0.5, -1.0, 2.0, 1.0, 2.0, 3.0];
    assert_close_all("split_jacobian", &numbers(&lines, "split_jacobian"), &want, 0.0);
    // A null Jacobian buffer; a run-time error in the forward pass.
    assert_eq!(code(&lines, "f_jacobian_null_rc"), 9, "invalid argument is code 9");
    assert!(lines["f_jacobian_null_msg"].contains("`jac`"), "{}", lines["f_jacobian_null_msg"]);
    assert_eq!(code(&lines, "get_jacobian_oob_rc"), 1);
    let msg = &lines["get_jacobian_oob_msg"];
    assert!(msg.contains("prog.arr:2:") && msg.contains("index out of bounds") && msg.contains('5'), "{msg}");

    // Errors: codes per kind and a message with the location.
    assert_eq!(code(&lines, "get_ok_rc"), 0);
    assert_close_all("get", &numbers(&lines, "get_ok"), &[3.0], 0.0);
    assert_eq!(code(&lines, "get_oob_rc"), 1, "index out of bounds is code 1");
    assert_eq!(code(&lines, "get_oob_code_is_macro"), 1);
    let msg = &lines["get_oob_msg"];
    assert!(msg.contains("prog.arr:2:") && msg.contains("index out of bounds") && msg.contains('5'), "{msg}");
    assert_eq!(code(&lines, "get_grad_oob_rc"), 1);
    assert_eq!(code(&lines, "add_mismatch_rc"), 3, "size mismatch is code 3");
    let msg = &lines["add_mismatch_msg"];
    assert!(msg.contains("prog.arr:3:") && msg.contains("size mismatch"), "{msg}");
    assert_eq!(code(&lines, "count_negative_rc"), 5, "negative size is code 5");
    let msg = &lines["count_negative_msg"];
    assert!(msg.contains("prog.arr:4:") && msg.contains("negative size"), "{msg}");
    assert_eq!(code(&lines, "count_ok_rc"), 0);
    assert_close_all("count", &numbers(&lines, "count_ok"), &[4.0], 0.0);
}

#[test]
fn header_compiles_as_cxx() {
    let Some(b) = build("cxx", "cranelift") else { return };
    if !have("c++") {
        eprintln!("note: no C++ compiler `c++`: skipping");
        return;
    }
    let out = run_in(&b.dir, "c++", &["-fsyntax-only", "-Wall", "-Werror", "-x", "c++", "libprog.h"], None);
    assert_eq!(out.code, 0, "the header does not compile as C++: {out:#?}");
    // And as strict C99 on its own.
    let out = run_in(
        &b.dir,
        "cc",
        &["-fsyntax-only", "-std=c99", "-pedantic", "-Wall", "-Werror", "-x", "c", "libprog.h"],
        None,
    );
    assert_eq!(out.code, 0, "the header does not compile as C99: {out:#?}");
}

#[test]
fn build_options_select_exports_wrt_name_and_header() {
    let Some(b) = build("options", "cranelift") else { return };
    let dir = &b.dir;
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let out = arrayad(
        dir,
        &[
            "build",
            "prog.arr",
            "-o",
            "out/libother.so",
            "--export",
            "f",
            "--wrt",
            "w",
            "--name",
            "mymod",
            "--header",
            "out/api.h",
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let header = std::fs::read_to_string(dir.join("out/api.h")).expect("the header is where --header says");
    assert!(header.contains("mymod_last_error"), "{header}");
    assert!(!header.contains("get("), "--export f exported more: {header}");
    // Only w is active: one cotangent output.
    let grad_line = header.lines().find(|l| l.contains("f_grad(")).expect("f_grad declared");
    let outputs = grad_line.matches("double *").count() - grad_line.matches("const double *").count();
    assert_eq!(outputs, 2, "value and d_w only: {grad_line}");
    let main = r#"
#include <stdio.h>
#include "api.h"
int main(void) {
    const double x[2] = {1.0, 2.0}, w[2] = {3.0, 4.0};
    double value, dw[2];
    int32_t rc = f_grad(2, x, w, &value, dw);
    printf("rc %d\nvalue %.17g\ndw %.17g %.17g\n", (int)rc, value, dw[0], dw[1]);
    return 0;
}
"#;
    let lines = compile_and_run(&dir.join("out"), main, "other");
    assert_eq!(code(&lines, "rc"), 0);
    assert_close_all("value", &numbers(&lines, "value"), &[3.0 + 8.0 + 1f64.exp()], 1e-15);
    assert_close_all("dw", &numbers(&lines, "dw"), &[1.0, 2.0], 0.0);

    // Default header path and module name.
    let out = arrayad(dir, &["build", "prog.arr", "-o", "out/libthird.so", "--export", "scale"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let header = std::fs::read_to_string(dir.join("out/libthird.h")).expect("default header OUT.h");
    assert!(header.contains("third_last_error"), "{header}");
    // Only the entries asked for are built and declared, and their C
    // compiles without a warning (no table left unused).
    let werror = dir.join("cc-werror");
    let entries = |list: &str, lib: &str| -> String {
        let so = format!("out/lib{lib}.so");
        let args = ["build", "prog.arr", "-o", &so, "--export", "f,scale", "--entries", list];
        let out = arrayad(dir, &[&args[..], &["--cc", werror.to_str().unwrap()]].concat());
        assert_eq!(out.code, 0, "{out:#?}");
        std::fs::read_to_string(dir.join(format!("out/lib{lib}.h"))).unwrap()
    };
    let declared = |header: &str| -> Vec<String> {
        let mut names: Vec<String> = header
            .lines()
            .filter(|l| l.starts_with("int32_t "))
            .filter_map(|l| l.trim_start_matches("int32_t ").split('(').next().map(str::to_string))
            .collect();
        names.sort();
        names
    };
    assert_eq!(declared(&entries("value", "values")), ["f", "scale"]);
    // grad and hvp exist for the scalar `f` only.
    assert_eq!(declared(&entries("value,grad,hvp", "grads")), ["f", "f_grad", "f_hvp", "scale"]);
    assert_eq!(declared(&entries("jvp,jacobian", "fwd")), ["f_jacobian", "f_jvp", "scale_jacobian", "scale_jvp"]);
    let main = r#"
#include <stdio.h>
#include "libgrads.h"
int main(void) {
    const double x[2] = {1.0, 2.0}, w[2] = {3.0, 4.0}, tx[2] = {1.0, 0.0}, tw[2] = {0.0, 0.0};
    double value, dx[2], dw[2], hx[2], hw[2];
    int32_t rc = f_grad(2, x, w, &value, dx, dw);
    int32_t rh = f_hvp(2, x, w, tx, tw, &value, dx, dw, hx, hw);
    printf("rc %d\nrh %d\ndw %.17g %.17g\nhx %.17g %.17g\n", (int)rc, (int)rh, dw[0], dw[1], hx[0], hx[1]);
    return 0;
}
"#;
    let lines = compile_and_run(&dir.join("out"), main, "grads");
    assert_eq!((code(&lines, "rc"), code(&lines, "rh")), (0, 0));
    assert_close_all("dw", &numbers(&lines, "dw"), &[1.0, 2.0], 0.0);
    // d2/dx0^2 of sum(x * w) + exp(x[0]) is exp(1).
    assert_close_all("hx", &numbers(&lines, "hx"), &[1f64.exp(), 0.0], 1e-15);
    let out = arrayad(dir, &["build", "prog.arr", "-o", "x.so", "--export", "scale", "--entries", "grad"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("not one f64"), "{}", out.stderr);
    assert_eq!(arrayad(dir, &["build", "prog.arr", "-o", "x.so", "--entries", "value,nope"]).code, 2);

    // Error cases: unknown export, unknown --wrt, compile error.
    assert_eq!(arrayad(dir, &["build", "prog.arr", "-o", "x.so", "--export", "nope"]).code, 2);
    assert_eq!(arrayad(dir, &["build", "prog.arr", "-o", "x.so", "--wrt", "nope"]).code, 2);
    std::fs::write(dir.join("bad.arr"), "def f(x: f64) -> f64 = y\n").unwrap();
    assert_eq!(arrayad(dir, &["build", "bad.arr", "-o", "x.so"]).code, 1);
}

#[test]
fn library_needs_only_libc_and_libm() {
    for backend in backends() {
        library_needs_only_libc_and_libm_on(backend);
    }
}

fn library_needs_only_libc_and_libm_on(backend: &str) {
    let Some(b) = build(&format!("needed-{backend}"), backend) else { return };
    if !have("readelf") {
        eprintln!("note: no readelf: skipping");
        return;
    }
    let out = run_in(&b.dir, "readelf", &["-d", "libprog.so"], None);
    assert_eq!(out.code, 0, "{out:#?}");
    let needed: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1).and_then(|s| s.split(']').next()).map(str::to_string))
        .collect();
    let allowed = |n: &str| n.starts_with("libc.so") || n.starts_with("libm.so");
    let extra: Vec<&String> = needed.iter().filter(|n| !allowed(n)).collect();
    assert!(extra.is_empty(), "libprog.so needs more than libc and libm: {extra:?} (all: {needed:?})");
}

/// Four threads call the library at once, each with its own data and its
/// own failing calls: values, gradients and last-error messages stay per
/// thread (each thread reuses its own call context).
const THREADS_C: &str = r#"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "libprog.h"

static int worker_ok[4];

static void *worker(void *arg) {
    int t = *(const int *)arg, it, i, ok = 1;
    for (it = 0; it < 300 && ok; it++) {
        double x[3], w[3], value, dx[3], dw[3], got;
        for (i = 0; i < 3; i++) {
            x[i] = 0.1 * (t + 1) + 0.01 * it + i;
            w[i] = 0.5 * i - 0.25 * t;
        }
        if (f_grad(3, x, w, &value, dx, dw) != 0) ok = 0;
        double want = x[0] * w[0] + x[1] * w[1] + x[2] * w[2] + exp(x[0]);
        if (fabs(value - want) > 1e-12 * fabs(want)) ok = 0;
        if (fabs(dx[0] - (w[0] + exp(x[0]))) > 1e-12 * fabs(dx[0])) ok = 0;
        for (i = 0; i < 3; i++) if (dw[i] != x[i]) ok = 0;
        if (it % 3 == t % 3) {
            /* An out-of-bounds index: this thread's message names it. */
            if (get(3, x, 7 + t, &got) != PROG_ERR_INDEX_OUT_OF_BOUNDS) ok = 0;
            char expect[32];
            snprintf(expect, sizeof expect, "index %d", 7 + t);
            if (!strstr(prog_last_error(), expect)) ok = 0;
        }
        if (get(3, x, 1, &got) != 0 || got != x[1]) ok = 0;
    }
    worker_ok[t] = ok;
    return NULL;
}

int main(void) {
    pthread_t th[4];
    int ids[4] = {0, 1, 2, 3}, t, all = 1;
    for (t = 0; t < 4; t++) pthread_create(&th[t], NULL, worker, &ids[t]);
    for (t = 0; t < 4; t++) pthread_join(th[t], NULL);
    for (t = 0; t < 4; t++) all &= worker_ok[t];
    printf("threads_ok %d\n", all);
    return 0;
}
"#;

#[test]
fn concurrent_calls_from_threads_are_independent() {
    for backend in backends() {
        concurrent_calls_from_threads_are_independent_on(backend);
    }
}

fn concurrent_calls_from_threads_are_independent_on(backend: &str) {
    let Some(b) = build(&format!("threads-{backend}"), backend) else { return };
    let lines = compile_and_run(&b.dir, THREADS_C, "prog");
    assert_eq!(code(&lines, "threads_ok"), 1, "a thread saw a wrong value or message");
}

// ---------------------------------------------------------------------------
// Robustness of the C ABI path: outputs that are also inputs, failing calls
// in a loop (no leak, the kept context is reset), threads that exit, unload
// with a live thread, names that would interpose the C library.
// ---------------------------------------------------------------------------

const ROBUST: &str = "\
def tape(x: f64, k: i64) -> f64 = loop s = x for i < k do sin(s) * 1.0000001
def fail(x: [n]f64, i: i64) -> f64 = loop s = 0.0 for j < 100 do s + exp(x[(j * i) % n])
def sw(x: [n]f64, y: [n]f64) -> ([n]f64, [n]f64) = (y, x)
def two(x: [n]f64) -> ([n]f64, [n]f64) = (x * 2.0, x)
def fw(x: [n]f64, k: i64) -> ([n]f64, i64, bool, [n]f64) = (x * 2.0, k, k > 0, x * x)
def mat(x: [n]f64, k: i64) -> f64 = let a = for i < k => x[0] * f64(i) in a[k - 1] + a[0]
";

/// Builds `librob.so` from [`ROBUST`] in a scratch directory.
fn build_robust(name: &str, backend: &str) -> Option<PathBuf> {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C ABI test");
        return None;
    }
    let dir = scratch("c_abi", name);
    std::fs::write(dir.join("rob.arr"), ROBUST).unwrap();
    let mut args = vec!["build", "rob.arr", "-o", "librob.so", "--backend", backend];
    // Valgrind decodes no AVX-512 instruction, which LLVM may use for this
    // machine's CPU (the vector jvp's lanes): the library for it is
    // built for AVX2 at most.
    if have("valgrind") && cfg!(target_arch = "x86_64") {
        args.extend_from_slice(&["--target-cpu", "x86-64-v3"]);
    }
    let out = arrayad(&dir, &args);
    assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
    Some(dir)
}

/// Compiles `main.c` (with `extra` flags) against librob.so and runs it,
/// under valgrind (no invalid access, no definitely lost block) when it is
/// installed; returns its standard output, which must end with `OK`.
fn run_robust(dir: &Path, main: &str, extra: &[&str]) -> String {
    std::fs::write(dir.join("main.c"), main).unwrap();
    let mut args = vec!["-std=c99", "-Wall", "-Werror", "-pthread", "main.c", "-o", "main", "-I.", "-L.", "-lrob"];
    args.extend_from_slice(&["-Wl,-rpath,$ORIGIN", "-lm"]);
    args.extend_from_slice(extra);
    let out = run_in(dir, "cc", &args, None);
    assert_eq!(out.code, 0, "cc failed: {out:#?}");
    let main = dir.join("main");
    let out = if have("valgrind") {
        let vg = ["-q", "--error-exitcode=9", "--leak-check=full", "--errors-for-leak-kinds=definite"];
        let mut args: Vec<&str> = vg.to_vec();
        args.push(main.to_str().unwrap());
        run_in(dir, "valgrind", &args, None)
    } else {
        run_in(dir, main.to_str().unwrap(), &[], None)
    };
    assert_eq!(out.code, 0, "the C program failed: {out:#?}");
    assert!(out.stdout.trim_end().ends_with("OK"), "{out:#?}");
    out.stdout
}

const CHECK_C: &str = r#"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "librob.h"
static int fails = 0;
#define CHECK(c) do { if (!(c)) { printf("FAIL line %d: %s (last error: %s)\n", __LINE__, #c, rob_last_error()); fails++; } } while (0)
"#;

/// An output buffer that is also an input (an in-place call) gets the value
/// of the call: results that still point into the caller's memory are not
/// read after an earlier output overwrote it, and the forward-mode Jacobian
/// does not read inputs that its primal outputs overwrote.
#[test]
fn outputs_may_be_inputs_in_place() {
    for backend in backends() {
        outputs_may_be_inputs_in_place_on(backend);
    }
}

fn outputs_may_be_inputs_in_place_on(backend: &str) {
    let Some(dir) = build_robust(&format!("in_place-{backend}"), backend) else { return };
    let main = format!(
        "{CHECK_C}{}",
        r#"
int main(void) {
    double x[3] = {1, 2, 3}, y[3] = {10, 20, 30}, o[3], jac[18], big[21], v;
    int64_t k = 0;
    bool b = 0;
    int i;
    /* (y, x) into (x, y): swapped */
    CHECK(sw(3, x, y, x, y) == 0);
    CHECK(x[0] == 10 && x[2] == 30 && y[0] == 1 && y[2] == 3);
    /* (2x, x) with out0 = x: out1 is the old x */
    x[0] = 1; x[1] = 2; x[2] = 3;
    CHECK(two(3, x, x, o) == 0);
    CHECK(x[0] == 2 && x[2] == 6 && o[0] == 1 && o[2] == 3);
    x[0] = 1; x[1] = 2; x[2] = 3;
    CHECK(two_vjp(3, x, y, y, x, o, y) == 0);
    CHECK(x[0] == 2 && x[2] == 6 && o[0] == 1 && o[2] == 3);
    /* forward-mode Jacobian (6 rows > 3 columns) with out3 = x */
    x[0] = 1; x[1] = 2; x[2] = 3;
    CHECK(fw_jacobian(3, x, 7, o, &k, &b, x, jac) == 0);
    CHECK(k == 7 && b && o[0] == 2 && o[2] == 6 && x[0] == 1 && x[1] == 4 && x[2] == 9);
    for (i = 0; i < 3; i++) CHECK(jac[i * 3 + i] == 2 && jac[9 + i * 3 + i] == 2 * (i + 1));
    /* ... and a Jacobian that overlaps the input */
    big[0] = 1; big[1] = 2; big[2] = 3;
    CHECK(fw_jacobian(3, big, 7, o, &k, &b, y, big + 2) == 0);
    CHECK(y[0] == 1 && y[1] == 4 && y[2] == 9 && o[2] == 6);
    for (i = 0; i < 3; i++) CHECK(big[2 + i * 3 + i] == 2 && big[2 + 9 + i * 3 + i] == 2 * (i + 1));
    /* a byte count of 2^63 or more is reported as an overflow, not as a
       negative number of bytes */
    CHECK(mat(3, y, (int64_t)1 << 60, &v) == ROB_ERR_OUT_OF_MEMORY);
    CHECK(strstr(rob_last_error(), "rob.arr:6:") && strstr(rob_last_error(), "overflows"));
    CHECK(!strchr(rob_last_error(), '-'));
    printf(fails ? "FAILED\n" : "OK\n");
    return 0;
}
"#
    );
    run_robust(&dir, &main, &[]);
}

/// 10,000 failing calls through every entry point (index out of bounds from
/// data, division by zero) on one thread, each followed by a good call that
/// must see a clean context (tape, arena, error); then threads that call and
/// exit, some of them failing: under valgrind, no definitely lost block
/// (each exiting thread frees its kept context, arena chunks included).
#[test]
fn failing_calls_and_exiting_threads_leak_nothing() {
    for backend in backends() {
        failing_calls_and_exiting_threads_leak_nothing_on(backend);
    }
}

fn failing_calls_and_exiting_threads_leak_nothing_on(backend: &str) {
    let Some(dir) = build_robust(&format!("failing_calls-{backend}"), backend) else { return };
    let main = format!(
        "{CHECK_C}{}",
        r#"
static int thread_fails[8];
static void *worker(void *arg) {
    int t = *(const int *)arg, it;
    double x[4] = {0.5, 1.0, 1.5, 2.0}, v, d[4], want = 0;
    for (it = 0; it < 100; it++) want += exp(x[(it * 1) % 4]);
    for (it = 0; it < 50; it++) {
        if (t % 2) {
            if (fail_grad(4, x, -1, &v, d) != ROB_ERR_INDEX_OUT_OF_BOUNDS) thread_fails[t]++;
            if (!strstr(rob_last_error(), "rob.arr:2:")) thread_fails[t]++;
        }
        if (fail_grad(4, x, 1, &v, d) != 0 || fabs(v - want) > 1e-12 * want) thread_fails[t]++;
        if (tape_grad(0.5, 2000, &v, d) != 0) thread_fails[t]++;
    }
    return NULL;
}
int main(void) {
    double x[4] = {0.5, 1.0, 1.5, 2.0}, v, d[4], jac[4], want = 0, g0 = 0;
    pthread_t th[8];
    int ids[8], it, t;
    for (it = 0; it < 100; it++) want += exp(x[it % 4]);
    for (it = 0; it < 100; it += 4) g0 += exp(x[0]);
    for (it = 0; it < 10000; it++) {
        int which = it % 5;
        int32_t rc = which == 0 ? fail_grad(4, x, -1, &v, d)
                   : which == 1 ? fail_vjp(4, x, -1, 1.0, &v, d)
                   : which == 2 ? fail_jvp(4, x, -1, x, &v, jac)
                   : which == 3 ? fail_jacobian(4, x, -1, &v, jac)
                   : fail_grad(0, x, 1, &v, d);
        if (rc != (which == 4 ? ROB_ERR_DIVISION_BY_ZERO : ROB_ERR_INDEX_OUT_OF_BOUNDS)) {
            CHECK(0);
            break;
        }
        if (it % 1000 == 0) CHECK(strstr(rob_last_error(), "rob.arr:2:") != NULL);
        if (it % 10 == 0) {
            CHECK(fail_grad(4, x, 1, &v, d) == 0 && fabs(v - want) <= 1e-12 * want);
            CHECK(fabs(d[0] - g0) <= 1e-12 * g0);
            CHECK(tape_jacobian(0.5, 300, &v, jac) == 0);
        }
    }
    for (t = 0; t < 8; t++) {
        ids[t] = t;
        pthread_create(&th[t], NULL, worker, &ids[t]);
    }
    for (t = 0; t < 8; t++) pthread_join(th[t], NULL);
    for (t = 0; t < 8; t++) CHECK(thread_fails[t] == 0);
    printf(fails ? "FAILED\n" : "OK\n");
    return 0;
}
"#
    );
    run_robust(&dir, &main, &[]);
}

/// The library is unloaded (dlclose) while a thread that called it is still
/// alive: when that thread exits later, no destructor of the unloaded code
/// may run (it used to crash with SIGSEGV).
#[test]
fn unloading_with_a_live_thread_does_not_crash() {
    for backend in backends() {
        unloading_with_a_live_thread_does_not_crash_on(backend);
    }
}

fn unloading_with_a_live_thread_does_not_crash_on(backend: &str) {
    let Some(dir) = build_robust(&format!("dlclose-{backend}"), backend) else { return };
    let main = r#"
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
typedef int32_t (*tape_fn)(double, int64_t, double *);
static tape_fn fn;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int called = 0, closed = 0, ok = 1;
static void *worker(void *arg) {
    double v;
    (void)arg;
    if (fn(0.5, 100, &v) != 0) ok = 0;
    pthread_mutex_lock(&mu);
    called = 1;
    pthread_cond_broadcast(&cv);
    while (!closed) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}
int main(void) {
    pthread_t t;
    double v;
    void *h = dlopen("./librob.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    *(void **)&fn = dlsym(h, "tape");
    if (!fn || fn(0.5, 100, &v) != 0) return 1;
    pthread_create(&t, NULL, worker, NULL);
    pthread_mutex_lock(&mu);
    while (!called) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    if (dlclose(h) != 0) return 1;
    pthread_mutex_lock(&mu);
    closed = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    printf(ok ? "OK\n" : "FAILED\n");
    return 0;
}
"#;
    std::fs::write(dir.join("main.c"), main).unwrap();
    let args = ["-std=c99", "-Wall", "-Werror", "-pthread", "main.c", "-o", "main", "-ldl"];
    let out = run_in(&dir, "cc", &args, None);
    assert_eq!(out.code, 0, "cc failed: {out:#?}");
    let out = run_in(&dir, dir.join("main").to_str().unwrap(), &[], None);
    assert_eq!(out.code, 0, "the C program failed (crashed at thread exit?): {out:#?}");
    assert!(out.stdout.contains("OK"), "{out:#?}");
}

/// An export named like a function of the C library (or of the runtime, or
/// reserved to the C implementation) would interpose it in the process: the
/// runtime's own `lgamma_r` call reached the wrapper `lgamma_r(double,
/// double *)`, which wrote a double over an int on the caller's stack.
/// Such names are a build error; leaving them out with --export works.
#[test]
fn exports_that_would_interpose_the_c_library_are_rejected() {
    if !have("cc") {
        return;
    }
    let dir = scratch("c_abi", "reserved_names");
    for name in ["lgamma_r", "memset", "free", "sqrtf", "main", "__cxa_finalize", "_Exit", "arrayad_invoke"] {
        let src = format!("def {name}(x: f64) -> f64 = x * 2.0\ndef g(x: f64) -> f64 = lgamma(x)\n");
        std::fs::write(dir.join("n.arr"), src).unwrap();
        let out = arrayad(&dir, &["build", "n.arr", "-o", "libn.so"]);
        assert_ne!(out.code, 0, "{name}: {out:#?}");
        assert!(out.stderr.contains(&format!("`{name}` cannot be exported")), "{name}: {out:#?}");
        let out = arrayad(&dir, &["build", "n.arr", "-o", "libn.so", "--export", "g"]);
        assert_eq!(out.code, 0, "{name}: {out:#?}");
    }
    // A name that only looks similar is fine.
    std::fs::write(dir.join("ok.arr"), "def memset2(x: f64) -> f64 = x\ndef timef(x: f64) -> f64 = x\n").unwrap();
    let out = arrayad(&dir, &["build", "ok.arr", "-o", "libok.so"]);
    assert_eq!(out.code, 0, "{out:#?}");
    // Parameters and sizes named like the wrappers' locals, globals and
    // macros get other C names (they used to break the build).
    let src = "def f(out: f64, ctx: f64, sizes: [in_]f64, arrayad_w_one: f64, ARRAYAD_F64: f64) -> f64 =\n  \
               out + ctx + sizes[0] + arrayad_w_one + ARRAYAD_F64\n\
               def g(x: [ctx]f64, y: [sizes]f64) -> f64 = x[0] + y[0]\n";
    std::fs::write(dir.join("names.arr"), src).unwrap();
    let out = arrayad(&dir, &["build", "names.arr", "-o", "libnames.so"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let main = r#"
#include <stdio.h>
#include "libnames.h"
int main(void) {
    double s[2] = {3, 4}, v = 0, d[4], ds[2];
    int ok = f(2, 1.0, 2.0, s, 4.0, 5.0, &v) == 0 && v == 15.0;
    ok = ok && f_grad(2, 1.0, 2.0, s, 4.0, 5.0, &v, &d[0], &d[1], ds, &d[2], &d[3]) == 0;
    ok = ok && v == 15.0 && d[0] == 1.0 && ds[0] == 1.0 && ds[1] == 0.0 && d[3] == 1.0;
    ok = ok && g(1, 2, s, s, &v) == 0 && v == 6.0;
    printf("names_ok %d\n", ok);
    return 0;
}
"#;
    let lines = compile_and_run(&dir, main, "names");
    assert_eq!(code(&lines, "names_ok"), 1);
}

// ---------------------------------------------------------------------------
// Cross-compilation: the same library built for aarch64 (every backend),
// the C test program compiled by the aarch64 C compiler and run under
// qemu-aarch64, prints what the x86-64 build prints.
// ---------------------------------------------------------------------------

/// The aarch64 tools, or a note saying which one is missing.
fn aarch64_tools() -> Option<(&'static str, &'static str)> {
    // Probed once: the tests that use the tools run at the same time, and
    // each probe would empty the other's scratch directory.
    static TOOLS: std::sync::OnceLock<Option<(&'static str, &'static str)>> = std::sync::OnceLock::new();
    *TOOLS.get_or_init(probe_aarch64_tools)
}

fn probe_aarch64_tools() -> Option<(&'static str, &'static str)> {
    for tool in ["aarch64-linux-gnu-gcc", "qemu-aarch64"] {
        if !have(tool) {
            eprintln!(
                "note: no `{tool}`: skipping the aarch64 cross-compilation test \
                 (apt-get install gcc-aarch64-linux-gnu qemu-user)"
            );
            return None;
        }
    }
    // The cross compiler alone has no C library for its target: its headers
    // and crt files come with libc6-dev-arm64-cross (only a Recommends of
    // gcc-aarch64-linux-gnu). A compiler that is present but cannot build a
    // program is a broken install, not a reason to skip.
    let dir = scratch("c_abi", "aarch64-probe");
    std::fs::write(
        dir.join("probe.c"),
        "#include <stdio.h>\n#include <math.h>\nint main(void) { printf(\"%g\\n\", sqrt(2.0)); return 0; }\n",
    )
    .unwrap();
    let out = run_in(&dir, "aarch64-linux-gnu-gcc", &["probe.c", "-o", "probe", "-lm"], None);
    assert_eq!(
        out.code, 0,
        "aarch64-linux-gnu-gcc is installed but cannot build a C program for aarch64 (missing the target's C \
         library headers and start files? apt-get install libc6-dev-arm64-cross):\n{}",
        out.stderr
    );
    Some(("aarch64-linux-gnu-gcc", "/usr/aarch64-linux-gnu"))
}

/// Compares two runs of the C test program line by line: the same keys,
/// the same words, numbers equal to 1e-12 relative.
pub(crate) fn assert_same_output(what: &str, host: &str, cross: &str) {
    let (h, c): (Vec<&str>, Vec<&str>) = (host.lines().collect(), cross.lines().collect());
    assert_eq!(h.len(), c.len(), "{what}: line counts differ:\n{host}\n---\n{cross}");
    for (a, b) in h.iter().zip(&c) {
        let (wa, wb): (Vec<&str>, Vec<&str>) = (a.split_whitespace().collect(), b.split_whitespace().collect());
        assert_eq!(wa.len(), wb.len(), "{what}: `{a}` vs `{b}`");
        for (x, y) in wa.iter().zip(&wb) {
            match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(p), Ok(q)) => assert!(
                    p == q || (p - q).abs() <= 1e-12 * p.abs().max(q.abs()) || (p.is_nan() && q.is_nan()),
                    "{what}: `{a}` vs `{b}`"
                ),
                _ => assert_eq!(x, y, "{what}: `{a}` vs `{b}`"),
            }
        }
    }
}

#[test]
fn aarch64_libraries_agree_with_x86_64() {
    let Some((gcc, sysroot)) = aarch64_tools() else { return };
    if !have("cc") {
        return;
    }
    for backend in backends() {
        let dir = scratch("c_abi", &format!("aarch64-{backend}"));
        std::fs::write(dir.join("prog.arr"), PROGRAM).unwrap();
        std::fs::write(dir.join("main.c"), MAIN_C).unwrap();
        let mut outputs = Vec::new();
        for (triple, cc) in [("x86_64-unknown-linux-gnu", "cc"), ("aarch64-unknown-linux-gnu", gcc)] {
            let sub = dir.join(triple);
            std::fs::create_dir_all(&sub).unwrap();
            let lib = sub.join("libprog.so");
            let args = ["build", "prog.arr", "-o", lib.to_str().unwrap(), "--backend", backend, "--target", triple];
            let out = arrayad(&dir, &args);
            assert_eq!(out.code, 0, "{backend} {triple}: {out:#?}");
            let s = sub.to_str().unwrap();
            let cargs = ["-std=c99", "-Wall", "-Werror", "../main.c", "-o", "main", "-I.", "-L.", "-lprog"];
            let mut cargs: Vec<&str> = cargs.to_vec();
            cargs.extend(["-Wl,-rpath,$ORIGIN", "-lm"]);
            let out = run_in(&sub, cc, &cargs, None);
            assert_eq!(out.code, 0, "{cc}: {out:#?}");
            let main = format!("{s}/main");
            let out = if triple.starts_with("aarch64") {
                run_in(&sub, "qemu-aarch64", &["-L", sysroot, &main], None)
            } else {
                run_in(&sub, &main, &[], None)
            };
            assert_eq!(out.code, 0, "{backend} {triple} run: {out:#?}");
            outputs.push(out.stdout);
        }
        assert!(outputs[0].contains("f_rc 0"), "{}", outputs[0]);
        assert_same_output(&format!("C test program, {backend}"), &outputs[0], &outputs[1]);
    }
}

/// A program whose values and gradient are all subnormal numbers, for the
/// tests of floating-point modes.
const SUBNORMAL: &str = "
def scaled(x: [n]f64) -> [n]f64 = for i < n => x[i] * 1e-300
def energy(x: [n]f64) -> f64 = sum(for i < n => x[i] * x[i] * 1e-290) * 1e-10
";

/// C functions for the programs that call [`SUBNORMAL`]'s library, which
/// prepend them: `fill(n, x)` writes inputs whose values and gradient
/// entries are all subnormal numbers; `print_counts(n, y, g)` prints how
/// many of the `2 n` results are zero, subnormal or neither (`key value`
/// lines).
const SUBNORMAL_COUNTS_C: &str = r#"
#include <stdio.h>
static void fill(int n, double *x) {
    int i;
    for (i = 0; i < n; i++) x[i] = 1e-10 * (1.0 + (double)i / n);
}
static void print_counts(int n, const double *y, const double *g) {
    int i;
    long zero = 0, subnormal = 0, other = 0;
    for (i = 0; i < 2 * n; i++) {
        double v = i < n ? y[i] : g[i - n];
        if (v == 0.0) zero++;
        else if (v > 0.0 && v < 2.2250738585072014e-308) subnormal++;
        else other++;
    }
    printf("zero %ld\nsubnormal %ld\nother %ld\n", zero, subnormal, other);
}
"#;

/// An aarch64 library built with `--flush-subnormals` flushes subnormal
/// numbers on every thread (FPCR.FZ, under qemu) and gives the caller its
/// mode back; one built without computes them.
#[test]
fn aarch64_libraries_flush_subnormal_numbers() {
    const MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "libtiny.h"
#define N 20000
static double x[N], y[N], g[N];
int main(int argc, char **argv) {
    double e = -1.0;
    unsigned long fpcr;
    if (argc != 2) return 2;
    fill(N, x);
    tiny_set_num_threads(atoi(argv[1]));
    if (scaled(N, x, y) != 0 || energy_grad(N, x, &e, g) != 0) return 1;
    print_counts(N, y, g);
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    printf("caller_flushes %d\n", (int)((fpcr >> 24) & 1));
    return 0;
}
"#;
    let Some((gcc, sysroot)) = aarch64_tools() else { return };
    for backend in backends() {
        for flush in [false, true] {
            let dir = scratch("c_abi", &format!("aarch64-flush-{backend}-{flush}"));
            std::fs::write(dir.join("tiny.arr"), SUBNORMAL).unwrap();
            std::fs::write(dir.join("main.c"), format!("{SUBNORMAL_COUNTS_C}{MAIN}")).unwrap();
            let mut args = vec!["build", "tiny.arr", "-o", "libtiny.so", "--backend", backend];
            args.extend(["--target", "aarch64-unknown-linux-gnu"]);
            if flush {
                args.push("--flush-subnormals");
            }
            let out = arrayad(&dir, &args);
            assert_eq!(out.code, 0, "{backend}: {out:#?}");
            let cargs = ["-std=gnu99", "-Wall", "-Werror", "main.c", "-o", "main", "-I.", "-L.", "-ltiny"];
            let out = run_in(&dir, gcc, &[&cargs[..], &["-Wl,-rpath,$ORIGIN", "-lm"]].concat(), None);
            assert_eq!(out.code, 0, "{gcc}: {out:#?}");
            let main = dir.join("main");
            let mut outputs = Vec::new();
            for threads in ["1", "4"] {
                let out = std::process::Command::new("qemu-aarch64")
                    .args(["-L", sysroot, main.to_str().unwrap(), threads])
                    .env("ARRAYAD_PARALLEL_GRAIN", "0")
                    .current_dir(&dir)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{backend}, flush {flush}, {threads} threads: {out:?}");
                outputs.push(key_values(&String::from_utf8_lossy(&out.stdout)));
            }
            assert_eq!(outputs[0], outputs[1], "{backend}, flush {flush}: one thread and four differ");
            let (zero, subnormal) = if flush { ("40000", "0") } else { ("0", "40000") };
            assert_eq!(outputs[0]["zero"], zero, "{backend}, flush {flush}: {:?}", outputs[0]);
            assert_eq!(outputs[0]["subnormal"], subnormal, "{backend}, flush {flush}: {:?}", outputs[0]);
            assert_eq!(outputs[0]["caller_flushes"], "0", "{backend}, flush {flush}: {:?}", outputs[0]);
        }
    }
}

// ---------------------------------------------------------------------------
// Functions whose extents are all literals take the fast path (no tables,
// results staged on the stack): values, derivatives, the reverse-mode
// Jacobian, outputs aliasing inputs and null pointers.
// ---------------------------------------------------------------------------

const FIXED: &str = "\
def rot(x: [3]f64, a: f64) -> [3]f64 = [x[0] * cos(a) - x[1] * sin(a), x[0] * sin(a) + x[1] * cos(a), x[2] * a]
def twice(x: [3]f64) -> ([3]f64, [3]f64) = (x * 2.0, x)
def mixed(x: [2]f64, b: bool, k: i64) -> (bool, i64, f64) = (b && x[0] > 0.0, k + 1, x[1] * f64(k))
def norm2(x: [3]f64) -> f64 = dot(x, x)
";

const FIXED_C: &str = r#"
int main(void) {
    double x[3] = {1, 2, 3}, a = 0.5, o[3], t[3] = {1, 0, 0}, jo[3], ct[3] = {0, 1, 0}, dx[3], da, jac[12], v;
    double c = cos(a), s = sin(a), y[3], y0[3];
    bool b;
    int64_t k;
    int i;
    CHECK(rot(x, a, o) == 0);
    CHECK(fabs(o[0] - (c - 2 * s)) < 1e-15 && fabs(o[1] - (s + 2 * c)) < 1e-15 && o[2] == 1.5);
    CHECK(rot_jvp(x, a, t, 0.0, o, jo) == 0);
    CHECK(fabs(jo[0] - c) < 1e-15 && fabs(jo[1] - s) < 1e-15 && jo[2] == 0);
    CHECK(rot_vjp(x, a, ct, o, dx, &da) == 0);
    CHECK(fabs(dx[0] - s) < 1e-15 && fabs(dx[1] - c) < 1e-15 && dx[2] == 0);
    CHECK(fabs(da - (c - 2 * s)) < 1e-15);
    /* 3 rows <= 4 columns: reverse mode, the static identity */
    CHECK(rot_jacobian(x, a, o, jac) == 0);
    CHECK(fabs(jac[0] - c) < 1e-15 && fabs(jac[1] + s) < 1e-15 && jac[2] == 0);
    CHECK(fabs(jac[3] - (-s - 2 * c)) < 1e-15);
    CHECK(jac[8] == 0 && jac[9] == 0 && jac[10] == 0.5 && jac[11] == 3);
    /* in place: the output is the input */
    for (i = 0; i < 3; i++) y[i] = y0[i] = x[i];
    CHECK(rot(y, a, y) == 0);
    CHECK(y[0] == o[0] && y[1] == o[1] && y[2] == o[2]);
    /* the second result is the input itself, whose buffer is the first output */
    for (i = 0; i < 3; i++) y[i] = y0[i];
    CHECK(twice(y, y, o) == 0);
    CHECK(y[0] == 2 && y[2] == 6 && o[0] == 1 && o[2] == 3);
    CHECK(mixed(x, 1, 4, &b, &k, &v) == 0);
    CHECK(b == 1 && k == 5 && v == 8);
    CHECK(norm2_grad(x, &v, dx) == 0);
    CHECK(v == 14 && dx[0] == 2 && dx[2] == 6);
    /* a null pointer: the table-driven path reports it */
    CHECK(rot(NULL, a, o) == FIX_ERR_INVALID_ARGUMENT);
    CHECK(strstr(fix_last_error(), "null pointer") != NULL);
    CHECK(rot(x, a, o) == 0);
    if (fails) return 1;
    printf("OK\n");
    return 0;
}
"#;

#[test]
fn fixed_size_functions_take_the_fast_path() {
    for backend in backends() {
        if !have("cc") {
            return;
        }
        let dir = scratch("c_abi", &format!("fixed-{backend}"));
        std::fs::write(dir.join("fix.arr"), FIXED).unwrap();
        let out = arrayad(&dir, &["build", "fix.arr", "-o", "libfix.so", "--backend", backend]);
        assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
        let main =
            format!("{}{FIXED_C}", CHECK_C.replace("librob.h", "libfix.h").replace("rob_last_error", "fix_last_error"));
        std::fs::write(dir.join("main.c"), main).unwrap();
        let args = [
            "-std=c99",
            "-Wall",
            "-Werror",
            "main.c",
            "-o",
            "main",
            "-I.",
            "-L.",
            "-lfix",
            "-Wl,-rpath,$ORIGIN",
            "-lm",
        ];
        let out = run_in(&dir, "cc", &args, None);
        assert_eq!(out.code, 0, "cc failed: {out:#?}");
        let out = run_in(&dir, dir.join("main").to_str().unwrap(), &[], None);
        assert_eq!(out.code, 0, "{backend}: {out:#?}");
        assert!(out.stdout.contains("OK"), "{out:#?}");
    }
}

// ---------------------------------------------------------------------------
// Size expressions (LANGUAGE.md section 11) in the C ABI: the caller passes
// the size variables; the wrappers compute the expressions, and a size
// without a value (a division by zero) or a negative one is an error.
// ---------------------------------------------------------------------------

const SIZED: &str = "\
def tri(d: [k]f64, l: [k][k * (k - 1) / 2]f64) -> [k + 1]f64 = concat(d * 2.0, [sum(flatten(l * l))])
def part(x: [n]f64, q: [m]f64, y: [n / m]f64) -> f64 = sum(y) + sum(x)
";

const SIZED_C: &str = r#"
#include <stdio.h>
#include "libsized.h"
int main(void) {
    double d[3] = {1, 2, 3}, l[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, out[4], ct[4] = {1, 1, 1, 1}, dd[3], dl[9], v;
    int rc = tri(3, d, l, out);
    printf("tri_rc %d\ntri %g %g %g %g\n", rc, out[0], out[1], out[2], out[3]);
    rc = tri_vjp(3, d, l, ct, out, dd, dl);
    printf("vjp_rc %d\nvjp %g %g %g %g\n", rc, dd[0], dd[2], dl[0], dl[8]);
    double x[4] = {1, 2, 3, 4}, q[2] = {0, 0}, y[2] = {10, 20};
    rc = part(4, 2, x, q, y, &v);
    printf("part_rc %d\npart %g\n", rc, v);
    rc = part(4, 0, x, q, y, &v);
    printf("zero_rc %d\nzero_ok %d\n", rc, rc == SIZED_ERR_SIZE_MISMATCH);
    printf("zero_msg %s\n", sized_last_error());
    return 0;
}
"#;

#[test]
fn c_programs_pass_the_size_variables_of_size_expressions() {
    if !have("cc") {
        return;
    }
    for backend in backends() {
        let dir = scratch("c_abi", &format!("sized-{backend}"));
        std::fs::write(dir.join("sized.arr"), SIZED).unwrap();
        let out = arrayad(&dir, &["build", "sized.arr", "-o", "libsized.so", "--backend", backend]);
        assert_eq!(out.code, 0, "{backend}: {out:#?}");
        let header = std::fs::read_to_string(dir.join("libsized.h")).unwrap();
        assert!(header.contains("int32_t tri(int64_t k, const double *d, const double *l, double *out0);"), "{header}");
        assert!(header.contains("[k][k * (k - 1) / 2] f64"), "{header}");
        let lines = compile_and_run(&dir, SIZED_C, "sized");
        assert_eq!(code(&lines, "tri_rc"), 0, "{backend}");
        assert_eq!(numbers(&lines, "tri"), [2.0, 4.0, 6.0, 285.0], "{backend}");
        assert_eq!(code(&lines, "vjp_rc"), 0, "{backend}");
        assert_eq!(numbers(&lines, "vjp"), [2.0, 2.0, 2.0, 18.0], "{backend}");
        assert_eq!(code(&lines, "part_rc"), 0, "{backend}");
        assert_eq!(numbers(&lines, "part"), [40.0], "{backend}");
        assert_eq!(code(&lines, "zero_ok"), 1, "{backend}");
        let msg = &lines["zero_msg"];
        assert!(msg.contains("sized.arr:2:1: size mismatch: part: size `n / m` has no value"), "{backend}: {msg}");
    }
}

/// The forward-mode Jacobian of the C ABI (more rows than columns) and
/// `f_jvp_many` run the vector jvp, several directions per call, the last
/// call padded with zero tangents: for 2 to 10 columns (every remainder),
/// with two active parameters (`--wrt`) and two results, every entry of
/// the Jacobian is bitwise what `f_jvp` gives for that column's one-hot
/// tangent; `f_jvp_many` in 0 to 19 dense directions gives bitwise `f_jvp`'s
/// tangents and values; a negative `k`, a null tangent buffer and a tangent
/// output overlapping an input or another output are errors with a message.
#[test]
fn forward_jacobian_and_jvp_many_in_lanes_equal_jvp_columns() {
    const SRC: &str = "\
def wide(a: [c]f64, s: f64, y: [n]f64) -> ([n]f64, f64) =
  let t = sum(for j < c => a[j] * a[j]) in
  (for i < n => sin(a[i % c] * y[i]) + s * exp(y[i] * t) + a[(i + 1) % c] / (1.0 + y[i] * y[i]), s * t)
";
    const MAIN: &str = r#"
#include <stdio.h>
#include <string.h>
#include "libwide.h"

int main(void) {
    double a[9], y[40], v[40], v2[40], t[40], ta[9], w, w2, tw, ts, jac[41 * 10];
    int c, i, k, bad = 0;
    int32_t rc;
    for (i = 0; i < 40; i++) y[i] = 0.05 * i - 0.7;
    for (c = 1; c <= 9; c++) {
        int cols = c + 1, rows = 41;
        for (i = 0; i < c; i++) a[i] = 0.3 + 0.11 * i;
        if (wide_jacobian(c, 40, a, 1.5, y, v, &w, jac) != 0) { printf("error %s\n", wide_last_error()); return 1; }
        for (k = 0; k < cols; k++) {
            memset(ta, 0, sizeof ta);
            ts = 0.0;
            if (k < c) ta[k] = 1.0; else ts = 1.0;
            if (wide_jvp(c, 40, a, 1.5, y, ta, ts, v2, &w2, t, &tw) != 0) { printf("error %s\n", wide_last_error()); return 1; }
            for (i = 0; i < 40; i++) bad += memcmp(&jac[i * cols + k], &t[i], 8) != 0;
            bad += memcmp(&jac[40 * cols + k], &tw, 8) != 0;
            for (i = 0; i < 40; i++) bad += memcmp(&v[i], &v2[i], 8) != 0;
            bad += memcmp(&w, &w2, 8) != 0;
        }
        (void)rows;
    }
    {
        /* f_jvp_many with c = 5: k dense directions against k jvps */
        static double ta_k[19 * 5], ts_k[19], tv_k[19 * 40], tw_k[19];
        int kk, d;
        c = 5;
        for (i = 0; i < 19 * 5; i++) ta_k[i] = 0.37 * ((i * 7919) % 23) - 4.0;
        for (i = 0; i < 19; i++) ts_k[i] = 0.5 - 0.1 * i;
        for (kk = 0; kk < 20; kk++) {
            memset(tv_k, 0, sizeof tv_k);
            if (wide_jvp_many(c, 40, a, 1.5, y, kk, ta_k, ts_k, v, &w, tv_k, tw_k) != 0) { printf("error %s\n", wide_last_error()); return 1; }
            for (d = 0; d < kk; d++) {
                if (wide_jvp(c, 40, a, 1.5, y, ta_k + 5 * d, ts_k[d], v2, &w2, t, &tw) != 0) return 1;
                bad += memcmp(t, tv_k + 40 * d, 40 * 8) != 0;
                bad += memcmp(&tw, &tw_k[d], 8) != 0;
                bad += memcmp(v, v2, 40 * 8) != 0;
                bad += memcmp(&w, &w2, 8) != 0;
            }
            for (d = kk; d < 19; d++) bad += tv_k[40 * d] != 0.0;
        }
        rc = wide_jvp_many(c, 40, a, 1.5, y, -1, ta_k, ts_k, v, &w, tv_k, tw_k);
        printf("negative_k %d %s\n", (int)rc, wide_last_error());
        rc = wide_jvp_many(c, 40, a, 1.5, y, 2, NULL, ts_k, v, &w, tv_k, tw_k);
        printf("null %d %s\n", (int)rc, wide_last_error());
        rc = wide_jvp_many(c, 40, a, 1.5, y, 2, ta_k, ts_k, v, &w, tv_k, ta_k + 3);
        printf("overlap %d %s\n", (int)rc, wide_last_error());
        rc = wide_jvp_many(c, 40, a, 1.5, y, 2, ta_k, ts_k, v, &w, tv_k, tv_k + 1);
        printf("overlap_out %d %s\n", (int)rc, wide_last_error());
    }
    printf("bad %d\n", bad);
    printf("j %.17g %.17g\n", jac[0], jac[41 * 10 - 1]);
    return 0;
}
"#;
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C ABI test");
        return;
    }
    for backend in backends() {
        let dir = scratch("c_abi", &format!("lanes-{backend}"));
        std::fs::write(dir.join("wide.arr"), SRC).unwrap();
        let out = arrayad(&dir, &["build", "wide.arr", "-o", "libwide.so", "--backend", backend, "--wrt", "a,s"]);
        assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
        let header = std::fs::read_to_string(dir.join("libwide.h")).unwrap();
        assert!(header.contains("wide_jvp(") && header.contains("wide_jacobian("), "{header}");
        let lines = compile_and_run(&dir, MAIN, "wide");
        assert_eq!(code(&lines, "bad"), 0, "{backend}: the Jacobian differs from the jvp columns");
        let j = numbers(&lines, "j");
        assert!(j.iter().all(|x| x.is_finite() && *x != 0.0), "{backend}: {j:?}");
        for (key, code, message) in [
            (
                "negative_k",
                9,
                "wide.arr:1:1: invalid argument: wide_jvp_many: the number of directions k = -1 is negative",
            ),
            ("null", 9, "wide.arr:1:1: invalid argument: wide_jvp_many: null pointer for `t_a`"),
            (
                "overlap",
                9,
                "wide.arr:1:1: invalid argument: wide_jvp_many: the output `t_out1` overlaps the input `t_a`",
            ),
        ] {
            let line = lines.get(key).unwrap_or_else(|| panic!("no line {key}"));
            assert_eq!(line, &format!("{code} {message}"), "{backend}: {key}");
        }
    }
}

/// With literal extents the vector jvp has one lane per Jacobian column,
/// split evenly over the fewest passes of at most 32
/// (`arrayad_ad::jvp_lane_count`): 43 columns are two passes of 22, the
/// second padded with one zero direction; the sum over `j < 7` of the
/// value and 22 tangents is one loop (a fused sum of 23 results). The
/// Jacobian (61 rows: forward mode, more rows than columns) is bitwise the
/// jvp
/// of each one-hot column and `f_jvp_many` in 0 to 46 dense directions
/// (fewer than a pass, one pass, more) bitwise the jvps. A null argument
/// or value buffer is an error named after `f_jacobian`.
#[test]
fn literal_extents_give_a_lane_per_column() {
    const SRC: &str = "\
def fixed(p: [40]f64, q: [3]f64, us: [m]i64) -> [m]f64 =
  for i < m =>
    let t = f64(us[i]) * 1e-3
    in sum(for j < 7 => p[4 * j] * exp(-p[4 * j + 1] * t) * cos(p[4 * j + 2] * t + p[4 * j + 3] * q[j % 3]))
       + sum(for j < 12 => p[28 + j] * sin(t * f64(j + 1)) * q[j % 3])
";
    const MAIN: &str = r#"
#include <stdio.h>
#include <string.h>
#include "libfixed.h"

int main(void) {
    enum { M = 61, C = 43, K = 46 };
    static double p[40], q[3], v[M], v2[M], t[M], tp[40], tq[3], jac[M * C], dp[K * 40], dq[K * 3], tv[K * M];
    int64_t us[M];
    int i, c, k, d, bad = 0;
    for (i = 0; i < 40; i++) p[i] = 0.1 + 0.05 * i;
    for (i = 0; i < 3; i++) q[i] = 0.7 - 0.2 * i;
    for (i = 0; i < M; i++) us[i] = 13 * i;
    if (fixed_jacobian(M, p, q, us, v, jac) != 0) { printf("error %s\n", fixed_last_error()); return 1; }
    for (c = 0; c < C; c++) {
        memset(tp, 0, sizeof tp);
        memset(tq, 0, sizeof tq);
        if (c < 40) tp[c] = 1.0; else tq[c - 40] = 1.0;
        if (fixed_jvp(M, p, q, us, tp, tq, v2, t) != 0) return 1;
        for (i = 0; i < M; i++) bad += memcmp(&jac[i * C + c], &t[i], 8) != 0;
        bad += memcmp(v, v2, sizeof v) != 0;
    }
    for (i = 0; i < K * 40; i++) dp[i] = 0.37 * ((i * 7919) % 23) - 4.0;
    for (i = 0; i < K * 3; i++) dq[i] = 0.5 - 0.1 * (i % 11);
    for (k = 0; k <= K; k++) {
        memset(tv, 0, sizeof tv);
        if (fixed_jvp_many(M, p, q, us, k, dp, dq, v, tv) != 0) { printf("error %s\n", fixed_last_error()); return 1; }
        for (d = 0; d < k; d++) {
            if (fixed_jvp(M, p, q, us, dp + 40 * d, dq + 3 * d, v2, t) != 0) return 1;
            bad += memcmp(t, tv + M * d, sizeof t) != 0;
            bad += memcmp(v, v2, sizeof v) != 0;
        }
        for (d = k; d < K; d++) bad += tv[M * d] != 0.0;
    }
    printf("bad %d\n", bad);
    printf("j %.17g %.17g\n", jac[0], jac[M * C - 1]);
    {
        int32_t rc = fixed_jacobian(M, p, q, NULL, v, jac);
        printf("null_us %d %s\n", (int)rc, fixed_last_error());
        rc = fixed_jacobian(M, p, q, us, NULL, jac);
        printf("null_out %d %s\n", (int)rc, fixed_last_error());
    }
    return 0;
}
"#;
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C ABI test");
        return;
    }
    for backend in backends() {
        let dir = scratch("c_abi", &format!("literal-lanes-{backend}"));
        std::fs::write(dir.join("fixed.arr"), SRC).unwrap();
        let out = arrayad(&dir, &["build", "fixed.arr", "-o", "libfixed.so", "--backend", backend]);
        assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
        let ir = arrayad(&dir, &["emit", "--stage", "jvp_lanes", "fixed.arr"]);
        assert_eq!(ir.code, 0, "arrayad emit failed: {ir:#?}");
        let header = ir.stdout.lines().find(|l| l.starts_with("def fixed_jvp_lanes(")).expect("the vector jvp");
        let params = header.split(") ->").next().unwrap_or_default();
        assert_eq!(params.matches("]f64").count(), 2 + 2 * 22, "{backend}: 22 lanes of two tangents: {header}");
        let lines = compile_and_run(&dir, MAIN, "fixed");
        assert_eq!(code(&lines, "bad"), 0, "{backend}: the Jacobian and jvp_many differ from the jvp");
        let j = numbers(&lines, "j");
        assert!(j.iter().all(|x| x.is_finite() && *x != 0.0), "{backend}: {j:?}");
        // The passes check the arguments under the Jacobian's name, and the
        // values' buffer before they are copied into it.
        for (key, message) in [
            ("null_us", "fixed.arr:1:1: invalid argument: fixed_jacobian: null pointer for the i64 array `us`"),
            ("null_out", "fixed.arr:1:1: invalid argument: fixed_jacobian: null pointer for the output `out0`"),
        ] {
            let line = lines.get(key).unwrap_or_else(|| panic!("no line {key}"));
            assert_eq!(line, &format!("9 {message}"), "{backend}: {key}");
        }
    }
}

/// Exports whose names are others' with a suffix of the wrappers' tables
/// (`g` and `g_jac`, `h` and `h_jac`: the forward Jacobian of `g` by the
/// jvp has a `_jac_jvp` table, the one-row Jacobian of `h` by the vjp a
/// `_jac_vjp` one, as `g_jac`'s jvp and `h_jac`'s vjp): the tables stay
/// apart, the library builds, and the Jacobians are right.
#[test]
fn exports_named_like_each_others_tables_build() {
    const SRC: &str = "\
def g(s: f64, x: [n]f64) -> [n]f64 = for i < n => s * x[i]
def g_jac(s: f64, x: [n]f64) -> f64 = s * sum(x)
def h(s: f64, x: [n]f64) -> f64 = s * s * sum(x)
def h_jac(s: f64, x: [n]f64) -> f64 = s + sum(x)
";
    const MAIN: &str = r#"
#include <stdio.h>
#include "libg.h"

int main(void) {
    double x[3] = {1.0, 2.0, 4.0}, v[3], w, jac[3];
    if (g_jacobian(3, 0.5, x, v, jac) != 0) { printf("error %s\n", g_last_error()); return 1; }
    printf("g %g %g %g\n", jac[0], jac[1], jac[2]);
    if (g_jac_jacobian(3, 0.5, x, &w, jac) != 0) { printf("error %s\n", g_last_error()); return 1; }
    printf("g_jac %g\n", jac[0]);
    if (h_jacobian(3, 0.5, x, &w, jac) != 0) { printf("error %s\n", g_last_error()); return 1; }
    printf("h %g\n", jac[0]);
    if (h_jac_jacobian(3, 0.5, x, &w, jac) != 0) { printf("error %s\n", g_last_error()); return 1; }
    printf("h_jac %g\n", jac[0]);
    return 0;
}
"#;
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C ABI test");
        return;
    }
    for backend in backends() {
        let dir = scratch("c_abi", &format!("table-names-{backend}"));
        std::fs::write(dir.join("g.arr"), SRC).unwrap();
        let out = arrayad(&dir, &["build", "g.arr", "-o", "libg.so", "--backend", backend, "--wrt", "s"]);
        assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
        let lines = compile_and_run(&dir, MAIN, "g");
        assert_eq!(numbers(&lines, "g"), vec![1.0, 2.0, 4.0], "{backend}");
        assert_eq!(numbers(&lines, "g_jac"), vec![7.0], "{backend}");
        assert_eq!(numbers(&lines, "h"), vec![7.0], "{backend}");
        assert_eq!(numbers(&lines, "h_jac"), vec![1.0], "{backend}");
    }
}

/// True when the library at `lib` names `symbol` (in its symbol table).
fn library_names(lib: &Path, symbol: &str) -> bool {
    let bytes = std::fs::read(lib).unwrap();
    bytes.windows(symbol.len()).any(|w| w == symbol.as_bytes())
}

/// With one active scalar (`--wrt s`), the Jacobian has one column and the
/// directions of `f_jvp_many` are multiples of one another: the library
/// has no vector jvp, and both entries call the jvp per direction, bitwise
/// equal to `f_jvp`; with two active parameters it has one.
#[test]
fn one_active_scalar_runs_the_jvp_per_direction() {
    const SRC: &str = "def curve(s: f64, y: [n]f64) -> [n]f64 = for i < n => sin(s * y[i]) + s * y[i]\n";
    const MAIN: &str = r#"
#include <stdio.h>
#include <string.h>
#include "libcurve.h"

int main(void) {
    double y[5] = {0.1, -0.4, 0.7, 1.3, 2.0}, v[5], v2[5], t[5], jac[5], ts[3] = {1.0, -2.5, 0.25}, tm[15];
    int i, d, bad = 0;
    if (curve_jacobian(5, 0.8, y, v, jac) != 0) { printf("error %s\n", curve_last_error()); return 1; }
    if (curve_jvp(5, 0.8, y, 1.0, v2, t) != 0) return 1;
    bad += memcmp(jac, t, sizeof t) != 0;
    bad += memcmp(v, v2, sizeof v) != 0;
    if (curve_jvp_many(5, 0.8, y, 3, ts, v, tm) != 0) { printf("error %s\n", curve_last_error()); return 1; }
    for (d = 0; d < 3; d++) {
        if (curve_jvp(5, 0.8, y, ts[d], v2, t) != 0) return 1;
        bad += memcmp(tm + 5 * d, t, sizeof t) != 0;
    }
    for (i = 0; i < 5; i++) bad += jac[i] == 0.0;
    printf("bad %d\n", bad);
    return 0;
}
"#;
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C ABI test");
        return;
    }
    for backend in backends() {
        let dir = scratch("c_abi", &format!("one-scalar-{backend}"));
        std::fs::write(dir.join("curve.arr"), SRC).unwrap();
        let lanes_in = |wrt: &str| {
            let out = arrayad(&dir, &["build", "curve.arr", "-o", "libcurve.so", "--backend", backend, "--wrt", wrt]);
            assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
            library_names(&dir.join("libcurve.so"), "curve__jvp_lanes")
        };
        assert!(lanes_in("s,y"), "{backend}: two active parameters run the vector jvp");
        assert!(!lanes_in("s"), "{backend}: one active scalar needs no vector jvp");
        let lines = compile_and_run(&dir, MAIN, "curve");
        assert_eq!(code(&lines, "bad"), 0, "{backend}: the Jacobian and jvp_many differ from the jvp");
    }
}

/// The Jacobian of a result that is one `f64` is one row: the library
/// computes it by one call of the vjp (no many-row vjp is compiled), and
/// it is bitwise the gradient, by the fast path of literal extents and by
/// the table-driven one; a null `jac` is reported at the Jacobian's name;
/// `--entries jacobian` alone compiles no jvp for it.
#[test]
fn the_jacobian_of_one_f64_is_the_gradient() {
    const SRC: &str = "\
def loss(w: [n]f64, s: f64) -> f64 = sum(for i < n => sin(w[i]) * w[i]) * s
def cubes(w: [3]f64, s: f64) -> f64 = sum(for i < 3 => w[i] * w[i] * w[i]) * s
";
    const MAIN: &str = r#"
#include <stdio.h>
#include <string.h>
#include "libloss.h"

int main(void) {
    double w[6] = {0.3, -1.2, 0.8, 2.5, -0.1, 1.7}, jac[7], g[6], gs, v, v2;
    int bad = 0;
    if (loss_jacobian(6, w, 0.6, &v, jac) != 0) { printf("error %s\n", loss_last_error()); return 1; }
    if (loss_grad(6, w, 0.6, &v2, g, &gs) != 0) { printf("error %s\n", loss_last_error()); return 1; }
    bad += memcmp(jac, g, sizeof g) != 0;
    bad += memcmp(&jac[6], &gs, 8) != 0;
    bad += memcmp(&v, &v2, 8) != 0;
    bad += jac[0] == 0.0 || jac[6] == 0.0;
    /* literal extents: the fast path */
    if (cubes_jacobian(w, 0.6, &v, jac) != 0) { printf("error %s\n", loss_last_error()); return 1; }
    if (cubes_grad(w, 0.6, &v2, g, &gs) != 0) { printf("error %s\n", loss_last_error()); return 1; }
    bad += memcmp(jac, g, 3 * 8) != 0;
    bad += memcmp(&jac[3], &gs, 8) != 0;
    bad += memcmp(&v, &v2, 8) != 0;
    printf("bad %d\n", bad);
    bad = (int)loss_jacobian(6, w, 0.6, &v, NULL);
    printf("null %d %s\n", bad, loss_last_error());
    return 0;
}
"#;
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the C ABI test");
        return;
    }
    for backend in backends() {
        let dir = scratch("c_abi", &format!("one-row-{backend}"));
        std::fs::write(dir.join("loss.arr"), SRC).unwrap();
        let out = arrayad(&dir, &["build", "loss.arr", "-o", "libloss.so", "--backend", backend]);
        assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
        assert!(!library_names(&dir.join("libloss.so"), "loss__vjp_rows"), "{backend}: a many-row vjp was compiled");
        let lines = compile_and_run(&dir, MAIN, "loss");
        assert_eq!(code(&lines, "bad"), 0, "{backend}: the Jacobian differs from the gradient");
        let null = lines.get("null").expect("a line `null`");
        assert!(null.starts_with("9 ") && null.contains("loss_jacobian: null pointer for `jac`"), "{backend}: {null}");
        let out =
            arrayad(&dir, &["build", "loss.arr", "-o", "libonly.so", "--backend", backend, "--entries", "jacobian"]);
        assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
        for (name, present) in [("loss__vjp", true), ("loss__jvp", false), ("loss__vjp_rows", false)] {
            assert_eq!(library_names(&dir.join("libonly.so"), name), present, "{backend}: {name}");
        }
    }
}

/// `arrayad build` splits a library's LLVM code into one module per thread
/// (`$ARRAYAD_NUM_THREADS`); the functions are compiled alone either way,
/// so a library built on one thread and one built on five give the C
/// program the same output, bit for bit.
#[cfg(feature = "llvm")]
#[test]
fn libraries_built_on_one_and_on_several_threads_agree() {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping");
        return;
    }
    let mut outputs = Vec::new();
    for threads in ["1", "5"] {
        let dir = scratch("c_abi", &format!("threads-{threads}"));
        std::fs::write(dir.join("prog.arr"), PROGRAM).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
            .args(["build", "prog.arr", "-o", "libprog.so", "--backend", "llvm"])
            .env("ARRAYAD_NUM_THREADS", threads)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "build on {threads} threads: {}", String::from_utf8_lossy(&out.stderr));
        outputs.push(compile_and_run(&dir, MAIN_C, "prog"));
    }
    assert!(outputs[0].len() > 10, "too little output: {:?}", outputs[0]);
    assert_eq!(outputs[0], outputs[1]);
}

/// A library whose exports call definitions kept as calls.
const CALLING: &str = "
def helper(x: [n]f64, s: f64) -> [n]f64 = for i < n => x[i] * s + 1.0
def at(a: [n]f64, k: i64) -> f64 = a[k]
def top(x: [n]f64, k: i64) -> f64 = sum(helper(helper(x, 2.0), 0.5)) + at(x, k)
def twice(x: [n]f64) -> [n]f64 = helper(helper(x, 3.0), 1.0)
def cube(x: [n]f64) -> [n]f64 = for i < n => x[i] * x[i] * x[i] / 3.0
def quartic(x: [n]f64) -> f64 = sum(cube(cube(x)))
def divide100(k: i64) -> f64 = f64(100 / k)
def modulo7(k: i64) -> f64 = f64(7 % (k - 1))
def failing(x: f64, k: i64) -> f64 = divide100(k) * x + modulo7(k + 1) * x * x
";

const CALLING_C: &str = r#"
#include <stdio.h>
#include "libcalling.h"

static void print(const char *key, const double *v, int n) {
    int i;
    printf("%s", key);
    for (i = 0; i < n; i++) printf(" %.17g", v[i]);
    printf("\n");
}

int main(void) {
    const double x[3] = {1.0, -2.0, 0.25};
    double value = 0, out[3], dx[3];
    int32_t rc = top(3, x, 1, &value);
    printf("top_rc %d\n", (int)rc);
    print("top", &value, 1);
    rc = top(3, x, 7, &value);
    printf("top_oob_rc %d\n", (int)rc);
    printf("top_oob_msg %s\n", calling_last_error());
    rc = twice(3, x, out);
    printf("twice_rc %d\n", (int)rc);
    print("twice", out, 3);
    rc = top_grad(3, x, 2, &value, dx);
    printf("top_grad_rc %d\n", (int)rc);
    print("top_grad", dx, 3);
    /* The Jacobian, the vector jvp and the Hessian-vector product call
       the kept definitions' vjps, jvps and the jvps of their vjps. */
    double jac[9], dirs[6] = {1.0, 0.0, 0.0, 0.5, -1.0, 2.0}, tangents[6], h[3];
    const double t[3] = {0.5, 1.0, -1.0};
    rc = twice_jacobian(3, x, out, jac);
    printf("twice_jacobian_rc %d\n", (int)rc);
    print("twice_jacobian", jac, 9);
    rc = twice_jvp_many(3, x, 2, dirs, out, tangents);
    printf("twice_jvp_many_rc %d\n", (int)rc);
    print("twice_jvp_many", tangents, 6);
    rc = quartic_hvp(3, x, t, &value, dx, h);
    printf("quartic_hvp_rc %d\n", (int)rc);
    print("quartic_grad", dx, 3);
    print("quartic_hvp", h, 3);
    /* divide100(0) fails, then modulo7(1) too where the straight-line
       caller runs on (it checks its calls' statuses at its end): the first
       error is the one reported. */
    rc = failing(0.75, 0, &value);
    printf("failing_rc %d\n", (int)rc);
    printf("failing_msg %s\n", calling_last_error());
    rc = failing_grad(0.75, 0, &value, dx);
    printf("failing_grad_rc %d\n", (int)rc);
    printf("failing_grad_msg %s\n", calling_last_error());
    rc = failing(0.75, 3, &value);
    printf("failing_ok_rc %d\n", (int)rc);
    print("failing_ok", &value, 1);
    return 0;
}
"#;

/// Callees kept as calls in a library (compiled once, called by hidden
/// symbol; with LLVM split over several modules) give the values, errors
/// and gradients of the library that inlines them.
#[test]
fn libraries_calling_kept_definitions_agree_with_inlined_ones() {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping");
        return;
    }
    for backend in backends() {
        let mut outputs = Vec::new();
        for keep in ["1", "1000000"] {
            let dir = scratch("c_abi", &format!("calling-{backend}-{keep}"));
            std::fs::write(dir.join("calling.arr"), CALLING).unwrap();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
                .args(["build", "calling.arr", "-o", "libcalling.so", "--backend", backend])
                .args(["--keep-calls-above", keep])
                .env("ARRAYAD_NUM_THREADS", "5")
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(out.status.success(), "build: {}", String::from_utf8_lossy(&out.stderr));
            let symbols = run_in(&dir, "nm", &["libcalling.so"], None).stdout;
            assert_eq!(symbols.contains("helper__0__called"), keep == "1", "{backend} {keep}:\n{symbols}");
            outputs.push(compile_and_run(&dir, CALLING_C, "calling"));
        }
        // helper(helper(x, 2), 0.5) = [2.5, -0.5, 1.75]; x[1] = -2.
        assert_eq!(numbers(&outputs[0], "top"), [1.75]);
        assert_eq!(numbers(&outputs[0], "twice"), [5.0, -4.0, 2.75]);
        // twice(x) = 3x + 2: 3 I; quartic(x) = sum x^9 / 81: 8 x^7 t / 9.
        assert_eq!(numbers(&outputs[0], "twice_jacobian"), [3.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 3.0]);
        assert_eq!(numbers(&outputs[0], "twice_jvp_many"), [3.0, 0.0, 0.0, 1.5, -3.0, 6.0]);
        let want: Vec<f64> =
            [1.0f64, -2.0, 0.25].iter().zip([0.5, 1.0, -1.0]).map(|(x, t)| 8.0 * x.powi(7) * t / 9.0).collect();
        let got = numbers(&outputs[0], "quartic_hvp");
        assert!(
            got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-12 * w.abs().max(1.0)),
            "{got:?} against {want:?}"
        );
        assert_ne!(outputs[0]["top_oob_rc"], "0", "{:?}", outputs[0]);
        // 33 x + 1 x^2 at x = 0.75.
        assert_eq!(numbers(&outputs[0], "failing_ok"), [33.0 * 0.75 + 0.75 * 0.75]);
        for o in &outputs {
            assert_ne!(o["failing_rc"], "0", "{o:?}");
            assert_eq!(o["failing_rc"], o["failing_grad_rc"], "{o:?}");
            for key in ["failing_msg", "failing_grad_msg"] {
                let msg = &o[key];
                assert!(msg.starts_with("calling.arr:8:") && msg.contains("division by zero"), "{key}: {msg}");
            }
        }
        for o in &mut outputs {
            // Inlined, the message names the inlined copy of `a`.
            let msg = o.remove("top_oob_msg").unwrap_or_default();
            assert!(msg.starts_with("calling.arr:3:") && msg.contains("index 7"), "{msg}");
        }
        assert_eq!(outputs[0], outputs[1], "{backend}");
    }
}

/// A C program calling a chain of 20,000 definitions kept as calls, one
/// native frame each (holding 8 arguments), where each level branches to
/// the next from two call sites (so inlining would double per level).
const DEEP_C: &str = r#"#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include "libdeep.h"
static int thread_rc = -1;
static char thread_msg[512];
static void *deep_on_a_thread(void *arg) {
    double v = 0;
    (void)arg;
    thread_rc = g20000(0.3, 1, 2, 3, 4, 5, 6, 7, &v);
    strncpy(thread_msg, thread_rc ? deep_last_error() : "", sizeof thread_msg - 1);
    return NULL;
}
int main(void) {
    /* a main thread of 16 MiB, which the library reads (RLIMIT_STACK) */
    struct rlimit rl;
    getrlimit(RLIMIT_STACK, &rl);
    rl.rlim_cur = 16 << 20;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur) return 1;
    if (setrlimit(RLIMIT_STACK, &rl) != 0) return 1;
    double v = 0;
    int rc = g20000(0.3, 1, 2, 3, 4, 5, 6, 7, &v);
    printf("main_rc %d\n", rc);
    printf("main %.17g\n", v);
    /* a thread whose stack the library cannot see: 1 MiB below its frame */
    pthread_t t;
    if (pthread_create(&t, NULL, deep_on_a_thread, NULL) != 0 || pthread_join(t, NULL) != 0) return 1;
    printf("deep_rc %d\n", thread_rc);
    printf("deep_msg %s\n", thread_msg);
    rc = g100(0.3, 1, 2, 3, 4, 5, 6, 7, &v);
    printf("shallow_rc %d\n", rc);
    printf("shallow %.17g\n", v);
    return 0;
}
"#;

#[test]
fn kept_calls_nested_beyond_the_stack_fail_cleanly_in_libraries() {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping");
        return;
    }
    let params: String = (1..8).map(|i| format!(", a{i}: f64")).collect();
    let args: String = (1..8).map(|i| format!(", a{i}")).collect();
    let mut src = format!("def g0(x: f64{params}) -> f64 = sin(x)\n");
    for k in 1..=20_000 {
        let p = k - 1;
        src += &format!(
            "def g{k}(x: f64{params}) -> f64 = if x > 0.0 then g{p}(x * 0.5{args}) else g{p}(x + 1.0{args})\n"
        );
    }
    // Cranelift: an LLVM build of 20,000 definitions takes minutes (both
    // backends share the lowering that checks the stack; the failure is
    // tested on Cranelift only, the success on both in tests/kept_calls.rs).
    let dir = scratch("c_abi", "deep");
    std::fs::write(dir.join("deep.arr"), src).unwrap();
    let out = run_in(
        &dir,
        env!("CARGO_BIN_EXE_arrayad"),
        &["build", "deep.arr", "-o", "libdeep.so", "--backend", "cranelift", "--entries", "value"]
            .into_iter()
            .chain(["--export", "g20000", "--export", "g100", "--keep-calls-above", "1"])
            .collect::<Vec<_>>(),
        None,
    );
    assert_eq!(out.code, 0, "build: {out:#?}");
    let lines = compile_and_run(&dir, DEEP_C, "deep");
    // On the main thread, whose stack the library knows, 20,000 levels
    // fit in 16 MiB.
    assert_eq!(code(&lines, "main_rc"), 0, "{lines:?}");
    let mut x = 0.3f64;
    for _ in 0..20_000 {
        x = if x > 0.0 { x * 0.5 } else { x + 1.0 };
    }
    assert_eq!(numbers(&lines, "main"), [x.sin()], "{lines:?}");
    // On another thread they are beyond the 1 MiB below the caller that
    // generated code may use there: the call fails (out of memory) rather
    // than crash, and the next call works.
    assert_eq!(code(&lines, "deep_rc"), 8, "{lines:?}");
    let msg = &lines["deep_msg"];
    assert!(msg.starts_with("deep.arr:") && msg.contains("calls nest too deeply at `g"), "{msg}");
    assert_eq!(code(&lines, "shallow_rc"), 0, "{lines:?}");
    let want = (0.3 * 0.5f64.powi(100)).sin();
    assert_eq!(numbers(&lines, "shallow"), [want], "{lines:?}");
}

/// The pool's threads run a call's chunks in the caller's floating-point
/// environment: a C program that flushes subnormal numbers to zero (MXCSR's
/// FTZ and DAZ bits, as programs linked with `-ffast-math` and XLA's CPU
/// threads do) gets on seven threads what it gets on one, every subnormal
/// product flushed, in a map, in a sum and in a gradient; a program that
/// does not gets them all (IEEE's default). Either way after a call in the
/// other mode, which started the pool's threads in that mode. A library
/// built with `--flush-subnormals` flushes them whatever the caller's mode,
/// and gives the caller its mode back.
#[cfg(target_arch = "x86_64")]
#[test]
fn threads_run_in_the_callers_floating_point_environment() {
    // `main THREADS MODES`: one round of calls per character of MODES ('1'
    // flushes), each in its mode; prints what the last round gave and
    // whether the caller's mode flushes after it.
    const TINY_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>
#include "libtiny.h"
#define N 100000
#define FTZ_DAZ 0x8040u
static double x[N], y[N], g[N];
int main(int argc, char **argv) {
    size_t m;
    double e = -1.0;
    if (argc != 3) return 2;
    fill(N, x);
    tiny_set_num_threads(atoi(argv[1]));
    for (m = 0; m < strlen(argv[2]); m++) {
        unsigned csr = _mm_getcsr();
        _mm_setcsr(argv[2][m] == '1' ? csr | FTZ_DAZ : csr & ~FTZ_DAZ);
        if (scaled(N, x, y) != 0 || energy_grad(N, x, &e, g) != 0) return 1;
    }
    print_counts(N, y, g);
    printf("energy %.17g\n", e);
    printf("caller_flushes %d\n", (_mm_getcsr() & FTZ_DAZ) == FTZ_DAZ);
    return 0;
}
"#;
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping");
        return;
    }
    for backend in backends() {
        for flushing_library in [false, true] {
            let dir = scratch("c_abi", &format!("fenv-{backend}-{flushing_library}"));
            std::fs::write(dir.join("tiny.arr"), SUBNORMAL).unwrap();
            let mut args = vec!["build", "tiny.arr", "-o", "libtiny.so", "--backend", backend];
            if flushing_library {
                args.push("--flush-subnormals");
            }
            let out = arrayad(&dir, &args);
            assert_eq!(out.code, 0, "arrayad build failed: {out:#?}");
            compile_main(&dir, &format!("{SUBNORMAL_COUNTS_C}{TINY_C}"), "tiny");
            let run = |threads: &str, modes: &str| -> HashMap<String, String> {
                let out = std::process::Command::new(dir.join("main"))
                    .args([threads, modes])
                    .env("ARRAYAD_PARALLEL_GRAIN", "0")
                    .current_dir(&dir)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{backend}, {threads} threads, modes {modes}: {out:?}");
                key_values(&String::from_utf8_lossy(&out.stdout))
            };
            for modes in ["01", "10"] {
                let what = format!("{backend}, modes {modes}, flushing library {flushing_library}");
                let one = run("1", modes);
                let seven = run("7", modes);
                assert_eq!(one, seven, "{what}: one thread and seven differ");
                let flushed = flushing_library || modes.ends_with('1');
                let (zero, subnormal) = if flushed { ("200000", "0") } else { ("0", "200000") };
                assert_eq!(one["zero"], zero, "{what}: {one:?}");
                assert_eq!(one["subnormal"], subnormal, "{what}: {one:?}");
                let caller = if modes.ends_with('1') { "1" } else { "0" };
                assert_eq!(one["caller_flushes"], caller, "{what}: the caller's mode changed: {one:?}");
            }
        }
    }
}
