//! Outlining: a definition whose top-level block is huge (a long
//! straight-line computation, typically generated code) is split into
//! parts, each a definition of its own called once, cut where few values
//! cross. The parts are then kept as calls (`inline::KeptCalls` keeps a
//! part by its size alone, called once or not), so that each is prepared,
//! differentiated and compiled on its own, on every core, instead of the
//! whole definition as one function: before, a chain of 100,000 `let`s
//! was one primal, one vjp and one Hessian-vector product of about 2
//! million statements, each optimised and compiled on one core.
//!
//! The vjp of a definition made of parts runs each part's forward pass
//! twice, once in the definition's forward pass and once in the part's
//! vjp (`arrayad_ir::KeptKind`): checkpointing at the cuts, which bounds
//! the tape by one part's residuals (Krawiec et al., POPL 2022, section
//! 7.5 on separate compilation).
//!
//! A cut between two top-level statements is allowed when at most
//! [`OutlineLimits::max_crossing`] values defined before it are used after
//! it, none of them mutable; a part holds only statements of the source
//! program's forms (no tape or accumulator statement) and is cut where it
//! weighs [`OutlineLimits::part`] statements at every depth. A definition
//! that runs a derivative operator (`grad`, `vjp`, `jvp` inside the
//! program) is not split, nor is a derivative stub, nor a definition split
//! before. The pass is linear in the size of the program.

use crate::program::{Atom, Block, Expr, FuncId, Function, Program, Stmt, StmtKind, VarId};
use crate::visit::{block_binds, child_blocks, for_each_block, for_each_block_mut, stmt_count, stmt_uses, Subst};

/// The separator of a part's name: part `k` (from 1) of definition `f` is
/// `f#k`, a name no source definition can have.
pub const PART_SEPARATOR: char = '#';

/// True when `name` is the name of a part made by [`outline`].
pub fn is_part(name: &str) -> bool {
    name.contains(PART_SEPARATOR)
}

/// When and how [`outline_with`] splits a definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutlineLimits {
    /// A definition is split when its top-level block weighs at least this
    /// many statements, at every depth.
    pub above: u64,
    /// The statements (at every depth) from which a part is cut; a last
    /// part may weigh half as much.
    pub part: u64,
    /// The most values a cut may cross (a part's parameters or results).
    pub max_crossing: usize,
}

impl Default for OutlineLimits {
    /// [`OUTLINE_ABOVE`], [`PART_STMTS`], [`MAX_CROSSING`].
    fn default() -> OutlineLimits {
        OutlineLimits { above: OUTLINE_ABOVE, part: PART_STMTS, max_crossing: MAX_CROSSING }
    }
}

/// The size from which a definition is split ([`OutlineLimits::above`]): a
/// chain of 8,000 scalar `let`s of `bench/scaling.sh`.
pub const OUTLINE_ABOVE: u64 = 32_000;

/// The size of a part ([`OutlineLimits::part`]). The chain of 100,000
/// `let`s of `bench/scaling.sh` (400,000 statements) in parts of 8,000
/// statements builds (every entry, Cranelift, 2 cores) in 10-12 s and 1.7
/// GB, where the whole took 17-22 s and 2.9 GB.
pub const PART_STMTS: u64 = 8_000;

/// The most values a cut may cross ([`OutlineLimits::max_crossing`]).
pub const MAX_CROSSING: usize = 16;

/// [`outline_with`] the default limits.
pub fn outline(program: &mut Program) {
    outline_with(program, OutlineLimits::default());
}

/// Splits every definition of `program` whose top-level block weighs at
/// least `limits.above` statements into parts (see the module docs),
/// appended to `program.funcs` as definitions named `f#1`, `f#2`, ...;
/// the definition calls them in order. Values, errors and their
/// locations are those of the program before (each statement keeps its
/// location in its part).
pub fn outline_with(program: &mut Program, limits: OutlineLimits) {
    let n = program.funcs.len();
    for fi in 0..n {
        let f = &program.funcs[fi];
        if crate::DiffOp::parse_stub(&f.name).is_some() || is_part(&f.name) {
            continue;
        }
        let weights: Vec<u64> = f.body.stmts.iter().map(weight).collect();
        if weights.iter().sum::<u64>() < limits.above || calls_stub_or_part(program, f) {
            continue;
        }
        let lifetimes = top_level_lifetimes(f);
        let ranges = cuts(f, &weights, &lifetimes, limits);
        if ranges.len() < 2 {
            continue;
        }
        let first = FuncId(program.funcs.len() as u32);
        let parts = split(&mut program.funcs[fi], &ranges, &lifetimes, first);
        program.funcs.extend(parts);
    }
}

