//! Folding of zero-initialised scalar accumulators, the shape reverse mode
//! produces for every scalar cotangent: `let mut c = 0.0; ...; let t = add c v;
//! c := t` becomes `c := v` when that is the first use of `c` in its block,
//! and a mutable variable assigned exactly once, right where nothing has
//! read it yet, becomes an ordinary immutable binding (so copy propagation
//! removes it).

use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::visit::{block_uses, stmt_uses};

/// Runs the folding on `f` in place.
pub fn fold_accumulators(f: &mut Function) {
    let mut assigns = vec![0u32; f.vars.len()];
    count_assigns(&f.body, &mut assigns);
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &assigns);
}

fn count_assigns(b: &Block, n: &mut [u32]) {
    for s in &b.stmts {
        if let StmtKind::Assign { var, .. } = &s.kind {
            n[var.index()] += 1;
        }
        let mut nested = |nb: &Block| count_assigns(nb, n);
        match &s.kind {
            StmtKind::Let { expr: Expr::Build { body, .. } | Expr::Loop { body, .. }, .. } => nested(body),
            StmtKind::Let { expr: Expr::While { cond, body, .. }, .. } => {
                nested(cond);
                nested(body);
            }
            StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. }
            | StmtKind::If { then_branch, else_branch, .. } => {
                nested(then_branch);
                nested(else_branch);
            }
            StmtKind::For { body, .. } => nested(body),
            _ => {}
        }
    }
}

fn uses_var(s: &StmtKind, v: VarId) -> bool {
    let mut hit = false;
    stmt_uses(s, &mut |u| hit |= u == v);
    hit
}

fn block(f: &mut Function, b: Block, assigns: &[u32]) -> Block {
    let mut stmts: Vec<Stmt> = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let loc = s.loc;
        let kind = super::inline::map_nested(s.kind, &mut |nb| block(f, nb, assigns));
        stmts.push(Stmt { kind, loc });
    }
    let mut k = 0;
    while k < stmts.len() {
        let zero_decl = match &stmts[k].kind {
            StmtKind::Let { vars, expr: Expr::Atom(Atom::F64(z)) }
                if vars.len() == 1 && f.var(vars[0]).mutable && *z == 0.0 && z.is_sign_positive() =>
            {
                Some(vars[0])
            }
            _ => None,
        };
        if let Some(c) = zero_decl {
            // First statement after the declaration that mentions c.
            if let Some(j) = (k + 1..stmts.len()).find(|&j| uses_var(&stmts[j].kind, c)) {
                let folded = match (&stmts[j].kind, stmts.get(j + 1).map(|s| &s.kind)) {
                    (
                        StmtKind::Let { vars, expr: Expr::Binary(BinOp::Add, Atom::Var(a), v) },
                        Some(StmtKind::Assign { var, value: Atom::Var(t) }),
                    ) if *a == c && *var == c && vars.len() == 1 && *t == vars[0] && *v != Atom::Var(c) => Some(*v),
                    _ => None,
                };
                if let Some(v) = folded {
                    let loc = stmts[j].loc;
                    if assigns[c.index()] == 1 {
                        // Single assignment: an immutable binding in place of the add.
                        f.vars[c.index()].mutable = false;
                        stmts[j] = Stmt { kind: StmtKind::Let { vars: vec![c], expr: Expr::Atom(v) }, loc };
                        stmts.remove(j + 1);
                        stmts.remove(k);
                        continue;
                    }
                    stmts[j] = Stmt { kind: StmtKind::Assign { var: c, value: v }, loc };
                    stmts.remove(j + 1);
                }
            }
        }
        k += 1;
    }
    let _ = block_uses;
    Block { stmts, results: b.results }
}
