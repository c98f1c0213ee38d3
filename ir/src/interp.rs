//! The reference interpreter of the IR: every form of [`crate::program`],
//! with the semantics and run-time checks of LANGUAGE.md sections 3-5.
//!
//! It is the `interp` backend of the command line and the ground truth the
//! compiled backends are tested against, so it favours being obviously right
//! over being fast:
//!
//! - arrays are views (offset and shape) of reference-counted storage, so
//!   `Index` with fewer indices than the rank and `Slice` alias their parent
//!   and `AccAdd` through a view of an accumulator updates it;
//! - scalar operations are those of [`ops`] (IEEE `f64`, wrapping `i64`,
//!   C-library math functions);
//! - run-time errors carry the statement's `FILE:LINE:COL` ([`errors`]);
//! - IR that would not pass the verifier, recursion, or nesting deeper than
//!   [`stack::MAX_DEPTH`] give errors, never a panic or a stack overflow.
//!
//! ```
//! use arrayad_ir::{builder::Builder, interp, program::*, types::{Scalar, Type}, Value};
//! let mut f = Function { name: "sq".into(), params: vec![], body: Block::default(), vars: vec![],
//!     result_types: vec![Type::F64],
//!     signature: Signature { params: vec![], result: SrcType::Scalar(Scalar::F64) },
//!     loc: Loc::default() };
//! let x = f.new_var("x", Type::F64);
//! f.params.push(x);
//! let mut b = Builder::new(&mut f);
//! let y = b.binary(BinOp::Mul, Atom::Var(x), Atom::Var(x));
//! f.body = b.finish(vec![y]);
//! let p = Program { file: "sq.arr".into(), funcs: vec![f] };
//! assert_eq!(interp::run(&p, FuncId(0), &[Value::F64(3.0)]).unwrap(), vec![Value::F64(9.0)]);
//! ```

mod array;
pub mod checks;
pub mod errors;
mod machine;
mod meter;
pub mod ops;
pub mod stack;

use crate::program::{FuncId, Program};
use crate::value::{RuntimeError, Value};
use array::Val;

/// Runs function `func` of `program` on `args` (one value per IR parameter
/// of the function, i.e. the flattened leaves of its source parameters) and
/// returns its results (flattened likewise).
///
/// Fails with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
/// when `args` do not match the parameters (count, element type, rank, data
/// length) or the program cannot be run (recursion, malformed IR), and with
/// the kinds of LANGUAGE.md section 5 on run-time errors.
pub fn run(program: &Program, func: FuncId, args: &[Value]) -> Result<Vec<Value>, RuntimeError> {
    run_with_limit(program, func, args, None)
}

/// [`run`] within a memory limit of `max_memory` bytes (`None`: none) for
/// the arrays and the tape alive in the run, as the compiled code's arena
/// and tape have one: an allocation beyond it fails with
/// [`ErrorKind::OutOfMemory`](crate::ErrorKind::OutOfMemory) at its
/// statement. The arguments do not count (the compiled code reads them in
/// place).
pub fn run_with_limit(
    program: &Program,
    func: FuncId,
    args: &[Value],
    max_memory: Option<u64>,
) -> Result<Vec<Value>, RuntimeError> {
    checks::check_calls(program, func)?;
    checks::check_args(program, func, args)?;
    stack::with_deep_stack(|| {
        meter::with_limit(max_memory, || {
            let loc = program.func(func).loc;
            let args = args.iter().map(Val::from_value).collect();
            let results = machine::Machine::new(program).call(func, args, loc)?;
            Ok(results.iter().map(Val::to_value).collect())
        })
    })
}
