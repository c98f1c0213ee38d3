//! Text form of the IR (`arrayad emit --stage ir`). Variables print as
//! `name%id`, so that generated names stay unique and readable.

use crate::program::{Atom, Block, Expr, Function, Program, Stmt, StmtKind, VarId};
use std::fmt::Write;

/// Prints a whole program.
pub fn print_program(p: &Program) -> String {
    let mut out = String::new();
    for f in &p.funcs {
        out.push_str(&print_function(f, Some(p)));
        out.push('\n');
    }
    out
}

/// Prints one function. `program` resolves call targets to names (`g`,
/// and `g_jvp`, `g_vjp`, `g_vjp_jvp` for the derivatives of a definition
/// kept as a call).
pub fn print_function(f: &Function, program: Option<&Program>) -> String {
    let mut p = Printer { f, program, out: String::new() };
    let params: Vec<String> = f.params.iter().map(|v| format!("{}: {}", p.var(*v), f.ty(*v))).collect();
    let results: Vec<String> = f.result_types.iter().map(|t| t.to_string()).collect();
    let _ = writeln!(p.out, "def {}({}) -> ({}) {{", f.name, params.join(", "), results.join(", "));
    p.block(&f.body, 1);
    let _ = writeln!(p.out, "  return {}", p.atoms(&f.body.results));
    p.out.push_str("}\n");
    p.out
}

struct Printer<'a> {
    f: &'a Function,
    program: Option<&'a Program>,
    out: String,
}

