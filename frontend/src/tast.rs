//! The typed AST: the checker's output and the lowering's input. Names are
//! resolved to [`LocalId`]s and definition indices, every node has its final
//! type, integer literals have their final type, builtins are resolved and
//! `for` with several binders is nested.

use crate::span::Span;
use crate::types::Ty;
use arrayad_ir::{BinOp, ReduceOp, Signature, UnOp};

/// A local variable of one definition (index into [`TDef::locals`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct LocalId(pub usize);

/// A local variable: parameter, size variable, `let`/`loop` binding or index.
#[derive(Clone, Debug)]
pub(crate) struct Local {
    pub name: String,
    pub ty: Ty,
    /// Bound by `let` to an integer literal (for a hint when it is used
    /// as an f64).
    pub int_literal: bool,
    /// The type with its sizes, for messages, where known.
    pub shown: Option<crate::check::Shown>,
}

/// A typed expression.
#[derive(Clone, Debug)]
pub(crate) struct TExpr {
    pub kind: TKind,
    pub ty: Ty,
    pub span: Span,
    /// True while the expression is built from integer literals only, so it
    /// may still become an `f64` where one is expected.
    pub flex: bool,
}

/// A pattern with its locals.
#[derive(Clone, Debug)]
pub(crate) enum TPat {
    Bind(LocalId),
    /// Binds nothing; the type says how many leaves to skip.
    Wild(Ty),
    Tuple(Vec<TPat>),
}

/// The size a dimension must equal.
#[derive(Clone, Debug)]
pub(crate) enum DimTarget {
    /// An `i64` local (a size variable).
    Local(LocalId),
    /// A literal size.
    Lit(i64),
    /// A size expression (LANGUAGE.md section 11) over `i64` locals.
    Expr(Box<TSize>),
}

/// A size expression with its variables resolved.
#[derive(Clone, Debug)]
pub(crate) enum TSize {
    Local(LocalId),
    Lit(i64),
    Bin(arrayad_ir::SizeOp, Box<TSize>, Box<TSize>),
}

/// A run-time check that axis `axis` of leaf `leaf` of a value equals `target`.
#[derive(Clone, Debug)]
pub(crate) struct ShapeCheck {
    pub leaf: usize,
    pub axis: u8,
    pub target: DimTarget,
    pub what: String,
    pub span: Span,
}

/// One binding of a `let` chain.
#[derive(Clone, Debug)]
pub(crate) struct TBinding {
    pub pat: TPat,
    pub value: TExpr,
    /// Checks from a type annotation with sizes.
    pub checks: Vec<ShapeCheck>,
}

/// The forms of typed expressions.
#[derive(Clone, Debug)]
pub(crate) enum TKind {
    /// A reported error (never lowered).
    Error,
    Int(i64),
    Float(f64),
    Bool(bool),
    Var(LocalId),
    Tuple(Vec<TExpr>),
    ArrayLit(Vec<TExpr>),
    Let {
        bindings: Vec<TBinding>,
        body: Box<TExpr>,
    },
    If {
        cond: Box<TExpr>,
        then_branch: Box<TExpr>,
        else_branch: Box<TExpr>,
    },
    /// `for index < n => body` (one binder).
    Build {
        index: Option<LocalId>,
        n: Box<TExpr>,
        body: Box<TExpr>,
    },
    Loop {
        pat: TPat,
        init: Box<TExpr>,
        index: Option<LocalId>,
        n: Box<TExpr>,
        body: Box<TExpr>,
    },
    /// `loop pat = init while cond do body`.
    While {
        pat: TPat,
        init: Box<TExpr>,
        cond: Box<TExpr>,
        body: Box<TExpr>,
    },
    /// A unary scalar operation, elementwise on an array operand.
    Unary {
        op: UnOp,
        arg: Box<TExpr>,
    },
    /// A binary scalar operation, elementwise when an operand is an array.
    /// `sym` names it in run-time messages.
    Binary {
        op: BinOp,
        sym: &'static str,
        lhs: Box<TExpr>,
        rhs: Box<TExpr>,
    },
    /// Short-circuit `&&`.
    And(Box<TExpr>, Box<TExpr>),
    /// Short-circuit `||`.
    Or(Box<TExpr>, Box<TExpr>),
    Call {
        func: usize,
        args: Vec<TExpr>,
    },
    Length(Box<TExpr>),
    /// `sum` of an array of any rank.
    Sum(Box<TExpr>),
    /// `maximum`, `minimum` of a rank-1 array.
    Reduce(ReduceOp, Box<TExpr>),
    Dot(Box<TExpr>, Box<TExpr>),
    Index {
        array: Box<TExpr>,
        indices: Vec<TExpr>,
    },
    Slice {
        array: Box<TExpr>,
        lo: Option<Box<TExpr>>,
        hi: Option<Box<TExpr>>,
    },
    Proj {
        tuple: Box<TExpr>,
        index: usize,
    },
    /// `array with [indices] = value`.
    Update {
        array: Box<TExpr>,
        indices: Vec<TExpr>,
        value: Box<TExpr>,
    },
    /// `reshape(array, (d1, ..., dk))`: `dims` are `i64` expressions.
    Reshape {
        array: Box<TExpr>,
        dims: Vec<TExpr>,
    },
    /// `flatten(array)`: the first two axes merged.
    Flatten(Box<TExpr>),
    /// `concat(a, b)` along axis 0.
    Concat(Box<TExpr>, Box<TExpr>),
    /// `argmax(a)` (`max`) or `argmin(a)` of a rank-1 f64 array.
    ArgExtreme {
        max: bool,
        array: Box<TExpr>,
    },
}

/// What happens at function entry for one axis of one parameter leaf.
#[derive(Clone, Debug)]
pub(crate) enum EntryStep {
    /// First occurrence of a size variable: bind it to the extent.
    Bind { leaf: usize, axis: u8, local: LocalId, span: Span },
    /// A later occurrence, or a literal size: check the extent.
    Check(ShapeCheck),
}

/// A checked definition, ready to lower.
#[derive(Clone, Debug)]
pub(crate) struct TDef {
    pub name: String,
    /// The parameters' locals, in order.
    pub params: Vec<LocalId>,
    pub entry: Vec<EntryStep>,
    pub body: TExpr,
    pub result: Ty,
    pub result_checks: Vec<ShapeCheck>,
    pub locals: Vec<Local>,
    pub signature: Signature,
    /// Span of the `def` keyword.
    pub keyword: Span,
}
