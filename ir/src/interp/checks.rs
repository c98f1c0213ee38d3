//! Checks made before a call is evaluated: the arguments match the
//! parameters, and the call graph below the function is acyclic (the
//! verifier does not check recursion; evaluating a recursive program would
//! not terminate).

use crate::program::{Block, ErrorKind, Expr, FuncId, Function, Program, StmtKind};
use crate::value::{ArrayValue, RuntimeError, Value};

/// The function `func` of `program`, or an [`ErrorKind::InvalidArgument`]
/// error.
pub fn function(program: &Program, func: FuncId) -> Result<&Function, RuntimeError> {
    program
        .funcs
        .get(func.0 as usize)
        .ok_or_else(|| RuntimeError::new(ErrorKind::InvalidArgument, format!("no function number {}", func.0)))
}

/// Checks that `args` has one value per IR parameter of `func`, of the
/// parameter's element type and rank, with arrays of `product(shape)`
/// elements; [`ErrorKind::InvalidArgument`] otherwise.
pub fn check_args(program: &Program, func: FuncId, args: &[Value]) -> Result<(), RuntimeError> {
    let f = function(program, func)?;
    let bad = |detail: String| RuntimeError::new(ErrorKind::InvalidArgument, format!("`{}`: {detail}", f.name));
    if args.len() != f.params.len() {
        return Err(bad(format!("{} arguments given, {} expected", args.len(), f.params.len())));
    }
    for (k, (p, a)) in f.params.iter().zip(args).enumerate() {
        let want =
            f.vars.get(p.index()).map(|v| v.ty).ok_or_else(|| bad(format!("parameter {k} is not a variable")))?;
        if let Value::Array(arr) = a {
            check_array_value(arr).map_err(|e| bad(format!("argument {k}: {e}")))?;
        }
        if a.ty() != want {
            return Err(bad(format!("argument {k} has type {}, expected {want}", a.ty())));
        }
    }
    Ok(())
}

/// Checks that an array value has rank >= 1, extents that fit an `i64`, and
/// `product(shape)` elements.
pub fn check_array_value(a: &ArrayValue) -> Result<(), String> {
    if a.shape.is_empty() {
        return Err("an array of rank 0".into());
    }
    if let Some(d) = a.shape.iter().find(|&&d| i64::try_from(d).is_err()) {
        return Err(format!("an array of extent {d}"));
    }
    let n = if a.shape.contains(&0) { Some(0) } else { a.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) };
    if n != Some(a.data.len()) {
        return Err(format!("an array of shape {:?} with {} elements", a.shape, a.data.len()));
    }
    Ok(())
}

/// Checks that every function reachable by calls from `func` exists and
/// that none of them calls itself, directly or indirectly.
pub fn check_calls(program: &Program, func: FuncId) -> Result<(), RuntimeError> {
    function(program, func)?;
    // Depth-first search with an explicit stack: 0 = unseen, 1 = on the
    // current path, 2 = done.
    let mut state = vec![0u8; program.funcs.len()];
    let mut stack: Vec<(usize, Vec<FuncId>, usize)> = Vec::new();
    let start = func.0 as usize;
    state[start] = 1;
    stack.push((start, callees(&program.funcs[start]), 0));
    while let Some((f, calls, next)) = stack.last_mut() {
        let f = *f;
        if let Some(&c) = calls.get(*next) {
            *next += 1;
            let c = c.0 as usize;
            let callee = program.funcs.get(c).ok_or_else(|| {
                RuntimeError::new(
                    ErrorKind::InvalidArgument,
                    format!("`{}` calls function number {c}, which does not exist", program.funcs[f].name),
                )
            })?;
            match state[c] {
                0 => {
                    state[c] = 1;
                    stack.push((c, callees(callee), 0));
                }
                1 => {
                    return Err(RuntimeError::new(
                        ErrorKind::InvalidArgument,
                        format!("`{}` calls `{}` recursively", program.funcs[f].name, callee.name),
                    ))
                }
                _ => {}
            }
        } else {
            state[f] = 2;
            stack.pop();
        }
    }
    Ok(())
}

/// The functions `f` calls, in order of appearance (with repetitions).
fn callees(f: &Function) -> Vec<FuncId> {
    let mut out = Vec::new();
    let mut blocks: Vec<&Block> = vec![&f.body];
    while let Some(b) = blocks.pop() {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { expr, .. } => match expr {
                    Expr::Call { func, .. } => out.push(*func),
                    Expr::Build { body, .. } | Expr::Loop { body, .. } => blocks.push(body),
                    Expr::While { cond, body, .. } => {
                        blocks.push(cond);
                        blocks.push(body);
                    }
                    Expr::If { then_branch, else_branch, .. } => {
                        blocks.push(then_branch);
                        blocks.push(else_branch);
                    }
                    _ => {}
                },
                StmtKind::For { body, .. } => blocks.push(body),
                StmtKind::If { then_branch, else_branch, .. } => {
                    blocks.push(then_branch);
                    blocks.push(else_branch);
                }
                StmtKind::Assign { .. }
                | StmtKind::AccAdd { .. }
                | StmtKind::AccZero { .. }
                | StmtKind::CheckSize { .. }
                | StmtKind::Push(_)
                | StmtKind::TapeRewind(_) => {}
            }
        }
    }
    out
}
