//! Simplification: copy propagation, constant folding of operations whose
//! result does not depend on the backend, exact algebraic identities,
//! `if` on a literal condition, extents known from the binding of an array
//! (`dim (build i < n => ..) 0` is `n`, `dim (zeros_like a) k` is
//! `dim a k`), and size checks of a size against itself.

use crate::fx::FxHashMap as HashMap;
use crate::program::{Atom, BinOp, Block, Expr, Function, Stmt, StmtKind, UnOp, VarId};
use crate::visit::Subst;

/// What is known of the extents of arrays from their bindings.
#[derive(Default)]
struct Shapes {
    /// Arrays bound by a `build` over `n`, an array literal of `n` rows or a
    /// slice `lo:hi` with literal bounds: their extent on axis 0.
    axis0: HashMap<VarId, Atom>,
    /// Arrays bound by `zeros_like a`: `a`, of the same shape.
    like: HashMap<VarId, VarId>,
    /// Arrays bound by a view of `a` that drops `k` leading axes (a row, or
    /// `k = 0`, a slice): their axis `j` (`j >= 1` for a slice) is `a`'s
    /// axis `j + k`.
    view: HashMap<VarId, (VarId, u8)>,
    /// `d = dim a k`: the extent `d` names.
    dim_of: HashMap<VarId, (VarId, u8)>,
    /// Extents known to be literals (from size checks), in scope.
    lit_dim: HashMap<(VarId, u8), i64>,
}

/// Simplifies `f` in place. Mutable variables are never propagated.
pub fn simplify(f: &mut Function) {
    let mut subst = Subst::default();
    let mut shapes = Shapes::default();
    let mut body = std::mem::take(&mut f.body);
    block(f, &mut body, &mut subst, &mut shapes);
    f.body = body;
}

/// `dim array axis`, simplified with what the bindings tell.
fn dim(f: &Function, shapes: &Shapes, array: VarId, axis: u8) -> Expr {
    let mut a = array;
    // Follow chains of zeros_like (a cotangent of a cotangent ...).
    let mut axis = axis;
    for _ in 0..64 {
        if f.var(a).mutable {
            break;
        }
        if axis == 0 {
            if let Some(n) = shapes.axis0.get(&a) {
                return Expr::Atom(*n);
            }
        }
        if let Some(b) = shapes.like.get(&a) {
            a = *b;
            continue;
        }
        match shapes.view.get(&a) {
            Some(&(b, k)) if k > 0 || axis > 0 => {
                a = b;
                axis += k;
            }
            _ => break,
        }
    }
    Expr::Dim { array: a, axis }
}

