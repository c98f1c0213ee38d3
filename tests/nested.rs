//! Derivatives inside programs (LANGUAGE.md section 10) and Hessians at the
//! boundary: the Hessian-vector product of Pearlmutter & Siskind's example
//! through the language, the command line, the C ABI and the Rust API;
//! perturbation confusion; Hessians of generated programs by four
//! nestings (forward over reverse, forward over forward, reverse over
//! forward, reverse over reverse) against each other, against `--hessian`
//! and against finite differences of compiled gradients; third derivatives
//! of every builtin against finite differences of second derivatives; BA
//! Jacobian blocks of all observations in one call against the
//! per-observation Jacobian; misuse of the operators.

mod support;

use arrayad::{Arg, Backend, Module, Options, Value};
use support::{arrayad, have, scratch};

const HVP: &str = "\
def f(x: [2]f64) -> f64 = 2.0 * x[0] ** 2 + 3.0 * x[0] * x[1] + 4.0 * x[1] ** 2
def df(x: [2]f64) -> [2]f64 = grad(f, x)
def hvp(x: [2]f64, v: [2]f64) -> [2]f64 = jvp(df, x, v).1
def g(x: [n]f64) -> f64 = sum(exp(x)) * dot(x, x)
def dg(x: [n]f64) -> [n]f64 = grad(g, x)
def hess(x: [n]f64) -> [n][n]f64 =
  for i < n => jvp(dg, x, for j < n => if i == j then 1.0 else 0.0).1
def inner(x: f64, y: f64) -> f64 = x + y
def dinner(x: f64) -> f64 = jvp(inner, (x, 2.0), (0.0, 1.0)).1
def outer(x: f64) -> f64 = x * dinner(x)
def confusion_fwd(x: f64) -> f64 = jvp(outer, x, 1.0).1
def confusion_rev(x: f64) -> f64 = grad(outer, x)
def rdinner(x: f64) -> f64 = grad(inner, (x, 2.0)).1
def router(x: f64) -> f64 = x * rdinner(x)
def confusion_rr(x: f64) -> f64 = grad(router, x)
";

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Interp, Backend::Cranelift];
    if cfg!(feature = "llvm") {
        b.push(Backend::Llvm);
    }
    b
}

fn f64s(v: &Value) -> Vec<f64> {
    match v {
        Value::F64(x) => vec![*x],
        v @ Value::Array(_) => v.f64_elements().expect("f64 elements").to_vec(),
        other => panic!("not f64: {other:?}"),
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, tol), "{what}[{k}]: got {g}, want {w} (all: {got:?} vs {want:?})");
    }
}

fn arr(xs: &[f64]) -> Value {
    Value::Array(arrayad::ArrayValue { shape: vec![xs.len()], data: arrayad::ArrayData::F64(xs.to_vec()) })
}

#[test]
fn the_hessian_vector_product_through_the_language_and_the_rust_api() {
    for backend in backends() {
        let m = Module::compile_with("hvp.arr", HVP, Options::backend(backend)).unwrap();
        let hvp = m.function("hvp").unwrap();
        let out = hvp.call_values(&[arr(&[3.0, 4.0]), arr(&[7.0, 8.0])]).unwrap();
        assert_eq!(f64s(&out[0]), vec![52.0, 85.0], "{backend:?}");
        // The Rust API: value, gradient and H t in one call; the Hessian.
        let f = m.function("f").unwrap();
        let x = [3.0, 4.0];
        let h = f.hvp(&[Arg::Vector(&x)], &[Some(Arg::Vector(&[7.0, 8.0]))]).unwrap();
        assert_eq!(h.value, 118.0);
        assert_eq!(f64s(h.gradient[0].as_ref().unwrap()), vec![24.0, 41.0]);
        assert_eq!(f64s(h.hvp[0].as_ref().unwrap()), vec![52.0, 85.0]);
        let hs = f.hessian(&[Arg::Vector(&x)]).unwrap();
        assert_eq!((hs.rows, hs.cols), (2, 2));
        assert_eq!(hs.data, vec![4.0, 3.0, 3.0, 8.0]);
        // A Hessian built in the language, column by column, equals the
        // boundary Hessian and is symmetric.
        let y = [0.5, 1.0, -1.0];
        let inside = m.function("hess").unwrap().call_values(&[arr(&y)]).unwrap();
        let boundary = m.function("g").unwrap().hessian(&[Arg::Vector(&y)]).unwrap();
        assert_close(&format!("{backend:?} hess"), &f64s(&inside[0]), &boundary.data, 1e-12);
        for i in 0..3 {
            for j in 0..3 {
                assert!(close(boundary.data[i * 3 + j], boundary.data[j * 3 + i], 1e-12));
            }
        }
        // Misuse at the boundary.
        let err = m.function("df").unwrap().hessian(&[Arg::Vector(&x)]).unwrap_err();
        assert!(err.to_string().contains("one f64"), "{err}");
    }
}

