//! The parser: tokens to [`ast`](crate::ast), by recursive descent with one
//! function per precedence level (LANGUAGE.md section 3); expressions are
//! in the `expr` submodule.
//!
//! After a syntax error the parser skips to the next `def` and goes on, so
//! one run reports the first syntax error of every definition. Nesting is
//! limited ([`MAX_NESTING`], [`MAX_DEPTH`]) so that no input overflows the
//! stack of the parser or of the passes that walk the tree.

use crate::ast::*;
use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::lexer::{lex, Tok, Token};

mod expr;

/// Most nested expression levels (parentheses, `let`/`if`/`for`/`loop`
/// bodies, unary operators, `**` chains, types).
pub const MAX_NESTING: usize = 256;
/// Most levels of the expression tree, counting each operand of a chain of
/// left-associative operators or postfix operations as a level.
pub const MAX_DEPTH: usize = 1000;
/// Largest array rank.
pub const MAX_RANK: usize = 32;

/// The result of parsing with recovery.
pub(crate) struct Parsed {
    /// The definitions that parsed without error.
    pub program: Program,
    /// Names of definitions that had a syntax error (calls to them are not
    /// reported as calls of unknown functions).
    pub broken: Vec<String>,
}

/// Parses a whole file, pushing every error to `diags`.
pub(crate) fn parse_program(source: &str, diags: &mut Vec<Diagnostic>) -> Parsed {
    let toks = lex(source, diags);
    let mut p = Parser { toks, pos: 0, diags, nest: 0, depth: 0, def_name: None };
    p.program()
}

/// Marker: an error was reported (or was already reported by the lexer).
struct Reported;

type PResult<T> = Result<T, Reported>;

struct Parser<'d> {
    toks: Vec<Token>,
    pos: usize,
    diags: &'d mut Vec<Diagnostic>,
    nest: usize,
    depth: usize,
    /// Name of the definition being parsed (for recovery).
    def_name: Option<String>,
}

