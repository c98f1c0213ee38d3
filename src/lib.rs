//! arrayad: a compiler for a small first-order array language with forward
//! and reverse automatic differentiation.
//!
//! This crate is the Rust host API (LANGUAGE.md section 9) and the `arrayad`
//! command line (section 7). Compile source text in process with
//! [`Module::compile`] (Cranelift JIT by default, or the reference
//! interpreter with [`Options`]), look a definition up with
//! [`Module::function`], and call its primal ([`Function::call`]), forward
//! mode ([`Function::jvp`]), reverse mode ([`Function::vjp`]), gradient
//! ([`Function::grad`]) or dense Jacobian ([`Function::jacobian`]) on
//! borrowed data ([`Arg`]). Every call returns a `Result`; nothing needs
//! `unsafe`. A [`Module`] is `Send + Sync`.
//!
//! Arguments and results are the *leaves* of the source types, flattened
//! left to right: a tuple parameter takes one [`Arg`] per component, a
//! tuple result gives one [`Value`] per component (as in the C ABI).
//!
//! ```
//! use arrayad::{Arg, ErrorKind, Module, Value};
//!
//! let source = "
//! // a weighted sum plus a nonlinear term
//! def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])
//!
//! def scale(a: f64, v: [n]f64) -> [n]f64 = a * v
//! ";
//! let module = Module::compile("example.arr", source)?;
//! let f = module.function("f")?;
//! let x = [1.0, 2.0, 3.0];
//! let w = [0.5, -1.0, 2.0];
//! let args = [Arg::Vector(&x), Arg::Vector(&w)];
//!
//! // The primal: one result leaf, an f64.
//! let value = f.call(&args)?;
//! let expected = 0.5 - 2.0 + 6.0 + 1f64.exp();
//! assert!((value[0].as_f64().unwrap() - expected).abs() < 1e-12);
//!
//! // The gradient: one entry per argument (None where not differentiated).
//! let (v, grad) = f.grad(&args)?;
//! assert!((v - expected).abs() < 1e-12);
//! let dx = grad[0].as_ref().and_then(Value::f64_elements).unwrap();
//! let dw = grad[1].as_ref().and_then(Value::f64_elements).unwrap();
//! assert!((dx[0] - (0.5 + 1f64.exp())).abs() < 1e-12 && dx[1] == -1.0 && dx[2] == 2.0);
//! assert_eq!(dw, &x[..]);
//!
//! // Forward mode: the derivative in direction (tx, 0).
//! let tx = [0.0, 1.0, 0.0];
//! let jvp = f.jvp(&args, &[Some(Arg::Vector(&tx)), None])?;
//! assert_eq!(jvp.tangent[0], Some(Value::F64(-1.0)));
//!
//! // Reverse mode and the Jacobian of an array-valued function.
//! let scale = module.function("scale")?;
//! let sargs = [Arg::F64(2.0), Arg::Vector(&x)];
//! let ct = [1.0, 1.0, 1.0];
//! let vjp = scale.vjp(&sargs, &[Some(Arg::Vector(&ct))])?;
//! assert_eq!(vjp.cotangent[0], Some(Value::F64(6.0))); // d/da sum(a * v) = sum(v)
//! let jac = scale.jacobian(&sargs)?;
//! assert_eq!((jac.rows, jac.cols), (3, 4)); // 3 results; a and 3 elements of v
//! assert_eq!(jac.row(1), &[2.0, 0.0, 2.0, 0.0]);
//!
//! // Run-time errors are values, with the source location.
//! let err = f.call(&[Arg::Vector(&x), Arg::Vector(&w[..2])]).unwrap_err();
//! assert_eq!(err.runtime_kind(), Some(ErrorKind::SizeMismatch));
//! assert!(err.to_string().starts_with("example.arr:"));
//! # Ok::<(), arrayad::Error>(())
//! ```
//!
//! To differentiate only some parameters, or to run on the interpreter:
//!
//! ```
//! use arrayad::{Arg, Backend, Module, Options};
//! let opts = Options::backend(Backend::Interp).with_wrt(&["w"]);
//! let m = Module::compile_with("w.arr", "def f(x: [n]f64, w: [n]f64) -> f64 = dot(x, w)", opts)?;
//! let (_, grad) = m.function("f")?.grad(&[Arg::Vector(&[1.0, 2.0]), Arg::Vector(&[3.0, 4.0])])?;
//! assert!(grad[0].is_none());
//! assert_eq!(grad[1].as_ref().unwrap().f64_elements(), Some(&[1.0, 2.0][..]));
//! # Ok::<(), arrayad::Error>(())
//! ```

#![warn(missing_docs)]

mod arg;
mod engine;
mod error;
mod function;
pub mod json;
mod module;
mod shapes;

pub use arg::Arg;
pub use engine::Backend;
pub use error::Error;
pub use function::{Entry, Function, Hvp, Jacobian, Jvp, Vjp};
pub use module::{Module, Options};

pub use arrayad_ir::{ArrayData, ArrayValue, ErrorKind, RuntimeError, Scalar, Signature, SrcDim, SrcType, Value};

/// The message of a caught panic payload (for the command line's last-resort
/// handler).
#[doc(hidden)]
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    engine::panic_message(payload)
}
