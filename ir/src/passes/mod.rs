//! Optimisation passes over the IR: inlining, simplification (copy
//! propagation, constant folding, algebraic identities), common
//! subexpression elimination, dead code elimination, loop fusion, array
//! contraction, loop-invariant code motion and mutable scalars made
//! values.
//!
//! [`optimize`] runs them in the order the AD output needs.

pub mod accum;
pub mod broadcast;
pub mod contract;
pub mod cse;
pub mod dce;
pub mod fallible;
pub mod forward_loops;
pub mod fuse;
pub mod fuse_for;
pub mod gather;
pub mod inline;
pub mod interchange;
pub mod jam;
pub mod jam_builds;
pub mod licm;
pub mod mutables;
mod offsets;
pub mod outline;
pub mod reductions;
pub mod scalarize;
pub mod simplify;
pub mod unroll;

use crate::program::{FuncId, Function, Program};
use crate::timing::time;

/// The primal of `func` ready for differentiation and code generation:
/// every call inlined ([`inline::inline_all`]), then [`optimize`]d. Check
/// its size first with [`inline::check_inlining`] (inlining a program
/// that crosses the limits is refused there with a located error).
pub fn prepare(program: &Program, func: FuncId) -> Function {
    let mut f = time("inline", || inline::inline_all(program, func));
    optimize_and_hoist(&mut f);
    f
}

/// [`prepare`] with the calls of `kept` kept as calls
/// ([`inline::KeptCalls`]: compiled once and called). Check its size first
/// with [`inline::InlineCosts::keeping`].
pub fn prepare_keeping(program: &Program, func: FuncId, kept: &inline::KeptCalls) -> Function {
    let mut f = time("inline", || inline::inline_all_but(program, func, &|g| kept.keeps(g)));
    optimize_and_hoist(&mut f);
    f
}

/// [`optimize`], then the gathers hoisted ([`gather::hoist_gathers`], once:
/// its failing version keeps the gather) and [`optimize`] again if it
/// hoisted any.
fn optimize_and_hoist(f: &mut Function) {
    optimize(f);
    if !f.is_straight_line_scalar() && time("hoist gathers", || gather::hoist_gathers(f)) {
        optimize(f);
    }
}

/// Simplify, fuse, CSE and DCE to a fixed point (a few rounds at most).
/// Semantics, including every run-time error, are preserved.
pub fn optimize(f: &mut Function) {
    if crate::timing::enabled() {
        let phase = format!("optimize `{}`", f.name);
        time(&phase, || optimize_rounds(f));
    } else {
        optimize_rounds(f);
    }
}

/// Functions with more statements than this (at every depth) get one
/// round of [`optimize`], not rounds to a fixed point: on the chains of
/// 10,000 and 100,000 lets of `bench/scaling.sh`, the second round of the
/// primal, the vjp and the Hessian-vector product changed nothing, and it
/// cost almost as much as the first (1.6 s of the larger chain's
/// Hessian-vector product, on the critical path of its build).
pub const ONE_ROUND_ABOVE: usize = 100_000;

fn optimize_rounds(f: &mut Function) {
    let rounds = if crate::visit::stmt_count(&f.body) > ONE_ROUND_ABOVE { 1 } else { 4 };
    // The passes that rewrite arrays or loops find nothing to do in
    // straight-line scalar code, and none of the passes makes an array or a
    // loop there: a library of many small definitions (their derivatives
    // made of calls and scalar arithmetic) spent a fifth of its
    // optimisation time in them.
    let arrays_or_loops = !f.is_straight_line_scalar();
    // A round that changes nothing ends it: compared by a hash of the
    // function (a copy to compare with cost more than some passes).
    let mut before = time("fingerprint", || fingerprint(f));
    for _ in 0..rounds {
        time("accum", || accum::fold_accumulators(f));
        time("mutables", || mutables::mutables_to_values(f));
        time("simplify", || simplify::simplify(f));
        if arrays_or_loops {
            time("broadcast", || broadcast::forward_broadcasts(f));
            time("unroll", || unroll::unroll(f));
            time("scalarize", || scalarize::scalarize(f));
            time("fuse", || fuse::fuse(f));
            time("fuse for", || fuse_for::fuse_for_loops(f));
            time("contract", || contract::contract_accumulators(f));
            time("reductions", || reductions::sum_backward_reductions(f));
            time("interchange", || interchange::interchange_backward_nests(f));
            time("licm", || licm::licm(f));
        }
        time("cse", || cse::cse(f));
        time("dce", || dce::dce(f));
        let after = time("fingerprint", || fingerprint(f));
        if after == before {
            break;
        }
        before = after;
    }
    if arrays_or_loops {
        time("forward loops", || forward_loops::run_independent_loops_forward(f));
    }
}

