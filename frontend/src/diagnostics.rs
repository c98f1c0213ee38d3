//! Compile errors with source spans, rendered by codespan-reporting.

use crate::span::{LineIndex, Span};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Config};
use std::fmt;

/// One compile error: a message, the span of the offending code and
/// optional notes (hints).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Diagnostic {
    pub message: String,
    pub span: Span,
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// An error at `span`.
    pub(crate) fn new(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { message: message.into(), span, notes: Vec::new() }
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
#[derive(Clone, Debug)]
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

    /// Every error rendered as codespan-reporting does (no colour): an
    /// `error: MESSAGE` line, a `┌─ FILE:LINE:COL` line, the source line and
    /// carets under the span, then any notes.
    pub fn render(&self) -> String {
        let file = SimpleFile::new(self.file.as_str(), self.source.as_str());
        let config = Config::default();
        let lines = LineIndex::new(&self.source);
        let mut out = String::new();
        for d in &self.errors {
            let cs = CsDiagnostic::error()
                .with_message(d.message.clone())
                .with_labels(vec![Label::primary((), d.span.start..d.span.end)])
                .with_notes(d.notes.clone());
            let mut one = String::new();
            if term::emit_to_string(&mut one, &config, &file, &cs).is_ok() {
                out.push_str(&one);
            } else {
                // Only reachable if a span were outside the source.
                let (line, col) = lines.line_col(d.span.start);
                out.push_str(&format!("error: {}\n  ┌─ {}:{}:{}\n\n", d.message, self.file, line, col));
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

    /// `(message, line, col)` of each error, 1-based, in source order.
    pub fn entries(&self) -> Vec<(String, u32, u32)> {
        let lines = LineIndex::new(&self.source);
        self.errors
            .iter()
            .map(|d| {
                let (line, col) = lines.line_col(d.span.start);
                (d.message.clone(), line, col)
            })
            .collect()
    }

    /// The file name the errors refer to.
    pub fn file(&self) -> &str {
        &self.file
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for Diagnostics {}
