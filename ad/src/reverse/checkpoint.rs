//! Checkpointed loops (opt-in, `--checkpoint`): the gradient of a loop of
//! `n` iterations in O(sqrt(n)) states and residuals of memory instead of
//! O(n) residuals, for one more run of the loop body (Griewank and Walther's
//! periodic checkpointing, "Evaluating Derivatives", ch. 12).
//!
//! The iterations are cut into `n_seg = ceil(n / b)` segments of
//! `b = ceil(sqrt(n))`. The forward pass runs the primal loop without taping
//! and saves the loop state at the start of every segment: scalar states on
//! the tape, array states (`f64`) into a `[n_seg][..]` accumulator allocated
//! before the loop, so that nothing the iterations allocate outlives them.
//! The backward pass takes the segments in reverse order: it restores the
//! segment's start state, runs the segment's iterations again with their
//! taping (the forward statements of the unzipped body), then their
//! backward statements.
//!
//! A checkpointed loop keeps the shape of its array states (they are saved
//! into rows of one array): a state whose shape changes fails with the
//! size mismatch of that accumulation. Loops with `i64` or `bool` array
//! states are not checkpointed.

use arrayad_ir::visit::{freshen_block, Subst};
use arrayad_ir::{Atom, BinOp, Block, Expr, Function, Loc, Scalar, Stmt, StmtKind, Type, UnOp, VarId};

/// The parts of an unzipped loop that checkpointing reassembles.
pub(super) struct LoopParts {
    /// The trip count.
    pub n: Atom,
    /// The loop's index in the primal body, and its twin in the backward
    /// body.
    pub index: VarId,
    pub index_twin: VarId,
    /// The primal results of the loop, its primal states and their initial
    /// values.
    pub vars: Vec<VarId>,
    pub states: Vec<VarId>,
    pub init: Vec<Atom>,
    /// The forward statements of the body (the primal with the pushes of
    /// the residuals) and the primal results.
    pub fwd: Vec<Stmt>,
    pub results: Vec<Atom>,
    /// The backward statements of one iteration.
    pub bwd: Vec<Stmt>,
    pub loc: Loc,
}

/// True when a loop with these primal states can be checkpointed.
pub(super) fn applies(f: &Function, states: &[VarId]) -> bool {
    !states.is_empty() && states.iter().all(|s| f.ty(*s).is_scalar() || f.ty(*s).elem == Scalar::F64)
}

/// Why a loop with this head and these primal states is not checkpointed
/// (`None` when it is: [`applies`] to a counted loop).
pub(super) fn not_applicable(f: &Function, head: &super::LoopHead<'_>, states: &[VarId]) -> Option<String> {
    if let super::LoopHead::While(_) = head {
        return Some(
            "a while loop is not checkpointed (its number of iterations is known only when it ends): \
             the residuals of every iteration are taped"
                .into(),
        );
    }
    if states.is_empty() {
        return Some(
            "this loop carries no primal state to save, so it is not checkpointed: the residuals of every \
             iteration are taped"
                .into(),
        );
    }
    let other = states.iter().find(|s| !(f.ty(**s).is_scalar() || f.ty(**s).elem == Scalar::F64))?;
    Some(format!(
        "this loop is not checkpointed: its state `{}` is an array of {} (only scalars and f64 arrays are \
         saved); the residuals of every iteration are taped",
        f.vars[other.index()].name,
        f.ty(*other).elem
    ))
}

fn stmt(kind: StmtKind, loc: Loc) -> Stmt {
    Stmt { kind, loc }
}

fn let1(f: &mut Function, out: &mut Vec<Stmt>, name: &str, ty: Type, e: Expr, loc: Loc) -> Atom {
    let v = f.new_var(name, ty);
    out.push(stmt(StmtKind::Let { vars: vec![v], expr: e }, loc));
    Atom::Var(v)
}

/// `b = max(ceil(sqrt(n)), 1)` and `n_seg = (n + b - 1) / b` (negative for a
/// negative `n`, which the segment loop then reports as the loop would).
fn segments(f: &mut Function, out: &mut Vec<Stmt>, n: Atom, loc: Loc) -> (Atom, Atom) {
    let nf = let1(f, out, "n_f64", Type::F64, Expr::Unary(UnOp::ToF64, n), loc);
    let sq = let1(f, out, "sqrt_n", Type::F64, Expr::Unary(UnOp::Sqrt, nf), loc);
    let c = let1(f, out, "ceil_sqrt_n", Type::F64, Expr::Unary(UnOp::Ceil, sq), loc);
    let b0 = let1(f, out, "seg_len", Type::I64, Expr::Unary(UnOp::ToI64, c), loc);
    let b = let1(f, out, "seg_len", Type::I64, Expr::Binary(BinOp::Max, b0, Atom::I64(1)), loc);
    let bm1 = let1(f, out, "seg_len_1", Type::I64, Expr::Binary(BinOp::Sub, b, Atom::I64(1)), loc);
    let s = let1(f, out, "n_seg", Type::I64, Expr::Binary(BinOp::Add, n, bm1), loc);
    let nseg = let1(f, out, "n_seg", Type::I64, Expr::Binary(BinOp::Div, s, b), loc);
    (b, nseg)
}

