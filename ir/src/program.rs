//! The IR: first-order, typed, A-normal form with structured control.
//!
//! Every intermediate value is bound by a [`StmtKind::Let`] to fresh variables;
//! operands are [`Atom`]s (a variable or a literal). Control flow is
//! structured: [`Expr::Build`] (array comprehension), [`Expr::Loop`]
//! (sequential loop with state), [`Expr::If`]. Tuples are flattened: a
//! statement may bind several variables.
//!
//! Besides the pure forms, the IR has the few imperative forms that the
//! backward pass of reverse mode needs (DESIGN.md, "Reverse mode"): mutable
//! variables ([`StmtKind::Assign`]), zero-initialised accumulator buffers
//! ([`Expr::ZerosLike`], [`StmtKind::AccAdd`], [`StmtKind::AccZero`]), the residual tape
//! ([`StmtKind::Push`], [`Expr::Pop`], and [`Expr::TapeMark`] /
//! [`StmtKind::TapeRewind`] to replay it) and effect-only loops and branches
//! ([`StmtKind::For`], [`StmtKind::If`]).
//!
//! Run-time checks are implicit in the operations that can fail (index and
//! slice bounds, integer division by zero, negative trip counts, irregular
//! arrays, empty `maximum`/`minimum`); every backend performs them and
//! reports the statement's [`Loc`]. Size equalities are explicit
//! ([`StmtKind::CheckSize`]).

use crate::types::{Scalar, Type};
use std::fmt;

/// A variable, local to one [`Function`] (index into [`Function::vars`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct VarId(pub u32);

impl VarId {
    /// The index into [`Function::vars`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A function of a [`Program`] (index into [`Program::funcs`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FuncId(pub u32);

/// A source location: 1-based line and column in [`Program::file`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Loc {
    /// 1-based line; 0 when unknown (generated code).
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
}

impl Loc {
    /// A location.
    pub fn new(line: u32, col: u32) -> Loc {
        Loc { line, col }
    }
}

/// An operand: a variable or a literal.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Atom {
    /// A variable.
    Var(VarId),
    /// An `f64` literal.
    F64(f64),
    /// An `i64` literal.
    I64(i64),
    /// A `bool` literal.
    Bool(bool),
}

impl Atom {
    /// The variable, if this atom is one.
    pub fn as_var(&self) -> Option<VarId> {
        match self {
            Atom::Var(v) => Some(*v),
            _ => None,
        }
    }
}

/// Unary scalar operations. Math functions take and give `f64`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum UnOp {
    /// Negation, on `f64` or `i64` (wrapping).
    Neg,
    /// Boolean not.
    Not,
    Exp,
    Log,
    Sqrt,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Log1p,
    Expm1,
    Erf,
    Lgamma,
    /// Absolute value of an `f64`.
    Abs,
    Floor,
    Ceil,
    /// `i64 -> f64` conversion.
    ToF64,
    /// `f64 -> i64`: truncation toward zero, saturating, NaN -> 0.
    ToI64,
    /// Sign of an `f64`: 1.0 if `x > 0`, -1.0 if `x < 0`, otherwise `x`
    /// itself (so ±0 and NaN map to themselves). Used by derivative rules
    /// (`abs' = sign`), not a source builtin.
    Sign,
    /// The digamma function ψ(x) = d/dx lgamma(x) of an `f64` (runtime
    /// `arrayad_digamma`). Used by the derivative of `lgamma`, not a source
    /// builtin.
    Digamma,
}

impl UnOp {
    /// The operation's name as printed.
    pub fn name(self) -> &'static str {
        use UnOp::*;
        match self {
            Neg => "neg",
            Not => "not",
            Exp => "exp",
            Log => "log",
            Sqrt => "sqrt",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Tanh => "tanh",
            Sinh => "sinh",
            Cosh => "cosh",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Log1p => "log1p",
            Expm1 => "expm1",
            Erf => "erf",
            Lgamma => "lgamma",
            Abs => "abs",
            Floor => "floor",
            Ceil => "ceil",
            ToF64 => "f64",
            ToI64 => "i64",
            Sign => "sign",
            Digamma => "digamma",
        }
    }

    /// All unary operations (for tests that cover every builtin).
    pub const ALL: [UnOp; 25] = [
        UnOp::Neg,
        UnOp::Not,
        UnOp::Exp,
        UnOp::Log,
        UnOp::Sqrt,
        UnOp::Sin,
        UnOp::Cos,
        UnOp::Tan,
        UnOp::Tanh,
        UnOp::Sinh,
        UnOp::Cosh,
        UnOp::Asin,
        UnOp::Acos,
        UnOp::Atan,
        UnOp::Log1p,
        UnOp::Expm1,
        UnOp::Erf,
        UnOp::Lgamma,
        UnOp::Abs,
        UnOp::Floor,
        UnOp::Ceil,
        UnOp::ToF64,
        UnOp::ToI64,
        UnOp::Sign,
        UnOp::Digamma,
    ];

    /// True for the `f64 -> f64` math functions (everything except `Neg`,
    /// `Not`, `ToF64`, `ToI64`).
    pub fn is_math(self) -> bool {
        !matches!(self, UnOp::Neg | UnOp::Not | UnOp::ToF64 | UnOp::ToI64)
    }
}

