//! Inlining of calls. Recursion is rejected by the frontend, so inlining
//! every call terminates; the result has no `Expr::Call`.
//!
//! Inlining copies a callee once per call, so a program's size after
//! inlining can be exponential in its size (`g(x) = f(x) + f(2 * x)`,
//! `f(x) = e(x) + e(2 * x)`, ...) and its nesting unbounded (each
//! definition's nesting is limited by the parser, but a call inside a
//! nested block adds the callee's). [`check_inlining`] computes both from
//! the call graph without inlining anything and refuses a definition beyond
//! [`MAX_INLINED_STMTS`] statements or [`MAX_INLINED_DEPTH`] nested blocks,
//! naming the call that crosses the limit; the compiler's later stages are
//! linear in the size and recurse at most that deep. [`inline_all`] itself
//! is iterative over chains of calls and stops inlining at the limit.

use crate::program::{Atom, Block, Expr, FuncId, Function, Loc, Program, Stmt, StmtKind, VarId};
use crate::visit::{block_binds, child_blocks, Subst};

/// The most statements (at every depth) a definition may have with its
/// calls inlined: about 250,000 `let`s of arithmetic (a chain of 100,000,
/// 400,000 statements, builds in some 40 s and 3 GB; `bench/scaling.sh`).
pub const MAX_INLINED_STMTS: u64 = 1_000_000;

/// The deepest nesting of blocks (comprehension, loop and branch bodies) a
/// definition may have with its calls inlined.
pub const MAX_INLINED_DEPTH: usize = 1000;

/// The most statements the definitions exported together (into one shared
/// library) may have with their calls inlined.
pub const MAX_INLINED_TOTAL: u64 = 2 * MAX_INLINED_STMTS;

/// A definition beyond [`MAX_INLINED_STMTS`] or [`MAX_INLINED_DEPTH`] with
/// its calls inlined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineLimitError {
    /// The function that holds the call crossing the limit.
    pub func: FuncId,
    /// The location of that call.
    pub loc: Loc,
    /// What is too large, without the location.
    pub message: String,
}

impl InlineLimitError {
    /// `FILE:LINE:COL: MESSAGE`.
    pub fn located(&self, program: &Program) -> String {
        format!("{}: {}", program.loc_string(self.loc), self.message)
    }
}

/// A call statement of a function: its callee, the nesting depth of the
/// block holding it, its location and its arguments and results.
struct CallSite {
    callee: FuncId,
    depth: usize,
    loc: Loc,
    copies: u64,
}

/// Size and depth of one function as written, and its calls.
struct Local {
    stmts: u64,
    depth: usize,
    calls: Vec<CallSite>,
}

fn local(f: &Function) -> Local {
    let mut l = Local { stmts: 0, depth: 0, calls: Vec::new() };
    let mut stack: Vec<(&Block, usize)> = vec![(&f.body, 0)];
    while let Some((b, d)) = stack.pop() {
        l.depth = l.depth.max(d);
        l.stmts += b.stmts.len() as u64;
        for s in &b.stmts {
            if let StmtKind::Let { vars, expr: Expr::Call { func, args } } = &s.kind {
                let copies = (vars.len() + args.len()) as u64;
                l.calls.push(CallSite { callee: *func, depth: d, loc: s.loc, copies });
            }
            stack.extend(child_blocks(&s.kind).map(|nb| (nb, d + 1)));
        }
    }
    // Program order, for the first call crossing a limit.
    l.calls.sort_by_key(|c| (c.loc.line, c.loc.col));
    l
}

/// The size (statements at every depth) and nesting depth, with every call
/// inlined, of the functions reachable from some roots, saturating; computed
/// callees first (an iterative depth-first post-order of the call graph; a
/// call that closes a cycle, which the frontend rejects, counts as its call
/// alone), in time linear in the size of those functions.
pub struct InlineCosts<'p> {
    program: &'p Program,
    costs: Vec<Option<(Local, u64, usize)>>,
    /// The functions whose calls stay calls ([`KeptCalls`]).
    kept: Vec<bool>,
    keep_above: u64,
}

