//! Vector forward mode: one pass that carries several tangents (lanes)
//! beside one primal computation.
//!
//! The input is a linearisation ([`crate::linearize`]): a jvp whose
//! linear (tangent) variables are marked. Primal statements never read a
//! tangent, and control flow (loop counts, branch conditions, while
//! conditions) depends only on primal values, so the tangent statements
//! can be replicated once per lane with every linear variable renamed,
//! while the primal statements stay as they are:
//!
//! - a `let` that binds linear variables becomes `lanes` lets, one per
//!   lane, next to each other (the same operation on consecutive lanes, so
//!   that a vectoriser packs them);
//! - a comprehension, loop or branch with tangent results (or states)
//!   stays one construct whose linear results (states) are replicated in
//!   place; its body is transformed the same way, so the primal of every
//!   iteration is computed once for all lanes;
//! - assignments of mutable tangents and additions into tangent
//!   accumulators are replicated.
//!
//! Lane `l` of the result computes exactly the statements the jvp computes
//! for the tangents of lane `l`, so its values are bitwise those of a jvp
//! call with those tangents. This is the "vmap over tangents" of vector
//! forward mode (Griewank and Walther, *Evaluating Derivatives*, 2nd ed.,
//! section 3.1, the vector mode), done at compile time for a fixed number
//! of lanes.
//!
//! A kept call of a definition (`arrayad_ir::KeptKind`) has its tangents
//! from one linear call of the definition's jvp, which is replicated like
//! any tangent statement: one call per lane, each running the callee's
//! primal again (the definition has no vector jvp of its own).
//!
//! Reverse-mode code inside the primal (tape pushes and pops of a `grad`
//! or `vjp` operator) is not replicated: tangents pushed on the tape would
//! need their pops reordered lane by lane. Such a definition has no
//! vector forward mode ([`AdError::Unsupported`]); callers fall back to one
//! jvp per direction.

use crate::forward::JvpOutput;
use crate::AdError;
use arrayad_ir::builder::Builder;
use arrayad_ir::visit::Subst;
use arrayad_ir::{Atom, Block, Expr, Function, Signature, SrcType, Stmt, StmtKind, Type, VarId};
use std::collections::HashSet;

/// The number of lanes of the vector forward mode ([`jvp_lane_count`])
/// of a definition whose forward Jacobian has no column count known at
/// compile time (a size variable in an active param's type).
pub const JVP_LANES: usize = 8;

/// The most lanes [`jvp_lane_count`] gives one pass.
pub const MAX_JVP_LANES: usize = 32;

/// The number of lanes of the vector jvp of a definition with signature
/// `sig` differentiated by the IR params (flattened leaves) marked in
/// `active` ([`crate::active_leaves`]).
///
/// When every active leaf's extents are known at compile time (literals
/// or size expressions of literals, `p: [28]f64`), the forward Jacobian
/// has a known number of columns `c`, and the lanes are `c` split evenly
/// over the fewest passes of at most [`MAX_JVP_LANES`] lanes:
/// `ceil(c / ceil(c / 32))`, at least 2. A Jacobian of up to 32 columns is
/// then one pass, which computes the primal (exponentials, sines) once
/// for all columns instead of once per eight, and no lane is padding.
/// Otherwise (a size variable, no active f64 leaf, a negative extent or a
/// count beyond `u64`) [`JVP_LANES`].
///
/// `jvp_many` and the forward Jacobians (C ABI, Rust API) go through the
/// directions this many to a pass (the last padded with zero directions),
/// so a call with fewer directions than lanes pays the tangent arithmetic
/// of every lane.
pub fn jvp_lane_count(sig: &Signature, active: &[bool]) -> usize {
    let no_size = |_: &str| None;
    let mut columns: u64 = 0;
    let leaves = sig.params.iter().flat_map(|p| p.ty.leaf_types());
    for (leaf, _) in leaves.zip(active).filter(|(_, a)| **a) {
        let count = match leaf {
            SrcType::Array { dims, .. } => dims.iter().try_fold(1u64, |n, d| {
                let e = u64::try_from(d.eval(&no_size).ok()?).ok()?;
                n.checked_mul(e)
            }),
            _ => Some(1),
        };
        match count.and_then(|n| columns.checked_add(n)) {
            Some(c) => columns = c,
            None => return JVP_LANES,
        }
    }
    if columns == 0 {
        return JVP_LANES;
    }
    let max = MAX_JVP_LANES as u64;
    let passes = columns.div_ceil(max);
    (columns.div_ceil(passes) as usize).max(2)
}

