//! The IR verifier: scoping (every variable bound once, before its uses, and
//! used only inside the block that binds it), typing of every statement, and
//! the rules of the imperative forms.

use crate::program::{Atom, Block, Expr, Function, Program, StmtKind, VarId};
use crate::types::{Scalar, Type};

/// A verifier error: the function and a description.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("IR verification failed in `{func}`: {message}")]
pub struct VerifyError {
    /// Function name.
    pub func: String,
    /// What is wrong.
    pub message: String,
}

/// Verifies every function of a program.
/// A derivative stub not yet expanded (`crate::derivative`: a signature
/// with an empty body) is verified once expanded.
pub fn verify_program(p: &Program) -> Result<(), VerifyError> {
    for f in &p.funcs {
        let unexpanded = crate::DiffOp::parse_stub(&f.name).is_some() && f.body == crate::Block::default();
        if unexpanded {
            continue;
        }
        verify_function(f, Some(p))?;
    }
    Ok(())
}

/// Verifies one function; `program` is needed to type calls.
pub fn verify_function(f: &Function, program: Option<&Program>) -> Result<(), VerifyError> {
    let mut v = Verifier { f, program, bound: vec![false; f.vars.len()], scope: vec![false; f.vars.len()] };
    v.run().map_err(|message| VerifyError { func: f.name.clone(), message })
}

struct Verifier<'a> {
    f: &'a Function,
    program: Option<&'a Program>,
    bound: Vec<bool>,
    scope: Vec<bool>,
}