/// `lo = seg * b` and `len = min(b, n - lo)`.
fn segment_bounds(f: &mut Function, out: &mut Vec<Stmt>, seg: VarId, b: Atom, n: Atom, loc: Loc) -> (Atom, Atom) {
    let lo = let1(f, out, "seg_lo", Type::I64, Expr::Binary(BinOp::Mul, Atom::Var(seg), b), loc);
    let rest = let1(f, out, "seg_rest", Type::I64, Expr::Binary(BinOp::Sub, n, lo), loc);
    let len = let1(f, out, "seg_iters", Type::I64, Expr::Binary(BinOp::Min, b, rest), loc);
    (lo, len)
}

/// `stmts` without the pushes on the tape, at any depth.
fn without_pushes(stmts: &[Stmt]) -> Vec<Stmt> {
    let strip = |b: &Block| Block { stmts: without_pushes(&b.stmts), results: b.results.clone() };
    stmts
        .iter()
        .filter(|s| !matches!(s.kind, StmtKind::Push(_)))
        .map(|s| {
            let kind = match &s.kind {
                StmtKind::Let { vars, expr } => {
                    let expr = match expr {
                        Expr::Build { n, index, body } => Expr::Build { n: *n, index: *index, body: strip(body) },
                        Expr::Loop { n, index, states, init, body } => Expr::Loop {
                            n: *n,
                            index: *index,
                            states: states.clone(),
                            init: init.clone(),
                            body: strip(body),
                        },
                        Expr::If { cond, then_branch, else_branch } => {
                            Expr::If { cond: *cond, then_branch: strip(then_branch), else_branch: strip(else_branch) }
                        }
                        Expr::While { states, init, cond, body } => Expr::While {
                            states: states.clone(),
                            init: init.clone(),
                            cond: cond.clone(),
                            body: strip(body),
                        },
                        e => e.clone(),
                    };
                    StmtKind::Let { vars: vars.clone(), expr }
                }
                StmtKind::For { n, index, reverse, body } => {
                    StmtKind::For { n: *n, index: *index, reverse: *reverse, body: strip(body) }
                }
                StmtKind::If { cond, then_branch, else_branch } => {
                    StmtKind::If { cond: *cond, then_branch: strip(then_branch), else_branch: strip(else_branch) }
                }
                k => k.clone(),
            };
            Stmt { kind, loc: s.loc }
        })
        .collect()
}

