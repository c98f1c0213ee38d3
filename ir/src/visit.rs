//! Generic traversals of the IR: the variables a statement uses and binds,
//! and substitution of variables.

use crate::program::{Atom, Block, Expr, Stmt, StmtKind, VarId};

/// The variables that the comprehensions among the top-level statements
/// of `block` bind (`let ys = for i < n => ...`, every result).
pub fn comprehension_results(block: &Block) -> std::collections::HashSet<VarId> {
    block
        .stmts
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Let { vars, expr: Expr::Build { .. } } => Some(vars.iter().copied()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Calls `f` on every variable *used* (read) by `expr`, including uses
/// inside nested blocks (which may also be bound there).
pub fn expr_uses(expr: &Expr, f: &mut dyn FnMut(VarId)) {
    let atom = |a: &Atom, f: &mut dyn FnMut(VarId)| {
        if let Atom::Var(v) = a {
            f(*v)
        }
    };
    match expr {
        Expr::Atom(a) | Expr::Unary(_, a) => atom(a, f),
        Expr::Binary(_, a, b) => {
            atom(a, f);
            atom(b, f);
        }
        Expr::Index { array, indices } => {
            f(*array);
            indices.iter().for_each(|i| atom(i, f));
        }
        Expr::Slice { array, lo, hi } => {
            f(*array);
            atom(lo, f);
            atom(hi, f);
        }
        Expr::Reshape { array, dims } => {
            f(*array);
            dims.iter().for_each(|d| atom(d, f));
        }
        Expr::Update { array, indices, value } => {
            f(*array);
            indices.iter().for_each(|i| atom(i, f));
            atom(value, f);
        }
        Expr::Dim { array, .. } | Expr::Reduce { array, .. } | Expr::ZerosLike(array) => f(*array),
        Expr::ArrayLit { elems, .. } | Expr::Zeros(elems) => elems.iter().for_each(|e| atom(e, f)),
        Expr::Build { n, body, .. } => {
            atom(n, f);
            block_uses(body, f);
        }
        Expr::Loop { n, init, body, .. } => {
            atom(n, f);
            init.iter().for_each(|e| atom(e, f));
            block_uses(body, f);
        }
        Expr::While { init, cond, body, .. } => {
            init.iter().for_each(|e| atom(e, f));
            block_uses(cond, f);
            block_uses(body, f);
        }
        Expr::If { cond, then_branch, else_branch } => {
            atom(cond, f);
            block_uses(then_branch, f);
            block_uses(else_branch, f);
        }
        Expr::Call { args, .. } => args.iter().for_each(|e| atom(e, f)),
        Expr::Pop | Expr::TapeMark => {}
    }
}

/// Calls `f` on every variable used by `stmt` (see [`expr_uses`]).
pub fn stmt_uses(stmt: &StmtKind, f: &mut dyn FnMut(VarId)) {
    let atom = |a: &Atom, f: &mut dyn FnMut(VarId)| {
        if let Atom::Var(v) = a {
            f(*v)
        }
    };
    match stmt {
        StmtKind::Let { expr, .. } => expr_uses(expr, f),
        StmtKind::Assign { var, value } => {
            f(*var);
            atom(value, f);
        }
        StmtKind::AccAdd { acc, indices, value } => {
            f(*acc);
            indices.iter().for_each(|i| atom(i, f));
            atom(value, f);
        }
        StmtKind::AccZero { acc, indices } => {
            f(*acc);
            indices.iter().for_each(|i| atom(i, f));
        }
        StmtKind::CheckSize { a, b, .. } => {
            atom(a, f);
            atom(b, f);
        }
        StmtKind::Push(a) | StmtKind::TapeRewind(a) => atom(a, f),
        StmtKind::For { n, body, .. } => {
            atom(n, f);
            block_uses(body, f);
        }
        StmtKind::If { cond, then_branch, else_branch } => {
            atom(cond, f);
            block_uses(then_branch, f);
            block_uses(else_branch, f);
        }
    }
}

/// Calls `f` on every variable used by `stmt` itself, not by the blocks
/// nested in it (their statements and results): O(1) per statement, for
/// walks that visit the nested blocks themselves.
pub fn stmt_uses_shallow(stmt: &StmtKind, f: &mut dyn FnMut(VarId)) {
    let atom = |a: &Atom, f: &mut dyn FnMut(VarId)| {
        if let Atom::Var(v) = a {
            f(*v)
        }
    };
    match stmt {
        StmtKind::Let { expr, .. } => match expr {
            Expr::Build { n, .. } => atom(n, f),
            Expr::Loop { n, init, .. } => {
                atom(n, f);
                init.iter().for_each(|e| atom(e, f));
            }
            Expr::While { init, .. } => init.iter().for_each(|e| atom(e, f)),
            Expr::If { cond, .. } => atom(cond, f),
            Expr::Atom(_)
            | Expr::Unary(..)
            | Expr::Binary(..)
            | Expr::Index { .. }
            | Expr::Slice { .. }
            | Expr::Reshape { .. }
            | Expr::Update { .. }
            | Expr::Dim { .. }
            | Expr::Reduce { .. }
            | Expr::ArrayLit { .. }
            | Expr::Call { .. }
            | Expr::ZerosLike(_)
            | Expr::Zeros(_)
            | Expr::Pop
            | Expr::TapeMark => expr_uses(expr, f),
        },
        StmtKind::For { n, .. } => atom(n, f),
        StmtKind::If { cond, .. } => atom(cond, f),
        StmtKind::Assign { .. }
        | StmtKind::AccAdd { .. }
        | StmtKind::AccZero { .. }
        | StmtKind::CheckSize { .. }
        | StmtKind::Push(_)
        | StmtKind::TapeRewind(_) => stmt_uses(stmt, f),
    }
}

/// Calls `f` on every variable used in `block` (statements and results).
pub fn block_uses(block: &Block, f: &mut dyn FnMut(VarId)) {
    for s in &block.stmts {
        stmt_uses(&s.kind, f);
    }
    for r in &block.results {
        if let Atom::Var(v) = r {
            f(*v)
        }
    }
}

/// Counts the uses of every variable in `block` (indexed by [`VarId`]).
pub fn use_counts(block: &Block, nvars: usize) -> Vec<u32> {
    let mut counts = vec![0u32; nvars];
    block_uses(block, &mut |v| {
        if let Some(c) = counts.get_mut(v.index()) {
            *c += 1
        }
    });
    counts
}

/// The blocks nested directly in a statement (bodies and branches).
pub fn child_blocks(stmt: &StmtKind) -> impl Iterator<Item = &Block> {
    let (a, b): (Option<&Block>, Option<&Block>) = match stmt {
        StmtKind::Let { expr: Expr::Build { body, .. } | Expr::Loop { body, .. }, .. } | StmtKind::For { body, .. } => {
            (Some(body), None)
        }
        StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. }
        | StmtKind::If { then_branch, else_branch, .. } => (Some(then_branch), Some(else_branch)),
        StmtKind::Let { expr: Expr::While { cond, body, .. }, .. } => (Some(cond), Some(body)),
        _ => (None, None),
    };
    a.into_iter().chain(b)
}

/// The blocks nested directly in a statement, mutably ([`child_blocks`]).
pub fn child_blocks_mut(stmt: &mut StmtKind) -> impl Iterator<Item = &mut Block> {
    let (a, b): (Option<&mut Block>, Option<&mut Block>) = match stmt {
        StmtKind::Let { expr: Expr::Build { body, .. } | Expr::Loop { body, .. }, .. } | StmtKind::For { body, .. } => {
            (Some(body), None)
        }
        StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. }
        | StmtKind::If { then_branch, else_branch, .. } => (Some(then_branch), Some(else_branch)),
        StmtKind::Let { expr: Expr::While { cond, body, .. }, .. } => (Some(cond), Some(body)),
        _ => (None, None),
    };
    a.into_iter().chain(b)
}