#[test]
fn perturbations_of_different_levels_never_mix() {
    // d/dx (x * d/dy (x + y)) = 1, in every combination of modes.
    for backend in backends() {
        let m = Module::compile_with("hvp.arr", HVP, Options::backend(backend)).unwrap();
        for name in ["confusion_fwd", "confusion_rev", "confusion_rr"] {
            let out = m.function(name).unwrap().call_values(&[Value::F64(3.0)]).unwrap();
            assert_eq!(out, vec![Value::F64(1.0)], "{name} on {backend:?}");
        }
        // The gradient of `outer` itself: d/dx (x * 1) = 1 too.
        let gr = m.function("outer").unwrap().grad(&[Arg::F64(3.0)]).unwrap();
        let (v, g) = (gr.value, gr.gradient);
        assert_eq!((v, g[0].clone()), (3.0, Some(Value::F64(1.0))));
    }
}

#[test]
fn the_command_line_prints_hessians_and_builds_hvp() {
    let dir = scratch("nested", "cli");
    std::fs::write(dir.join("hvp.arr"), HVP).unwrap();
    let out = arrayad(&dir, &["run", "hvp.arr", "f", "--args", "[[3, 4]]", "--hessian"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json(), serde_json::json!({"value": 118.0, "hessian": [[4.0, 3.0], [3.0, 8.0]]}));
    let out = arrayad(&dir, &["run", "hvp.arr", "hvp", "--args", "[[3, 4], [7, 8]]"]);
    assert_eq!(out.json(), serde_json::json!({"value": [52.0, 85.0]}));
    // Reverse mode of a definition containing reverse mode (the rule of
    // its `grad` call: reverse/over_reverse.rs).
    let out = arrayad(&dir, &["run", "hvp.arr", "dg", "--args", "[[1, 2]]", "--vjp", "[1, 0]"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let row = out.json()["cotangent"][0].clone();
    let h = arrayad(&dir, &["run", "hvp.arr", "g", "--args", "[[1, 2]]", "--hessian"]).json()["hessian"][0].clone();
    for k in 0..2 {
        assert!(close(row[k].as_f64().unwrap(), h[k].as_f64().unwrap(), 1e-12), "{row} vs {h}");
    }
    let out = arrayad(&dir, &["run", "hvp.arr", "dg", "--args", "[[1, 2]]", "--hessian"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("one f64"), "{out:#?}");

    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping f_hvp");
        return;
    }
    let backends: &[&str] = if cfg!(feature = "llvm") { &["cranelift", "llvm"] } else { &["cranelift"] };
    for backend in backends {
        let out = arrayad(&dir, &["build", "hvp.arr", "-o", "libhvp.so", "--backend", backend]);
        assert_eq!(out.code, 0, "{out:#?}");
        let header = std::fs::read_to_string(dir.join("libhvp.h")).unwrap();
        assert!(header
            .contains("int32_t f_hvp(const double *x, const double *t_x, double *value, double *d_x, double *h_x);"));
        assert!(!header.contains("df_hvp"), "only f64-result definitions get an hvp");
        let main = r#"
#include <stdio.h>
#include "libhvp.h"
int main(void) {
    double x[2] = {3, 4}, t[2] = {7, 8}, v, g[2], h[2];
    int s = f_hvp(x, t, &v, g, h);
    printf("%d %.17g %.17g %.17g %.17g %.17g\n", s, v, g[0], g[1], h[0], h[1]);
    double y[3] = {0.5, 1.0, -1}, ty[3] = {0, 1, 0}, gy[3], hy[3];
    s = g_hvp(3, y, ty, &v, gy, hy);
    printf("%d %.17g %.17g %.17g\n", s, hy[0], hy[1], hy[2]);
    s = g_hvp(3, y, NULL, &v, gy, hy);
    printf("%d %s\n", s, hvp_last_error());
    double z[2] = {1, 2}, dz[2], w[2] = {1, 0};
    s = dg_vjp(2, z, w, dz, gy);
    printf("%d %.17g %.17g\n", s, gy[0], gy[1]);
    return 0;
}
"#;
        std::fs::write(dir.join("main.c"), main).unwrap();
        let out = support::run_in(
            &dir,
            "cc",
            &[
                "-std=c99",
                "-Wall",
                "-Werror",
                "main.c",
                "-o",
                "main",
                "-I.",
                "-L.",
                "-lhvp",
                "-Wl,-rpath,$ORIGIN",
                "-lm",
            ],
            None,
        );
        assert_eq!(out.code, 0, "{out:#?}");
        let out = support::run_in(&dir, dir.join("main").to_str().unwrap(), &[], None);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines[0], "0 118 24 41 52 85", "{backend}");
        let col: Vec<f64> = lines[1].split(' ').skip(1).map(|s| s.parse().unwrap()).collect();
        let m = Module::compile("hvp.arr", HVP).unwrap();
        let hs = m.function("g").unwrap().hessian(&[Arg::Vector(&[0.5, 1.0, -1.0])]).unwrap();
        assert_close("g_hvp", &col, &[hs.data[1], hs.data[4], hs.data[7]], 1e-13);
        assert!(lines[2].starts_with("9 ") && lines[2].contains("t_x"), "{}", lines[2]);
        let gg = m.function("g").unwrap().hessian(&[Arg::Vector(&[1.0, 2.0])]).unwrap();
        let row: Vec<f64> = lines[3].split(' ').skip(1).map(|s| s.parse().unwrap()).collect();
        assert_close("dg_vjp", &row, &gg.data[..2], 1e-12);
    }
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() as f64) / ((1u64 << 31) as f64)
    }
}

