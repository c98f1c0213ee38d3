//! Regression tests for failures found by the fuzz targets (`fuzz/`), each
//! with the minimised input.

mod support;

use arrayad::{Arg, Backend, Module, Options, Value};

/// `fuzz/run.sh programs`: forward mode differentiates a loop body again
/// when its first guess of the active states was wrong (here the column
/// loops of `grad(h1, ...)`, reverse mode by forward columns of a while
/// loop whose body holds reverse-mode code); the retry used the tangents
/// the discarded pass had given the body's mutable variables, bound
/// nowhere: "codegen: malformed IR in `f_jvp`: `dct_y` (%52) used before it
/// is bound" (and the interpreter read the unbound variable).
#[test]
fn forward_mode_retry_of_a_loop_body_forgets_the_discarded_tangents() {
    let src = "def h0(y: f64) -> f64 = y * y
def h1(x: f64, y: f64) -> f64 =
  let t = loop s = x while s > 100.0 do grad(h0, s) * 0.25
  in y * t
def f(x: f64, y: f64) -> f64 = grad(h1, (x, y)).0
";
    for backend in [Backend::Cranelift, Backend::Interp] {
        let m = Module::compile_with("retry.arr", src, Options::backend(backend)).unwrap();
        let f = m.function("f").unwrap();
        let args = [Arg::F64(2.45), Arg::F64(-2.5)];
        // f(x, y) = y (the loop does not run), so df = (0, 1).
        let j =
            f.jvp(&args, &[Some(Arg::F64(1.0)), Some(Arg::F64(1.0))]).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        assert_eq!(j.value, vec![Value::F64(-2.5)], "{backend:?}");
        assert_eq!(j.tangent, vec![Some(Value::F64(1.0))], "{backend:?}");
        let gr = f.grad(&args).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        let (v, g) = (gr.value, gr.gradient);
        assert_eq!(v, -2.5);
        assert_eq!(g.as_slice(), &[Some(Value::F64(0.0)), Some(Value::F64(1.0))], "{backend:?}");
        // Through a loop that runs once: t = grad(h0, x) / 4 = x / 2, so
        // f = d(y * t)/dx = y / 2.
        let args = [Arg::F64(120.0), Arg::F64(3.0)];
        let j =
            f.jvp(&args, &[Some(Arg::F64(1.0)), Some(Arg::F64(1.0))]).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        assert_eq!(j.value, vec![Value::F64(1.5)], "{backend:?}");
        assert_eq!(j.tangent, vec![Some(Value::F64(0.5))], "{backend:?}");
    }
    // Every derivative verifies.
    let program = arrayad_frontend::compile("retry.arr", src).unwrap();
    let program = arrayad_ad::expand_derivatives(program).unwrap();
    let fid = program.find("f").unwrap();
    let d = support::ad::derive_all(&program, fid, &[true, true]).unwrap();
    for func in [&d.jvp, &d.vjp, &d.vjp_rows] {
        arrayad_ir::verify::verify_function(func, None)
            .unwrap_or_else(|e| panic!("{e}\n{}", arrayad_ir::printer::print_function(func, None)));
    }
}

/// `fuzz/run.sh programs` (after ~1000 inputs, under AddressSanitizer):
/// cranelift-jit panicked in `perform_relocations` with
/// `TryFromIntError(PosOverflow)` at a 4-byte PC-relative relocation: the
/// error messages of a JIT module are data, mapped apart from its code,
/// and after many modules the two may be more than 2 GiB apart. The JIT
/// addresses them absolutely (the Cranelift IR declares them `symbol`, not
/// `symbol colocated`); shared libraries (PIC, one object) keep
/// PC-relative addressing.
#[test]
fn jit_messages_are_addressed_absolutely() {
    let m = Module::compile("msg.arr", "def get(x: [n]f64, i: i64) -> f64 = x[i] * x[0]").unwrap();
    let f = m.function("get").unwrap();
    for kind in ["primal", "jvp", "vjp", "vjp_rows"] {
        let ir = f.backend_ir(kind).unwrap().expect("Cranelift IR");
        assert!(ir.contains("= symbol "), "{kind}: no message data?\n{ir}");
        assert!(!ir.contains("symbol colocated"), "{kind}: PC-relative message data\n{ir}");
    }
    let err = f.call(&[Arg::Vector(&[1.0, 2.0]), Arg::I64(5)]).unwrap_err();
    assert!(err.to_string().contains("index 5 is out of bounds"), "{err}");
    // Many modules (their code and data mapped and unmapped in turn) keep
    // working.
    for k in 0..200 {
        let src = format!("def get(x: [n]f64, i: i64) -> f64 = x[i] * {k}.5");
        let m = Module::compile("msg.arr", &src).unwrap();
        let err = m.function("get").unwrap().call(&[Arg::Vector(&[1.0]), Arg::I64(k)]);
        assert_eq!(err.is_err(), k >= 1, "{k}");
    }
}

/// `fuzz/run.sh programs`: the cotangent of an empty `[n][2]f64` argument
/// (n = 0) must have the argument's shape `[0, 2]`. Reverse mode by
/// forward columns (`f`: a `vjp` operator inside) laid the cotangent out
/// by a build over the 0 rows, whose inner extent is 0: shape `[0, 0]`
/// ("vjp vs the Delta oracle: entry 5: value 0: shape [0, 0] vs [0, 2]").
#[test]
fn cotangents_of_empty_arrays_keep_their_shape() {
    let src = "def h1(x: [n]f64, y: f64) -> [n]f64 = x * y
def f(x: [n]f64, m: [n][2]f64) -> f64 =
  sum(for j < n => (let (v, (g1, g2)) = vjp(h1, (x, m[0, 1]), x) in 0.5 + g2 * 0.0))
def g(m: [n][2]f64) -> f64 = sum(for i < n => m[i, 1])
def h(m: [n][2]f64) -> [n]f64 = for i < n => m[i, 0]
";
    let x: [f64; 0] = [];
    for backend in [Backend::Cranelift, Backend::Interp] {
        let m = Module::compile_with("empty.arr", src, Options::backend(backend)).unwrap();
        let empty = Arg::Array { data: &x, shape: &[0, 2] };
        for (name, args) in [("f", vec![Arg::Vector(&x), empty]), ("g", vec![empty]), ("h", vec![empty])] {
            let f = m.function(name).unwrap();
            let ct: Vec<Option<Arg>> = vec![Some(if name == "h" { Arg::Vector(&x) } else { Arg::F64(1.0) })];
            let v = f.vjp(&args, &ct).unwrap_or_else(|e| panic!("{name} {backend:?}: {e}"));
            let shapes: Vec<Vec<usize>> = v
                .cotangent
                .as_slice()
                .iter()
                .map(|c| match c {
                    Some(Value::Array(a)) => a.shape.clone(),
                    other => panic!("{name} {backend:?}: {other:?}"),
                })
                .collect();
            let want: Vec<Vec<usize>> = if name == "f" { vec![vec![0], vec![0, 2]] } else { vec![vec![0, 2]] };
            assert_eq!(shapes, want, "{name} {backend:?}: vjp cotangent shapes");
            let g = f.jacobian(&args).unwrap_or_else(|e| panic!("{name} {backend:?}: {e}"));
            assert_eq!(g.cols, 0, "{name} {backend:?}");
        }
    }
}