/// Binary scalar operations. Both operands have the same scalar type except
/// where noted; comparisons give `bool`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BinOp {
    /// `f64` or `i64` (wrapping).
    Add,
    Sub,
    Mul,
    /// `f64`, or `i64` truncating (division by zero is a run-time error).
    Div,
    /// `i64` only, sign of the dividend (division by zero is a run-time error).
    Rem,
    /// `f64` only.
    Pow,
    /// `atan2(y, x)`, `f64` only.
    Atan2,
    /// `polygamma(n, x)` = ψ^(n)(x), `f64` only (`n` a whole number): the
    /// derivatives of digamma. Used by derivative rules, not a source
    /// builtin.
    Polygamma,
    /// `f64` or `i64`.
    Min,
    Max,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Boolean, both operands evaluated.
    And,
    Or,
}

impl BinOp {
    /// The operation's name as printed.
    pub fn name(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            Rem => "rem",
            Pow => "pow",
            Atan2 => "atan2",
            Polygamma => "polygamma",
            Min => "min",
            Max => "max",
            Eq => "eq",
            Ne => "ne",
            Lt => "lt",
            Le => "le",
            Gt => "gt",
            Ge => "ge",
            And => "and",
            Or => "or",
        }
    }

    /// True for the comparisons (result `bool`).
    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }
}

/// Reductions over axis 0 of a rank-1 array.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ReduceOp {
    /// Sum (`f64` or `i64`); 0 for an empty array.
    Sum,
    /// Largest element (`f64`); run-time error on an empty array.
    Max,
    /// Smallest element (`f64`); run-time error on an empty array.
    Min,
}

impl ReduceOp {
    /// The reduction's name as printed.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "maximum",
            ReduceOp::Min => "minimum",
        }
    }
}

/// The kinds of run-time error (LANGUAGE.md section 5). The discriminant is
/// the error code returned through the C ABI.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(i32)]
pub enum ErrorKind {
    /// An index outside `0..n`.
    IndexOutOfBounds = 1,
    /// A slice `lo:hi` outside `0 <= lo <= hi <= n`.
    SliceOutOfRange = 2,
    /// Sizes that must agree do not (arguments, elementwise operands, result).
    SizeMismatch = 3,
    /// Rows of an array literal or `for` body of different shapes.
    IrregularArray = 4,
    /// A negative trip count or size.
    NegativeSize = 5,
    /// Integer division or remainder by zero.
    DivisionByZero = 6,
    /// `maximum`/`minimum` of an empty array.
    EmptyReduction = 7,
    /// An allocation failed or a size overflowed.
    OutOfMemory = 8,
    /// A caller passed a bad argument (wrong count, type, null pointer).
    InvalidArgument = 9,
}