/// Calls `f` on `block`, then on every block nested in it (as `f` left
/// them), at any depth (iteratively: no recursion over the nesting depth).
pub fn for_each_block_mut(block: &mut Block, f: &mut dyn FnMut(&mut Block)) {
    let mut stack = vec![block];
    while let Some(b) = stack.pop() {
        f(b);
        for s in b.stmts.iter_mut() {
            stack.extend(child_blocks_mut(&mut s.kind));
        }
    }
}

/// Calls `f` on `block` and on every block nested in it, at any depth
/// (iteratively: no recursion over the nesting depth).
pub fn for_each_block<'a>(block: &'a Block, f: &mut dyn FnMut(&'a Block)) {
    let mut stack = vec![block];
    while let Some(b) = stack.pop() {
        f(b);
        for s in b.stmts.iter().rev() {
            let children: Vec<&Block> = child_blocks(&s.kind).collect();
            stack.extend(children.into_iter().rev());
        }
    }
}

/// The number of statements of `block` at every depth (the size the
/// backends' budgets and the compiler's choice of threads count).
pub fn stmt_count(block: &Block) -> usize {
    let mut n = 0;
    for_each_block(block, &mut |b| n += b.stmts.len());
    n
}

/// The functions called (`Expr::Call`) in `block` at any depth, each once,
/// in the order of their first calls.
pub fn called_functions(block: &Block) -> Vec<crate::program::FuncId> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for_each_block(block, &mut |b| {
        for s in &b.stmts {
            if let StmtKind::Let { expr: Expr::Call { func, .. }, .. } = &s.kind {
                if seen.insert(*func) {
                    out.push(*func);
                }
            }
        }
    });
    out
}