/// The callees that stay calls when a primal is prepared for code
/// generation ([`crate::passes::prepare_keeping`]), compiled once and
/// called from every call site instead of copied into each: a definition
/// is kept when it has at least `keep_above` statements with its own calls
/// inlined or kept (a kept call weighing [`KEPT_CALL_WEIGHT`] statements;
/// [`KEEP_CALLS_ABOVE`] by default: a call then costs
/// little against its body, and small helpers are still inlined, which
/// their callers' performance needs; or when its kept calls, each
/// weighing as much, copied to all but one of its call sites would weigh
/// `keep_above`: inlining a definition made of calls saves one call and
/// copies all of them), when it is called from at least two
/// statements of the functions the root reaches (inlining the only call
/// of a definition copies nothing, and a derivative through a kept call
/// runs the callee's primal once more: `arrayad_ir::KeptKind`) or when
/// its caller would cross [`MAX_INLINED_STMTS`] or [`MAX_INLINED_DEPTH`]
/// with it inlined, and when neither it nor anything it calls is a
/// derivative operator (whose code uses the tape). A part of a huge
/// definition ([`super::outline`]) is kept when it has `keep_above`
/// statements, called once or not. Kept calls may nest as
/// deep as the definitions do: compiled code checks the stack they use
/// (`arrayad_ir::Fault::CallsTooDeep`).
#[derive(Clone, Debug, Default)]
pub struct KeptCalls {
    kept: Vec<bool>,
    /// The statements and nesting depth of each function reached, with
    /// the kept calls kept.
    costs: Vec<(u64, usize)>,
    keep_above: u64,
    /// The roots the decisions were made from.
    roots: Vec<FuncId>,
}

/// The size from which a definition is kept as a call ([`KeptCalls`]):
/// statements at every depth with its own calls inlined or kept.
pub const KEEP_CALLS_ABOVE: u64 = 2_000;

/// The statements a kept call weighs in the decision to keep its caller
/// ([`KeptCalls`]): one call is a statement of the IR, but its code (the
/// arguments stored, the call, the status checked, the results loaded,
/// and a call of the callee's jvp or vjp in each derivative) costs about
/// this much to compile. A definition made of many kept calls is then
/// kept itself before its derivatives hold thousands of calls, which
/// LLVM's passes handle slowly (the doubling chain
/// `fk = f{k-1}(f{k-1}(x))` is kept every 5 levels instead of every 10).
pub const KEPT_CALL_WEIGHT: u64 = 64;

impl KeptCalls {
    /// Nothing kept: every call is inlined.
    pub fn none() -> KeptCalls {
        KeptCalls::default()
    }

    /// The definitions kept among `roots` and the functions they call
    /// (`keep_above` statements: see the type's docs), in time linear in
    /// their size.
    pub fn new(program: &Program, roots: &[FuncId], keep_above: u64) -> KeptCalls {
        let mut kept = InlineCosts::keeping(program, roots, keep_above).kept_calls();
        kept.roots = roots.to_vec();
        kept
    }

    /// Checks that `func` (reached from the roots) with the calls it keeps
    /// kept and the others inlined stays within [`MAX_INLINED_STMTS`]
    /// statements and [`MAX_INLINED_DEPTH`] nested blocks, in constant
    /// time (the error, in time linear in the program).
    pub fn check(&self, program: &Program, func: FuncId) -> Result<(), InlineLimitError> {
        if self.costs.is_empty() {
            // Nothing kept ([`Self::none`]): every call inlined.
            return check_inlining(program, func);
        }
        match self.costs.get(func.0 as usize) {
            Some(&(size, depth)) if size <= MAX_INLINED_STMTS && depth <= MAX_INLINED_DEPTH => Ok(()),
            // The same decisions again, with what `check` needs to name
            // the call that crosses the limit.
            _ => InlineCosts::keeping(program, &self.roots, self.keep_above).check(
                func,
                MAX_INLINED_STMTS,
                MAX_INLINED_DEPTH,
            ),
        }
    }

    /// The statements of `func` with the calls it keeps kept (1 when not
    /// reached from the roots).
    pub fn size(&self, func: FuncId) -> u64 {
        self.costs.get(func.0 as usize).map_or(1, |c| c.0)
    }