impl ErrorKind {
    /// All kinds, in code order.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::IndexOutOfBounds,
        ErrorKind::SliceOutOfRange,
        ErrorKind::SizeMismatch,
        ErrorKind::IrregularArray,
        ErrorKind::NegativeSize,
        ErrorKind::DivisionByZero,
        ErrorKind::EmptyReduction,
        ErrorKind::OutOfMemory,
        ErrorKind::InvalidArgument,
    ];

    /// The C ABI error code (nonzero).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The kind of a C ABI error code.
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        ErrorKind::ALL.iter().copied().find(|k| k.code() == code)
    }

    /// A short human-readable name, used at the start of messages.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::IndexOutOfBounds => "index out of bounds",
            ErrorKind::SliceOutOfRange => "slice out of range",
            ErrorKind::SizeMismatch => "size mismatch",
            ErrorKind::IrregularArray => "irregular array",
            ErrorKind::NegativeSize => "negative size",
            ErrorKind::DivisionByZero => "division by zero",
            ErrorKind::EmptyReduction => "empty array",
            ErrorKind::OutOfMemory => "out of memory",
            ErrorKind::InvalidArgument => "invalid argument",
        }
    }

    /// The error's code as printed (`E1001` for code 1): run-time errors
    /// are numbered `E10xx` after their C ABI code, beside the compile
    /// errors' `E0xxx`; `arrayad explain` describes them.
    pub fn error_code(self) -> &'static str {
        match self {
            ErrorKind::IndexOutOfBounds => "E1001",
            ErrorKind::SliceOutOfRange => "E1002",
            ErrorKind::SizeMismatch => "E1003",
            ErrorKind::IrregularArray => "E1004",
            ErrorKind::NegativeSize => "E1005",
            ErrorKind::DivisionByZero => "E1006",
            ErrorKind::EmptyReduction => "E1007",
            ErrorKind::OutOfMemory => "E1008",
            ErrorKind::InvalidArgument => "E1009",
        }
    }

    /// The long explanation of [`ErrorKind::error_code`], in Markdown.
    pub fn explanation(self) -> &'static str {
        match self {
            ErrorKind::IndexOutOfBounds => include_str!("../error_codes/E1001.md"),
            ErrorKind::SliceOutOfRange => include_str!("../error_codes/E1002.md"),
            ErrorKind::SizeMismatch => include_str!("../error_codes/E1003.md"),
            ErrorKind::IrregularArray => include_str!("../error_codes/E1004.md"),
            ErrorKind::NegativeSize => include_str!("../error_codes/E1005.md"),
            ErrorKind::DivisionByZero => include_str!("../error_codes/E1006.md"),
            ErrorKind::EmptyReduction => include_str!("../error_codes/E1007.md"),
            ErrorKind::OutOfMemory => include_str!("../error_codes/E1008.md"),
            ErrorKind::InvalidArgument => include_str!("../error_codes/E1009.md"),
        }
    }

    /// The identifier used for the C header constant (`ARRAYAD_ERR_...`).
    pub fn c_name(self) -> &'static str {
        match self {
            ErrorKind::IndexOutOfBounds => "INDEX_OUT_OF_BOUNDS",
            ErrorKind::SliceOutOfRange => "SLICE_OUT_OF_RANGE",
            ErrorKind::SizeMismatch => "SIZE_MISMATCH",
            ErrorKind::IrregularArray => "IRREGULAR_ARRAY",
            ErrorKind::NegativeSize => "NEGATIVE_SIZE",
            ErrorKind::DivisionByZero => "DIVISION_BY_ZERO",
            ErrorKind::EmptyReduction => "EMPTY_ARRAY",
            ErrorKind::OutOfMemory => "OUT_OF_MEMORY",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
        }
    }
}