/// The statements of `s` at every depth, itself included.
fn weight(s: &Stmt) -> u64 {
    1 + child_blocks(&s.kind).map(|b| stmt_count(b) as u64).sum::<u64>()
}

/// Whether `f` calls a derivative stub (runs `grad`, `vjp` or `jvp`) or
/// a part (it was split before).
fn calls_stub_or_part(program: &Program, f: &Function) -> bool {
    crate::visit::called_functions(&f.body).iter().any(|c| {
        program
            .funcs
            .get(c.0 as usize)
            .is_some_and(|g| crate::DiffOp::parse_stub(&g.name).is_some() || is_part(&g.name))
    })
}

/// Whether a statement may go into a part: the source program's forms
/// only, at every depth (no tape, accumulator or assignment statement).
fn outlinable(s: &Stmt) -> bool {
    let mut ok = true;
    let shallow = |k: &StmtKind| match k {
        StmtKind::Let { expr, .. } => !matches!(expr, Expr::Pop | Expr::TapeMark | Expr::ZerosLike(_)),
        StmtKind::CheckSize { .. } | StmtKind::For { .. } | StmtKind::If { .. } => true,
        StmtKind::Assign { .. }
        | StmtKind::AccAdd { .. }
        | StmtKind::AccZero { .. }
        | StmtKind::Push(_)
        | StmtKind::TapeRewind(_) => false,
    };
    ok &= shallow(&s.kind);
    for b in child_blocks(&s.kind) {
        for_each_block(b, &mut |b| ok &= b.stmts.iter().all(|s| shallow(&s.kind)));
    }
    ok
}

/// Not bound by a top-level statement (or not used).
const NONE: u32 = u32::MAX;

/// Where each variable is bound at top level and last used
/// ([`top_level_lifetimes`]).
type Lifetimes = (Vec<u32>, Vec<u32>);

/// The ranges of top-level statements of `f` to make parts of, in order,
/// from the weight of each statement and the values' lifetimes
/// ([`top_level_lifetimes`]).
fn cuts(f: &Function, weights: &[u64], lifetimes: &Lifetimes, limits: OutlineLimits) -> Vec<std::ops::Range<usize>> {
    let stmts = &f.body.stmts;
    let m = stmts.len();
    // A top-level value is live across cut `c` (before statement `c`)
    // when it is bound before it (`def <= c`: a parameter at 0, the
    // value of statement `t` at `t + 1`) and used at or after it.
    let (def, last) = lifetimes;
    let mut crossing = vec![0i64; m + 2];
    let mut mutable = vec![0i64; m + 2];
    for v in 0..f.vars.len() {
        if def[v] == NONE || last[v] == NONE || last[v] < def[v] {
            continue;
        }
        let (from, to) = (def[v] as usize, last[v] as usize + 1);
        crossing[from] += 1;
        crossing[to] -= 1;
        if f.vars[v].mutable {
            mutable[from] += 1;
            mutable[to] -= 1;
        }
    }
    let (mut live, mut live_mutable) = (0i64, 0i64);
    let ok: Vec<bool> = (0..=m)
        .map(|c| {
            live += crossing[c];
            live_mutable += mutable[c];
            live <= limits.max_crossing as i64 && live_mutable == 0
        })
        .collect();
    // Greedy: a run of outlinable statements between allowed cuts is cut
    // into parts of `limits.part` statements; its rest becomes a part too
    // when it weighs half as much.
    let mut out = Vec::new();
    let mut run: Option<Run> = None;
    for c in 0..=m {
        if ok[c] {
            match &mut run {
                Some(r) if r.weight >= limits.part => {
                    out.push(r.start..c);
                    *r = Run { start: c, weight: 0, last_cut: None };
                }
                Some(r) => r.last_cut = Some((c, r.weight)),
                None => run = Some(Run { start: c, weight: 0, last_cut: None }),
            }
        }
        if c == m || !outlinable(&stmts[c]) {
            if let Some(Run { start, last_cut: Some((end, w)), .. }) = run.take() {
                if w >= limits.part / 2 {
                    out.push(start..end);
                }
            }
            continue;
        }
        if let Some(r) = &mut run {
            r.weight += weights[c];
        }
    }
    out
}

