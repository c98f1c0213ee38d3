//! `arrayad-gradbench`: a GradBench tool (github.com/gradbench/gradbench)
//! built on arrayad's Rust API. It answers GradBench's JSON-lines protocol
//! (its CONTRIBUTING.md, "Protocol") on standard input and output: `start`
//! with the tool's name and configuration, `define` by compiling the
//! eval's `.arr` program (`evals/NAME.arr`, compiled into this binary) with
//! the Cranelift or LLVM JIT, `evaluate` by running one of its definitions
//! at least `min_runs` times and for at least `min_seconds`, with one
//! `evaluate` timing per run of the compiled call alone.
//!
//! ```text
//! arrayad-gradbench [--backend cranelift|llvm|interp] [--flush-subnormals]
//! ```
//!
//! The default backend is the fastest built in: LLVM in a build with the
//! cargo feature `llvm`, else Cranelift. `--flush-subnormals` makes every
//! call flush subnormal numbers to zero, as XLA does for GradBench's `jax`
//! tool; by default the tool computes with IEEE arithmetic, as GradBench's
//! `manual` tool does. End of input ends the tool (exit
//! status 0). A malformed message, an unknown module or function, bad
//! input or a run-time error of a program is a response with
//! `"success": false` and the message, never a crash.

use arrayad_gradbench::{Tool, ToolOptions};
use clap::Parser;
use std::io::{BufRead, Write};

/// The command line.
#[derive(Parser)]
#[command(
    name = "arrayad-gradbench",
    version,
    about = "A GradBench tool built on arrayad (JSON lines on stdin/stdout)"
)]
struct Cli {
    /// The code generator: `cranelift` or `llvm` (default: the fastest
    /// built in), or `interp`, the reference interpreter (slow: for
    /// checking).
    #[arg(long)]
    backend: Option<String>,
    /// Every call flushes subnormal numbers to zero, on all its threads,
    /// as XLA computes for GradBench's `jax` tool (GradBench's `manual`
    /// tool and the default here compute with IEEE arithmetic).
    #[arg(long)]
    flush_subnormals: bool,
}

fn main() {
    let cli = Cli::parse();
    // LLVM's options are the process's, and this process is ours.
    #[cfg(feature = "llvm")]
    arrayad::llvm_vectorise_epilogues();
    let options = match ToolOptions::new(cli.backend.as_deref()) {
        Ok(o) => o.with_flush_subnormals(cli.flush_subnormals),
        Err(e) => {
            eprintln!("arrayad-gradbench: {e}");
            std::process::exit(2);
        }
    };
    let mut tool = Tool::new(options);
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("arrayad-gradbench: cannot read standard input: {e}");
                std::process::exit(1);
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let response = tool.handle(&line);
        if writeln!(stdout, "{response}").and_then(|()| stdout.flush()).is_err() {
            // The other side has gone: nothing more to answer.
            std::process::exit(0);
        }
    }
}
