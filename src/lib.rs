//! arrayad: a compiler for a small first-order array language with forward
//! and reverse automatic differentiation.
//!
//! This crate is the Rust host API (LANGUAGE.md section 9) and, with the
//! default feature `cli`, the `arrayad` command line (section 7); a library
//! user takes `arrayad = { version = "0.1", default-features = false }` and
//! compiles neither clap nor serde_json. Compile source text in process
//! with [`Module::compile`] (Cranelift JIT by default; LLVM with the `llvm`
//! feature, or the reference interpreter, with [`Options`]) or a file with
//! [`Module::from_file`], look a definition up with [`Module::function`]
//! (an owned handle: keep it, clone it, send it to other threads), and call
//! its primal ([`Function::call`]), forward mode ([`Function::jvp`]),
//! reverse mode ([`Function::vjp`]), gradient ([`Function::grad`]), dense
//! Jacobian ([`Function::jacobian`]) or Hessian-vector product
//! ([`Function::hvp`]) on borrowed data ([`Arg`]: arrays are read where
//! they are, never copied). The `_into` calls ([`Function::grad_into`],
//! [`Function::vjp_into`], [`Function::call_into`]) write into the caller's
//! buffers. Every call returns a `Result`; nothing needs `unsafe`.
//!
//! Arguments and results are the *leaves* of the source types, flattened
//! left to right: a tuple parameter takes one [`Arg`] per component, a
//! tuple result gives one [`Value`] per component (as in the C ABI).
//! Derivatives with respect to the arguments are [`ParamValues`], by
//! position or by parameter name.
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
//! // The gradient, by parameter name.
//! let g = f.grad(&args)?;
//! assert!((g.value - expected).abs() < 1e-12);
//! let dx = g.gradient.f64s("x").unwrap();
//! assert!((dx[0] - (0.5 + 1f64.exp())).abs() < 1e-12 && dx[1] == -1.0 && dx[2] == 2.0);
//! assert_eq!(g.gradient.f64s("w"), Some(&x[..]));
//!
//! // The same into buffers of our own (no allocation for the results).
//! let (mut dx, mut dw) = ([0.0; 3], [0.0; 3]);
//! let v = f.grad_into(&args, &mut [&mut dx, &mut dw])?;
//! assert_eq!((v, dw), (g.value, x));
//!
//! // Only w differentiated: another handle, compiled on first use.
//! let fw = f.with_wrt(&["w"])?;
//! assert!(fw.grad(&args)?.gradient.get("x").is_none());
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
//! assert_eq!(vjp.cotangent.f64s("a"), Some(&[6.0][..])); // d/da sum(a * v) = sum(v)
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
//! To differentiate only some parameters by default, or to run on the
//! interpreter:
//!
//! ```
//! use arrayad::{Arg, Backend, Module, Options};
//! let opts = Options::backend(Backend::Interp).with_wrt(&["w"]);
//! let m = Module::compile_with("w.arr", "def f(x: [n]f64, w: [n]f64) -> f64 = dot(x, w)", opts)?;
//! let g = m.function("f")?.grad(&[Arg::Vector(&[1.0, 2.0]), Arg::Vector(&[3.0, 4.0])])?;
//! assert!(g.gradient[0].is_none());
//! assert_eq!(g.gradient.f64s("w"), Some(&[1.0, 2.0][..]));
//! # Ok::<(), arrayad::Error>(())
//! ```
//!
//! Compile errors carry their diagnostics:
//!
//! ```
//! let e = arrayad::Module::compile("bad.arr", "def f(x: f64) -> f64 = y").unwrap_err();
//! let arrayad::Error::Compile(d) = &e else { panic!("{e}") };
//! assert_eq!(d.entries()[0], ("unknown variable `y`".to_string(), 1, 24));
//! let item = &d.items()[0];
//! assert_eq!((item.code, item.line, item.col), ("E0101", 1, 24));
//! assert!(arrayad::explain(item.code).unwrap().contains("unknown variable"));
//! ```

#![warn(missing_docs)]

mod arg;
pub mod driver;
mod engine;
mod error;
mod function;
#[cfg(feature = "json")]
pub mod json;
mod module;
#[cfg(feature = "ndarray")]
mod ndarray_support;
mod results;
mod shapes;

