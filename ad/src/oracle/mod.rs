//! Runtime AD oracles: the reference derivatives the compiled forward and
//! reverse modes are tested against (DESIGN.md, "Keep a literal
//! implementation of the paper next to the compiled one").
//!
//! Both evaluate the *original* IR program (primal, untransformed, with its
//! calls) on dual values at run time, independently of the IR-to-IR
//! transformations:
//!
//! - [`jvp`]: forward mode by dual numbers, every `f64` carrying its tangent
//!   (Krawiec et al., POPL 2022, Fig. 3 and the wrapper of Fig. 15);
//! - [`vjp`]: reverse mode by the monadic Delta translation (Figs. 9-11, 15):
//!   every `f64` paired with a Delta, one [`delta::DeltaState::delta_let`]
//!   binding per primitive, and [`delta::eval`] over the bindings from last
//!   to first into a mutable `DeltaMap` (section 7.3).
//!
//! Both use the derivative rules of LANGUAGE.md section 6 (module `rules`),
//! including its conventions at non-differentiable points, and the
//! interpreter's primal operations and run-time errors
//! ([`arrayad_ir::interp`]). Arrays hold scalar duals: simple, and O(primal)
//! in time and memory, which is all an oracle needs.

pub mod delta;
mod evaluator;
mod forward;
mod reverse;
mod rules;
mod shapes;
mod special;
mod values;

pub use forward::jvp;
pub use reverse::vjp;
pub use special::{digamma, trigamma};
