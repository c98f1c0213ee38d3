//! The `programs` target: a generated program ([`crate::generate`]) on the
//! interpreter, the Cranelift JIT and (with the `llvm` feature) the LLVM
//! JIT through `arrayad::Module`, compared with each other and with the
//! runtime oracles.
//!
//! A program is compiled once and run on many argument sets: the one the
//! input encodes and [`runs`]` - 1` more drawn from its seed (sizes
//! included); the compiled modules of recent programs are kept, so that
//! inputs that differ only in their argument bytes compile nothing.

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

/// Whether every finite `f64` in `values` is below 1e6 in magnitude, and
/// every `i64` below 2^31. With larger ones (the generator's 1e300, an
/// `f64(k)` of `i64::MIN`) a sum taken in another order loses small terms
/// to cancellation (`(1.5 + 1e19) - 1e19 == 0`), so the oracles, which sum
/// cotangents in their own order, are not compared.
fn moderate(values: &[Value]) -> bool {
    let small = |x: &f64| !x.is_finite() || x.abs() < 1e6;
    let int = |k: &i64| k.unsigned_abs() < 1 << 31;
    values.iter().all(|v| match v {
        Value::F64(x) => small(x),
        Value::I64(k) => int(k),
        Value::Array(ArrayValue { data: ArrayData::F64(xs), .. }) => xs.iter().all(small),
        Value::Array(ArrayValue { data: ArrayData::I64(ks), .. }) => ks.iter().all(int),
        _ => true,
    })
}

/// Panics unless both results are the same error, or values that agree.
fn same<T>(what: &str, ctx: &str, a: &Result<T, Error>, b: &Result<T, Error>, eq: impl Fn(&T, &T) -> Option<String>) {
    same_as(what, ctx, ("interpreter", a), ("JIT", b), eq)
}

/// [`same`] with the names of the two sides.
fn same_as<T>(
    what: &str,
    ctx: &str,
    a: (&str, &Result<T, Error>),
    b: (&str, &Result<T, Error>),
    eq: impl Fn(&T, &T) -> Option<String>,
) {
    if let Some(m) = differ(what, a, b, eq) {
        panic!("{m}\n{ctx}");
    }
}

/// How two results differ (`None`: the same error, or values that agree).
fn differ<T>(
    what: &str,
    (na, a): (&str, &Result<T, Error>),
    (nb, b): (&str, &Result<T, Error>),
    eq: impl Fn(&T, &T) -> Option<String>,
) -> Option<String> {
    for r in [a, b] {
        if let Err(e @ Error::Internal(_)) = r {
            return Some(format!("{what}: internal error: {e}"));
        }
    }
    match (a, b) {
        (Ok(x), Ok(y)) => eq(x, y).map(|m| format!("{what}: {na} and {nb} disagree: {m}")),
        (Err(x), Err(y)) => {
            // The names in messages may differ: after inlining, compiled
            // code names an array after the caller's variable (a known
            // difference, see fuzz/README.md); kinds, locations and values
            // may not.
            (x.runtime_kind() != y.runtime_kind() || mask_names(&x.to_string()) != mask_names(&y.to_string()))
                .then(|| format!("{what}: different errors:\n  {na}: {x}\n  {nb}: {y}"))
        }
        (Ok(_), Err(e)) => Some(format!("{what}: only the {nb} fails: {e}")),
        (Err(e), Ok(_)) => Some(format!("{what}: only the {na} fails: {e}")),
    }
}

