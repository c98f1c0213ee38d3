//! Size expressions in written types (LANGUAGE.md section 11): a dimension
//! such as `[n * m]`, `[n + 1]` or `[d * (d - 1) / 2]` is an expression of
//! size variables and integer literals with `+`, `-`, `*` and `/` (`i64`
//! arithmetic, `/` truncating as in expressions). It is evaluated when a
//! call starts, from the sizes its arguments bind, and checked like any
//! other size.

use std::fmt;

/// An operator of a size expression.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SizeOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`, truncating toward zero.
    Div,
}

impl SizeOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            SizeOp::Add => "+",
            SizeOp::Sub => "-",
            SizeOp::Mul => "*",
            SizeOp::Div => "/",
        }
    }

    fn precedence(self) -> u8 {
        match self {
            SizeOp::Add | SizeOp::Sub => 1,
            SizeOp::Mul | SizeOp::Div => 2,
        }
    }
}

/// A size expression (module docs).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum SizeExpr {
    /// A size variable.
    Var(String),
    /// An integer literal.
    Lit(i64),
    /// `lhs OP rhs`.
    Bin(SizeOp, Box<SizeExpr>, Box<SizeExpr>),
}

/// Why a size expression has no value.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SizeEvalError {
    /// A size variable without a value.
    Unbound(String),
    /// A division by zero.
    DivisionByZero,
    /// The value does not fit in an `i64`.
    Overflow,
}

impl fmt::Display for SizeEvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeEvalError::Unbound(v) => write!(f, "the size variable `{v}` has no value"),
            SizeEvalError::DivisionByZero => f.write_str("a division by zero"),
            SizeEvalError::Overflow => f.write_str("an overflow of i64"),
        }
    }
}

impl SizeExpr {
    /// The value of the expression, with `lookup` giving the size
    /// variables' values. Overflow is an error here (compiled code wraps,
    /// and a wrapped size then fails its check).
    ///
    /// Errors: an unbound variable, a division by zero, an overflow.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<i64>) -> Result<i64, SizeEvalError> {
        // Recursive: the parser bounds the depth of written sizes.
        match self {
            SizeExpr::Var(v) => lookup(v).ok_or_else(|| SizeEvalError::Unbound(v.clone())),
            SizeExpr::Lit(n) => Ok(*n),
            SizeExpr::Bin(op, a, b) => {
                let (x, y) = (a.eval(lookup)?, b.eval(lookup)?);
                let r = match op {
                    SizeOp::Add => x.checked_add(y),
                    SizeOp::Sub => x.checked_sub(y),
                    SizeOp::Mul => x.checked_mul(y),
                    SizeOp::Div if y == 0 => return Err(SizeEvalError::DivisionByZero),
                    SizeOp::Div => x.checked_div(y),
                };
                r.ok_or(SizeEvalError::Overflow)
            }
        }
    }

    /// Calls `f` on every size variable, left to right (with repeats).
    pub fn for_each_var(&self, f: &mut dyn FnMut(&str)) {
        match self {
            SizeExpr::Var(v) => f(v),
            SizeExpr::Lit(_) => {}
            SizeExpr::Bin(_, a, b) => {
                a.for_each_var(f);
                b.for_each_var(f);
            }
        }
    }

    fn fmt_prec(&self, f: &mut fmt::Formatter<'_>, outer: u8, right: bool) -> fmt::Result {
        match self {
            SizeExpr::Var(v) => f.write_str(v),
            SizeExpr::Lit(n) => write!(f, "{n}"),
            SizeExpr::Bin(op, a, b) => {
                let p = op.precedence();
                // Left-associative: a right operand of equal precedence
                // needs parentheses (`n - (m - 1)`, `n / (2 * m)`).
                let paren = p < outer || (right && p == outer);
                if paren {
                    f.write_str("(")?;
                }
                a.fmt_prec(f, p, false)?;
                write!(f, " {} ", op.symbol())?;
                b.fmt_prec(f, p, true)?;
                if paren {
                    f.write_str(")")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for SizeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_prec(f, 0, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(v: &str) -> Box<SizeExpr> {
        Box::new(SizeExpr::Var(v.into()))
    }
    fn lit(n: i64) -> Box<SizeExpr> {
        Box::new(SizeExpr::Lit(n))
    }

    #[test]
    fn prints_with_the_parentheses_it_needs() {
        // d * (d - 1) / 2
        let e = SizeExpr::Bin(
            SizeOp::Div,
            Box::new(SizeExpr::Bin(SizeOp::Mul, var("d"), Box::new(SizeExpr::Bin(SizeOp::Sub, var("d"), lit(1))))),
            lit(2),
        );
        assert_eq!(e.to_string(), "d * (d - 1) / 2");
        let lookup = |v: &str| (v == "d").then_some(5);
        assert_eq!(e.eval(&lookup), Ok(10));
        let e = SizeExpr::Bin(SizeOp::Sub, var("n"), Box::new(SizeExpr::Bin(SizeOp::Sub, var("m"), lit(1))));
        assert_eq!(e.to_string(), "n - (m - 1)");
        assert_eq!(e.eval(&|_| None), Err(SizeEvalError::Unbound("n".into())));
        let e = SizeExpr::Bin(SizeOp::Div, var("n"), lit(0));
        assert_eq!(e.eval(&|_| Some(3)), Err(SizeEvalError::DivisionByZero));
        let e = SizeExpr::Bin(SizeOp::Mul, var("n"), var("n"));
        assert_eq!(e.eval(&|_| Some(i64::MAX)), Err(SizeEvalError::Overflow));
    }
}
