//! Lowering: small programs covering every expression form and builtin are
//! compiled, verified with the IR verifier, and their printed IR is checked
//! for the expected operations.

use arrayad_ir::printer::print_program;
use arrayad_ir::verify::verify_program;
use arrayad_ir::{Atom, Block, Expr, Function, Program, Scalar, SrcDim, SrcType, StmtKind, Type};

/// Compiles `src`, verifies the IR and returns the program and its text.
fn compile(src: &str) -> (Program, String) {
    let p = match arrayad_frontend::compile("t.arr", src) {
        Ok(p) => p,
        Err(d) => panic!("compile failed:\n{d}\nsource:\n{src}"),
    };
    if let Err(e) = verify_program(&p) {
        panic!("{e}\n{}", print_program(&p));
    }
    let text = print_program(&p);
    (p, text)
}

/// The printed IR of `src`.
fn ir(src: &str) -> String {
    compile(src).1
}

/// Asserts that `text` contains every needle.
#[track_caller]
fn has(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "missing `{n}` in:\n{text}");
    }
}

#[track_caller]
fn lacks(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(!text.contains(n), "unexpected `{n}` in:\n{text}");
    }
}

/// Every expression of every statement, depth first.
fn exprs(b: &Block) -> Vec<&Expr> {
    let mut out = Vec::new();
    fn go<'a>(b: &'a Block, out: &mut Vec<&'a Expr>) {
        for s in &b.stmts {
            if let StmtKind::Let { expr, .. } = &s.kind {
                out.push(expr);
                match expr {
                    Expr::Build { body, .. } | Expr::Loop { body, .. } => go(body, out),
                    Expr::If { then_branch, else_branch, .. } => {
                        go(then_branch, out);
                        go(else_branch, out);
                    }
                    _ => {}
                }
            }
        }
    }
    go(b, &mut out);
    out
}

fn func<'a>(p: &'a Program, name: &str) -> &'a Function {
    p.funcs.iter().find(|f| f.name == name).expect("function")
}

#[test]
fn program_structure_and_source_order() {
    let (p, _) = compile(
        "def b(x: f64) -> f64 = a(x) * 2.0\n\
         def a(x: f64) -> f64 = x + 1.0\n",
    );
    assert_eq!(p.file, "t.arr");
    assert_eq!(p.funcs.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), vec!["b", "a"]);
    assert_eq!(p.funcs[0].loc.line, 1);
    assert_eq!(p.funcs[1].loc.line, 2);
    assert_eq!(p.funcs[1].loc.col, 1);
    let calls: Vec<_> = exprs(&p.funcs[0].body)
        .into_iter()
        .filter_map(|e| if let Expr::Call { func, .. } = e { Some(func.0) } else { None })
        .collect();
    assert_eq!(calls, vec![1]);
}

#[test]
fn scalar_arithmetic_and_locations() {
    let t = ir("def f(x: f64, y: f64) -> f64 =\n  x * y + x / y - -x\n");
    has(&t, &["mul x%0 y%1  @2:3", "div x%0 y%1  @2:11", "neg x%0  @2:19", "add ", "sub "]);
    let t = ir("def f(i: i64, j: i64) -> i64 = i % j + i / j");
    has(&t, &["rem i%0 j%1", "div i%0 j%1", "add "]);
}

#[test]
fn power_is_right_associative_and_binds_tighter_than_minus() {
    let (p, t) = compile("def f(x: f64) -> f64 = -x ** 2 ** 3");
    has(&t, &["pow 2.0 3.0", "neg "]);
    // -(x ** (2 ** 3)): the negation comes last.
    let last = exprs(&p.funcs[0].body).into_iter().last().cloned();
    assert!(matches!(last, Some(Expr::Unary(arrayad_ir::UnOp::Neg, _))), "{t}");
}

#[test]
fn comparisons_and_short_circuit_logic() {
    let t = ir("def f(a: f64, b: f64) -> bool = a < b && b <= 2.0 || !(a == b) && a != 1.0 || a > b || a >= b");
    has(&t, &["lt a%0 b%1", "le b%1 2.0", "eq a%0 b%1", "ne a%0 1.0", "gt ", "ge ", "not "]);
    // `&&` and `||` are branches, not eager boolean operations.
    has(&t, &["if ", "yield false", "yield true"]);
    lacks(&t, &["and ", "or "]);
}

