//! Regression tests for defects found by a hostile-user review: inputs that
//! are unusual but legitimate (a byte-order mark), garbage (control bytes,
//! invalid UTF-8), names that clash with the C library, and sizes that
//! overflow.

mod support;

use std::path::Path;
use support::{arrayad, arrayad_stdin, scratch};

/// Asserts that `text` (standard error) is valid UTF-8 without any byte a
/// terminal would interpret (below 0x20 other than newline and tab, DEL).
fn assert_printable(what: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap_or_else(|e| panic!("{what}: not UTF-8 ({e}): {bytes:?}"));
    for (i, c) in text.char_indices() {
        let bad = (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}');
        assert!(!bad, "{what}: character {c:?} at byte {i} of:\n{text}");
    }
}

/// Runs `arrayad` in `dir`, returning the exit status and the raw bytes of
/// standard error (the support helpers decode them lossily).
fn arrayad_raw(dir: &Path, args: &[&str]) -> (i32, Vec<u8>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run arrayad");
    (out.status.code().unwrap_or(-1), out.stderr)
}

// ----------------------------------------------------------------------------
// 1. A byte-order mark in JSON inputs
// ----------------------------------------------------------------------------

const BOM: &str = "\u{feff}";

#[test]
fn json_inputs_may_start_with_a_byte_order_mark() {
    let dir = scratch("hardening", "bom");
    // The source has one too (always accepted).
    std::fs::write(dir.join("f.arr"), format!("{BOM}def f(x: [n]f64, s: f64) -> f64 = s * sum(x)\n")).unwrap();
    std::fs::write(dir.join("args.json"), format!("{BOM}[[1, 2, 3], 2.0]\n")).unwrap();
    std::fs::write(dir.join("t.json"), format!("{BOM}[[1, 0, 0], 0.0]")).unwrap();
    std::fs::write(dir.join("c.json"), format!("{BOM} 1.0")).unwrap();

    let out = arrayad(&dir, &["run", "f.arr", "f", "--args", "args.json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["value"], 12.0);

    // Standard input, and as the source of a tangent or cotangent.
    let out = arrayad_stdin(&dir, &["run", "f.arr", "f", "--args", "-", "--jvp", "t.json"], "\u{feff}[[1, 2, 3], 2.0]");
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["tangent"], 2.0);
    let out = arrayad(&dir, &["run", "f.arr", "f", "--args", "args.json", "--vjp", "c.json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["cotangent"][1], 6.0);

    // Inline text too.
    let inline = format!("{BOM}[[1, 2, 3], 2.0]");
    let out = arrayad(&dir, &["run", "f.arr", "f", "--args", &inline, "--grad"]);
    assert_eq!(out.code, 0, "{out:#?}");

    // Only one mark is skipped; malformed JSON after it is still reported
    // (and line/column count from after the mark).
    std::fs::write(dir.join("bad.json"), format!("{BOM}{BOM}[1]")).unwrap();
    let out = arrayad(&dir, &["run", "f.arr", "f", "--args", "bad.json"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("malformed JSON") && out.stderr.contains("line 1 column 1"), "{out:#?}");
}

// ----------------------------------------------------------------------------
// 2. Garbage bytes in a source file
// ----------------------------------------------------------------------------

#[test]
fn garbage_bytes_in_sources_are_escaped_in_diagnostics() {
    let dir = scratch("hardening", "garbage");
    // Invalid UTF-8 (0xff) after ESC [31m and NUL: the file is rejected as
    // not UTF-8, and the excerpt shows the line without the raw bytes.
    std::fs::write(dir.join("bad.arr"), b"def f(x: f64) -> f64 = x \x1b[31m\x00\xff + 1.0\n").unwrap();
    let (code, err) = arrayad_raw(&dir, &["check", "bad.arr"]);
    assert_eq!(code, 1, "{}", String::from_utf8_lossy(&err));
    assert_printable("check bad.arr", &err);
    let text = String::from_utf8_lossy(&err);
    assert!(text.contains("bad.arr:1:32") && text.contains("not valid UTF-8"), "{text}");

    // Valid UTF-8 full of controls: ESC, NUL, BEL, DEL, a C1 CSI, a
    // right-to-left override, a lone carriage return.
    let src = "def f(x: f64) -> f64 =\n  x \u{1b}[31m \0 \u{7} \u{7f} \u{9b} \u{202e} \r+ 1.0\n";
    std::fs::write(dir.join("ctl.arr"), src).unwrap();
    for cmd in
        [&["check", "ctl.arr"][..], &["run", "ctl.arr", "f", "--args", "[1.0]"], &["emit", "ctl.arr", "--stage", "ir"]]
    {
        let (code, err) = arrayad_raw(&dir, cmd);
        assert_eq!(code, 1, "{cmd:?}: {}", String::from_utf8_lossy(&err));
        assert_printable(&format!("{cmd:?}"), &err);
        let text = String::from_utf8_lossy(&err);
        assert!(text.contains("ctl.arr:2:5") && text.contains("U+001B"), "{cmd:?}: {text}");
        assert!(text.contains("ctl.arr:2:19") && text.contains("`\\u{202e}`"), "{cmd:?}: {text}");
    }

    // A file name with an escape sequence is escaped too, in compile and in
    // usage errors.
    let name = "x\u{1b}[2J.arr";
    std::fs::write(dir.join(name), "def f(x: f64) -> f64 = x +\n").unwrap();
    let (code, err) = arrayad_raw(&dir, &["check", name]);
    assert_eq!(code, 1, "{}", String::from_utf8_lossy(&err));
    assert_printable("check with a control in the file name", &err);
    assert!(String::from_utf8_lossy(&err).contains("x\\u{1b}[2J.arr:"));
    std::fs::write(dir.join("ok.arr"), "def f(x: f64) -> f64 = x\n").unwrap();
    let (code, err) = arrayad_raw(&dir, &["run", "ok.arr", "g\u{1b}[2J", "--args", "[1.0]"]);
    assert_eq!(code, 2, "{}", String::from_utf8_lossy(&err));
    assert_printable("run of an unknown definition", &err);
}

// ----------------------------------------------------------------------------
// 3. Definitions named like the C library's variables, macros and types
// ----------------------------------------------------------------------------

/// The headers a C program calling a shared library plausibly includes
/// before its header.
const SYSTEM_HEADERS: &[&str] = &[
    "math.h",
    "stdio.h",
    "stdlib.h",
    "string.h",
    "unistd.h",
    "time.h",
    "pthread.h",
    "errno.h",
    "assert.h",
    "stddef.h",
    "stdbool.h",
    "stdint.h",
    "getopt.h",
];

/// The identifiers of C source text (string and character literals and
/// comments skipped).
fn identifiers(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(text[start..i].to_string());
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Runs the C compiler `cc` with `args` in `dir`; (success, diagnostics).
fn c_compiler(dir: &Path, cc: &str, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(cc).args(args).current_dir(dir).output().expect("run the C compiler");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// The header of one exported definition `def NAME(x: f64) -> f64 = x`, or
/// `None` when the language has no such definition (a keyword, a builtin).
fn export_named(name: &str) -> Option<arrayad_codegen::ExportedFunction> {
    let program = arrayad_frontend::compile("h.arr", &format!("def {name}(x: f64) -> f64 = x\n")).ok()?;
    let id = arrayad_ir::FuncId(0);
    let f = program.func(id);
    let leaves = arrayad_ad::active_leaves(&f.signature, None);
    let d = support::ad::derive_all(&program, id, &leaves).expect("derive");
    Some(arrayad_codegen::ExportedFunction {
        name: name.to_string(),
        signature: f.signature.clone(),
        active: arrayad_ad::active_params(&f.signature, None),
        entries: None,
        primal: d.primal,
        jvp: Some(d.jvp),
        vjp: Some(d.vjp),
        vjp_rows: Some(d.vjp_rows),
        jvp_lanes: None,
        hvp: None,
    })
}

/// Every name the system headers define (macros) or mention (functions,
/// global variables, types, enumerators, members, ...) is either refused
/// as the name of an export, or the generated header of a definition of
/// that name compiles after all those headers with `-Wall -Werror`, as C
/// and as C++. Macros are always refused: a function named like a macro
/// cannot be called from C that includes the header defining it.
#[test]
fn exports_named_like_anything_of_the_system_headers_are_refused_or_compile() {
    if !support::have("cc") {
        eprintln!("note: no C compiler `cc`: skipping");
        return;
    }
    let dir = scratch("hardening", "c_names");
    let includes: String = SYSTEM_HEADERS.iter().map(|h| format!("#include <{h}>\n")).collect();
    std::fs::write(dir.join("headers.c"), &includes).unwrap();
    let (ok, defines) = c_compiler(&dir, "cc", &["-E", "-dM", "headers.c"]);
    assert!(ok, "cc -E -dM: {defines}");
    let macros: std::collections::BTreeSet<String> = defines
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| identifiers(l).into_iter().next())
        .collect();
    let (ok, preprocessed) = c_compiler(&dir, "cc", &["-E", "-P", "headers.c"]);
    assert!(ok, "cc -E -P failed");
    let mut names: std::collections::BTreeSet<String> = identifiers(&preprocessed).into_iter().collect();
    names.extend(macros.iter().cloned());
    // The names the brief of this test named explicitly must be among them.
    for n in ["stdin", "timezone", "daylight", "tzname", "signgam", "optarg", "optind", "isnan", "assert", "linux"] {
        assert!(names.contains(n), "`{n}` not harvested from the headers");
    }

    let mut unrefused_macros = Vec::new();
    let mut accepted = Vec::new();
    let mut refused = 0;
    for name in &names {
        if arrayad_codegen::reserved_c_symbol(name).is_some() {
            refused += 1;
            continue;
        }
        let Some(export) = export_named(name) else { continue };
        // The other export checks (C keywords) make the header an `#error`.
        if arrayad_codegen::c_header(std::slice::from_ref(&export), "m").starts_with("#error") {
            refused += 1;
            continue;
        }
        if macros.contains(name) {
            unrefused_macros.push(name.clone());
        }
        accepted.push(export);
    }
    assert!(unrefused_macros.is_empty(), "macros of the C headers accepted as export names: {unrefused_macros:?}");
    assert!(refused > 1000 && accepted.len() > 20, "{refused} names refused, {} accepted", accepted.len());

    // One header declaring all accepted names; errors map back to names by
    // the line of the prototype they are reported at.
    let header = arrayad_codegen::c_header(&accepted, "hardening");
    assert!(!header.starts_with("#error"), "{header}");
    std::fs::write(dir.join("hardening.h"), &header).unwrap();
    std::fs::write(dir.join("all.c"), format!("{includes}#include \"hardening.h\"\nint main(void) {{ return 0; }}\n"))
        .unwrap();
    let owner = |line: usize| -> Option<&str> {
        let text = header.lines().nth(line.checked_sub(1)?)?;
        let ident = identifiers(text.strip_prefix("int32_t ")?).into_iter().next()?;
        accepted
            .iter()
            .map(|e| e.name.as_str())
            .find(|n| ["", "_jvp", "_vjp", "_grad", "_jacobian"].iter().any(|s| ident == format!("{n}{s}")))
    };
    let mut compilers = vec![("cc", vec!["-Wall", "-Werror", "-fsyntax-only", "all.c"])];
    if support::have("c++") {
        compilers.push(("c++", vec!["-x", "c++", "-Wall", "-Werror", "-fsyntax-only", "all.c"]));
    }
    for (cc, args) in compilers {
        let (ok, diagnostics) = c_compiler(&dir, cc, &args);
        if ok {
            continue;
        }
        let mut clashing = std::collections::BTreeSet::new();
        for l in diagnostics.lines().filter(|l| l.starts_with("hardening.h:") && l.contains("error")) {
            let line = l.split(':').nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            clashing.insert(owner(line).map_or_else(|| format!("<line {line}>"), str::to_string));
        }
        panic!(
            "{cc}: the header of exports named {clashing:?} does not compile after the system headers \
             (add them to codegen/src/cabi/c_reserved_names.txt):\n{}",
            diagnostics.chars().take(4000).collect::<String>()
        );
    }
}

/// `arrayad build` of a definition named like a global variable or macro
/// of the C library fails with a usage error naming the definition, before
/// running the C compiler (it used to print the compiler's errors, or to
/// build a library whose header clashed with <stdio.h>/<time.h>/<math.h>).
#[test]
fn exports_named_like_c_library_variables_are_refused_before_compiling() {
    let dir = scratch("hardening", "c_variables");
    for name in ["stdin", "stdout", "timezone", "daylight", "tzname", "signgam", "optarg", "isfinite", "linux", "EOF"] {
        std::fs::write(dir.join("v.arr"), format!("def {name}(x: f64) -> f64 = x\ndef g(x: f64) -> f64 = x\n"))
            .unwrap();
        let out = arrayad(&dir, &["build", "v.arr", "-o", "libv.so"]);
        assert_eq!(out.code, 2, "{name}: {out:#?}");
        assert!(out.stderr.contains(&format!("`{name}` cannot be exported")), "{name}: {out:#?}");
        assert!(out.stderr.contains("C library") || out.stderr.contains("C headers"), "{name}: {out:#?}");
        assert!(
            !out.stderr.contains("compiler `") && !out.stderr.contains(".h:") && !out.stderr.contains(".c:"),
            "{name}: {out:#?}"
        );
        assert_eq!(out.stderr.lines().count(), 1, "{name}: {out:#?}");
        assert!(!dir.join("libv.so").exists() && !dir.join("libv.h").exists(), "{name}");
        if support::have("cc") {
            let out = arrayad(&dir, &["build", "v.arr", "-o", "libv.so", "--export", "g"]);
            assert_eq!(out.code, 0, "{name}: {out:#?}");
            std::fs::remove_file(dir.join("libv.so")).unwrap();
            std::fs::remove_file(dir.join("libv.h")).unwrap();
        }
    }
}

/// Parameters and sizes named like macros and types of the C headers get
/// other C names: the library builds and its header compiles after the
/// system headers.
#[test]
fn parameters_named_like_c_macros_are_renamed() {
    if !support::have("cc") {
        return;
    }
    let dir = scratch("hardening", "c_parameters");
    let src =
        "def f(linux: f64, EOF: f64, errno: f64, FILE: f64, time_t: f64, __LINE__: f64, v: [stdin]f64) -> f64 =\n  \
               linux + EOF + errno + FILE + time_t + __LINE__ + sum(v)\n";
    std::fs::write(dir.join("p.arr"), src).unwrap();
    let out = arrayad(&dir, &["build", "p.arr", "-o", "libp.so"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let includes: String = SYSTEM_HEADERS.iter().map(|h| format!("#include <{h}>\n")).collect();
    let main = format!(
        "{includes}#include \"libp.h\"\n\
         int main(void) {{ double v[2] = {{1, 2}}, r = 0; int s = f(2, 1, 2, 3, 4, 5, 6, v, &r);\n\
         printf(\"%d %g\\n\", s, r); return !(s == 0 && r == 24.0); }}\n"
    );
    std::fs::write(dir.join("main.c"), main).unwrap();
    let (ok, diagnostics) =
        c_compiler(&dir, "cc", &["-Wall", "-Werror", "-o", "main", "main.c", "-L.", "-lp", "-Wl,-rpath,$ORIGIN"]);
    assert!(ok, "{diagnostics}");
    let out = support::run_in(&dir, dir.join("main").to_str().unwrap(), &[], None);
    assert_eq!(out.code, 0, "{out:#?}");
}

// ----------------------------------------------------------------------------
// 4. Jacobians (and zero cotangents) of huge declared result sizes
// ----------------------------------------------------------------------------

/// Definitions whose declared result sizes are far too large: 2^63 - 1
/// rows of 3 (the element count overflows 64 bits), 2^63 + 1 elements
/// (fits, but not times the 2 columns), 2^63 rows (from a size variable's
/// binding: a literal), 2^56 rows (times 2 columns too many), and one of a
/// normal size for the memory limit.
const HUGE: &str = "\
def lit(x: f64, y: f64) -> [9223372036854775807][3]f64 = for i < 2, j < 3 => x * y
def lit3(x: f64, y: f64) -> [3074457345618258603][3]f64 = for i < 2, j < 3 => x * y
def big(x: [n]f64) -> [4611686018427387904][2]f64 = for i < 2, j < 2 => x[0]
def mid(x: [n]f64) -> [72057594037927936]f64 = for i < 2 => x[0]
def twice(x: [n]f64) -> [n]f64 = x * 2.0
";

#[test]
fn jacobians_of_huge_declared_results_fail_at_the_definition() {
    let dir = scratch("hardening", "huge_jacobian");
    std::fs::write(dir.join("h.arr"), HUGE).unwrap();
    let cases: &[(&str, &str, &str, &str)] = &[
        ("lit", "[1.0, 2.0]", "h.arr:1:1:", "more rows than can be counted"),
        ("lit3", "[1.0, 2.0]", "h.arr:2:1:", "9223372036854775809 x 2 entries"),
        ("big", "[[1.0, 2.0]]", "h.arr:3:1:", "9223372036854775808 x 2 entries"),
        ("mid", "[[1.0, 2.0]]", "h.arr:4:1:", "72057594037927936 x 2 entries"),
    ];
    for &(f, args, at, what) in cases {
        for backend in ["cranelift", "interp"] {
            let out = arrayad(&dir, &["run", "h.arr", f, "--args", args, "--jacobian", "--backend", backend]);
            assert_eq!(out.code, 3, "{f} {backend}: {out:#?}");
            let err = &out.stderr;
            assert!(err.contains(at) && err.contains("out of memory") && err.contains(what), "{f} {backend}: {err}");
            assert!(err.contains(&format!("Jacobian of `{f}`")) && !err.contains("internal"), "{f} {backend}: {err}");
        }
        // A zero cotangent of the declared shape cannot be made either.
        let out = arrayad(&dir, &["run", "h.arr", f, "--args", args, "--vjp", "null"]);
        assert_eq!(out.code, 3, "{f}: {out:#?}");
        assert!(out.stderr.contains(at) && out.stderr.contains("too large to allocate"), "{f}: {out:#?}");
        // The value and the jvp run the function, which finds that its
        // result does not have the declared size.
        for mode in [&[][..], &["--jvp", if args.starts_with("[[") { "[[1.0, 0.0]]" } else { "[1.0, 0.0]" }]] {
            let mut argv = vec!["run", "h.arr", f, "--args", args];
            argv.extend_from_slice(mode);
            let out = arrayad(&dir, &argv);
            assert_eq!(out.code, 3, "{f} {mode:?}: {out:#?}");
            assert!(out.stderr.contains("size mismatch") && out.stderr.contains("h.arr:"), "{f}: {out:#?}");
        }
        // A cotangent that is not of the declared shape is a bad argument.
        let out = arrayad(&dir, &["run", "h.arr", f, "--args", args, "--vjp", "[[1, 2, 3]]"]);
        assert_eq!(out.code, 2, "{f}: {out:#?}");
    }
    // A Jacobian beyond the memory limit of a call.
    let x: Vec<String> = (0..2000).map(|i| format!("{i}.5")).collect();
    let args = format!("[[{}]]", x.join(", "));
    std::fs::write(dir.join("x.json"), &args).unwrap();
    let out = arrayad(&dir, &["run", "h.arr", "twice", "--args", "x.json", "--jacobian", "--max-memory", "1M"]);
    assert_eq!(out.code, 3, "{out:#?}");
    assert!(out.stderr.contains("h.arr:5:1:") && out.stderr.contains("2000 x 2000 entries"), "{out:#?}");
    assert!(out.stderr.contains("memory limit of 1048576 bytes"), "{out:#?}");
    let out = arrayad(&dir, &["run", "h.arr", "twice", "--args", "[[1.0, 2.0]]", "--jacobian", "--max-memory", "1M"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["jacobian"], serde_json::json!([[2.0, 0.0], [0.0, 2.0]]));
}

#[test]
fn c_jacobians_of_huge_declared_results_fail_at_the_definition() {
    if !support::have("cc") {
        return;
    }
    let dir = scratch("hardening", "huge_jacobian_c");
    std::fs::write(dir.join("h.arr"), HUGE).unwrap();
    let out = arrayad(&dir, &["build", "h.arr", "-o", "libh.so"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let main = r#"
#include <stdio.h>
#include <stdlib.h>
#include "libh.h"
#define SHOW(call) do { int s_ = (call); printf("%s => %d %s\n", #call, s_, h_last_error()); } while (0)
int main(void) {
    double out[8], jac[16], x[2] = {1, 2}, dx[2];
    int64_t n = (int64_t)1 << 20;
    double *big_x = calloc((size_t)n, sizeof(double)), *big_out = calloc((size_t)n, sizeof(double));
    SHOW(lit_jacobian(1.0, 2.0, out, jac));
    SHOW(lit3_jacobian(1.0, 2.0, out, jac));
    SHOW(big_jacobian(2, x, out, jac));
    SHOW(mid_jacobian(2, x, out, jac));
    SHOW(twice_jacobian(n, big_x, big_out, jac));
    SHOW(lit(1.0, 2.0, out));
    SHOW(lit_jvp(1.0, 2.0, 1.0, 0.0, out, jac));
    SHOW(lit_vjp(1.0, 2.0, jac, out, &dx[0], &dx[1]));
    SHOW(twice(-1, x, out));
    SHOW(twice_jacobian(2, x, out, jac));
    free(big_x);
    free(big_out);
    return 0;
}
"#;
    std::fs::write(dir.join("main.c"), main).unwrap();
    let (ok, diagnostics) =
        c_compiler(&dir, "cc", &["-Wall", "-Werror", "-o", "main", "main.c", "-L.", "-lh", "-Wl,-rpath,$ORIGIN"]);
    assert!(ok, "{diagnostics}");
    let out = support::run_in(&dir, dir.join("main").to_str().unwrap(), &[], None);
    assert_eq!(out.code, 0, "{out:#?}");
    let line = |call: &str| -> &str {
        out.stdout.lines().find(|l| l.starts_with(call)).unwrap_or_else(|| panic!("no `{call}` in {out:#?}"))
    };
    let oom = 8;
    for (call, at, what) in [
        (
            "lit_jacobian",
            "h.arr:1:1:",
            "more rows than can be allocated (one per element of the result `out0`, of shape [9223372036854775807][3])",
        ),
        ("lit3_jacobian", "h.arr:2:1:", "more rows than can be allocated"),
        ("big_jacobian", "h.arr:3:1:", "[4611686018427387904][2]"),
        ("mid_jacobian", "h.arr:4:1:", "72057594037927936 x 2 entries"),
        ("twice_jacobian(n", "h.arr:5:1:", "twice_jacobian: an array of"),
        ("lit(", "h.arr:1:1:", "the element count of `out0` (shape [9223372036854775807][3]) overflows"),
        ("lit_jvp", "h.arr:1:1:", "overflows"),
        ("lit_vjp", "h.arr:1:1:", "overflows"),
    ] {
        let l = line(call);
        assert!(l.contains(&format!("=> {oom} {at} out of memory: ")) && l.contains(what), "{l}");
    }
    assert!(line("twice(-1").contains("=> 5 h.arr:5:1: negative size: twice: size `n` is -1"), "{out:#?}");
    assert!(line("twice_jacobian(2").contains("=> 0 "), "{out:#?}");
}

#[test]
fn an_interrupted_build_leaves_no_files_behind() {
    if !support::have("cc") {
        eprintln!("note: no C compiler: skipping");
        return;
    }
    let dir = scratch("hardening", "interrupted_build");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // Enough definitions that the C compiler runs for a while.
    let src: String = (0..400).map(|k| format!("def g{k}(x: [n]f64, y: f64) -> f64 = sum(x * y) + {k}.0\n")).collect();
    std::fs::write(dir.join("big.arr"), src).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
        .args(["build", "big.arr", "-o", "libbig.so"])
        .current_dir(&dir)
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let scratch_dirs = || -> Vec<_> {
        std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("arrayad-build-"))
            .collect()
    };
    let start = std::time::Instant::now();
    while scratch_dirs().is_empty() && start.elapsed() < std::time::Duration::from_secs(120) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_some() {
        eprintln!("note: the build finished before it could be interrupted");
        return;
    }
    assert!(!scratch_dirs().is_empty(), "no scratch directory appeared");
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}");
    assert!(scratch_dirs().is_empty(), "scratch directories left: {:?}", scratch_dirs());
    assert!(!dir.join("libbig.so").exists() && !dir.join("libbig.h").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