/// A run of outlinable statements of [`cuts`] since its last part.
struct Run {
    /// Where the run (or its next part) starts.
    start: usize,
    /// The statements from `start`, at every depth.
    weight: u64,
    /// The last allowed cut after `start`, with the weight up to it.
    last_cut: Option<(usize, u64)>,
}

/// For each variable of `f`: where it is bound at top level (0 for a
/// parameter, `t + 1` for statement `t`; [`NONE`] otherwise) and the last
/// top-level statement using it (`m` for the block's results; [`NONE`]
/// when unused).
fn top_level_lifetimes(f: &Function) -> Lifetimes {
    let nvars = f.vars.len();
    let mut def = vec![NONE; nvars];
    let mut last = vec![NONE; nvars];
    for p in &f.params {
        def[p.index()] = 0;
    }
    for (t, s) in f.body.stmts.iter().enumerate() {
        stmt_uses(&s.kind, &mut |v| {
            if def[v.index()] != NONE {
                last[v.index()] = t as u32;
            }
        });
        if let StmtKind::Let { vars, .. } = &s.kind {
            for v in vars {
                def[v.index()] = t as u32 + 1;
            }
        }
    }
    let m = f.body.stmts.len() as u32;
    for a in &f.body.results {
        if let Atom::Var(v) = a {
            if def[v.index()] != NONE {
                last[v.index()] = m;
            }
        }
    }
    (def, last)
}

/// Moves the statements of each of `ranges` (in order, disjoint) out of
/// `f` into a part, replaced by a call of it; the parts get ids from
/// `first` on. A range whose part would have no parameter or no result is
/// left in place.
fn split(f: &mut Function, ranges: &[std::ops::Range<usize>], lifetimes: &Lifetimes, first: FuncId) -> Vec<Function> {
    let (def, last) = lifetimes;
    let old = std::mem::take(&mut f.body.stmts);
    let mut stmts: Vec<Stmt> = Vec::with_capacity(old.len());
    let mut parts = Vec::new();
    // Variables already taken as a parameter of the current part.
    let mut taken = vec![usize::MAX; f.vars.len()];
    let mut old = old.into_iter().enumerate().peekable();
    for (ri, r) in ranges.iter().enumerate() {
        while old.peek().is_some_and(|(t, _)| *t < r.start) {
            stmts.extend(old.next().map(|(_, s)| s));
        }
        let body: Vec<Stmt> = std::iter::from_fn(|| old.next_if(|(t, _)| *t < r.end).map(|(_, s)| s)).collect();
        let k = parts.len() as u32;
        let mut ins: Vec<VarId> = Vec::new();
        for s in &body {
            stmt_uses(&s.kind, &mut |v| {
                let d = def[v.index()];
                if d != NONE && (d as usize) <= r.start && taken[v.index()] != ri {
                    taken[v.index()] = ri;
                    ins.push(v);
                }
            });
        }
        let mut outs: Vec<VarId> = Vec::new();
        for s in &body {
            if let StmtKind::Let { vars, .. } = &s.kind {
                outs.extend(vars.iter().filter(|v| last[v.index()] != NONE && last[v.index()] as usize >= r.end));
            }
        }
        let loc = body.first().map_or(f.loc, |s| s.loc);
        if ins.is_empty() || outs.is_empty() {
            stmts.extend(body);
            continue;
        }
        let name = format!("{}{PART_SEPARATOR}{}", f.name, k + 1);
        let part = make_part(f, &name, body, &ins, &outs);
        let id = FuncId(first.0 + k);
        parts.push(part);
        let args = ins.iter().map(|v| Atom::Var(*v)).collect();
        stmts.push(Stmt { kind: StmtKind::Let { vars: outs, expr: Expr::Call { func: id, args } }, loc });
    }
    stmts.extend(old.map(|(_, s)| s));
    f.body.stmts = stmts;
    parts
}

