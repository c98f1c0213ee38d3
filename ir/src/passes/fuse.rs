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
//! Map fusion keeps every value too: a producer that reads what an
//! effect may change (`Place`: the elements of an accumulator, of the
//! arrays on the tape, a mutable variable) moves only when no statement
//! between it and its reader, and none of the reader's body, changes that
//! place (by an addition into or a zeroing of an accumulator that may
//! share elements with what it reads, `licm::accumulator_classes`,
//! or with an array on the tape, or by an assignment): it reads what it
//! would have read where it was.

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
/// before the consumer's first statements), not the growing body. What a
/// block reads and changes (`Summary`) is gathered from its nested
/// blocks' as they are fused, the smaller set merged into the larger; the
/// check of a move looks at each place the producer reads (a chain of `k`
/// maps reading `k` accumulators costs `k^2` in those places).
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
    let facts = Facts::of(f);
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &counts, &facts).0;
}

/// What fusion needs of the whole function.
struct Facts {
    /// Which statements may fail: map fusion moves only those that cannot.
    fallible: Fallible,
    /// The variables that may share their elements with an accumulator,
    /// each with its class ([`super::licm::accumulator_classes`]).
    classes: HashMap<VarId, u32>,
    /// The classes of the arrays pushed on the tape or popped from it that
    /// are accumulators (the tape holds arrays by reference: a popped
    /// array may be one pushed, of another class).
    tape_classes: HashSet<u32>,
    /// The other arrays pushed on the tape.
    pushed: HashSet<VarId>,
}

/// What an effect may change, and a statement may read.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Place {
    /// The elements of the accumulators of a class (and of their views).
    Accumulator(u32),
    /// The elements of the arrays on the tape.
    Tape,
    /// A mutable variable.
    Mutable(VarId),
}

/// What a statement or a block reads and changes (at any depth), and
/// whether it has an effect ([`crate::passes::dce::has_effect`]).
#[derive(Default)]
struct Summary {
    reads: HashSet<Place>,
    writes: HashSet<Place>,
    effect: bool,
}

impl Summary {
    /// Adds `other` (the smaller set into the larger).
    fn merge(&mut self, other: Summary) {
        for (into, mut from) in [(&mut self.reads, other.reads), (&mut self.writes, other.writes)] {
            if from.len() > into.len() {
                std::mem::swap(into, &mut from);
            }
            into.extend(from);
        }
        self.effect |= other.effect;
    }
}

impl Facts {
    fn of(f: &Function) -> Facts {
        let classes = super::licm::accumulator_classes(f);
        let (mut tape_classes, mut pushed) = (HashSet::default(), HashSet::default());
        let mut on_tape = |v: VarId| match classes.get(&v) {
            Some(&c) => {
                tape_classes.insert(c);
            }
            None => {
                pushed.insert(v);
            }
        };
        crate::visit::for_each_block(&f.body, &mut |b| {
            for s in &b.stmts {
                match &s.kind {
                    StmtKind::Push(Atom::Var(v)) if f.ty(*v).is_array() => on_tape(*v),
                    StmtKind::Let { vars, expr: Expr::Pop } => {
                        vars.iter().filter(|v| f.ty(**v).is_array()).for_each(|v| on_tape(*v))
                    }
                    _ => {}
                }
            }
        });
        Facts { fallible: super::fallible::analyse(f), classes, tape_classes, pushed }
    }

    /// The places reading `v` reads.
    fn read(&self, f: &Function, v: VarId, places: &mut HashSet<Place>) {
        if let Some(&c) = self.classes.get(&v) {
            places.insert(Place::Accumulator(c));
            if self.tape_classes.contains(&c) {
                places.insert(Place::Tape);
            }
        }
        if self.pushed.contains(&v) {
            places.insert(Place::Tape);
        }
        if f.var(v).mutable {
            places.insert(Place::Mutable(v));
        }
    }