/// A right-hand side of a [`StmtKind::Let`]. The number and types of the
/// values it yields are given by [`Function::expr_types`].
#[derive(Clone, PartialEq, Debug)]
pub enum Expr {
    /// The atom's value (a copy of a scalar, or the same array).
    Atom(Atom),
    /// A unary scalar operation.
    Unary(UnOp, Atom),
    /// A binary scalar operation.
    Binary(BinOp, Atom, Atom),
    /// `array[i0, .., ik-1]`: an element when `k == rank`, otherwise a view
    /// of a sub-array of rank `rank - k` (no copy). Each index is checked
    /// against its axis: [`ErrorKind::IndexOutOfBounds`].
    Index { array: VarId, indices: Vec<Atom> },
    /// `array[lo:hi]` along axis 0, a view of rank `rank`. Checked
    /// `0 <= lo <= hi <= n`: [`ErrorKind::SliceOutOfRange`].
    Slice { array: VarId, lo: Atom, hi: Atom },
    /// `array` viewed with the extents `dims` (`i64` atoms; rank
    /// `dims.len()`), row-major, no copy: `reshape` and `flatten`
    /// (LANGUAGE.md section 11). A negative extent is
    /// [`ErrorKind::NegativeSize`]; a product of the extents other than the
    /// element count of `array` (or one that overflows) is
    /// [`ErrorKind::SizeMismatch`].
    Reshape { array: VarId, dims: Vec<Atom> },
    /// `array with [indices] = value` (LANGUAGE.md section 11): a new array
    /// equal to `array` except at `indices` (an element when
    /// `indices.len() == rank`, otherwise a row, which `value` must match
    /// in shape: [`ErrorKind::SizeMismatch`]). Each index is checked like
    /// [`Expr::Index`]'s. The value semantics is a copy; code generation
    /// updates `array` in place where it can prove `array` dead and unshared.
    Update { array: VarId, indices: Vec<Atom>, value: Atom },
    /// The extent (`i64`) of `axis` of `array`.
    Dim { array: VarId, axis: u8 },
    /// A reduction of a rank-1 array to a scalar.
    Reduce { op: ReduceOp, array: VarId },
    /// An array literal whose rows are `elems` (scalars of type `elem_ty`, or
    /// arrays of type `elem_ty` and equal shapes: [`ErrorKind::IrregularArray`]).
    /// The result has type `elem_ty.lift()`.
    ArrayLit { elem_ty: Type, elems: Vec<Atom> },
    /// `for index < n => body`: one array per result of `body`, row `i`
    /// being that result for `index = i`. Array-valued rows must all have
    /// the same shape ([`ErrorKind::IrregularArray`]); `n < 0` is
    /// [`ErrorKind::NegativeSize`]. When `n == 0`, array rows have the
    /// extents [`crate::shape::static_row_dims`] finds before the loop (a
    /// literal row, a nested comprehension over an outer count, a view of
    /// an outer array, through branches, shape-keeping loops and calls),
    /// else extent 0 in every inner dimension.
    Build { n: Atom, index: VarId, body: Block },
    /// `loop states = init for index < n do body`: `body.results` are the
    /// next states (same types); the value is the final states.
    Loop { n: Atom, index: VarId, states: Vec<VarId>, init: Vec<Atom>, body: Block },
    /// `loop states = init while cond do body`: the states start at
    /// `init`; while `cond` (a block over the states yielding one `bool`)
    /// holds, `body.results` are the next states (same types). The value is
    /// the final states. It may run zero times and has no iteration limit.
    While { states: Vec<VarId>, init: Vec<Atom>, cond: Block, body: Block },
    /// Both branches yield the same number and types of values.
    If { cond: Atom, then_branch: Block, else_branch: Block },
    /// A call of another function of the program (not recursive).
    Call { func: FuncId, args: Vec<Atom> },
    /// A fresh, zero-filled `f64` array with the shape of `array` (an
    /// accumulator: it may be the target of [`StmtKind::AccAdd`]).
    ZerosLike(VarId),
    /// A fresh, zero-filled `f64` accumulator of the given extents (`i64`
    /// atoms, each non-negative: the extents of arrays that existed; the
    /// backward pass uses it where it has the extents of a primal array but
    /// not the array).
    Zeros(Vec<Atom>),
    /// The most recently pushed, not yet popped tape entry (LIFO). The type
    /// is that of the bound variable.
    Pop,
    /// The current position of the tape, an `i64` (how many entries lie
    /// below the top; in compiled code, 8-byte slots), for a later
    /// [`StmtKind::TapeRewind`]. Its only use is rewinding to it. An
    /// effect: passes never remove, share or move it.
    TapeMark,
}

/// A statement. `loc` is reported by run-time errors raised by it.
#[derive(Clone, PartialEq, Debug)]
pub struct Stmt {
    /// What the statement does.
    pub kind: StmtKind,
    /// Where in the source it comes from (0:0 for generated code).
    pub loc: Loc,
}

