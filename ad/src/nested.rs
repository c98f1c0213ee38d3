//! Derivatives inside programs (LANGUAGE.md section 10): the expansion of
//! the derivative stubs the frontend leaves for `jvp`, `vjp` and `grad`
//! (`arrayad_ir::derivative`).
//!
//! Each stub becomes the forward or reverse derivative of its definition,
//! with every f64 leaf of every parameter active, computed by the same
//! pipeline as boundary derivatives ([`passes::prepare`], forward mode,
//! unzipping). Stubs are expanded callees first (an iterative depth-first
//! order of the call graph, a stub depending on its definition), so a
//! definition that uses a derivative operator is differentiated with that
//! operator's code inlined into it: a jvp of a definition containing a
//! `grad` is forward over reverse (`forward.rs`, "Forward over reverse"),
//! a jvp of a jvp is forward over forward. Each transformation sees the
//! inner derivative as ordinary code whose own tangent variables are
//! primal values to it, so perturbations of different levels never mix.
//! Reverse mode of code that contains reverse-mode code (reverse over
//! reverse) keeps the inner operators' calls and gives them their own rule
//! (`reverse/over_reverse.rs`); other reverse-mode code inside (a `jvp` of
//! a definition using `grad`) goes by forward columns
//! (`reverse/by_columns.rs`).

use crate::{passes, reverse, AdError};
use arrayad_ir::builder::Builder;
use arrayad_ir::{Atom, Block, DiffOp, Expr, FuncId, Function, Program, Scalar, StmtKind, Type, VarId};

/// The program with every derivative stub expanded (stubs already
/// expanded are kept). Errors: only internal ones ([`AdError::Internal`]).
pub fn expand_derivatives(mut p: Program) -> Result<Program, AdError> {
    let is_stub = |f: &Function| DiffOp::parse_stub(&f.name).is_some() && f.body == Block::default();
    if !p.funcs.iter().any(is_stub) {
        return Ok(p);
    }
    for id in callees_first(&p) {
        let f = &p.funcs[id];
        if !is_stub(f) {
            continue;
        }
        let Some((op, name)) = DiffOp::parse_stub(&f.name) else { continue };
        let Some(of) = p.find(name) else {
            return Err(AdError::new(format!("derivative stub `{}` of an unknown definition", f.name)));
        };
        let expanded = expand(&p, op, of, f)?;
        p.funcs[id] = expanded;
    }
    Ok(p)
}

/// The functions of `program` in an order where every function comes after
/// the functions it calls and a stub after its definition (iterative
/// depth-first post-order; the frontend has rejected cycles).
fn callees_first(program: &Program) -> Vec<usize> {
    let n = program.funcs.len();
    let edges: Vec<Vec<usize>> = program
        .funcs
        .iter()
        .map(|f| {
            let mut out = Vec::new();
            if let Some((_, name)) = DiffOp::parse_stub(&f.name) {
                if let Some(id) = program.find(name) {
                    out.push(id.0 as usize);
                }
            }
            arrayad_ir::visit::for_each_block(&f.body, &mut |b| {
                for s in &b.stmts {
                    if let StmtKind::Let { expr: Expr::Call { func, .. }, .. } = &s.kind {
                        out.push(func.0 as usize);
                    }
                }
            });
            out
        })
        .collect();
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for root in 0..n {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (u, k) = *top;
            match edges[u].get(k) {
                Some(&v) => {
                    top.1 += 1;
                    if v < n && !seen[v] {
                        seen[v] = true;
                        stack.push((v, 0));
                    }
                }
                None => {
                    order.push(u);
                    stack.pop();
                }
            }
        }
    }
    order
}

/// A zero of type `ty` shaped like `like` (a cotangent of an i64 or bool
/// leaf, or of an f64 leaf that does not flow anywhere).
fn zero_like(b: &mut Builder, like: Atom, ty: Type) -> Atom {
    if ty.rank == 0 {
        return match ty.elem {
            Scalar::F64 => Atom::F64(0.0),
            Scalar::I64 => Atom::I64(0),
            Scalar::Bool => Atom::Bool(false),
        };
    }
    let Atom::Var(v) = like else { return like };
    if ty.elem == Scalar::F64 {
        return Atom::Var(b.let1("zero", Expr::ZerosLike(v), ty));
    }
    // Nested builds over the extents of `like`.
    let dims: Vec<Atom> =
        (0..ty.rank).map(|axis| Atom::Var(b.let1("n", Expr::Dim { array: v, axis }, Type::I64))).collect();
    fn nest(b: &mut Builder, dims: &[Atom], elem: Scalar) -> Atom {
        let Some((n, rest)) = dims.split_first() else {
            return match elem {
                Scalar::I64 => Atom::I64(0),
                Scalar::Bool => Atom::Bool(false),
                Scalar::F64 => Atom::F64(0.0),
            };
        };
        let i = b.var("i", Type::I64);
        b.begin_block();
        let inner = nest(b, rest, elem);
        let body = b.end_block(vec![inner]);
        let ty = Type::array(elem, (rest.len() + 1) as u8);
        Atom::Var(b.let1("zero", Expr::Build { n: *n, index: i, body }, ty))
    }
    nest(b, &dims, ty.elem)
}

