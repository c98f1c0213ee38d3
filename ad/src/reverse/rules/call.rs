//! The reverse-mode rules of linear calls: the tangents of a kept call of a
//! `vjp`/`grad` operator (`reverse/over_reverse.rs`, where the rule is
//! derived), and those of a definition kept as a call
//! (`arrayad_ir::KeptKind`), transposed to a call of its vjp.

use super::super::over_reverse::{is_f64, StubRule};
use super::super::*;

impl Rev<'_> {
    /// Backward statements of the linear call `vars = jvp_g(x, dx)` of the
    /// jvp of a kept definition `g` in every f64 param (`vars`: `g`'s
    /// results, unused, then one tangent per f64 result; `dx`: one tangent
    /// per f64 argument): `ct(dx) += vjp_g(x, ct(dy))`, one call of `g`'s
    /// vjp in every f64 param (`vjp`), which runs `g`'s forward pass and
    /// backward pass (Krawiec et al. section 7.5: the callee's derivative
    /// compiled once, joint reversal at the call).
    pub(in crate::reverse) fn kept_call_rule(
        &mut self,
        vars: &[VarId],
        args: &[Atom],
        vjp: arrayad_ir::FuncId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        let bad = || AdError::new("a linear call that does not match its definition's jvp");
        let f64_atom = |rev: &Self, a: &Atom| rev.out.atom_ty(a).elem == Scalar::F64;
        // `n + (f64 among the first n)` grows with `n`: one split fits.
        let split = |n_total: usize, is_f64: &dyn Fn(usize) -> bool| -> Option<usize> {
            let mut f64s = 0;
            for n in 0..=n_total {
                if n + f64s == n_total {
                    return Some(n);
                }
                if n + f64s > n_total || n == n_total {
                    return None;
                }
                f64s += usize::from(is_f64(n));
            }
            None
        };
        let n_args = split(args.len(), &|k| f64_atom(self, &args[k])).ok_or_else(bad)?;
        let n_results = split(vars.len(), &|k| self.out.ty(vars[k]).elem == Scalar::F64).ok_or_else(bad)?;
        let (primal_args, tangent_args) = args.split_at(n_args);
        let mut call_args = primal_args.to_vec();
        for &t in &vars[n_results..] {
            self.need_live(t, out);
            call_args.push(Atom::Var(self.ct[&t]));
        }
        let mut outs: Vec<VarId> = Vec::with_capacity(n_results + tangent_args.len());
        for v in &vars[..n_results] {
            let ty = self.out.ty(*v);
            outs.push(self.new_var("ct_call", ty));
        }
        let arg_types: Vec<_> =
            primal_args.iter().map(|a| self.out.atom_ty(a)).filter(|t| t.elem == Scalar::F64).collect();
        for ty in arg_types {
            outs.push(self.new_var("ct_call", ty));
        }
        self.push(out, StmtKind::Let { vars: outs.clone(), expr: Expr::Call { func: vjp, args: call_args } });
        for (t, ct) in tangent_args.iter().zip(&outs[n_results..]) {
            if self.is_lin(t).is_some() {
                self.accumulate(t, Atom::Var(*ct), out);
            }
        }
        Ok(())
    }

    /// Backward statements of the linear call `vars = jvp_op(x, u, dx, du)`
    /// of the operator `P(x, u) = J(x)^T u` (with `f(x)` first for a `vjp`):
    /// with `c` the cotangent of `P` and `c_y` that of `f(x)`,
    /// `ct(dx) += H_u c + J^T c_y` and `ct(du) += J c`, where `J c` and
    /// `H_u c` come from one call of the operator's jvp in the direction
    /// `c` of `x`, and `J^T c_y` from one call of the operator.
    pub(in crate::reverse) fn call_rule(
        &mut self,
        vars: &[VarId],
        args: &[Atom],
        rule: &StubRule,
        out: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        let bad = || AdError::new("a linear call that does not match its operator");
        let n_params = rule.params.len();
        let n_results = rule.results.len();
        let (n_x, n_y) = (rule.n_x, rule.n_y());
        if args.len() < n_params || vars.len() < n_results {
            return Err(bad());
        }
        let (primal_args, tangent_args) = args.split_at(n_params);
        // The tangent argument of each f64 param.
        let mut tangent_args = tangent_args.iter();
        let mut tangent_of_param = Vec::with_capacity(n_params);
        for ty in &rule.params {
            tangent_of_param.push(if is_f64(ty) { Some(*tangent_args.next().ok_or_else(bad)?) } else { None });
        }
        // The cotangent of each f64 result.
        let mut tangent_vars = vars[n_results..].iter();
        let mut ct_of_result = Vec::with_capacity(n_results);
        for ty in &rule.results {
            ct_of_result.push(match is_f64(ty) {
                true => {
                    let v = *tangent_vars.next().ok_or_else(bad)?;
                    self.need_live(v, out);
                    Some(Atom::Var(self.ct[&v]))
                }
                false => None,
            });
        }
        let active = |rev: &Self, k: usize| tangent_of_param[k].filter(|t| rev.is_lin(t).is_some());

        // `J c` and `H_u c`: the operator's jvp in the direction `c` of `x`.
        let mut call_args = primal_args.to_vec();
        for k in 0..n_x {
            if is_f64(&rule.params[k]) {
                call_args.push(ct_of_result[n_y + k].ok_or_else(bad)?);
            }
        }
        let outs: Vec<VarId> = rule.jvp_x_results.iter().map(|t| self.new_var("ct_call", *t)).collect();
        self.push(out, StmtKind::Let { vars: outs.clone(), expr: Expr::Call { func: rule.jvp_x, args: call_args } });
        let mut tangents = outs[n_results..].iter();
        for (k, ty) in rule.results.iter().enumerate() {
            if !is_f64(ty) {
                continue;
            }
            let t = Atom::Var(*tangents.next().ok_or_else(bad)?);
            // Result k < n_y is `f`'s result k, whose cotangent param is
            // `u_k` (param n_x + k); result n_y + k is the cotangent of `x_k`.
            let param = if k < n_y { n_x + k } else { k - n_y };
            if let Some(target) = active(self, param) {
                self.accumulate(&target, t, out);
            }
        }

        // `J^T c_y`: the operator itself with the cotangents `c_y`.
        if (0..n_y).any(|k| ct_of_result[k].is_some()) && (0..n_x).any(|k| active(self, k).is_some()) {
            let mut call_args = primal_args[..n_x].to_vec();
            for k in 0..n_y {
                call_args.push(ct_of_result[k].unwrap_or(primal_args[n_x + k]));
            }
            let outs: Vec<VarId> = rule.results.iter().map(|t| self.new_var("ct_call", *t)).collect();
            self.push(out, StmtKind::Let { vars: outs.clone(), expr: Expr::Call { func: rule.op, args: call_args } });
            for k in 0..n_x {
                if let Some(target) = active(self, k) {
                    self.accumulate(&target, Atom::Var(outs[n_y + k]), out);
                }
            }
        }
        Ok(())
    }
}