    /// Adds to `summary` what `kind` itself (not its nested blocks) reads
    /// and changes, and whether it has an effect.
    fn shallow(&self, f: &Function, kind: &StmtKind, summary: &mut Summary) {
        crate::visit::stmt_uses_shallow(kind, &mut |v| self.read(f, v, &mut summary.reads));
        match kind {
            StmtKind::AccAdd { acc, .. } | StmtKind::AccZero { acc, .. } => {
                // Every accumulator has a class ([`super::licm::accumulated`]).
                if let Some(&c) = self.classes.get(acc) {
                    summary.writes.insert(Place::Accumulator(c));
                    if self.tape_classes.contains(&c) {
                        summary.writes.insert(Place::Tape);
                    }
                }
            }
            StmtKind::Assign { var, .. } => {
                summary.writes.insert(Place::Mutable(*var));
            }
            _ => {}
        }
        summary.effect |= match kind {
            StmtKind::Let { expr, .. } => matches!(expr, Expr::Pop | Expr::TapeMark),
            _ => true,
        };
    }
}

/// The statements of a block being fused.
#[derive(Default)]
struct Out {
    /// The statements so far; a statement moved away leaves `None`.
    stmts: Vec<Option<Stmt>>,
    /// The position of the statement binding each variable a build binds
    /// (and of the loops that reductions fused into builds became).
    at: HashMap<VarId, usize>,
    /// The single-result builds whose bodies have no effect, with the
    /// places their bodies read.
    pure: HashMap<VarId, HashSet<Place>>,
    /// The builds whose bodies run a loop ([`runs_loop`]): map fusion
    /// leaves them arrays.
    looping: HashSet<VarId>,
    /// The position of the last statement that changes each place.
    last_write: HashMap<Place, usize>,
}

impl Out {
    /// Pushes `s`, which changes `writes`.
    fn push(&mut self, s: Stmt, writes: &HashSet<Place>) {
        let pos = self.stmts.len();
        for p in writes {
            self.last_write.insert(*p, pos);
        }
        // Only builds are producers.
        if let StmtKind::Let { vars, expr: Expr::Build { .. } } = &s.kind {
            for v in vars {
                self.at.insert(*v, pos);
            }
        }
        self.stmts.push(Some(s));
    }

    /// Whether a statement after the one at `pos` changes `place`.
    fn written_after(&self, pos: usize, place: &Place) -> bool {
        self.last_write.get(place).is_some_and(|&w| w > pos)
    }
}

/// Fuses the loops of `b` (its nested blocks first), and says what it
/// reads and changes.
fn block(f: &mut Function, b: Block, counts: &[u32], facts: &Facts) -> (Block, Summary) {
    let mut out = Out { stmts: Vec::with_capacity(b.stmts.len()), ..Out::default() };
    let mut summary = Summary::default();
    for s in b.stmts {
        let loc = s.loc;
        let mut stmt = Summary::default();
        let kind = crate::passes::inline::map_nested(s.kind, &mut |nb| {
            let (nb, nested) = block(f, nb, counts, facts);
            stmt.merge(nested);
            nb
        });
        facts.shallow(f, &kind, &mut stmt);
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
                        summary.merge(stmt);
                        continue;
                    }
                    unreachable!("producer() returns only single-result builds");
                }
                let s = Stmt { kind: StmtKind::Let { vars, expr: Expr::Reduce { op: ReduceOp::Sum, array } }, loc };
                out.push(s, &stmt.writes);
            }
            StmtKind::Let { vars, expr: Expr::Build { n, index, body } } => {
                let (index, body, looping) = map_fuse(f, &mut out, n, index, body, counts, facts, &mut stmt);
                if !stmt.effect && vars.len() == 1 && body.results.len() == 1 {
                    out.pure.insert(vars[0], stmt.reads.clone());
                }
                if looping {
                    out.looping.extend(vars.iter().copied());
                }
                out.push(
                    Stmt { kind: StmtKind::Let { vars, expr: Expr::Build { n, index, body } }, loc },
                    &stmt.writes,
                );
            }
            kind => out.push(Stmt { kind, loc }, &stmt.writes),
        }
        summary.merge(stmt);
    }
    for r in &b.results {
        if let Atom::Var(v) = r {
            facts.read(f, *v, &mut summary.reads);
        }
    }
    (Block { stmts: out.stmts.into_iter().flatten().collect(), results: b.results }, summary)
}

