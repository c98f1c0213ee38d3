//! The `programs` target: a generated program ([`crate::generate`]) on the
//! interpreter and the Cranelift JIT through `arrayad::Module`, compared
//! with each other and with the runtime oracles.

use crate::compare::{agree, agree_with, close, dot, f64s, Rng};
use crate::generate;
use arrayad::{Backend, Error, Module, Options, Value};
use arrayad_ir::{ArrayData, ArrayValue, ErrorKind, Scalar};

/// Owned values as borrowed arguments.
fn av(v: &[Value]) -> Vec<arrayad::Arg<'_>> {
    v.iter().map(arrayad::Arg::Value).collect()
}

/// Optional owned values as optional borrowed arguments.
fn ao(v: &[Option<Value>]) -> Vec<Option<arrayad::Arg<'_>>> {
    v.iter().map(|x| x.as_ref().map(arrayad::Arg::Value)).collect()
}


/// Memory limit of a JIT call (a generated program needs kilobytes).
const MAX_MEMORY: u64 = 256 << 20;

fn random_like(like: &Value, rng: &mut Rng) -> Value {
    match like {
        Value::Array(a) => Value::Array(ArrayValue {
            shape: a.shape.clone(),
            data: ArrayData::F64((0..a.data.len()).map(|_| rng.unit()).collect()),
        }),
        _ => Value::F64(rng.unit()),
    }
}

fn is_f64(v: &Value) -> bool {
    v.ty().elem == Scalar::F64
}

/// Panics unless both results are the same error, or values that agree.
fn same<T>(what: &str, ctx: &str, a: &Result<T, Error>, b: &Result<T, Error>, eq: impl Fn(&T, &T) -> Option<String>) {
    for r in [a, b] {
        if let Err(e @ Error::Internal(_)) = r {
            panic!("{what}: internal error: {e}\n{ctx}");
        }
    }
    match (a, b) {
        (Ok(x), Ok(y)) => {
            if let Some(m) = eq(x, y) {
                panic!("{what}: interpreter and JIT disagree: {m}\n{ctx}");
            }
        }
        (Err(x), Err(y)) => {
            // The names in messages may differ: after inlining, compiled
            // code names an array after the caller's variable (a known
            // difference, see fuzz/README.md); kinds, locations and values
            // may not.
            if x.runtime_kind() != y.runtime_kind() || mask_names(&x.to_string()) != mask_names(&y.to_string()) {
                panic!("{what}: different errors:\n  interpreter: {x}\n  JIT: {y}\n{ctx}");
            }
        }
        (Ok(_), Err(e)) => panic!("{what}: only the JIT fails: {e}\n{ctx}"),
        (Err(e), Ok(_)) => panic!("{what}: only the interpreter fails: {e}\n{ctx}"),
    }
}

/// `text` with every name in backquotes replaced by `_`.
fn mask_names(text: &str) -> String {
    let mut out = String::new();
    for (k, part) in text.split('`').enumerate() {
        if k > 0 {
            out.push('`');
        }
        out.push_str(if k % 2 == 1 { "_" } else { part });
    }
    out
}

fn values_eq(rel: f64) -> impl Fn(&Vec<Value>, &Vec<Value>) -> Option<String> {
    move |a, b| agree(a, b, rel)
}

fn options_eq(rel: f64) -> impl Fn(&[Option<Value>], &[Option<Value>]) -> Option<String> {
    options_eq_with(rel, false)
}

fn options_eq_with(rel: f64, lenient: bool) -> impl Fn(&[Option<Value>], &[Option<Value>]) -> Option<String> {
    move |a, b| {
        if a.len() != b.len() {
            return Some(format!("{} vs {} entries", a.len(), b.len()));
        }
        for (k, (x, y)) in a.iter().zip(b).enumerate() {
            match (x, y) {
                (None, None) => {}
                (Some(x), Some(y)) => {
                    if let Some(m) = agree_with(std::slice::from_ref(x), std::slice::from_ref(y), rel, lenient) {
                        return Some(format!("entry {k}: {m}"));
                    }
                }
                _ => return Some(format!("entry {k}: {x:?} vs {y:?}")),
            }
        }
        None
    }
}