/// The vector forward mode of a linearisation with `lanes` tangents per
/// pass (module docs), named `NAME_lanes` after the jvp `NAME`.
///
/// The result has params = primal params ++ for each lane `l` in
/// `0..lanes`, the jvp's tangent params (lane-major: lane 0's tangents of
/// every active param, then lane 1's, ...), and results = primal results
/// ++ for each lane the jvp's tangent results (lane-major). It is not
/// optimised.
///
/// Errors: [`AdError::Unsupported`] for a primal that runs reverse mode
/// inside (module docs); [`AdError::Internal`] for `lanes == 0` or a jvp
/// that breaks an invariant.
pub fn jvp_lanes(lin: &JvpOutput, lanes: usize) -> Result<Function, AdError> {
    if lanes == 0 {
        return Err(AdError::new("vector forward mode with no lane"));
    }
    let jvp = &lin.func;
    let mut f = jvp.clone();
    f.name = format!("{}_lanes", jvp.name);
    let mut t = Lanes { linear: &lin.linear, subst: vec![Subst::default(); lanes] };
    let (primal_params, tangent_params) = jvp.params.split_at(lin.n_primal_params);
    let mut params = primal_params.to_vec();
    let mut copies = Vec::new();
    for l in 0..lanes {
        for p in tangent_params {
            let dp = t.bind(&mut f, l, *p);
            params.push(dp);
            copies.push((dp, *p));
        }
    }
    let mut stmts = shape_checks(&mut f, &lin.primal_of, &copies);
    let body = t.block(&mut f, &jvp.body)?;
    stmts.extend(body.stmts);
    let (primal_results, tangent_results) = body.results.split_at(lin.n_primal_results);
    let (primal_types, tangent_types) = jvp.result_types.split_at(lin.n_primal_results);
    let mut results = primal_results.to_vec();
    let mut result_types = primal_types.to_vec();
    for l in 0..lanes {
        results.extend(tangent_results.iter().map(|r| t.subst[l].atom(r)));
        result_types.extend_from_slice(tangent_types);
    }
    f.params = params;
    f.result_types = result_types;
    f.body = Block { stmts, results };
    Ok(f)
}

/// Checks at entry that every tangent array param (of every lane) has the
/// extents of its primal param. Callers pass tangents of that shape (the
/// host API checks it, the C ABI derives both from the same sizes, the
/// `jvp` operator checks it, and a kept call's tangents are those of its
/// arguments or zeros like them), so these never fail; they
/// tell code generation that the lanes share their extents, so that their
/// bounds checks are one check (`codegen` `Known::canon`) instead of one
/// per lane, each of which LLVM's loop unswitching would copy loops for,
/// and that a tangent indexed by its primal's loop index is in bounds
/// (the jvp: [`crate::derive`]).
///
/// `tangents`: each lane's tangent param with the jvp's (lane 0's) param it
/// copies; `primal_of`: the jvp's tangent params' primal params
/// ([`JvpOutput::primal_of`]).
pub(crate) fn shape_checks(
    f: &mut Function,
    primal_of: &std::collections::HashMap<VarId, VarId>,
    tangents: &[(VarId, VarId)],
) -> Vec<Stmt> {
    let loc = f.loc;
    let mut b = Builder::new(f);
    b.loc = loc;
    for &(dp, p) in tangents {
        let Some(&x) = primal_of.get(&p) else { continue };
        let (name, xname) = (b.func.var(dp).name.clone(), b.func.var(x).name.clone());
        for axis in 0..b.func.var(dp).ty.rank {
            let a = b.let1(format!("dim_{name}"), Expr::Dim { array: dp, axis }, Type::I64);
            let d = b.let1(format!("dim_{xname}"), Expr::Dim { array: x, axis }, Type::I64);
            let what = format!("tangent `{name}` axis {axis} must equal its argument's");
            b.stmt(StmtKind::CheckSize { a: Atom::Var(a), b: Atom::Var(d), what });
        }
    }
    b.finish(Vec::new()).stmts
}

/// The replication in progress: the renaming of each lane (lane 0 keeps
/// the jvp's variables).
struct Lanes<'a> {
    linear: &'a HashSet<VarId>,
    subst: Vec<Subst>,
}

