//! Shared harness of the differential tests: runs one program through the
//! interpreter, the optimiser, the Cranelift JIT, both compiled derivative
//! transformations and both runtime oracles, and checks they agree.

#![allow(dead_code)]

#[path = "../support/ad.rs"]
pub mod ad;
pub mod generate;

use arrayad_codegen::{Backend, JitModule, TargetOptions};
use arrayad_ir::{interp, ArrayData, ArrayValue, FuncId, Program, Scalar, Type, Value};

/// Every backend of this build that compiles code (not the interpreter),
/// as the Rust API names them.
pub fn api_backends() -> Vec<arrayad::Backend> {
    Backend::available()
        .into_iter()
        .map(|b| match b {
            Backend::Cranelift => arrayad::Backend::Cranelift,
            Backend::Llvm => arrayad::Backend::Llvm,
        })
        .collect()
}

/// One test case: a program, the function to test and its arguments (JSON,
/// one entry per flattened parameter).
pub struct Case {
    pub file: String,
    pub source: String,
    pub func: String,
    pub args: serde_json::Value,
    pub finite_differences: bool,
}

/// A deterministic pseudo-random sequence (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Converts JSON to a value of IR type `ty`.
pub fn json_value(j: &serde_json::Value, ty: Type) -> Value {
    if ty.rank == 0 {
        return match ty.elem {
            Scalar::F64 => Value::F64(j.as_f64().expect("f64")),
            Scalar::I64 => Value::I64(j.as_i64().expect("i64")),
            Scalar::Bool => Value::Bool(j.as_bool().expect("bool")),
        };
    }
    let mut shape = Vec::new();
    let mut cur = j;
    for _ in 0..ty.rank {
        let a = cur.as_array().expect("array");
        shape.push(a.len());
        if a.is_empty() {
            break;
        }
        cur = &a[0];
    }
    while shape.len() < ty.rank as usize {
        shape.push(0);
    }
    let mut leaves = Vec::new();
    fn flat<'a>(j: &'a serde_json::Value, depth: u8, out: &mut Vec<&'a serde_json::Value>) {
        if depth == 0 {
            out.push(j);
        } else {
            for e in j.as_array().expect("array") {
                flat(e, depth - 1, out);
            }
        }
    }
    flat(j, ty.rank, &mut leaves);
    let data = match ty.elem {
        Scalar::F64 => ArrayData::F64(leaves.iter().map(|v| v.as_f64().unwrap()).collect()),
        Scalar::I64 => ArrayData::I64(leaves.iter().map(|v| v.as_i64().unwrap()).collect()),
        Scalar::Bool => ArrayData::Bool(leaves.iter().map(|v| v.as_bool().unwrap()).collect()),
    };
    Value::Array(ArrayValue { shape, data })
}

fn f64s(v: &Value) -> Vec<f64> {
    v.f64_elements().map(|s| s.to_vec()).unwrap_or_default()
}

/// A random f64 value shaped like `like` (an f64 scalar or array),
/// uniform in [-1, 1).
pub fn random_like(like: &Value, rng: &mut Rng) -> Value {
    match like {
        Value::Array(a) => Value::Array(ArrayValue {
            shape: a.shape.clone(),
            data: ArrayData::F64((0..a.data.len()).map(|_| rng.unit()).collect()),
        }),
        _ => Value::F64(rng.unit()),
    }
}

fn ones_like(like: &Value) -> Value {
    match like {
        Value::Array(a) => {
            Value::Array(ArrayValue { shape: a.shape.clone(), data: ArrayData::F64(vec![1.0; a.data.len()]) })
        }
        _ => Value::F64(1.0),
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

fn assert_values(what: &str, case: &Case, got: &[Value], want: &[Value], rel: f64) {
    assert_eq!(got.len(), want.len(), "{}:{} {what}: result count", case.file, case.func);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        match (g, w) {
            (Value::I64(a), Value::I64(b)) => assert_eq!(a, b, "{}:{} {what} result {k}", case.file, case.func),
            (Value::Bool(a), Value::Bool(b)) => assert_eq!(a, b, "{}:{} {what} result {k}", case.file, case.func),
            _ => {
                assert_eq!(g.ty(), w.ty(), "{}:{} {what} result {k} type", case.file, case.func);
                if let (Value::Array(a), Value::Array(b)) = (g, w) {
                    assert_eq!(a.shape, b.shape, "{}:{} {what} result {k} shape", case.file, case.func);
                }
                match (&g, &w) {
                    (
                        Value::Array(ArrayValue { data: ArrayData::I64(a), .. }),
                        Value::Array(ArrayValue { data: ArrayData::I64(b), .. }),
                    ) => {
                        assert_eq!(a, b)
                    }
                    _ => {
                        let (a, b) = (f64s(g), f64s(w));
                        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                            assert!(
                                close(*x, *y, rel),
                                "{}:{} {what} result {k} element {i}: got {x}, want {y}",
                                case.file,
                                case.func
                            );
                        }
                    }
                }
            }
        }
    }
}

