//! Compile errors with source spans, rendered by codespan-reporting.
//!
//! Rendered diagnostics never carry a character that a terminal would
//! interpret: control characters (C0 other than newline and tab, DEL, C1)
//! and the bidirectional-text controls are shown as `\u{1b}`-style escapes
//! in messages, notes and the file name ([`escape_text`]), and as one
//! visible character each in the source excerpt (`printable_source`:
//! the Unicode control pictures `␀`..`␟`, `␡`, otherwise U+FFFD), so that
//! columns and carets stay where they were.

use crate::codes::Code;
use crate::span::{LineIndex, Span};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Config};
use std::borrow::Cow;
use std::fmt;

/// True for a character that must not reach a terminal as it is: a control
/// character (C0, DEL, C1; newline and tab are decided by the callers) or a
/// bidirectional-text control (which reorders what a terminal shows), or a
/// byte-order mark / zero-width no-break space.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `text` with every character a terminal would interpret (see
/// [the module docs](self)) written as a Rust-style escape `\u{1b}`; newlines
/// are kept when `keep_newlines` is set, tabs always.
///
/// ```
/// use arrayad_frontend::diagnostics::escape_text;
/// assert_eq!(escape_text("a\u{1b}[31m\0b", true), "a\\u{1b}[31m\\u{0}b");
/// assert_eq!(escape_text("x\ny", false), "x\\u{a}y");
/// ```
pub fn escape_text(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let bad = |c: char| c != '\t' && (c != '\n' || !keep_newlines) && is_unsafe(c);
    if !text.chars().any(bad) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if bad(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The visible stand-in for an unsafe character of a source excerpt: one
/// character of display width 1, so columns and carets do not move.
fn picture(c: char) -> char {
    match c as u32 {
        // U+2400 CONTROL PICTURE FOR NULL .. U+241F, U+2421 for DELETE.
        n @ 0..=0x1f => char::from_u32(0x2400 + n).unwrap_or('\u{fffd}'),
        0x7f => '\u{2421}',
        _ => '\u{fffd}',
    }
}

/// Source text safe to print as an excerpt, and where each byte offset of
/// the original went. Every unsafe character (except newline, tab and a
/// carriage return ending a line, which the renderer handles) becomes one
/// visible character ([`picture`]); everything else is unchanged.
struct Printable<'s> {
    text: Cow<'s, str>,
    /// `(original offset of a replaced character, total growth in bytes
    /// after it)`, in order.
    shifts: Vec<(usize, usize)>,
}

impl Printable<'_> {
    /// The offset in `text` of byte `offset` of the original.
    fn map(&self, offset: usize) -> usize {
        let k = self.shifts.partition_point(|&(at, _)| at < offset);
        offset + k.checked_sub(1).map_or(0, |i| self.shifts[i].1)
    }
}

/// See [`Printable`].
fn printable_source(source: &str) -> Printable<'_> {
    let bytes = source.as_bytes();
    let bad = |i: usize, c: char| {
        c != '\n' && c != '\t' && !(c == '\r' && matches!(bytes.get(i + 1), None | Some(b'\n'))) && is_unsafe(c)
    };
    if !source.char_indices().any(|(i, c)| bad(i, c)) {
        return Printable { text: Cow::Borrowed(source), shifts: Vec::new() };
    }
    let mut text = String::with_capacity(source.len() + 16);
    let mut shifts = Vec::new();
    let mut growth = 0;
    for (i, c) in source.char_indices() {
        if bad(i, c) {
            let p = picture(c);
            text.push(p);
            growth += p.len_utf8() - c.len_utf8();
            shifts.push((i, growth));
        } else {
            text.push(c);
        }
    }
    Printable { text: Cow::Owned(text), shifts }
}

/// One compile error: a message, the span of the offending code and
/// optional notes (hints).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Diagnostic {
    pub message: String,
    pub span: Span,
    pub notes: Vec<String>,
    /// The error's code.
    pub code: Code,
}

impl Diagnostic {
    /// An error with code `code` at `span`.
    pub(crate) fn new(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { message: message.into(), span, notes: Vec::new(), code }
    }

    /// The same error with a note attached.
    pub(crate) fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }
}

