//! Loop fusion, so that `sum(for ...)`, `dot` and chains of elementwise
//! operations run as single loops without temporary arrays:
//!
//! - reduction fusion of integers: `y = build i < n => r; s = sum y` (y
//!   used once, `i64`) becomes `s = loop acc = 0 for i < n do acc + r`.
//!   An `f64` sum adds in partial sums ([`crate::interp::ops::sum_f64`]),
//!   which no sequential loop of the IR expresses: it stays a `sum` of a
//!   `build`, and code generation computes the two as one loop without the
//!   array;
//! - map fusion: `y = build j < n => r1` (y used once) read as `y[i]` at the
//!   top of the body of `z = build i < n => ...` (the same `n`) moves the
//!   producer's body into the consumer's, unless that body runs a loop
//!   (`runs_loop`: the array then costs little against the loop, and the
//!   consumer stays a body a sum unrolls).
//!
//! Both keep the order of floating-point operations, so results are bit
//! for bit those of the unfused program.
//! Both keep every run-time error and the order in which they would occur:
//! the fused reduction takes the producer's place, and map fusion (which
//! runs the producer's body later, interleaved with the consumer's) only
//! moves a producer that cannot fail ([`super::fallible`]).

use super::fallible::Fallible;
use crate::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use crate::program::{Atom, Block, Expr, Function, ReduceOp, Stmt, StmtKind, VarId};
use crate::types::Scalar;
use crate::visit::{use_counts, Subst};

/// Fuses loops in `f` in place.
///
/// Linear in the size of `f` up to a logarithmic factor: producers are
/// found by variable, a removed statement leaves a hole, and fusing a chain
/// of `n` elementwise operations into one body moves the smaller of the two
/// bodies each time (a producer's body, effect-free and infallible, may run
/// before the consumer's first statements), not the growing body.
pub fn fuse(f: &mut Function) {
    // Without a build, nothing fuses: the analyses are skipped.
    let mut builds = false;
    crate::visit::for_each_block(&f.body, &mut |b| {
        builds |= b.stmts.iter().any(|s| matches!(s.kind, StmtKind::Let { expr: Expr::Build { .. }, .. }));
    });
    if !builds {
        return;
    }
    let counts = use_counts(&f.body, f.vars.len());
    let fallible = super::fallible::analyse(f);
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &counts, &fallible);
}

/// The statements of a block being fused.
#[derive(Default)]
struct Out {
    /// The statements so far; a statement moved away leaves `None`.
    stmts: Vec<Option<Stmt>>,
    /// The position of the statement binding each variable a build binds
    /// (and of the loops that reductions fused into builds became).
    at: HashMap<VarId, usize>,
    /// The single-result builds whose bodies have no effect.
    pure: HashSet<VarId>,
    /// The builds whose bodies run a loop ([`runs_loop`]): map fusion
    /// leaves them arrays.
    looping: HashSet<VarId>,
}

impl Out {
    fn push(&mut self, s: Stmt) {
        // Only builds are producers.
        if let StmtKind::Let { vars, expr: Expr::Build { .. } } = &s.kind {
            for v in vars {
                self.at.insert(*v, self.stmts.len());
            }
        }
        self.stmts.push(Some(s));
    }
}

fn block(f: &mut Function, b: Block, counts: &[u32], fallible: &Fallible) -> Block {
    let mut out = Out { stmts: Vec::with_capacity(b.stmts.len()), ..Out::default() };
    for s in b.stmts {
        let loc = s.loc;
        let kind = crate::passes::inline::map_nested(s.kind, &mut |nb| block(f, nb, counts, fallible));
        match kind {
            StmtKind::Let { vars, expr: Expr::Reduce { op: ReduceOp::Sum, array } }
                if counts[array.index()] == 1 && f.ty(array).elem != Scalar::F64 =>
            {
                if let Some(pos) = producer(&out, array) {
                    let Some(prod) = out.stmts[pos].take() else { unreachable!("producer() returns a statement") };
                    if let StmtKind::Let { expr: Expr::Build { n, index, body }, .. } = prod.kind {
                        let acc = f.new_var("acc", f.ty(vars[0]));
                        let zero = Atom::I64(0);
                        let mut body = body;
                        let r = body.results[0];
                        let next = f.new_var("acc", f.ty(vars[0]));
                        body.stmts.push(Stmt {
                            kind: StmtKind::Let {
                                vars: vec![next],
                                expr: Expr::Binary(crate::BinOp::Add, Atom::Var(acc), r),
                            },
                            loc,
                        });
                        body.results = vec![Atom::Var(next)];
                        let expr = Expr::Loop { n, index, states: vec![acc], init: vec![zero], body };
                        // The loop's own failure (a negative size) is the
                        // `for`'s, and it runs where the producer ran (the
                        // statements in between cannot use the sum).
                        for v in &vars {
                            out.at.insert(*v, pos);
                        }
                        out.stmts[pos] = Some(Stmt { kind: StmtKind::Let { vars, expr }, loc: prod.loc });
                        continue;
                    }
                    unreachable!("producer() returns only single-result builds");
                }
                out.push(Stmt { kind: StmtKind::Let { vars, expr: Expr::Reduce { op: ReduceOp::Sum, array } }, loc });
            }
            StmtKind::Let { vars, expr: Expr::Build { n, index, body } } => {
                let (index, body, pure, looping) = map_fuse(f, &mut out, n, index, body, counts, fallible);
                if pure && vars.len() == 1 && body.results.len() == 1 {
                    out.pure.insert(vars[0]);
                }
                if looping {
                    out.looping.extend(vars.iter().copied());
                }
                out.push(Stmt { kind: StmtKind::Let { vars, expr: Expr::Build { n, index, body } }, loc });
            }
            kind => out.push(Stmt { kind, loc }),
        }
    }
    Block { stmts: out.stmts.into_iter().flatten().collect(), results: b.results }
}