/// The forward statements (appended to `fwd`) and backward statements
/// (appended to `bwd`) of a checkpointed loop (module docs).
pub(super) fn checkpointed(f: &mut Function, p: LoopParts, fwd: &mut Vec<Stmt>, bwd: &mut Vec<Stmt>) {
    let loc = p.loc;
    let (b, nseg) = segments(f, fwd, p.n, loc);
    // (A negative count is the segment loop's error, not an allocation's.)
    let nseg_rows = let1(f, fwd, "n_seg", Type::I64, Expr::Binary(BinOp::Max, nseg, Atom::I64(0)), loc);
    // The saved array states: [n_seg] rows shaped like the initial values.
    let mut saved: Vec<Option<VarId>> = Vec::new();
    for (s, a) in p.states.iter().zip(&p.init) {
        let ty = f.ty(*s);
        if ty.is_scalar() {
            saved.push(None);
            continue;
        }
        let Atom::Var(init_var) = a else {
            saved.push(None);
            continue;
        };
        let mut dims = vec![nseg_rows];
        for axis in 0..ty.rank {
            dims.push(let1(f, fwd, "dim", Type::I64, Expr::Dim { array: *init_var, axis }, loc));
        }
        let v = f.new_var(format!("saved_{}", f.var(*s).name), ty.lift());
        fwd.push(stmt(StmtKind::Let { vars: vec![v], expr: Expr::Zeros(dims) }, loc));
        saved.push(Some(v));
    }

    // Forward: the segments, saving each one's start state, then its
    // iterations without taping.
    let seg = f.new_var("seg", Type::I64);
    let outer: Vec<VarId> = p.states.iter().map(|s| f.new_var(f.var(*s).name.clone(), f.ty(*s))).collect();
    let mut body: Vec<Stmt> = Vec::new();
    for (o, sv) in outer.iter().zip(&saved) {
        match sv {
            Some(arr) => body
                .push(stmt(StmtKind::AccAdd { acc: *arr, indices: vec![Atom::Var(seg)], value: Atom::Var(*o) }, loc)),
            None => body.push(stmt(StmtKind::Push(Atom::Var(*o)), loc)),
        }
    }
    let (lo, len) = segment_bounds(f, &mut body, seg, b, p.n, loc);
    let j = f.new_var("j", Type::I64);
    let mut inner_stmts =
        vec![stmt(StmtKind::Let { vars: vec![p.index], expr: Expr::Binary(BinOp::Add, lo, Atom::Var(j)) }, loc)];
    inner_stmts.extend(without_pushes(&p.fwd));
    let inner = Block { stmts: inner_stmts, results: p.results.clone() };
    // A fresh copy: the backward pass runs the original statements again.
    let mut rename = Subst::default();
    let inner = freshen_block(f, &inner, &p.states, &mut rename);
    let inner_states: Vec<VarId> = p.states.iter().map(|s| rename.var(*s)).collect();
    let ends: Vec<VarId> = p.states.iter().map(|s| f.new_var(f.var(*s).name.clone(), f.ty(*s))).collect();
    body.push(stmt(
        StmtKind::Let {
            vars: ends.clone(),
            expr: Expr::Loop {
                n: len,
                index: j,
                states: inner_states,
                init: outer.iter().map(|o| Atom::Var(*o)).collect(),
                body: inner,
            },
        },
        loc,
    ));
    fwd.push(stmt(
        StmtKind::Let {
            vars: p.vars.clone(),
            expr: Expr::Loop {
                n: nseg,
                index: seg,
                states: outer,
                init: p.init.clone(),
                body: Block { stmts: body, results: ends.iter().map(|e| Atom::Var(*e)).collect() },
            },
        },
        loc,
    ));

    // Backward: per segment, last first: restore, tape again, run back.
    let segb = f.new_var("seg", Type::I64);
    let mut body: Vec<Stmt> = Vec::new();
    let (lo, len) = segment_bounds(f, &mut body, segb, b, p.n, loc);
    let mut start: Vec<Atom> = vec![Atom::I64(0); p.states.len()];
    for (k, sv) in saved.iter().enumerate().rev() {
        if sv.is_none() {
            let v = f.new_var(f.var(p.states[k]).name.clone(), f.ty(p.states[k]));
            body.push(stmt(StmtKind::Let { vars: vec![v], expr: Expr::Pop }, loc));
            start[k] = Atom::Var(v);
        }
    }
    for (k, sv) in saved.iter().enumerate() {
        if let Some(arr) = sv {
            let row = let1(
                f,
                &mut body,
                "restored",
                f.ty(p.states[k]),
                Expr::Index { array: *arr, indices: vec![Atom::Var(segb)] },
                loc,
            );
            start[k] = row;
        }
    }
    let j2 = f.new_var("j", Type::I64);
    let mut again =
        vec![stmt(StmtKind::Let { vars: vec![p.index], expr: Expr::Binary(BinOp::Add, lo, Atom::Var(j2)) }, loc)];
    again.extend(p.fwd);
    // Fresh too: this forward code sits in the backward pass, which reverse
    // mode renames as a whole to the twins of the primal variables.
    let mut rename = Subst::default();
    let again = freshen_block(f, &Block { stmts: again, results: p.results }, &p.states, &mut rename);
    let again_states: Vec<VarId> = p.states.iter().map(|s| rename.var(*s)).collect();
    let unused: Vec<VarId> = p.states.iter().map(|s| f.new_var(f.var(*s).name.clone(), f.ty(*s))).collect();
    body.push(stmt(
        StmtKind::Let {
            vars: unused,
            expr: Expr::Loop { n: len, index: j2, states: again_states, init: start, body: again },
        },
        loc,
    ));
    let jb = f.new_var("j", Type::I64);
    let mut back =
        vec![stmt(StmtKind::Let { vars: vec![p.index_twin], expr: Expr::Binary(BinOp::Add, lo, Atom::Var(jb)) }, loc)];
    back.extend(p.bwd);
    body.push(stmt(
        StmtKind::For { n: len, index: jb, reverse: true, body: Block { stmts: back, results: vec![] } },
        loc,
    ));
    bwd.push(stmt(
        StmtKind::For { n: nseg, index: segb, reverse: true, body: Block { stmts: body, results: vec![] } },
        loc,
    ));
}