/// Calls `f` on every variable bound in `block`, at any depth (let-bound,
/// loop indices and states).
pub fn block_binds(block: &Block, f: &mut dyn FnMut(VarId)) {
    for s in &block.stmts {
        stmt_binds(&s.kind, f);
    }
}

/// Calls `f` on every variable bound by `stmt`, including in its nested
/// blocks (see [`block_binds`]).
pub fn stmt_binds(stmt: &StmtKind, f: &mut dyn FnMut(VarId)) {
    match stmt {
        StmtKind::Let { vars, expr } => {
            vars.iter().for_each(|v| f(*v));
            match expr {
                Expr::Build { index, body, .. } => {
                    f(*index);
                    block_binds(body, f);
                }
                Expr::Loop { index, states, body, .. } => {
                    f(*index);
                    states.iter().for_each(|v| f(*v));
                    block_binds(body, f);
                }
                Expr::While { states, cond, body, .. } => {
                    states.iter().for_each(|v| f(*v));
                    block_binds(cond, f);
                    block_binds(body, f);
                }
                Expr::If { then_branch, else_branch, .. } => {
                    block_binds(then_branch, f);
                    block_binds(else_branch, f);
                }
                _ => {}
            }
        }
        StmtKind::For { index, body, .. } => {
            f(*index);
            block_binds(body, f);
        }
        StmtKind::If { then_branch, else_branch, .. } => {
            block_binds(then_branch, f);
            block_binds(else_branch, f);
        }
        _ => {}
    }
}

/// Adds to `subst` a fresh variable (a copy of the old one's information,
/// appended to `f`'s table) for every variable bound in `b` and for each of
/// `extra`, then returns `b` with `subst` applied: a copy of the block that
/// binds no variable the original binds.
pub fn freshen_block(f: &mut crate::program::Function, b: &Block, extra: &[VarId], subst: &mut Subst) -> Block {
    let mut binders = extra.to_vec();
    block_binds(b, &mut |v| binders.push(v));
    for v in binders {
        let info = f.var(v).clone();
        let nv = VarId(f.vars.len() as u32);
        f.vars.push(info);
        subst.map.insert(v, Atom::Var(nv));
    }
    subst.block(b)
}

