//! The Delta program of a definition in the notation of Krawiec et al.
//! (POPL 2022, Fig. 9): the linear bindings of its jvp, one `let` per
//! primitive, with `Scale`, `Add`, `Neg`, `Index`, `Slice`, `Sum`, `Build`,
//! `Loop` and `If` constructors. Names that are not bound by a Delta
//! binding are residuals of the forward pass (primal values) or the
//! Deltas of the inputs (`d<param>`). `arrayad emit --stage delta` prints it.

use crate::forward::JvpOutput;
use arrayad_ir::{Atom, BinOp, Block, Expr, Function, ReduceOp, StmtKind, UnOp, VarId};
use std::fmt::Write;

/// Renders the Delta program of `j`.
pub fn print_delta(j: &JvpOutput) -> String {
    let f = &j.func;
    let mut out = String::new();
    let inputs: Vec<String> = f.params[j.n_primal_params..].iter().map(|v| name(f, *v)).collect();
    let _ = writeln!(out, "delta {}({}) {{", f.name.trim_end_matches("_jvp"), inputs.join(", "));
    block(j, &f.body, 1, &mut out);
    let results: Vec<String> = f.body.results[j.n_primal_results..].iter().map(|a| atom(f, a)).collect();
    let _ = writeln!(out, "  result {}", if results.is_empty() { "Zero".into() } else { results.join(", ") });
    out.push_str("}\n");
    out
}

fn name(f: &Function, v: VarId) -> String {
    format!("{}%{}", f.var(v).name, v.0)
}

fn atom(f: &Function, a: &Atom) -> String {
    match a {
        Atom::Var(v) => name(f, *v),
        Atom::F64(x) if *x == 0.0 => "Zero".into(),
        Atom::F64(x) => format!("{x:?}"),
        Atom::I64(x) => x.to_string(),
        Atom::Bool(b) => b.to_string(),
    }
}

fn is_lin(j: &JvpOutput, a: &Atom) -> bool {
    matches!(a, Atom::Var(v) if j.linear.contains(v))
}

fn block(j: &JvpOutput, b: &Block, depth: usize, out: &mut String) {
    let f = &j.func;
    let pad = "  ".repeat(depth);
    for s in &b.stmts {
        let StmtKind::Let { vars, expr } = &s.kind else { continue };
        let lin: Vec<&VarId> = vars.iter().filter(|v| j.linear.contains(v)).collect();
        if lin.is_empty() {
            continue;
        }
        let lhs = lin.iter().map(|v| name(f, **v)).collect::<Vec<_>>().join(", ");
        let rhs = match expr {
            Expr::Atom(a) => atom(f, a),
            Expr::Unary(UnOp::Neg, a) => format!("Neg({})", atom(f, a)),
            Expr::Binary(BinOp::Add, a, b2) => format!("Add({}, {})", atom(f, a), atom(f, b2)),
            Expr::Binary(BinOp::Sub, a, b2) => format!("Add({}, Neg({}))", atom(f, a), atom(f, b2)),
            Expr::Binary(BinOp::Mul, a, b2) => {
                let (d, c) = if is_lin(j, a) { (a, b2) } else { (b2, a) };
                format!("Scale({}, {})", atom(f, c), atom(f, d))
            }
            Expr::Binary(BinOp::Div, a, b2) => format!("Scale(1/{}, {})", atom(f, b2), atom(f, a)),
            Expr::Index { array, indices } => format!(
                "Index({}, {})",
                name(f, *array),
                indices.iter().map(|i| atom(f, i)).collect::<Vec<_>>().join(", ")
            ),
            Expr::Slice { array, lo, hi } => format!("Slice({}, {}, {})", name(f, *array), atom(f, lo), atom(f, hi)),
            Expr::Reshape { array, dims } => format!(
                "Reshape({}, [{}])",
                name(f, *array),
                dims.iter().map(|d| atom(f, d)).collect::<Vec<_>>().join(", ")
            ),
            Expr::Update { array, indices, value } => format!(
                "Update({}, [{}], {})",
                name(f, *array),
                indices.iter().map(|i| atom(f, i)).collect::<Vec<_>>().join(", "),
                atom(f, value)
            ),
            Expr::Reduce { op: ReduceOp::Sum, array } => format!("Sum({})", name(f, *array)),
            Expr::ArrayLit { elems, .. } => {
                format!("Array[{}]", elems.iter().map(|e| atom(f, e)).collect::<Vec<_>>().join(", "))
            }
            Expr::ZerosLike(_) | Expr::Zeros(_) => "Zero".into(),
            Expr::Build { n, index, body } => {
                let _ = writeln!(out, "{pad}let {lhs} = Build({}, {} =>", atom(f, n), name(f, *index));
                block(j, body, depth + 1, out);
                let rs: Vec<String> = body
                    .results
                    .iter()
                    .filter(|r| is_lin(j, r) || !matches!(r, Atom::Var(_)))
                    .map(|r| atom(f, r))
                    .collect();
                let _ = writeln!(out, "{pad}  yield {})", rs.join(", "));
                continue;
            }
            Expr::Loop { n, index, states, body, .. } => {
                let st: Vec<String> = states.iter().filter(|s| j.linear.contains(s)).map(|s| name(f, *s)).collect();
                let _ =
                    writeln!(out, "{pad}let {lhs} = Loop({}, {}, ({}) =>", atom(f, n), name(f, *index), st.join(", "));
                block(j, body, depth + 1, out);
                let rs: Vec<String> = body.results.iter().filter(|r| is_lin(j, r)).map(|r| atom(f, r)).collect();
                let _ = writeln!(out, "{pad}  yield {})", rs.join(", "));
                continue;
            }
            Expr::While { states, body, .. } => {
                let st: Vec<String> = states.iter().filter(|s| j.linear.contains(s)).map(|s| name(f, *s)).collect();
                let _ = writeln!(out, "{pad}let {lhs} = While(({}) =>", st.join(", "));
                block(j, body, depth + 1, out);
                let rs: Vec<String> = body.results.iter().filter(|r| is_lin(j, r)).map(|r| atom(f, r)).collect();
                let _ = writeln!(out, "{pad}  yield {})", rs.join(", "));
                continue;
            }
            Expr::If { cond, then_branch, else_branch } => {
                let _ = writeln!(out, "{pad}let {lhs} = If({},", atom(f, cond));
                for br in [then_branch, else_branch] {
                    block(j, br, depth + 1, out);
                    let rs: Vec<String> = br.results.iter().filter(|r| is_lin(j, r)).map(|r| atom(f, r)).collect();
                    let _ = writeln!(out, "{pad}  yield {}", rs.join(", "));
                }
                let _ = writeln!(out, "{pad})");
                continue;
            }
            other => format!("{other:?}"),
        };
        let _ = writeln!(out, "{pad}let {lhs} = {rhs}");
    }
}