/// A hash of the body of `f` and of its variables' number and mutability:
/// equal before and after a round of passes when the round changed nothing
/// (a collision would only end the optimisation early).
fn fingerprint(f: &Function) -> u64 {
    use crate::program::{Atom, Block, Expr, StmtKind};
    use std::hash::{Hash, Hasher};
    fn atom(a: &Atom, h: &mut crate::fx::FxHasher) {
        match a {
            Atom::Var(v) => (0u8, v.0).hash(h),
            Atom::F64(x) => (1u8, x.to_bits()).hash(h),
            Atom::I64(x) => (2u8, *x).hash(h),
            Atom::Bool(x) => (3u8, *x).hash(h),
        }
    }
    fn atoms(a: &[Atom], h: &mut crate::fx::FxHasher) {
        a.len().hash(h);
        a.iter().for_each(|x| atom(x, h));
    }
    fn block(b: &Block, h: &mut crate::fx::FxHasher) {
        b.stmts.len().hash(h);
        for s in &b.stmts {
            s.loc.hash(h);
            match &s.kind {
                StmtKind::Let { vars, expr } => {
                    (0u8, vars).hash(h);
                    match expr {
                        Expr::Atom(a) => {
                            0u8.hash(h);
                            atom(a, h);
                        }
                        Expr::Unary(op, a) => {
                            (1u8, op).hash(h);
                            atom(a, h);
                        }
                        Expr::Binary(op, a, b) => {
                            (2u8, op).hash(h);
                            atom(a, h);
                            atom(b, h);
                        }
                        Expr::Index { array, indices } => {
                            (3u8, array).hash(h);
                            atoms(indices, h);
                        }
                        Expr::Slice { array, lo, hi } => {
                            (4u8, array).hash(h);
                            atom(lo, h);
                            atom(hi, h);
                        }
                        Expr::Dim { array, axis } => (5u8, array, axis).hash(h),
                        Expr::Reduce { op, array } => (6u8, op, array).hash(h),
                        Expr::ArrayLit { elem_ty, elems } => {
                            (7u8, elem_ty).hash(h);
                            atoms(elems, h);
                        }
                        Expr::Build { n, index, body } => {
                            (8u8, index).hash(h);
                            atom(n, h);
                            block(body, h);
                        }
                        Expr::Loop { n, index, states, init, body } => {
                            (9u8, index, states).hash(h);
                            atom(n, h);
                            atoms(init, h);
                            block(body, h);
                        }
                        Expr::While { states, init, cond, body } => {
                            (10u8, states).hash(h);
                            atoms(init, h);
                            block(cond, h);
                            block(body, h);
                        }
                        Expr::If { cond, then_branch, else_branch } => {
                            11u8.hash(h);
                            atom(cond, h);
                            block(then_branch, h);
                            block(else_branch, h);
                        }
                        Expr::Call { func, args } => {
                            (12u8, func).hash(h);
                            atoms(args, h);
                        }
                        Expr::ZerosLike(v) => (13u8, v).hash(h),
                        Expr::Zeros(dims) => {
                            14u8.hash(h);
                            atoms(dims, h);
                        }
                        Expr::Pop => 15u8.hash(h),
                        Expr::TapeMark => 16u8.hash(h),
                        Expr::Reshape { array, dims } => {
                            (17u8, array).hash(h);
                            atoms(dims, h);
                        }
                        Expr::Update { array, indices, value } => {
                            (18u8, array).hash(h);
                            atoms(indices, h);
                            atom(value, h);
                        }
                    }
                }
                StmtKind::Assign { var, value } => {
                    (1u8, var).hash(h);
                    atom(value, h);
                }
                StmtKind::AccAdd { acc, indices, value } => {
                    (2u8, acc).hash(h);
                    atoms(indices, h);
                    atom(value, h);
                }
                StmtKind::AccZero { acc, indices } => {
                    (9u8, acc).hash(h);
                    atoms(indices, h);
                }
                StmtKind::CheckSize { a, b, what } => {
                    (3u8, what).hash(h);
                    atom(a, h);
                    atom(b, h);
                }
                StmtKind::Push(a) => {
                    4u8.hash(h);
                    atom(a, h);
                }
                StmtKind::TapeRewind(a) => {
                    5u8.hash(h);
                    atom(a, h);
                }
                StmtKind::For { n, index, reverse, body } => {
                    (6u8, index, reverse).hash(h);
                    atom(n, h);
                    block(body, h);
                }
                StmtKind::If { cond, then_branch, else_branch } => {
                    7u8.hash(h);
                    atom(cond, h);
                    block(then_branch, h);
                    block(else_branch, h);
                }
            }
        }
        atoms(&b.results, h);
    }
    let mut h = crate::fx::FxHasher::default();
    f.vars.len().hash(&mut h);
    f.vars.iter().filter(|v| v.mutable).count().hash(&mut h);
    block(&f.body, &mut h);
    h.finish()
}
