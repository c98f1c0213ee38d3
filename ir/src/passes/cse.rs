//! Common subexpression elimination of pure scalar and view operations,
//! scoped by block. Reads of accumulators and mutable variables are never
//! shared (their values change).

use crate::program::{Atom, Block, Expr, Function, Stmt, StmtKind, VarId};
use crate::visit::Subst;
use std::collections::{HashMap, HashSet};

/// Runs CSE on `f` in place.
pub fn cse(f: &mut Function) {
    let mut c = Cse { unstable: HashSet::new(), scopes: vec![HashMap::new()], subst: Subst::default() };
    for (i, v) in f.vars.iter().enumerate() {
        if v.mutable {
            c.unstable.insert(VarId(i as u32));
        }
    }
    let body = std::mem::take(&mut f.body);
    f.body = c.block(body);
}

struct Cse {
    /// Mutable variables, accumulators and views of accumulators.
    unstable: HashSet<VarId>,
    scopes: Vec<HashMap<String, VarId>>,
    subst: Subst,
}

impl Cse {
    fn key(&self, e: &Expr) -> Option<String> {
        let mut stable = true;
        crate::visit::expr_uses(e, &mut |v| stable &= !self.unstable.contains(&v));
        if !stable {
            return None;
        }
        let atom_key = |a: &Atom| match a {
            Atom::F64(x) => format!("f{:x}", x.to_bits()),
            other => format!("{other:?}"),
        };
        Some(match e {
            Expr::Unary(op, a) => format!("u{op:?}{}", atom_key(a)),
            Expr::Binary(op, a, b) => format!("b{op:?}{},{}", atom_key(a), atom_key(b)),
            Expr::Index { array, indices } => {
                format!("i{}[{}]", array.0, indices.iter().map(atom_key).collect::<Vec<_>>().join(","))
            }
            Expr::Slice { array, lo, hi } => format!("s{}[{}:{}]", array.0, atom_key(lo), atom_key(hi)),
            Expr::Dim { array, axis } => format!("d{}.{}", array.0, axis),
            Expr::Reduce { op, array } => format!("r{op:?}{}", array.0),
            _ => return None,
        })
    }

    fn lookup(&self, k: &str) -> Option<VarId> {
        self.scopes.iter().rev().find_map(|s| s.get(k).copied())
    }

    fn block(&mut self, b: Block) -> Block {
        self.scopes.push(HashMap::new());
        let mut out = Vec::with_capacity(b.stmts.len());
        for s in b.stmts {
            let s = self.subst.stmt(&s);
            let loc = s.loc;
            if let StmtKind::Let { vars, expr } = &s.kind {
                let taints = matches!(expr, Expr::ZerosLike(_) | Expr::Zeros(_))
                    || (matches!(expr, Expr::Index { .. } | Expr::Slice { .. } | Expr::Atom(_) | Expr::Pop) && {
                        let mut t = false;
                        crate::visit::expr_uses(expr, &mut |v| t |= self.unstable.contains(&v));
                        t
                    });
                if taints {
                    vars.iter().for_each(|v| {
                        self.unstable.insert(*v);
                    });
                }
                if vars.len() == 1 && !taints {
                    if let Some(k) = self.key(expr) {
                        if let Some(prev) = self.lookup(&k) {
                            self.subst.map.insert(vars[0], Atom::Var(prev));
                            continue;
                        }
                        if let Some(scope) = self.scopes.last_mut() {
                            scope.insert(k, vars[0]);
                        }
                    }
                }
            }
            let kind = crate::passes::inline::map_nested(s.kind, &mut |nb| self.block(nb));
            out.push(Stmt { kind, loc });
        }
        self.scopes.pop();
        let results = b.results.iter().map(|a| self.subst.atom(a)).collect();
        Block { stmts: out, results }
    }
}