/// `funcs` compiled by every backend of this build (Cranelift, and LLVM
/// with the `llvm` feature).
pub fn jits(file: &str, funcs: &[arrayad_ir::Function]) -> Vec<(Backend, JitModule)> {
    Backend::available()
        .into_iter()
        .map(|b| {
            let m = JitModule::compile_with(b, &TargetOptions::host(), file, funcs)
                .unwrap_or_else(|e| panic!("{file}: {b:?} codegen: {e}"));
            (b, m)
        })
        .collect()
}

fn dot_values(a: &[Value], b: &[Value]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64s(x).iter().zip(f64s(y)).map(|(p, q)| p * q).sum::<f64>()).sum()
}

/// Runs every check on `case`; returns the gradient (vjp with all-ones
/// cotangent), flattened over the active (f64) parameters.
pub fn check_case(case: &Case) -> Vec<f64> {
    let program = arrayad_frontend::compile(&case.file, &case.source)
        .unwrap_or_else(|d| panic!("{} does not compile:\n{}", case.file, d.render()));
    // Derivative operators inside the program (LANGUAGE.md section 10).
    let program = arrayad_ad::expand_derivatives(program).expect("derivative operators expand");
    let fid = program.find(&case.func).unwrap_or_else(|| panic!("no function {}", case.func));
    let func = program.func(fid);
    let ptypes = func.param_types();
    let jargs = case.args.as_array().expect("args array");
    assert_eq!(jargs.len(), ptypes.len(), "{}:{} argument count", case.file, case.func);
    let args: Vec<Value> = jargs.iter().zip(&ptypes).map(|(j, t)| json_value(j, *t)).collect();
    let active: Vec<bool> = ptypes.iter().map(|t| t.elem == Scalar::F64).collect();

    // Values: source program, optimised program, JIT.
    let reference =
        interp::run(&program, fid, &args).unwrap_or_else(|e| panic!("{}:{} interp: {e}", case.file, case.func));
    let prim = ad::prepare(&program, fid).unwrap();
    arrayad_ir::verify::verify_function(&prim, None).unwrap_or_else(|e| panic!("{e}"));
    let single = |f: arrayad_ir::Function| Program { file: case.file.clone(), funcs: vec![f] };
    let optimised = interp::run(&single(prim.clone()), FuncId(0), &args).unwrap();
    assert_values("optimised interp", case, &optimised, &reference, 1e-12);

    let jvp = ad::jvp(&program, fid, &active).unwrap_or_else(|e| panic!("{}:{} jvp: {e}", case.file, case.func));
    let vjp = ad::vjp(&program, fid, &active).unwrap_or_else(|e| panic!("{}:{} vjp: {e}", case.file, case.func));
    for f in [&jvp, &vjp] {
        arrayad_ir::verify::verify_function(f, None)
            .unwrap_or_else(|e| panic!("{e}\n{}", arrayad_ir::printer::print_function(f, None)));
    }
    let jits = jits(&case.file, &[prim.clone(), jvp.clone(), vjp.clone()]);
    for (b, jit) in &jits {
        let jitted = jit.call(&prim.name, &args).unwrap_or_else(|e| panic!("{}:{} {b:?}: {e}", case.file, case.func));
        assert_values(&format!("{b:?} JIT"), case, &jitted, &reference, 1e-12);
    }

    // Random tangents and cotangents.
    let mut rng = Rng(0x5eed ^ case.source.len() as u64);
    let f64_results: Vec<&Value> = reference.iter().filter(|v| v.ty().elem == Scalar::F64).collect();
    let cts: Vec<Value> = f64_results.iter().map(|v| random_like(v, &mut rng)).collect();
    let active_args: Vec<(usize, &Value)> = args.iter().enumerate().filter(|(k, _)| active[*k]).collect();
    let tans: Vec<Value> = active_args.iter().map(|(_, v)| random_like(v, &mut rng)).collect();

    // Compiled vjp (interp and JIT) vs the Delta oracle.
    let mut vargs = args.clone();
    vargs.extend(cts.iter().cloned());
    let n_res = reference.len();
    let v_interp = interp::run(&single(vjp.clone()), FuncId(0), &vargs).unwrap_or_else(|e| {
        panic!("{}:{} vjp interp: {e}\n{}", case.file, case.func, arrayad_ir::printer::print_function(&vjp, None))
    });
    for (b, jit) in &jits {
        let v_jit =
            jit.call(&vjp.name, &vargs).unwrap_or_else(|e| panic!("{}:{} vjp {b:?}: {e}", case.file, case.func));
        assert_values(&format!("vjp {b:?} vs interp"), case, &v_jit, &v_interp, 1e-12);
    }
    assert_values("vjp primal", case, &v_interp[..n_res], &reference, 1e-12);
    let mut oracle_cts: Vec<Option<Value>> = Vec::new();
    let mut it = cts.iter();
    for r in &reference {
        oracle_cts.push(if r.ty().elem == Scalar::F64 { it.next().cloned() } else { None });
    }
    // The oracles evaluate the pure forms of the IR only, not the reverse
    // mode that derivative operators inside a program run: those programs
    // are checked by the transposition identity and finite differences.
    let pure = !program.funcs.iter().any(|f| arrayad_ir::DiffOp::parse_stub(&f.name).is_some());
    if pure {
        let (_, oracle_grad) = arrayad_ad::oracle::vjp(&program, fid, &args, &active, &oracle_cts)
            .unwrap_or_else(|e| panic!("{}:{} oracle vjp: {e}", case.file, case.func));
        let oracle_grad: Vec<Value> = oracle_grad.into_iter().flatten().collect();
        assert_values("vjp vs Delta oracle", case, &v_interp[n_res..], &oracle_grad, 1e-9);
    }

    // Compiled jvp vs the dual-number oracle, and the transposition identity.
    let mut jargs2 = args.clone();
    jargs2.extend(tans.iter().cloned());
    let j_interp = interp::run(&single(jvp.clone()), FuncId(0), &jargs2)
        .unwrap_or_else(|e| panic!("{}:{} jvp interp: {e}", case.file, case.func));
    for (b, jit) in &jits {
        let j_jit =
            jit.call(&jvp.name, &jargs2).unwrap_or_else(|e| panic!("{}:{} jvp {b:?}: {e}", case.file, case.func));
        assert_values(&format!("jvp {b:?} vs interp"), case, &j_jit, &j_interp, 1e-12);
    }
    let mut oracle_tans: Vec<Option<Value>> = vec![None; args.len()];
    for ((k, _), t) in active_args.iter().zip(&tans) {
        oracle_tans[*k] = Some(t.clone());
    }
    if pure {
        let (_, oracle_jt) = arrayad_ad::oracle::jvp(&program, fid, &args, &oracle_tans)
            .unwrap_or_else(|e| panic!("{}:{} oracle jvp: {e}", case.file, case.func));
        let oracle_jt: Vec<Value> = oracle_jt.into_iter().flatten().collect();
        assert_values("jvp vs dual-number oracle", case, &j_interp[n_res..], &oracle_jt, 1e-9);
    }
    let lhs = dot_values(&cts, &j_interp[n_res..]);
    let rhs = dot_values(&v_interp[n_res..], &tans);
    assert!(close(lhs, rhs, 1e-9), "{}:{} <ct, J t> = {lhs} but <J^T ct, t> = {rhs}", case.file, case.func);

    // Finite differences of <ct, f(x)> along each active input element.
    if case.finite_differences {
        let objective = |a: &[Value]| -> f64 {
            let r = interp::run(&program, fid, a).unwrap();
            let f: Vec<Value> = r.into_iter().filter(|v| v.ty().elem == Scalar::F64).collect();
            dot_values(&cts, &f)
        };
        for ((k, arg), g) in active_args.iter().zip(&v_interp[n_res..]) {
            let base = f64s(arg);
            let grad = f64s(g);
            for i in 0..base.len() {
                let h = 1e-6 * base[i].abs().max(1.0);
                let shifted = |delta: f64| {
                    let mut a = args.clone();
                    let mut v = base.clone();
                    v[i] += delta;
                    a[*k] = match &args[*k] {
                        Value::Array(arr) => {
                            Value::Array(ArrayValue { shape: arr.shape.clone(), data: ArrayData::F64(v) })
                        }
                        _ => Value::F64(v[0]),
                    };
                    objective(&a)
                };
                let fd = (shifted(h) - shifted(-h)) / (2.0 * h);
                assert!(
                    (fd - grad[i]).abs() <= 1e-5 * fd.abs().max(grad[i].abs()).max(1.0),
                    "{}:{} param {k} element {i}: finite differences {fd}, vjp {}",
                    case.file,
                    case.func,
                    grad[i]
                );
            }
        }
    }

    // Gradient with all-ones cotangent (JIT).
    let mut gargs = args.clone();
    gargs.extend(f64_results.iter().map(|v| ones_like(v)));
    let g = jits[0].1.call(&vjp.name, &gargs).unwrap();
    g[n_res..].iter().flat_map(f64s).collect()
}

