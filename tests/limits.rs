//! Resource limits: a call whose memory would exceed the limit fails with
//! the out-of-memory error (exit 3) naming the allocating statement, in
//! the primal and in the reverse pass, on every backend (the interpreter
//! included), through
//! the command line (`--max-memory`), the Rust API and a shared library
//! (`ARRAYAD_MAX_MEMORY`); run-time messages arrive whole whatever their
//! length; a thread of a shared library keeps a bounded amount of memory
//! and can release it.

mod support;

use arrayad::{Backend, ErrorKind, Module, Options, Value};
use std::path::Path;
use std::process::Command;
use support::{arrayad, have, scratch};

const PROGRAM: &str = "\
def it5(x: [n]f64, t: i64) -> f64 =
  sum(loop h = x for s < t do h + 0.001 * sin(h * 1.3 + 0.2))

def big(n: i64) -> f64 =
  let a = for i < n => f64(i)
  in sum(a * a)
";

fn compiled_backends() -> Vec<&'static str> {
    if cfg!(feature = "llvm") {
        vec!["cranelift", "llvm"]
    } else {
        vec!["cranelift"]
    }
}

fn ones(n: usize) -> String {
    format!("[{}]", vec!["1"; n].join(","))
}

/// `arrayad ARGV` must exit with 3 and say out of memory at `at`.
fn out_of_memory(dir: &Path, argv: &[&str], at: &str) {
    let out = arrayad(dir, argv);
    assert_eq!(out.code, 3, "arrayad {argv:?}: {out:#?}");
    assert!(out.stderr.contains("out of memory"), "{out:#?}");
    assert!(out.stderr.contains(at), "the message must name {at}: {out:#?}");
    assert!(out.stderr.contains("ARRAYAD_MAX_MEMORY"), "the message must name the limit: {out:#?}");
}

#[test]
fn the_memory_limit_fails_with_a_located_out_of_memory_error() {
    let dir = scratch("limits", "cli");
    std::fs::write(dir.join("prog.arr"), PROGRAM).unwrap();
    let args = format!("[{}, 4000]", ones(1000));
    // The interpreter counts its arrays and tape as compiled code does.
    for backend in compiled_backends().into_iter().chain(["interp"]) {
        // Within the limit: the primal runs in O(n), the gradient's
        // residuals are 4000 x 1000 x 8 bytes = 32 MB.
        for extra in [&[][..], &["--grad"][..]] {
            let mut argv = vec!["run", "prog.arr", "it5", "--args", &args, "--backend", backend, "--max-memory", "64M"];
            argv.extend_from_slice(extra);
            let out = arrayad(&dir, &argv);
            assert_eq!(out.code, 0, "{out:#?}");
        }
        // The primal in 1 MiB (the loop state is 8 KB), the gradient not in
        // 4 MiB: it fails in the loop of line 2, not at FILE:0:0.
        let base = ["run", "prog.arr", "it5", "--args", &args, "--backend", backend, "--max-memory", "1M"];
        let out = arrayad(&dir, &base);
        assert_eq!(out.code, 0, "{out:#?}");
        let base = ["run", "prog.arr", "it5", "--args", &args, "--backend", backend, "--max-memory", "4M"];
        let mut grad = base.to_vec();
        grad.push("--grad");
        out_of_memory(&dir, &grad, "prog.arr:2:");
        let mut cp = grad.clone();
        cp.push("--checkpoint");
        let out = arrayad(&dir, &cp);
        assert_eq!(out.code, 0, "checkpointing needs ~sqrt(n) states: {out:#?}");
        // A large array in the primal: 10^8 x 8 bytes.
        let big = ["run", "prog.arr", "big", "--args", "[100000000]", "--backend", backend, "--max-memory", "16M"];
        out_of_memory(&dir, &big, "prog.arr:5:");
    }
    // Malformed sizes are usage errors.
    for bad in ["0", "12X", "-5", "99999999999999999999T"] {
        let out = arrayad(&dir, &["run", "prog.arr", "big", "--args", "[1]", "--max-memory", bad]);
        assert_eq!(out.code, 2, "--max-memory {bad}: {out:#?}");
    }
}

/// `arrayad run F f --args FILE` in `dir` under `ulimit -v KB`.
fn run_under_ulimit(dir: &Path, kb: u64, args_file: &str) -> support::Output {
    let script = format!("ulimit -v {kb} && exec \"$0\" run sum.arr total --args {args_file}");
    support::run_in(dir, "sh", &["-c", &script, env!("CARGO_BIN_EXE_arrayad")], None)
}

