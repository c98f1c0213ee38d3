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