/// The statement forms.
#[derive(Clone, PartialEq, Debug)]
pub enum StmtKind {
    /// Bind the values of `expr` to `vars` (fresh variables; a mutable one
    /// takes its initial value here).
    Let { vars: Vec<VarId>, expr: Expr },
    /// `var := value` for a mutable variable (scalar or array handle).
    Assign { var: VarId, value: Atom },
    /// `acc[indices] += value`: a scalar when `indices.len() == rank(acc)`,
    /// otherwise an array of the remaining shape added elementwise. `acc`
    /// is an accumulator (from [`Expr::ZerosLike`], or a view of one).
    /// Reverse mode adds only into positions of accesses that succeeded, so
    /// the passes count it infallible (`passes::fallible`); the interpreter
    /// and compiled code still check its indices.
    AccAdd { acc: VarId, indices: Vec<Atom>, value: Atom },
    /// `acc[indices] = 0`: an element when `indices.len() == rank(acc)`,
    /// otherwise a row (every element of it). `acc` is an accumulator (or a
    /// view of one). The backward pass of an update (`A with [i] = v`)
    /// clears the position of the result's cotangent that `v` takes before
    /// handing the rest to `A`.
    AccZero { acc: VarId, indices: Vec<Atom> },
    /// Fails with [`ErrorKind::SizeMismatch`] unless the `i64`s `a == b`;
    /// `what` describes the two sizes for the message. `b` is the size
    /// that decides (an elementwise operation's first operand's extent, a
    /// declared size): `simplify` replaces later uses of `a` by `b` when
    /// the check's block binds `a` and neither is mutable.
    CheckSize { a: Atom, b: Atom, what: String },
    /// Push a value (any type; arrays by reference) on the tape. The tape
    /// is a stack of stored entries with a top position: a push writes at
    /// the top and discards every stored entry above it; [`Expr::Pop`]
    /// moves the top down and reads the entry there, leaving it stored.
    Push(Atom),
    /// Set the tape position back to `mark`, an `i64` that
    /// [`Expr::TapeMark`] yielded earlier: entries pushed after the mark
    /// and popped since can be popped again (pops never erase entries).
    /// A mark beyond the stored entries (or negative) is
    /// [`ErrorKind::InvalidArgument`], an internal error of the generated
    /// code. Used to run one backward pass several times after one forward
    /// pass (`vjp_rows`).
    TapeRewind(Atom),
    /// Run `body` (no results) for `index` in `0..n`, or `n-1` down to 0
    /// when `reverse`. `n < 0` runs it zero times.
    For { n: Atom, index: VarId, reverse: bool, body: Block },
    /// Run one branch (no results).
    If { cond: Atom, then_branch: Block, else_branch: Block },
}

/// A sequence of statements and the atoms it yields.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Block {
    /// Statements, in order.
    pub stmts: Vec<Stmt>,
    /// The values of the block.
    pub results: Vec<Atom>,
}

/// Facts about one variable.
#[derive(Clone, PartialEq, Debug)]
pub struct VarInfo {
    /// Source name or a hint for generated variables (for printing).
    pub name: String,
    /// Type.
    pub ty: Type,
    /// True for variables that [`StmtKind::Assign`] may write.
    pub mutable: bool,
}

/// A dimension in a source-level type.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub enum SrcDim {
    /// A size variable.
    Var(String),
    /// A literal size.
    Lit(i64),
    /// An expression of size variables and literals (`[n * m]`,
    /// LANGUAGE.md section 11); each of its variables also occurs alone as
    /// a dimension of a parameter.
    Expr(crate::size::SizeExpr),
}

impl SrcDim {
    /// The extent under the size variables' values `lookup`.
    ///
    /// Errors: an unbound variable, a division by zero, an overflow.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<i64>) -> Result<i64, crate::size::SizeEvalError> {
        match self {
            SrcDim::Var(v) => lookup(v).ok_or_else(|| crate::size::SizeEvalError::Unbound(v.clone())),
            SrcDim::Lit(n) => Ok(*n),
            SrcDim::Expr(e) => e.eval(lookup),
        }
    }
}

impl fmt::Display for SrcDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SrcDim::Var(v) => f.write_str(v),
            SrcDim::Lit(n) => write!(f, "{n}"),
            SrcDim::Expr(e) => write!(f, "{e}"),
        }
    }
}

/// A source-level type, kept for interfaces (JSON, C ABI, Rust API).
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub enum SrcType {
    /// `f64`, `i64`, `bool`.
    Scalar(Scalar),
    /// `[d1]...[dk]E`.
    Array { elem: Scalar, dims: Vec<SrcDim> },
    /// `(T1, ..., Tn)`.
    Tuple(Vec<SrcType>),
}

impl SrcType {
    /// The IR types of the leaves, flattened left to right.
    pub fn leaves(&self) -> Vec<Type> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }
    fn collect_leaves(&self, out: &mut Vec<Type>) {
        match self {
            SrcType::Scalar(s) => out.push(Type::scalar(*s)),
            SrcType::Array { elem, dims } => out.push(Type::array(*elem, dims.len() as u8)),
            SrcType::Tuple(ts) => ts.iter().for_each(|t| t.collect_leaves(out)),
        }
    }
    /// The leaves themselves (scalars and arrays), flattened left to right.
    pub fn leaf_types(&self) -> Vec<&SrcType> {
        let mut out = Vec::new();
        fn go<'a>(t: &'a SrcType, out: &mut Vec<&'a SrcType>) {
            match t {
                SrcType::Tuple(ts) => ts.iter().for_each(|t| go(t, out)),
                _ => out.push(t),
            }
        }
        go(self, &mut out);
        out
    }
}