/// A substitution of variables by atoms (uses) and of variables by
/// variables (binders and array operands).
#[derive(Default, Clone, Debug)]
pub struct Subst {
    /// Replacement of each variable.
    pub map: crate::fx::FxHashMap<VarId, Atom>,
}

impl Subst {
    /// The atom a variable stands for.
    pub fn atom(&self, a: &Atom) -> Atom {
        match a {
            Atom::Var(v) => self.map.get(v).copied().unwrap_or(*a),
            _ => *a,
        }
    }
    /// The variable a variable stands for (when replaced by a literal,
    /// the variable itself is kept: arrays are never literals).
    pub fn var(&self, v: VarId) -> VarId {
        match self.map.get(&v) {
            Some(Atom::Var(w)) => *w,
            _ => v,
        }
    }
    fn atoms(&self, a: &[Atom]) -> Vec<Atom> {
        a.iter().map(|a| self.atom(a)).collect()
    }
    fn vars(&self, a: &[VarId]) -> Vec<VarId> {
        a.iter().map(|v| self.var(*v)).collect()
    }

    /// Applies the substitution to an expression (uses and binders).
    pub fn expr(&self, e: &Expr) -> Expr {
        match e {
            Expr::Atom(a) => Expr::Atom(self.atom(a)),
            Expr::Unary(op, a) => Expr::Unary(*op, self.atom(a)),
            Expr::Binary(op, a, b) => Expr::Binary(*op, self.atom(a), self.atom(b)),
            Expr::Index { array, indices } => Expr::Index { array: self.var(*array), indices: self.atoms(indices) },
            Expr::Slice { array, lo, hi } => {
                Expr::Slice { array: self.var(*array), lo: self.atom(lo), hi: self.atom(hi) }
            }
            Expr::Reshape { array, dims } => Expr::Reshape { array: self.var(*array), dims: self.atoms(dims) },
            Expr::Update { array, indices, value } => {
                Expr::Update { array: self.var(*array), indices: self.atoms(indices), value: self.atom(value) }
            }
            Expr::Dim { array, axis } => Expr::Dim { array: self.var(*array), axis: *axis },
            Expr::Reduce { op, array } => Expr::Reduce { op: *op, array: self.var(*array) },
            Expr::ArrayLit { elem_ty, elems } => Expr::ArrayLit { elem_ty: *elem_ty, elems: self.atoms(elems) },
            Expr::Build { n, index, body } => {
                Expr::Build { n: self.atom(n), index: self.var(*index), body: self.block(body) }
            }
            Expr::Loop { n, index, states, init, body } => Expr::Loop {
                n: self.atom(n),
                index: self.var(*index),
                states: self.vars(states),
                init: self.atoms(init),
                body: self.block(body),
            },
            Expr::While { states, init, cond, body } => Expr::While {
                states: self.vars(states),
                init: self.atoms(init),
                cond: self.block(cond),
                body: self.block(body),
            },
            Expr::If { cond, then_branch, else_branch } => Expr::If {
                cond: self.atom(cond),
                then_branch: self.block(then_branch),
                else_branch: self.block(else_branch),
            },
            Expr::Call { func, args } => Expr::Call { func: *func, args: self.atoms(args) },
            Expr::ZerosLike(v) => Expr::ZerosLike(self.var(*v)),
            Expr::Zeros(dims) => Expr::Zeros(dims.iter().map(|a| self.atom(a)).collect()),
            Expr::Pop => Expr::Pop,
            Expr::TapeMark => Expr::TapeMark,
        }
    }