pub use arg::{Arg, Out};
pub use arrayad_frontend::DiagnosticItem;
pub use engine::Backend;
pub use error::{Diagnostics, Error, Warning};
pub use function::{Entry, Function, Grad, Hvp, Jacobian, Jvp, JvpMany, Vjp};
pub use module::{Module, Options};
#[cfg(feature = "ndarray")]
pub use ndarray_support::{ndarray_view, Element};
pub use results::ParamValues;

pub use arrayad_ir::{ArrayData, ArrayValue, ErrorKind, RuntimeError, Scalar, Signature, SrcDim, SrcType, Value};

/// The number of threads on which the compiled code of this process runs
/// its parallel maps (`for` comprehensions of independent iterations whose
/// rows are numbers or arrays of a static shape, and reductions of long
/// arrays, when their work pays for it): the last
/// [`set_num_threads`], else the environment variable
/// `ARRAYAD_NUM_THREADS` (1 to 256), else the number of cores the process
/// may run on. Results are the same bits for every number of threads.
///
/// ```
/// assert!(arrayad::num_threads() >= 1);
/// ```
pub fn num_threads() -> usize {
    arrayad_runtime::num_threads()
}

/// Sets the number of threads of parallel maps for every module of this
/// process (at most 256; `Some(1)` runs everything on the calling thread);
/// `None` restores the default ([`num_threads`]). A call made while the
/// threads run another call's map, or from inside a map, runs its maps on
/// its own thread. Shared libraries have their own setting
/// (`MODULE_set_num_threads`).
pub fn set_num_threads(n: Option<usize>) {
    arrayad_runtime::set_num_threads(n)
}

/// Lets LLVM vectorise the remainders of its vectorised loops 2 lanes
/// wide (LLVM's process-wide option
/// `-epilogue-vectorization-minimum-VF=4`): short rows, such as those of a
/// triangular factor, then run faster (the GMM gradient takes about 5%
/// less time at d20 and d64), with the same results. The `arrayad`
/// command and the GradBench tool call it at start. It changes the LLVM
/// library of the whole process, so a program that uses LLVM for other
/// code as well opts in or not; the second and later calls do nothing.
/// Only in builds with the `llvm` feature.
#[cfg(feature = "llvm")]
pub fn llvm_vectorise_epilogues() {
    arrayad_codegen::llvm_vectorise_epilogues()
}

/// The long explanation, in Markdown, of an error code: a compile error
/// (`E0xxx`, [`arrayad_frontend::codes::Code`]) or a run-time error
/// (`E10xx`, [`ErrorKind::error_code`]); `None` for a string that is no
/// code. `code` may be written `E0101`, `e0101` or `101`.
///
/// ```
/// assert!(arrayad::explain("E0101").unwrap().starts_with("# E0101: unknown variable"));
/// assert!(arrayad::explain("e1001").unwrap().starts_with("# E1001: index out of bounds"));
/// assert_eq!(arrayad::explain("E4242"), None);
/// ```
pub fn explain(code: &str) -> Option<&'static str> {
    if let Some(c) = arrayad_frontend::codes::Code::parse(code) {
        return Some(c.explanation());
    }
    let n: i32 = code.trim().trim_start_matches(['E', 'e']).parse().ok()?;
    let kind = ErrorKind::ALL.iter().find(|k| 1000 + k.code() == n)?;
    Some(kind.explanation())
}

/// Every error code with its one-line title, compile errors first.
pub fn error_codes() -> impl Iterator<Item = (&'static str, &'static str)> {
    let compile = arrayad_frontend::codes::Code::ALL.iter().map(|c| (c.as_str(), c.title()));
    compile.chain(ErrorKind::ALL.iter().map(|k| (k.error_code(), k.describe())))
}

/// The message of a caught panic payload (for the command line's last-resort
/// handler).
#[doc(hidden)]
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    arrayad_ir::stack::panic_message(payload)
}

/// The Rust snippets of the book (`docs/src`) run as doctests
/// (`cargo test --doc`); `tests/docs.rs` checks that every chapter with
/// Rust code is listed here.
#[cfg(doctest)]
pub mod book {
    #[doc = include_str!("../docs/src/tutorial/from-rust.md")]
    pub struct TutorialFromRust;
    #[doc = include_str!("../docs/src/rust-api.md")]
    pub struct RustApi;
}