impl Lanes<'_> {
    fn lanes(&self) -> usize {
        self.subst.len()
    }

    fn is_linear(&self, v: VarId) -> bool {
        self.linear.contains(&v)
    }

    /// Lane `l`'s copy of the linear variable `v` bound here: `v` itself
    /// in lane 0, a fresh variable like it in the others.
    fn bind(&mut self, f: &mut Function, l: usize, v: VarId) -> VarId {
        if l == 0 {
            return v;
        }
        let mut info = f.var(v).clone();
        info.name = format!("{}_{l}", info.name);
        let nv = VarId(f.vars.len() as u32);
        f.vars.push(info);
        self.subst[l].map.insert(v, Atom::Var(nv));
        nv
    }

    /// The binders `vars` with each linear one replicated in place (its
    /// lanes next to each other), and for each position of `vars` whether
    /// it is linear.
    fn bind_all(&mut self, f: &mut Function, vars: &[VarId]) -> (Vec<VarId>, Vec<bool>) {
        let mut out = Vec::with_capacity(vars.len());
        let mut linear = Vec::with_capacity(vars.len());
        for v in vars {
            let lin = self.is_linear(*v);
            linear.push(lin);
            if lin {
                for l in 0..self.lanes() {
                    out.push(self.bind(f, l, *v));
                }
            } else {
                out.push(*v);
            }
        }
        (out, linear)
    }

    /// `atoms` (a block's results, a loop's initial states) with the atom
    /// at each linear position replicated in place, lane by lane.
    fn expand(&self, atoms: &[Atom], linear: &[bool]) -> Vec<Atom> {
        let mut out = Vec::with_capacity(atoms.len());
        for (a, &lin) in atoms.iter().zip(linear) {
            if lin {
                out.extend(self.subst.iter().map(|s| s.atom(a)));
            } else {
                out.push(*a);
            }
        }
        out
    }

    /// A nested block, transformed, its results expanded where `linear`.
    fn nested(&mut self, f: &mut Function, b: &Block, linear: &[bool]) -> Result<Block, AdError> {
        if b.results.len() != linear.len() {
            return Err(AdError::new("vector forward mode: a block's results do not match its binders"));
        }
        let inner = self.block(f, b)?;
        Ok(Block { stmts: inner.stmts, results: self.expand(&b.results, linear) })
    }

    /// The statements of `b` transformed; its results as they are (lane 0).
    fn block(&mut self, f: &mut Function, b: &Block) -> Result<Block, AdError> {
        let mut stmts = Vec::with_capacity(b.stmts.len());
        for s in &b.stmts {
            self.stmt(f, s, &mut stmts)?;
        }
        Ok(Block { stmts, results: b.results.clone() })
    }

    /// `s` copied once per lane, each lane's copy renamed (binders first).
    fn replicate(&mut self, f: &mut Function, s: &Stmt, binders: &[VarId], out: &mut Vec<Stmt>) {
        for l in 0..self.lanes() {
            for v in binders {
                self.bind(f, l, *v);
            }
            out.push(self.subst[l].stmt(s));
        }
    }

    fn stmt(&mut self, f: &mut Function, s: &Stmt, out: &mut Vec<Stmt>) -> Result<(), AdError> {
        let loc = s.loc;
        let kind = match &s.kind {
            StmtKind::Let { vars, expr } => match expr {
                Expr::Build { n, index, body } => {
                    let (vs, linear) = self.bind_all(f, vars);
                    let body = self.nested(f, body, &linear)?;
                    StmtKind::Let { vars: vs, expr: Expr::Build { n: *n, index: *index, body } }
                }
                Expr::Loop { n, index, states, init, body } => {
                    let (vs, linear) = self.bind_all(f, vars);
                    let (st, st_linear) = self.bind_all(f, states);
                    if linear != st_linear {
                        return Err(AdError::new("vector forward mode: a loop's states do not match its results"));
                    }
                    let init = self.expand(init, &linear);
                    let body = self.nested(f, body, &linear)?;
                    StmtKind::Let { vars: vs, expr: Expr::Loop { n: *n, index: *index, states: st, init, body } }
                }
                Expr::While { states, init, cond, body } => {
                    let (vs, linear) = self.bind_all(f, vars);
                    let (st, st_linear) = self.bind_all(f, states);
                    if linear != st_linear {
                        return Err(AdError::new("vector forward mode: a loop's states do not match its results"));
                    }
                    let init = self.expand(init, &linear);
                    let cond = self.nested(f, cond, &vec![false; cond.results.len()])?;
                    let body = self.nested(f, body, &linear)?;
                    StmtKind::Let { vars: vs, expr: Expr::While { states: st, init, cond, body } }
                }
                Expr::If { cond, then_branch, else_branch } => {
                    let (vs, linear) = self.bind_all(f, vars);
                    let t = self.nested(f, then_branch, &linear)?;
                    let e = self.nested(f, else_branch, &linear)?;
                    StmtKind::Let { vars: vs, expr: Expr::If { cond: *cond, then_branch: t, else_branch: e } }
                }
                Expr::Pop | Expr::TapeMark => return Err(reverse_code()),
                // A linear call of a kept definition's jvp (`forward.rs`)
                // also binds that definition's primal results, unused:
                // each lane's call binds copies of its own.
                Expr::Call { .. } if vars.iter().any(|v| self.is_linear(*v)) => {
                    self.replicate(f, s, vars, out);
                    return Ok(());
                }
                _ if vars.iter().any(|v| self.is_linear(*v)) => {
                    if !vars.iter().all(|v| self.is_linear(*v)) {
                        return Err(AdError::new("vector forward mode: a let binds primal and tangent values"));
                    }
                    self.replicate(f, s, vars, out);
                    return Ok(());
                }
                // A primal statement (it may read a tangent's shape: lane
                // 0's is every lane's).
                _ => s.kind.clone(),
            },
            StmtKind::Assign { var, .. } | StmtKind::AccAdd { acc: var, .. } | StmtKind::AccZero { acc: var, .. }
                if self.is_linear(*var) =>
            {
                self.replicate(f, s, &[], out);
                return Ok(());
            }
            StmtKind::Assign { .. }
            | StmtKind::AccAdd { .. }
            | StmtKind::AccZero { .. }
            | StmtKind::CheckSize { .. } => s.kind.clone(),
            StmtKind::Push(_) | StmtKind::TapeRewind(_) => return Err(reverse_code()),
            StmtKind::For { n, index, reverse, body } => {
                let body = self.nested(f, body, &[])?;
                StmtKind::For { n: *n, index: *index, reverse: *reverse, body }
            }
            StmtKind::If { cond, then_branch, else_branch } => {
                let t = self.nested(f, then_branch, &[])?;
                let e = self.nested(f, else_branch, &[])?;
                StmtKind::If { cond: *cond, then_branch: t, else_branch: e }
            }
        };
        out.push(Stmt { kind, loc });
        Ok(())
    }
}

