//! A helper to emit A-normal-form code into nested blocks of a [`Function`].

use crate::program::{Atom, BinOp, Block, Expr, Function, Loc, Stmt, StmtKind, UnOp, VarId};
use crate::types::Type;

/// Emits statements into a stack of open blocks of one function.
///
/// ```
/// use arrayad_ir::{builder::Builder, program::*, types::Type};
/// let mut f = Function { name: "f".into(), params: vec![], body: Block::default(), vars: vec![],
///     result_types: vec![Type::F64],
///     signature: Signature { params: vec![], result: SrcType::Scalar(arrayad_ir::types::Scalar::F64) },
///     loc: Loc::default() };
/// let mut b = Builder::new(&mut f);
/// let x = b.let1("x", Expr::Atom(Atom::F64(2.0)), Type::F64);
/// let y = b.binary(BinOp::Mul, Atom::Var(x), Atom::Var(x));
/// let body = b.finish(vec![y]);
/// assert_eq!(body.stmts.len(), 2);
/// ```
pub struct Builder<'f> {
    /// The function whose variable table receives new variables.
    pub func: &'f mut Function,
    open: Vec<Vec<Stmt>>,
    /// The location given to statements emitted from now on.
    pub loc: Loc,
}

impl<'f> Builder<'f> {
    /// A builder with one open (outermost) block.
    pub fn new(func: &'f mut Function) -> Builder<'f> {
        Builder { func, open: vec![Vec::new()], loc: Loc::default() }
    }

    /// A new immutable variable.
    pub fn var(&mut self, name: impl Into<String>, ty: Type) -> VarId {
        self.func.new_var(name, ty)
    }

    /// Appends a statement to the innermost open block.
    pub fn stmt(&mut self, kind: StmtKind) {
        let loc = self.loc;
        self.open.last_mut().expect("builder has an open block").push(Stmt { kind, loc });
    }

    /// Binds `expr` (one value of type `ty`) to a fresh variable.
    pub fn let1(&mut self, name: impl Into<String>, expr: Expr, ty: Type) -> VarId {
        let v = self.var(name, ty);
        self.stmt(StmtKind::Let { vars: vec![v], expr });
        v
    }

    /// Binds `expr` to fresh variables of the types it yields (per
    /// [`Function::expr_types`]); panics only on IR the caller built wrong.
    pub fn let_infer(&mut self, name: &str, expr: Expr) -> Vec<VarId> {
        let tys = self.func.expr_types(&expr).unwrap_or_else(|e| panic!("ill-typed IR built: {e}"));
        let vars: Vec<VarId> = tys.into_iter().map(|t| self.var(name, t)).collect();
        self.stmt(StmtKind::Let { vars: vars.clone(), expr });
        vars
    }

    /// Binds a single-valued `expr` whose type is inferred.
    pub fn let_one(&mut self, name: &str, expr: Expr) -> Atom {
        Atom::Var(self.let_infer(name, expr)[0])
    }

    /// `a op b`, folding nothing.
    pub fn binary(&mut self, op: BinOp, a: Atom, b: Atom) -> Atom {
        self.let_one("t", Expr::Binary(op, a, b))
    }

    /// `op a`.
    pub fn unary(&mut self, op: UnOp, a: Atom) -> Atom {
        self.let_one("t", Expr::Unary(op, a))
    }

    /// Opens a nested block; statements go there until [`Builder::end_block`].
    pub fn begin_block(&mut self) {
        self.open.push(Vec::new());
    }

    /// Closes the innermost nested block, yielding `results`.
    pub fn end_block(&mut self, results: Vec<Atom>) -> Block {
        let stmts = self.open.pop().expect("end_block without begin_block");
        Block { stmts, results }
    }

    /// Number of open blocks (1 when only the outermost is open).
    pub fn depth(&self) -> usize {
        self.open.len()
    }

    /// Closes the outermost block and returns it.
    pub fn finish(mut self, results: Vec<Atom>) -> Block {
        debug_assert_eq!(self.open.len(), 1, "unclosed nested block");
        let stmts = self.open.pop().unwrap_or_default();
        Block { stmts, results }
    }
}
