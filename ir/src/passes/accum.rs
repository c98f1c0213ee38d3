//! Folding of zero-initialised scalar accumulators, the shape reverse mode
//! produces for every scalar cotangent: `let mut c = 0.0; ...; let t = add c v;
//! c := t` becomes `c := v` when that is the first use of `c` in its block,
//! and a mutable variable assigned exactly once, right where nothing has
//! read it yet, becomes an ordinary immutable binding (so copy propagation
//! removes it). The other declarations of mutable variables by a value
//! move down to their first use.

use crate::fx::FxHashMap as HashMap;
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::visit::{child_blocks, for_each_block, stmt_uses_shallow};

/// Runs the folding on `f` in place, in time linear in the size of `f`.
pub fn fold_accumulators(f: &mut Function) {
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
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body, &assigns, &first.first);
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

fn block(f: &mut Function, b: Block, assigns: &[u32], first: &HashMap<VarId, usize>) -> Block {
    let mut stmts: Vec<Option<Stmt>> = Vec::with_capacity(b.stmts.len());
    for s in b.stmts {
        let loc = s.loc;
        let kind = super::inline::map_nested(s.kind, &mut |nb| block(f, nb, assigns, first));
        stmts.push(Some(Stmt { kind, loc }));
    }
    // Removed statements leave a hole, so the indices of `first` stay valid.
    for k in 0..stmts.len() {
        let Some(c) = stmts[k].as_ref().and_then(|s| zero_decl(f, &s.kind)) else { continue };
        // First statement after the declaration that mentions c.
        let Some(&j) = first.get(&c) else { continue };
        if j <= k || stmts[j].is_none() {
            continue;
        }
        let Some(next) = (j + 1..stmts.len()).find(|&i| stmts[i].is_some()) else { continue };
        let folded = match (stmts[j].as_ref().map(|s| &s.kind), stmts[next].as_ref().map(|s| &s.kind)) {
            (
                Some(StmtKind::Let { vars, expr: Expr::Binary(BinOp::Add, Atom::Var(a), v) }),
                Some(StmtKind::Assign { var, value: Atom::Var(t) }),
            ) if *a == c && *var == c && vars.len() == 1 && *t == vars[0] && *v != Atom::Var(c) => Some(*v),
            _ => None,
        };
        let Some(v) = folded else { continue };
        let loc = stmts[j].as_ref().map_or_else(Default::default, |s| s.loc);
        stmts[next] = None;
        if assigns[c.index()] == 1 {
            // Single assignment: an immutable binding in place of the add.
            f.vars[c.index()].mutable = false;
            stmts[j] = Some(Stmt { kind: StmtKind::Let { vars: vec![c], expr: Expr::Atom(v) }, loc });
            stmts[k] = None;
        } else {
            stmts[j] = Some(Stmt { kind: StmtKind::Assign { var: c, value: v }, loc });
        }
    }
    // Declarations of mutable variables by a literal or an immutable
    // variable move down to their first use: a mutable variable lives in an
    // emitter variable, and one declared far from its use is live (and
    // costs the code generator) across everything in between.
    let mut moved: HashMap<usize, Vec<Stmt>> = HashMap::default();
    for k in 0..stmts.len() {
        let Some(Stmt { kind: StmtKind::Let { vars, expr: Expr::Atom(a) }, .. }) = &stmts[k] else { continue };
        let ([c], true) = (vars.as_slice(), f.var(vars[0]).mutable) else { continue };
        if a.as_var().is_some_and(|w| f.var(w).mutable) {
            continue;
        }
        match first.get(c) {
            Some(&j) if j > k + 1 && j < stmts.len() && stmts[j].is_some() => {
                if let Some(d) = stmts[k].take() {
                    moved.entry(j).or_default().push(d);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::with_capacity(stmts.len());
    for (i, s) in stmts.into_iter().enumerate() {
        if let Some(ds) = moved.remove(&i) {
            out.extend(ds);
        }
        out.extend(s);
    }
    Block { stmts: out, results: b.results }
}
