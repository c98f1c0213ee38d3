//! The messages of the run-time checks (LANGUAGE.md section 5), shared by
//! every evaluator of the IR so that they report the same text: the kind,
//! the offending values and `FILE:LINE:COL` of the statement.

use crate::program::{BinOp, ErrorKind, Loc, Program, ReduceOp};
use crate::value::RuntimeError;

/// An index outside `0..extent` on `axis` of the array named `array`.
pub fn index_out_of_bounds(
    program: &Program,
    loc: Loc,
    array: &str,
    axis: usize,
    index: i64,
    extent: usize,
) -> RuntimeError {
    RuntimeError::at(
        ErrorKind::IndexOutOfBounds,
        &program.file,
        loc,
        format!("index {index} is out of bounds for axis {axis} of `{array}`, of extent {extent}"),
    )
}

/// A slice `lo:hi` outside `0 <= lo <= hi <= n` of the array named `array`.
pub fn slice_out_of_range(program: &Program, loc: Loc, array: &str, lo: i64, hi: i64, n: usize) -> RuntimeError {
    RuntimeError::at(
        ErrorKind::SliceOutOfRange,
        &program.file,
        loc,
        format!("slice {lo}:{hi} of `{array}`, whose axis 0 has extent {n}"),
    )
}

/// A negative trip count `n` of a `for` or `loop` (one wording for both:
/// fusion turns `sum(for ...)` into a loop).
pub fn negative_size(program: &Program, loc: Loc, n: i64) -> RuntimeError {
    RuntimeError::at(ErrorKind::NegativeSize, &program.file, loc, format!("{n} iterations"))
}

/// Row `row` of an array literal or `for` body of `shape`, while row 0 has
/// `first`.
pub fn irregular(program: &Program, loc: Loc, row: usize, shape: &[usize], first: &[usize]) -> RuntimeError {
    RuntimeError::at(
        ErrorKind::IrregularArray,
        &program.file,
        loc,
        format!("row {row} has shape {shape:?} but row 0 has shape {first:?}"),
    )
}

/// A failed size equality `a == b`; `what` describes the two sizes.
pub fn size_mismatch(program: &Program, loc: Loc, what: &str, a: i64, b: i64) -> RuntimeError {
    RuntimeError::at(ErrorKind::SizeMismatch, &program.file, loc, format!("{what}: {a} and {b} differ"))
}

/// An `i64` division (`op = Div`) or remainder of `dividend` by zero.
pub fn division_by_zero(program: &Program, loc: Loc, op: BinOp, dividend: i64) -> RuntimeError {
    let what = if op == BinOp::Rem { "remainder" } else { "integer division" };
    RuntimeError::at(ErrorKind::DivisionByZero, &program.file, loc, format!("{what} of {dividend} by zero"))
}

/// `maximum`/`minimum` of the empty array named `array`.
pub fn empty_reduction(program: &Program, loc: Loc, op: ReduceOp, array: &str) -> RuntimeError {
    RuntimeError::at(
        ErrorKind::EmptyReduction,
        &program.file,
        loc,
        format!("{} of the empty array `{array}`", op.name()),
    )
}

/// An allocation that failed or whose size overflowed.
pub fn out_of_memory(program: &Program, loc: Loc, what: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::at(ErrorKind::OutOfMemory, &program.file, loc, what)
}

/// IR that the evaluator cannot run (it would not pass the verifier, or it
/// uses a form the evaluator does not support). Reported as
/// [`ErrorKind::InvalidArgument`]: the program is a bad argument.
pub fn malformed(program: &Program, loc: Loc, func: &str, what: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::at(ErrorKind::InvalidArgument, &program.file, loc, format!("malformed IR in `{func}`: {what}"))
}