    /// Applies the substitution to a statement.
    pub fn stmt(&self, s: &Stmt) -> Stmt {
        let kind = match &s.kind {
            StmtKind::Let { vars, expr } => StmtKind::Let { vars: self.vars(vars), expr: self.expr(expr) },
            StmtKind::Assign { var, value } => StmtKind::Assign { var: self.var(*var), value: self.atom(value) },
            StmtKind::AccAdd { acc, indices, value } => {
                StmtKind::AccAdd { acc: self.var(*acc), indices: self.atoms(indices), value: self.atom(value) }
            }
            StmtKind::AccZero { acc, indices } => {
                StmtKind::AccZero { acc: self.var(*acc), indices: self.atoms(indices) }
            }
            StmtKind::CheckSize { a, b, what } => {
                StmtKind::CheckSize { a: self.atom(a), b: self.atom(b), what: what.clone() }
            }
            StmtKind::Push(a) => StmtKind::Push(self.atom(a)),
            StmtKind::TapeRewind(a) => StmtKind::TapeRewind(self.atom(a)),
            StmtKind::For { n, index, reverse, body } => {
                StmtKind::For { n: self.atom(n), index: self.var(*index), reverse: *reverse, body: self.block(body) }
            }
            StmtKind::If { cond, then_branch, else_branch } => StmtKind::If {
                cond: self.atom(cond),
                then_branch: self.block(then_branch),
                else_branch: self.block(else_branch),
            },
        };
        Stmt { kind, loc: s.loc }
    }

    /// A copy of `kind` renamed by the substitution, with `g` making each of
    /// its nested blocks (so that a walk that renames and rewrites copies
    /// every statement once, whatever the nesting).
    pub fn stmt_nested(&self, kind: &StmtKind, g: &mut dyn FnMut(&Block) -> Block) -> StmtKind {
        struct Ctx<'a, 'b> {
            s: &'a Subst,
            g: &'b mut dyn FnMut(&Block) -> Block,
        }
        let mut c = Ctx { s: self, g };
        rename_stmt_with(&mut c, |c| c.s, kind, &mut |c, b| (c.g)(b))
    }

    /// Renames `kind` in place by the substitution except inside its nested
    /// blocks (for passes that walk the nested blocks themselves, and keep
    /// most statements of long blocks where they are: renaming the nested
    /// blocks here too would rename every statement once per enclosing
    /// block).
    pub fn stmt_shallow_in_place(&self, kind: &mut StmtKind) {
        let atom = |a: &mut Atom| *a = self.atom(a);
        let var = |v: &mut VarId| *v = self.var(*v);
        match kind {
            StmtKind::Let { vars, expr } => {
                vars.iter_mut().for_each(var);
                self.expr_shallow_in_place(expr);
            }
            StmtKind::Assign { var: v, value } => {
                var(v);
                atom(value);
            }
            StmtKind::AccAdd { acc, indices, value } => {
                var(acc);
                indices.iter_mut().for_each(atom);
                atom(value);
            }
            StmtKind::AccZero { acc, indices } => {
                var(acc);
                indices.iter_mut().for_each(atom);
            }
            StmtKind::CheckSize { a, b, .. } => {
                atom(a);
                atom(b);
            }
            StmtKind::Push(a) | StmtKind::TapeRewind(a) => atom(a),
            StmtKind::For { n, index, .. } => {
                atom(n);
                var(index);
            }
            StmtKind::If { cond, .. } => atom(cond),
        }
    }

