//! The functions as code generation compiles them: in every function, the
//! backward loop nests over points run [`backward_jam_factor`] points per
//! iteration ([`arrayad_ir::passes::jam`]) and the comprehensions of
//! numbers whose bodies loop two points per iteration
//! ([`arrayad_ir::passes::jam_builds`]; in both, the results are bitwise
//! those of the function as it was); then the comprehensions that run in
//! parallel split out into chunk functions ([`crate::parallel`]), a jammed
//! comprehension among them (its iterations are pairs of points).

use crate::calls::Callees;
use crate::parallel::Chunk;
use crate::Backend;
use arrayad_ir::passes::{jam, jam_builds};
use arrayad_ir::Function;

/// The points a jammed backward nest runs per iteration on `backend`.
///
/// LLVM keeps four points' scalars and row pointers in registers and
/// vectorises the loop over a row with four cotangent rows: GMM d20's
/// backward chunk ran 65.4M instructions per call with two points, 56.0M
/// with four (callgrind, one thread; the element of the factor's cotangent
/// is loaded and stored once per four points). Cranelift, which does not
/// vectorise, spills the extra pointers: 126.7M with two, 161.6M with four.
pub(crate) fn backward_jam_factor(backend: Backend) -> usize {
    match backend {
        Backend::Cranelift => 2,
        Backend::Llvm => 4,
    }
}

/// `funcs` scheduled for `backend` (module docs): each function rewritten
/// (`Some`) or unchanged (`None`), and the chunk functions, as
/// [`crate::parallel::split`] gives them. Linear in the size of the
/// functions.
pub(crate) fn schedule(
    funcs: &[&Function],
    callees: &Callees,
    backend: Backend,
) -> (Vec<Option<Function>>, Vec<Chunk>) {
    let factor = backward_jam_factor(backend);
    let jammed: Vec<Option<Function>> = funcs
        .iter()
        .map(|f| {
            // Backward jamming adds no `build`, so `f`'s candidates are the
            // jammed copy's too: one clone serves both passes.
            if !jam::has_candidates(f) && !jam_builds::has_candidates(f) {
                return None;
            }
            let mut g = (*f).clone();
            let nests = jam::jam_backward_nests(&mut g, factor);
            let builds = jam_builds::jam_comprehensions(&mut g);
            (nests || builds).then_some(g)
        })
        .collect();
    let refs: Vec<&Function> = jammed.iter().zip(funcs).map(|(j, f)| j.as_ref().unwrap_or(f)).collect();
    let (split, chunks) = crate::parallel::split(&refs, callees);
    let split = split.into_iter().zip(jammed).map(|(s, j)| s.or(j)).collect();
    (split, chunks)
}