impl Printer<'_> {
    fn var(&self, v: VarId) -> String {
        match self.f.vars.get(v.index()) {
            Some(info) => format!("{}%{}", info.name, v.0),
            None => format!("?%{}", v.0),
        }
    }
    fn atom(&self, a: &Atom) -> String {
        match a {
            Atom::Var(v) => self.var(*v),
            Atom::F64(x) => format!("{x:?}"),
            Atom::I64(x) => format!("{x}i"),
            Atom::Bool(x) => format!("{x}"),
        }
    }
    fn atoms(&self, a: &[Atom]) -> String {
        a.iter().map(|a| self.atom(a)).collect::<Vec<_>>().join(", ")
    }
    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }
    fn block(&mut self, b: &Block, depth: usize) {
        for s in &b.stmts {
            self.stmt(s, depth);
        }
    }
    fn sub_block(&mut self, b: &Block, depth: usize) {
        self.out.push_str("{\n");
        self.block(b, depth + 1);
        if !b.results.is_empty() {
            self.indent(depth + 1);
            let _ = writeln!(self.out, "yield {}", self.atoms(&b.results));
        }
        self.indent(depth);
        self.out.push('}');
    }
    fn stmt(&mut self, s: &Stmt, depth: usize) {
        self.indent(depth);
        match &s.kind {
            StmtKind::Let { vars, expr } => {
                let lhs: Vec<String> = vars
                    .iter()
                    .map(|v| {
                        let m = if self.f.var(*v).mutable { "mut " } else { "" };
                        format!("{m}{}: {}", self.var(*v), self.f.ty(*v))
                    })
                    .collect();
                let _ = write!(self.out, "let {} = ", lhs.join(", "));
                self.expr(expr, depth);
            }
            StmtKind::Assign { var, value } => {
                let _ = write!(self.out, "{} := {}", self.var(*var), self.atom(value));
            }
            StmtKind::AccAdd { acc, indices, value } => {
                let _ = write!(self.out, "{}[{}] += {}", self.var(*acc), self.atoms(indices), self.atom(value));
            }
            StmtKind::AccZero { acc, indices } => {
                let _ = write!(self.out, "{}[{}] := 0", self.var(*acc), self.atoms(indices));
            }
            StmtKind::CheckSize { a, b, what } => {
                let _ = write!(self.out, "check_size {} == {} // {}", self.atom(a), self.atom(b), what);
            }
            StmtKind::Push(a) => {
                let _ = write!(self.out, "push {}", self.atom(a));
            }
            StmtKind::TapeRewind(m) => {
                let _ = write!(self.out, "tape_rewind {}", self.atom(m));
            }
            StmtKind::For { n, index, reverse, body } => {
                let r = if *reverse { "rev " } else { "" };
                let _ = write!(self.out, "for {}{} < {} do ", r, self.var(*index), self.atom(n));
                self.sub_block(body, depth);
            }
            StmtKind::If { cond, then_branch, else_branch } => {
                let _ = write!(self.out, "if {} then ", self.atom(cond));
                self.sub_block(then_branch, depth);
                self.out.push_str(" else ");
                self.sub_block(else_branch, depth);
            }
        }
        if s.loc.line != 0 {
            let _ = write!(self.out, "  @{}:{}", s.loc.line, s.loc.col);
        }
        self.out.push('\n');
    }
    fn expr(&mut self, e: &Expr, depth: usize) {
        match e {
            Expr::Atom(a) => {
                let s = self.atom(a);
                self.out.push_str(&s);
            }
            Expr::Unary(op, a) => {
                let _ = write!(self.out, "{} {}", op.name(), self.atom(a));
            }
            Expr::Binary(op, a, b) => {
                let _ = write!(self.out, "{} {} {}", op.name(), self.atom(a), self.atom(b));
            }
            Expr::Index { array, indices } => {
                let _ = write!(self.out, "{}[{}]", self.var(*array), self.atoms(indices));
            }
            Expr::Slice { array, lo, hi } => {
                let _ = write!(self.out, "{}[{}:{}]", self.var(*array), self.atom(lo), self.atom(hi));
            }
            Expr::Reshape { array, dims } => {
                let _ = write!(self.out, "reshape {} [{}]", self.var(*array), self.atoms(dims));
            }
            Expr::Update { array, indices, value } => {
                let _ = write!(self.out, "{} with [{}] = {}", self.var(*array), self.atoms(indices), self.atom(value));
            }
            Expr::Dim { array, axis } => {
                let _ = write!(self.out, "dim {} {}", self.var(*array), axis);
            }
            Expr::Reduce { op, array } => {
                let _ = write!(self.out, "{} {}", op.name(), self.var(*array));
            }
            Expr::ArrayLit { elems, .. } => {
                let _ = write!(self.out, "[{}]", self.atoms(elems));
            }
            Expr::Build { n, index, body } => {
                let _ = write!(self.out, "build {} < {} => ", self.var(*index), self.atom(n));
                self.sub_block(body, depth);
            }
            Expr::Loop { n, index, states, init, body } => {
                let st: Vec<String> = states.iter().map(|s| self.var(*s)).collect();
                let _ = write!(
                    self.out,
                    "loop ({}) = ({}) for {} < {} do ",
                    st.join(", "),
                    self.atoms(init),
                    self.var(*index),
                    self.atom(n)
                );
                self.sub_block(body, depth);
            }
            Expr::While { states, init, cond, body } => {
                let st: Vec<String> = states.iter().map(|s| self.var(*s)).collect();
                let _ = write!(self.out, "loop ({}) = ({}) while ", st.join(", "), self.atoms(init));
                self.sub_block(cond, depth);
                self.out.push_str(" do ");
                self.sub_block(body, depth);
            }
            Expr::If { cond, then_branch, else_branch } => {
                let _ = write!(self.out, "if {} then ", self.atom(cond));
                self.sub_block(then_branch, depth);
                self.out.push_str(" else ");
                self.sub_block(else_branch, depth);
            }
            Expr::Call { func, args } => {
                // A kept definition's derivative (`KeptKind`) by the
                // definition's name and the kind's suffix.
                let name = self
                    .program
                    .and_then(|p| {
                        let (def, kind) = crate::KeptKind::of_callee(p.funcs.len(), *func)?;
                        let suffix = match kind {
                            crate::KeptKind::Primal => "",
                            crate::KeptKind::Jvp => "_jvp",
                            crate::KeptKind::Vjp => "_vjp",
                            crate::KeptKind::VjpJvp => "_vjp_jvp",
                        };
                        Some(format!("{}{suffix}", p.funcs.get(def.0 as usize)?.name))
                    })
                    .unwrap_or_else(|| format!("func{}", func.0));
                let _ = write!(self.out, "call {}({})", name, self.atoms(args));
            }
            Expr::ZerosLike(v) => {
                let _ = write!(self.out, "zeros_like {}", self.var(*v));
            }
            Expr::Zeros(dims) => {
                let _ = write!(self.out, "zeros [{}]", self.atoms(dims));
            }
            Expr::Pop => self.out.push_str("pop"),
            Expr::TapeMark => self.out.push_str("tape_mark"),
        }
    }
}
