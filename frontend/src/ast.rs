//! The abstract syntax tree produced by the parser (`arrayad emit --stage ast`).
//!
//! Every node carries the [`Span`] of its source text. Names are not
//! resolved and types are not checked yet; `let a = x in let b = y in e` and
//! `let a = x let b = y in e` both become one [`ExprKind::Let`] with two
//! bindings.

pub use crate::span::Span;
pub use arrayad_ir::Scalar;

/// A whole source file: its definitions in source order.
#[derive(Clone, PartialEq, Debug)]
pub struct Program {
    /// The definitions.
    pub defs: Vec<Def>,
}

/// A name and where it is written.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Ident {
    /// The name (`_` for a wildcard binder of `for`/`loop` indices).
    pub name: String,
    /// Its span.
    pub span: Span,
}

/// `def NAME(PARAM: TYPE, ...) -> TYPE = EXPR`.
#[derive(Clone, PartialEq, Debug)]
pub struct Def {
    /// The definition's name.
    pub name: Ident,
    /// Its parameters.
    pub params: Vec<Param>,
    /// The declared result type.
    pub result: TypeExpr,
    /// The body.
    pub body: Expr,
    /// The span of the `def` keyword.
    pub keyword: Span,
}

/// `NAME: TYPE`.
#[derive(Clone, PartialEq, Debug)]
pub struct Param {
    /// The parameter's name.
    pub name: Ident,
    /// Its declared type.
    pub ty: TypeExpr,
}

/// A written type.
#[derive(Clone, PartialEq, Debug)]
pub struct TypeExpr {
    /// What type.
    pub kind: TypeKind,
    /// Its span.
    pub span: Span,
}

/// The forms of types.
#[derive(Clone, PartialEq, Debug)]
pub enum TypeKind {
    /// `f64`, `i64`, `bool`.
    Scalar(Scalar),
    /// `[d1]...[dk]E`, `k >= 1`.
    Array {
        /// Element type.
        elem: Scalar,
        /// Dimensions, outermost first.
        dims: Vec<Dim>,
    },
    /// `(T1, ..., Tn)`, `n >= 2`.
    Tuple(Vec<TypeExpr>),
}

/// One dimension of an array type.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Dim {
    /// A size variable or a literal.
    pub kind: DimKind,
    /// Its span.
    pub span: Span,
}

/// The forms of dimensions.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum DimKind {
    /// A size variable.
    Var(String),
    /// A literal size (non-negative, fits `i64`).
    Lit(i64),
    /// An expression of size variables and literals (`[n * m]`,
    /// `[d * (d - 1) / 2]`; LANGUAGE.md section 11).
    Expr(arrayad_ir::SizeExpr),
}

/// A pattern of `let` and `loop`.
#[derive(Clone, PartialEq, Debug)]
pub struct Pattern {
    /// What pattern.
    pub kind: PatternKind,
    /// Its span.
    pub span: Span,
}

/// The forms of patterns.
#[derive(Clone, PartialEq, Debug)]
pub enum PatternKind {
    /// Binds a name.
    Var(String),
    /// `_`: binds nothing.
    Wildcard,
    /// `(p1, ..., pn)`, `n >= 2`.
    Tuple(Vec<Pattern>),
}

/// An expression.
#[derive(Clone, PartialEq, Debug)]
pub struct Expr {
    /// What expression.
    pub kind: ExprKind,
    /// Its span (including surrounding parentheses, if any).
    pub span: Span,
}

/// One binding of a `let` chain: `let PAT (: TYPE)? = VALUE`.
#[derive(Clone, PartialEq, Debug)]
pub struct Binding {
    /// The pattern.
    pub pat: Pattern,
    /// An optional type annotation.
    pub ty: Option<TypeExpr>,
    /// The bound value.
    pub value: Expr,
}

/// `i < N` of a `for`.
#[derive(Clone, PartialEq, Debug)]
pub struct ForBinder {
    /// The index (`_` binds nothing).
    pub index: Ident,
    /// The number of iterations.
    pub bound: Expr,
}

/// Unary operators.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UnaryOp {
    /// `-`
    Neg,
    /// `!`
    Not,
}

/// Binary operators.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
}

impl BinaryOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Pow => "**",
        }
    }
}

/// The forms of expressions.
#[derive(Clone, PartialEq, Debug)]
pub enum ExprKind {
    /// An integer literal (an `i64`, or an `f64` where one is expected).
    Int(u64),
    /// A float literal.
    Float(f64),
    /// `true`, `false`.
    Bool(bool),
    /// A variable (or size variable).
    Var(String),
    /// `(E1, ..., En)`, `n >= 2`.
    Tuple(Vec<Expr>),
    /// `[E1, ..., En]`.
    Array(Vec<Expr>),
    /// `let B1 let B2 ... in BODY`.
    Let {
        /// One or more bindings, in order.
        bindings: Vec<Binding>,
        /// The body.
        body: Box<Expr>,
    },
    /// `if C then E1 else E2`.
    If {
        /// Condition.
        cond: Box<Expr>,
        /// Value when true.
        then_branch: Box<Expr>,
        /// Value when false.
        else_branch: Box<Expr>,
    },
    /// `for i < N, j < M => BODY`.
    For {
        /// One or more binders, outermost first.
        binders: Vec<ForBinder>,
        /// The element expression.
        body: Box<Expr>,
    },
    /// `loop PAT = INIT for i < N do BODY`.
    Loop {
        /// The state pattern.
        pat: Pattern,
        /// The initial state.
        init: Box<Expr>,
        /// The iteration index.
        index: Ident,
        /// The number of iterations.
        count: Box<Expr>,
        /// The next state.
        body: Box<Expr>,
    },
    /// `loop PAT = INIT while C do BODY`.
    While {
        /// The state pattern.
        pat: Pattern,
        /// The initial state.
        init: Box<Expr>,
        /// The condition, evaluated on the state before every iteration.
        cond: Box<Expr>,
        /// The next state.
        body: Box<Expr>,
    },
    /// `-E`, `!E`.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        operand: Box<Expr>,
    },
    /// `E1 OP E2`.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Span of the operator token.
        op_span: Span,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
    },
    /// `f(E, ...)`: a definition or a builtin.
    Call {
        /// The called name.
        func: Ident,
        /// Arguments.
        args: Vec<Expr>,
    },
    /// `A[i]`, `A[i, j, ...]`.
    Index {
        /// The array.
        array: Box<Expr>,
        /// One or more indices.
        indices: Vec<Expr>,
    },
    /// `A[lo:hi]` (either bound may be omitted: `0` and `length(A)`).
    Slice {
        /// The array.
        array: Box<Expr>,
        /// Lower bound.
        lo: Option<Box<Expr>>,
        /// Upper bound (exclusive).
        hi: Option<Box<Expr>>,
    },
    /// `A with [i, ...] = V` (LANGUAGE.md section 11).
    With {
        /// The array.
        array: Box<Expr>,
        /// One or more indices.
        indices: Vec<Expr>,
        /// The new element or row.
        value: Box<Expr>,
    },
    /// `T.0`, `T.1`, ...
    Proj {
        /// The tuple.
        tuple: Box<Expr>,
        /// The component.
        index: u32,
        /// Span of the component number.
        index_span: Span,
    },
}
