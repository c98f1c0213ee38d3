//! The arrayad frontend: lexer, parser, name resolution, type and size
//! checking, diagnostics, and lowering to the IR (LANGUAGE.md sections 1-5).
//!
//! ```
//! let src = "def f(x: [n]f64) -> f64 = sum(x * x) + f64(n)";
//! let program = arrayad_frontend::compile("f.arr", src).unwrap();
//! assert_eq!(program.funcs[0].name, "f");
//!
//! let err = arrayad_frontend::compile("g.arr", "def g(x: f64) -> f64 = x + true").unwrap_err();
//! assert_eq!(err.entries()[0].1, 1);
//! assert!(err.render().contains("g.arr:1:24"));
//! ```
//!
//! # Lowering conventions
//!
//! - One IR function per definition, in source order (`FuncId` = position
//!   in the file), named after it; tuple parameters and results are
//!   flattened into their leaves, left to right (leaf `k` of parameter `p`
//!   is named `p_k`). `signature` keeps the source types.
//! - At entry, the first occurrence of a size variable is bound by
//!   `let n = dim param axis`; every later occurrence and every literal
//!   size becomes `check_size dim == n` (located at the size in the
//!   signature). An array result is checked against its declared sizes at
//!   the end of the body.
//! - Every statement is located at the first character of the source
//!   expression it comes from. Variables are named after source names
//!   (`let` bindings, indices, loop states, size variables) and otherwise
//!   after the operation (`add`, `exp`, `elem`, `row`, `sum`, ...).
//! - Elementwise operations are nested `build`s (one per axis) over scalar
//!   operations on multi-indexed elements, after a `check_size` of every
//!   axis of every array operand against the first; scalars are broadcast.
//!   `sum` of a rank-`r` array (`r > 1`) is `r - 1` nested `build`s over
//!   the inner axes of the `sum` of the column `build i < n => a[i, j..]`.
//!   `dot` is a `check_size`, a `build` of products and a `sum`.
//! - `&&`/`||` are `if`s; `a[i]` of a rank-2 array is a row view;
//!   `a[lo:]` and `a[:hi]` default to `0` and `length(a)`.
//!
//! No input makes the frontend panic: errors are reported as
//! [`Diagnostics`], nesting is limited ([`parser::MAX_NESTING`]), and the
//! work runs on a thread with a large stack; should an internal error occur
//! anyway, it is reported as a diagnostic too.

pub mod ast;
mod check;
pub mod codes;
pub mod diagnostics;
mod lexer;
mod lower;
pub mod parser;
mod recursion;
mod span;
mod tast;
mod types;

pub use diagnostics::{DiagnosticItem, Diagnostics};
pub use span::Span;

use codes::Code;
use diagnostics::Diagnostic;
use span::LineIndex;

/// Parses and checks a whole file and lowers every definition to the IR
/// (one function per definition, in source order).
pub fn compile(file: &str, source: &str) -> Result<arrayad_ir::Program, Diagnostics> {
    guarded(file, source, || compile_errors(file, source))
}

/// Parses a file only (for `arrayad emit --stage ast`).
pub fn parse(file: &str, source: &str) -> Result<ast::Program, Diagnostics> {
    guarded(file, source, || {
        let mut diags = Vec::new();
        let parsed = parser::parse_program(source, &mut diags);
        if diags.is_empty() {
            Ok(parsed.program)
        } else {
            Err(diags)
        }
    })
}

fn compile_errors(file: &str, source: &str) -> Result<arrayad_ir::Program, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let lines = LineIndex::new(source);
    let parsed = parser::parse_program(source, &mut diags);
    let checked = check::check_program(&parsed.program, &parsed.broken, &lines, &mut diags);
    let names: Vec<String> = checked.defs.iter().map(|d| d.name.clone()).collect();
    recursion::check_recursion(&names, &checked.calls, &mut diags);
    if !diags.is_empty() {
        return Err(diags);
    }
    let program = lower::lower_program(file, &checked.defs, &checked.stubs, &lines);
    if let Err(e) = arrayad_ir::verify::verify_program(&program) {
        let span = checked.defs.iter().find(|d| d.name == e.func).map_or(Span::default(), |d| d.keyword);
        return Err(vec![Diagnostic::new(Code::Internal, span, format!("internal compiler error: {e}"))]);
    }
    Ok(program)
}

/// Stack size of the thread the frontend runs on: the passes recurse over
/// expressions nested up to [`parser::MAX_DEPTH`] levels.
const STACK_SIZE: usize = 64 << 20;

/// Runs `work` on a thread with a large stack, turning its errors into
/// [`Diagnostics`] and a panic (a bug) into an internal-error diagnostic.
fn guarded<T: Send>(
    file: &str,
    source: &str,
    work: impl FnOnce() -> Result<T, Vec<Diagnostic>> + Send,
) -> Result<T, Diagnostics> {
    let internal = |what: String| {
        let d = Diagnostic::new(Code::Internal, Span::default(), format!("internal compiler error: {what}"));
        Diagnostics::new(file, source, vec![d])
    };
    match arrayad_ir::stack::on_big_stack("arrayad-frontend", STACK_SIZE, work) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(diags)) => Err(Diagnostics::new(file, source, diags)),
        Err(panic) => Err(internal(arrayad_ir::stack::panic_message(&*panic))),
    }
}
