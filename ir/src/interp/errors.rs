//! The messages of the run-time checks (LANGUAGE.md section 5), shared by
//! every evaluator of the IR so that they report the same text: the kind,
//! the offending values and `FILE:LINE:COL` of the statement.

use crate::fault::Fault;
use crate::program::{BinOp, ErrorKind, Loc, Program, ReduceOp};
use crate::value::RuntimeError;

fn at(program: &Program, loc: Loc, fault: Fault<'_>, values: &[i64], shapes: [&[i64]; 2]) -> RuntimeError {
    RuntimeError { kind: fault.kind(), message: fault.message(&program.file, loc, values, shapes) }
}

fn i(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An index outside `0..extent` on `axis` of the array named `array`.
pub fn index_out_of_bounds(
    program: &Program,
    loc: Loc,
    array: &str,
    axis: usize,
    index: i64,
    extent: usize,
) -> RuntimeError {
    at(program, loc, Fault::IndexOutOfBounds { array, axis }, &[index, i(extent)], [&[], &[]])
}

/// A slice `lo:hi` outside `0 <= lo <= hi <= n` of the array named `array`.
pub fn slice_out_of_range(program: &Program, loc: Loc, array: &str, lo: i64, hi: i64, n: usize) -> RuntimeError {
    at(program, loc, Fault::SliceOutOfRange { array }, &[lo, hi, i(n)], [&[], &[]])
}

/// A negative trip count `n` of a `for` or `loop` (one wording for both:
/// fusion turns `sum(for ...)` into a loop).
pub fn negative_size(program: &Program, loc: Loc, n: i64) -> RuntimeError {
    at(program, loc, Fault::NegativeSize, &[n], [&[], &[]])
}

/// Row `row` of an array literal or `for` body of `shape`, while row 0 has
/// `first`.
pub fn irregular(program: &Program, loc: Loc, row: usize, shape: &[usize], first: &[usize]) -> RuntimeError {
    let a: Vec<i64> = shape.iter().map(|d| i(*d)).collect();
    let b: Vec<i64> = first.iter().map(|d| i(*d)).collect();
    at(program, loc, Fault::IrregularRows, &[i(row)], [&a, &b])
}

/// A failed size equality `a == b`; `what` describes the two sizes.
pub fn size_mismatch(program: &Program, loc: Loc, what: &str, a: i64, b: i64) -> RuntimeError {
    at(program, loc, Fault::SizeMismatch { what }, &[a, b], [&[], &[]])
}

/// A reshape of the array named `array`, of `count` elements, to extents
/// whose product is `product`.
pub fn reshape_mismatch(program: &Program, loc: Loc, array: &str, product: i64, count: usize) -> RuntimeError {
    at(program, loc, Fault::ReshapeMismatch { array }, &[product, i(count)], [&[], &[]])
}

/// A reshape of the array named `array` to the negative extent `extent`.
pub fn negative_extent(program: &Program, loc: Loc, array: &str, extent: i64) -> RuntimeError {
    at(program, loc, Fault::NegativeExtent { array }, &[extent], [&[], &[]])
}

/// An accumulation into `target` whose addend has extent `a` on `axis`
/// where the target has `b`.
pub fn accumulation_mismatch(program: &Program, loc: Loc, target: &str, axis: usize, a: i64, b: i64) -> RuntimeError {
    at(program, loc, Fault::AccumulationMismatch { target, axis }, &[a, b], [&[], &[]])
}

/// An `i64` division (`op = Div`) or remainder of `dividend` by zero.
pub fn division_by_zero(program: &Program, loc: Loc, op: BinOp, dividend: i64) -> RuntimeError {
    at(program, loc, Fault::DivisionByZero { remainder: op == BinOp::Rem }, &[dividend], [&[], &[]])
}

/// `maximum`/`minimum` of the empty array named `array`.
pub fn empty_reduction(program: &Program, loc: Loc, op: ReduceOp, array: &str) -> RuntimeError {
    at(program, loc, Fault::EmptyReduction { op, array }, &[], [&[], &[]])
}

/// The tape could not grow.
pub fn tape_full(program: &Program, loc: Loc) -> RuntimeError {
    at(program, loc, Fault::TapeFull, &[], [&[], &[]])
}

/// An allocation that failed or whose size overflowed.
pub fn out_of_memory(program: &Program, loc: Loc, what: impl std::fmt::Display) -> RuntimeError {
    match super::meter::limit() {
        Some(limit) => RuntimeError::at(
            ErrorKind::OutOfMemory,
            &program.file,
            loc,
            format!("{what} (the memory limit of {limit} bytes, --max-memory or ARRAYAD_MAX_MEMORY, or the system's memory is exhausted)"),
        ),
        None => RuntimeError::at(ErrorKind::OutOfMemory, &program.file, loc, what),
    }
}

/// IR that the evaluator cannot run (it would not pass the verifier, or it
/// uses a form the evaluator does not support). Reported as
/// [`ErrorKind::InvalidArgument`]: the program is a bad argument.
pub fn malformed(program: &Program, loc: Loc, func: &str, what: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::at(ErrorKind::InvalidArgument, &program.file, loc, format!("malformed IR in `{func}`: {what}"))
}