impl fmt::Display for SrcType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SrcType::Scalar(s) => write!(f, "{s}"),
            SrcType::Array { elem, dims } => {
                for d in dims {
                    write!(f, "[{d}]")?;
                }
                write!(f, "{elem}")
            }
            SrcType::Tuple(ts) => {
                f.write_str("(")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// A source-level parameter.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SrcParam {
    /// The parameter's name.
    pub name: String,
    /// Its declared type.
    pub ty: SrcType,
}

/// The source-level signature of a definition. [`Function::params`] are the
/// leaves of the parameter types, flattened left to right; the results are
/// the leaves of `result`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Signature {
    /// Parameters in order.
    pub params: Vec<SrcParam>,
    /// Result type.
    pub result: SrcType,
}

impl Signature {
    /// Size variables of the parameter types, in order of first appearance
    /// (the `SIZES` of the C ABI).
    pub fn size_vars(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in &self.params {
            for leaf in p.ty.leaf_types() {
                if let SrcType::Array { dims, .. } = leaf {
                    for d in dims {
                        let mut add = |v: &str| {
                            if !out.iter().any(|o| o == v) {
                                out.push(v.to_string());
                            }
                        };
                        match d {
                            SrcDim::Var(v) => add(v),
                            SrcDim::Lit(_) => {}
                            SrcDim::Expr(e) => e.for_each_var(&mut add),
                        }
                    }
                }
            }
        }
        out
    }

    /// For each parameter, the range of flattened IR parameter indices it
    /// covers.
    pub fn param_leaf_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let mut start = 0;
        self.params
            .iter()
            .map(|p| {
                let n = p.ty.leaves().len();
                let r = start..start + n;
                start += n;
                r
            })
            .collect()
    }
}

/// One definition in IR form.
#[derive(Clone, PartialEq, Debug)]
pub struct Function {
    /// Name (the source name for definitions; derived names such as
    /// `f_vjp` for generated functions).
    pub name: String,
    /// Parameters (flattened leaves).
    pub params: Vec<VarId>,
    /// The body; its results are the function's results (flattened).
    pub body: Block,
    /// The variable table; [`VarId`] indexes it.
    pub vars: Vec<VarInfo>,
    /// Types of the results.
    pub result_types: Vec<Type>,
    /// Source-level signature (for a generated function: of the definition
    /// it was derived from).
    pub signature: Signature,
    /// Location of the definition.
    pub loc: Loc,
}

/// A whole program: the definitions of one source file.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Program {
    /// The source file name, used in messages (`FILE:LINE:COL`).
    pub file: String,
    /// The functions; [`FuncId`] indexes this.
    pub funcs: Vec<Function>,
}

