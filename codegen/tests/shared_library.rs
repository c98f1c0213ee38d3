//! Builds a shared library from hand-built primal/jvp/vjp/vjp_rows IR, checks the
//! header compiles as C99 and C++, and runs a C program against the library.

mod common;
use arrayad_codegen::{build_shared_library, c_header, Backend, ExportedFunction, LinkOptions};
use arrayad_ir::builder::Builder;
use arrayad_ir::program::*;
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::verify::verify_function;
use common::{build, v, F1, F2};
use std::path::{Path, PathBuf};
use std::process::Command;

fn arr(dims: &[&str]) -> SrcType {
    SrcType::Array {
        elem: Scalar::F64,
        dims: dims
            .iter()
            .map(|d| d.parse::<i64>().map(SrcDim::Lit).unwrap_or_else(|_| SrcDim::Var(d.to_string())))
            .collect(),
    }
}

fn sig(params: &[(&str, SrcType)], result: SrcType) -> Signature {
    Signature { params: params.iter().map(|(n, t)| SrcParam { name: n.to_string(), ty: t.clone() }).collect(), result }
}

/// A function `name` with parameters of `types`, the body from `body`.
fn func(
    name: &str,
    s: &Signature,
    types: &[Type],
    results: &[Type],
    body: impl FnOnce(&mut Builder, &[VarId]) -> Vec<Atom>,
) -> Function {
    let mut f = Function {
        name: name.into(),
        params: vec![],
        body: Block::default(),
        vars: vec![],
        result_types: results.to_vec(),
        signature: s.clone(),
        loc: Loc::new(1, 1),
    };
    let ps: Vec<VarId> = types.iter().enumerate().map(|(k, t)| f.new_var(format!("a{k}"), *t)).collect();
    f.params = ps.clone();
    let mut b = Builder::new(&mut f);
    b.loc = Loc::new(3, 7);
    let rs = body(&mut b, &ps);
    f.body = b.finish(rs);
    verify_function(&f, None).expect("verifies");
    f
}

fn sum_sq(b: &mut Builder, x: VarId) -> Atom {
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let sq = build(b, n, |b, i| {
        let e = b.let_one("e", Expr::Index { array: x, indices: vec![i] });
        b.binary(BinOp::Mul, e, e)
    });
    b.let_one("t", Expr::Reduce { op: ReduceOp::Sum, array: sq.as_var().unwrap() })
}