/// The optimised many-row vjp keeps its shape: at the top level a tape mark,
/// then the build over rows that first rewinds to it; the forward pass (every
/// push) stays outside the build.
fn check_rows_structure(f: &arrayad_ir::Function, what: &str) {
    use arrayad_ir::{Block, Expr, StmtKind};
    fn pushes(b: &Block) -> usize {
        let mut n = 0;
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Push(_) => n += 1,
                StmtKind::Let { expr: Expr::Build { body, .. } | Expr::Loop { body, .. }, .. }
                | StmtKind::For { body, .. } => n += pushes(body),
                StmtKind::Let { expr: Expr::If { then_branch, else_branch, .. }, .. }
                | StmtKind::If { then_branch, else_branch, .. } => n += pushes(then_branch) + pushes(else_branch),
                _ => {}
            }
        }
        n
    }
    let text = || arrayad_ir::printer::print_function(f, None);
    let mark = f.body.stmts.iter().position(|s| matches!(&s.kind, StmtKind::Let { expr: Expr::TapeMark, .. }));
    let rows = f.body.stmts.iter().position(|s| match &s.kind {
        StmtKind::Let { expr: Expr::Build { body, .. }, .. } => {
            body.stmts.first().is_some_and(|s| matches!(s.kind, StmtKind::TapeRewind(_)))
        }
        _ => false,
    });
    // No active f64 parameter: no backward pass at all.
    if f.result_types.len() == f.signature.result.leaves().len() {
        assert!(rows.is_none(), "{what}: a build over rows without cotangents to return\n{}", text());
        return;
    }
    let (Some(mark), Some(rows)) = (mark, rows) else {
        panic!("{what}: no top-level tape mark and build over rows\n{}", text())
    };
    assert!(mark < rows, "{what}: the tape mark follows the build over rows\n{}", text());
    if let StmtKind::Let { expr: Expr::Build { body, .. }, .. } = &f.body.stmts[rows].kind {
        assert_eq!(pushes(body), 0, "{what}: the forward pass moved into the build over rows\n{}", text());
    }
}