/// The known difference of fuzz/README.md: a comprehension that runs zero
/// times takes its inner extents from what `arrayad_ir::shape` sees before
/// the loop, and the interpreter (the program as written, calls and all)
/// may see less than compiled code (inlined and simplified). The primal is
/// then run by the interpreter on the compiled code's IR (the prepared
/// primal): if that agrees with the JIT, the difference is that one.
/// How many argument sets [`empty_extents_differ`] excused.
pub static EMPTY_EXTENTS_EXCUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn empty_extents_differ(c: &Compiled, args: &[Value], jit: &Result<Vec<Value>, Error>, ctx: &str) -> bool {
    let prog = c.jit.program();
    let Some(id) = prog.find("f") else { return false };
    let prepared = arrayad_ir::passes::prepare(prog, id);
    let p = arrayad_ir::Program { file: prog.file.clone(), funcs: vec![prepared] };
    let on_prepared = arrayad_ir::interp::run(&p, arrayad_ir::FuncId(0), args).map_err(Error::from);
    let excused = differ("primal", ("interpreter", &on_prepared), ("JIT", jit), values_eq(1e-12)).is_none();
    if excused {
        EMPTY_EXTENTS_EXCUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if std::env::var_os("ARRAYAD_FUZZ_SHOW_EXCUSED").is_some() {
            eprintln!("excused:\n{ctx}");
        }
    }
    excused
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

/// The argument sets each generated program runs on: `$ARRAYAD_FUZZ_RUNS`,
/// else 16.
pub fn runs() -> usize {
    static RUNS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *RUNS.get_or_init(|| {
        std::env::var("ARRAYAD_FUZZ_RUNS").ok().and_then(|r| r.parse().ok()).filter(|&r| r > 0).unwrap_or(16)
    })
}

/// The modules of one program, on each backend.
struct Compiled {
    interp: Module,
    jit: Module,
    #[cfg(feature = "llvm")]
    llvm: Module,
}

/// How many programs' modules are kept.
const KEPT: usize = 64;

thread_local! {
    static COMPILED: std::cell::RefCell<std::collections::HashMap<String, std::rc::Rc<Compiled>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The modules of `source`, compiled on first use.
fn compiled(source: &str) -> std::rc::Rc<Compiled> {
    if let Some(c) = COMPILED.with(|m| m.borrow().get(source).cloned()) {
        return c;
    }
    let program = arrayad_frontend::compile("gen.arr", source)
        .unwrap_or_else(|d| panic!("the generated program does not compile:\n{}\n{}", d.render(), source));
    let module = |options: Options, what: &str| {
        Module::from_program(program.clone(), options).unwrap_or_else(|e| panic!("{what} module: {e}\n{source}"))
    };
    let c = std::rc::Rc::new(Compiled {
        interp: module(Options::backend(Backend::Interp), "interpreter"),
        jit: module(Options::default().with_max_memory(MAX_MEMORY), "JIT"),
        #[cfg(feature = "llvm")]
        llvm: module(Options::backend(Backend::Llvm).with_max_memory(MAX_MEMORY), "LLVM"),
    });
    COMPILED.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= KEPT {
            m.clear();
        }
        m.insert(source.to_string(), c.clone());
    });
    c
}

/// Runs every check on the program of `data`, on [`runs`] argument sets.
pub fn check(data: &[u8]) {
    let case = generate::case(data);
    let c = compiled(&case.source);
    check_args(&c, &case, &case.args, case.seed);
    let mut rng = Rng(0xa5a5_5a5a ^ case.seed);
    for run in 1..runs() {
        let args = generate::more_arguments(&mut rng);
        check_args(&c, &case, &args, case.seed.wrapping_add(run as u64));
    }
}

/// LLVM against Cranelift: the same values (relative 1e-12) or the same
/// errors (a no-op without the `llvm` feature).
#[cfg(feature = "llvm")]
fn same_on_llvm<T>(
    what: &str,
    ctx: &str,
    cranelift: &Result<T, Error>,
    llvm: impl FnOnce() -> Result<T, Error>,
    eq: impl Fn(&T, &T) -> Option<String>,
) {
    let l = llvm();
    same_as(what, ctx, ("Cranelift", cranelift), ("LLVM", &l), eq);
}