/// f(x: [n]f64, s: f64) -> f64 = s * sum(x * x)
fn export_f() -> ExportedFunction {
    let s = sig(&[("x", arr(&["n"])), ("s", SrcType::Scalar(Scalar::F64))], SrcType::Scalar(Scalar::F64));
    let primal = func("f", &s, &[F1, Type::F64], &[Type::F64], |b, p| {
        let t = sum_sq(b, p[0]);
        vec![b.binary(BinOp::Mul, v(p[1]), t)]
    });
    let jvp = func("f_jvp", &s, &[F1, Type::F64, F1, Type::F64], &[Type::F64, Type::F64], |b, p| {
        let (x, sc, tx, ts) = (p[0], p[1], p[2], p[3]);
        let t = sum_sq(b, x);
        let r = b.binary(BinOp::Mul, v(sc), t);
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let d = build(b, n, |b, i| {
            let e = b.let_one("e", Expr::Index { array: x, indices: vec![i] });
            let te = b.let_one("te", Expr::Index { array: tx, indices: vec![i] });
            let m = b.binary(BinOp::Mul, e, te);
            b.binary(BinOp::Mul, Atom::F64(2.0), m)
        });
        let sd = b.let_one("sd", Expr::Reduce { op: ReduceOp::Sum, array: d.as_var().unwrap() });
        let a1 = b.binary(BinOp::Mul, v(ts), t);
        let a2 = b.binary(BinOp::Mul, v(sc), sd);
        vec![r, b.binary(BinOp::Add, a1, a2)]
    });
    let vjp = func("f_vjp", &s, &[F1, Type::F64, Type::F64], &[Type::F64, F1, Type::F64], |b, p| {
        let (x, sc, ct) = (p[0], p[1], p[2]);
        let t = sum_sq(b, x);
        let r = b.binary(BinOp::Mul, v(sc), t);
        let dx = b.let_one("dx", Expr::ZerosLike(x));
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let k = b.binary(BinOp::Mul, v(ct), v(sc));
        let k2 = b.binary(BinOp::Mul, k, Atom::F64(2.0));
        let i = b.var("i", Type::I64);
        b.begin_block();
        let e = b.let_one("e", Expr::Index { array: x, indices: vec![v(i)] });
        let g = b.binary(BinOp::Mul, k2, e);
        b.stmt(StmtKind::AccAdd { acc: dx.as_var().unwrap(), indices: vec![v(i)], value: g });
        let body = b.end_block(vec![]);
        b.stmt(StmtKind::For { n, index: i, reverse: true, body });
        let ds = b.binary(BinOp::Mul, v(ct), t);
        vec![r, dx, ds]
    });
    // One forward pass (t), then per cotangent row the backward pass.
    let vjp_rows = func("f_vjp_rows", &s, &[F1, Type::F64, F1], &[Type::F64, F2, F1], |b, p| {
        let (x, sc, ct_rows) = (p[0], p[1], p[2]);
        let t = sum_sq(b, x);
        let r = b.binary(BinOp::Mul, v(sc), t);
        let rows = b.let_one("rows", Expr::Dim { array: ct_rows, axis: 0 });
        let row = b.var("row", Type::I64);
        b.begin_block();
        let ct = b.let_one("ct", Expr::Index { array: ct_rows, indices: vec![v(row)] });
        let dx = b.let_one("dx", Expr::ZerosLike(x));
        let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
        let k = b.binary(BinOp::Mul, ct, v(sc));
        let k2 = b.binary(BinOp::Mul, k, Atom::F64(2.0));
        let i = b.var("i", Type::I64);
        b.begin_block();
        let e = b.let_one("e", Expr::Index { array: x, indices: vec![v(i)] });
        let g = b.binary(BinOp::Mul, k2, e);
        b.stmt(StmtKind::AccAdd { acc: dx.as_var().unwrap(), indices: vec![v(i)], value: g });
        let body = b.end_block(vec![]);
        b.stmt(StmtKind::For { n, index: i, reverse: true, body });
        let ds = b.binary(BinOp::Mul, ct, t);
        let body = b.end_block(vec![dx, ds]);
        let (dxs, dss) = (b.var("dxs", F2), b.var("dss", F1));
        b.stmt(StmtKind::Let { vars: vec![dxs, dss], expr: Expr::Build { n: rows, index: row, body } });
        vec![r, v(dxs), v(dss)]
    });
    ExportedFunction {
        name: "f".into(),
        signature: s,
        active: vec![true, true],
        entries: None,
        primal,
        jvp: Some(jvp),
        vjp: Some(vjp),
        vjp_rows: Some(vjp_rows),
        jvp_lanes: None,
        hvp: None,
    }
}

