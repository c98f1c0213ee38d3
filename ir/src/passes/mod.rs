//! Optimisation passes over the IR: inlining, simplification (copy
//! propagation, constant folding, algebraic identities), common
//! subexpression elimination, dead code elimination, loop fusion and
//! loop-invariant code motion.
//!
//! [`optimize`] runs them in the order the AD output needs.

pub mod accum;
pub mod cse;
pub mod dce;
pub mod fallible;
pub mod fuse;
pub mod inline;
pub mod licm;
pub mod scalarize;
pub mod simplify;
pub mod unroll;

use crate::program::Function;

/// Simplify, fuse, CSE and DCE to a fixed point (a few rounds at most).
/// Semantics, including every run-time error, are preserved.
pub fn optimize(f: &mut Function) {
    for _ in 0..4 {
        let before = f.body.clone();
        accum::fold_accumulators(f);
        simplify::simplify(f);
        unroll::unroll(f);
        scalarize::scalarize(f);
        fuse::fuse(f);
        licm::licm(f);
        cse::cse(f);
        dce::dce(f);
        if f.body == before {
            break;
        }
    }
}