/// One-hot values shaped like `shapes` (one per leaf, f64 scalars or
/// arrays) with a 1.0 at flattened position `pos` across all of them.
fn one_hot_like(shapes: &[Value], pos: usize) -> Vec<Value> {
    let mut first = 0;
    shapes
        .iter()
        .map(|like| {
            let n = f64s(like).len().max(if matches!(like, Value::Array(_)) { 0 } else { 1 });
            let hot = |k: usize| if first + k == pos { 1.0 } else { 0.0 };
            let v = match like {
                Value::Array(a) => {
                    Value::Array(ArrayValue { shape: a.shape.clone(), data: ArrayData::F64((0..n).map(hot).collect()) })
                }
                _ => Value::F64(hot(0)),
            };
            first += n;
            v
        })
        .collect()
}

/// The dense Jacobian of `case` (rows: f64 result elements, columns: f64
/// elements of the f64 parameters) three ways: from the many-row vjp
/// (`vjp_rows`, interpreter and JIT, which must agree), from one vjp per
/// one-hot cotangent row and from one jvp per one-hot tangent column; and
/// the vector jvp against the jvp ([`check_jvp_lanes`]). Returns the number
/// of rows (0: nothing to compare).
pub fn check_jacobian(case: &Case) -> usize {
    let what = format!("{}:{}", case.file, case.func);
    let program = arrayad_frontend::compile(&case.file, &case.source)
        .unwrap_or_else(|d| panic!("{} does not compile:\n{}", case.file, d.render()));
    // Derivative operators inside the program (LANGUAGE.md section 10).
    let program = arrayad_ad::expand_derivatives(program).expect("derivative operators expand");
    let fid = program.find(&case.func).unwrap_or_else(|| panic!("no function {}", case.func));
    let ptypes = program.func(fid).param_types();
    let args: Vec<Value> =
        case.args.as_array().expect("args array").iter().zip(&ptypes).map(|(j, t)| json_value(j, *t)).collect();
    let active: Vec<bool> = ptypes.iter().map(|t| t.elem == Scalar::F64).collect();
    let reference = interp::run(&program, fid, &args).unwrap_or_else(|e| panic!("{what} interp: {e}"));
    let f64_results: Vec<Value> = reference.iter().filter(|v| v.ty().elem == Scalar::F64).cloned().collect();
    let active_args: Vec<Value> = args.iter().zip(&active).filter(|(_, a)| **a).map(|(v, _)| v.clone()).collect();
    let count =
        |vs: &[Value]| -> usize { vs.iter().map(|v| if let Value::Array(a) = v { a.data.len() } else { 1 }).sum() };
    let rows = count(&f64_results);
    let cols = count(&active_args);
    if rows == 0 {
        return 0;
    }

    let vjp = ad::vjp(&program, fid, &active).unwrap_or_else(|e| panic!("{what} vjp: {e}"));
    let jvp = ad::jvp(&program, fid, &active).unwrap_or_else(|e| panic!("{what} jvp: {e}"));
    let rows_f = ad::vjp_rows(&program, fid, &active).unwrap_or_else(|e| panic!("{what} vjp_rows: {e}"));
    assert_eq!(rows_f.name, format!("{}_vjp_rows", case.func));
    arrayad_ir::verify::verify_function(&rows_f, None)
        .unwrap_or_else(|e| panic!("{e}\n{}", arrayad_ir::printer::print_function(&rows_f, None)));
    // Reverse over reverse runs the whole vjp once per row instead (its
    // backward pass pushes: `reverse/over_reverse.rs`).
    if !program.funcs.iter().any(|f| arrayad_ir::DiffOp::parse_stub(&f.name).is_some()) {
        check_rows_structure(&rows_f, &what);
    }
    let single = |f: &arrayad_ir::Function| Program { file: case.file.clone(), funcs: vec![f.clone()] };
    let jits = jits(&case.file, std::slice::from_ref(&rows_f));

    // The many-row vjp on the identity: each f64 result leaf gets the stack
    // of its rows of the rows x rows identity.
    let mut rargs = args.clone();
    let mut first = 0;
    for like in &f64_results {
        let n = count(std::slice::from_ref(like));
        let mut data = vec![0.0; rows * n];
        for e in 0..n {
            data[(first + e) * n + e] = 1.0;
        }
        let mut shape = vec![rows];
        if let Value::Array(a) = like {
            shape.extend_from_slice(&a.shape);
        }
        rargs.push(Value::Array(ArrayValue { shape, data: ArrayData::F64(data) }));
        first += n;
    }
    let by_interp = interp::run(&single(&rows_f), FuncId(0), &rargs).unwrap_or_else(|e| {
        panic!("{what} vjp_rows interp: {e}\n{}", arrayad_ir::printer::print_function(&rows_f, None))
    });
    let n_res = reference.len();
    for (b, jit) in &jits {
        let by_jit = jit.call(&rows_f.name, &rargs).unwrap_or_else(|e| panic!("{what} vjp_rows {b:?}: {e}"));
        assert_values(&format!("vjp_rows {b:?} vs interp"), case, &by_jit, &by_interp, 1e-12);
    }
    assert_values("vjp_rows primal", case, &by_interp[..n_res], &reference, 1e-12);
    assert_eq!(by_interp.len(), n_res + active_args.len(), "{what}: vjp_rows result count");
    // Row r of the Jacobian: row r of every stack, leaves left to right.
    let mut jac = vec![0.0; rows * cols];
    let mut off = 0;
    for stack in &by_interp[n_res..] {
        let e = f64s(stack);
        let n = e.len() / rows;
        assert_eq!(e.len(), rows * n, "{what}: stack size");
        for r in 0..rows {
            jac[r * cols + off..r * cols + off + n].copy_from_slice(&e[r * n..(r + 1) * n]);
        }
        off += n;
    }
    assert_eq!(off, cols, "{what}: columns");

    // One vjp per row.
    for r in 0..rows {
        let mut vargs = args.clone();
        vargs.extend(one_hot_like(&f64_results, r));
        let out = interp::run(&single(&vjp), FuncId(0), &vargs).unwrap_or_else(|e| panic!("{what} vjp: {e}"));
        let row: Vec<f64> = out[n_res..].iter().flat_map(f64s).collect();
        for (c, (x, y)) in jac[r * cols..(r + 1) * cols].iter().zip(&row).enumerate() {
            assert!(close(*x, *y, 1e-12), "{what}: J[{r}][{c}]: vjp_rows {x}, vjp {y}");
        }
    }
    // One jvp per column.
    for c in 0..cols {
        let mut jargs = args.clone();
        jargs.extend(one_hot_like(&active_args, c));
        let out = interp::run(&single(&jvp), FuncId(0), &jargs).unwrap_or_else(|e| panic!("{what} jvp: {e}"));
        let col: Vec<f64> = out[n_res..].iter().flat_map(f64s).collect();
        assert_eq!(col.len(), rows, "{what}: jvp column length");
        for (r, y) in col.iter().enumerate() {
            let x = jac[r * cols + c];
            assert!(close(x, *y, 1e-9), "{what}: J[{r}][{c}]: vjp_rows {x}, jvp {y}");
        }
    }
    // (The vector jvp exists for code without reverse mode inside.)
    if !program.funcs.iter().any(|f| arrayad_ir::DiffOp::parse_stub(&f.name).is_some()) {
        check_jvp_lanes(case, &program, fid, &active, &args, &active_args, &jvp);
    }
    rows
}