/// h(a: f64) -> [3]f64 = [a, 2a, a*a]   (forward-mode Jacobian: 3 rows > 1 column)
fn export_h() -> ExportedFunction {
    let s = sig(&[("a", SrcType::Scalar(Scalar::F64))], arr(&["3"]));
    let lit = |b: &mut Builder, e: Vec<Atom>| b.let_one("lit", Expr::ArrayLit { elem_ty: Type::F64, elems: e });
    let primal = func("h", &s, &[Type::F64], &[F1], |b, p| {
        let a2 = b.binary(BinOp::Mul, Atom::F64(2.0), v(p[0]));
        let aa = b.binary(BinOp::Mul, v(p[0]), v(p[0]));
        vec![lit(b, vec![v(p[0]), a2, aa])]
    });
    let jvp = func("h_jvp", &s, &[Type::F64, Type::F64], &[F1, F1], |b, p| {
        let a2 = b.binary(BinOp::Mul, Atom::F64(2.0), v(p[0]));
        let aa = b.binary(BinOp::Mul, v(p[0]), v(p[0]));
        let r = lit(b, vec![v(p[0]), a2, aa]);
        let t2 = b.binary(BinOp::Mul, Atom::F64(2.0), v(p[1]));
        let t3 = b.binary(BinOp::Mul, a2, v(p[1]));
        vec![r, lit(b, vec![v(p[1]), t2, t3])]
    });
    let vjp = func("h_vjp", &s, &[Type::F64, F1], &[F1, Type::F64], |b, p| {
        let a2 = b.binary(BinOp::Mul, Atom::F64(2.0), v(p[0]));
        let aa = b.binary(BinOp::Mul, v(p[0]), v(p[0]));
        let r = lit(b, vec![v(p[0]), a2, aa]);
        let c: Vec<Atom> =
            (0..3).map(|k| b.let_one("c", Expr::Index { array: p[1], indices: vec![Atom::I64(k)] })).collect();
        let x1 = b.binary(BinOp::Mul, Atom::F64(2.0), c[1]);
        let x2 = b.binary(BinOp::Mul, a2, c[2]);
        let s1 = b.binary(BinOp::Add, c[0], x1);
        vec![r, b.binary(BinOp::Add, s1, x2)]
    });
    let vjp_rows = func("h_vjp_rows", &s, &[Type::F64, F2], &[F1, F1], |b, p| {
        let a2 = b.binary(BinOp::Mul, Atom::F64(2.0), v(p[0]));
        let aa = b.binary(BinOp::Mul, v(p[0]), v(p[0]));
        let r = lit(b, vec![v(p[0]), a2, aa]);
        let rows = b.let_one("rows", Expr::Dim { array: p[1], axis: 0 });
        let das = build(b, rows, |b, row| {
            let c: Vec<Atom> =
                (0..3).map(|k| b.let_one("c", Expr::Index { array: p[1], indices: vec![row, Atom::I64(k)] })).collect();
            let x1 = b.binary(BinOp::Mul, Atom::F64(2.0), c[1]);
            let x2 = b.binary(BinOp::Mul, a2, c[2]);
            let s1 = b.binary(BinOp::Add, c[0], x1);
            b.binary(BinOp::Add, s1, x2)
        });
        vec![r, das]
    });
    ExportedFunction {
        name: "h".into(),
        signature: s,
        active: vec![true],
        entries: None,
        primal,
        jvp: Some(jvp),
        vjp: Some(vjp),
        vjp_rows: Some(vjp_rows),
        jvp_lanes: None,
        hvp: None,
    }
}

/// e(x: [n]f64, i: i64) -> f64 = x[i]   (x inactive: no tangents)
fn export_e() -> ExportedFunction {
    let s = sig(&[("x", arr(&["n"])), ("i", SrcType::Scalar(Scalar::I64))], SrcType::Scalar(Scalar::F64));
    let body = |b: &mut Builder, p: &[VarId]| vec![b.let_one("e", Expr::Index { array: p[0], indices: vec![v(p[1])] })];
    let primal = func("e", &s, &[F1, Type::I64], &[Type::F64], body);
    let jvp = func("e_jvp", &s, &[F1, Type::I64], &[Type::F64, Type::F64], |b, p| {
        let mut r = body(b, p);
        r.push(Atom::F64(0.0));
        r
    });
    let vjp = func("e_vjp", &s, &[F1, Type::I64, Type::F64], &[Type::F64], body);
    let vjp_rows = func("e_vjp_rows", &s, &[F1, Type::I64, F1], &[Type::F64], body);
    ExportedFunction {
        name: "e".into(),
        signature: s,
        active: vec![false, false],
        entries: None,
        primal,
        jvp: Some(jvp),
        vjp: Some(vjp),
        vjp_rows: Some(vjp_rows),
        jvp_lanes: None,
        hvp: None,
    }
}