    /// [`Self::expr`] in place, outside the expression's nested blocks.
    pub fn expr_shallow_in_place(&self, e: &mut Expr) {
        let atom = |a: &mut Atom| *a = self.atom(a);
        let var = |v: &mut VarId| *v = self.var(*v);
        match e {
            Expr::Atom(a) | Expr::Unary(_, a) => atom(a),
            Expr::Binary(_, a, b) => {
                atom(a);
                atom(b);
            }
            Expr::Index { array, indices: atoms } | Expr::Reshape { array, dims: atoms } => {
                var(array);
                atoms.iter_mut().for_each(atom);
            }
            Expr::Slice { array, lo, hi } => {
                var(array);
                atom(lo);
                atom(hi);
            }
            Expr::Update { array, indices, value } => {
                var(array);
                indices.iter_mut().for_each(atom);
                atom(value);
            }
            Expr::Dim { array, .. } | Expr::Reduce { array, .. } | Expr::ZerosLike(array) => var(array),
            Expr::ArrayLit { elems: atoms, .. } | Expr::Call { args: atoms, .. } | Expr::Zeros(atoms) => {
                atoms.iter_mut().for_each(atom)
            }
            Expr::Build { n, index, .. } => {
                atom(n);
                var(index);
            }
            Expr::Loop { n, index, states, init, .. } => {
                atom(n);
                var(index);
                states.iter_mut().for_each(var);
                init.iter_mut().for_each(atom);
            }
            Expr::While { states, init, .. } => {
                states.iter_mut().for_each(var);
                init.iter_mut().for_each(atom);
            }
            Expr::If { cond, .. } => atom(cond),
            Expr::Pop | Expr::TapeMark => {}
        }
    }

    /// Applies the substitution to a block.
    pub fn block(&self, b: &Block) -> Block {
        Block { stmts: b.stmts.iter().map(|s| self.stmt(s)).collect(), results: self.atoms(&b.results) }
    }
}

/// A copy of `kind` renamed by the substitution `subst(ctx)`, with
/// `g(ctx, b)` making each of its nested blocks `b` (see
/// [`Subst::stmt_nested`]; `ctx` is free while a nested block is made, so
/// `g` may extend the substitution).
pub fn rename_stmt_with<C: ?Sized>(
    ctx: &mut C,
    subst: for<'x> fn(&'x C) -> &'x Subst,
    kind: &StmtKind,
    g: &mut dyn FnMut(&mut C, &Block) -> Block,
) -> StmtKind {
    let atoms = |ctx: &C, a: &[Atom]| a.iter().map(|x| subst(ctx).atom(x)).collect::<Vec<_>>();
    let vars = |ctx: &C, a: &[VarId]| a.iter().map(|v| subst(ctx).var(*v)).collect::<Vec<_>>();
    match kind {
        StmtKind::Let { vars: vs, expr } => {
            let expr = match expr {
                Expr::Build { n, index, body } => {
                    Expr::Build { n: subst(ctx).atom(n), index: subst(ctx).var(*index), body: g(ctx, body) }
                }
                Expr::Loop { n, index, states, init, body } => Expr::Loop {
                    n: subst(ctx).atom(n),
                    index: subst(ctx).var(*index),
                    states: vars(ctx, states),
                    init: atoms(ctx, init),
                    body: g(ctx, body),
                },
                Expr::While { states, init, cond, body } => {
                    let cond = g(ctx, cond);
                    Expr::While { states: vars(ctx, states), init: atoms(ctx, init), cond, body: g(ctx, body) }
                }
                Expr::If { cond, then_branch, else_branch } => {
                    let t = g(ctx, then_branch);
                    Expr::If { cond: subst(ctx).atom(cond), then_branch: t, else_branch: g(ctx, else_branch) }
                }
                e => subst(ctx).expr(e),
            };
            StmtKind::Let { vars: vars(ctx, vs), expr }
        }
        StmtKind::For { n, index, reverse, body } => StmtKind::For {
            n: subst(ctx).atom(n),
            index: subst(ctx).var(*index),
            reverse: *reverse,
            body: g(ctx, body),
        },
        StmtKind::If { cond, then_branch, else_branch } => {
            let t = g(ctx, then_branch);
            StmtKind::If { cond: subst(ctx).atom(cond), then_branch: t, else_branch: g(ctx, else_branch) }
        }
        k => subst(ctx).stmt(&Stmt { kind: k.clone(), loc: crate::program::Loc::default() }).kind,
    }
}