/// The vector jvp of `case` (`arrayad_ad::jvp_lanes`: one pass, the
/// tangents of `jvp_lane_count` directions) on the interpreter and every JIT:
/// each lane's tangents are bitwise those of the single `jvp` for that
/// lane's direction, and the primal results bitwise the jvp's, for blocks
/// of one-hot columns (the last padded with zero directions) and for dense
/// directions.
fn check_jvp_lanes(
    case: &Case,
    program: &Program,
    fid: FuncId,
    active: &[bool],
    args: &[Value],
    active_args: &[Value],
    jvp: &arrayad_ir::Function,
) {
    let what = format!("{}:{}", case.file, case.func);
    let lanes_f =
        ad::one(program, fid, active, arrayad_ad::Which::JvpLanes).unwrap_or_else(|e| panic!("{what} jvp_lanes: {e}"));
    arrayad_ir::verify::verify_function(&lanes_f, None)
        .unwrap_or_else(|e| panic!("{e}\n{}", arrayad_ir::printer::print_function(&lanes_f, None)));
    let k = arrayad_ad::jvp_lane_count(&program.func(fid).signature, active);
    let single = |f: &arrayad_ir::Function| Program { file: case.file.clone(), funcs: vec![f.clone()] };
    let jits = jits(&case.file, std::slice::from_ref(&lanes_f));
    let cols: usize = active_args.iter().map(|v| if let Value::Array(a) = v { a.data.len() } else { 1 }).sum();
    // Directions: the one-hot columns, then a dense pseudo-random one.
    let mut rng = Rng(case.source.len() as u64 ^ 0x5eed);
    let dense: Vec<Value> = active_args
        .iter()
        .map(|v| match v {
            Value::Array(a) => Value::Array(ArrayValue {
                shape: a.shape.clone(),
                data: ArrayData::F64((0..a.data.len()).map(|_| rng.unit() - 0.5).collect()),
            }),
            _ => Value::F64(rng.unit() - 0.5),
        })
        .collect();
    let mut directions: Vec<Vec<Value>> = (0..cols).map(|c| one_hot_like(active_args, c)).collect();
    directions.push(dense);
    let zero: Vec<Value> = one_hot_like(active_args, usize::MAX);
    for block in directions.chunks(k) {
        let mut largs = args.to_vec();
        for l in 0..k {
            largs.extend(block.get(l).unwrap_or(&zero).iter().cloned());
        }
        let by_interp = interp::run(&single(&lanes_f), FuncId(0), &largs)
            .unwrap_or_else(|e| panic!("{what} jvp_lanes interp: {e}"));
        for (b, jit) in &jits {
            let by_jit = jit.call(&lanes_f.name, &largs).unwrap_or_else(|e| panic!("{what} jvp_lanes {b:?}: {e}"));
            assert_bitwise(&format!("{what}: jvp_lanes {b:?} vs interp"), &by_jit, &by_interp);
        }
        for (l, dir) in block.iter().enumerate() {
            let mut jargs = args.to_vec();
            jargs.extend(dir.iter().cloned());
            let out = interp::run(&single(jvp), FuncId(0), &jargs).unwrap_or_else(|e| panic!("{what} jvp: {e}"));
            let n_t = (by_interp.len() - out.len()) / (k - 1);
            let n_p = out.len() - n_t;
            assert_eq!(by_interp.len(), n_p + k * n_t, "{what}: jvp_lanes result count");
            assert_bitwise(&format!("{what}: jvp_lanes primal"), &by_interp[..n_p], &out[..n_p]);
            let lane = &by_interp[n_p + l * n_t..n_p + (l + 1) * n_t];
            assert_bitwise(&format!("{what}: jvp_lanes lane {l} vs jvp"), lane, &out[n_p..]);
        }
    }
}

