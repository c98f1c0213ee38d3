//! Parsing expressions, one function per precedence level (lowest first):
//! `||`; `&&`; comparisons (non-associative); `+ -`; `* / %`; unary `- !`;
//! `**` (right-associative); postfix call, index and projection; below
//! them all, `A with [i] = v` (left-associative). `let`, `if`, `for` and
//! `loop` extend as far right as possible.

use super::{PResult, Parser, Reported};
use crate::ast::*;
use crate::codes::Code;
use crate::lexer::Tok;

fn binary(op: BinaryOp, op_span: Span, lhs: Expr, rhs: Expr) -> Expr {
    let span = lhs.span.to(rhs.span);
    Expr { kind: ExprKind::Binary { op, op_span, lhs: Box::new(lhs), rhs: Box::new(rhs) }, span }
}

fn comparison_op(t: &Tok) -> Option<BinaryOp> {
    Some(match t {
        Tok::EqEq => BinaryOp::Eq,
        Tok::NotEq => BinaryOp::Ne,
        Tok::Lt => BinaryOp::Lt,
        Tok::Le => BinaryOp::Le,
        Tok::Gt => BinaryOp::Gt,
        Tok::Ge => BinaryOp::Ge,
        _ => return None,
    })
}

fn or_op(t: &Tok) -> Option<BinaryOp> {
    (*t == Tok::OrOr).then_some(BinaryOp::Or)
}

fn and_op(t: &Tok) -> Option<BinaryOp> {
    (*t == Tok::AndAnd).then_some(BinaryOp::And)
}

fn additive_op(t: &Tok) -> Option<BinaryOp> {
    match t {
        Tok::Plus => Some(BinaryOp::Add),
        Tok::Minus => Some(BinaryOp::Sub),
        _ => None,
    }
}

fn multiplicative_op(t: &Tok) -> Option<BinaryOp> {
    match t {
        Tok::Star => Some(BinaryOp::Mul),
        Tok::Slash => Some(BinaryOp::Div),
        Tok::Percent => Some(BinaryOp::Rem),
        _ => None,
    }
}

