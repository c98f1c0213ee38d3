//! The functions as code generation compiles them: in every function, the
//! comprehensions of numbers whose bodies loop run two points per
//! iteration ([`arrayad_ir::passes::jam_builds`]: the results are bitwise
//! those of the function as it was); then the comprehensions that run in
//! parallel split out into chunk functions ([`crate::parallel`]), a jammed
//! comprehension among them (its iterations are pairs of points).

use crate::calls::Callees;
use crate::parallel::Chunk;
use arrayad_ir::passes::jam_builds::{has_candidates, jam_comprehensions};
use arrayad_ir::Function;

/// `funcs` scheduled (module docs): each function rewritten (`Some`) or
/// unchanged (`None`), and the chunk functions, as [`crate::parallel::split`]
/// gives them. Linear in the size of the functions.
pub(crate) fn schedule(funcs: &[&Function], callees: &Callees) -> (Vec<Option<Function>>, Vec<Chunk>) {
    let jammed: Vec<Option<Function>> = funcs
        .iter()
        .map(|f| {
            let mut g = has_candidates(f).then(|| (*f).clone())?;
            jam_comprehensions(&mut g).then_some(g)
        })
        .collect();
    let refs: Vec<&Function> = jammed.iter().zip(funcs).map(|(j, f)| j.as_ref().unwrap_or(f)).collect();
    let (split, chunks) = crate::parallel::split(&refs, callees);
    let split = split.into_iter().zip(jammed).map(|(s, j)| s.or(j)).collect();
    (split, chunks)
}