    /// The definitions kept.
    pub fn kept(&self) -> impl Iterator<Item = FuncId> + '_ {
        self.kept.iter().enumerate().filter(|(_, &k)| k).map(|(i, _)| FuncId(i as u32))
    }

    /// True when the calls of `f` stay calls.
    pub fn keeps(&self, f: FuncId) -> bool {
        self.kept.get(f.0 as usize).copied().unwrap_or(false)
    }
}

impl<'p> InlineCosts<'p> {
    /// The costs of `roots` and of the functions they call, with every call
    /// inlined.
    pub fn new(program: &'p Program, roots: &[FuncId]) -> InlineCosts<'p> {
        InlineCosts::keeping(program, roots, u64::MAX)
    }

    /// The costs of `roots` and of the functions they call, with the calls
    /// of [`KeptCalls`] (`keep_above`) kept: such a call counts as its own
    /// statement.
    pub fn keeping(program: &'p Program, roots: &[FuncId], keep_above: u64) -> InlineCosts<'p> {
        let n = program.funcs.len();
        let mut kept = vec![false; n];
        // Whether a function may be kept: no derivative operator in it or
        // below it.
        let mut keepable = vec![true; n];
        // The size of each function with kept calls weighed
        // ([`KEPT_CALL_WEIGHT`]).
        let mut weights = vec![1u64; n];
        // The kept calls each function makes with its other calls inlined.
        let mut kept_inside = vec![0u64; n];
        let mut out: Vec<Option<(Local, u64, usize)>> = (0..n).map(|_| None).collect();
        let mut state = vec![0u8; n]; // 0 unvisited, 1 on the stack, 2 done
        let ok = |id: FuncId| (id.0 as usize) < n;
        // The call statements of each function reachable from the roots.
        let mut sites = vec![0u64; n];
        if keep_above < u64::MAX {
            let mut seen = vec![false; n];
            let mut stack: Vec<FuncId> = roots.iter().copied().filter(|r| ok(*r)).collect();
            for r in &stack {
                seen[r.0 as usize] = true;
            }
            while let Some(f) = stack.pop() {
                for c in local(program.func(f)).calls {
                    let ci = c.callee.0 as usize;
                    if ci < n {
                        sites[ci] += 1;
                        if !seen[ci] {
                            seen[ci] = true;
                            stack.push(c.callee);
                        }
                    }
                }
            }
        }
        for &root in roots {
            if !ok(root) || state[root.0 as usize] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, Local, usize)> = Vec::new();
            state[root.0 as usize] = 1;
            stack.push((root.0 as usize, local(program.func(root)), 0));
            while let Some((_, l, next)) = stack.last_mut() {
                if let Some(callee) = l.calls.get(*next).map(|c| c.callee) {
                    *next += 1;
                    let ci = callee.0 as usize;
                    if ok(callee) && state[ci] == 0 {
                        state[ci] = 1;
                        stack.push((ci, local(program.func(callee)), 0));
                    }
                    continue;
                }
                let Some((fi, l, _)) = stack.pop() else { break };
                let mut may_keep = crate::DiffOp::parse_stub(&program.funcs[fi].name).is_none();
                for c in &l.calls {
                    may_keep &= keepable.get(c.callee.0 as usize).copied().unwrap_or(false);
                }
                // Size and depth with the kept callees kept.
                let measure = |kept: &[bool]| {
                    let (mut size, mut depth) = (l.stmts, l.depth);
                    for c in &l.calls {
                        let ci = c.callee.0 as usize;
                        if kept.get(ci).copied().unwrap_or(false) {
                            continue;
                        }
                        let (cs, cd) = match out.get(ci) {
                            Some(Some((_, cs, cd))) => (*cs, *cd),
                            _ => (1, 0),
                        };
                        // The call becomes a copy per argument and per
                        // result around the callee's statements.
                        size = size.saturating_add(cs.saturating_add(c.copies)).saturating_sub(1);
                        depth = depth.max(c.depth.saturating_add(cd));
                    }
                    (size, depth)
                };
                let (mut size, mut depth) = measure(&kept);
                if keep_above < u64::MAX && (size > MAX_INLINED_STMTS || depth > MAX_INLINED_DEPTH) {
                    // Beyond a limit with its callees inlined: its large
                    // callees are kept, called once or not.
                    for c in &l.calls {
                        let ci = c.callee.0 as usize;
                        let large = out.get(ci).and_then(|o| o.as_ref()).is_some_and(|(_, cs, _)| *cs >= keep_above);
                        if ci < n && keepable[ci] && large {
                            kept[ci] = true;
                        }
                    }
                    (size, depth) = measure(&kept);
                }
                state[fi] = 2;
                keepable[fi] = may_keep;
                // The size with each kept call (at any depth of inlining)
                // weighing as the code it compiles to, and the number of
                // those calls.
                let (mut weighed, mut calls_kept) = (l.stmts, 0u64);
                for c in &l.calls {
                    let ci = c.callee.0 as usize;
                    let (w, k) = match kept.get(ci) {
                        Some(true) => (KEPT_CALL_WEIGHT, 1),
                        Some(false) => (weights[ci].saturating_add(c.copies), kept_inside[ci]),
                        None => (1, 0),
                    };
                    weighed = weighed.saturating_add(w).saturating_sub(1);
                    calls_kept = calls_kept.saturating_add(k);
                }
                weights[fi] = weighed;
                kept_inside[fi] = calls_kept;
                // Inlining a definition made of kept calls saves one call
                // and copies all of them to every call site.
                let copied = calls_kept.saturating_mul(KEPT_CALL_WEIGHT).saturating_mul(sites[fi].saturating_sub(1));
                // A part of a huge definition (`outline`) is kept by its
                // size alone: it is called once.
                let part = super::outline::is_part(&program.funcs[fi].name) && weighed >= keep_above;
                kept[fi] = may_keep && ((weighed >= keep_above || copied >= keep_above) && sites[fi] >= 2 || part);
                out[fi] = Some((l, size, depth));
            }
        }
        InlineCosts { program, costs: out, kept, keep_above }
    }

    /// The definitions whose calls are kept ([`Self::keeping`]).
    pub fn kept_calls(self) -> KeptCalls {
        let costs = self.costs.iter().map(|c| c.as_ref().map_or((1, 0), |(_, s, d)| (*s, *d))).collect();
        KeptCalls { kept: self.kept, costs, keep_above: self.keep_above, roots: Vec::new() }
    }

    /// The statements of `f` with every call inlined (1 when unknown).
    pub fn size(&self, f: FuncId) -> u64 {
        self.cost(f).0
    }

    /// The deepest nesting of blocks of `f` with every call inlined.
    pub fn depth(&self, f: FuncId) -> usize {
        self.cost(f).1
    }

    fn keeps(&self, id: FuncId) -> bool {
        self.kept.get(id.0 as usize).copied().unwrap_or(false)
    }

    fn cost(&self, id: FuncId) -> (u64, usize) {
        match self.costs.get(id.0 as usize) {
            Some(Some((_, s, d))) => (*s, *d),
            _ => (1, 0),
        }
    }

    /// Checks that `func` (one of the roots) with every call inlined stays
    /// within `max_stmts` statements and `max_depth` nested blocks. The
    /// error names the innermost function beyond the limit and its call
    /// that crosses it.
    pub fn check(&self, func: FuncId, max_stmts: u64, max_depth: usize) -> Result<(), InlineLimitError> {
        let program = self.program;
        let name = |id: FuncId| program.func(id).name.as_str();
        let within = |id: FuncId| {
            let (s, d) = self.cost(id);
            s <= max_stmts && d <= max_depth
        };
        if within(func) {
            return Ok(());
        }
        // The innermost function beyond a limit: all its callees are within.
        let mut at = func;
        while let Some(Some((l, _, _))) = self.costs.get(at.0 as usize) {
            match l.calls.iter().find(|c| !within(c.callee) && c.callee != at && !self.keeps(c.callee)) {
                Some(c) => at = c.callee,
                None => break,
            }
        }
        let Some(Some((l, size, depth))) = self.costs.get(at.0 as usize) else {
            let message = "program too large after inlining".to_string();
            return Err(InlineLimitError { func, loc: Loc::default(), message });
        };
        let from = if at == func { String::new() } else { format!(" (inlined into `{}`)", name(func)) };
        if *depth > max_depth {
            let c = l
                .calls
                .iter()
                .find(|c| !self.keeps(c.callee) && c.depth.saturating_add(self.cost(c.callee).1) > max_depth);
            let (loc, callee) = c.map_or((program.func(at).loc, at), |c| (c.loc, c.callee));
            return Err(InlineLimitError {
                func: at,
                loc,
                message: format!(
                    "program nested too deeply after inlining: `{}` would nest blocks {depth} deep with every call \
                     inlined (limit {max_depth}), this call of `{}` crossing the limit{from}",
                    name(at),
                    name(callee),
                ),
            });
        }
        // The first call (in program order) with which the running size
        // crosses the limit.
        let mut running = l.stmts;
        let mut culprit = None;
        for c in l.calls.iter().filter(|c| !self.keeps(c.callee)) {
            running = running.saturating_add(self.cost(c.callee).0.saturating_add(c.copies)).saturating_sub(1);
            if running > max_stmts {
                culprit = Some(c);
                break;
            }
        }
        let (loc, callee) = culprit.map_or((program.func(at).loc, at), |c| (c.loc, c.callee));
        Err(InlineLimitError {
            func: at,
            loc,
            message: format!(
                "program too large after inlining: `{}` would have {size} statements with every call inlined \
                 (limit {max_stmts} statements), this call of `{}` crossing the limit{from}",
                name(at),
                name(callee),
            ),
        })
    }
}

/// Checks that `func` with every call inlined stays within
/// [`MAX_INLINED_STMTS`] statements and [`MAX_INLINED_DEPTH`] nested blocks,
/// in time linear in the size of the functions it reaches (nothing is
/// inlined) ([`InlineCosts::check`]).
pub fn check_inlining(program: &Program, func: FuncId) -> Result<(), InlineLimitError> {
    InlineCosts::new(program, &[func]).check(func, MAX_INLINED_STMTS, MAX_INLINED_DEPTH)
}

/// A copy of `program.funcs[func]` in which every call, at any depth, is
/// replaced by the callee's body (with fresh variables). Callers of a
/// callee's parameters see `let p = arg` bindings that copy propagation
/// removes.
///
/// Chains of calls are inlined iteratively (a stack of partly copied
/// callee bodies, not recursion); nested blocks recurse, as deep as they
/// nest. Once the copy reaches [`MAX_INLINED_STMTS`] statements, remaining
/// calls stay calls (which the later stages reject): [`check_inlining`]
/// first.
pub fn inline_all(program: &Program, func: FuncId) -> Function {
    inline_all_but(program, func, &|_| false)
}

/// [`inline_all`], except that calls of the functions for which `keep`
/// holds stay calls (their arguments renamed). Reverse mode of code that
/// runs reverse mode inside keeps the calls of `vjp`/`grad` operators, to
/// differentiate them by their own rule (`arrayad_ad`'s
/// `reverse/over_reverse.rs`).
pub fn inline_all_but(program: &Program, func: FuncId, keep: &dyn Fn(FuncId) -> bool) -> Function {
    let mut f = program.func(func).clone();
    let body = std::mem::take(&mut f.body);
    let mut inl = Inliner { program, keep, f, budget: MAX_INLINED_STMTS };
    let body = inl.block(&body, &Subst::default());
    inl.f.body = body;
    inl.f
}

struct Inliner<'p> {
    program: &'p Program,
    /// Callees whose calls stay calls.
    keep: &'p dyn Fn(FuncId) -> bool,
    /// The function being built (its variable table grows).
    f: Function,
    /// Statements that may still be copied.
    budget: u64,
}

