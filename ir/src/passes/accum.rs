//! Folding of zero-initialised scalar accumulators, the shape reverse mode
//! produces for every scalar cotangent: `let mut c = 0.0; ...; let t = add c v;
//! c := t` becomes `c := v` when that is the first use of `c` in its block,
//! and a mutable variable assigned exactly once, right where nothing has
//! read it yet, becomes an ordinary immutable binding (so copy propagation
//! removes it). The other declarations of mutable variables by a value
//! move down to their first use.

use crate::fx::FxHashMap as HashMap;
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::visit::{child_blocks, child_blocks_mut, for_each_block, stmt_uses_shallow};

/// Runs the folding on `f` in place, in time linear in the size of `f`.
pub fn fold_accumulators(f: &mut Function) {
    // Every rewrite concerns a mutable variable: code without any (a jvp,
    // a vjp whose accumulators became values) has nothing to fold.
    if !f.vars.iter().any(|v| v.mutable) {
        return;
    }
    let mut assigns = vec![0u32; f.vars.len()];
    for_each_block(&f.body, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::Assign { var, .. } = &s.kind {
                assigns[var.index()] += 1;
            }
        }
    });
    let mut first = FirstUses::default();
    first.block(&f.body, &mut Vec::new());
    let mut body = std::mem::take(&mut f.body);
    block(f, &mut body, &assigns, &first.first);
    f.body = body;
}

/// A zero-initialised mutable scalar: `let mut c = 0.0`.
fn zero_decl(f: &Function, kind: &StmtKind) -> Option<VarId> {
    match kind {
        StmtKind::Let { vars, expr: Expr::Atom(Atom::F64(z)) }
            if vars.len() == 1 && f.var(vars[0]).mutable && *z == 0.0 && z.is_sign_positive() =>
        {
            Some(vars[0])
        }
        _ => None,
    }
}

/// For every variable declared by a `let` with a literal `0.0`, the index
/// (in its declaring block) of the first later statement that uses it at
/// any depth: one walk of the function, remembering the statement index at
/// every depth of the current path.
#[derive(Default)]
struct FirstUses {
    /// The depth of the declaring block of each candidate.
    depth: HashMap<VarId, usize>,
    first: HashMap<VarId, usize>,
}

impl FirstUses {
    fn note(&mut self, v: VarId, path: &[usize]) {
        if let Some(&d) = self.depth.get(&v) {
            if let Some(&i) = path.get(d) {
                self.first.entry(v).or_insert(i);
            }
        }
    }

    fn block(&mut self, b: &Block, path: &mut Vec<usize>) {
        let d = path.len();
        path.push(0);
        for (i, s) in b.stmts.iter().enumerate() {
            path[d] = i;
            stmt_uses_shallow(&s.kind, &mut |v| self.note(v, path));
            if let StmtKind::Let { vars, expr: Expr::Atom(_) } = &s.kind {
                if let [c] = vars[..] {
                    self.depth.insert(c, d);
                }
            }
            for nb in child_blocks(&s.kind) {
                self.block(nb, path);
            }
        }
        path.pop();
        // The block's results belong to the enclosing statement.
        for r in &b.results {
            if let Atom::Var(v) = r {
                self.note(*v, path);
            }
        }
    }
}

