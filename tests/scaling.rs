//! Compile time and memory linear in program size, and no stack overflow or
//! allocation abort on big or deep programs: long chains of `let`s (live or
//! not, in branches or not), many definitions, long chains of calls, deep
//! nesting through inlining and exponential inlining. Each test checks
//! behaviour (exit status, values, the message and location of a limit),
//! not time: before the fixes these programs took minutes or crashed.
//! `bench/scaling.sh` measures the times.

mod support;

use std::fmt::Write;
use std::path::Path;
use support::{arrayad, close, num, nums, scratch};

/// Writes `src` to `dir/name`.
fn write(dir: &Path, name: &str, src: &str) {
    std::fs::write(dir.join(name), src).expect("write the program");
}

/// `arrayad run FILE FUNC --args ARGS --grad`: the value and the gradient
/// of the first parameter (exit 0 required).
fn grad(dir: &Path, file: &str, func: &str, args: &str) -> (f64, serde_json::Value) {
    let out = arrayad(dir, &["run", file, func, "--args", args, "--grad"]);
    assert_eq!(out.code, 0, "run {file} {func}: {out:#?}");
    let j = out.json();
    (num(&j["value"]), j["gradient"][0].clone())
}

fn assert_close(what: &str, got: f64, want: f64) {
    assert!(close(got, want, 1e-9), "{what}: got {got:e}, want {want:e}");
}

/// `a0 = x; a_i = sin(a_{i-1}) * 0.5 + x * c_i`, `c_i = i % 7 + 1`: the
/// lets of `n` steps (indented by `indent`), its value and derivative.
fn chain(n: usize, indent: &str, x: f64) -> (String, f64, f64) {
    let mut src = format!("{indent}let a0 = x\n");
    let (mut a, mut da) = (x, 1.0);
    for i in 1..=n {
        let c = (i % 7 + 1) as f64;
        writeln!(src, "{indent}let a{i} = sin(a{}) * 0.5 + x * {c:.1}", i - 1).unwrap();
        (a, da) = (a.sin() * 0.5 + x * c, a.cos() * 0.5 * da + c);
    }
    writeln!(src, "{indent}in a{n}").unwrap();
    (src, a, da)
}

#[test]
fn a_chain_of_twenty_thousand_lets_differentiates() {
    let dir = scratch("scaling", "chain");
    let (body, value, derivative) = chain(20_000, "  ", 0.7);
    write(&dir, "chain.arr", &format!("def f(x: f64) -> f64 =\n{body}"));
    let (v, g) = grad(&dir, "chain.arr", "f", "[0.7]");
    assert_close("value", v, value);
    assert_close("gradient", num(&g), derivative);
}