/// A random smooth expression over `x` and `y` (defined and smooth near
/// the points the test uses).
fn expr(rng: &mut Rng, depth: u32) -> String {
    if depth == 0 || rng.below(4) == 0 {
        return match rng.below(4) {
            0 => "x".into(),
            1 => "y".into(),
            2 => format!("{:.3}", 0.5 + rng.unit()),
            _ => "(x * y)".into(),
        };
    }
    let a = expr(rng, depth - 1);
    match rng.below(11) {
        0 => format!("({a} + {})", expr(rng, depth - 1)),
        1 => format!("({a} - {})", expr(rng, depth - 1)),
        2 => format!("({a} * {})", expr(rng, depth - 1)),
        3 => format!("({a} / (1.5 + {} ** 2))", expr(rng, depth - 1)),
        4 => format!("sin({a})"),
        5 => format!("exp(0.3 * {a})"),
        6 => format!("tanh({a})"),
        7 => format!("log(1.0 + {a} ** 2)"),
        8 => format!("sqrt(2.0 + {a} ** 2)"),
        9 => format!("atan({a})"),
        _ => format!("lgamma(2.0 + {a} ** 2)"),
    }
}

#[test]
fn hessians_of_generated_programs_agree_in_every_nesting() {
    let mut rng = Rng(20261123);
    for case in 0..12 {
        let body = expr(&mut rng, 4);
        let src = format!(
            "def f(x: f64, y: f64) -> f64 = {body}\n\
             def gr(x: f64, y: f64) -> (f64, f64) = grad(f, (x, y))\n\
             def fr_x(x: f64, y: f64) -> (f64, f64) = jvp(gr, (x, y), (1.0, 0.0)).1\n\
             def fr_y(x: f64, y: f64) -> (f64, f64) = jvp(gr, (x, y), (0.0, 1.0)).1\n\
             def rr_x(x: f64, y: f64) -> (f64, f64) = vjp(gr, (x, y), (1.0, 0.0)).1\n\
             def rr_y(x: f64, y: f64) -> (f64, f64) = vjp(gr, (x, y), (0.0, 1.0)).1\n\
             def dfx(x: f64, y: f64) -> f64 = jvp(f, (x, y), (1.0, 0.0)).1\n\
             def dfy(x: f64, y: f64) -> f64 = jvp(f, (x, y), (0.0, 1.0)).1\n\
             def ff_xx(x: f64, y: f64) -> f64 = jvp(dfx, (x, y), (1.0, 0.0)).1\n\
             def ff_xy(x: f64, y: f64) -> f64 = jvp(dfx, (x, y), (0.0, 1.0)).1\n\
             def ff_yy(x: f64, y: f64) -> f64 = jvp(dfy, (x, y), (0.0, 1.0)).1\n\
             def rf_x(x: f64, y: f64) -> (f64, f64) = grad(dfx, (x, y))\n\
             def rf_y(x: f64, y: f64) -> (f64, f64) = grad(dfy, (x, y))\n"
        );
        let (x, y) = (0.3 + rng.unit(), -0.4 + rng.unit());
        let args = [Value::F64(x), Value::F64(y)];
        let compiled = Module::compile("gen.arr", &src).unwrap_or_else(|e| panic!("{src}\n{e}"));
        let interp = Module::compile_with("gen.arr", &src, Options::backend(Backend::Interp)).unwrap();
        let pair = |m: &Module, name: &str| -> Vec<f64> {
            let out = m.function(name).unwrap().call_values(&args).unwrap_or_else(|e| panic!("{name}: {e}\n{src}"));
            out.iter().flat_map(f64s).collect()
        };
        // The reference: the boundary Hessian (forward over reverse).
        let h = compiled.function("f").unwrap().hessian(&args.iter().map(Arg::Value).collect::<Vec<_>>()).unwrap().data;
        let what = |k: &str| format!("case {case} {k}: {body}");
        for m in [&compiled, &interp] {
            assert_close(&what("fr"), &[pair(m, "fr_x"), pair(m, "fr_y")].concat(), &h, 1e-10);
            assert_close(&what("rr"), &[pair(m, "rr_x"), pair(m, "rr_y")].concat(), &h, 1e-10);
            assert_close(&what("rf"), &[pair(m, "rf_x"), pair(m, "rf_y")].concat(), &h, 1e-10);
            let ff = [pair(m, "ff_xx")[0], pair(m, "ff_xy")[0], pair(m, "ff_xy")[0], pair(m, "ff_yy")[0]];
            assert_close(&what("ff"), &ff, &h, 1e-10);
        }
        // Finite differences of the compiled gradient.
        let gr = compiled.function("f").unwrap();
        let grad_at = |x: f64, y: f64| -> Vec<f64> {
            let g = gr.grad(&[Arg::F64(x), Arg::F64(y)]).unwrap().gradient;
            g.as_slice().iter().map(|v| f64s(v.as_ref().unwrap())[0]).collect()
        };
        let e = 1e-5;
        let (gxp, gxm, gyp, gym) = (grad_at(x + e, y), grad_at(x - e, y), grad_at(x, y + e), grad_at(x, y - e));
        let fd = [
            (gxp[0] - gxm[0]) / (2.0 * e),
            (gyp[0] - gym[0]) / (2.0 * e),
            (gxp[1] - gxm[1]) / (2.0 * e),
            (gyp[1] - gym[1]) / (2.0 * e),
        ];
        assert_close(&what("finite differences"), &h, &fd, 1e-5);
    }
}