#[test]
fn and_short_circuits_into_if() {
    let (p, _) = compile("def f(a: bool, b: bool) -> bool = a && b");
    let body = &p.funcs[0].body;
    match &body.stmts[0].kind {
        StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. } => {
            assert_eq!(else_branch.results, vec![Atom::Bool(false)]);
            assert_eq!(then_branch.results.len(), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn integer_literals_become_f64_where_expected() {
    // Next to an f64 operand, nested literal arithmetic included.
    has(&ir("def f(x: f64) -> f64 = 2 * 3 * x + 1"), &["mul 2.0 3.0", "add mul%", " 1.0"]);
    // As an argument of a definition and of builtins.
    has(&ir("def g(x: f64) -> f64 = x\ndef f() -> f64 = g(1)"), &["call g(1.0)"]);
    has(
        &ir("def f(x: f64) -> f64 = max(x, 0) + exp(1) + pow(x, 2) + atan2(1, x)"),
        &["max x%0 0.0", "exp 1.0", "pow x%0 2.0", "atan2 1.0 x%0"],
    );
    // `**` is f64 only.
    has(&ir("def f(x: f64) -> f64 = x ** 2"), &["pow x%0 2.0"]);
    // Annotated let.
    has(&ir("def f() -> f64 = let x: f64 = 1 in x"), &["return 1.0"]);
    // As an if branch whose other branch is f64.
    has(&ir("def f(c: bool, x: f64) -> f64 = if c then 1 else x"), &["yield 1.0"]);
    // As the body of an f64 definition, and in a tuple result.
    has(&ir("def f() -> f64 = 3"), &["return 3.0"]);
    has(&ir("def f(x: f64) -> (f64, i64) = (0, 0)"), &["return 0.0, 0i"]);
    // In array literals and comparisons.
    has(&ir("def f() -> [2]f64 = [1, 2.5]"), &["[1.0, 2.5]"]);
    has(&ir("def f(x: f64) -> bool = x < 0"), &["lt x%0 0.0"]);
    // Broadcast against an f64 array.
    has(&ir("def f(v: [n]f64) -> [n]f64 = v - 1"), &["sub elem%", " 1.0"]);
    // Where an i64 is fine, literals stay i64.
    has(&ir("def f(i: i64) -> i64 = i * 2 - 1"), &["mul i%0 2i", "1i"]);
    has(&ir("def f(v: [n]f64) -> f64 = v[1]"), &["v%0[1i]"]);
    // The most negative i64.
    has(&ir("def f() -> i64 = -9223372036854775808"), &["return -9223372036854775808i"]);
}

#[test]
fn loop_state_from_integer_literal_becomes_f64_when_the_body_needs_it() {
    let (p, t) = compile("def f(x: [n]f64) -> f64 = loop acc = 0 for i < n do acc + x[i]");
    has(&t, &["loop (acc%", ") = (0.0) for i%"]);
    assert_eq!(p.funcs[0].result_types, vec![Type::F64]);
    // A counter stays i64.
    has(&ir("def f(n: i64) -> i64 = loop c = 0 for i < n do c + i"), &[") = (0i) for i%"]);
}

#[test]
fn conversions() {
    let t = ir("def f(i: i64, x: f64) -> (f64, i64, f64, i64) = (f64(i), i64(x), f64(x), i64(i))");
    has(&t, &["= f64 i%0", "= i64 x%1", "return result_0%2, result_1%3, x%1, i%0"]);
    // Elementwise on arrays.
    has(&ir("def f(v: [n]i64) -> [n]f64 = f64(v)"), &["build ", "f64 elem%"]);
}

#[test]
fn size_variables_bind_at_entry_and_are_checked() {
    let (p, t) = compile("def f(a: [n][m]f64, b: [m]f64, c: [3]i64) -> [n]f64 = for i < n => dot(a[i], b) + f64(m)");
    let f = &p.funcs[0];
    let sig_sizes = f.signature.size_vars();
    assert_eq!(sig_sizes, vec!["n".to_string(), "m".to_string()]);
    // Entry checks are located at the definition (where a call with
    // mismatched sizes fails); the result check at the declared size.
    has(
        &t,
        &[
            "let n%3: i64 = dim a%0 0  @1:1",
            "let m%4: i64 = dim a%0 1  @1:1",
            "check_size dim%5 == m%4 // argument `b` axis 0 must equal m (axis 1 of argument `a`)  @1:1",
            "check_size dim%6 == 3i // argument `c` axis 0 must equal 3  @1:1",
            "// result axis 0 must equal n  @1:47",
            "f64 m%4",
        ],
    );
    // Size variables are ordinary i64 values in the body.
    has(&ir("def f(x: [n]f64) -> i64 = n * 2"), &["mul n%1 2i"]);
    // The result check is the last statement.
    let last = f.body.stmts.last().map(|s| &s.kind);
    assert!(matches!(last, Some(StmtKind::CheckSize { b: Atom::Var(_), .. })), "{t}");
}

#[test]
fn tuples_are_flattened() {
    let (p, t) = compile(
        "def swap(p: (f64, [n]f64), k: i64) -> ([n]f64, (f64, i64)) = (p.1, (p.0, k))\n\
         def user(x: [n]f64) -> f64 =\n\
           let (v, (s, k)) = swap((1.5, x), 2)\n\
           let t = swap((s, v), k)\n\
           in s + v[0] + t.1.0 + f64(t.1.1)\n",
    );
    let swap = func(&p, "swap");
    assert_eq!(swap.params.len(), 3);
    assert_eq!(swap.param_types(), vec![Type::F64, Type::array(Scalar::F64, 1), Type::I64]);
    assert_eq!(swap.result_types, vec![Type::array(Scalar::F64, 1), Type::F64, Type::I64]);
    assert_eq!(swap.signature.params.len(), 2);
    assert!(matches!(swap.signature.params[0].ty, SrcType::Tuple(_)));
    assert_eq!(swap.signature.params[0].ty.to_string(), "(f64, [n]f64)");
    has(&t, &["def swap(p_0%0: f64, p_1%1: []f64, k%2: i64)", "return p_1%1, p_0%0, k%2"]);
    has(&t, &["call swap(1.5, x%0, 2i)", "let v%", ", s%", ", k%", "call swap(s%"]);
}

#[test]
fn if_with_tuple_type_has_several_results() {
    let (p, t) = compile("def f(c: bool, x: f64) -> (f64, i64) = if c then (x, 1) else (2, 3)");
    has(&t, &["yield x%1, 1i", "yield 2.0, 3i"]);
    match &p.funcs[0].body.stmts[0].kind {
        StmtKind::Let { vars, expr: Expr::If { .. } } => assert_eq!(vars.len(), 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn loop_with_tuple_state() {
    let (p, t) =
        compile("def fib(n: i64) -> f64 =\n  let (a, _) = loop (a, b) = (0.0, 1.0) for i < n do (b, a + b)\n  in a\n");
    has(&t, &["loop (a%", ", b%", ") = (0.0, 1.0) for i%", "yield b%", "  @2:16"]);
    let loop_expr = exprs(&p.funcs[0].body).into_iter().find(|e| matches!(e, Expr::Loop { .. })).cloned();
    match loop_expr {
        Some(Expr::Loop { states, init, body, .. }) => {
            assert_eq!(states.len(), 2);
            assert_eq!(init.len(), 2);
            assert_eq!(body.results.len(), 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn for_is_build_and_nested_for_is_nested_builds() {
    let t = ir("def f(x: [n]f64) -> [n]f64 = for i < n => f64(i) * x[i]");
    has(&t, &["build i%", " < n%1 =>"]);
    let (p, t) = compile("def f(a: [n][m]f64) -> [m][n]f64 = for j < m, i < n => a[i, j]");
    has(&t, &["build j%", "build i%", "a%0[i%", ", j%"]);
    let builds = exprs(&p.funcs[0].body).into_iter().filter(|e| matches!(e, Expr::Build { .. })).count();
    assert_eq!(builds, 2);
    // `for` bodies may be arrays (rank + 1).
    has(&ir("def f(n: i64) -> [2][2]i64 = for i < n => for j < n => i * j"), &["[][]i64 = build"]);
    // A wildcard index.
    has(&ir("def f(n: i64) -> [3]f64 = for _ < n => 1.0"), &["build i%"]);
}

#[test]
fn indexing_rows_and_slices() {
    let (p, t) = compile(
        "def f(a: [n][m]f64, i: i64, j: i64) -> ([m]f64, f64, [n][m]f64, [m]f64) = (a[i], a[i, j], a[1:i], a[0][:j])",
    );
    has(
        &t,
        &[
            ": []f64 = a%0[i%1]",
            ": f64 = a%0[i%1, j%2]",
            ": [][]f64 = a%0[1i:i%1]",
            "row%8: []f64 = a%0[0i]",
            "row%8[0i:j%2]",
        ],
    );
    let _ = p;
    // An omitted upper bound is the length.
    has(&ir("def f(a: [n]f64) -> f64 = sum(a[1:])"), &["dim a%0 0", "a%0[1i:len%"]);
}

#[test]
fn index_of_rank2_with_one_index_is_a_view() {
    let (p, _) = compile("def f(a: [n][m]f64) -> [m]f64 = a[0]");
    let e = exprs(&p.funcs[0].body).into_iter().find(|e| matches!(e, Expr::Index { .. })).cloned();
    match e {
        Some(Expr::Index { indices, .. }) => assert_eq!(indices, vec![Atom::I64(0)]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unused_size_var_result_of_literal() {
    has(&ir("def f(x: [n]f64) -> [2]f64 = [x[0], x[1]]"), &["// result axis 0 must equal 2"]);
}

#[test]
fn every_unary_math_builtin_scalar_and_elementwise() {
    let names = [
        "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "log1p", "expm1",
        "erf", "lgamma", "abs", "floor", "ceil",
    ];
    for n in names {
        let t = ir(&format!("def f(x: f64, v: [n][m]f64) -> (f64, [n][m]f64) = ({n}(x), {n}(v))"));
        has(&t, &[&format!("= {n} x%0"), &format!("= {n} elem%"), "build "]);
    }
}

#[test]
fn binary_builtins_scalar_elementwise_and_broadcast() {
    for (n, op) in [("pow", "pow"), ("atan2", "atan2"), ("min", "min"), ("max", "max")] {
        let t = ir(&format!(
            "def f(x: f64, v: [n]f64, w: [n]f64) -> (f64, [n]f64, [n]f64) = ({n}(x, x), {n}(v, w), {n}(x, v))"
        ));
        has(&t, &[&format!("{op} x%0 x%0"), "check_size", &format!("= {op} x%0 elem%")]);
    }
    has(&ir("def f(a: i64, b: i64) -> (i64, i64) = (min(a, b), max(a, 3))"), &["min a%0 b%1", "max a%0 3i"]);
}

#[test]
fn elementwise_arrays_check_every_axis_and_broadcast_scalars() {
    let (_, t) = compile("def f(a: [n][m]f64, b: [n][m]f64, s: f64) -> [n][m]f64 = a * b + s - -a");
    has(
        &t,
        &[
            "axis 0 of the right operand must equal axis 0 of the left operand",
            "axis 1 of the right operand must equal axis 1 of the left operand",
            "mul elem%",
            "add elem%",
            " s%2",
            "neg elem%",
        ],
    );
    // Rank-2 elementwise: nested builds, one multi-index per operand.
    has(&t, &["[][]f64 = build i%", "[]f64 = build i%", "a%0[i%"]);
    // Broadcast a scalar on the left.
    has(&ir("def f(v: [n]f64) -> [n]f64 = 2.0 / v"), &["div 2.0 elem%"]);
    // Elementwise i64 arithmetic.
    has(&ir("def f(v: [n]i64) -> [n]i64 = v % 3"), &["rem elem%", " 3i"]);
}

#[test]
fn reductions() {
    let t = ir("def f(v: [n]f64, w: [n]i64) -> (f64, i64, f64, f64, i64, f64) = (sum(v), sum(w), maximum(v), minimum(v), length(v), dot(v, v))");
    has(
        &t,
        &[
            "sum v%0",
            "sum w%1",
            "maximum v%0",
            "minimum v%0",
            "dim v%0 0",
            "the arguments of `dot` must have the same length",
            "mul x%",
            "sum products%",
        ],
    );
}

#[test]
fn sum_of_rank2_sums_the_columns() {
    let (p, t) = compile("def f(a: [n][m]f64) -> [m]f64 = sum(a)");
    has(&t, &["build j%", "build i%", "a%0[i%", "sum column%"]);
    let f = &p.funcs[0];
    assert_eq!(f.result_types, vec![Type::array(Scalar::F64, 1)]);
    let t3 = ir("def f(a: [n][m][k]i64) -> [m][k]i64 = sum(a)");
    has(&t3, &["[][]i64 = build j%", "sum column%"]);
}

#[test]
fn array_literals() {
    has(&ir("def f(x: f64) -> [3]f64 = [x, 2.0, x + 1.0]"), &["= [x%0, 2.0, add%"]);
    has(&ir("def f(v: [n]f64) -> [2][n]f64 = [v, v]"), &["[][]f64 = [v%0, v%0]"]);
    has(&ir("def f() -> [2][2]i64 = [[1, 2], [3, 4]]"), &["[1i, 2i]", "[3i, 4i]"]);
    has(&ir("def f() -> [2]bool = [true, false]"), &["[true, false]"]);
}

#[test]
fn let_chains_patterns_and_shadowing() {
    let t = ir("def f(x: f64) -> f64 = let a = x * 2.0 let a = a + 1.0 in let _ = a in let (p, q) = (a, x) in p * q");
    has(&t, &["let a%1: f64 = mul x%0 2.0", "let a%2: f64 = add a%1 1.0", "mul a%2 x%0"]);
    // An annotated let with sizes checks the shape.
    has(&ir("def f(v: [n]f64) -> f64 = let w: [n]f64 = v + 1.0 in sum(w)"), &["annotated value axis 0 must equal n"]);
}

#[test]
fn definitions_never_called_are_lowered_too() {
    let (p, _) = compile("def main(x: f64) -> f64 = x\ndef unused(b: bool) -> bool = !b");
    assert_eq!(p.funcs.len(), 2);
}

#[test]
fn bool_and_i64_results_and_params() {
    let (p, _) = compile("def f(b: bool, i: i64, v: [n]bool) -> (bool, [n]bool) = (b && v[i], v)");
    let f = &p.funcs[0];
    assert_eq!(f.param_types(), vec![Type::BOOL, Type::I64, Type::array(Scalar::Bool, 1)]);
    assert_eq!(f.signature.params[2].ty, SrcType::Array { elem: Scalar::Bool, dims: vec![SrcDim::Var("n".into())] });
}

#[test]
fn every_statement_has_a_location() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/all_forms.arr")).unwrap();
    let (p, t) = compile(&src);
    fn check(b: &Block, t: &str) {
        for s in &b.stmts {
            assert!(s.loc.line > 0 && s.loc.col > 0, "statement without location in\n{t}");
            if let StmtKind::Let { expr, .. } = &s.kind {
                match expr {
                    Expr::Build { body, .. } | Expr::Loop { body, .. } => check(body, t),
                    Expr::If { then_branch, else_branch, .. } => {
                        check(then_branch, t);
                        check(else_branch, t);
                    }
                    _ => {}
                }
            }
        }
    }
    for f in &p.funcs {
        check(&f.body, &t);
    }
}

#[test]
fn unicode_columns_count_characters() {
    // A comment with non-ASCII text before code on the next line does not
    // shift columns; on the same line, columns count characters.
    let (_, t) = compile("// λλλ\ndef f(x: f64) -> f64 = x * 2.0 // ∀\n");
    has(&t, &["@2:24"]);
}

#[test]
fn long_let_chains_compile() {
    // `let x1 = x + x in let x2 = x1 + x1 in ...`: no nesting limit applies.
    let mut src = String::from("def f(x: f64) -> f64 =\n");
    let mut prev = "x".to_string();
    for k in 1..=3000 {
        src.push_str(&format!("  let x{k} = {prev} + {prev} in\n"));
        prev = format!("x{k}");
    }
    src.push_str(&format!("  {prev}\n"));
    let (p, _) = compile(&src);
    assert_eq!(p.funcs[0].body.stmts.len(), 3000);
}

#[test]
fn examples_compile() {
    // Every example of the repository (gmm.arr among them, once present).
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "arr") {
            let src = std::fs::read_to_string(&path).unwrap();
            let (p, _) = compile(&src);
            assert!(!p.funcs.is_empty(), "{}", path.display());
            if let Some(g) = p.funcs.iter().find(|f| f.name == "gmm") {
                assert_eq!(g.result_types, vec![Type::F64]);
                assert!(g.signature.size_vars().len() >= 3);
            }
        }
    }
}