/// Asserts `a` and `b` hold the same values bit for bit (NaNs included).
pub fn assert_bitwise(what: &str, a: &[Value], b: &[Value]) {
    let bits = |vs: &[Value]| -> Vec<u64> {
        vs.iter()
            .flat_map(|v| match v {
                Value::F64(x) => vec![x.to_bits()],
                Value::I64(x) => vec![*x as u64],
                Value::Bool(x) => vec![*x as u64],
                Value::Array(arr) => match &arr.data {
                    ArrayData::F64(d) => d.iter().map(|x| x.to_bits()).collect(),
                    ArrayData::I64(d) => d.iter().map(|x| *x as u64).collect(),
                    ArrayData::Bool(d) => d.iter().map(|x| *x as u64).collect(),
                },
            })
            .collect()
    };
    let shapes = |vs: &[Value]| -> Vec<Vec<usize>> {
        vs.iter().map(|v| if let Value::Array(a) = v { a.shape.clone() } else { Vec::new() }).collect()
    };
    assert_eq!(shapes(a), shapes(b), "{what}: shapes");
    assert_eq!(bits(a), bits(b), "{what}: values differ\n{a:?}\n{b:?}");
}

/// The test cases of the corpus in `tests/programs/`.
pub fn corpus_cases() -> Vec<Case> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut entries: Vec<_> = std::fs::read_dir(&dir).expect("tests/programs").flatten().map(|e| e.path()).collect();
    entries.sort();
    let mut cases = Vec::new();
    for path in entries.iter().filter(|p| p.extension().is_some_and(|e| e == "arr")) {
        let source = std::fs::read_to_string(path).expect("readable corpus file");
        let fd = !source.contains("// nofd");
        for line in source.lines() {
            if let Some(rest) = line.trim().strip_prefix("// test:") {
                let rest = rest.trim();
                let (func, args) = rest.split_once(' ').expect("// test: FUNC ARGS");
                cases.push(Case {
                    file: path.file_name().unwrap().to_string_lossy().into_owned(),
                    source: source.clone(),
                    func: func.to_string(),
                    args: serde_json::from_str(args).expect("JSON args"),
                    finite_differences: fd,
                });
            }
        }
    }
    cases
}
