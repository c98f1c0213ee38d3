//! Suggestions for misspelt names: the closest name in scope.

use super::{builtins, Fx};
use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::span::Span;
use crate::tast::TExpr;
use arrayad_ir::DiffOp;

/// The candidate closest to `name` by edit distance (Damerau-Levenshtein,
/// counting a swap of two neighbours as one edit), if it is close enough to
/// be a likely typo: at most a third of the length, and at least one edit
/// (as rustc does). Ties go to the alphabetically first candidate, so the
/// answer does not depend on the candidates' order; the work is linear in
/// the number of candidates.
pub(crate) fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = name.chars().count();
    if len < 2 {
        // Every one-letter name is one edit from every other.
        return None;
    }
    let limit = len.max(3) / 3;
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == name || c.chars().count().abs_diff(len) > limit {
            continue;
        }
        let d = strsim::damerau_levenshtein(name, c);
        if d <= limit && best.is_none_or(|b| (d, c) < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

impl Fx<'_, '_> {
    /// The variable in scope whose name is closest to `name`.
    pub(super) fn similar_variable(&self, name: &str) -> Option<String> {
        closest(name, self.scope.names()).map(str::to_string)
    }

    /// Reports an unknown function `name`, suggesting the closest
    /// definition or builtin.
    pub(super) fn unknown_function(&mut self, name: &str, span: Span) -> TExpr {
        let keywords = [DiffOp::Jvp, DiffOp::Vjp, DiffOp::Grad].map(|op| op.to_string());
        let defs = self.g.index.keys().map(String::as_str);
        let near =
            closest(name, builtins::NAMES.iter().copied().chain(keywords.iter().map(String::as_str)).chain(defs))
                .map(str::to_string);
        let d = Diagnostic::new(Code::UnknownFunction, span, format!("unknown function `{name}`"));
        let d = match near {
            Some(near) => d.with_note(format!("a function with a similar name exists: `{near}`")),
            None => d,
        };
        self.fail_with(d)
    }
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn closest_finds_typos_only() {
        let names = ["weights", "x", "mean", "means"];
        assert_eq!(closest("wieghts", names), Some("weights"));
        assert_eq!(closest("y", names), None);
        assert_eq!(closest("xs", names), Some("x"));
        assert_eq!(closest("mena", names), Some("mean"));
        assert_eq!(closest("totally_different", names), None);
        // A tie (one edit from both) goes to the alphabetically first.
        assert_eq!(closest("meanz", names), Some("mean"));
    }
}
