//! The examples of README.md work as written: the C program against a
//! library built from `examples/quickstart.arr`, and the Rust snippet.

mod support;

use std::path::Path;
use support::{arrayad, have, run_in, scratch};

/// The first fenced block of README.md that starts with "```LANG".
fn readme_block(lang: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme.find(&format!("```{lang}\n")).unwrap_or_else(|| panic!("README has a {lang} block"));
    let body = &readme[start + lang.len() + 4..];
    body[..body.find("```").expect("closed block")].to_string()
}

#[test]
fn readme_c_example_builds_and_runs() {
    if !have("cc") {
        eprintln!("no C compiler: skipped");
        return;
    }
    let dir = scratch("readme", "c");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart.arr");
    std::fs::copy(&example, dir.join("quickstart.arr")).unwrap();
    let out = arrayad(&dir, &["build", "quickstart.arr", "-o", "libquick.so"]);
    assert_eq!(out.code, 0, "{out:#?}");
    std::fs::write(dir.join("main.c"), readme_block("c")).unwrap();
    let cc = run_in(
        &dir,
        "cc",
        &["-std=c99", "-Wall", "-Werror", "main.c", "-I.", "-L.", "-lquick", "-Wl,-rpath,$ORIGIN", "-o", "main"],
        None,
    );
    assert_eq!(cc.code, 0, "{cc:#?}");
    let run = run_in(&dir, "./main", &[], None);
    assert_eq!(run.code, 0, "{run:#?}");
    // f = sum(x * w) + exp(x[0]) = 3 + e; df/dx0 = w0 + exp(x0) = 0.5 + e.
    let e = 1f64.exp();
    let want = format!("f = {}, df/dx0 = {}\n", fmt_g(3.0 + e), fmt_g(0.5 + e));
    assert_eq!(run.stdout, want);
}

/// C's `%g` for the values used here (6 significant digits).
fn fmt_g(x: f64) -> String {
    let s = format!("{:.5}", x);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[test]
fn readme_rust_example_runs() -> Result<(), arrayad::Error> {
    // The README's Rust snippet, verbatim apart from the assertions.
    use arrayad::{Arg, Module};

    let module = Module::compile("quick.arr", "def f(x: [n]f64) -> f64 = sum(x * x)")?;
    let f = module.function("f")?;
    let g = f.grad(&[Arg::Vector(&[1.0, 2.0, 3.0])])?;
    assert_eq!(g.value, 14.0);
    assert_eq!(g.gradient.f64s("x"), Some(&[2.0, 4.0, 6.0][..]));
    assert!(readme_block("rust").contains("let g = f.grad(&[Arg::Vector(&[1.0, 2.0, 3.0])])?;"));
    Ok(())
}