fn block(f: &mut Function, b: &mut Block, assigns: &[u32], first: &HashMap<VarId, usize>) {
    for s in &mut b.stmts {
        for nb in child_blocks_mut(&mut s.kind) {
            block(f, nb, assigns, first);
        }
    }
    // Statements are replaced where they are and removed by marking them
    // `gone`, so the indices of `first` stay valid; the block is rebuilt
    // only when something changed (a pass that changes nothing moves no
    // statement).
    let n = b.stmts.len();
    let mut gone = vec![false; n];
    let mut changed = false;
    for k in 0..n {
        let Some(c) = (!gone[k]).then(|| zero_decl(f, &b.stmts[k].kind)).flatten() else { continue };
        // First statement after the declaration that mentions c.
        let Some(&j) = first.get(&c) else { continue };
        if j <= k || j >= n || gone[j] {
            continue;
        }
        let Some(next) = (j + 1..n).find(|&i| !gone[i]) else { continue };
        let folded = match (&b.stmts[j].kind, &b.stmts[next].kind) {
            (
                StmtKind::Let { vars, expr: Expr::Binary(BinOp::Add, Atom::Var(a), v) },
                StmtKind::Assign { var, value: Atom::Var(t) },
            ) if *a == c && *var == c && vars.len() == 1 && *t == vars[0] && *v != Atom::Var(c) => Some(*v),
            _ => None,
        };
        let Some(v) = folded else { continue };
        let loc = b.stmts[j].loc;
        gone[next] = true;
        changed = true;
        if assigns[c.index()] == 1 {
            // Single assignment: an immutable binding in place of the add.
            f.vars[c.index()].mutable = false;
            b.stmts[j] = Stmt { kind: StmtKind::Let { vars: vec![c], expr: Expr::Atom(v) }, loc };
            gone[k] = true;
        } else {
            b.stmts[j] = Stmt { kind: StmtKind::Assign { var: c, value: v }, loc };
        }
    }
    // Declarations of mutable variables by a literal or an immutable
    // variable move down to their first use: a mutable variable lives in an
    // emitter variable, and one declared far from its use is live (and
    // costs the code generator) across everything in between.
    let mut move_to: HashMap<usize, usize> = HashMap::default();
    for k in 0..n {
        if gone[k] {
            continue;
        }
        let StmtKind::Let { vars, expr: Expr::Atom(a) } = &b.stmts[k].kind else { continue };
        let ([c], true) = (vars.as_slice(), f.var(vars[0]).mutable) else { continue };
        if a.as_var().is_some_and(|w| f.var(w).mutable) {
            continue;
        }
        match first.get(c) {
            Some(&j) if j > k + 1 && j < n && !gone[j] => {
                gone[k] = true;
                move_to.insert(k, j);
                changed = true;
            }
            _ => {}
        }
    }
    if !changed {
        return;
    }
    let mut moved: HashMap<usize, Vec<Stmt>> = HashMap::default();
    let mut out = Vec::with_capacity(n);
    for (i, s) in std::mem::take(&mut b.stmts).into_iter().enumerate() {
        if let Some(ds) = moved.remove(&i) {
            out.extend(ds);
        }
        if let Some(&j) = move_to.get(&i) {
            moved.entry(j).or_default().push(s);
        } else if !gone[i] {
            out.push(s);
        }
    }
    b.stmts = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Loc;
    use crate::types::Type;

    fn stmt(kind: StmtKind) -> Stmt {
        Stmt { kind, loc: Loc::default() }
    }

    /// `let mut m = x; let t = x * 2; let u = t + 1; for i < 3 { m := m + u };
    /// return m`: the declaration of `m`, whose assignment in the loop keeps
    /// it mutable, moves down to just before the loop (its first use), and
    /// the statements keep their order otherwise.
    #[test]
    fn mutable_declarations_move_down_to_their_first_use() {
        let (mut f, ps) = Function::with_params("f", &[Type::F64], &[Type::F64]);
        let x = ps[0];
        let m = f.new_mut_var("m", Type::F64);
        let t = f.new_var("t", Type::F64);
        let u = f.new_var("u", Type::F64);
        let s = f.new_var("s", Type::F64);
        let i = f.new_var("i", Type::I64);
        let loop_body = Block {
            stmts: vec![
                stmt(StmtKind::Let { vars: vec![s], expr: Expr::Binary(BinOp::Add, Atom::Var(m), Atom::Var(u)) }),
                stmt(StmtKind::Assign { var: m, value: Atom::Var(s) }),
            ],
            results: vec![],
        };
        let declare_m = stmt(StmtKind::Let { vars: vec![m], expr: Expr::Atom(Atom::Var(x)) });
        let bind_t =
            stmt(StmtKind::Let { vars: vec![t], expr: Expr::Binary(BinOp::Mul, Atom::Var(x), Atom::F64(2.0)) });
        let bind_u =
            stmt(StmtKind::Let { vars: vec![u], expr: Expr::Binary(BinOp::Add, Atom::Var(t), Atom::F64(1.0)) });
        let the_loop = stmt(StmtKind::For { n: Atom::I64(3), index: i, reverse: false, body: loop_body });
        f.body = Block {
            stmts: vec![declare_m.clone(), bind_t.clone(), bind_u.clone(), the_loop.clone()],
            results: vec![Atom::Var(m)],
        };
        fold_accumulators(&mut f);
        assert!(f.var(m).mutable);
        assert_eq!(f.body.stmts, vec![bind_t, bind_u, declare_m, the_loop]);
    }
}