const MAIN_C: &str = r#"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "libtestmod.h"

static int fails = 0;
#define CHECK(c) do { if (!(c)) { printf("FAIL line %d: %s\n", __LINE__, #c); fails++; } } while (0)
#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * (1 + fabs(b)))

int main(void) {
    double x[3] = {1.0, 2.0, 3.0}, out = 0, dx[3] = {0}, ds = 0, tout = 0, jac[4], hv[3], hj[3];
    /* f = s * sum(x^2) = 2 * 14 */
    CHECK(f(3, x, 2.0, &out) == 0 && out == 28.0);
    CHECK(f_grad(3, x, 2.0, &out, dx, &ds) == 0 && out == 28.0);
    CHECK(dx[0] == 4.0 && dx[1] == 8.0 && dx[2] == 12.0 && ds == 14.0);
    {
        double tx[3] = {1.0, 0.0, 0.0};
        CHECK(f_jvp(3, x, 2.0, tx, 0.5, &out, &tout) == 0 && NEAR(tout, 0.5 * 14 + 2 * 2 * 1));
    }
    CHECK(f_vjp(3, x, 2.0, 3.0, &out, dx, &ds) == 0 && dx[2] == 36.0 && ds == 42.0);
    CHECK(f_jacobian(3, x, 2.0, &out, jac) == 0 && out == 28.0);
    CHECK(jac[0] == 4.0 && jac[1] == 8.0 && jac[2] == 12.0 && jac[3] == 14.0);
    /* errors */
    CHECK(f(-1, x, 2.0, &out) == TESTMOD_ERR_NEGATIVE_SIZE);
    CHECK(strstr(testmod_last_error(), "negative size") != NULL);
    CHECK(f(3, NULL, 2.0, &out) == TESTMOD_ERR_INVALID_ARGUMENT);
    CHECK(f(0, NULL, 2.0, &out) == 0 && out == 0.0);
    CHECK(f(3, x, 2.0, NULL) == TESTMOD_ERR_INVALID_ARGUMENT);
    CHECK(f(INT64_MAX, x, 2.0, &out) == TESTMOD_ERR_OUT_OF_MEMORY);
    /* h: literal result shape, forward-mode Jacobian */
    CHECK(h(3.0, hv) == 0 && hv[0] == 3.0 && hv[1] == 6.0 && hv[2] == 9.0);
    CHECK(h_jacobian(3.0, hv, hj) == 0 && hj[0] == 1.0 && hj[1] == 2.0 && hj[2] == 6.0);
    {
        double ct[3] = {1.0, 1.0, 1.0}, da = 0;
        CHECK(h_vjp(3.0, ct, hv, &da) == 0 && da == 1.0 + 2.0 + 6.0);
    }
    /* e: run-time error with location */
    CHECK(e(3, x, 1, &out) == 0 && out == 2.0);
    CHECK(e(3, x, 7, &out) == TESTMOD_ERR_INDEX_OUT_OF_BOUNDS);
    printf("%s\n", testmod_last_error());
    CHECK(strstr(testmod_last_error(), "lib.arr:3:7") != NULL);
    CHECK(strstr(testmod_last_error(), "index 7") != NULL);
    CHECK(strstr(testmod_last_error(), "extent 3") != NULL);
    /* e has no active parameters: an empty Jacobian */
    CHECK(e_jacobian(3, x, 0, &out, NULL) == 0 && out == 1.0);
    printf(fails ? "FAILED\n" : "OK\n");
    return fails != 0;
}
"#;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("arrayad-codegen-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn exports() -> Vec<ExportedFunction> {
    vec![export_f(), export_h(), export_e()]
}

