//! The lexer: source text to tokens with spans.
//!
//! Invalid input never stops the lexer: a run of unexpected characters or a
//! malformed number is reported once and becomes a [`Tok::Error`] token,
//! which the parser skips without reporting again.

use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::span::Span;
use std::fmt;

/// A token kind.
#[derive(Clone, PartialEq, Debug)]
pub(crate) enum Tok {
    Ident(String),
    /// An integer literal (the value fits `u64`; the checker checks `i64`).
    Int(u64),
    Float(f64),
    Def,
    Let,
    In,
    If,
    Then,
    Else,
    For,
    Loop,
    While,
    Do,
    With,
    True,
    False,
    /// `_`
    Underscore,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Colon,
    Dot,
    /// `->`
    Arrow,
    /// `=>`
    FatArrow,
    /// `=`
    Assign,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    StarStar,
    Slash,
    Percent,
    AndAnd,
    OrOr,
    Bang,
    /// Invalid input, already reported.
    Error,
    Eof,
}

impl fmt::Display for Tok {
    /// How a token is named in "expected X, found Y" messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Tok::Ident(n) => return write!(f, "`{n}`"),
            Tok::Int(v) => return write!(f, "`{v}`"),
            Tok::Float(x) => return write!(f, "`{x:?}`"),
            Tok::Def => "keyword `def`",
            Tok::Let => "keyword `let`",
            Tok::In => "keyword `in`",
            Tok::If => "keyword `if`",
            Tok::Then => "keyword `then`",
            Tok::Else => "keyword `else`",
            Tok::For => "keyword `for`",
            Tok::Loop => "keyword `loop`",
            Tok::While => "keyword `while`",
            Tok::Do => "keyword `do`",
            Tok::With => "keyword `with`",
            Tok::True => "`true`",
            Tok::False => "`false`",
            Tok::Underscore => "`_`",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::Comma => "`,`",
            Tok::Colon => "`:`",
            Tok::Dot => "`.`",
            Tok::Arrow => "`->`",
            Tok::FatArrow => "`=>`",
            Tok::Assign => "`=`",
            Tok::EqEq => "`==`",
            Tok::NotEq => "`!=`",
            Tok::Lt => "`<`",
            Tok::Le => "`<=`",
            Tok::Gt => "`>`",
            Tok::Ge => "`>=`",
            Tok::Plus => "`+`",
            Tok::Minus => "`-`",
            Tok::Star => "`*`",
            Tok::StarStar => "`**`",
            Tok::Slash => "`/`",
            Tok::Percent => "`%`",
            Tok::AndAnd => "`&&`",
            Tok::OrOr => "`||`",
            Tok::Bang => "`!`",
            Tok::Error => "an invalid token",
            Tok::Eof => "end of file",
        };
        f.write_str(s)
    }
}

/// A token and its span.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Splits `source` into tokens; the last token is always [`Tok::Eof`]
/// (with an empty span just after the last real token). Errors go to `diags`.
pub(crate) fn lex(source: &str, diags: &mut Vec<Diagnostic>) -> Vec<Token> {
    let mut lx = Lexer { src: source, bytes: source.as_bytes(), pos: 0, toks: Vec::new(), diags };
    lx.run();
    let end = lx.toks.last().map_or(0, |t| t.span.end);
    lx.toks.push(Token { tok: Tok::Eof, span: Span::new(end, end) });
    lx.toks
}

