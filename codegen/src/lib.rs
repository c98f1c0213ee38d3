//! arrayad code generation: IR -> Cranelift, JIT and object files, the C
//! header, the C ABI wrappers and linking a shared library.
//!
//! - [`JitModule`] compiles IR functions in-process and calls them with
//!   [`arrayad_ir::Value`]s.
//! - [`build_shared_library`] writes a `.so` (depending only on libc and
//!   libm) and its header for [`ExportedFunction`]s; [`c_header`] gives the
//!   header text alone.
//!
//! # Internal calling convention
//!
//! Every IR function becomes a machine function
//! `extern "C" fn(ctx: *mut Ctx, args: *const u64, results: *mut u64) -> i32`
//! ([`arrayad_runtime::Ctx`]). `args` and `results` are arrays of 8-byte
//! slots: a scalar takes one slot (`f64` bits, `i64`, `bool` as 0/1), an
//! array `1 + rank` slots (data pointer, then the extent of each axis).
//! Arrays are contiguous and row-major; bool elements take one byte. The
//! status is 0 on success, else the [`arrayad_ir::ErrorKind`] code of the
//! error, whose message the context holds. Result arrays point into the
//! context's arena (valid until the context is released) or into argument
//! memory.
//!
//! # Generated code
//!
//! Arrays allocated during a call come from the context's arena (inline
//! bump allocation; `arrayad_alloc_slow` for a new chunk). Loops whose body
//! allocates but lets nothing escape (no array pushed on the tape or
//! assigned, array rows copied into the result) reset the arena after every
//! iteration, so temporary arrays in loops take constant memory. The tape is
//! a stack of 8-byte slots in the context with inline push/pop. Run-time
//! checks branch to cold blocks that record the error (kind, a static
//! message template with `FILE:LINE:COL`, the offending values) and return
//! its kind.

mod backend;
mod cabi;
mod calls;
mod clif;
mod error;
mod jit;
#[cfg(feature = "llvm")]
mod llvm;
mod lower;
mod parallel;
mod schedule;
mod target;

pub use cabi::abi::{reserved_c_symbol, Entry};
pub use cabi::header::c_header;
pub use cabi::link::{
    build_shared_library, build_shared_library_calling, remove_build_files, Called, CalledDefinition, LinkOptions,
};
pub use calls::{CallTarget, CalledProgram, Callees};
pub use error::CodegenError;
pub use jit::{ArgRef, Dest, JitModule, ResultRef};
#[cfg(feature = "llvm")]
pub use llvm::vectorise_epilogues as llvm_vectorise_epilogues;
pub use target::{Backend, TargetOptions};

/// What a build without the `llvm` feature says when asked for LLVM.
pub const NO_LLVM: &str = "this arrayad is built without LLVM support; build it with \
     `cargo build --release --features llvm` (needs llvm-19-dev; see README.md), \
     or use --backend cranelift";

use arrayad_ir::{Function, Signature};

/// One exported definition of a shared library: its source signature, which
/// source parameters are active (one flag per `signature.params`), and three
/// IR functions:
/// - `primal`: params = flattened leaves, results = flattened leaves;
/// - `jvp`: params = primal params ++ one tangent per f64 leaf of the active
///   params (same type as the leaf), results = primal results ++ one tangent
///   per f64 result leaf;
/// - `vjp`: params = primal params ++ one cotangent per f64 result leaf,
///   results = primal results ++ one cotangent per f64 leaf of the active
///   params;
/// - `vjp_rows` (for `f_jacobian`): as `vjp`, but every cotangent, in and
///   out, has one more leading axis, the `R` rows
///   (`arrayad_ad::Which::VjpRows`).
#[derive(Clone, Debug)]
pub struct ExportedFunction {
    /// The definition's name (the C name of the primal function).
    pub name: String,
    /// Its source signature.
    pub signature: Signature,
    /// Which parameters are differentiated.
    pub active: Vec<bool>,
    /// The C functions to define (`arrayad build --entries`); `None`: every
    /// one the IR functions below allow. An entry needs: `Value` the
    /// primal; `Jvp` `jvp`; `Vjp` and `Grad` `vjp` (and `Grad` a result
    /// that is one `f64`); `Jacobian` the primal, `jvp` or `jvp_lanes`, and `vjp_rows` (for a
    /// result that is one `f64`: `vjp` alone);
    /// `Hvp` `hvp`. Asking for one without what it needs is an
    /// [`CodegenError::Abi`].
    pub entries: Option<Vec<Entry>>,
    /// The primal function.
    pub primal: Function,
    /// Forward mode.
    pub jvp: Option<Function>,
    /// Reverse mode.
    pub vjp: Option<Function>,
    /// Reverse mode for many cotangent rows after one forward pass.
    pub vjp_rows: Option<Function>,
    /// Vector forward mode for the forward-mode Jacobian: params = primal
    /// params ++ `L` sets (lanes) of the jvp's tangents, results = primal
    /// results ++ `L` sets of the jvp's tangent results, lane-major
    /// (`arrayad_ad::jvp_lanes`). With it `f_jacobian` computes `L`
    /// columns per pass; without it, one jvp per column.
    pub jvp_lanes: Option<Function>,
    /// For a definition whose result is one f64 (and only then), the
    /// Hessian-vector product for `f_hvp` (without it, the library has no
    /// `f_hvp`): params = primal params ++ one
    /// tangent per f64 leaf of the active params, results = the value ++
    /// the gradient (one per such leaf) ++ `H t` (one per such leaf)
    /// (`arrayad_ad::hvp`).
    pub hvp: Option<Function>,
}
