//! Helpers shared by the integration tests: scratch directories, running the
//! `arrayad` binary and other commands, comparing numbers.

#![allow(dead_code)]

pub mod ad;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A fresh, empty scratch directory `target/tmp/<group>/<name>` (left in
/// place after the test for inspection).
pub fn scratch(group: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(group).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

/// The output of a finished command.
#[derive(Debug)]
pub struct Output {
    /// Exit status (-1 if killed by a signal).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Standard output parsed as JSON (panics with the whole output if it
    /// is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }
}

/// Runs `program args` in `dir`, feeding `stdin` if given.
pub fn run_in(dir: &Path, program: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait for command");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the `arrayad` binary in `dir`.
pub fn arrayad(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, env!("CARGO_BIN_EXE_arrayad"), args, None)
}

/// Runs the `arrayad` binary in `dir` with `stdin` as standard input.
pub fn arrayad_stdin(dir: &Path, args: &[&str], stdin: &str) -> Output {
    run_in(dir, env!("CARGO_BIN_EXE_arrayad"), args, Some(stdin))
}

/// `|a - b| <= tol * max(1, |b|)`.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

/// Asserts that `got` and `want` have the same length and agree entry by
/// entry to `tol` (relative, floored at 1).
pub fn assert_close_all(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length {} vs {}", got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(close(*a, *b, tol), "{what}[{i}]: got {a:e}, want {b:e} (tolerance {tol:e})");
    }
}

/// A JSON number or `"NaN"`/`"inf"`/`"-inf"` as an f64.
pub fn num(j: &serde_json::Value) -> f64 {
    match j {
        serde_json::Value::Number(n) => n.as_f64().expect("f64"),
        serde_json::Value::String(s) if s == "NaN" => f64::NAN,
        serde_json::Value::String(s) if s == "inf" => f64::INFINITY,
        serde_json::Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        other => panic!("not a number: {other}"),
    }
}

/// All numbers of a (nested) JSON array, flattened.
pub fn nums(j: &serde_json::Value) -> Vec<f64> {
    match j {
        serde_json::Value::Array(a) => a.iter().flat_map(nums).collect(),
        other => vec![num(other)],
    }
}

/// True when the command exists on this machine.
pub fn have(program: &str) -> bool {
    Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}