/// A definition named `name` of the statements `body` of `f`, taking the
/// values `ins` and yielding `outs`, with variables of its own.
fn make_part(f: &Function, name: &str, body: Vec<Stmt>, ins: &[VarId], outs: &[VarId]) -> Function {
    let types = |vs: &[VarId]| vs.iter().map(|v| f.ty(*v)).collect::<Vec<_>>();
    let (mut part, params) = Function::with_params(name, &types(ins), &types(outs));
    part.loc = body.first().map_or(f.loc, |s| s.loc);
    let mut subst = Subst::default();
    for (p, v) in params.iter().zip(ins) {
        part.vars[p.index()].name.clone_from(&f.var(*v).name);
        subst.map.insert(*v, Atom::Var(*p));
    }
    for (sp, v) in part.signature.params.iter_mut().zip(ins) {
        sp.name.clone_from(&f.var(*v).name);
    }
    let mut block = Block { stmts: body, results: Vec::new() };
    block_binds(&block, &mut |v| {
        let nv = VarId(part.vars.len() as u32);
        part.vars.push(f.var(v).clone());
        subst.map.insert(v, Atom::Var(nv));
    });
    // Renamed in place, each statement once at whatever depth (the
    // statements move into the part rather than being copied).
    for_each_block_mut(&mut block, &mut |b| {
        for s in &mut b.stmts {
            subst.stmt_shallow_in_place(&mut s.kind);
        }
        for r in &mut b.results {
            *r = subst.atom(r);
        }
    });
    part.body = Block { stmts: block.stmts, results: outs.iter().map(|v| subst.atom(&Atom::Var(*v))).collect() };
    part
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{BinOp, UnOp};
    use crate::types::Type;

    /// `f(x) = a_n`, `a_0 = x`, `a_i = sin(a_{i-1}) + x * i`: two
    /// statements per step.
    fn chain(n: usize) -> Program {
        let (mut f, ps) = Function::with_params("f", &[Type::F64], &[Type::F64]);
        let x = ps[0];
        let mut a = x;
        for i in 1..=n {
            let s = f.new_var("s", Type::F64);
            let b = f.new_var(format!("a{i}"), Type::F64);
            let loc = crate::Loc::new(i as u32 + 1, 3);
            f.body
                .stmts
                .push(Stmt { kind: StmtKind::Let { vars: vec![s], expr: Expr::Unary(UnOp::Sin, Atom::Var(a)) }, loc });
            let e = Expr::Binary(BinOp::Add, Atom::Var(s), Atom::Var(x));
            f.body.stmts.push(Stmt { kind: StmtKind::Let { vars: vec![b], expr: e }, loc });
            a = b;
        }
        f.body.results = vec![Atom::Var(a)];
        Program { file: "chain.arr".into(), funcs: vec![f] }
    }

    #[test]
    fn a_long_chain_is_cut_into_parts_that_it_calls_in_order() {
        let mut p = chain(100);
        outline_with(&mut p, OutlineLimits { above: 100, part: 40, max_crossing: 4 });
        let names: Vec<&str> = p.funcs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["f", "f#1", "f#2", "f#3", "f#4", "f#5"]);
        crate::verify::verify_program(&p).unwrap();
        let calls: Vec<FuncId> = crate::visit::called_functions(&p.funcs[0].body);
        assert_eq!(calls, (1..=5).map(FuncId).collect::<Vec<_>>());
        // Each part takes the chain's value so far and `x` (the first
        // only `x`), and yields the chain's value.
        for (k, part) in p.funcs[1..].iter().enumerate() {
            assert_eq!(part.params.len(), if k == 0 { 1 } else { 2 }, "{}", part.name);
            assert_eq!(part.body.results.len(), 1, "{}", part.name);
            assert!(part.body.stmts.len() >= 40, "{}", part.name);
        }
        let args = [crate::Value::F64(0.3)];
        let got = crate::interp::run(&p, FuncId(0), &args).unwrap();
        let want = crate::interp::run(&chain(100), FuncId(0), &args).unwrap();
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert!(!p.definitions().any(|id| is_part(&p.func(id).name)));
        // A program split before is left as it is.
        let once = p.clone();
        outline_with(&mut p, OutlineLimits { above: 3, part: 2, max_crossing: 4 });
        assert_eq!(p, once);
    }

    #[test]
    fn small_definitions_and_cuts_crossing_many_values_stay_whole() {
        let mut p = chain(100);
        outline_with(&mut p, OutlineLimits { above: 1_000, part: 40, max_crossing: 4 });
        assert_eq!(p.funcs.len(), 1);
        // Every cut crosses two values: none is allowed with one.
        let mut p = chain(100);
        outline_with(&mut p, OutlineLimits { above: 100, part: 40, max_crossing: 1 });
        assert_eq!(p, chain(100));
    }
}