impl Parser<'_> {
    // ---- token access -------------------------------------------------

    fn tok(&self) -> &Tok {
        self.toks.get(self.pos).map_or(&Tok::Eof, |t| &t.tok)
    }

    fn span(&self) -> Span {
        self.toks.get(self.pos).or(self.toks.last()).map_or(Span::default(), |t| t.span)
    }

    fn bump(&mut self) -> Span {
        let s = self.span();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        s
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.tok() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Reports `msg` at the current token, unless that token is an
    /// already-reported lexer error.
    fn fail<T>(&mut self, msg: impl Into<String>) -> PResult<T> {
        self.fail_as(Code::Syntax, msg)
    }

    /// [`Parser::fail`] with another code than [`Code::Syntax`].
    fn fail_as<T>(&mut self, code: Code, msg: impl Into<String>) -> PResult<T> {
        if *self.tok() != Tok::Error {
            let span = self.span();
            self.diags.push(Diagnostic::new(code, span, msg));
        }
        Err(Reported)
    }

    fn fail_at<T>(&mut self, code: Code, span: Span, msg: impl Into<String>) -> PResult<T> {
        self.diags.push(Diagnostic::new(code, span, msg));
        Err(Reported)
    }

    fn expect(&mut self, t: &Tok, what: &str) -> PResult<Span> {
        if self.tok() == t {
            Ok(self.bump())
        } else {
            let found = self.tok().to_string();
            self.fail(format!("expected {what}, found {found}"))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        if let Tok::Ident(name) = self.tok() {
            let name = name.clone();
            let span = self.bump();
            Ok(Ident { name, span })
        } else {
            let found = self.tok().to_string();
            self.fail(format!("expected {what}, found {found}"))
        }
    }

    /// An identifier or `_` (as the name `_`).
    fn binder(&mut self, what: &str) -> PResult<Ident> {
        if *self.tok() == Tok::Underscore {
            let span = self.bump();
            return Ok(Ident { name: "_".into(), span });
        }
        self.ident(what)
    }

    // ---- nesting limits ----------------------------------------------

    fn enter(&mut self) -> PResult<()> {
        if self.nest >= MAX_NESTING || self.depth >= MAX_DEPTH {
            let span = self.span();
            return self.fail_at(
                Code::NestingLimit,
                span,
                format!("expression nested too deeply (the limit is {MAX_NESTING} levels)"),
            );
        }
        self.nest += 1;
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.nest = self.nest.saturating_sub(1);
        self.depth = self.depth.saturating_sub(1);
    }

    /// Runs `f` one nesting level deeper.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        self.enter()?;
        let r = f(self);
        self.leave();
        r
    }

    /// One more element of a flat chain (operands of left-associative
    /// operators, postfix operations, `for` binders).
    fn chain_step(&mut self, span: Span) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.fail_at(
                Code::NestingLimit,
                span,
                format!("expression too deeply nested or too long (the limit is {MAX_DEPTH} levels)"),
            );
        }
        Ok(())
    }

    // ---- definitions ---------------------------------------------------

    fn program(&mut self) -> Parsed {
        let mut defs = Vec::new();
        let mut broken = Vec::new();
        loop {
            match self.tok() {
                Tok::Eof => break,
                Tok::Def => {
                    self.def_name = None;
                    self.nest = 0;
                    self.depth = 0;
                    let r = self.def();
                    let r = r.and_then(|d| match self.tok() {
                        Tok::Def | Tok::Eof => Ok(d),
                        t => {
                            let msg = format!("expected `def` or end of file after the definition body, found {t}");
                            self.fail(msg)
                        }
                    });
                    match r {
                        Ok(d) => defs.push(d),
                        Err(Reported) => {
                            broken.extend(self.def_name.take());
                            self.skip_to_def();
                        }
                    }
                }
                t => {
                    let msg = format!("expected a definition `def NAME(PARAM: TYPE, ...) -> TYPE = EXPR`, found {t}");
                    let _ = self.fail::<()>(msg);
                    self.bump();
                    self.skip_to_def();
                }
            }
        }
        Parsed { program: Program { defs }, broken }
    }

    fn skip_to_def(&mut self) {
        while !matches!(self.tok(), Tok::Def | Tok::Eof) {
            self.bump();
        }
    }

    fn def(&mut self) -> PResult<Def> {
        let keyword = self.expect(&Tok::Def, "`def`")?;
        let name = self.ident("the name of the definition")?;
        self.def_name = Some(name.name.clone());
        self.expect(&Tok::LParen, "`(` and the parameters")?;
        let mut params = Vec::new();
        while *self.tok() != Tok::RParen {
            let pname = self.ident("a parameter name")?;
            self.expect(&Tok::Colon, "`:` and the type of the parameter")?;
            let ty = self.ty()?;
            params.push(Param { name: pname, ty });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RParen, "`,` or `)`")?;
        self.expect(&Tok::Arrow, "`->` and the result type")?;
        let result = self.ty()?;
        self.expect(&Tok::Assign, "`=` and the body of the definition")?;
        let body = self.expr()?;
        Ok(Def { name, params, result, body, keyword })
    }

    // ---- types ---------------------------------------------------------

    fn ty(&mut self) -> PResult<TypeExpr> {
        self.nested(|p| p.ty_inner())
    }

    fn scalar_name(name: &str) -> Option<Scalar> {
        match name {
            "f64" => Some(Scalar::F64),
            "i64" => Some(Scalar::I64),
            "bool" => Some(Scalar::Bool),
            _ => None,
        }
    }

    fn scalar_ty(&mut self) -> PResult<(Scalar, Span)> {
        match self.tok().clone() {
            Tok::Ident(name) => match Self::scalar_name(&name) {
                Some(s) => Ok((s, self.bump())),
                None => self.fail_as(
                    Code::UnknownType,
                    format!("unknown type `{name}` (the element types are f64, i64 and bool)"),
                ),
            },
            Tok::LParen => self.fail_as(
                Code::ArrayOfTuples,
                "arrays of tuples do not exist: the element type must be f64, i64 or bool",
            ),
            t => self.fail(format!("expected an element type (f64, i64 or bool), found {t}")),
        }
    }

    fn ty_inner(&mut self) -> PResult<TypeExpr> {
        let start = self.span();
        match self.tok().clone() {
            Tok::LBracket => {
                let mut dims = Vec::new();
                while *self.tok() == Tok::LBracket {
                    let open = self.bump();
                    if *self.tok() == Tok::RBracket {
                        return self.fail("expected a size (a size variable or an integer) between `[` and `]`");
                    }
                    let saved = self.depth;
                    let size = self.size_sum();
                    self.depth = saved;
                    let (size, span) = size?;
                    let kind = match size {
                        arrayad_ir::SizeExpr::Var(v) => DimKind::Var(v),
                        arrayad_ir::SizeExpr::Lit(n) => DimKind::Lit(n),
                        e => DimKind::Expr(e),
                    };
                    let dim = Dim { kind, span };
                    self.expect(&Tok::RBracket, "`]` (a size is a size variable, an integer or an expression of them with + - * / and parentheses)")?;
                    dims.push(dim);
                    if dims.len() > MAX_RANK {
                        return self.fail_at(
                            Code::RankLimit,
                            open,
                            format!("arrays of rank above {MAX_RANK} are not supported"),
                        );
                    }
                }
                let (elem, end) = self.scalar_ty()?;
                Ok(TypeExpr { kind: TypeKind::Array { elem, dims }, span: start.to(end) })
            }
            Tok::LParen => {
                self.bump();
                if *self.tok() == Tok::RParen {
                    return self.fail_as(Code::EmptyTuple, "empty tuple type `()`: tuples have two or more components");
                }
                let mut elems = vec![self.ty()?];
                while self.eat(&Tok::Comma) {
                    if *self.tok() == Tok::RParen {
                        break;
                    }
                    elems.push(self.ty()?);
                }
                let end = self.expect(&Tok::RParen, "`,` or `)`")?;
                if elems.len() == 1 {
                    let mut t = elems.pop().ok_or(Reported)?;
                    t.span = start.to(end);
                    return Ok(t);
                }
                Ok(TypeExpr { kind: TypeKind::Tuple(elems), span: start.to(end) })
            }
            Tok::Ident(_) => {
                let (s, span) = self.scalar_ty()?;
                Ok(TypeExpr { kind: TypeKind::Scalar(s), span })
            }
            t => self.fail(format!("expected a type, found {t}")),
        }
    }

    /// A size expression: `+ -` of products (LANGUAGE.md section 11).
    fn size_sum(&mut self) -> PResult<(arrayad_ir::SizeExpr, Span)> {
        let (mut e, mut span) = self.size_product()?;
        loop {
            let op = match self.tok() {
                Tok::Plus => arrayad_ir::SizeOp::Add,
                Tok::Minus => arrayad_ir::SizeOp::Sub,
                _ => return Ok((e, span)),
            };
            let at = self.bump();
            self.chain_step(at)?;
            let (r, rs) = self.size_product()?;
            e = arrayad_ir::SizeExpr::Bin(op, Box::new(e), Box::new(r));
            span = span.to(rs);
        }
    }

    /// `* /` of size atoms.
    fn size_product(&mut self) -> PResult<(arrayad_ir::SizeExpr, Span)> {
        let (mut e, mut span) = self.size_atom()?;
        loop {
            let op = match self.tok() {
                Tok::Star => arrayad_ir::SizeOp::Mul,
                Tok::Slash => arrayad_ir::SizeOp::Div,
                _ => return Ok((e, span)),
            };
            let at = self.bump();
            self.chain_step(at)?;
            let (r, rs) = self.size_atom()?;
            e = arrayad_ir::SizeExpr::Bin(op, Box::new(e), Box::new(r));
            span = span.to(rs);
        }
    }

    /// A size variable, an integer literal or a parenthesised size.
    fn size_atom(&mut self) -> PResult<(arrayad_ir::SizeExpr, Span)> {
        match self.tok().clone() {
            Tok::Ident(name) => Ok((arrayad_ir::SizeExpr::Var(name), self.bump())),
            Tok::Int(v) => match i64::try_from(v) {
                Ok(v) => Ok((arrayad_ir::SizeExpr::Lit(v), self.bump())),
                Err(_) => self.fail_as(Code::LiteralOutOfRange, format!("array size {v} is too large")),
            },
            Tok::LParen => {
                let open = self.bump();
                let (e, _) = self.nested(|p| p.size_sum())?;
                let close = self.expect(&Tok::RParen, "`)`")?;
                Ok((e, open.to(close)))
            }
            t => self.fail(format!(
                "expected a size (a size variable, an integer or an expression of them with + - * /), found {t}"
            )),
        }
    }

    // ---- patterns ------------------------------------------------------

    fn pattern(&mut self) -> PResult<Pattern> {
        self.nested(|p| p.pattern_inner())
    }

    fn pattern_inner(&mut self) -> PResult<Pattern> {
        match self.tok().clone() {
            Tok::Ident(name) => Ok(Pattern { kind: PatternKind::Var(name), span: self.bump() }),
            Tok::Underscore => Ok(Pattern { kind: PatternKind::Wildcard, span: self.bump() }),
            Tok::LParen => {
                let start = self.bump();
                if *self.tok() == Tok::RParen {
                    return self
                        .fail_as(Code::EmptyTuple, "empty tuple pattern `()`: tuples have two or more components");
                }
                let mut elems = vec![self.pattern()?];
                while self.eat(&Tok::Comma) {
                    if *self.tok() == Tok::RParen {
                        break;
                    }
                    elems.push(self.pattern()?);
                }
                let end = self.expect(&Tok::RParen, "`,` or `)`")?;
                if elems.len() == 1 {
                    let mut p = elems.pop().ok_or(Reported)?;
                    p.span = start.to(end);
                    return Ok(p);
                }
                Ok(Pattern { kind: PatternKind::Tuple(elems), span: start.to(end) })
            }
            t => self.fail(format!("expected a pattern (a name, `_` or a tuple pattern), found {t}")),
        }
    }
}

#[cfg(test)]
mod tests;