/// A body being copied: its remaining statements, the renaming of its
/// variables, and for a callee the call's results to bind at its end.
struct Frame<'a, 's> {
    stmts: std::slice::Iter<'a, Stmt>,
    subst: std::borrow::Cow<'s, Subst>,
    finish: Option<(Vec<VarId>, &'a [Atom], Loc)>,
}

impl<'p> Inliner<'p> {
    fn fresh(&mut self, callee: &Function, v: VarId, subst: &mut Subst) {
        let info = callee.var(v).clone();
        let nv = VarId(self.f.vars.len() as u32);
        self.f.vars.push(info);
        subst.map.insert(v, Atom::Var(nv));
    }

    /// `b` renamed by `subst`, every call in it (and in what it inlines)
    /// inlined.
    fn block<'a>(&mut self, b: &'a Block, subst: &Subst) -> Block
    where
        'p: 'a,
    {
        let mut out = Vec::with_capacity(b.stmts.len());
        let root = std::borrow::Cow::Borrowed(subst);
        let mut stack: Vec<Frame<'a, '_>> = vec![Frame { stmts: b.stmts.iter(), subst: root, finish: None }];
        while let Some(top) = stack.last_mut() {
            let Some(s) = top.stmts.next() else {
                let Some(done) = stack.pop() else { break };
                if let Some((vars, results, loc)) = done.finish {
                    for (v, r) in vars.iter().zip(results) {
                        let kind = StmtKind::Let { vars: vec![*v], expr: Expr::Atom(done.subst.atom(r)) };
                        out.push(Stmt { kind, loc });
                    }
                }
                continue;
            };
            self.budget = self.budget.saturating_sub(1);
            match &s.kind {
                StmtKind::Let { vars, expr: Expr::Call { func, args } }
                    if (func.0 as usize) < self.program.funcs.len() && self.budget > 0 && !(self.keep)(*func) =>
                {
                    let program: &'a Program = self.program;
                    let callee = program.func(*func);
                    let vars: Vec<VarId> = vars.iter().map(|v| top.subst.var(*v)).collect();
                    let args: Vec<Atom> = args.iter().map(|a| top.subst.atom(a)).collect();
                    let mut inner = Subst::default();
                    for p in &callee.params {
                        self.fresh(callee, *p, &mut inner);
                    }
                    let mut binders = Vec::new();
                    block_binds(&callee.body, &mut |v| binders.push(v));
                    for v in binders {
                        self.fresh(callee, v, &mut inner);
                    }
                    for (p, a) in callee.params.iter().zip(&args) {
                        let kind = StmtKind::Let { vars: vec![inner.var(*p)], expr: Expr::Atom(*a) };
                        out.push(Stmt { kind, loc: s.loc });
                    }
                    stack.push(Frame {
                        stmts: callee.body.stmts.iter(),
                        subst: std::borrow::Cow::Owned(inner),
                        finish: Some((vars, &callee.body.results, s.loc)),
                    });
                }
                _ => {
                    let sub: &Subst = &top.subst;
                    let kind = sub.stmt_nested(&s.kind, &mut |nb| self.block(nb, sub));
                    out.push(Stmt { kind, loc: s.loc });
                }
            }
        }
        Block { stmts: out, results: b.results.iter().map(|a| subst.atom(a)).collect() }
    }
}

/// Rebuilds a statement with `g` applied to each of its nested blocks.
pub fn map_nested(kind: StmtKind, g: &mut dyn FnMut(Block) -> Block) -> StmtKind {
    match kind {
        StmtKind::Let { vars, expr } => {
            let expr = match expr {
                Expr::Build { n, index, body } => Expr::Build { n, index, body: g(body) },
                Expr::Loop { n, index, states, init, body } => Expr::Loop { n, index, states, init, body: g(body) },
                Expr::While { states, init, cond, body } => {
                    let cond = g(cond);
                    let body = g(body);
                    Expr::While { states, init, cond, body }
                }
                Expr::If { cond, then_branch, else_branch } => {
                    let t = g(then_branch);
                    let e = g(else_branch);
                    Expr::If { cond, then_branch: t, else_branch: e }
                }
                e => e,
            };
            StmtKind::Let { vars, expr }
        }
        StmtKind::For { n, index, reverse, body } => StmtKind::For { n, index, reverse, body: g(body) },
        StmtKind::If { cond, then_branch, else_branch } => {
            let t = g(then_branch);
            let e = g(else_branch);
            StmtKind::If { cond, then_branch: t, else_branch: e }
        }
        k => k,
    }
}