impl Program {
    /// The source definitions, in order: every function but the derivative
    /// stubs (`crate::derivative`), which come after them, and the parts
    /// of huge definitions (`crate::passes::outline`), which come last.
    pub fn definitions(&self) -> impl Iterator<Item = FuncId> + '_ {
        self.funcs
            .iter()
            .enumerate()
            .filter(|(_, f)| crate::DiffOp::parse_stub(&f.name).is_none() && !crate::passes::outline::is_part(&f.name))
            .map(|(i, _)| FuncId(i as u32))
    }
    /// The parts huge definitions are split into
    /// (`crate::passes::outline`), in order.
    pub fn parts(&self) -> impl Iterator<Item = FuncId> + '_ {
        self.funcs
            .iter()
            .enumerate()
            .filter(|(_, f)| crate::passes::outline::is_part(&f.name))
            .map(|(i, _)| FuncId(i as u32))
    }
    /// The function with this name.
    pub fn find(&self, name: &str) -> Option<FuncId> {
        self.funcs.iter().position(|f| f.name == name).map(|i| FuncId(i as u32))
    }
    /// The function with this id.
    pub fn func(&self, id: FuncId) -> &Function {
        &self.funcs[id.0 as usize]
    }
    /// Formats a location as `FILE:LINE:COL`.
    pub fn loc_string(&self, loc: Loc) -> String {
        format!("{}:{}:{}", self.file, loc.line, loc.col)
    }

    /// For each function, whether it and every function it calls, directly
    /// or not, are straight-line scalar code
    /// ([`Function::is_straight_line_scalar`]; a derivative stub,
    /// `crate::derivative`, is not). Such a function, and each derivative
    /// of it (differentiation adds no loop and no array to code without
    /// them), runs a bounded number of statements on any arguments and
    /// touches no array: code may call it with arguments left unset by a
    /// failed call without running away (`arrayad_codegen`'s kept calls
    /// whose status is checked once, at the end).
    ///
    /// Linear in the program's size: an iterative depth-first walk of the
    /// call graph, a function on a cycle (which the language does not
    /// allow) counting as not straight-line.
    pub fn straight_line_scalar_closure(&self) -> Vec<bool> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let n = self.funcs.len();
        let mut state = vec![NEW; n];
        let mut closed = vec![false; n];
        let local = |i: usize| {
            let f = &self.funcs[i];
            f.is_straight_line_scalar() && crate::DiffOp::parse_stub(&f.name).is_none()
        };
        for root in 0..n {
            if state[root] != NEW {
                continue;
            }
            state[root] = OPEN;
            closed[root] = local(root);
            // (function, its next statement to look at)
            let mut stack = vec![(root, 0usize)];
            while let Some(&mut (f, ref mut next)) = stack.last_mut() {
                let stmts = &self.funcs[f].body.stmts;
                let call = if closed[f] {
                    stmts[*next..].iter().position(|s| matches!(s.kind, StmtKind::Let { expr: Expr::Call { .. }, .. }))
                } else {
                    None
                };
                let Some(k) = call else {
                    state[f] = DONE;
                    stack.pop();
                    if let Some(&(caller, _)) = stack.last() {
                        closed[caller] &= closed[f];
                    }
                    continue;
                };
                let at = *next + k;
                *next = at + 1;
                let StmtKind::Let { expr: Expr::Call { func, .. }, .. } = &stmts[at].kind else { continue };
                let c = func.0 as usize;
                match state.get(c) {
                    Some(&NEW) => {
                        state[c] = OPEN;
                        closed[c] = local(c);
                        stack.push((c, 0));
                    }
                    Some(&DONE) => closed[f] &= closed[c],
                    // A cycle, or an id beyond the program.
                    _ => closed[f] = false,
                }
            }
        }
        closed
    }
}

impl Function {
    /// True when `self` is straight-line scalar code: no array variable and
    /// no statement with a nested block (no loop, no `if`; so no reduction,
    /// copy or accumulator row that lowers to a loop either), such as the
    /// derivatives of small definitions kept as calls. The optimiser skips
    /// its array and loop passes on it (`passes::optimize`); Cranelift
    /// compiles it with its single-pass register allocator.
    pub fn is_straight_line_scalar(&self) -> bool {
        self.vars.iter().all(|v| v.ty.rank == 0)
            && self.body.stmts.iter().all(|s| crate::visit::child_blocks(&s.kind).next().is_none())
    }

    /// A function named `name` with parameters `p0, p1, ...` of the given
    /// types and an empty body (for hand-built IR: tests, generated code).
    /// The source signature is synthesised: array extents are size
    /// variables `n0, n1, ...` by axis, and the result is the single result
    /// type or a tuple of them. Returns the function and its parameters.
    pub fn with_params(name: &str, params: &[Type], results: &[Type]) -> (Function, Vec<VarId>) {
        let src = |t: &Type| match t.rank {
            0 => SrcType::Scalar(t.elem),
            r => SrcType::Array { elem: t.elem, dims: (0..r).map(|k| SrcDim::Var(format!("n{k}"))).collect() },
        };
        let mut f = Function {
            name: name.into(),
            params: vec![],
            body: Block::default(),
            vars: vec![],
            result_types: results.to_vec(),
            signature: Signature {
                params: params
                    .iter()
                    .enumerate()
                    .map(|(k, t)| SrcParam { name: format!("p{k}"), ty: src(t) })
                    .collect(),
                result: match results {
                    [one] => src(one),
                    many => SrcType::Tuple(many.iter().map(src).collect()),
                },
            },
            loc: Loc::new(1, 1),
        };
        let ps: Vec<VarId> = params.iter().enumerate().map(|(k, t)| f.new_var(format!("p{k}"), *t)).collect();
        f.params = ps.clone();
        (f, ps)
    }