/// The position in `out` of the single-result, effect-free build binding `y`.
fn producer(out: &Out, y: VarId) -> Option<usize> {
    let pos = *out.at.get(&y)?;
    match out.stmts.get(pos)?.as_ref()?.kind {
        StmtKind::Let { ref vars, expr: Expr::Build { .. } } if vars.as_slice() == [y] && out.pure.contains_key(&y) => {
            Some(pos)
        }
        _ => None,
    }
}

/// Map fusion into the body of `build index < n`, whose statement reads
/// and changes what `stmt` says (the reads of the producers moved in are
/// added): the index (the producer's, when its body is the larger), the
/// body, and whether the body runs a loop ([`runs_loop`]; the producers
/// fused into it run none).
#[allow(clippy::too_many_arguments)]
fn map_fuse(
    f: &mut Function,
    out: &mut Out,
    n: Atom,
    index: VarId,
    body: Block,
    counts: &[u32],
    facts: &Facts,
    stmt: &mut Summary,
) -> (VarId, Block, bool) {
    let mut index = index;
    let mut stmts: Vec<Stmt> = Vec::with_capacity(body.stmts.len());
    let mut subst = Subst::default();
    let mut looping = false;
    for s in body.stmts {
        let s = if subst.map.is_empty() { s } else { subst.stmt(&s) };
        if let StmtKind::Let { vars, expr: Expr::Index { array, indices } } = &s.kind {
            if counts[array.index()] == 1 && indices.as_slice() == [Atom::Var(index)] && f.ty(*array).rank == 1 {
                if let Some(pos) = producer(out, *array) {
                    let same_n = matches!(&out.stmts[pos], Some(Stmt { kind: StmtKind::Let { expr: Expr::Build { n: pn, .. }, .. }, .. }) if *pn == n);
                    let safe = out.stmts[pos].as_ref().is_some_and(|p| !facts.fallible.stmt(&p.kind));
                    // The producer's elements are computed as the body's
                    // iterations run, after the statements in between: it
                    // must read nothing they change.
                    let same_reads =
                        out.pure[array].iter().all(|p| !stmt.writes.contains(p) && !out.written_after(pos, p));
                    if same_n && safe && same_reads && !out.looping.contains(array) {
                        let reads = out.pure.remove(array).unwrap_or_default();
                        stmt.merge(Summary { reads, ..Summary::default() });
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
        looping |= runs_loop(&s.kind);
        stmts.push(s);
    }
    let results = body.results.iter().map(|a| subst.atom(a)).collect();
    (index, Block { stmts, results }, looping)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::program::{BinOp, FuncId, Program};
    use crate::types::Type;
    use crate::value::{ArrayValue, Value};

    /// Where an addition into the accumulator `acc` goes in
    /// `y = build j < n => 2 * acc[j]; z = build i < n => y[i] + 1`.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum AddInto {
        Nowhere,
        /// `acc[2] += 1` between the two builds.
        Between,
        /// `acc[2] += 1` in the body of `z`, after its read of `y[i]`.
        InReader,
        /// `other[2] += 1` between the builds and in the body of `z`, into
        /// another accumulator (and `acc[2] += 1` after `z`).
        Other,
    }

    /// The function `x -> z` (`x` of 3 elements), where `acc = zeros_like
    /// x` is added into as `add` says, and the build `y`.
    fn program(add: AddInto) -> (Function, VarId) {
        let vec = Type::array(Scalar::F64, 1);
        let (mut f, ps) = Function::with_params("f", &[vec], &[vec]);
        let x = ps[0];
        let mut b = Builder::new(&mut f);
        let n = b.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let acc = b.let1("acc", Expr::ZerosLike(x), vec);
        let other = b.let1("other", Expr::ZerosLike(x), vec);
        let into = if add == AddInto::Other { other } else { acc };
        let add_one = |b: &mut Builder| {
            b.stmt(StmtKind::AccAdd { acc: into, indices: vec![Atom::I64(2)], value: Atom::F64(1.0) });
        };
        let j = b.var("j", Type::I64);
        b.begin_block();
        let e = b.let1("e", Expr::Index { array: acc, indices: vec![Atom::Var(j)] }, Type::F64);
        let r = b.binary(BinOp::Mul, Atom::F64(2.0), Atom::Var(e));
        let body = b.end_block(vec![r]);
        let y = b.let1("y", Expr::Build { n: Atom::Var(n), index: j, body }, vec);
        if matches!(add, AddInto::Between | AddInto::Other) {
            add_one(&mut b);
        }
        let i = b.var("i", Type::I64);
        b.begin_block();
        let t = b.let1("t", Expr::Index { array: y, indices: vec![Atom::Var(i)] }, Type::F64);
        if matches!(add, AddInto::InReader | AddInto::Other) {
            add_one(&mut b);
        }
        let u = b.binary(BinOp::Add, Atom::Var(t), Atom::F64(1.0));
        let body = b.end_block(vec![u]);
        let z = b.let1("z", Expr::Build { n: Atom::Var(n), index: i, body }, vec);
        if add == AddInto::Other {
            b.stmt(StmtKind::AccAdd { acc, indices: vec![Atom::I64(2)], value: Atom::F64(1.0) });
        }
        f.body = b.finish(vec![Atom::Var(z)]);
        (f, y)
    }

    fn run(f: &Function) -> Vec<f64> {
        let p = Program { file: "fuse.arr".into(), funcs: vec![f.clone()] };
        let x = Value::Array(ArrayValue::f64(vec![3], vec![0.5, 1.5, 2.5]).unwrap());
        let out = crate::interp::run(&p, FuncId(0), &[x]).unwrap();
        out[0].f64_elements().unwrap().to_vec()
    }

    fn binds(f: &Function, y: VarId) -> bool {
        let mut found = false;
        crate::visit::block_binds(&f.body, &mut |v| found |= v == y);
        found
    }

    /// A producer that reads an accumulator fuses into its reader when no
    /// addition can change what it reads (none, or only into another
    /// accumulator), and stays where it is (an array) when one comes
    /// between them or in the reader's body; the values are those of the
    /// unfused program.
    #[test]
    fn a_producer_reading_an_accumulator_moves_past_no_addition() {
        for (add, fuses) in
            [(AddInto::Nowhere, true), (AddInto::Between, false), (AddInto::InReader, false), (AddInto::Other, true)]
        {
            let (mut f, y) = program(add);
            // `y` reads the accumulator before any addition.
            let want = run(&f);
            assert_eq!(want, [1.0; 3], "{add:?}");
            fuse(&mut f);
            crate::verify::verify_function(&f, None).unwrap();
            assert_eq!(run(&f), want, "{add:?}");
            assert_eq!(!binds(&f, y), fuses, "{add:?}");
        }
    }

    /// `m = 1; y = build j < n => m; m := 5; z = build i < n => y[i] + 1`:
    /// `y` yields the mutable `m` (a result, not a statement, reads it)
    /// and stays an array; without the assignment it fuses.
    #[test]
    fn a_producer_reading_a_mutable_variable_moves_past_no_assignment() {
        for assigned in [true, false] {
            let vec = Type::array(Scalar::F64, 1);
            let (mut f, ps) = Function::with_params("f", &[vec], &[vec]);
            let m = f.new_mut_var("m", Type::F64);
            let mut b = Builder::new(&mut f);
            let n = b.let1("n", Expr::Dim { array: ps[0], axis: 0 }, Type::I64);
            b.stmt(StmtKind::Let { vars: vec![m], expr: Expr::Atom(Atom::F64(1.0)) });
            let j = b.var("j", Type::I64);
            b.begin_block();
            let body = b.end_block(vec![Atom::Var(m)]);
            let y = b.let1("y", Expr::Build { n: Atom::Var(n), index: j, body }, vec);
            if assigned {
                b.stmt(StmtKind::Assign { var: m, value: Atom::F64(5.0) });
            }
            let i = b.var("i", Type::I64);
            b.begin_block();
            let t = b.let1("t", Expr::Index { array: y, indices: vec![Atom::Var(i)] }, Type::F64);
            let u = b.binary(BinOp::Add, Atom::Var(t), Atom::F64(1.0));
            let body = b.end_block(vec![u]);
            let z = b.let1("z", Expr::Build { n: Atom::Var(n), index: i, body }, vec);
            f.body = b.finish(vec![Atom::Var(z)]);
            fuse(&mut f);
            crate::verify::verify_function(&f, None).unwrap();
            assert_eq!(run(&f), [2.0; 3], "assigned: {assigned}");
            assert_eq!(binds(&f, y), assigned, "assigned: {assigned}");
        }
    }
}