/// A chain of 9,000 lets (36,000 statements) is split into parts
/// (`arrayad_ir::passes::outline`), each compiled on its own: `emit`
/// shows them, the library is the same on one thread as on several, and a
/// C program gets the chain's value, gradient and Hessian-vector product.
#[test]
fn a_chain_split_into_parts_builds_a_library_with_its_derivatives() {
    if !support::have("cc") {
        eprintln!("note: no C compiler `cc`: skipping");
        return;
    }
    let dir = scratch("scaling", "parts");
    let (body, _, _) = chain(9_000, "  ", 0.7);
    write(&dir, "chain.arr", &format!("def f(x: f64) -> f64 =\n{body}"));
    // The value, first and second derivatives, along the chain.
    let (mut a, mut da, mut dda) = (0.7f64, 1.0f64, 0.0f64);
    for i in 1..=9_000 {
        let c = (i % 7 + 1) as f64;
        (a, da, dda) =
            (a.sin() * 0.5 + 0.7 * c, a.cos() * 0.5 * da + c, -a.sin() * 0.5 * da * da + a.cos() * 0.5 * dda);
    }
    let out = arrayad(&dir, &["emit", "chain.arr", "--stage", "ir"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("call f#1(") && out.stdout.contains("\ndef f#4("), "{}", &out.stdout[..2000]);
    let exe = env!("CARGO_BIN_EXE_arrayad");
    std::fs::create_dir_all(dir.join("one")).unwrap();
    for (lib, threads) in [("one/libchain.so", "1"), ("libchain.so", "2")] {
        let cmd = format!("ARRAYAD_NUM_THREADS={threads} '{exe}' build chain.arr -o {lib}");
        let out = support::run_in(&dir, "sh", &["-c", &cmd], None);
        assert_eq!(out.code, 0, "{out:#?}");
    }
    let bytes = |lib: &str| std::fs::read(dir.join(lib)).unwrap();
    assert!(bytes("one/libchain.so") == bytes("libchain.so"), "the library differs between one thread and two");
    const MAIN: &str = r#"
#include <stdio.h>
#include "libchain.h"
int main(void) {
    double v, g, v2, g2, h;
    if (f(0.7, &v) != 0 || f_grad(0.7, &v2, &g) != 0 || f_hvp(0.7, 2.0, &v2, &g2, &h) != 0) {
        printf("error %s\n", chain_last_error());
        return 1;
    }
    printf("%.17g %.17g %.17g %.17g\n", v, g, g2, h);
    return 0;
}
"#;
    std::fs::write(dir.join("main.c"), MAIN).unwrap();
    let args = ["main.c", "-o", "main", "-I.", "-L.", "-lchain", "-Wl,-rpath,$ORIGIN", "-lm"];
    let out = support::run_in(&dir, "cc", &args, None);
    assert_eq!(out.code, 0, "{out:#?}");
    let out = support::run_in(&dir, dir.join("main").to_str().unwrap(), &[], None);
    assert_eq!(out.code, 0, "{out:#?}");
    let got: Vec<f64> = out.stdout.split_whitespace().map(|t| t.parse().unwrap()).collect();
    assert_close("value", got[0], a);
    assert_close("gradient", got[1], da);
    assert_close("gradient of the hvp", got[2], da);
    assert!(close(got[3], 2.0 * dda, 1e-7), "hvp: got {:e}, want {:e}", got[3], 2.0 * dda);
}

#[test]
fn a_chain_of_lets_nested_in_branches_differentiates() {
    // The same chain inside 20 branches (all taken): its residuals are
    // taped and popped where they are needed.
    let dir = scratch("scaling", "chain_in_branches");
    let depth = 20;
    let mut src = String::from("def f(x: f64) -> f64 =\n");
    for i in 0..depth {
        writeln!(src, "  if x > {}.0 then", -100 - i).unwrap();
    }
    let (body, value, derivative) = chain(5_000, "  ", 0.7);
    src.push_str(&body);
    for i in 0..depth {
        writeln!(src, "  else {i}.0 * x").unwrap();
    }
    write(&dir, "deep.arr", &src);
    let (v, g) = grad(&dir, "deep.arr", "f", "[0.7]");
    assert_close("value", v, value);
    assert_close("gradient", num(&g), derivative);
}

#[test]
fn live_lets_and_branches_differentiate_and_build() {
    // 5000 lets all live until they are summed at the end.
    let dir = scratch("scaling", "live");
    let n = 5_000;
    let mut src = String::from("def f(x: f64) -> f64 =\n");
    for i in 1..=n {
        writeln!(src, "  let a{i} = sin(x * {i}.0)").unwrap();
    }
    src.push_str("  let s1 = a1\n");
    for i in 2..=n {
        writeln!(src, "  let s{i} = s{} + a{i}", i - 1).unwrap();
    }
    writeln!(src, "  in s{n}").unwrap();
    // 2000 branches in a chain (each condition is read again backward).
    let m = 2_000;
    src.push_str("\ndef g(x: f64) -> f64 =\n  let b0 = x\n");
    for i in 1..=m {
        writeln!(src, "  let b{i} = if b{j} > 0.5 then sin(b{j}) else cos(b{j}) * 0.5", j = i - 1).unwrap();
    }
    writeln!(src, "  in b{m}").unwrap();
    write(&dir, "live.arr", &src);

    let x = 0.3f64;
    let (mut value, mut derivative) = (0.0, 0.0);
    for i in 1..=n {
        let k = i as f64;
        value += (x * k).sin();
        derivative += k * (x * k).cos();
    }
    let (v, g) = grad(&dir, "live.arr", "f", "[0.3]");
    assert!(close(v, value, 1e-9) && close(num(&g), derivative, 1e-8), "f: {v} {g}, want {value} {derivative}");

    let (mut b, mut db) = (0.9f64, 1.0f64);
    for _ in 0..m {
        (b, db) = if b > 0.5 { (b.sin(), b.cos() * db) } else { (b.cos() * 0.5, -b.sin() * 0.5 * db) };
    }
    let (v, g) = grad(&dir, "live.arr", "g", "[0.9]");
    assert_close("g", v, b);
    assert_close("g'", num(&g), db);

    let out = arrayad(&dir, &["build", "live.arr", "-o", "liblive.so"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let header = std::fs::read_to_string(dir.join("liblive.h")).expect("header");
    assert!(header.contains("f_grad") && header.contains("g_grad"), "{header}");
    // The library's gradients (large functions take the fast register
    // allocator) agree with the JIT's.
    if support::have("cc") {
        let main = "#include <stdio.h>\n#include \"liblive.h\"\n\
            int main(void) { double v, d; int s = f_grad(0.3, &v, &d); printf(\"%d %.17g %.17g\\n\", s, v, d);\n\
            s |= g_grad(0.9, &v, &d); printf(\"%d %.17g %.17g\\n\", s, v, d); return s; }\n";
        write(&dir, "main.c", main);
        let d = dir.to_str().expect("utf-8 path");
        let rpath = format!("-Wl,-rpath,{d}");
        let cc = support::run_in(&dir, "cc", &["main.c", "-L.", "-llive", &rpath, "-o", "main"], None);
        assert_eq!(cc.code, 0, "{cc:#?}");
        let run = support::run_in(&dir, &format!("{d}/main"), &[], None);
        assert_eq!(run.code, 0, "{run:#?}");
        let lines: Vec<Vec<f64>> =
            run.stdout.lines().map(|l| l.split(' ').map(|x| x.parse().expect("number")).collect()).collect();
        assert!(close(lines[0][1], value, 1e-9) && close(lines[0][2], derivative, 1e-8), "{}", run.stdout);
        assert!(close(lines[1][1], b, 1e-9) && close(lines[1][2], db, 1e-9), "{}", run.stdout);
    }
}

#[test]
fn chains_of_array_operations_and_loops_differentiate() {
    // 2000 elementwise operations (fused into one loop) and 1000 reductions
    // and loops at the top level.
    let dir = scratch("scaling", "arrays");
    let n: i32 = 2_000;
    let mut src = String::from("def f(x: [m]f64, y: [m]f64) -> f64 =\n  let v0 = x\n");
    for i in 1..=n {
        writeln!(src, "  let v{i} = v{} * 0.999 + y", i - 1).unwrap();
    }
    writeln!(src, "  in sum(v{n})").unwrap();
    let m = 1_000;
    src.push_str("\ndef g(x: [m]f64, y: [m]f64) -> f64 =\n  let a0 = 0.0\n");
    for i in 1..=m {
        if i % 2 == 0 {
            writeln!(src, "  let a{i} = a{} + dot(x, y) * {i}.0", i - 1).unwrap();
        } else {
            writeln!(src, "  let a{i} = loop s = a{} for k < length(x) do s * 0.5 + x[k]", i - 1).unwrap();
        }
    }
    writeln!(src, "  in a{m}").unwrap();
    write(&dir, "arrays.arr", &src);

    let (x, y) = ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]);
    let args = "[[1, 2, 3], [4, 5, 6]]";
    let scale = 0.999f64.powi(n);
    let sum_y: f64 = y.iter().sum();
    let sum_x: f64 = x.iter().sum();
    let want = sum_x * scale + sum_y * (1.0 - scale) / (1.0 - 0.999);
    let (v, g) = grad(&dir, "arrays.arr", "f", args);
    assert!(close(v, want, 1e-9), "f: {v} vs {want}");
    for d in nums(&g) {
        assert!(close(d, scale, 1e-9), "df/dx: {g}");
    }

    // g by the same steps in Rust, forward mode on x[0].
    let dot: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
    let (mut a, mut da) = (0.0f64, 0.0f64);
    for i in 1..=m {
        if i % 2 == 0 {
            (a, da) = (a + dot * i as f64, da + y[0] * i as f64);
        } else {
            for (k, xk) in x.iter().enumerate() {
                (a, da) = (a * 0.5 + xk, da * 0.5 + if k == 0 { 1.0 } else { 0.0 });
            }
        }
    }
    let (v, g) = grad(&dir, "arrays.arr", "g", args);
    assert_close("g", v, a);
    assert_close("dg/dx0", nums(&g)[0], da);

    // 4000 reads at literal indices (each checked, each index a constant):
    // h(x) = sum_i x[i] x[n - i].
    let n = 2_000;
    let mut src = String::from("def h(x: [m]f64) -> f64 =\n  let a0 = 0.0\n");
    for i in 1..=n {
        writeln!(src, "  let a{i} = a{} + x[{i}] * x[{}]", i - 1, n - i).unwrap();
    }
    writeln!(src, "  in a{n}").unwrap();
    write(&dir, "literal.arr", &src);
    let x: Vec<f64> = (0..=n).map(|k| 1.0 + k as f64 / n as f64).collect();
    let args = format!("[{}]", serde_json::to_string(&x).unwrap());
    let want: f64 = (1..=n).map(|i| x[i] * x[n - i]).sum();
    let mut dx = vec![0.0; n + 1];
    for i in 1..=n {
        dx[i] += x[n - i];
        dx[n - i] += x[i];
    }
    let (v, g) = grad(&dir, "literal.arr", "h", &args);
    assert_close("h", v, want);
    let got = nums(&g);
    assert_eq!(got.len(), n + 1);
    for (k, (a, b)) in got.iter().zip(&dx).enumerate() {
        assert!(close(*a, *b, 1e-12), "dh/dx[{k}]: {a} vs {b}");
    }
}

#[test]
fn ten_thousand_definitions_compile_and_build() {
    let dir = scratch("scaling", "definitions");
    let n = 10_000;
    let mut src = String::new();
    for i in 1..=n {
        writeln!(src, "def g{i}(x: f64) -> f64 = sin(x) * {i}.0 + x").unwrap();
    }
    write(&dir, "defs.arr", &src);
    let out = arrayad(&dir, &["check", "defs.arr"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let (v, g) = grad(&dir, "defs.arr", &format!("g{n}"), "[0.5]");
    assert_close("value", v, 0.5f64.sin() * n as f64 + 0.5);
    assert_close("gradient", num(&g), 0.5f64.cos() * n as f64 + 1.0);
    // A library of some of them: the others cost nothing.
    let out = arrayad(&dir, &["build", "defs.arr", "-o", "libdefs.so", "--export", "g1,g5000,g10000"]);
    assert_eq!(out.code, 0, "{out:#?}");
}

#[test]
fn a_chain_of_five_thousand_calls_runs_and_builds() {
    let dir = scratch("scaling", "calls");
    let n = 5_000;
    let mut src = String::from("def g0(x: f64) -> f64 = x\n");
    for i in 1..=n {
        writeln!(src, "def g{i}(x: f64) -> f64 = g{}(x) + 1.0", i - 1).unwrap();
    }
    write(&dir, "calls.arr", &src);
    assert_eq!(arrayad(&dir, &["check", "calls.arr"]).code, 0);
    let out = arrayad(&dir, &["run", "calls.arr", &format!("g{n}"), "--args", "[0.5]"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(num(&out.json()["value"]), n as f64 + 0.5);
    let (v, g) = grad(&dir, "calls.arr", &format!("g{n}"), "[0.5]");
    assert_eq!((v, num(&g)), (n as f64 + 0.5, 1.0));
    let out = arrayad(&dir, &["build", "calls.arr", "-o", "libcalls.so", "--export", &format!("g{n}")]);
    assert_eq!(out.code, 0, "{out:#?}");
    // Every definition exported: each one inlines the chain below it, so
    // the library would hold n^2/2 statements. A limit, not an abort.
    let out = arrayad(&dir, &["build", "calls.arr", "-o", "liball.so"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("program too large after inlining"), "{}", out.stderr);
    assert!(out.stderr.contains("export fewer"), "{}", out.stderr);
    assert!(out.stderr.contains("calls.arr:"), "{}", out.stderr);
}

/// `k` definitions of `depth` nested `if`s, each wrapping a call of the
/// previous one: nested `k * depth` deep once inlined. With `x = 0.5` every
/// condition holds: `h_j(x) = 2 x + j`.
fn nested_ifs(k: usize, depth: usize) -> String {
    let mut src = String::new();
    for j in 0..k {
        writeln!(src, "def h{j}(x: f64) -> f64 =").unwrap();
        for i in 0..depth {
            writeln!(src, "  if x > -{i}.0 then").unwrap();
        }
        if j == 0 {
            src.push_str("  x * 2.0\n");
        } else {
            writeln!(src, "  h{}(x) + 1.0", j - 1).unwrap();
        }
        for i in 0..depth {
            writeln!(src, "  else {i}.0").unwrap();
        }
    }
    src
}

/// `FILE:LINE:COL` after `file` in `text`, as numbers.
fn location(text: &str, file: &str) -> (usize, usize) {
    let at = text.find(&format!("{file}:")).unwrap_or_else(|| panic!("no location in {text}"));
    let mut parts = text[at + file.len() + 1..].split(|c: char| !c.is_ascii_digit());
    let line = parts.next().and_then(|s| s.parse().ok()).expect("line");
    let col = parts.next().and_then(|s| s.parse().ok()).expect("column");
    (line, col)
}

#[test]
fn nesting_deeper_than_the_limit_after_inlining_is_a_located_error() {
    let dir = scratch("scaling", "nesting");
    let (k, depth) = (25, 250);
    let src = nested_ifs(k, depth);
    write(&dir, "ifs.arr", &src);
    assert_eq!(arrayad(&dir, &["check", "ifs.arr"]).code, 0);
    // 1000 deep: within the limit, differentiated and built.
    let (v, g) = grad(&dir, "ifs.arr", "h3", "[0.5]");
    assert_eq!((v, num(&g)), (4.0, 2.0));
    let out = arrayad(&dir, &["build", "ifs.arr", "-o", "libifs.so", "--export", "h3"]);
    assert_eq!(out.code, 0, "{out:#?}");
    // 6250 deep once inlined: the value and the gradient keep the calls
    // that cross the limit (h3 in h4, ...), and are within it.
    let (v, g) = grad(&dir, "ifs.arr", "h24", "[0.5]");
    assert_eq!((v, num(&g)), (25.0, 2.0));
    // So do the Hessian (forward over reverse, through the jvps of the
    // callees' vjps) and a library of every entry.
    let out = arrayad(&dir, &["run", "ifs.arr", "h24", "--args", "[0.5]", "--hessian"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["hessian"], serde_json::json!([[0.0]]), "{}", out.stdout);
    let out = arrayad(&dir, &["build", "ifs.arr", "-o", "libifs.so"]);
    assert_eq!(out.code, 0, "{out:#?}");
    // With every call inlined: an error at the call that crosses the
    // limit (in h4).
    for argv in [
        &["run", "ifs.arr", "h24", "--args", "[0.5]", "--keep-calls-above", "100000000"][..],
        &["build", "ifs.arr", "-o", "libifs.so", "--keep-calls-above", "100000000"],
    ] {
        let out = arrayad(&dir, argv);
        assert_eq!(out.code, 2, "{argv:?}: {out:#?}");
        assert!(out.stderr.contains("program nested too deeply after inlining"), "{}", out.stderr);
        assert!(out.stderr.contains("(limit 1000)"), "{}", out.stderr);
        let (line, col) = location(&out.stderr, "ifs.arr");
        let text = src.lines().nth(line - 1).expect("the line exists");
        assert!(text[col - 1..].starts_with("h3("), "{line}:{col} is `{text}`: {}", out.stderr);
    }
}

#[test]
fn exponential_inlining_is_a_located_error() {
    // g_i calls g_{i-1} twice: 2^24 copies of g0 once inlined.
    let dir = scratch("scaling", "exponential");
    let mut src = String::from("def g0(x: f64) -> f64 = sin(x)\n");
    for i in 1..=24 {
        writeln!(src, "def g{i}(x: f64) -> f64 = g{j}(x) + g{j}(x * 0.5)", j = i - 1).unwrap();
    }
    write(&dir, "exp.arr", &src);
    assert_eq!(arrayad(&dir, &["check", "exp.arr"]).code, 0);
    // The value keeps the large callees as calls (2^24 calls of `g0`):
    // g24(x) = sum_k C(24, k) sin(x / 2^k).
    let out = arrayad(&dir, &["run", "exp.arr", "g24", "--args", "[0.5]"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let (mut want, mut c) = (0.0f64, 1.0f64);
    for k in 0..=24 {
        want += c * (0.5 * 0.5f64.powi(k)).sin();
        c = c * (24 - k) as f64 / (k + 1) as f64;
    }
    let got: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let got = got["value"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-9 * want.abs(), "{got} against {want}");
    // So does the gradient: g24'(x) = sum_k C(24, k) cos(x / 2^k) / 2^k.
    let (mut want, mut c) = (0.0f64, 1.0f64);
    for k in 0..=24 {
        want += c * (0.5 * 0.5f64.powi(k)).cos() * 0.5f64.powi(k);
        c = c * (24 - k) as f64 / (k + 1) as f64;
    }
    let (_, g) = grad(&dir, "exp.arr", "g24", "[0.5]");
    assert!((num(&g) - want).abs() <= 1e-9 * want.abs(), "{g} against {want}");
    // And the Hessian: g24''(x) = -sum_k C(24, k) sin(x / 2^k) / 4^k.
    let (mut want, mut c) = (0.0f64, 1.0f64);
    for k in 0..=24 {
        want -= c * (0.5 * 0.5f64.powi(k)).sin() * 0.25f64.powi(k);
        c = c * (24 - k) as f64 / (k + 1) as f64;
    }
    let out = arrayad(&dir, &["run", "exp.arr", "g24", "--args", "[0.5]", "--hessian"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let h = num(&out.json()["hessian"][0][0]);
    assert!((h - want).abs() <= 1e-9 * want.abs(), "{h} against {want}");
    assert_eq!(arrayad(&dir, &["build", "exp.arr", "-o", "libexp.so"]).code, 0);
    for argv in [
        &["run", "exp.arr", "g24", "--args", "[0.5]", "--keep-calls-above", "100000000"][..],
        &["build", "exp.arr", "-o", "libexp.so", "--keep-calls-above", "100000000"],
        &["emit", "exp.arr", "--stage", "vjp", "--function", "g24", "--keep-calls-above", "100000000"],
    ] {
        let out = arrayad(&dir, argv);
        assert_eq!(out.code, 2, "{argv:?}: {out:#?}");
        assert!(out.stderr.contains("program too large after inlining"), "{}", out.stderr);
        assert!(out.stderr.contains("statements)"), "the limit: {}", out.stderr);
        let (line, col) = location(&out.stderr, "exp.arr");
        let text = src.lines().nth(line - 1).expect("the line exists");
        assert!(text[col - 1..].starts_with(&format!("g{}(", line - 2)), "{line}:{col} is `{text}`");
    }
    // With the calls `build` keeps, `emit` shows them as calls.
    let out = arrayad(&dir, &["emit", "exp.arr", "--stage", "vjp", "--function", "g24"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("_vjp("), "kept calls of derivatives: {}", out.stdout);
    // g10(x) = sum_k C(10, k) sin(x / 2^k) is small enough.
    let x = 0.5f64;
    let (mut value, mut derivative, mut c) = (0.0, 0.0, 1.0);
    for k in 0..=10 {
        let s = 0.5f64.powi(k);
        value += c * (x * s).sin();
        derivative += c * s * (x * s).cos();
        c = c * (10 - k) as f64 / (k + 1) as f64;
    }
    let (v, g) = grad(&dir, "exp.arr", "g10", "[0.5]");
    assert_close("g10", v, value);
    assert_close("g10'", num(&g), derivative);
}

#[test]
fn deep_programs_compile_from_a_thread_with_a_small_stack() {
    // The Rust API compiles on a thread of its own: 1000 nested blocks from
    // a thread of 1 MiB.
    let src = nested_ifs(4, 250);
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let module = arrayad::Module::compile("ifs.arr", &src).expect("compiles");
            module.function("h3").expect("h3").grad(&[arrayad::Arg::F64(0.5)]).map(|g| g.value)
        })
        .expect("spawn");
    assert_eq!(handle.join().expect("no overflow").expect("gradient"), 4.0);
}

#[test]
fn doubling_chain_beyond_the_inlining_limit_differentiates_through_kept_calls() {
    // f_k = f_{k-1} . f_{k-1}: 2^21 applications of f0, over the inlining
    // limit once inlined (refused beyond k = 20); its large definitions
    // are kept as calls, and so are their jvps and vjps.
    let dir = scratch("scaling", "doubling");
    let mut src = String::from("def f0(x: f64) -> f64 = x + 0.0000001 * sin(x)\n");
    for k in 1..=21 {
        writeln!(src, "def f{k}(x: f64) -> f64 = f{j}(f{j}(x))", j = k - 1).unwrap();
    }
    // `h` runs reverse mode with a loop inside; `h2` runs the straight-line
    // gradient of `f1`, which the optimiser leaves without mutable
    // variables or effects: ordinary code, differentiated with its calls
    // kept.
    src.push_str("def g1(x: f64) -> f64 = loop s = x for i < 9 do f0(s)\n");
    src.push_str("def h(x: f64) -> f64 = grad(g1, x) * f21(x)\n");
    src.push_str("def h2(x: f64) -> f64 = grad(f1, x) * f21(x)\n");
    write(&dir, "chain.arr", &src);
    // The value x, first derivative d and second derivative h after
    // `steps` steps of the chain x' = x + e sin x from 0.3.
    let along = |steps: u64| {
        let (mut x, mut d, mut h) = (0.3f64, 1.0f64, 0.0f64);
        for _ in 0..steps {
            h = h * (1.0 + 0.0000001 * x.cos()) - d * d * 0.0000001 * x.sin();
            d *= 1.0 + 0.0000001 * x.cos();
            x += 0.0000001 * x.sin();
        }
        (x, d, h)
    };
    let (x, d, h) = along(1 << 21);
    let (v, g) = grad(&dir, "chain.arr", "f21", "[0.3]");
    assert!(close(v, x, 1e-12) && close(num(&g), d, 1e-9), "{v} {g} against {x} {d}");
    let out = arrayad(&dir, &["run", "chain.arr", "f21", "--args", "[0.3]", "--jvp", "[2.0]"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(close(num(&out.json()["tangent"]), 2.0 * d, 1e-9), "{}", out.stdout);
    // The Hessian: forward over reverse, through the jvps of the vjps.
    let out = arrayad(&dir, &["run", "chain.arr", "f21", "--args", "[0.3]", "--hessian"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(close(num(&out.json()["hessian"][0][0]), h, 1e-9), "{} against {h}", out.stdout);
    // A library of every entry builds; with every call inlined it is
    // refused.
    let chain = (1..=21).map(|k| format!("f{k}")).collect::<Vec<_>>().join(",");
    let out = arrayad(&dir, &["build", "chain.arr", "-o", "libchain.so", "--export", &chain]);
    assert_eq!(out.code, 0, "{out:#?}");
    let out = arrayad(
        &dir,
        &["build", "chain.arr", "-o", "libchain.so", "--export", "f21", "--keep-calls-above", "100000000"],
    );
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("program too large after inlining"), "{}", out.stderr);
    // A definition running reverse mode inside keeps the calls in its
    // value and jvp; its reverse mode inlines every call, and is refused
    // with the message that names the call.
    let out = arrayad(&dir, &["run", "chain.arr", "h", "--args", "[0.3]", "--jvp", "[1.0]"]);
    assert_eq!(out.code, 0, "{out:#?}");
    // h2 = f1' f21, whose derivative is f1'' f21 + f1' f21'.
    let (_, d1, h1) = along(2);
    let (v2, g2) = grad(&dir, "chain.arr", "h2", "[0.3]");
    assert!(close(v2, d1 * x, 1e-12) && close(num(&g2), h1 * x + d1 * d, 1e-9), "{v2} {g2}");
    for argv in [
        &["run", "chain.arr", "h", "--args", "[0.3]", "--grad"][..],
        &["build", "chain.arr", "-o", "libh.so", "--export", "h", "--entries", "jacobian"],
    ] {
        let out = arrayad(&dir, argv);
        assert_eq!(out.code, 2, "{argv:?}: {out:#?}");
        assert!(out.stderr.contains("program too large after inlining"), "{}", out.stderr);
    }
}
