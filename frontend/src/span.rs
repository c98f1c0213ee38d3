//! Byte spans of the source text and their 1-based line and column.

use arrayad_ir::Loc;

/// A half-open byte range `start..end` of the source text. Both ends are
/// always on UTF-8 character boundaries.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// The span `start..end`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// Converts byte offsets to 1-based lines and columns (columns counted in
/// characters, as codespan-reporting does).
pub(crate) struct LineIndex<'s> {
    source: &'s str,
    /// Byte offset of the start of every line.
    starts: Vec<usize>,
    /// Whether each line is pure ASCII (then columns are byte offsets).
    ascii: Vec<bool>,
}

impl<'s> LineIndex<'s> {
    /// Indexes the lines of `source`.
    pub(crate) fn new(source: &'s str) -> LineIndex<'s> {
        let mut starts = vec![0];
        starts.extend(source.match_indices('\n').map(|(i, _)| i + 1));
        let ascii = starts
            .iter()
            .enumerate()
            .map(|(k, &s)| {
                let e = starts.get(k + 1).copied().unwrap_or(source.len());
                source.get(s..e).is_some_and(|l| l.is_ascii())
            })
            .collect();
        LineIndex { source, starts, ascii }
    }

    /// The 1-based line and column of byte `offset`.
    pub(crate) fn line_col(&self, offset: usize) -> (u32, u32) {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = match self.starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let start = self.starts.get(line).copied().unwrap_or(0);
        let col = if self.ascii.get(line).copied().unwrap_or(false) {
            offset - start
        } else {
            self.source.get(start..offset).map_or(0, |s| s.chars().count())
        };
        (to_u32(line + 1), to_u32(col + 1))
    }

    /// The IR location of byte `offset`.
    pub(crate) fn loc(&self, offset: usize) -> Loc {
        let (line, col) = self.line_col(offset);
        Loc::new(line, col)
    }
}

fn to_u32(x: usize) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns() {
        let src = "ab\ncd\n\nλx y";
        let li = LineIndex::new(src);
        assert_eq!(li.line_col(0), (1, 1));
        assert_eq!(li.line_col(1), (1, 2));
        assert_eq!(li.line_col(3), (2, 1));
        assert_eq!(li.line_col(6), (3, 1));
        assert_eq!(li.line_col(7), (4, 1));
        // 'λ' is two bytes: 'x' is column 2, 'y' column 4.
        assert_eq!(li.line_col(9), (4, 2));
        assert_eq!(li.line_col(11), (4, 4));
        // Inside a character, and past the end: clamped.
        assert_eq!(li.line_col(8), (4, 1));
        assert_eq!(li.line_col(1000), (4, 5));
    }
}
