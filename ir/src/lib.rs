//! The arrayad intermediate representation.
//!
//! One program representation that every stage after the frontend reads
//! and writes (DESIGN.md, "Pipeline and crates"): first-order, typed,
//! A-normal form ([`program`]), with its text form ([`printer`]), the
//! verifier ([`verify`]), the reference interpreter ([`interp`]) and the
//! optimisation passes ([`passes`]).

pub mod builder;
pub mod derivative;
pub mod fault;
pub mod fx;
pub mod inline_math;
pub mod interp;
pub mod math;
pub mod printer;
pub mod program;
pub mod shape;
pub mod size;
pub mod stack;
pub mod timing;
pub mod types;
pub mod typing;
pub mod value;
pub mod verify;

pub use derivative::{DiffOp, KeptKind};
pub use fault::Fault;
pub use math::MathFn;
pub use program::*;
pub use size::{SizeEvalError, SizeExpr, SizeOp};
pub use types::{Scalar, Type};
pub use value::{ArrayData, ArrayValue, RuntimeError, Value};
pub mod passes;
pub mod visit;