/// Runs every check on the program of `data`.
pub fn check(data: &[u8]) {
    let case = generate::case(data);
    let ctx = format!("--- program ---\n{}--- arguments ---\n{:?}", case.source, case.args);
    if std::env::var_os("ARRAYAD_FUZZ_SHOW").is_some() {
        eprintln!("{ctx}");
    }
    let program = arrayad_frontend::compile("gen.arr", &case.source)
        .unwrap_or_else(|d| panic!("the generated program does not compile:\n{}\n{}", d.render(), case.source));
    let interp = Module::from_program(program.clone(), Options::backend(Backend::Interp))
        .unwrap_or_else(|e| panic!("interpreter module: {e}\n{ctx}"));
    let jit = Module::from_program(program, Options::default().with_max_memory(MAX_MEMORY))
        .unwrap_or_else(|e| panic!("JIT module: {e}\n{ctx}"));
    let fi = interp.function("f").expect("f");
    let fj = jit.function("f").expect("f");
    let args = &case.args;

    // The primal.
    let ri = fi.call_values(args);
    let rj = fj.call_values(args);
    same("primal", &ctx, &ri, &rj, values_eq(1e-12));
    let Ok(reference) = ri else { return };

    let mut rng = Rng(0x5eed ^ case.seed);
    let active = fj.active().to_vec();
    let tangents: Vec<Option<Value>> =
        args.iter().zip(&active).map(|(a, &act)| act.then(|| random_like(a, &mut rng))).collect();
    let cotangents: Vec<Option<Value>> =
        reference.iter().map(|r| is_f64(r).then(|| random_like(r, &mut rng))).collect();

    // Forward mode: interpreter, JIT, value = primal.
    let ji = fi.jvp(&av(args), &ao(&tangents));
    let jj = fj.jvp(&av(args), &ao(&tangents));
    same("jvp", &ctx, &ji, &jj, |a, b| {
        agree(&a.value, &b.value, 1e-12).or_else(|| options_eq(1e-12)(&a.tangent, &b.tangent))
    });
    let ji = ji.unwrap_or_else(|e| panic!("jvp fails where the primal does not: {e}\n{ctx}"));
    if let Some(m) = agree(&ji.value, &reference, 1e-12) {
        panic!("jvp value differs from the primal: {m}\n{ctx}");
    }

    // Reverse mode.
    let vi = fi.vjp(&av(args), &ao(&cotangents));
    let vj = fj.vjp(&av(args), &ao(&cotangents));
    same("vjp", &ctx, &vi, &vj, |a, b| {
        agree(&a.value, &b.value, 1e-12).or_else(|| options_eq(1e-12)(a.cotangent.as_slice(), b.cotangent.as_slice()))
    });
    let vi = vi.unwrap_or_else(|e| panic!("vjp fails where the primal does not: {e}\n{ctx}"));
    if let Some(m) = agree(&vi.value, &reference, 1e-12) {
        panic!("vjp value differs from the primal: {m}\n{ctx}");
    }

    // <ct, J t> == <J^T ct, t>, within the rounding of the two sums.
    let jt: Vec<Value> = ji.tangent.iter().flatten().cloned().collect();
    let cts: Vec<Value> = cotangents.iter().flatten().cloned().collect();
    let gs: Vec<Value> = vi.cotangent.as_slice().iter().flatten().cloned().collect();
    let ts: Vec<Value> = tangents.iter().flatten().cloned().collect();
    let (lhs, lscale) = dot(&cts, &jt);
    let (rhs, rscale) = dot(&gs, &ts);
    if lhs.is_finite() && rhs.is_finite() && lscale.is_finite() && rscale.is_finite() {
        let tol = 1e-9 * lscale.max(rscale).max(1.0);
        assert!((lhs - rhs).abs() <= tol, "<ct, J t> = {lhs} but <J^T ct, t> = {rhs}\n{ctx}");
    }

    // The oracles' structural zeros (a Delta `Zero`, a constant without a
    // tangent) skip what the compiled code multiplies by a zero cotangent:
    // a NaN or infinite partial derivative (atan2 at (0, 0), an overflow, a
    // NaN argument) gives 0 * NaN = NaN there and 0 in the oracle, as in
    // JAX's NaN-gradient cases. So only elements finite on both sides are
    // compared with the oracles (the backends are compared NaN for NaN).
    let lenient = true;

    // The oracles evaluate the program as written (with the derivative
    // operators expanded); code they do not support (the imperative forms
    // of reverse-mode code inside) is an InvalidArgument error.
    let prog = jit.program();
    let fid = prog.find("f").expect("f");
    match arrayad_ad::oracle::vjp(prog, fid, args, &active, &cotangents) {
        Ok((values, grads)) => {
            if let Some(m) = agree(&values, &reference, 1e-12) {
                panic!("Delta oracle value: {m}\n{ctx}");
            }
            if let Some(m) = options_eq_with(1e-9, lenient)(vi.cotangent.as_slice(), &grads) {
                panic!("vjp vs the Delta oracle: {m}\n{ctx}");
            }
        }
        Err(e) if e.kind == ErrorKind::InvalidArgument => {}
        Err(e) => panic!("the Delta oracle fails where the primal does not: {e}\n{ctx}"),
    }
    let oracle_tangents: Vec<Option<Value>> = tangents.clone();
    match arrayad_ad::oracle::jvp(prog, fid, args, &oracle_tangents) {
        Ok((_, tans)) => {
            if let Some(m) = options_eq_with(1e-9, lenient)(&ji.tangent, &tans) {
                panic!("jvp vs the dual-number oracle: {m}\n{ctx}");
            }
        }
        Err(e) if e.kind == ErrorKind::InvalidArgument => {}
        Err(e) => panic!("the dual-number oracle fails where the primal does not: {e}\n{ctx}"),
    }

    // The dense Jacobian (many-row vjp or jvp columns), sometimes.
    if case.jacobian {
        let ai = fi.jacobian(&av(args));
        let aj = fj.jacobian(&av(args));
        same("jacobian", &ctx, &ai, &aj, |a, b| {
            if (a.rows, a.cols) != (b.rows, b.cols) {
                return Some(format!("{}x{} vs {}x{}", a.rows, a.cols, b.rows, b.cols));
            }
            agree(&a.value, &b.value, 1e-12).or_else(|| {
                a.data
                    .iter()
                    .zip(&b.data)
                    .enumerate()
                    .find(|(_, (x, y))| !close(**x, **y, 1e-12))
                    .map(|(k, (x, y))| format!("entry {k} (row {}, column {}): {x} vs {y}", k / a.cols, k % a.cols))
            })
        });
        let ai = ai.unwrap_or_else(|e| panic!("the Jacobian fails where the primal does not: {e}\n{ctx}"));
        // Row r . t == (J t)_r for the jvp's tangent t.
        let t: Vec<f64> = ts.iter().flat_map(f64s).collect();
        let jtf: Vec<f64> = jt.iter().flat_map(f64s).collect();
        if t.len() == ai.cols && jtf.len() == ai.rows {
            for (r, want) in jtf.iter().enumerate() {
                let row = ai.row(r);
                let got: f64 = row.iter().zip(&t).map(|(a, b)| a * b).sum();
                let scale: f64 = row.iter().zip(&t).map(|(a, b)| (a * b).abs()).sum();
                if got.is_finite() && want.is_finite() && scale.is_finite() {
                    let tol = 1e-9 * scale.max(want.abs()).max(1.0);
                    assert!((got - want).abs() <= tol, "Jacobian row {r} . t = {got}, jvp {want}\n{ctx}");
                }
            }
        } else {
            panic!(
                "the Jacobian is {}x{} for {} tangents and {} jvp outputs\n{ctx}",
                ai.rows,
                ai.cols,
                t.len(),
                jtf.len()
            );
        }
    }
}