fn reverse_code() -> AdError {
    AdError::Unsupported(
        "vector forward mode of a definition that runs reverse mode inside (a `grad` or `vjp`) is not \
         compiled; its Jacobian is computed one jvp per column"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::{jvp_lane_count, JVP_LANES};
    use arrayad_ir::{Scalar, Signature, SizeExpr, SizeOp, SrcDim, SrcParam, SrcType};

    fn array(dims: &[SrcDim]) -> SrcType {
        SrcType::Array { elem: Scalar::F64, dims: dims.to_vec() }
    }

    /// The lanes of `params` (all active) and of them with `active`.
    fn lanes(params: &[SrcType], active: Option<&[bool]>) -> usize {
        let sig = Signature {
            params: params.iter().enumerate().map(|(i, t)| SrcParam { name: format!("p{i}"), ty: t.clone() }).collect(),
            result: SrcType::Scalar(Scalar::F64),
        };
        let all = vec![true; params.len()];
        jvp_lane_count(&sig, active.unwrap_or(&all))
    }

    #[test]
    fn lanes_follow_the_columns_known_at_compile_time() {
        let lit = SrcDim::Lit;
        let f64 = SrcType::Scalar(Scalar::F64);
        // One pass of up to 32 columns, never fewer than two lanes.
        assert_eq!(lanes(&[array(&[lit(28)])], None), 28);
        assert_eq!(lanes(&[f64.clone(), f64.clone()], None), 2);
        assert_eq!(lanes(&[array(&[lit(1)])], None), 2);
        assert_eq!(lanes(&[array(&[lit(2), lit(3)]), f64.clone()], None), 7);
        assert_eq!(lanes(&[array(&[lit(32)])], None), 32);
        // More columns: split evenly over the fewest passes.
        assert_eq!(lanes(&[array(&[lit(40)]), array(&[lit(3)])], None), 22);
        assert_eq!(lanes(&[array(&[lit(100)])], None), 25);
        // A size expression of literals is known too.
        let six = SizeExpr::Bin(SizeOp::Mul, Box::new(SizeExpr::Lit(2)), Box::new(SizeExpr::Lit(3)));
        assert_eq!(lanes(&[array(&[SrcDim::Expr(six)])], None), 6);
        // Only the active params count.
        let n = SrcDim::Var("n".into());
        assert_eq!(lanes(&[array(std::slice::from_ref(&n)), array(&[lit(5)])], Some(&[false, true])), 5);
        // A size variable, no active param, or an overflowing count: the default.
        assert_eq!(lanes(&[array(std::slice::from_ref(&n)), array(&[lit(5)])], None), JVP_LANES);
        assert_eq!(lanes(&[array(&[lit(5)])], Some(&[false])), JVP_LANES);
        assert_eq!(lanes(&[array(&[lit(1 << 40), lit(1 << 40)])], None), JVP_LANES);
        assert_eq!(lanes(&[array(&[lit(-1)])], None), JVP_LANES);
    }
}