/// JSON arguments are decoded into one typed buffer per argument as the
/// text is parsed (no tree of JSON values at 32 bytes and more per
/// number): 10^7 numbers fit in an address space of 1,000 MB (the binary,
/// the reserved stacks of its threads and the first arena of its small-
/// block allocator take most of it), and arguments
/// beyond the memory available are the out-of-memory error (exit 3), never
/// an abort.
#[test]
fn json_arguments_beyond_the_memory_available_are_out_of_memory() {
    if !have("sh") {
        eprintln!("skipped: no sh");
        return;
    }
    let dir = scratch("limits", "json_args");
    std::fs::write(dir.join("sum.arr"), "def total(x: [n]f64) -> f64 = sum(x)\n").unwrap();
    let ones = |n: usize| {
        let mut text = String::with_capacity(2 * n + 4);
        text.push_str("[[");
        for i in 0..n {
            text.push_str(if i == 0 { "1" } else { ",1" });
        }
        text.push_str("]]");
        text
    };
    std::fs::write(dir.join("small.json"), ones(3)).unwrap();
    std::fs::write(dir.join("e7.json"), ones(10_000_000)).unwrap();
    std::fs::write(dir.join("e8.json"), ones(60_000_000)).unwrap();
    let out = run_under_ulimit(&dir, 1_000_000, "small.json");
    assert_eq!(out.code, 0, "the command must run under the limit: {out:#?}");
    let out = run_under_ulimit(&dir, 1_000_000, "e7.json");
    assert_eq!((out.code, out.stdout.trim()), (0, "{\"value\": 10000000.0}"), "{out:#?}");
    // 120 MB of text, 480 MB of elements and the binary's own address space.
    let out = run_under_ulimit(&dir, 600_000, "e8.json");
    assert_eq!(out.code, 3, "{out:#?}");
    assert!(out.stderr.contains("error[E1008]: out of memory: ARGS"), "{out:#?}");
}

#[test]
fn the_rust_api_takes_a_memory_limit() {
    let backends: &[Backend] = if cfg!(feature = "llvm") {
        &[Backend::Cranelift, Backend::Llvm, Backend::Interp]
    } else {
        &[Backend::Cranelift, Backend::Interp]
    };
    for &backend in backends {
        let options = Options::backend(backend).with_max_memory(1 << 20);
        let m = Module::compile_with("prog.arr", PROGRAM, options).unwrap();
        let f = m.function("big").unwrap();
        assert_eq!(f.call_values(&[Value::I64(1000)]).unwrap()[0], Value::F64(332833500.0));
        let err = f.call_values(&[Value::I64(1_000_000)]).unwrap_err();
        assert_eq!(err.runtime_kind(), Some(ErrorKind::OutOfMemory), "{err}");
        assert!(err.to_string().contains("prog.arr:5:"), "{err}");
    }
}

/// `f(x) = sin(x) + sin(2x) + ... + sin(nx)`, every term bound before the
/// sum: `n` values alive at once.
fn many_live(n: usize) -> String {
    let mut src = String::from("def f(x: f64) -> f64 =\n");
    for i in 1..=n {
        src += &format!("  let a{i} = sin(x * {i}.0)\n");
    }
    src += "  let s1 = a1\n";
    for i in 2..=n {
        src += &format!("  let s{i} = s{} + a{i}\n", i - 1);
    }
    src + &format!("  in s{n}\n")
}

#[test]
fn a_frame_larger_than_the_stack_left_is_out_of_memory() {
    // 12,000 values alive at once take a stack frame of about 100 KB in
    // Cranelift's code, which a guard checks against the stack before the
    // function's prologue writes it. (LLVM's code probes its frame: a
    // stack overflow there faults rather than writing below the stack.)
    let n = 12_000;
    let m = Module::compile_with("live.arr", &many_live(n), Options::backend(Backend::Cranelift)).unwrap();
    let f = m.function("f").unwrap();
    let x = [Value::F64(0.3)];
    let on_thread = |stack: usize| {
        std::thread::scope(|s| {
            let t = std::thread::Builder::new().stack_size(stack);
            t.spawn_scoped(s, || f.call_values(&x)).unwrap().join().unwrap()
        })
    };
    // 128 KiB less the 64 KiB kept for the runtime: not enough.
    let err = on_thread(128 << 10).unwrap_err();
    assert_eq!(err.runtime_kind(), Some(ErrorKind::OutOfMemory), "{err}");
    let msg = err.to_string();
    assert!(msg.starts_with("live.arr:1:1: out of memory: the compiled code of `f` needs a stack frame of"), "{msg}");
    // The same call on a thread with the stack for it.
    let want: f64 = (1..=n).map(|i| (0.3 * i as f64).sin()).sum();
    let Value::F64(got) = on_thread(2 << 20).unwrap()[0] else { panic!("not an f64") };
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{got} against {want}");
}

