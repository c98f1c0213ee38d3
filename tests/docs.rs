//! The book in `docs/src` is right: every ```` ```arr ```` block compiles,
//! every ```` ```arr,error ```` block fails (with the code given as
//! `error=E0201`, if any), every fence is labelled, the error reference
//! explains every error code, the commands of ```` ```console ```` blocks
//! (`arrayad`, `cc`, `./PROGRAM`) run in a scratch directory holding the
//! blocks marked `file=NAME` and print what the book shows, and every
//! chapter with Rust code is a doctest of the crate (`src/lib.rs`).
//!
//! Conventions of the book's fences (the info string, comma separated):
//!
//! - `arr`: a complete program that compiles; `arr,error`: one that does not
//!   (`arr,error=E0201`: its first diagnostic has that code);
//! - `file=NAME` (on any block): the block is also the file `NAME` of the
//!   chapter's scratch directory;
//! - `console`: lines starting with `$ ` are commands, the lines after one
//!   its expected output (standard output, then standard error); a line
//!   `...` matches any number of lines. Commands of other programs than
//!   `arrayad`, `cc` and `./PROGRAM` are shown but not run.
//! - `rust`: doctests (see `src/lib.rs`); `python`: run by
//!   `python/tests/test_docs.py`; `c`, `text`, `toml`, `json`, `sh`: shown.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use support::{have, scratch};

/// The labels a fence may have (its first comma-separated word).
const LANGS: &[&str] = &["arr", "rust", "c", "python", "console", "text", "toml", "json", "sh"];

/// One fenced block of a Markdown file.
#[derive(Debug, Clone)]
struct Block {
    /// `FILE:LINE` of the opening fence, for messages.
    at: String,
    /// The line of the opening fence (1-based).
    line: usize,
    /// The first word of the info string.
    lang: String,
    /// The other words (`error`, `error=E0201`, `file=x.arr`).
    attrs: Vec<String>,
    text: String,
}

impl Block {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find_map(|a| a.strip_prefix(key)?.strip_prefix('='))
    }

    fn has(&self, word: &str) -> bool {
        self.attrs.iter().any(|a| a == word || a.starts_with(&format!("{word}=")))
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file under `docs/src`, sorted.
fn chapters() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("docs/src"), &mut out);
    assert!(out.len() > 10, "the book has chapters");
    out
}