impl Verifier<'_> {
    fn run(&mut self) -> Result<(), String> {
        for p in &self.f.params {
            self.bind(*p)?;
        }
        self.block(&self.f.body, &[])?;
        let got: Vec<Type> = self.f.body.results.iter().map(|a| self.f.atom_ty(a)).collect();
        if got != self.f.result_types {
            return Err(format!("body yields {:?}, declared {:?}", got, self.f.result_types));
        }
        Ok(())
    }

    fn name(&self, v: VarId) -> String {
        self.f.vars.get(v.index()).map(|i| format!("{}%{}", i.name, v.0)).unwrap_or(format!("%{}", v.0))
    }

    fn bind(&mut self, v: VarId) -> Result<(), String> {
        if v.index() >= self.f.vars.len() {
            return Err(format!("variable %{} is not in the variable table", v.0));
        }
        if self.bound[v.index()] {
            return Err(format!("{} is bound twice", self.name(v)));
        }
        self.bound[v.index()] = true;
        self.scope[v.index()] = true;
        Ok(())
    }

    fn use_var(&self, v: VarId) -> Result<(), String> {
        if v.index() >= self.f.vars.len() || !self.scope[v.index()] {
            return Err(format!("{} is used out of scope", self.name(v)));
        }
        Ok(())
    }

    fn atom(&self, a: &Atom) -> Result<(), String> {
        match a {
            Atom::Var(v) => self.use_var(*v),
            _ => Ok(()),
        }
    }

    /// Checks a nested block whose own binders are `binders`; everything it
    /// binds goes out of scope afterwards.
    fn block(&mut self, b: &Block, binders: &[VarId]) -> Result<(), String> {
        let saved = self.scope.clone();
        for v in binders {
            self.bind(*v)?;
        }
        for s in &b.stmts {
            self.stmt(&s.kind)?;
        }
        for r in &b.results {
            self.atom(r)?;
        }
        self.scope = saved;
        Ok(())
    }

    fn stmt(&mut self, s: &StmtKind) -> Result<(), String> {
        match s {
            StmtKind::Let { vars, expr } => {
                let tys = self.expr(expr)?;
                if let Expr::Pop = expr {
                    if vars.len() != 1 {
                        return Err("pop binds one variable".into());
                    }
                } else {
                    let declared: Vec<Type> = vars.iter().map(|v| self.f.ty(*v)).collect();
                    if declared != tys {
                        return Err(format!(
                            "binding {:?} of types {:?} to a value of types {:?}",
                            vars.iter().map(|v| self.name(*v)).collect::<Vec<_>>(),
                            declared,
                            tys
                        ));
                    }
                }
                for v in vars {
                    self.bind(*v)?;
                }
            }
            StmtKind::Assign { var, value } => {
                self.use_var(*var)?;
                self.atom(value)?;
                if !self.f.var(*var).mutable {
                    return Err(format!("assignment to immutable {}", self.name(*var)));
                }
                if self.f.ty(*var) != self.f.atom_ty(value) {
                    return Err(format!("assignment of a different type to {}", self.name(*var)));
                }
            }
            StmtKind::AccZero { acc, indices } => {
                self.use_var(*acc)?;
                let t = self.f.ty(*acc);
                if t.elem != crate::Scalar::F64 || indices.is_empty() || indices.len() > t.rank as usize {
                    return Err(format!("clearing {} at {} indices", t, indices.len()));
                }
                for i in indices {
                    self.atom(i)?;
                    if self.f.atom_ty(i) != Type::I64 {
                        return Err("accumulator index is not i64".into());
                    }
                }
            }
            StmtKind::AccAdd { acc, indices, value } => {
                self.use_var(*acc)?;
                self.atom(value)?;
                for i in indices {
                    self.atom(i)?;
                    if self.f.atom_ty(i) != Type::I64 {
                        return Err("accumulator index is not i64".into());
                    }
                }
                let ta = self.f.ty(*acc);
                if ta.elem != Scalar::F64 || ta.rank == 0 || indices.len() > ta.rank as usize {
                    return Err(format!("accumulation into {}", self.name(*acc)));
                }
                let want = Type { elem: Scalar::F64, rank: ta.rank - indices.len() as u8 };
                if self.f.atom_ty(value) != want {
                    return Err(format!("accumulating {} into {}", self.f.atom_ty(value), want));
                }
            }
            StmtKind::CheckSize { a, b, .. } => {
                self.atom(a)?;
                self.atom(b)?;
                if self.f.atom_ty(a) != Type::I64 || self.f.atom_ty(b) != Type::I64 {
                    return Err("check_size of non-i64".into());
                }
            }
            StmtKind::Push(a) => self.atom(a)?,
            StmtKind::TapeRewind(m) => {
                self.atom(m)?;
                if self.f.atom_ty(m) != Type::I64 {
                    return Err("tape_rewind to a mark that is not i64".into());
                }
            }
            StmtKind::For { n, index, body, .. } => {
                self.atom(n)?;
                if self.f.atom_ty(n) != Type::I64 || self.f.ty(*index) != Type::I64 {
                    return Err("for count or index is not i64".into());
                }
                if !body.results.is_empty() {
                    return Err("effect loop body yields values".into());
                }
                self.block(body, &[*index])?;
            }
            StmtKind::If { cond, then_branch, else_branch } => {
                self.atom(cond)?;
                if self.f.atom_ty(cond) != Type::BOOL {
                    return Err("condition is not bool".into());
                }
                if !then_branch.results.is_empty() || !else_branch.results.is_empty() {
                    return Err("effect branch yields values".into());
                }
                self.block(then_branch, &[])?;
                self.block(else_branch, &[])?;
            }
        }
        Ok(())
    }

    fn expr(&mut self, e: &Expr) -> Result<Vec<Type>, String> {
        match e {
            Expr::Atom(a) | Expr::Unary(_, a) => self.atom(a)?,
            Expr::Binary(_, a, b) => {
                self.atom(a)?;
                self.atom(b)?;
            }
            Expr::Index { array, indices } => {
                self.use_var(*array)?;
                indices.iter().try_for_each(|i| self.atom(i))?;
            }
            Expr::Slice { array, lo, hi } => {
                self.use_var(*array)?;
                self.atom(lo)?;
                self.atom(hi)?;
            }
            Expr::Reshape { array, dims } => {
                self.use_var(*array)?;
                dims.iter().try_for_each(|d| self.atom(d))?;
            }
            Expr::Update { array, indices, value } => {
                self.use_var(*array)?;
                indices.iter().try_for_each(|i| self.atom(i))?;
                self.atom(value)?;
            }
            Expr::Dim { array, .. } | Expr::Reduce { array, .. } | Expr::ZerosLike(array) => self.use_var(*array)?,
            Expr::ArrayLit { elems, .. } | Expr::Zeros(elems) => elems.iter().try_for_each(|a| self.atom(a))?,
            Expr::Build { n, index, body } => {
                self.atom(n)?;
                if body.results.is_empty() {
                    return Err("build without results".into());
                }
                self.block(body, &[*index])?;
            }
            Expr::Loop { n, index, states, init, body } => {
                self.atom(n)?;
                init.iter().try_for_each(|a| self.atom(a))?;
                let mut binders = vec![*index];
                binders.extend(states);
                self.block(body, &binders)?;
            }
            Expr::While { states, init, cond, body } => {
                init.iter().try_for_each(|a| self.atom(a))?;
                let saved = self.scope.clone();
                for s in states {
                    self.bind(*s)?;
                }
                self.block(cond, &[])?;
                self.block(body, &[])?;
                self.scope = saved;
            }
            Expr::If { cond, then_branch, else_branch } => {
                self.atom(cond)?;
                self.block(then_branch, &[])?;
                self.block(else_branch, &[])?;
            }
            Expr::Call { func, args } => {
                args.iter().try_for_each(|a| self.atom(a))?;
                let p = self.program.ok_or("call outside a program")?;
                let callee = p.funcs.get(func.0 as usize).ok_or("call of a missing function")?;
                let got: Vec<Type> = args.iter().map(|a| self.f.atom_ty(a)).collect();
                if got != callee.param_types() {
                    return Err(format!("call of {} with argument types {:?}", callee.name, got));
                }
                return Ok(callee.result_types.clone());
            }
            Expr::Pop | Expr::TapeMark => {}
        }
        self.f.expr_types(e)
    }
}