struct Lexer<'a, 'd> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    toks: Vec<Token>,
    diags: &'d mut Vec<Diagnostic>,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Lexer<'_, '_> {
    fn peek(&self, k: usize) -> Option<u8> {
        self.bytes.get(self.pos + k).copied()
    }

    fn push(&mut self, tok: Tok, start: usize) {
        self.toks.push(Token { tok, span: Span::new(start, self.pos) });
    }

    fn run(&mut self) {
        if self.src.starts_with('\u{feff}') {
            self.pos = '\u{feff}'.len_utf8();
        }
        while let Some(b) = self.peek(0) {
            let start = self.pos;
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => self.pos += 1,
                b'/' if self.peek(1) == Some(b'/') => {
                    while let Some(c) = self.peek(0) {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                b'0'..=b'9' => self.number(),
                _ if is_ident_start(b) => self.ident(),
                _ => {
                    if let Some(tok) = self.punct() {
                        self.push(tok, start);
                    } else {
                        self.invalid();
                    }
                }
            }
        }
    }

    /// Operators and delimiters (longest match); `None` if `b` starts none.
    fn punct(&mut self) -> Option<Tok> {
        let two = |s: &mut Self, t: Tok| {
            s.pos += 2;
            Some(t)
        };
        let one = |s: &mut Self, t: Tok| {
            s.pos += 1;
            Some(t)
        };
        let (b, next) = (self.peek(0)?, self.peek(1));
        match (b, next) {
            (b'-', Some(b'>')) => two(self, Tok::Arrow),
            (b'=', Some(b'>')) => two(self, Tok::FatArrow),
            (b'=', Some(b'=')) => two(self, Tok::EqEq),
            (b'!', Some(b'=')) => two(self, Tok::NotEq),
            (b'<', Some(b'=')) => two(self, Tok::Le),
            (b'>', Some(b'=')) => two(self, Tok::Ge),
            (b'*', Some(b'*')) => two(self, Tok::StarStar),
            (b'&', Some(b'&')) => two(self, Tok::AndAnd),
            (b'|', Some(b'|')) => two(self, Tok::OrOr),
            (b'(', _) => one(self, Tok::LParen),
            (b')', _) => one(self, Tok::RParen),
            (b'[', _) => one(self, Tok::LBracket),
            (b']', _) => one(self, Tok::RBracket),
            (b',', _) => one(self, Tok::Comma),
            (b':', _) => one(self, Tok::Colon),
            (b'.', _) => one(self, Tok::Dot),
            (b'=', _) => one(self, Tok::Assign),
            (b'<', _) => one(self, Tok::Lt),
            (b'>', _) => one(self, Tok::Gt),
            (b'+', _) => one(self, Tok::Plus),
            (b'-', _) => one(self, Tok::Minus),
            (b'*', _) => one(self, Tok::Star),
            (b'/', _) => one(self, Tok::Slash),
            (b'%', _) => one(self, Tok::Percent),
            (b'!', _) => one(self, Tok::Bang),
            _ => None,
        }
    }

    /// True if the character at the current position starts a token or is
    /// whitespace.
    fn at_token_start(&self) -> bool {
        match self.peek(0) {
            None => true,
            Some(b'&') => self.peek(1) == Some(b'&'),
            Some(b'|') => self.peek(1) == Some(b'|'),
            Some(b) => b.is_ascii_whitespace() || is_ident_char(b) || b"()[],:.=<>+-*/%!".contains(&b),
        }
    }

    /// A run of characters that start no token: one error for the run.
    fn invalid(&mut self) {
        let start = self.pos;
        let first = self.src.get(start..).and_then(|s| s.chars().next()).unwrap_or('?');
        while self.pos == start || !self.at_token_start() {
            let Some(c) = self.src.get(self.pos..).and_then(|s| s.chars().next()) else { break };
            self.pos += c.len_utf8();
        }
        if self.pos == start {
            // Defensive: always make progress, to the next character boundary.
            self.pos += 1;
            while self.pos < self.src.len() && !self.src.is_char_boundary(self.pos) {
                self.pos += 1;
            }
        }
        let msg = match first {
            '&' => "unexpected character `&` (did you mean `&&`?)".to_string(),
            '|' => "unexpected character `|` (did you mean `||`?)".to_string(),
            c if c.is_control() => format!("unexpected character U+{:04X}", c as u32),
            c => format!("unexpected character `{c}`"),
        };
        self.diags.push(Diagnostic::new(Code::UnexpectedCharacter, Span::new(start, self.pos), msg));
        self.push(Tok::Error, start);
    }

    fn ident(&mut self) {
        let start = self.pos;
        while self.peek(0).is_some_and(is_ident_char) {
            self.pos += 1;
        }
        let text = self.src.get(start..self.pos).unwrap_or("");
        let tok = match text {
            "def" => Tok::Def,
            "let" => Tok::Let,
            "in" => Tok::In,
            "if" => Tok::If,
            "then" => Tok::Then,
            "else" => Tok::Else,
            "for" => Tok::For,
            "loop" => Tok::Loop,
            "while" => Tok::While,
            "do" => Tok::Do,
            "with" => Tok::With,
            "true" => Tok::True,
            "false" => Tok::False,
            "_" => Tok::Underscore,
            _ => Tok::Ident(text.to_string()),
        };
        self.push(tok, start);
    }

    fn digits(&mut self) {
        while self.peek(0).is_some_and(|c| c.is_ascii_digit() || c == b'_') {
            self.pos += 1;
        }
    }

    /// `123`, `1_000`, `1.5`, `2e-3`. Right after a `.` (a tuple
    /// projection such as `t.0.1`) only an integer is taken.
    fn number(&mut self) {
        let start = self.pos;
        let after_dot = self.toks.last().is_some_and(|t| t.tok == Tok::Dot && t.span.end == start);
        self.digits();
        let mut float = false;
        if !after_dot {
            if self.peek(0) == Some(b'.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
                float = true;
                self.pos += 1;
                self.digits();
            }
            if matches!(self.peek(0), Some(b'e' | b'E')) {
                let sign = usize::from(matches!(self.peek(1), Some(b'+' | b'-')));
                if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                    float = true;
                    self.pos += 1 + sign;
                    self.digits();
                }
            }
        }
        // A number directly followed by letters (`12abc`) is malformed.
        let bad_suffix = self.peek(0).is_some_and(is_ident_char);
        while self.peek(0).is_some_and(is_ident_char) {
            self.pos += 1;
        }
        let text = self.src.get(start..self.pos).unwrap_or("");
        if bad_suffix {
            self.error(Code::MalformedNumber, start, format!("malformed number `{text}`"));
            return;
        }
        let clean: String = text.chars().filter(|&c| c != '_').collect();
        if float {
            match clean.parse::<f64>() {
                Ok(x) if x.is_finite() => self.push(Tok::Float(x), start),
                Ok(_) => self.error(
                    Code::LiteralOutOfRange,
                    start,
                    format!("float literal `{text}` is out of range for f64"),
                ),
                Err(_) => self.error(Code::MalformedNumber, start, format!("malformed number `{text}`")),
            }
        } else {
            match clean.parse::<u64>() {
                Ok(v) => self.push(Tok::Int(v), start),
                Err(_) => self.error(
                    Code::LiteralOutOfRange,
                    start,
                    format!("integer literal `{text}` is too large (the largest i64 is {})", i64::MAX),
                ),
            }
        }
    }

    fn error(&mut self, code: Code, start: usize, msg: String) {
        self.diags.push(Diagnostic::new(code, Span::new(start, self.pos), msg));
        self.push(Tok::Error, start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> (Vec<Tok>, usize) {
        let mut d = Vec::new();
        let t = lex(s, &mut d).into_iter().map(|t| t.tok).collect();
        (t, d.len())
    }

    #[test]
    fn numbers() {
        let (t, e) = toks("123 1.5 2e-3 1_000 1E+2 7e 1e999");
        assert_eq!(e, 2, "`7e` is malformed, `1e999` out of range");
        assert_eq!(t[0], Tok::Int(123));
        assert_eq!(t[1], Tok::Float(1.5));
        assert_eq!(t[2], Tok::Float(2e-3));
        assert_eq!(t[3], Tok::Int(1000));
        assert_eq!(t[4], Tok::Float(100.0));
        assert_eq!(t[5], Tok::Error);
        assert_eq!(t[6], Tok::Error);
    }

    #[test]
    fn byte_order_mark_is_skipped() {
        let (t, e) = toks("\u{feff}def");
        assert_eq!((t, e), (vec![Tok::Def, Tok::Eof], 0));
    }

    #[test]
    fn projection_after_dot_is_integer() {
        let (t, e) = toks("t.0.1");
        assert_eq!(e, 0);
        assert_eq!(t, vec![Tok::Ident("t".into()), Tok::Dot, Tok::Int(0), Tok::Dot, Tok::Int(1), Tok::Eof]);
    }

    #[test]
    fn operators_longest_match() {
        let (t, _) = toks("-> => == != <= >= ** && || < > = ! * -");
        assert_eq!(
            t,
            vec![
                Tok::Arrow,
                Tok::FatArrow,
                Tok::EqEq,
                Tok::NotEq,
                Tok::Le,
                Tok::Ge,
                Tok::StarStar,
                Tok::AndAnd,
                Tok::OrOr,
                Tok::Lt,
                Tok::Gt,
                Tok::Assign,
                Tok::Bang,
                Tok::Star,
                Tok::Minus,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn comments_and_keywords() {
        let (t, e) = toks("def // comment ∀ λ\nlet _x _ in");
        assert_eq!(e, 0);
        assert_eq!(t, vec![Tok::Def, Tok::Let, Tok::Ident("_x".into()), Tok::Underscore, Tok::In, Tok::Eof]);
    }

    #[test]
    fn invalid_characters_one_error_per_run() {
        let mut d = Vec::new();
        let t = lex("a λμ$ b & c", &mut d);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].message.contains('λ'));
        assert!(d[1].message.contains("&&"));
        assert_eq!(t.iter().filter(|t| t.tok == Tok::Error).count(), 2);
    }

    #[test]
    fn huge_integer_is_an_error() {
        let (t, e) = toks("99999999999999999999999");
        assert_eq!(e, 1);
        assert_eq!(t[0], Tok::Error);
    }
}
