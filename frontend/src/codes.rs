//! The codes of compile errors (`E0xxx`) and their long explanations.
//!
//! Every diagnostic the frontend reports carries one [`Code`]; the code is
//! printed in the header (`error[E0101]: unknown variable `y``), returned by
//! [`crate::Diagnostics::items`], and `arrayad explain E0101` prints its
//! long form ([`Code::explanation`]), kept as Markdown in
//! `frontend/error_codes/`. Each explanation holds an erroneous example in
//! an ```` ```arr,error ```` block (a test checks that it fails with exactly
//! this code) and usually a corrected one in an ```` ```arr ```` block (a
//! test checks that it compiles).
//!
//! Codes are stable: a code is never reused for another error. The ranges
//! are E00xx syntax, E01xx names and sizes, E02xx types, E03xx derivatives
//! inside programs (`jvp`, `vjp`, `grad`), E09xx internal errors.

/// Declares [`Code`] with its string, title and explanation file.
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $title:literal;)*) => {
        /// The code of a compile error (see [the module docs](self)).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            /// Every code, in numeric order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The code as printed: `E0101`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $code,)*
                }
            }

            /// A one-line title: `unknown variable`.
            pub fn title(self) -> &'static str {
                match self {
                    $(Code::$variant => $title,)*
                }
            }

            /// The long explanation, in Markdown: what the error means, an
            /// erroneous example and how to fix it.
            pub fn explanation(self) -> &'static str {
                match self {
                    $(Code::$variant => include_str!(concat!("../error_codes/", $code, ".md")),)*
                }
            }
        }
    };
}

codes! {
    /// A token that does not fit the grammar at this point.
    Syntax = "E0001", "syntax error";
    /// A character that starts no token.
    UnexpectedCharacter = "E0002", "unexpected character";
    /// A number literal that is not well formed.
    MalformedNumber = "E0003", "malformed number";
    /// A literal (or a literal array size) outside the range of its type.
    LiteralOutOfRange = "E0004", "literal out of range";
    /// Expressions nested deeper than the parser allows.
    NestingLimit = "E0005", "expression nested too deeply";
    /// A source file that is not valid UTF-8.
    NotUtf8 = "E0006", "source is not valid UTF-8";
    /// `()` as an expression, type or pattern.
    EmptyTuple = "E0007", "empty tuple";
    /// A type name that does not exist.
    UnknownType = "E0008", "unknown type";
    /// A call of something that is not a name (`(f)(x)`, `a[0](x)`).
    NotCallable = "E0009", "only names can be called";

    /// A name that no `let`, parameter, pattern or index binds.
    UnknownVariable = "E0101", "unknown variable";
    /// A call of a name that is neither a definition nor a builtin.
    UnknownFunction = "E0102", "unknown function";
    /// A definition or builtin used where a value is expected (or a
    /// variable where a definition is expected).
    NotAValue = "E0103", "function used as a value";
    /// Two definitions with one name.
    DefinedTwice = "E0104", "definition defined twice";
    /// A definition named like a builtin.
    BuiltinRedefined = "E0105", "builtin redefined";
    /// A name bound twice by one parameter list or pattern.
    BoundTwice = "E0106", "name bound twice";
    /// A parameter named like a size variable of the signature.
    ParamIsSize = "E0107", "parameter is also a size variable";
    /// A size in a `let` annotation that is no `i64` variable in scope.
    UnknownSize = "E0108", "unknown size";
    /// A size variable of the result type that no parameter type binds.
    ResultSizeUnbound = "E0109", "size variable of the result is unbound";
    /// A size variable that occurs only inside size expressions.
    SizeOnlyInExpressions = "E0110", "size variable only inside size expressions";
    /// A definition that calls itself, directly or through others.
    Recursion = "E0111", "recursion";

    /// A body whose type is not the declared result type.
    ResultType = "E0201", "body does not have the declared result type";
    /// A `let` value whose type is not its annotation.
    AnnotationType = "E0202", "value does not have the annotated type";
    /// An argument whose type is not the parameter's.
    ArgumentType = "E0203", "argument has the wrong type";
    /// A call with the wrong number of arguments.
    ArgumentCount = "E0204", "wrong number of arguments";
    /// A condition (of `if` or `while`) that is not a `bool`.
    ConditionNotBool = "E0205", "condition is not a bool";
    /// The branches of an `if` with different types.
    BranchTypes = "E0206", "branches of `if` have different types";
    /// A loop body whose type is not the loop state's.
    LoopStateType = "E0207", "loop body does not have the state's type";
    /// An operator applied to operands of a kind it does not take.
    OperandTypes = "E0208", "operator applied to the wrong kind of operands";
    /// An `i64` and an `f64` mixed in one operation.
    MixedNumbers = "E0209", "i64 and f64 mixed without a conversion";
    /// Arrays of different ranks combined elementwise, or an array compared.
    RankMismatch = "E0210", "operands of different ranks";
    /// Indexing, slicing or updating a value that is not an array.
    NotAnArray = "E0211", "not an array";
    /// More indices than the array has axes.
    TooManyIndices = "E0212", "too many indices";
    /// A tuple component that does not exist, or a tuple pattern of the
    /// wrong size.
    TupleShape = "E0213", "tuple component or pattern does not fit";
    /// A value that must be an `i64` (an index, a size, a count) is not.
    ExpectedI64 = "E0214", "expected an i64";
    /// A builtin applied to an argument of a type it does not take.
    BuiltinArgument = "E0215", "builtin applied to the wrong type";
    /// An array literal that is empty or mixes element types.
    ArrayLiteral = "E0216", "array literal of no single element type";
    /// An array of rank above the limit.
    RankLimit = "E0217", "rank above the limit";
    /// A `with` update whose new value does not fit the array.
    UpdateValue = "E0218", "updated value has the wrong type";
    /// An array whose elements would be tuples.
    ArrayOfTuples = "E0219", "arrays of tuples do not exist";

    /// `jvp`, `vjp` or `grad` applied to something that is not a definition.
    DiffTarget = "E0301", "derivative of something that is not a definition";
    /// `jvp`, `vjp` or `grad` of a definition without parameters.
    NothingToDifferentiate = "E0302", "definition without parameters differentiated";
    /// Arguments, tangents or cotangent of `jvp`/`vjp`/`grad` of the wrong type.
    DiffArgumentType = "E0303", "derivative argument has the wrong type";
    /// `grad` of a definition whose result is not one `f64`.
    GradResultNotF64 = "E0304", "`grad` of a function whose result is not one f64";

    /// A bug of arrayad, not of the program.
    Internal = "E0900", "internal compiler error";
}

impl Code {
    /// The code named `name` (`"E0101"` or `"e0101"`; `"0101"` and `"101"`
    /// too), if there is one.
    ///
    /// ```
    /// use arrayad_frontend::codes::Code;
    /// assert_eq!(Code::parse("E0101"), Some(Code::UnknownVariable));
    /// assert_eq!(Code::parse("101"), Some(Code::UnknownVariable));
    /// assert_eq!(Code::parse("E9999"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Code> {
        let digits = name.trim().trim_start_matches(['E', 'e']);
        let n: u32 = digits.parse().ok()?;
        Code::ALL.iter().copied().find(|c| c.as_str()[1..].parse::<u32>().ok() == Some(n))
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