/// Simplifies `b` in place: statements are renamed and rewritten where
/// they are, removed by marking, and the block is rebuilt only when an
/// `if` on a literal leaves its taken branch in place of itself (a pass
/// over a long body moves no statement it keeps).
fn block(f: &Function, b: &mut Block, subst: &mut Subst, shapes: &mut Shapes) {
    // Substitutions learnt from size checks in this block: they hold only
    // after the check, so they end with the block.
    let mut learnt: Vec<VarId> = Vec::new();
    let mut learnt_dims: Vec<(VarId, u8)> = Vec::new();
    // The sizes (i64 variables) bound in this block so far.
    let mut bound_here: crate::fx::FxHashSet<VarId> = Default::default();
    let mut keep = vec![true; b.stmts.len()];
    // The statements that take the place of a removed one, by its index.
    let mut splices: Vec<(usize, Vec<Stmt>)> = Vec::new();
    for (i, s) in b.stmts.iter_mut().enumerate() {
        if let StmtKind::Let { vars, .. } = &s.kind {
            bound_here.extend(vars.iter().filter(|v| f.ty(**v) == crate::Type::I64));
        }
        subst.stmt_shallow_in_place(&mut s.kind);
        let loc = s.loc;
        match &mut s.kind {
            StmtKind::Let { vars, expr } => {
                let rewritten = match &mut *expr {
                    Expr::Build { n, body, .. } => {
                        if vars.iter().all(|v| !f.var(*v).mutable) {
                            for v in vars.iter() {
                                shapes.axis0.insert(*v, *n);
                            }
                        }
                        block(f, body, subst, shapes);
                        None
                    }
                    Expr::ZerosLike(a) => {
                        let a = *a;
                        if let [v] = vars.as_slice() {
                            if !f.var(*v).mutable {
                                shapes.like.insert(*v, a);
                            }
                        }
                        // Of literal extents: zeros of those extents.
                        let rank = f.ty(a).rank;
                        let lits: Option<Vec<Atom>> = (0..rank)
                            .map(|k| match dim(f, shapes, a, k) {
                                Expr::Atom(Atom::I64(n)) => Some(Atom::I64(n)),
                                Expr::Dim { array, axis } => shapes.lit_dim.get(&(array, axis)).map(|n| Atom::I64(*n)),
                                _ => None,
                            })
                            .collect();
                        match lits {
                            Some(dims) if !f.var(a).mutable && rank > 0 => Some(Expr::Zeros(dims)),
                            _ => None,
                        }
                    }
                    Expr::Dim { array, axis } => match dim(f, shapes, *array, *axis) {
                        Expr::Dim { array, axis } => {
                            if let [v] = vars.as_slice() {
                                shapes.dim_of.insert(*v, (array, axis));
                            }
                            match shapes.lit_dim.get(&(array, axis)) {
                                Some(n) => Some(Expr::Atom(Atom::I64(*n))),
                                None => Some(Expr::Dim { array, axis }),
                            }
                        }
                        e => Some(e),
                    },
                    Expr::ArrayLit { elems, .. } => {
                        if let [v] = vars.as_slice() {
                            shapes.axis0.insert(*v, Atom::I64(elems.len() as i64));
                        }
                        None
                    }
                    Expr::Slice { array, lo, hi } => {
                        if let [v] = vars.as_slice() {
                            shapes.view.insert(*v, (*array, 0));
                            if let (Atom::I64(l), Atom::I64(h)) = (*lo, *hi) {
                                if h >= l {
                                    shapes.axis0.insert(*v, Atom::I64(h - l));
                                }
                            }
                        }
                        None
                    }
                    Expr::Index { array, indices } => {
                        if let [v] = vars.as_slice() {
                            if f.var(*v).ty.is_array() {
                                shapes.view.insert(*v, (*array, indices.len() as u8));
                            }
                        }
                        // Nothing folds an index.
                        None
                    }
                    Expr::Loop { body, .. } => {
                        block(f, body, subst, shapes);
                        None
                    }
                    Expr::While { cond, body, .. } => {
                        block(f, cond, subst, shapes);
                        block(f, body, subst, shapes);
                        None
                    }
                    Expr::If { cond: Atom::Bool(c), then_branch, else_branch }
                        if vars.iter().all(|v| !f.var(*v).mutable) =>
                    {
                        let mut taken = std::mem::take(if *c { then_branch } else { else_branch });
                        block(f, &mut taken, subst, shapes);
                        let mut out = taken.stmts;
                        for (v, r) in vars.iter().zip(&taken.results) {
                            propagate(f, *v, *r, subst, &mut out, loc);
                        }
                        splices.push((i, out));
                        keep[i] = false;
                        continue;
                    }
                    Expr::If { then_branch, else_branch, .. } => {
                        block(f, then_branch, subst, shapes);
                        block(f, else_branch, subst, shapes);
                        None
                    }
                    e => fold(f, e),
                };
                if let Some(e) = rewritten {
                    *expr = e;
                }
                // `let v = a`: substituted, unless either is mutable (then
                // the statement stays as it is).
                if let (Expr::Atom(a), [v]) = (&*expr, vars.as_slice()) {
                    let a_mut = matches!(a, Atom::Var(w) if f.var(*w).mutable);
                    if !f.var(*v).mutable && !a_mut {
                        subst.map.insert(*v, *a);
                        keep[i] = false;
                    }
                }
            }
            StmtKind::For { body, .. } => block(f, body, subst, shapes),
            StmtKind::If { then_branch, else_branch, .. } => {
                block(f, then_branch, subst, shapes);
                block(f, else_branch, subst, shapes);
            }
            // A size equal to itself: the check cannot fail.
            StmtKind::CheckSize { a, b, .. } if a == b => keep[i] = false,
            // Once `x == c` is checked, later uses of `x` in this block (and
            // the blocks nested in it) are the literal.
            StmtKind::CheckSize { a, b, .. } => {
                let (a, b) = (*a, *b);
                // Once `x == y` is checked for two sizes, later uses of `x`
                // (when this block binds it) are `y`, so that loops over
                // either have one extent and fuse. `y` is the size that
                // decides (the left operand's of an elementwise operation,
                // the declared size of an argument): the one the
                // interpreter's row shape of a comprehension that runs
                // zero times takes too.
                if let (Atom::Var(x), Atom::Var(y)) = (a, b) {
                    if bound_here.contains(&x) && !f.var(x).mutable && !f.var(y).mutable && !subst.map.contains_key(&x)
                    {
                        subst.map.insert(x, Atom::Var(y));
                        learnt.push(x);
                    }
                }
                if let (Atom::Var(x), Atom::I64(_)) | (Atom::I64(_), Atom::Var(x)) = (a, b) {
                    if !f.var(x).mutable && !subst.map.contains_key(&x) {
                        let lit = if matches!(a, Atom::I64(_)) { a } else { b };
                        subst.map.insert(x, lit);
                        learnt.push(x);
                        if let (Some(key), Atom::I64(n)) = (shapes.dim_of.get(&x).copied(), lit) {
                            if !f.var(key.0).mutable && shapes.lit_dim.insert(key, n).is_none() {
                                learnt_dims.push(key);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if !splices.is_empty() {
        let extra: usize = splices.iter().map(|(_, s)| s.len()).sum();
        let mut out = Vec::with_capacity(b.stmts.len() + extra);
        let mut splices = splices.into_iter().peekable();
        for (i, s) in std::mem::take(&mut b.stmts).into_iter().enumerate() {
            if let Some((_, taken)) = splices.next_if(|(j, _)| *j == i) {
                out.extend(taken);
            }
            if keep[i] {
                out.push(s);
            }
        }
        b.stmts = out;
    } else if keep.contains(&false) {
        let mut keep = keep.into_iter();
        b.stmts.retain(|_| keep.next().unwrap_or(true));
    }
    for r in &mut b.results {
        *r = subst.atom(r);
    }
    for x in learnt {
        subst.map.remove(&x);
    }
    for k in learnt_dims {
        shapes.lit_dim.remove(&k);
    }
}

/// `let v = a`: substitute `a` for `v` unless either is mutable.
fn propagate(f: &Function, v: crate::VarId, a: Atom, subst: &mut Subst, out: &mut Vec<Stmt>, loc: crate::Loc) {
    let a_mut = matches!(a, Atom::Var(w) if f.var(w).mutable);
    if f.var(v).mutable || a_mut {
        out.push(Stmt { kind: StmtKind::Let { vars: vec![v], expr: Expr::Atom(a) }, loc });
    } else {
        subst.map.insert(v, a);
    }
}

/// The fold of an expression whose operands are literals, or an exact
/// identity; `None` when it folds to nothing simpler.
fn fold(f: &Function, e: &Expr) -> Option<Expr> {
    use Atom::*;
    Some(match e {
        Expr::Unary(op, a) => match (op, a) {
            (UnOp::Neg, F64(x)) => Expr::Atom(F64(-x)),
            (UnOp::Neg, I64(x)) => Expr::Atom(I64(x.wrapping_neg())),
            (UnOp::Not, Bool(x)) => Expr::Atom(Bool(!x)),
            (UnOp::ToF64, I64(x)) => Expr::Atom(F64(*x as f64)),
            (UnOp::ToF64, F64(x)) => Expr::Atom(F64(*x)),
            (UnOp::ToI64, I64(x)) => Expr::Atom(I64(*x)),
            (UnOp::ToI64, F64(x)) => Expr::Atom(I64(*x as i64)),
            (UnOp::ToF64, Var(v)) if f.ty(*v) == crate::Type::F64 => Expr::Atom(*a),
            (UnOp::ToI64, Var(v)) if f.ty(*v) == crate::Type::I64 => Expr::Atom(*a),
            (UnOp::Sqrt, F64(x)) => Expr::Atom(F64(x.sqrt())),
            (UnOp::Abs, F64(x)) => Expr::Atom(F64(x.abs())),
            (UnOp::Floor, F64(x)) => Expr::Atom(F64(x.floor())),
            (UnOp::Ceil, F64(x)) => Expr::Atom(F64(x.ceil())),
            _ => return None,
        },
        Expr::Binary(op, a, b) => match (op, a, b) {
            (BinOp::Add, F64(x), F64(y)) => Expr::Atom(F64(x + y)),
            (BinOp::Sub, F64(x), F64(y)) => Expr::Atom(F64(x - y)),
            (BinOp::Mul, F64(x), F64(y)) => Expr::Atom(F64(x * y)),
            (BinOp::Div, F64(x), F64(y)) => Expr::Atom(F64(x / y)),
            (BinOp::Add, I64(x), I64(y)) => Expr::Atom(I64(x.wrapping_add(*y))),
            (BinOp::Sub, I64(x), I64(y)) => Expr::Atom(I64(x.wrapping_sub(*y))),
            (BinOp::Mul, I64(x), I64(y)) => Expr::Atom(I64(x.wrapping_mul(*y))),
            (BinOp::Div, I64(x), I64(y)) if *y != 0 => Expr::Atom(I64(x.wrapping_div(*y))),
            (BinOp::Rem, I64(x), I64(y)) if *y != 0 => Expr::Atom(I64(x.wrapping_rem(*y))),
            (BinOp::Min, I64(x), I64(y)) => Expr::Atom(I64(*x.min(y))),
            (BinOp::Max, I64(x), I64(y)) => Expr::Atom(I64(*x.max(y))),
            (BinOp::Lt, I64(x), I64(y)) => Expr::Atom(Bool(x < y)),
            (BinOp::Le, I64(x), I64(y)) => Expr::Atom(Bool(x <= y)),
            (BinOp::Gt, I64(x), I64(y)) => Expr::Atom(Bool(x > y)),
            (BinOp::Ge, I64(x), I64(y)) => Expr::Atom(Bool(x >= y)),
            (BinOp::Eq, I64(x), I64(y)) => Expr::Atom(Bool(x == y)),
            (BinOp::Ne, I64(x), I64(y)) => Expr::Atom(Bool(x != y)),
            (BinOp::Lt, F64(x), F64(y)) => Expr::Atom(Bool(x < y)),
            (BinOp::Gt, F64(x), F64(y)) => Expr::Atom(Bool(x > y)),
            (BinOp::Eq, F64(x), F64(y)) => Expr::Atom(Bool(x == y)),
            (BinOp::And, Bool(x), Bool(y)) => Expr::Atom(Bool(*x && *y)),
            (BinOp::Or, Bool(x), Bool(y)) => Expr::Atom(Bool(*x || *y)),
            // Exact identities (bit for bit, including signed zeros and NaN).
            (BinOp::Mul, x, F64(y)) | (BinOp::Mul, F64(y), x) if *y == 1.0 && !matches!(x, I64(_) | Bool(_)) => {
                Expr::Atom(*x)
            }
            (BinOp::Div, x, F64(y)) if *y == 1.0 => Expr::Atom(*x),
            // `x ** 2.0` is the correctly rounded square, `x ** 1.0` is `x`
            // (as LLVM folds `llvm.pow`; Cranelift would call libm's `pow`).
            (BinOp::Pow, x @ Var(_), F64(y)) if *y == 2.0 => Expr::Binary(BinOp::Mul, *x, *x),
            (BinOp::Pow, x @ Var(_), F64(y)) if *y == 1.0 => Expr::Atom(*x),
            (BinOp::Sub, x, F64(y)) if *y == 0.0 && y.is_sign_positive() => Expr::Atom(*x),
            (BinOp::Add, x, F64(y)) | (BinOp::Add, F64(y), x) if *y == 0.0 && y.is_sign_negative() => Expr::Atom(*x),
            (BinOp::Add, x, I64(0)) | (BinOp::Add, I64(0), x) | (BinOp::Sub, x, I64(0)) => Expr::Atom(*x),
            (BinOp::Mul, x, I64(1)) | (BinOp::Mul, I64(1), x) | (BinOp::Div, x, I64(1)) => Expr::Atom(*x),
            (BinOp::And, x, Bool(true)) | (BinOp::And, Bool(true), x) => Expr::Atom(*x),
            (BinOp::Or, x, Bool(false)) | (BinOp::Or, Bool(false), x) => Expr::Atom(*x),
            _ => return None,
        },
        _ => return None,
    })
}