/// The checks of one argument set `args` of the program of `case`.
fn check_args(c: &Compiled, case: &generate::Case, args: &[Value], seed: u64) {
    let ctx = format!("--- program ---\n{}--- arguments ---\n{:?}", case.source, args);
    if std::env::var_os("ARRAYAD_FUZZ_SHOW").is_some() {
        eprintln!("{ctx}");
    }
    let (interp, jit) = (&c.interp, &c.jit);
    let fi = interp.function("f").expect("f");
    let fj = jit.function("f").expect("f");
    #[cfg(feature = "llvm")]
    let fl = c.llvm.function("f").expect("f");

    // The primal.
    let ri = fi.call_values(args);
    let rj = fj.call_values(args);
    if let Some(m) = differ("primal", ("interpreter", &ri), ("JIT", &rj), values_eq(1e-12)) {
        if empty_extents_differ(c, args, &rj, &ctx) {
            return;
        }
        panic!("{m}\n{ctx}");
    }
    #[cfg(feature = "llvm")]
    same_on_llvm("primal", &ctx, &rj, || fl.call_values(args), values_eq(1e-12));
    let Ok(reference) = ri else { return };

    let mut rng = Rng(0x5eed ^ seed);
    let active = fj.active().to_vec();
    let tangents: Vec<Option<Value>> =
        args.iter().zip(&active).map(|(a, &act)| act.then(|| random_like(a, &mut rng))).collect();
    let cotangents: Vec<Option<Value>> =
        reference.iter().map(|r| is_f64(r).then(|| random_like(r, &mut rng))).collect();

    // Forward mode: interpreter, JIT, value = primal.
    let ji = fi.jvp(&av(args), &ao(&tangents));
    let jj = fj.jvp(&av(args), &ao(&tangents));
    let jvp_eq = |a: &arrayad::Jvp, b: &arrayad::Jvp| {
        agree(&a.value, &b.value, 1e-12).or_else(|| options_eq(1e-12)(&a.tangent, &b.tangent))
    };
    same("jvp", &ctx, &ji, &jj, jvp_eq);
    #[cfg(feature = "llvm")]
    same_on_llvm("jvp", &ctx, &jj, || fl.jvp(&av(args), &ao(&tangents)), jvp_eq);
    let ji = ji.unwrap_or_else(|e| panic!("jvp fails where the primal does not: {e}\n{ctx}"));
    if let Some(m) = agree(&ji.value, &reference, 1e-12) {
        panic!("jvp value differs from the primal: {m}\n{ctx}");
    }

    // Reverse mode.
    let vi = fi.vjp(&av(args), &ao(&cotangents));
    let vj = fj.vjp(&av(args), &ao(&cotangents));
    let vjp_eq = |a: &arrayad::Vjp, b: &arrayad::Vjp| {
        agree(&a.value, &b.value, 1e-12).or_else(|| options_eq(1e-12)(a.cotangent.as_slice(), b.cotangent.as_slice()))
    };
    same("vjp", &ctx, &vi, &vj, vjp_eq);
    #[cfg(feature = "llvm")]
    same_on_llvm("vjp", &ctx, &vj, || fl.vjp(&av(args), &ao(&cotangents)), vjp_eq);
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
    if moderate(args) {
        compare_with_oracles(jit, args, &reference, &active, (&tangents, &cotangents), (&vi, &ji), &ctx);
    }

    // The dense Jacobian (many-row vjp or jvp columns), sometimes.
    if case.jacobian {
        let ai = fi.jacobian(&av(args));
        let aj = fj.jacobian(&av(args));
        let jacobian_eq = |a: &arrayad::Jacobian, b: &arrayad::Jacobian| {
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
        };
        same("jacobian", &ctx, &ai, &aj, jacobian_eq);
        #[cfg(feature = "llvm")]
        same_on_llvm("jacobian", &ctx, &aj, || fl.jacobian(&av(args)), jacobian_eq);
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

/// The compiled vjp `vi` and jvp `ji` (interpreter) against the runtime-Delta
/// and dual-number oracles, which evaluate the program as written (with the
/// derivative operators expanded); code they do not support (the imperative
/// forms of reverse-mode code inside) is an InvalidArgument error.
fn compare_with_oracles(
    jit: &Module,
    args: &[Value],
    reference: &[Value],
    active: &[bool],
    (tangents, cotangents): (&[Option<Value>], &[Option<Value>]),
    (vi, ji): (&arrayad::Vjp, &arrayad::Jvp),
    ctx: &str,
) {
    let lenient = true;
    let prog = jit.program();
    let fid = prog.find("f").expect("f");
    match arrayad_ad::oracle::vjp(prog, fid, args, active, cotangents) {
        Ok((values, grads)) => {
            if let Some(m) = agree(&values, reference, 1e-12) {
                panic!("Delta oracle value: {m}\n{ctx}");
            }
            if let Some(m) = options_eq_with(1e-9, lenient)(vi.cotangent.as_slice(), &grads) {
                panic!("vjp vs the Delta oracle: {m}\n{ctx}");
            }
        }
        Err(e) if e.kind == ErrorKind::InvalidArgument => {}
        Err(e) => panic!("the Delta oracle fails where the primal does not: {e}\n{ctx}"),
    }
    match arrayad_ad::oracle::jvp(prog, fid, args, tangents) {
        Ok((_, tans)) => {
            if let Some(m) = options_eq_with(1e-9, lenient)(&ji.tangent, &tans) {
                panic!("jvp vs the dual-number oracle: {m}\n{ctx}");
            }
        }
        Err(e) if e.kind == ErrorKind::InvalidArgument => {}
        Err(e) => panic!("the dual-number oracle fails where the primal does not: {e}\n{ctx}"),
    }
}