#[test]
fn third_derivatives_of_every_builtin_match_finite_differences() {
    // (expression in x, a point where it is smooth)
    let cases: &[(&str, f64)] = &[
        ("exp(x)", 0.3),
        ("log(x)", 1.7),
        ("sqrt(x)", 2.3),
        ("sin(x)", 0.4),
        ("cos(x)", 0.4),
        ("tan(x)", 0.4),
        ("tanh(x)", 0.6),
        ("sinh(x)", 0.6),
        ("cosh(x)", 0.6),
        ("asin(x)", 0.3),
        ("acos(x)", 0.3),
        ("atan(x)", 0.7),
        ("log1p(x)", 0.7),
        ("expm1(x)", 0.7),
        ("erf(x)", 0.5),
        ("lgamma(x)", 2.5),
        ("lgamma(x)", -1.5),
        ("abs(x) ** 3", -0.8),
        ("floor(x) + x ** 4", 1.3),
        ("ceil(x) * x ** 4", 1.3),
        ("pow(x, 3.5)", 1.2),
        ("pow(2.5, x)", 1.2),
        ("x ** 4", 1.1),
        ("atan2(x, 1.5)", 0.7),
        ("atan2(1.5, x)", 0.7),
        ("min(x ** 4, 100.0)", 1.2),
        ("max(x ** 4, -1.0)", 1.2),
        ("sum(exp([x, 2.0 * x]))", 0.3),
        ("dot([x, x * x], [sin(x), x])", 0.3),
        ("maximum([x ** 3, 0.0])", 0.9),
        ("minimum([x ** 3, 5.0])", 0.9),
        ("x / (1.0 + x * x)", 0.9),
        ("f64(i64(x)) + x ** 3", 1.4),
    ];
    for &(body, x) in cases {
        let src = format!(
            "def f(x: f64) -> f64 = {body}\n\
             def d1(x: f64) -> f64 = grad(f, x)\n\
             def d2(x: f64) -> f64 = jvp(d1, x, 1.0).1\n\
             def d3(x: f64) -> f64 = jvp(d2, x, 1.0).1\n\
             def d3r(x: f64) -> f64 = grad(d2, x)\n"
        );
        for backend in backends() {
            let m = Module::compile_with("b.arr", &src, Options::backend(backend)).unwrap();
            let at = |name: &str, x: f64| -> f64 {
                let out = m.function(name).unwrap().call_values(&[Value::F64(x)]).unwrap();
                f64s(&out[0])[0]
            };
            let h = 1e-4 * (1.0 + x.abs());
            let fd = (at("d2", x + h) - at("d2", x - h)) / (2.0 * h);
            let d3 = at("d3", x);
            assert!(close(d3, fd, 1e-5), "{body} at {x} on {backend:?}: d3 {d3}, finite differences {fd}");
            assert!(close(at("d3r", x), d3, 1e-12), "{body} at {x} on {backend:?}: reverse {}", at("d3r", x));
            // and the second derivative against differences of the first
            let fd2 = (at("d1", x + h) - at("d1", x - h)) / (2.0 * h);
            assert!(close(at("d2", x), fd2, 1e-5), "{body} at {x}: d2 {}, fd {fd2}", at("d2", x));
        }
    }
}