    /// The information of a variable.
    pub fn var(&self, v: VarId) -> &VarInfo {
        &self.vars[v.index()]
    }
    /// The type of a variable.
    pub fn ty(&self, v: VarId) -> Type {
        self.vars[v.index()].ty
    }
    /// The type of an atom.
    pub fn atom_ty(&self, a: &Atom) -> Type {
        match a {
            Atom::Var(v) => self.ty(*v),
            Atom::F64(_) => Type::F64,
            Atom::I64(_) => Type::I64,
            Atom::Bool(_) => Type::BOOL,
        }
    }
    /// Adds a variable and returns its id.
    pub fn new_var(&mut self, name: impl Into<String>, ty: Type) -> VarId {
        let id = VarId(self.vars.len() as u32);
        self.vars.push(VarInfo { name: name.into(), ty, mutable: false });
        id
    }
    /// Adds a mutable variable and returns its id.
    pub fn new_mut_var(&mut self, name: impl Into<String>, ty: Type) -> VarId {
        let id = VarId(self.vars.len() as u32);
        self.vars.push(VarInfo { name: name.into(), ty, mutable: true });
        id
    }
    /// Gives back the spare capacity of the function's statements (at
    /// every depth) and variable table: a function kept until the code is
    /// compiled (the callees of a library) holds no more than it uses.
    pub fn shrink_to_fit(&mut self) {
        crate::visit::for_each_block_mut(&mut self.body, &mut |b| {
            b.stmts.shrink_to_fit();
            b.results.shrink_to_fit();
        });
        self.vars.shrink_to_fit();
    }
    /// Types of the parameters.
    pub fn param_types(&self) -> Vec<Type> {
        self.params.iter().map(|p| self.ty(*p)).collect()
    }
}

/// The type a binary operation yields for operands of type `t`.
pub fn binop_result(op: BinOp, t: Type) -> Type {
    if op.is_comparison() {
        Type::BOOL
    } else {
        t
    }
}

/// The type a unary operation yields for an operand of type `t`.
pub fn unop_result(op: UnOp, t: Type) -> Type {
    match op {
        UnOp::ToF64 => Type::F64,
        UnOp::ToI64 => Type::I64,
        _ => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(kind: StmtKind) -> Stmt {
        Stmt { kind, loc: Loc::default() }
    }

    /// `f(x) = callees(x) + ...`: one call of each callee, then the sum.
    fn calling(name: &str, callees: &[u32]) -> Function {
        let (mut f, ps) = Function::with_params(name, &[Type::F64], &[Type::F64]);
        let mut result = Atom::Var(ps[0]);
        for &c in callees {
            let y = f.new_var("y", Type::F64);
            f.body.stmts.push(stmt(StmtKind::Let {
                vars: vec![y],
                expr: Expr::Call { func: FuncId(c), args: vec![Atom::Var(ps[0])] },
            }));
            let s = f.new_var("s", Type::F64);
            f.body
                .stmts
                .push(stmt(StmtKind::Let { vars: vec![s], expr: Expr::Binary(BinOp::Add, result, Atom::Var(y)) }));
            result = Atom::Var(s);
        }
        f.body.results = vec![result];
        f
    }

    /// Straight-line definitions calling straight-line ones are in the
    /// closure; a loop, an array, a cycle or an unknown callee anywhere
    /// below a definition keeps it out.
    #[test]
    fn the_straight_line_closure_follows_calls_at_any_depth() {
        let mut looped = calling("looped", &[]);
        let i = looped.new_var("i", Type::I64);
        looped.body.stmts.push(stmt(StmtKind::For {
            n: Atom::I64(3),
            index: i,
            reverse: false,
            body: Block::default(),
        }));
        let mut array = calling("array", &[]);
        array.new_var("a", Type::array(Scalar::F64, 1));
        let funcs = vec![
            calling("leaf", &[]),           // 0
            calling("calls_leaf", &[0]),    // 1
            calling("deeper", &[1, 0]),     // 2
            looped,                         // 3
            calling("calls_loop", &[0, 3]), // 4
            calling("above_loop", &[4]),    // 5
            calling("cycle_a", &[7]),       // 6
            calling("cycle_b", &[6]),       // 7
            array,                          // 8
            calling("calls_array", &[8]),   // 9
            calling("unknown", &[42]),      // 10
        ];
        let program = Program { file: "t.arr".into(), funcs };
        let want = [true, true, true, false, false, false, false, false, false, false, false];
        assert_eq!(program.straight_line_scalar_closure(), want);
    }
}
