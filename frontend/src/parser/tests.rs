//! Parser tests: precedence, chains, recovery and nesting limits.

use super::*;

fn parse_ok(src: &str) -> Program {
    let mut d = Vec::new();
    let p = parse_program(src, &mut d);
    assert!(d.is_empty(), "{d:?}");
    p.program
}

fn body(src: &str) -> Expr {
    parse_ok(&format!("def f() -> f64 = {src}")).defs.remove(0).body
}

/// Renders an expression with explicit parentheses.
fn show(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(x) => format!("{x:?}"),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Var(v) => v.clone(),
        ExprKind::Binary { op, lhs, rhs, .. } => format!("({} {} {})", show(lhs), op.symbol(), show(rhs)),
        ExprKind::Unary { op, operand } => {
            format!("({}{})", if *op == UnaryOp::Neg { "-" } else { "!" }, show(operand))
        }
        ExprKind::Call { func, args } => {
            format!("{}({})", func.name, args.iter().map(show).collect::<Vec<_>>().join(", "))
        }
        ExprKind::Index { array, indices } => {
            format!("{}[{}]", show(array), indices.iter().map(show).collect::<Vec<_>>().join(", "))
        }
        ExprKind::Proj { tuple, index, .. } => format!("{}.{}", show(tuple), index),
        ExprKind::If { cond, then_branch, else_branch } => {
            format!("(if {} then {} else {})", show(cond), show(then_branch), show(else_branch))
        }
        ExprKind::Let { bindings, body } => {
            let bs: Vec<String> =
                bindings.iter().map(|b| format!("let {:?} = {}", b.pat.kind, show(&b.value))).collect();
            format!("({} in {})", bs.join(" "), show(body))
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn precedence() {
    assert_eq!(show(&body("a || b && c == d + e * f")), "(a || (b && (c == (d + (e * f)))))");
    assert_eq!(show(&body("-x ** 2")), "(-(x ** 2))");
    assert_eq!(show(&body("a ** b ** c")), "(a ** (b ** c))");
    assert_eq!(show(&body("2 ** -1")), "(2 ** (-1))");
    assert_eq!(show(&body("a - b - c")), "((a - b) - c)");
    assert_eq!(show(&body("a / b % c * d")), "(((a / b) % c) * d)");
    assert_eq!(show(&body("!a && b")), "((!a) && b)");
    assert_eq!(show(&body("-a[0].1 * f(x)[1, 2]")), "((-a[0].1) * f(x)[1, 2])");
    assert_eq!(show(&body("t.0.1")), "t.0.1");
}

#[test]
fn keywords_extend_right() {
    assert_eq!(show(&body("1 + if c then 2 else 3 + 4")), "(1 + (if c then 2 else (3 + 4)))");
    assert_eq!(show(&body("let a = 1 let b = 2 in a + b")), "(let Var(\"a\") = 1 let Var(\"b\") = 2 in (a + b))");
    assert_eq!(show(&body("let a = 1 in let b = 2 in a")), "(let Var(\"a\") = 1 let Var(\"b\") = 2 in a)");
}

#[test]
fn comparisons_are_non_associative() {
    let mut d = Vec::new();
    parse_program("def f(a: i64) -> bool = a < 1 < 2", &mut d);
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("non-associative"), "{}", d[0].message);
    assert_eq!(d[0].span.start, 30);
}

#[test]
fn recovery_at_next_def() {
    let mut d = Vec::new();
    let p = parse_program("def f() -> f64 = 1 +\ndef g() -> f64 = )\ndef h() -> f64 = 2.0", &mut d);
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(p.program.defs.len(), 1);
    assert_eq!(p.broken, vec!["f".to_string(), "g".to_string()]);
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let src = format!("def f() -> f64 = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let mut d = Vec::new();
    parse_program(&src, &mut d);
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("nested too deeply"));
    let src = format!("def f() -> f64 = 1{}", " + 1".repeat(100_000));
    let mut d = Vec::new();
    parse_program(&src, &mut d);
    assert_eq!(d.len(), 1);
}
