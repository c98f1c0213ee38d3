//! Inlining of calls. Recursion is rejected by the frontend, so inlining
//! every call terminates; the result has no `Expr::Call`.

use crate::program::{Atom, Block, Expr, FuncId, Function, Program, Stmt, StmtKind, VarId};
use crate::visit::{block_binds, Subst};
use std::collections::HashMap;

/// A copy of `program.funcs[func]` in which every call, at any depth, is
/// replaced by the callee's body (with fresh variables). Callers of a
/// callee's parameters see `let p = arg` bindings that copy propagation
/// removes.
pub fn inline_all(program: &Program, func: FuncId) -> Function {
    let mut memo: HashMap<FuncId, Function> = HashMap::new();
    inline_memo(program, func, &mut memo, 0)
}

fn inline_memo(program: &Program, func: FuncId, memo: &mut HashMap<FuncId, Function>, depth: usize) -> Function {
    if let Some(f) = memo.get(&func) {
        return f.clone();
    }
    let mut f = program.func(func).clone();
    // Guard against call cycles in malformed input: stop inlining (the
    // verifier and backends then report the remaining call).
    if depth > program.funcs.len() {
        return f;
    }
    let body = std::mem::take(&mut f.body);
    f.body = inline_block(program, &mut f, body, memo, depth);
    memo.insert(func, f.clone());
    f
}

fn inline_block(
    program: &Program,
    f: &mut Function,
    block: Block,
    memo: &mut HashMap<FuncId, Function>,
    depth: usize,
) -> Block {
    let mut stmts = Vec::with_capacity(block.stmts.len());
    for s in block.stmts {
        let loc = s.loc;
        match s.kind {
            StmtKind::Let { vars, expr: Expr::Call { func, args } } => {
                let callee = inline_memo(program, func, memo, depth + 1);
                if callee.body.stmts.iter().any(|s| matches!(s.kind, StmtKind::Let { expr: Expr::Call { .. }, .. })) {
                    stmts.push(Stmt { kind: StmtKind::Let { vars, expr: Expr::Call { func, args } }, loc });
                    continue;
                }
                let mut subst = Subst::default();
                let fresh = |v: VarId, f: &mut Function, subst: &mut Subst| {
                    let info = callee.var(v).clone();
                    let nv = VarId(f.vars.len() as u32);
                    f.vars.push(info);
                    subst.map.insert(v, Atom::Var(nv));
                };
                for p in &callee.params {
                    fresh(*p, f, &mut subst);
                }
                block_binds(&callee.body, &mut |v| fresh(v, f, &mut subst));
                for (p, a) in callee.params.iter().zip(&args) {
                    stmts.push(Stmt { kind: StmtKind::Let { vars: vec![subst.var(*p)], expr: Expr::Atom(*a) }, loc });
                }
                let body = subst.block(&callee.body);
                stmts.extend(body.stmts);
                for (v, r) in vars.iter().zip(&body.results) {
                    stmts.push(Stmt { kind: StmtKind::Let { vars: vec![*v], expr: Expr::Atom(*r) }, loc });
                }
            }
            kind => {
                let kind = map_nested(kind, &mut |b| inline_block(program, f, b, memo, depth));
                stmts.push(Stmt { kind, loc });
            }
        }
    }
    Block { stmts, results: block.results }
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