/// The extents of the array leaf `t` must equal those of `x`.
fn check_like(b: &mut Builder, t: VarId, x: VarId, rank: u8, what: &str) {
    for axis in 0..rank {
        let dt = Atom::Var(b.let1("n", Expr::Dim { array: t, axis }, Type::I64));
        let dx = Atom::Var(b.let1("n", Expr::Dim { array: x, axis }, Type::I64));
        b.stmt(StmtKind::CheckSize { a: dt, b: dx, what: format!("{what} axis {axis} must equal the argument's") });
    }
}

/// The expanded stub `stub` of `op` applied to definition `of`.
fn expand(p: &Program, op: DiffOp, of: FuncId, stub: &Function) -> Result<Function, AdError> {
    let def = p.func(of);
    let active = crate::active_leaves(&def.signature, None);
    crate::check_size(p, of)?;
    let prim = passes::prepare(p, of);
    let n_params = prim.params.len();
    let n_results = prim.result_types.len();
    let mut g = match op {
        DiffOp::Jvp => crate::linearize(&prim, &active)?.func,
        DiffOp::Vjp | DiffOp::Grad => {
            let j = crate::linearize(&prim, &active)?;
            if !reverse::has_reverse_code(&prim) {
                reverse::vjp_function(&j, &stub.name, false)?.0
            } else {
                let names = (stub.name.as_str(), "");
                match reverse::over_reverse::vjp_and_rows(p, of, &active, false, (true, false), names)? {
                    Some((Some(v), _, _)) => v,
                    _ => reverse::by_columns::vjp_function(&j, &prim, &stub.name),
                }
            }
        }
    };
    let body = std::mem::take(&mut g.body);
    let extra_params: Vec<VarId> = g.params[n_params..].to_vec();
    let prim_params: Vec<VarId> = g.params[..n_params].to_vec();
    let results = body.results.clone();
    let leaf_types: Vec<Type> = prim_params.iter().map(|v| g.ty(*v)).collect();
    let mut b = Builder::new(&mut g);
    b.loc = stub.loc;
    let mut params = prim_params.clone();
    let mut out = Vec::new();
    match op {
        DiffOp::Jvp => {
            // One tangent per param leaf; those of inactive leaves unused.
            let mut tangents = extra_params.into_iter();
            for (k, ty) in leaf_types.iter().enumerate() {
                if active[k] {
                    let t = tangents.next().ok_or_else(|| AdError::new("jvp: missing tangent parameter"))?;
                    if ty.is_array() {
                        let name = b.func.var(prim_params[k]).name.clone();
                        check_like(&mut b, t, prim_params[k], ty.rank, &format!("the tangent of `{name}`"));
                    }
                    params.push(t);
                } else {
                    params.push(b.var("unused", *ty));
                }
            }
            for s in body.stmts {
                b.loc = s.loc;
                b.stmt(s.kind);
            }
            b.loc = stub.loc;
            out.extend_from_slice(&results[..n_results]);
            let mut tans = results[n_results..].iter();
            for r in &results[..n_results] {
                let ty = b.func.atom_ty(r);
                let t = if ty.elem == Scalar::F64 { tans.next().copied() } else { None };
                out.push(match t {
                    Some(t) => t,
                    None => zero_like(&mut b, *r, ty),
                });
            }
        }
        DiffOp::Vjp | DiffOp::Grad => {
            // One cotangent param per f64 result leaf.
            let mut cts = extra_params.into_iter();
            let mut stmts = Vec::new();
            for ty in &def.result_types {
                if ty.elem == Scalar::F64 {
                    let c = cts.next().ok_or_else(|| AdError::new("vjp: missing cotangent parameter"))?;
                    if op == DiffOp::Grad {
                        stmts.push(StmtKind::Let { vars: vec![c], expr: Expr::Atom(Atom::F64(1.0)) });
                    } else {
                        params.push(c);
                    }
                } else if op == DiffOp::Vjp {
                    params.push(b.var("unused", *ty));
                }
            }
            for s in stmts {
                b.stmt(s);
            }
            for s in body.stmts {
                b.loc = s.loc;
                b.stmt(s.kind);
            }
            b.loc = stub.loc;
            if op == DiffOp::Vjp {
                out.extend_from_slice(&results[..n_results]);
            }
            let mut grads = results[n_results..].iter();
            for (k, ty) in leaf_types.iter().enumerate() {
                let c = if active[k] { grads.next().copied() } else { None };
                out.push(match c {
                    Some(c) => c,
                    None => zero_like(&mut b, Atom::Var(prim_params[k]), *ty),
                });
            }
        }
    }
    let body = b.finish(out);
    g.body = body;
    g.params = params;
    g.name = stub.name.clone();
    g.result_types = stub.result_types.clone();
    g.signature = stub.signature.clone();
    g.loc = stub.loc;
    passes::optimize(&mut g);
    if g.params.len() != stub.params.len() || g.body.results.len() != stub.result_types.len() {
        return Err(AdError::new(format!("derivative `{}` does not match its signature", stub.name)));
    }
    Ok(g)
}
