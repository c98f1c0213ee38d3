//! The run-time errors of the language (LANGUAGE.md section 5) in one typed
//! place: the kind and the words of every message that the interpreter and
//! compiled code report, so that every backend says the same thing.
//!
//! A message is `FILE:LINE:COL: KIND: DETAIL`. Compiled code cannot format
//! text, so the detail is a *template* fixed at compile time, in which
//! `%1`, `%2`, `%3` stand for up to three `i64` values known only at run
//! time, `%A` and `%B` for two shapes (`[2, 3]`) and `%%` for `%`; the
//! runtime (`arrayad_format_error`) fills them in when the message is read.
//! The interpreter fills in the same template with [`expand`].

use crate::program::{ErrorKind, Loc, ReduceOp};

/// A failed run-time check, with the static facts of its message (names
/// and axes); the dynamic values are listed with each variant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fault<'a> {
    /// An index outside `0..extent` on `axis` of `array`. Values: the
    /// index, the extent.
    IndexOutOfBounds { array: &'a str, axis: usize },
    /// A slice `lo:hi` outside `0 <= lo <= hi <= n` of `array`. Values:
    /// `lo`, `hi`, `n`.
    SliceOutOfRange { array: &'a str },
    /// A negative trip count or size. Value: the count.
    NegativeSize,
    /// Rows of an array literal or `for` body of different shapes. Values:
    /// the row number; shapes: that row's and row 0's.
    IrregularRows,
    /// Two sizes that must be equal are not; `what` names them. Values: the
    /// two sizes.
    SizeMismatch { what: &'a str },
    /// A reshape of `array` to extents whose product is not its element
    /// count. Values: that product, the element count.
    ReshapeMismatch { array: &'a str },
    /// A negative extent asked of the reshape of `array`. Value: the extent.
    NegativeExtent { array: &'a str },
    /// An accumulation `target += addend` whose extents differ on `axis`.
    /// Values: the addend's and the target's extents.
    AccumulationMismatch { target: &'a str, axis: usize },
    /// An integer division (or remainder, when `remainder`) by zero. Value:
    /// the dividend.
    DivisionByZero { remainder: bool },
    /// `maximum`/`minimum` of the empty array `array`.
    EmptyReduction { op: ReduceOp, array: &'a str },
    /// The byte size of an array does not fit in 63 bits.
    ArraySizeOverflow,
    /// An allocation failed. Value: its size in bytes.
    AllocationFailed,
    /// The tape could not grow.
    TapeFull,
    /// The backward pass popped more than the forward pass pushed (a bug
    /// of the generated code, reported rather than crashing).
    TapeUnderflow,
    /// A tape rewind beyond the stored entries (a bug of the generated
    /// code). Values: the mark, the number of stored slots.
    TapeRewindBeyondEnd,
    /// `function`, which calls definitions kept as calls, entered deeper
    /// in such calls than the stack they may use (a native frame each).
    CallsTooDeep { function: &'a str },
    /// The compiled code of `function` needs a stack frame larger than
    /// what the thread has left above the stack limit (a very large
    /// function keeps many values in stack slots). Value: the frame in
    /// bytes.
    FrameTooLarge { function: &'a str },
}

/// `%` doubled, so that a name can be part of a template.
pub fn escape(text: &str) -> String {
    text.replace('%', "%%")
}

impl Fault<'_> {
    /// The kind of error (the C ABI code).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Fault::IndexOutOfBounds { .. } => ErrorKind::IndexOutOfBounds,
            Fault::SliceOutOfRange { .. } => ErrorKind::SliceOutOfRange,
            Fault::NegativeSize => ErrorKind::NegativeSize,
            Fault::IrregularRows => ErrorKind::IrregularArray,
            Fault::SizeMismatch { .. } | Fault::AccumulationMismatch { .. } | Fault::ReshapeMismatch { .. } => {
                ErrorKind::SizeMismatch
            }
            Fault::NegativeExtent { .. } => ErrorKind::NegativeSize,
            Fault::DivisionByZero { .. } => ErrorKind::DivisionByZero,
            Fault::EmptyReduction { .. } => ErrorKind::EmptyReduction,
            Fault::ArraySizeOverflow
            | Fault::AllocationFailed
            | Fault::TapeFull
            | Fault::CallsTooDeep { .. }
            | Fault::FrameTooLarge { .. } => ErrorKind::OutOfMemory,
            Fault::TapeUnderflow | Fault::TapeRewindBeyondEnd => ErrorKind::InvalidArgument,
        }
    }

    /// The detail template (module docs).
    pub fn template(&self) -> String {
        match self {
            Fault::IndexOutOfBounds { array, axis } => {
                format!("index %1 is out of bounds for axis {axis} of `{}`, of extent %2", escape(array))
            }
            Fault::SliceOutOfRange { array } => {
                format!("slice %1:%2 of `{}`, whose axis 0 has extent %3", escape(array))
            }
            Fault::NegativeSize => "%1 iterations".into(),
            Fault::IrregularRows => "row %1 has shape %A but row 0 has shape %B".into(),
            Fault::SizeMismatch { what } => format!("{}: %1 and %2 differ", escape(what)),
            Fault::ReshapeMismatch { array } => {
                format!("reshape of `{}`, which has %2 elements, to a shape of %1 elements", escape(array))
            }
            Fault::NegativeExtent { array } => format!("reshape of `{}` to the negative extent %1", escape(array)),
            Fault::AccumulationMismatch { target, axis } => format!(
                "accumulation into `{}`, axis {axis} of the addend and of the target: %1 and %2 differ",
                escape(target)
            ),
            Fault::DivisionByZero { remainder: false } => "integer division of %1 by zero".into(),
            Fault::DivisionByZero { remainder: true } => "remainder of %1 by zero".into(),
            Fault::EmptyReduction { op, array } => format!("{} of the empty array `{}`", op.name(), escape(array)),
            Fault::ArraySizeOverflow => "the size of an array overflows".into(),
            Fault::AllocationFailed => {
                "cannot allocate an array of %1 bytes (the memory limit, --max-memory or ARRAYAD_MAX_MEMORY, or the system's memory is exhausted)".into()
            }
            Fault::TapeFull => {
                "the tape cannot grow (the memory limit, --max-memory or ARRAYAD_MAX_MEMORY, or the system's memory is exhausted)".into()
            }
            Fault::TapeUnderflow => "tape underflow (internal error of the generated code)".into(),
            Fault::TapeRewindBeyondEnd => {
                "tape rewind to slot %1 beyond the %2 stored slots (internal error of the generated code)".into()
            }
            Fault::CallsTooDeep { function } => format!(
                "calls nest too deeply at `{}`: nested calls of definitions compiled once (not inlined) need more stack than the thread has left for generated code",
                escape(function)
            ),
            Fault::FrameTooLarge { function } => format!(
                "the compiled code of `{}` needs a stack frame of %1 bytes, more than the thread has left for generated code",
                escape(function)
            ),
        }
    }

    /// The whole message template: `FILE:LINE:COL: KIND: DETAIL`, with the
    /// file name escaped.
    pub fn located_template(&self, file: &str, loc: Loc) -> String {
        format!("{}:{}:{}: {}: {}", escape(file), loc.line, loc.col, self.kind().describe(), self.template())
    }

    /// The whole message with `values` and `shapes` filled in (what the
    /// runtime prints for compiled code).
    pub fn message(&self, file: &str, loc: Loc, values: &[i64], shapes: [&[i64]; 2]) -> String {
        expand(&self.located_template(file, loc), values, shapes)
    }
}

/// Fills in a template (module docs): `%1`..`%3` from `values` (0 when
/// missing), `%A`/`%B` from `shapes`, `%%` as `%`; any other `%` is kept.
pub fn expand(template: &str, values: &[i64], shapes: [&[i64]; 2]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some(d @ '1'..='3') => {
                chars.next();
                let k = d as usize - '1' as usize;
                out.push_str(&values.get(k).copied().unwrap_or(0).to_string());
            }
            Some(s @ ('A' | 'B')) => {
                chars.next();
                let dims = shapes[if s == 'A' { 0 } else { 1 }];
                let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
                out.push('[');
                out.push_str(&parts.join(", "));
                out.push(']');
            }
            Some('%') => {
                chars.next();
                out.push('%');
            }
            _ => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_like_the_runtime() {
        let f = Fault::IndexOutOfBounds { array: "x%y", axis: 1 };
        assert_eq!(
            f.message("a%b.arr", Loc::new(2, 3), &[7, 5], [&[], &[]]),
            "a%b.arr:2:3: index out of bounds: index 7 is out of bounds for axis 1 of `x%y`, of extent 5"
        );
        assert_eq!(
            Fault::IrregularRows.message("f", Loc::new(1, 1), &[2], [&[2, 3], &[2, 4]]),
            "f:1:1: irregular array: row 2 has shape [2, 3] but row 0 has shape [2, 4]"
        );
        assert_eq!(expand("100%% %9 %", &[], [&[], &[]]), "100% %9 %");
    }
}