#[test]
fn libraries_with_guarded_frames_are_the_same_for_any_number_of_threads() {
    // Cranelift compiles on several threads; a function with a large
    // frame gets a guard (`f__primal.body` behind `f__primal`). The
    // library must not depend on which thread finished first.
    let dir = scratch("limits", "threads");
    std::fs::write(dir.join("live.arr"), many_live(6_000)).unwrap();
    let build = |threads: &str| {
        let lib = format!("t{threads}/liblive.so");
        std::fs::create_dir_all(dir.join(format!("t{threads}"))).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_arrayad"))
            .current_dir(&dir)
            .env("ARRAYAD_NUM_THREADS", threads)
            .args(["build", "live.arr", "-o", &lib, "--backend", "cranelift"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::read(dir.join(&lib)).unwrap()
    };
    let one = build("1");
    assert!(one.windows(5).any(|w| w == b".body"), "no function was guarded");
    assert!(build("3") == one, "the library built on 3 threads differs from the one built on 1");
}

#[test]
fn messages_of_any_length_arrive_whole() {
    // A source path of ~600 characters: the location at the end of the
    // path must survive.
    let dir = scratch("limits", "long");
    let mut deep = dir.clone();
    for k in 0..10 {
        deep = deep.join(format!("{k}-{}", "d".repeat(50)));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let file = deep.join("prog.arr");
    std::fs::write(&file, "def get(x: [n]f64, i: i64) -> f64 = x[i]\n").unwrap();
    let path = file.to_str().unwrap();
    assert!(path.len() > 500);
    for backend in compiled_backends() {
        let out = arrayad(&dir, &["run", path, "get", "--args", "[[1, 2], 7]", "--backend", backend]);
        assert_eq!(out.code, 3, "{out:#?}");
        assert!(out.stderr.contains(&format!("{path}:1:")), "{out:#?}");
        assert!(out.stderr.contains("index out of bounds"), "{out:#?}");
        // and through a shared library
        if !have("cc") {
            continue;
        }
        let lib = dir.join(format!("libget_{backend}.so"));
        let out = arrayad(&dir, &["build", path, "-o", lib.to_str().unwrap(), "--backend", backend]);
        assert_eq!(out.code, 0, "{out:#?}");
        let main = format!(
            "#include <stdio.h>\n#include \"libget_{backend}.h\"\n\
             int main(void) {{ double x[2] = {{1, 2}}, v; int32_t s = get(2, x, 7, &v);\n\
             printf(\"%d\\n%s\\n\", s, get_{backend}_last_error()); return 0; }}\n"
        );
        let stdout = run_c(&dir, &main, &format!("get_{backend}"), &[]);
        assert_ne!(stdout.lines().next(), Some("0"), "{stdout}");
        assert!(stdout.contains(&format!("{path}:1:")), "{stdout}");
        assert!(stdout.contains("index out of bounds"), "{stdout}");
    }
}

/// Compiles `main` against `lib{lib}.so` in `dir` and runs it with the
/// environment `env`; returns its standard output.
fn run_c(dir: &Path, main: &str, lib: &str, env: &[(&str, &str)]) -> String {
    std::fs::write(dir.join("main.c"), main).unwrap();
    let out = Command::new("cc")
        .current_dir(dir)
        .args(["-std=c99", "-Wall", "-Werror", "main.c", "-o", "main", "-I.", "-L."])
        .arg(format!("-l{lib}"))
        .args(["-Wl,-rpath,$ORIGIN", "-lm"])
        .output()
        .unwrap();
    assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
    let mut cmd = Command::new(dir.join("main"));
    cmd.current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "main: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Builds `lib{name}.so` from `source` (as `{name}.arr`) with `backend` in
/// the scratch directory `dir`, which it returns.
fn build_library(dir: &str, name: &str, source: &str, backend: &str) -> std::path::PathBuf {
    let dir = scratch("limits", dir);
    std::fs::write(dir.join(format!("{name}.arr")), source).unwrap();
    let (src, lib) = (format!("{name}.arr"), format!("lib{name}.so"));
    let out = arrayad(&dir, &["build", &src, "-o", &lib, "--backend", backend]);
    assert_eq!(out.code, 0, "{out:#?}");
    dir
}

#[test]
fn libraries_take_the_limit_from_the_environment_and_release_memory() {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the shared-library limit test");
        return;
    }
    for backend in compiled_backends() {
        let dir = build_library(&format!("lib_{backend}"), "prog", PROGRAM, backend);
        let main = "#include <stdio.h>\n#include \"libprog.h\"\n\
             int main(void) {\n\
               double v = 0;\n\
               int32_t s = big(1000000, &v);\n\
               printf(\"%d %s\\n\", s, s ? prog_last_error() : \"ok\");\n\
               prog_release_memory();\n\
               s = big(1000, &v);\n\
               printf(\"%d %.1f\\n\", s, v);\n\
               prog_release_memory(); prog_release_memory();\n\
               return 0; }\n";
        let limited = run_c(&dir, main, "prog", &[("ARRAYAD_MAX_MEMORY", "1M")]);
        let mut lines = limited.lines();
        let first = lines.next().unwrap();
        assert!(first.starts_with("8 "), "{limited}");
        assert!(first.contains("out of memory") && first.contains("prog.arr:5:"), "{limited}");
        assert_eq!(lines.next(), Some("0 332833500.0"), "{limited}");
        let free = run_c(&dir, main, "prog", &[("ARRAYAD_MAX_MEMORY", "1G"), ("ARRAYAD_KEEP_MEMORY", "0")]);
        assert!(free.starts_with("0 ok\n0 332833500.0"), "{free}");
        // a malformed value falls back to the default limit
        let bad = run_c(&dir, main, "prog", &[("ARRAYAD_MAX_MEMORY", "lots")]);
        assert!(bad.starts_with("0 ok\n"), "{bad}");
    }
}

/// Repeated calls reuse the memory the thread kept from the last one
/// instead of page-faulting it in again (the keep cap is a quarter of the
/// memory limit by default), and a call larger than the kept memory
/// replaces it rather than adding to it.
#[test]
fn repeated_calls_do_not_fault_their_memory_in_again() {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping");
        return;
    }
    let dir = scratch("limits", "faults");
    // The gradient of a loop tapes about 16 MB per 10^6 elements and step.
    let src = "def g(x: [n]f64, t: i64) -> f64 = sum(loop h = x for s < t do h + 0.1 * sin(h))\n";
    std::fs::write(dir.join("prog.arr"), src).unwrap();
    let out = arrayad(&dir, &["build", "prog.arr", "-o", "libprog.so", "--entries", "grad", "--wrt", "x"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let main = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include "libprog.h"
static long faults(void) { struct rusage u; getrusage(RUSAGE_SELF, &u); return u.ru_minflt; }
static long peak_kb(void) { struct rusage u; getrusage(RUSAGE_SELF, &u); return u.ru_maxrss; }
/* argv[1] = "repeat": 3 calls of 10^6 elements after a first one, the
   faults per call; "grow": calls of 2^k * 10^5 elements up to 1.6 * 10^6;
   "largest": that last call alone (the peak RSS of each). */
int main(int argc, char **argv) {
    long n = 1600000, k;
    double *x = calloc(n, sizeof *x), *dx = calloc(n, sizeof *dx), v;
    if (!x || !dx || argc != 2) return 1;
    if (argv[1][0] == 'r') {
        long f0;
        if (g_grad(1000000, x, 8, &v, dx)) return 1;
        f0 = faults();
        for (k = 0; k < 3; k++) if (g_grad(1000000, x, 8, &v, dx)) return 1;
        printf("%ld\n", (faults() - f0) / 3);
    } else {
        for (k = argv[1][0] == 'g' ? 100000 : n; k <= n; k *= 2) if (g_grad(k, x, 8, &v, dx)) return 1;
        printf("%ld\n", peak_kb());
    }
    return 0;
}
"#;
    let run = |arg: &str, env: &[(&str, &str)]| -> i64 {
        std::fs::write(dir.join("main.c"), main).unwrap();
        let cc = Command::new("cc")
            .current_dir(&dir)
            .args(["-std=c99", "-D_DEFAULT_SOURCE", "-Wall", "-Werror", "main.c", "-o", "main", "-I.", "-L.", "-lprog"])
            .args(["-Wl,-rpath,$ORIGIN", "-lm"])
            .output()
            .unwrap();
        assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
        let mut cmd = Command::new(dir.join("main"));
        cmd.arg(arg).envs(env.iter().copied());
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "main {arg}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().parse().unwrap()
    };
    // Kept: a handful of faults per call. With a 1 MiB cap (nothing kept),
    // every call faults its ~140 MB in again: tens of thousands.
    let kept = run("repeat", &[]);
    let dropped = run("repeat", &[("ARRAYAD_KEEP_MEMORY", "1M")]);
    assert!(kept < 500, "{kept} faults per repeated call");
    assert!(dropped > 10 * kept.max(100), "{dropped} faults per call without keeping vs {kept}");
    // Growing calls: the peak is about that of the largest call alone.
    let grow = run("grow", &[]);
    let largest = run("largest", &[]);
    eprintln!(
        "faults per call: {kept} kept, {dropped} not kept; peak RSS: {grow} KB growing, {largest} KB largest alone"
    );
    assert!((grow as f64) < 1.25 * largest as f64, "peak RSS {grow} KB growing vs {largest} KB for the largest alone");
}

/// A malformed `$ARRAYAD_MAX_MEMORY` or `$ARRAYAD_KEEP_MEMORY` is a usage
/// error (exit 2) naming the variable, not silently the default.
#[test]
fn malformed_memory_variables_are_usage_errors() {
    let dir = scratch("limits", "env");
    std::fs::write(dir.join("prog.arr"), PROGRAM).unwrap();
    let run = |var: &str, value: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
            .args(["run", "prog.arr", "big", "--args", "[10]"])
            .current_dir(&dir)
            .env(var, value)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (var, value, says) in [
        ("ARRAYAD_MAX_MEMORY", "2X", "the suffix must be K, M, G or T"),
        ("ARRAYAD_MAX_MEMORY", "lots", "is not a size"),
        ("ARRAYAD_MAX_MEMORY", "0", "must be positive"),
        ("ARRAYAD_KEEP_MEMORY", "-1", "is not a size"),
        ("ARRAYAD_MAX_MEMORY", "64M ", "spaces"),
    ] {
        let (code, _, stderr) = run(var, value);
        assert_eq!(code, Some(2), "{var}={value}: {stderr}");
        assert!(stderr.contains(&format!("${var}")) && stderr.contains(says), "{var}={value}: {stderr}");
    }
    // Well-formed values run (0 keeps nothing).
    for (var, value) in [("ARRAYAD_MAX_MEMORY", "64M"), ("ARRAYAD_KEEP_MEMORY", "0")] {
        let (code, stdout, stderr) = run(var, value);
        assert_eq!(code, Some(0), "{var}={value}: {stderr}");
        assert!(stdout.contains("\"value\""), "{stdout}");
    }
}

const DEST: &str = "\
def scale(x: [p]f64) -> [p]f64 = for i < p => x[i] * 2.0 + 1.0
def norm2(x: [p]f64) -> f64 = sum(x * x)
def pair(x: [p]f64) -> ([p]f64, [p]f64) = let r = for i < p => x[i] + 1.0 in (r, r)
def rev(x: [p]f64) -> [p]f64 = for i < p => x[p - 1 - i]
def rows(x: [p]f64) -> [p][2]f64 = for i < p => [x[i], 2.0 * x[i]]
";

/// Destination passing: a shared library computes an array result that
/// its definition allocates itself (a comprehension, of scalars or of
/// rows, the gradient's accumulator) directly in the caller's output, so a
/// call whose results alone exceed the memory limit succeeds; an output that overlaps an
/// input (a call in place) is computed in the arena and copied, so a
/// permutation in place stays right, and a result returned twice reaches
/// both outputs.
#[test]
fn results_are_computed_in_the_callers_buffers() {
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the destination-passing test");
        return;
    }
    for backend in compiled_backends() {
        let dir = build_library(&format!("dest_{backend}"), "dest", DEST, backend);
        let main = r#"#include <stdio.h>
#include <stdlib.h>
#include "libdest.h"
int main(void) {
    int64_t p = 400000, i, bad = 0; /* 3.2 MB per array, over the 1 MiB limit */
    double *x = malloc(p * 8), *y = malloc(p * 8), *z = malloc(p * 8), v = 0;
    double s[5] = {1, 2, 3, 4, 5};
    for (i = 0; i < p; i++) x[i] = (double)i;
    printf("scale %d\n", scale(p, x, y));
    for (i = 0; i < p; i++) bad += y[i] != 2.0 * i + 1.0;
    printf("norm2_grad %d\n", norm2_grad(p, x, &v, y));
    for (i = 0; i < p; i++) bad += y[i] != 2.0 * i;
    printf("pair %d\n", pair(p, x, y, z));
    for (i = 0; i < p; i++) bad += y[i] != i + 1.0 || z[i] != i + 1.0;
    {
        double *m = malloc(2 * p * 8);
        printf("rows %d\n", rows(p, x, m));
        for (i = 0; i < p; i++) bad += m[2 * i] != i || m[2 * i + 1] != 2.0 * i;
        free(m);
    }
    printf("rev %d\n", rev(5, s, s));
    printf("reversed %g %g %g\n", s[0], s[2], s[4]);
    printf("in place %d\n", scale(p, x, x) != 0);
    printf("wrong %lld\n", (long long)bad);
    free(x); free(y); free(z);
    return 0;
}
"#;
        let got = run_c(&dir, main, "dest", &[("ARRAYAD_MAX_MEMORY", "1M")]);
        assert_eq!(
            got, "scale 0\nnorm2_grad 0\npair 0\nrows 0\nrev 0\nreversed 5 3 1\nin place 1\nwrong 0\n",
            "{backend}"
        );
    }
}

/// Destination passing in the Rust API: the `_into` calls compute the
/// results that a definition allocates itself in the caller's buffers, so
/// they succeed where the results alone exceed the memory limit (the
/// allocating calls fail there), with the same values.
#[test]
fn into_calls_compute_results_in_the_callers_buffers() {
    use arrayad::{Arg, Out};
    for backend in compiled_backends() {
        let backend = if backend == "llvm" { Backend::Llvm } else { Backend::Cranelift };
        let m = Module::compile_with("dest.arr", DEST, Options::backend(backend).with_max_memory(1 << 20)).unwrap();
        let p = 400_000usize;
        let x: Vec<f64> = (0..p).map(|i| i as f64).collect();
        let mut y = vec![0.0; p];
        let mut z = vec![0.0; p];
        let scale = m.function("scale").unwrap();
        scale.call_into(&[Arg::Vector(&x)], &mut [Out::F64s(&mut y)]).unwrap();
        assert!(y.iter().enumerate().all(|(i, v)| *v == 2.0 * i as f64 + 1.0), "{backend:?}");
        let err = scale.call(&[Arg::Vector(&x)]).unwrap_err();
        assert_eq!(err.runtime_kind(), Some(ErrorKind::OutOfMemory), "{backend:?}: {err}");
        let norm2 = m.function("norm2").unwrap();
        let value = norm2.grad_into(&[Arg::Vector(&x)], &mut [&mut y]).unwrap();
        assert!(y.iter().enumerate().all(|(i, v)| *v == 2.0 * i as f64), "{backend:?}");
        let squares: Vec<f64> = x.iter().map(|v| v * v).collect();
        assert_eq!(value, arrayad_ir::interp::ops::sum_f64(&squares));
        let mut v = 0.0;
        norm2.vjp_into(&[Arg::Vector(&x)], &[Some(Arg::F64(0.5))], &mut [Out::F64(&mut v)], &mut [&mut z]).unwrap();
        assert!(z.iter().enumerate().all(|(i, g)| *g == i as f64), "{backend:?}");
        // A buffer of another element type (of the same size) is not
        // offered: the call reports the mismatch and leaves it as it was.
        let mut wrong = [false; 8];
        let err = scale.call_into(&[Arg::Vector(&[1.0])], &mut [Out::Bools(&mut wrong)]).unwrap_err();
        assert!(matches!(err, arrayad::Error::InvalidArgument(_)), "{backend:?}: {err}");
        assert_eq!(wrong, [false; 8], "{backend:?}");
        let pair = m.function("pair").unwrap();
        pair.call_into(&[Arg::Vector(&x)], &mut [Out::F64s(&mut y), Out::F64s(&mut z)]).unwrap();
        assert!(y.iter().zip(&z).enumerate().all(|(i, (a, b))| *a == i as f64 + 1.0 && a == b), "{backend:?}");
    }
}