#[test]
fn ba_jacobian_blocks_in_one_call_equal_the_per_observation_jacobians() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ba.arr")).unwrap();
    let mut rng = Rng(7);
    let p = 5;
    let mut cams = Vec::new();
    let mut xs = Vec::new();
    let mut ws = Vec::new();
    let mut feats = Vec::new();
    for _ in 0..p {
        let cam: Vec<f64> = (0..11)
            .map(|k| match k {
                0..=2 => 0.3 * (rng.unit() - 0.5),
                6 => 400.0 + 200.0 * rng.unit(),
                9 | 10 => 0.01 * rng.unit(),
                _ => rng.unit(),
            })
            .collect();
        cams.push(cam);
        xs.push(vec![rng.unit(), rng.unit(), -5.0 - rng.unit()]);
        ws.push(0.5 + rng.unit());
        feats.push(vec![100.0 * rng.unit(), 100.0 * rng.unit()]);
    }
    let stack = |rows: &[Vec<f64>]| {
        Value::Array(arrayad::ArrayValue {
            shape: vec![rows.len(), rows[0].len()],
            data: arrayad::ArrayData::F64(rows.concat()),
        })
    };
    let backends: Vec<Backend> = backends().into_iter().filter(|b| *b != Backend::Interp).collect();
    for backend in backends {
        let m = Module::compile_with("ba.arr", &src, Options::backend(backend).with_wrt(&["cam", "x", "w"])).unwrap();
        let blocks = m
            .function("ba_jacobian_blocks")
            .unwrap()
            .call_values(&[stack(&cams), stack(&xs), arr(&ws), stack(&feats)])
            .unwrap();
        let all = f64s(&blocks[0]);
        assert_eq!(all.len(), p * 3 * 15);
        let obs = m.function("ba_obs").unwrap();
        for i in 0..p {
            let jargs = [arr(&cams[i]), arr(&xs[i]), Value::F64(ws[i]), arr(&feats[i])];
            let j = obs.jacobian(&jargs.iter().map(Arg::Value).collect::<Vec<_>>()).unwrap();
            assert_eq!((j.rows, j.cols), (3, 15));
            assert_close(&format!("{backend:?} block {i}"), &all[i * 45..(i + 1) * 45], &j.data, 1e-13);
        }
    }
}