#[test]
fn header_compiles_as_c99_and_cxx() {
    let d = tmpdir("header");
    let h = c_header(&exports(), "testmod");
    assert!(h.contains("#define TESTMOD_ERR_INDEX_OUT_OF_BOUNDS 1"));
    assert!(h.contains("int32_t f_grad("));
    assert!(!h.contains("h_grad("), "h has an array result: no grad");
    assert!(h.contains("const char *testmod_last_error(void);"));
    std::fs::write(d.join("libtestmod.h"), &h).unwrap();
    std::fs::write(d.join("use.c"), "#include \"libtestmod.h\"\nint main(void) { return 0; }\n").unwrap();
    run(Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-c", "-o"])
        .arg(d.join("a.o"))
        .arg(d.join("use.c")));
    std::fs::write(d.join("use.cpp"), "#include \"libtestmod.h\"\nint main() { return 0; }\n").unwrap();
    run(Command::new("c++")
        .args(["-Wall", "-Wextra", "-Werror", "-c", "-o"])
        .arg(d.join("b.o"))
        .arg(d.join("use.cpp")));
    let _ = std::fs::remove_dir_all(&d);
}

fn needed(so: &Path) -> Vec<String> {
    let out = run(Command::new("readelf").arg("-d").arg(so));
    out.lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1).and_then(|s| s.split(']').next()).map(|s| s.to_string()))
        .collect()
}

#[test]
fn shared_library_runs_from_c() {
    for backend in Backend::available() {
        let d = tmpdir(&format!("so-{}", backend.name()));
        let so = d.join("libtestmod.so");
        let h = d.join("libtestmod.h");
        let opts = LinkOptions { backend, ..LinkOptions::default() };
        build_shared_library("lib.arr", &exports(), "testmod", &so, &h, &opts).expect("builds");
        // libc and libm only (the thread-local error message uses initial-exec
        // TLS, so not even the dynamic loader's __tls_get_addr).
        for lib in needed(&so) {
            assert!(lib.starts_with("libc.so") || lib.starts_with("libm.so"), "{backend:?}: depends on {lib}");
        }
        // Only the public functions are exported.
        let syms = run(Command::new("nm").args(["-D", "--defined-only"]).arg(&so));
        assert!(syms.contains(" T f_jacobian") && syms.contains(" T testmod_last_error"), "{syms}");
        assert!(!syms.contains("testmod__f__primal") && !syms.contains("arrayad_alloc_slow"), "{syms}");
        std::fs::write(d.join("main.c"), MAIN_C).unwrap();
        run(Command::new("cc").current_dir(&d).args([
            "-std=c99",
            "-Wall",
            "-Werror",
            "main.c",
            "-o",
            "main",
            "-L.",
            "-ltestmod",
            "-Wl,-rpath,$ORIGIN",
            "-lm",
        ]));
        let out = run(&mut Command::new(d.join("main")));
        assert!(out.contains("OK"), "{backend:?}: {out}");
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// The runtime and the shared part of the wrappers are warning-free C99
/// (GNU) under -Wall -Wextra.
#[test]
fn runtime_c_compiles_without_warnings() {
    let d = tmpdir("rt");
    std::fs::write(d.join(arrayad_runtime::RUNTIME_C_HEADER_NAME), arrayad_runtime::RUNTIME_C_HEADER).unwrap();
    std::fs::write(d.join("arrayad_runtime.c"), arrayad_runtime::RUNTIME_C_SOURCE).unwrap();
    std::fs::write(d.join("arrayad_abi.c"), arrayad_runtime::ABI_C_SOURCE).unwrap();
    for file in ["arrayad_runtime.c", "arrayad_abi.c"] {
        run(Command::new("cc").current_dir(&d).args([
            "-std=gnu99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fPIC",
            "-c",
            file,
        ]));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn mismatched_ir_is_an_error() {
    let mut e = export_f();
    e.vjp = export_h().vjp;
    let d = tmpdir("bad");
    let err = build_shared_library("x.arr", &[e], "m", &d.join("libm.so"), &d.join("libm.h"), &LinkOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("vjp"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