/// One or more compile errors (syntax, type, size or recursion errors) of
/// one source file. Each error knows its span, so it can be rendered with
/// `FILE:LINE:COL`, the source line and carets under the offending code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostics {
    file: String,
    source: String,
    errors: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Collects `errors` (sorted by position, duplicates removed).
    pub(crate) fn new(file: &str, source: &str, mut errors: Vec<Diagnostic>) -> Diagnostics {
        errors.sort_by_key(|d| d.span.start);
        errors.dedup_by(|a, b| a.span == b.span && a.message == b.message);
        Diagnostics { file: file.to_string(), source: source.to_string(), errors }
    }

    /// One error at byte range `span` of `source` (clamped to the source
    /// and to character boundaries), for errors found outside the frontend
    /// that should look like its diagnostics (e.g. a file that is not valid
    /// UTF-8, read lossily into `source`).
    pub fn single(
        file: &str,
        source: &str,
        code: Code,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> Diagnostics {
        let clamp = |mut o: usize| {
            o = o.min(source.len());
            while !source.is_char_boundary(o) {
                o -= 1;
            }
            o
        };
        let (start, end) = (clamp(span.start), clamp(span.end));
        Diagnostics::new(file, source, vec![Diagnostic::new(code, Span::new(start, end.max(start)), message)])
    }

    /// Every error rendered as codespan-reporting does (no colour): an
    /// `error[CODE]: MESSAGE` line, a `┌─ FILE:LINE:COL` line, the source line and
    /// carets under the span, then any notes. Characters a terminal would
    /// interpret are escaped (module docs); lines and columns are those of
    /// the original source.
    pub fn render(&self) -> String {
        let name = escape_text(&self.file, false);
        let source = printable_source(&self.source);
        let file = SimpleFile::new(name.as_ref(), source.text.as_ref());
        let config = Config::default();
        let lines = LineIndex::new(&self.source);
        let mut out = String::new();
        for d in &self.errors {
            let message = escape_text(&d.message, true).into_owned();
            let cs = CsDiagnostic::error()
                .with_code(d.code.as_str())
                .with_message(message.clone())
                .with_labels(vec![Label::primary((), source.map(d.span.start)..source.map(d.span.end))])
                .with_notes(d.notes.iter().map(|n| escape_text(n, true).into_owned()).collect());
            let mut one = String::new();
            if term::emit_to_string(&mut one, &config, &file, &cs).is_ok() {
                out.push_str(&one);
            } else {
                // Only reachable if a span were outside the source.
                let (line, col) = lines.line_col(d.span.start);
                out.push_str(&format!("error[{}]: {message}\n  ┌─ {name}:{line}:{col}\n\n", d.code));
            }
        }
        out
    }

    /// Number of errors.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// True when there is no error (never the case for a returned value).
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// `(message, line, col)` of each error, 1-based, in source order
    /// (messages escaped as in [`Diagnostics::render`]).
    pub fn entries(&self) -> Vec<(String, u32, u32)> {
        let lines = LineIndex::new(&self.source);
        self.errors
            .iter()
            .map(|d| {
                let (line, col) = lines.line_col(d.span.start);
                (escape_text(&d.message, true).into_owned(), line, col)
            })
            .collect()
    }

    /// The file name the errors refer to.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Every error as data: its file, 1-based line and column (in
    /// characters), code, message and notes (texts escaped as in
    /// [`Diagnostics::render`]), in source order.
    pub fn items(&self) -> Vec<DiagnosticItem> {
        let lines = LineIndex::new(&self.source);
        self.errors
            .iter()
            .map(|d| {
                let (line, col) = lines.line_col(d.span.start);
                DiagnosticItem {
                    file: escape_text(&self.file, false).into_owned(),
                    line,
                    col,
                    code: d.code.as_str(),
                    message: escape_text(&d.message, true).into_owned(),
                    notes: d.notes.iter().map(|n| escape_text(n, true).into_owned()).collect(),
                }
            })
            .collect()
    }
}

/// One compile error as data ([`Diagnostics::items`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiagnosticItem {
    /// The source file's name.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// The error's code (`E0101`); `arrayad explain CODE` describes it.
    pub code: &'static str,
    /// The message.
    pub message: String,
    /// Notes and suggestions.
    pub notes: Vec<String>,
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for Diagnostics {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_and_messages_carry_no_terminal_controls() {
        // ESC, NUL, a C1 CSI and a right-to-left override before an error.
        let src = "def f(x: f64) -> f64 = x \u{1b}[31m \0 \u{9b} \u{202e} + true\r\n";
        let err = crate::compile("a\u{7}.arr", src).unwrap_err();
        let out = err.render();
        assert!(!out.chars().any(|c| c != '\n' && is_unsafe(c)), "{out:?}");
        assert!(out.contains("a\\u{7}.arr:1:26"), "{out}");
        assert!(out.contains("\u{241b}[31m \u{2400} \u{fffd} \u{fffd} + true\n"), "{out}");
        // Columns count characters of the original, and every caret sits
        // under the character its column names (the excerpt line and the
        // caret line have the same 4-character gutter `1 │ `).
        let entries = err.entries();
        assert_eq!(entries.last().map(|e| (e.1, e.2)), Some((1, 36)), "{entries:?}");
        let blocks: Vec<&str> = out.split("error[").skip(1).collect();
        assert_eq!(blocks.len(), entries.len());
        for (block, (_, line, col)) in blocks.iter().zip(&entries) {
            assert!(block.contains(&format!(".arr:{line}:{col}")), "{block}");
            let excerpt = block.lines().find(|l| l.starts_with("1 │ ")).unwrap();
            let carets = block.lines().find(|l| l.contains('^')).unwrap();
            let caret = carets.chars().position(|c| c == '^').unwrap();
            assert_eq!(caret, 3 + *col as usize, "{block}");
            let under = excerpt.chars().nth(caret).unwrap();
            let original = src.chars().nth(*col as usize - 1).unwrap();
            assert_eq!(under, if is_unsafe(original) { picture(original) } else { original }, "{block}");
        }
    }

    #[test]
    fn escape_text_keeps_clean_text() {
        assert!(matches!(escape_text("plain λ\ttext\n", true), Cow::Borrowed(_)));
        assert_eq!(escape_text("\u{202e}\r", true), "\\u{202e}\\u{d}");
    }

    #[test]
    fn single_clamps_its_span() {
        let d = Diagnostics::single("f.arr", "aλ", Code::NotUtf8, 2..99, "bad");
        assert_eq!(d.entries(), vec![("bad".to_string(), 1, 2)]);
        assert!(d.render().contains("f.arr:1:2"));
    }
}