#[test]
fn misuse_of_the_derivative_operators_is_a_located_compile_error() {
    let cases: &[(&str, &str)] = &[
        ("def g(x: f64) -> f64 = grad(exp, x)", "builtin"),
        ("def g(x: f64) -> f64 = grad(h, x)", "unknown function `h`"),
        ("def g(x: f64) -> f64 = grad(x, x)", "is a variable"),
        ("def f(x: f64) -> [2]f64 = [x, x]\ndef g(x: f64) -> f64 = grad(f, x)", "returns [2]f64"),
        ("def f(x: f64, y: f64) -> f64 = x * y\ndef g(x: f64) -> f64 = grad(f, x)", "2 parameters"),
        ("def f(x: [n]f64) -> f64 = sum(x)\ndef g(x: [n]f64) -> f64 = jvp(f, x, 1.0).1", "TANGENTS"),
        ("def f(x: f64) -> f64 = x\ndef g(x: f64) -> f64 = jvp(f, x)", "takes 3 arguments"),
        ("def f(x: f64) -> f64 = x\ndef g(x: f64) -> f64 = vjp(f, x, (1.0, 2.0)).0", "COTANGENT"),
        ("def f(x: f64) -> f64 = grad(f, x)", "recursion"),
        ("def grad(x: f64) -> f64 = x", "builtin"),
    ];
    let dir = scratch("nested", "misuse");
    for (src, needle) in cases {
        std::fs::write(dir.join("bad.arr"), format!("{src}\n")).unwrap();
        let out = arrayad(&dir, &["check", "bad.arr"]);
        assert_ne!(out.code, 0, "{src}: {out:#?}");
        assert!(out.stderr.contains(needle), "{src}: want `{needle}` in {}", out.stderr);
        assert!(out.stderr.contains("bad.arr:"), "{src}: no location in {}", out.stderr);
    }
    // A tangent of the wrong shape is a located run-time size mismatch.
    std::fs::write(
        dir.join("shape.arr"),
        "def f(x: [n]f64) -> f64 = sum(x)\ndef g(x: [n]f64, t: [m]f64) -> f64 = jvp(f, x, t).1\n",
    )
    .unwrap();
    let out = arrayad(&dir, &["run", "shape.arr", "g", "--args", "[[1, 2], [1, 2, 3]]"]);
    assert_eq!(out.code, 3, "{out:#?}");
    assert!(out.stderr.contains("shape.arr:1:") && out.stderr.contains("size mismatch"), "{out:#?}");
}

#[test]
fn gradbench_particle_and_saddle_in_every_mode_combination() {
    let root = env!("CARGO_MANIFEST_DIR");
    let particle = std::fs::read_to_string(format!("{root}/examples/particle.arr")).unwrap();
    let saddle = std::fs::read_to_string(format!("{root}/examples/saddle.arr")).unwrap();
    for backend in backends() {
        let m = Module::compile_with("particle.arr", &particle, Options::backend(backend)).unwrap();
        let ms = Module::compile_with("saddle.arr", &saddle, Options::backend(backend)).unwrap();
        for v in ["ff", "fr", "rf", "rr"] {
            let out = m.function(&format!("particle_{v}")).unwrap().call_values(&[Value::F64(0.0)]).unwrap();
            let w = f64s(&out[0])[0];
            assert!((w - 0.2071918746486116).abs() <= 1e-9, "particle_{v} on {backend:?}: {w}");
            let out = ms.function(&format!("saddle_{v}")).unwrap().call_values(&[arr(&[1.0, 1.0])]).unwrap();
            for (k, x) in f64s(&out[0]).into_iter().enumerate() {
                assert!((x - 8.246324826140356e-06).abs() <= 1e-9, "saddle_{v}[{k}] on {backend:?}: {x}");
            }
        }
    }
}