/// The position in `out` of the single-result, effect-free build binding `y`.
fn producer(out: &Out, y: VarId) -> Option<usize> {
    let pos = *out.at.get(&y)?;
    match out.stmts.get(pos)?.as_ref()?.kind {
        StmtKind::Let { ref vars, expr: Expr::Build { .. } } if vars.as_slice() == [y] && out.pure.contains(&y) => {
            Some(pos)
        }
        _ => None,
    }
}

/// Map fusion into the body of `build index < n`: the index (the
/// producer's, when its body is the larger), the body, whether the body
/// is free of effects, and whether it runs a loop ([`runs_loop`]; the
/// producers fused into it run none).
fn map_fuse(
    f: &mut Function,
    out: &mut Out,
    n: Atom,
    index: VarId,
    body: Block,
    counts: &[u32],
    fallible: &Fallible,
) -> (VarId, Block, bool, bool) {
    let mut index = index;
    let mut stmts: Vec<Stmt> = Vec::with_capacity(body.stmts.len());
    let mut subst = Subst::default();
    let mut pure = true;
    let mut looping = false;
    for s in body.stmts {
        let s = if subst.map.is_empty() { s } else { subst.stmt(&s) };
        if let StmtKind::Let { vars, expr: Expr::Index { array, indices } } = &s.kind {
            if counts[array.index()] == 1 && indices.as_slice() == [Atom::Var(index)] && f.ty(*array).rank == 1 {
                if let Some(pos) = producer(out, *array) {
                    let same_n = matches!(&out.stmts[pos], Some(Stmt { kind: StmtKind::Let { expr: Expr::Build { n: pn, .. }, .. }, .. }) if *pn == n);
                    let safe = out.stmts[pos].as_ref().is_some_and(|p| !fallible.stmt(&p.kind));
                    if same_n && safe && !out.looping.contains(array) {
                        let prod = out.stmts[pos].take();
                        if let Some(Stmt {
                            kind: StmtKind::Let { expr: Expr::Build { index: pj, body: pbody, .. }, .. },
                            ..
                        }) = prod
                        {
                            let result = if pbody.stmts.len() > stmts.len() {
                                // The producer's statements (effect-free and
                                // infallible, reading nothing bound here) go
                                // first, under its own index: the fewer
                                // statements so far are renamed instead.
                                let mut rename = Subst::default();
                                rename.map.insert(index, Atom::Var(pj));
                                let earlier = std::mem::replace(&mut stmts, pbody.stmts);
                                stmts.extend(earlier.iter().map(|s| rename.stmt(s)));
                                for a in subst.map.values_mut() {
                                    *a = rename.atom(a);
                                }
                                subst.map.insert(index, Atom::Var(pj));
                                index = pj;
                                pbody.results[0]
                            } else {
                                let mut rename = Subst::default();
                                rename.map.insert(pj, Atom::Var(index));
                                stmts.extend(pbody.stmts.iter().map(|s| rename.stmt(s)));
                                rename.atom(&pbody.results[0])
                            };
                            subst.map.insert(vars[0], result);
                            continue;
                        }
                    }
                }
            }
        }
        pure &= !crate::passes::dce::has_effect(&s.kind);
        looping |= runs_loop(&s.kind);
        stmts.push(s);
    }
    let results = body.results.iter().map(|a| subst.atom(a)).collect();
    (index, Block { stmts, results }, pure, looping)
}

/// Whether the statement `kind` runs a loop: a comprehension, a `loop`,
/// a `while`, a `for` or a reduction of an array, itself or in its
/// branches. A build whose body runs one stays an array (map fusion would
/// save one store and one load per element of a body that runs a loop):
/// fused, it would make its reader's body a loop nest, which a `sum` of
/// the reader can only add one element at a time, its eight partial sums
/// carried around the inner loops, where a plain body is unrolled into
/// independent partials (`lower/sum.rs` in `arrayad_codegen`). Looks
/// through branches only, iteratively: each statement is looked at for
/// the nearest build around it.
fn runs_loop(kind: &StmtKind) -> bool {
    let is_loop = |k: &StmtKind| {
        matches!(
            k,
            StmtKind::For { .. }
                | StmtKind::Let {
                    expr: Expr::Build { .. } | Expr::Loop { .. } | Expr::While { .. } | Expr::Reduce { .. },
                    ..
                }
        )
    };
    if is_loop(kind) {
        return true;
    }
    // What is left with blocks is a branch.
    let mut stack: Vec<&Block> = crate::visit::child_blocks(kind).collect();
    while let Some(b) = stack.pop() {
        for s in &b.stmts {
            if is_loop(&s.kind) {
                return true;
            }
            stack.extend(crate::visit::child_blocks(&s.kind));
        }
    }
    false
}