impl Parser<'_> {
    /// A full expression (lowest precedence).
    pub(super) fn expr(&mut self) -> PResult<Expr> {
        self.nested(|p| match p.tok() {
            Tok::Let => p.let_chain(),
            Tok::If => p.if_expr(),
            Tok::For => p.for_expr(),
            Tok::Loop => p.loop_expr(),
            _ => p.with_expr(),
        })
    }

    /// `A with [i, ...] = V`, left-associative (`A with [0] = x with [1] = y`
    /// updates twice); `V` is an operand of `||` or a `let`, `if`, `for` or
    /// `loop` (which extends as far right as possible).
    fn with_expr(&mut self) -> PResult<Expr> {
        let mut e = self.or_expr()?;
        let saved = self.depth;
        let r = loop {
            if *self.tok() != Tok::With {
                break Ok(e);
            }
            let at = self.bump();
            if let Err(err) = self.chain_step(at) {
                break Err(err);
            }
            let r = self.with_rest(e);
            match r {
                Ok(next) => e = next,
                Err(err) => break Err(err),
            }
        };
        self.depth = saved;
        r
    }

    /// `[i, ...] = V` after `A with`.
    fn with_rest(&mut self, array: Expr) -> PResult<Expr> {
        self.expect(&Tok::LBracket, "`[` and the indices of the update (`A with [i] = v`)")?;
        if *self.tok() == Tok::RBracket {
            return self.fail("expected an index between `[` and `]`");
        }
        let (indices, _) = self.expr_list(&Tok::RBracket)?;
        self.expect(&Tok::Assign, "`=` and the new value (`A with [i] = v`)")?;
        let value = self.nested(|p| match p.tok() {
            Tok::Let => p.let_chain(),
            Tok::If => p.if_expr(),
            Tok::For => p.for_expr(),
            Tok::Loop => p.loop_expr(),
            _ => p.or_expr(),
        })?;
        let span = array.span.to(value.span);
        Ok(Expr { kind: ExprKind::With { array: Box::new(array), indices, value: Box::new(value) }, span })
    }

    fn let_chain(&mut self) -> PResult<Expr> {
        let start = self.span();
        let mut bindings = Vec::new();
        loop {
            self.expect(&Tok::Let, "`let`")?;
            let pat = self.pattern()?;
            let ty = if self.eat(&Tok::Colon) { Some(self.ty()?) } else { None };
            self.expect(&Tok::Assign, "`=`")?;
            let value = self.expr()?;
            bindings.push(Binding { pat, ty, value });
            match self.tok() {
                Tok::Let => continue,
                Tok::In => {
                    self.bump();
                    if *self.tok() == Tok::Let {
                        continue;
                    }
                    let body = self.expr()?;
                    let span = start.to(body.span);
                    return Ok(Expr { kind: ExprKind::Let { bindings, body: Box::new(body) }, span });
                }
                t => {
                    let msg = format!("expected `in` or another `let` after this binding, found {t}");
                    return self.fail(msg);
                }
            }
        }
    }

    fn if_expr(&mut self) -> PResult<Expr> {
        let start = self.expect(&Tok::If, "`if`")?;
        let cond = self.expr()?;
        self.expect(&Tok::Then, "`then`")?;
        let then_branch = self.expr()?;
        self.expect(&Tok::Else, "`else` (every `if` has an `else` branch)")?;
        let else_branch = self.expr()?;
        let span = start.to(else_branch.span);
        Ok(Expr {
            kind: ExprKind::If {
                cond: Box::new(cond),
                then_branch: Box::new(then_branch),
                else_branch: Box::new(else_branch),
            },
            span,
        })
    }

    fn for_expr(&mut self) -> PResult<Expr> {
        let start = self.expect(&Tok::For, "`for`")?;
        let saved = self.depth;
        let r = self.for_rest(start);
        self.depth = saved;
        r
    }

    fn for_rest(&mut self, start: Span) -> PResult<Expr> {
        let mut binders = Vec::new();
        loop {
            let index = self.binder("the index of `for`")?;
            self.chain_step(index.span)?;
            self.expect(&Tok::Lt, "`<` and the number of iterations")?;
            let bound = self.expr()?;
            binders.push(ForBinder { index, bound });
            if self.eat(&Tok::Comma) {
                continue;
            }
            self.expect(&Tok::FatArrow, "`=>` (or `,` and another index)")?;
            break;
        }
        let body = self.expr()?;
        let span = start.to(body.span);
        Ok(Expr { kind: ExprKind::For { binders, body: Box::new(body) }, span })
    }

    fn loop_expr(&mut self) -> PResult<Expr> {
        let start = self.expect(&Tok::Loop, "`loop`")?;
        let pat = self.pattern()?;
        self.expect(&Tok::Assign, "`=` and the initial state")?;
        let init = self.expr()?;
        if self.eat(&Tok::While) {
            let cond = self.expr()?;
            self.expect(&Tok::Do, "`do` and the loop body")?;
            let body = self.expr()?;
            let span = start.to(body.span);
            return Ok(Expr {
                kind: ExprKind::While { pat, init: Box::new(init), cond: Box::new(cond), body: Box::new(body) },
                span,
            });
        }
        self.expect(
            &Tok::For,
            "`for` or `while` (a loop reads `loop PAT = INIT for i < N do BODY` or `loop PAT = INIT while C do BODY`)",
        )?;
        let index = self.binder("the index of the loop")?;
        self.expect(&Tok::Lt, "`<` and the number of iterations")?;
        let count = self.expr()?;
        self.expect(&Tok::Do, "`do` and the loop body")?;
        let body = self.expr()?;
        let span = start.to(body.span);
        Ok(Expr {
            kind: ExprKind::Loop { pat, init: Box::new(init), index, count: Box::new(count), body: Box::new(body) },
            span,
        })
    }

    /// A chain of one left-associative precedence level.
    fn left_assoc(
        &mut self,
        next: fn(&mut Self) -> PResult<Expr>,
        op_of: fn(&Tok) -> Option<BinaryOp>,
    ) -> PResult<Expr> {
        let mut lhs = next(self)?;
        let saved = self.depth;
        let r = loop {
            let Some(op) = op_of(self.tok()) else { break Ok(lhs) };
            let op_span = self.bump();
            if let Err(e) = self.chain_step(op_span) {
                break Err(e);
            }
            match next(self) {
                Ok(rhs) => lhs = binary(op, op_span, lhs, rhs),
                Err(e) => break Err(e),
            }
        };
        self.depth = saved;
        r
    }

    fn or_expr(&mut self) -> PResult<Expr> {
        self.left_assoc(Self::and_expr, or_op)
    }

    fn and_expr(&mut self) -> PResult<Expr> {
        self.left_assoc(Self::comparison, and_op)
    }

    /// Comparisons are non-associative: `a < b < c` is a syntax error.
    fn comparison(&mut self) -> PResult<Expr> {
        let lhs = self.additive()?;
        let Some(op) = comparison_op(self.tok()) else { return Ok(lhs) };
        let op_span = self.bump();
        let rhs = self.additive()?;
        if let Some(op2) = comparison_op(self.tok()) {
            let msg = format!(
                "comparison operators are non-associative: `a {} b {} c` needs parentheses",
                op.symbol(),
                op2.symbol()
            );
            return self.fail(msg);
        }
        Ok(binary(op, op_span, lhs, rhs))
    }

    fn additive(&mut self) -> PResult<Expr> {
        self.left_assoc(Self::multiplicative, additive_op)
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        self.left_assoc(Self::unary, multiplicative_op)
    }

    /// `-E`, `!E`; binds looser than `**`: `-x**2` is `-(x**2)`.
    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.tok() {
            Tok::Minus => UnaryOp::Neg,
            Tok::Bang => UnaryOp::Not,
            _ => return self.power(),
        };
        let start = self.bump();
        let operand = self.nested(|p| p.unary())?;
        let span = start.to(operand.span);
        Ok(Expr { kind: ExprKind::Unary { op, operand: Box::new(operand) }, span })
    }

    /// `E ** E`, right-associative; the exponent may be negated (`2 ** -1`).
    fn power(&mut self) -> PResult<Expr> {
        let base = self.postfix()?;
        if *self.tok() != Tok::StarStar {
            return Ok(base);
        }
        let op_span = self.bump();
        let exponent = self.nested(|p| p.unary())?;
        Ok(binary(BinaryOp::Pow, op_span, base, exponent))
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        let saved = self.depth;
        let r = loop {
            match self.tok() {
                Tok::LBracket => {
                    let open = self.span();
                    if let Err(err) = self.chain_step(open) {
                        break Err(err);
                    }
                    match self.index_suffix(e) {
                        Ok(next) => e = next,
                        Err(err) => break Err(err),
                    }
                }
                Tok::Dot => {
                    let dot = self.bump();
                    if let Err(err) = self.chain_step(dot) {
                        break Err(err);
                    }
                    match self.tok().clone() {
                        Tok::Int(v) => {
                            let index_span = self.bump();
                            let Ok(index) = u32::try_from(v) else {
                                break self.fail_at(
                                    Code::TupleShape,
                                    index_span,
                                    format!("tuple component {v} does not exist"),
                                );
                            };
                            let span = e.span.to(index_span);
                            e = Expr { kind: ExprKind::Proj { tuple: Box::new(e), index, index_span }, span };
                        }
                        t => break self.fail(format!("expected a tuple component number after `.`, found {t}")),
                    }
                }
                Tok::LParen => {
                    break self
                        .fail_as(Code::NotCallable, "only definitions and builtins can be called, by name: `f(x)`");
                }
                _ => break Ok(e),
            }
        };
        self.depth = saved;
        r
    }

    /// `[i]`, `[i, j, ...]`, `[lo:hi]` after an array expression.
    fn index_suffix(&mut self, array: Expr) -> PResult<Expr> {
        self.expect(&Tok::LBracket, "`[`")?;
        let slice = |p: &mut Self, array: Expr, lo: Option<Box<Expr>>| -> PResult<Expr> {
            // The `:` has been consumed.
            let hi = if *p.tok() == Tok::RBracket { None } else { Some(Box::new(p.expr()?)) };
            let end = p.expect(&Tok::RBracket, "`]`")?;
            let span = array.span.to(end);
            Ok(Expr { kind: ExprKind::Slice { array: Box::new(array), lo, hi }, span })
        };
        if self.eat(&Tok::Colon) {
            return slice(self, array, None);
        }
        if *self.tok() == Tok::RBracket {
            return self.fail("expected an index between `[` and `]`");
        }
        let first = self.expr()?;
        if self.eat(&Tok::Colon) {
            return slice(self, array, Some(Box::new(first)));
        }
        let mut indices = vec![first];
        while self.eat(&Tok::Comma) {
            indices.push(self.expr()?);
        }
        if *self.tok() == Tok::Colon {
            return self.fail("a slice `A[lo:hi]` takes one range (of axis 0) and no indices");
        }
        let end = self.expect(&Tok::RBracket, "`,` or `]`")?;
        let span = array.span.to(end);
        Ok(Expr { kind: ExprKind::Index { array: Box::new(array), indices }, span })
    }

    /// Comma-separated expressions up to `close` (a trailing comma is allowed).
    fn expr_list(&mut self, close: &Tok) -> PResult<(Vec<Expr>, Span)> {
        let mut elems = Vec::new();
        while self.tok() != close {
            elems.push(self.expr()?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        if self.tok() == close {
            return Ok((elems, self.bump()));
        }
        let what = format!("`,` or {close}");
        let end = self.expect(close, &what)?;
        Ok((elems, end))
    }

    fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        let lit = |p: &mut Self, kind: ExprKind| {
            let span = p.bump();
            Ok(Expr { kind, span })
        };
        match self.tok().clone() {
            Tok::Int(v) => lit(self, ExprKind::Int(v)),
            Tok::Float(x) => lit(self, ExprKind::Float(x)),
            Tok::True => lit(self, ExprKind::Bool(true)),
            Tok::False => lit(self, ExprKind::Bool(false)),
            Tok::Ident(name) => {
                let span = self.bump();
                if *self.tok() != Tok::LParen {
                    return Ok(Expr { kind: ExprKind::Var(name), span });
                }
                self.bump();
                let (args, end) = self.expr_list(&Tok::RParen)?;
                Ok(Expr { kind: ExprKind::Call { func: Ident { name, span }, args }, span: span.to(end) })
            }
            Tok::LParen => {
                self.bump();
                if *self.tok() == Tok::RParen {
                    return self.fail_as(Code::EmptyTuple, "empty tuple `()`: tuples have two or more components");
                }
                let (mut elems, end) = self.expr_list(&Tok::RParen)?;
                let span = start.to(end);
                if elems.len() == 1 {
                    let mut e = elems.pop().ok_or(Reported)?;
                    e.span = span;
                    return Ok(e);
                }
                Ok(Expr { kind: ExprKind::Tuple(elems), span })
            }
            Tok::LBracket => {
                self.bump();
                let (elems, end) = self.expr_list(&Tok::RBracket)?;
                Ok(Expr { kind: ExprKind::Array(elems), span: start.to(end) })
            }
            Tok::Let | Tok::If | Tok::For | Tok::Loop => self.expr(),
            Tok::Underscore => self.fail("`_` is not a value (it can only be used in patterns)"),
            t => self.fail(format!("expected an expression, found {t}")),
        }
    }
}