/// The path of `p` relative to the repository, for messages.
fn shown(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// The fenced blocks of the Markdown file `path`, with mdBook's
/// `{{#include PATH}}` lines (outside blocks) replaced by the blocks of the
/// included file.
fn blocks(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let mut open: Option<(usize, Block)> = None;
    for (k, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match &mut open {
            None if ticks >= 3 => {
                let info = trimmed[ticks..].trim();
                let mut words = info.split(',').map(|w| w.trim().to_string());
                let lang = words.next().unwrap_or_default();
                let at = format!("{}:{}", shown(path), k + 1);
                open = Some((ticks, Block { at, line: k + 1, lang, attrs: words.collect(), text: String::new() }));
            }
            None => {
                if let Some(inc) = trimmed.strip_prefix("{{#include ").and_then(|r| r.strip_suffix("}}")) {
                    let target = path.parent().unwrap().join(inc.trim());
                    assert!(target.is_file(), "{}:{}: cannot include {}", shown(path), k + 1, target.display());
                    out.extend(blocks(&target));
                }
            }
            Some((n, _)) if ticks >= *n && trimmed[ticks..].trim().is_empty() => {
                out.push(open.take().unwrap().1);
            }
            Some((_, b)) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
        }
    }
    if let Some((_, b)) = open {
        panic!("{}: the block is not closed", b.at);
    }
    out
}

#[test]
fn every_fence_is_labelled() {
    let mut bad = Vec::new();
    for path in chapters() {
        for b in blocks(&path) {
            if !LANGS.contains(&b.lang.as_str()) {
                bad.push(format!("{}: fence labelled `{}` (use one of {})", b.at, b.lang, LANGS.join(", ")));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn arr_blocks_compile_and_error_blocks_fail() {
    let mut failures = Vec::new();
    let mut count = 0;
    for path in chapters() {
        for b in blocks(&path).into_iter().filter(|b| b.lang == "arr") {
            count += 1;
            let name = b.attr("file").unwrap_or("snippet.arr");
            let result = arrayad::Module::compile(name, &b.text);
            match (b.has("error"), result) {
                (false, Ok(_)) => {}
                (false, Err(e)) => failures.push(format!("{}: the program does not compile:\n{e}", b.at)),
                (true, Ok(_)) => failures.push(format!("{}: an `arr,error` block compiles", b.at)),
                (true, Err(arrayad::Error::Compile(d))) => {
                    if let Some(code) = b.attr("error") {
                        let got = d.items().first().map(|i| i.code);
                        if got != Some(code) {
                            failures.push(format!("{}: expected error {code}, got {got:?}:\n{}", b.at, d.render()));
                        }
                    }
                }
                (true, Err(e)) => failures.push(format!("{}: expected a compile error, got: {e}", b.at)),
            }
        }
    }
    assert!(count > 20, "only {count} arr blocks found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_error_reference_explains_every_code() {
    let path = root().join("docs/src/errors.md");
    let raw = std::fs::read_to_string(&path).unwrap();
    for (code, title) in arrayad::error_codes() {
        let dir = if code.starts_with("E1") { "ir" } else { "frontend" };
        let include = format!("{{{{#include ../../{dir}/error_codes/{code}.md}}}}");
        assert!(raw.contains(&include), "docs/src/errors.md does not include the explanation of {code} ({title})");
        let row = format!("| [{code}](#{}-", code.to_lowercase());
        let listed = raw.lines().any(|l| l.starts_with(&row) && l.ends_with(&format!(") | {title} |")));
        assert!(listed, "docs/src/errors.md does not list {code} ({title}) in its table");
        let file = root().join(dir).join("error_codes").join(format!("{code}.md"));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with(&format!("# {code}: {title}")), "{}", file.display());
    }
}

#[test]
fn chapters_with_rust_code_are_doctests() {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    for path in chapters() {
        if blocks(&path).iter().any(|b| b.lang == "rust") {
            let rel = path.strip_prefix(root()).unwrap().display().to_string();
            let include = format!("include_str!(\"../{rel}\")");
            assert!(lib.contains(&include), "{rel} has Rust code but src/lib.rs does not include it as a doctest");
        }
    }
}

/// Splits a command line into words: whitespace separates, '...' and
/// "..." quote (no escapes), and an unquoted `#` starting a word starts a
/// comment.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match quote {
            None if c == '#' && cur.is_empty() && !any => break,
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            None => cur.push(c),
        }
    }
    assert!(quote.is_none(), "unclosed quote in `{line}`");
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// True when `got` matches `want`, whose lines `...` match any lines.
fn matches(want: &[&str], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((&"...", rest)) => (0..=got.len()).any(|k| matches(rest, &got[k..])),
        Some((w, rest)) => got.first().is_some_and(|g| g == w) && matches(rest, &got[1..]),
    }
}

/// The lines of `text` without trailing whitespace or trailing empty lines.
fn lines(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text.lines().map(str::trim_end).collect();
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

#[test]
fn console_commands_print_what_the_book_shows() {
    let have_cc = have("cc");
    let mut failures = Vec::new();
    let mut ran = 0;
    for path in chapters() {
        let bs = blocks(&path);
        let files: BTreeMap<&str, &str> = bs.iter().filter_map(|b| Some((b.attr("file")?, b.text.as_str()))).collect();
        let consoles: Vec<&Block> = bs.iter().filter(|b| b.lang == "console").collect();
        let runs = |line: &str| {
            let w = words(line);
            let prog = w.iter().find(|x| !x.contains('=')).cloned().unwrap_or_default();
            prog == "arrayad" || prog == "cc" || prog.starts_with("./")
        };
        if !consoles.iter().any(|b| b.text.lines().any(|l| l.strip_prefix("$ ").is_some_and(runs))) {
            continue;
        }
        let name = shown(&path).replace(['/', '.'], "_");
        let dir = scratch("docs", &name);
        for (file, text) in &files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        let mut skip_rest = false;
        for b in consoles {
            let all: Vec<&str> = b.text.lines().collect();
            let mut k = 0;
            while k < all.len() {
                let Some(cmd) = all[k].strip_prefix("$ ") else {
                    k += 1;
                    continue;
                };
                let end = (k + 1..all.len()).find(|&j| all[j].starts_with("$ ")).unwrap_or(all.len());
                let want = lines(&all[k + 1..end].join("\n")).iter().map(|s| s.to_string()).collect::<Vec<_>>();
                let at = format!("{}:{}", shown(&path), b.line + 1 + k);
                k = end;
                if !runs(cmd) || skip_rest {
                    continue;
                }
                let mut w = words(cmd);
                let mut env = Vec::new();
                while w.first().is_some_and(|x| x.contains('=')) {
                    let x = w.remove(0);
                    let (key, value) = x.split_once('=').unwrap();
                    env.push((key.to_string(), value.to_string()));
                }
                if w[0] == "cc" && !have_cc {
                    eprintln!("{at}: no C compiler: the C steps of this chapter are skipped");
                    skip_rest = true;
                    continue;
                }
                if w.iter().any(|x| x == "llvm") && !cfg!(feature = "llvm") {
                    eprintln!("{at}: `{cmd}` needs the llvm feature: skipped");
                    continue;
                }
                let program = if w[0] == "arrayad" { env!("CARGO_BIN_EXE_arrayad").to_string() } else { w[0].clone() };
                let args: Vec<&str> = w[1..].iter().map(String::as_str).collect();
                let out = run_with_env(&dir, &program, &args, &env);
                ran += 1;
                let got_text = format!("{}{}", out.stdout, out.stderr);
                let got = lines(&got_text);
                let want: Vec<&str> = want.iter().map(String::as_str).collect();
                if !matches(&want, &got) {
                    failures.push(format!(
                        "{at}: `{cmd}` (in {}) printed\n{}\ninstead of\n{}",
                        dir.display(),
                        got.join("\n"),
                        want.join("\n")
                    ));
                }
            }
        }
    }
    assert!(ran > 10, "only {ran} commands ran");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Runs `program args` in `dir` with the extra environment `env`.
fn run_with_env(dir: &Path, program: &str, args: &[&str], env: &[(String, String)]) -> support::Output {
    let out = std::process::Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    support::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
