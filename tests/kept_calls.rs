//! Definitions kept as calls (`arrayad_ir::passes::inline::KeptCalls`):
//! compiled once and called from the primal's code instead of inlined, on
//! every backend, give the interpreter's values and errors, and loops that
//! call them run in constant memory.

mod common;

use arrayad::{Arg, Backend, Module, Options};
use arrayad_ir::Value;
use common::corpus_cases;

/// Every backend that compiles, with every callee kept (`keep_calls_above`
/// 1) and with the default policy.
fn compiled(file: &str, source: &str) -> Vec<(String, Module)> {
    let mut out = Vec::new();
    for b in common::api_backends() {
        for keep in [1, u64::MAX] {
            let options = Options::backend(b).with_keep_calls_above(keep);
            match Module::compile_with(file, source, options) {
                Ok(m) => out.push((format!("{b:?}, keep above {keep}"), m)),
                Err(e) => panic!("{file}: {e}"),
            }
        }
    }
    out
}

fn values(m: &Module, func: &str, args: &[Value]) -> Result<Vec<Value>, String> {
    let f = m.function(func).map_err(|e| e.to_string())?;
    let args: Vec<Arg<'_>> = args.iter().map(Arg::Value).collect();
    f.call(&args).map_err(|e| e.to_string())
}

fn vector(v: Vec<f64>) -> Value {
    Value::Array(arrayad_ir::ArrayValue { shape: vec![v.len()], data: arrayad_ir::ArrayData::F64(v) })
}

fn ints(v: Vec<i64>) -> Value {
    Value::Array(arrayad_ir::ArrayValue { shape: vec![v.len()], data: arrayad_ir::ArrayData::I64(v) })
}

fn bits(vs: &[Value]) -> Vec<String> {
    vs.iter().map(|v| format!("{v:?}")).collect()
}

#[test]
fn corpus_values_with_every_callee_kept_equal_the_interpreter() {
    let mut checked = 0;
    for case in corpus_cases() {
        let reference = Module::compile_with(&case.file, &case.source, Options::backend(Backend::Interp)).unwrap();
        let program = reference.program();
        let Some(id) = program.find(&case.func) else { panic!("{}: no {}", case.file, case.func) };
        let types = program.func(id).param_types();
        let args: Vec<Value> =
            case.args.as_array().unwrap().iter().zip(&types).map(|(j, t)| common::json_value(j, *t)).collect();
        let want = values(&reference, &case.func, &args);
        for (what, m) in compiled(&case.file, &case.source) {
            let got = values(&m, &case.func, &args);
            match (&got, &want) {
                (Ok(g), Ok(w)) => assert_eq!(bits(g), bits(w), "{}:{} {what}", case.file, case.func),
                (Err(g), Err(w)) => assert_eq!(g, w, "{}:{} {what}", case.file, case.func),
                _ => panic!("{}:{} {what}: {got:?} against {want:?}", case.file, case.func),
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} runs");
}

const CALLS: &str = "
def helper(x: [n]f64, s: f64) -> [n]f64 =
  let y = for i < n => x[i] * s + 1.0 in
  for i < n => y[i] * y[i]

def row(a: [m][k]f64, i: i64) -> [k]f64 = a[i]

def pair(x: [n]f64, flag: bool, j: i64) -> (f64, bool, i64, [n]f64) =
  (sum(x), !flag, j + n, x)

def at(a: [n]f64, k: i64) -> f64 = a[k]

def top(x: [n]f64, k: i64) -> f64 =
  let a = helper(x, 3.0) in
  let (s, f, j, same) = pair(a, true, k) in
  let (s2, f2, j2, same2) = pair(same, f, j) in
  let b = if f then same else helper(same2, 0.5) in
  let rows = for i < n => helper(b, 0.5) in
  sum(for i < n => row(rows, i)[i] * row(rows, n - 1 - i)[i]) + s + s2 + at(a, k) * at(x, k)
    + (if f2 then 0.0 else 1.0) + f64(j + j2)

def rows0(x: [n]f64, c: [m]i64) -> [m][n]f64 = for i < m => helper(x, f64(c[i]))

def looped(x: [n]f64, steps: i64) -> f64 =
  loop acc = 0.0 for t < steps do acc + sum(helper(x, f64(t)))

def scan(x: [n]f64, s: f64) -> [n]f64 =
  loop acc = x for t < 3 do for i < n => sin(acc[i]) * s + x[i]

def stepped(x: [n]f64, steps: i64) -> [n]f64 =
  loop acc = x for t < steps do
    let h = scan(acc, 0.9) in
    let g = scan(h, 0.5) in
    for i < n => g[i] * acc[i] / 4.0
";

#[test]
fn calls_of_every_shape_and_their_errors_equal_the_interpreter() {
    let source = CALLS;
    let reference = Module::compile_with("calls.arr", source, Options::backend(Backend::Interp)).unwrap();
    let x = vector(vec![1.0, -2.0, 0.5]);
    let runs: Vec<(&str, Vec<Value>)> = vec![
        ("top", vec![x.clone(), Value::I64(1)]),
        // Out of bounds inside a callee (`at`): its message, located in it.
        ("top", vec![x.clone(), Value::I64(7)]),
        ("top", vec![vector(Vec::new()), Value::I64(0)]),
        ("looped", vec![x.clone(), Value::I64(5)]),
        // No rows: their extents come from the callee's result.
        ("rows0", vec![x.clone(), ints(vec![])]),
        ("rows0", vec![x.clone(), ints(vec![2, -1])]),
        ("pair", vec![x.clone(), Value::Bool(false), Value::I64(-3)]),
    ];
    for (func, args) in &runs {
        let want = values(&reference, func, args);
        for (what, m) in compiled("calls.arr", source) {
            let got = values(&m, func, args);
            match (&got, &want) {
                (Ok(g), Ok(w)) => assert_eq!(bits(g), bits(w), "{func} {what}"),
                (Err(g), Err(w)) => {
                    // Inlined, the message names the inlined copy's
                    // variable (`result`); kept, the callee's own.
                    let at = |m: &str| m.split(": ").next().map(str::to_string);
                    assert_eq!(at(g), at(w), "{func} {what}");
                    if what.ends_with("above 1") {
                        assert_eq!(g, w, "{func} {what}");
                    }
                    assert!(g.starts_with("calls.arr:11:"), "{g}");
                }
                _ => panic!("{func} {what}: {got:?} against {want:?}"),
            }
        }
    }
}

#[test]
fn a_loop_calling_an_allocating_callee_runs_in_constant_memory() {
    let source = CALLS;
    // 2,000 iterations of two 80 kB arrays each: 320 MB without release.
    let x = vector(vec![0.5; 10_000]);
    for (what, m) in compiled("calls.arr", source) {
        let m = Module::compile_with("calls.arr", source, m.options().clone().with_max_memory(32 << 20)).unwrap();
        let got = values(&m, "looped", &[x.clone(), Value::I64(2_000)]);
        assert!(got.is_ok(), "{what}: {got:?}");
    }
}

/// The f64s of every value (absent ones as nothing).
fn flat(vs: &[Option<Value>]) -> Vec<f64> {
    let mut out = Vec::new();
    for v in vs.iter().flatten() {
        match v {
            Value::F64(x) => out.push(*x),
            Value::Array(arrayad_ir::ArrayValue { data: arrayad_ir::ArrayData::F64(xs), .. }) => out.extend(xs),
            _ => {}
        }
    }
    out
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: count");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-12 * g.abs().max(w.abs()).max(1.0);
        assert!(ok, "{what} [{k}]: {g} against {w}");
    }
}

/// The ramp `c, 2c, 3c, ...` shaped like `v` where it has f64 elements.
fn ramp_like(v: &Value, c: f64) -> Option<Value> {
    match v {
        Value::F64(_) => Some(Value::F64(c)),
        Value::Array(arrayad_ir::ArrayValue { shape, data: arrayad_ir::ArrayData::F64(xs) }) => {
            let data = arrayad_ir::ArrayData::F64((1..=xs.len()).map(|k| c * k as f64).collect());
            Some(Value::Array(arrayad_ir::ArrayValue { shape: shape.clone(), data }))
        }
        _ => None,
    }
}

fn as_args(d: &[Option<Value>]) -> Vec<Option<Arg<'_>>> {
    d.iter().map(|o| o.as_ref().map(Arg::Value)).collect()
}

/// Every derivative of `func` the host API computes, flattened: the vjp
/// with ramp cotangents, the jvp in a ramp direction, the same jvp and one
/// more direction by the vector jvp (`jvp_many`), the dense Jacobian (the
/// many-row vjp when it has no more rows than columns, else the vector
/// jvp), and of a function with one f64 result the Hessian-vector product
/// in the ramp direction (forward over reverse).
fn derivatives(m: &Module, func: &str, args: &[Value]) -> Result<[Vec<f64>; 5], String> {
    let f = m.function(func).map_err(|e| e.to_string())?;
    let argv: Vec<Arg<'_>> = args.iter().map(Arg::Value).collect();
    let direction = |c: f64| -> Vec<Option<Value>> { args.iter().map(|a| ramp_like(a, c)).collect() };
    let (d1, d2) = (direction(1.0), direction(-0.5));
    let (t1, t2) = (as_args(&d1), as_args(&d2));
    let jvp = f.jvp(&argv, &t1).map_err(|e| e.to_string())?;
    let many = f.jvp_many(&argv, &[t1.clone(), t2]).map_err(|e| e.to_string())?;
    let results = f.call(&argv).map_err(|e| e.to_string())?;
    let cts: Vec<Option<Value>> = results.iter().map(|r| ramp_like(r, 0.25)).collect();
    let vjp = f.vjp(&argv, &as_args(&cts)).map_err(|e| e.to_string())?;
    let jacobian = f.jacobian(&argv).map_err(|e| e.to_string())?;
    let many: Vec<Option<Value>> = many.tangents.into_iter().flatten().collect();
    let hvp = match results.as_slice() {
        [Value::F64(_)] => flat(f.hvp(&argv, &t1).map_err(|e| e.to_string())?.hvp.as_slice()),
        _ => Vec::new(),
    };
    Ok([flat(vjp.cotangent.as_slice()), flat(&jvp.tangent), flat(&many), jacobian.data, hvp])
}

#[test]
fn derivatives_through_kept_calls_equal_the_inlined_ones() {
    let x = vector(vec![1.0, -2.0, 0.5]);
    let mut runs: Vec<(String, String, String, Vec<Value>)> = vec![
        ("calls.arr".into(), CALLS.into(), "top".into(), vec![x.clone(), Value::I64(1)]),
        ("calls.arr".into(), CALLS.into(), "looped".into(), vec![x.clone(), Value::I64(4)]),
        ("calls.arr".into(), CALLS.into(), "pair".into(), vec![x.clone(), Value::Bool(true), Value::I64(2)]),
        ("calls.arr".into(), CALLS.into(), "rows0".into(), vec![x.clone(), ints(vec![])]),
        ("calls.arr".into(), CALLS.into(), "rows0".into(), vec![x.clone(), ints(vec![1, 2, 3])]),
        // The many-row vjp replays a tape that holds every step's state
        // while each row's backward pass calls `scan`'s vjp, which pushes
        // and pops a tape of its own.
        ("calls.arr".into(), CALLS.into(), "stepped".into(), vec![x.clone(), Value::I64(3)]),
    ];
    for case in corpus_cases().into_iter().filter(|c| !c.source.contains("grad(") && !c.source.contains("vjp(")) {
        let m = Module::compile_with(&case.file, &case.source, Options::backend(Backend::Interp)).unwrap();
        let program = m.program();
        let id = program.find(&case.func).unwrap();
        // A definition that calls none has nothing to keep: its code is
        // the same whatever the threshold.
        if arrayad_ir::visit::called_functions(&program.func(id).body).is_empty() {
            continue;
        }
        let types = program.func(id).param_types();
        let args = case.args.as_array().unwrap().iter().zip(&types).map(|(j, t)| common::json_value(j, *t)).collect();
        runs.push((case.file.clone(), case.source.clone(), case.func.clone(), args));
    }
    // The corpus's definitions that make calls: `many`, `tup` and `nest`
    // (calls_sharing.arr), `f` (control.arr), `softmax` (logsumexp.arr).
    assert!(runs.len() >= 6 + 5, "only {} runs", runs.len());
    for (file, source, func, args) in &runs {
        let checkpoints: &[bool] = if file == "calls.arr" { &[false, true] } else { &[false] };
        for &checkpoint in checkpoints {
            // One reference per run: every call inlined, by Cranelift
            // (the backends' agreement with each other and with the
            // interpreter is tests/differential.rs's).
            let reference = Options::backend(Backend::Cranelift).with_checkpoint(checkpoint);
            let reference = Module::compile_with(file, source, reference.with_keep_calls_above(u64::MAX)).unwrap();
            let want = derivatives(&reference, func, args);
            for b in common::api_backends() {
                let options = Options::backend(b).with_keep_calls_above(1).with_checkpoint(checkpoint);
                let m = Module::compile_with(file, source, options).unwrap();
                let got = derivatives(&m, func, args);
                let what = format!("{file}:{func} {b:?}, keep above 1, checkpoint {checkpoint}");
                match (&got, &want) {
                    (Ok(g), Ok(w)) => {
                        for (k, name) in ["vjp", "jvp", "jvp_many", "jacobian", "hvp"].iter().enumerate() {
                            assert_close(&format!("{what} {name}"), &g[k], &w[k]);
                        }
                    }
                    (Err(g), Err(w)) => assert_eq!(g.split(": ").next(), w.split(": ").next(), "{what}"),
                    _ => panic!("{what}: {got:?} against {want:?}"),
                }
            }
        }
    }
    // The interpreter inlines every call whatever the threshold.
    let interp = Options::backend(Backend::Interp).with_keep_calls_above(1);
    let interp = Module::compile_with("calls.arr", CALLS, interp).unwrap();
    let reference = Options::default().with_keep_calls_above(u64::MAX);
    let reference = Module::compile_with("calls.arr", CALLS, reference).unwrap();
    for (_, _, func, args) in runs.iter().take(6) {
        let (got, want) = (derivatives(&interp, func, args).unwrap(), derivatives(&reference, func, args).unwrap());
        for (k, name) in ["vjp", "jvp", "jvp_many", "jacobian", "hvp"].iter().enumerate() {
            assert_close(&format!("{func} interp {name}"), &got[k], &want[k]);
        }
    }
    // The derivatives of `top` call `helper`'s (indirectly, at addresses
    // of JIT code) instead of inlining it.
    let m = Module::compile_with("calls.arr", CALLS, Options::default().with_keep_calls_above(1)).unwrap();
    let top = m.function("top").unwrap();
    let _ = derivatives(&m, "top", &runs[0].3).unwrap();
    for kind in ["primal", "jvp", "vjp", "vjp_rows", "jvp_lanes", "hvp"] {
        let text = top.backend_ir(kind).unwrap().unwrap_or_default();
        assert!(text.contains("call_indirect"), "{kind}:\n{text}");
    }
}

/// `g0(x) = sin(x)` and `gk(x) = if x > 0 then g{k-1}(x / 2) else
/// g{k-1}(x + 1)`, `n` deep, each passing `extra` more f64 parameters
/// along unchanged (a larger frame per call): inlined, `gn` would have 2^n
/// calls, so every definition is kept, one native frame per level.
fn deep_chain(n: usize, extra: usize) -> String {
    let params: String = (0..extra).map(|i| format!(", a{i}: f64")).collect();
    let args: String = (0..extra).map(|i| format!(", a{i}")).collect();
    let mut src = format!("def g0(x: f64{params}) -> f64 = sin(x)\n");
    for k in 1..=n {
        let p = k - 1;
        src += &format!(
            "def g{k}(x: f64{params}) -> f64 = if x > 0.0 then g{p}(x * 0.5{args}) else g{p}(x + 1.0{args})\n"
        );
    }
    src
}

#[test]
fn kept_calls_nest_as_deep_as_the_definitions_and_fail_cleanly_beyond_the_stack() {
    // 100 kept calls deep (beyond the 64 that kept calls were once capped
    // at): g100(x) = sin(x / 2^100) for x > 0.
    let source = deep_chain(100, 0);
    let x = 0.3;
    let scale = 0.5f64.powi(100);
    let y = x * scale;
    for (what, m) in compiled("deep.arr", &source) {
        let f = m.function("g100").unwrap();
        let arg = Value::F64(x);
        if m.options().keep_calls_above == Some(u64::MAX) {
            // Inlined, the chain is refused by the inlining limit.
            let err = f.call(&[Arg::Value(&arg)]).unwrap_err().to_string();
            assert!(err.contains("program too large after inlining"), "{what}: {err}");
            continue;
        }
        let value = f.call(&[Arg::Value(&arg)]).unwrap();
        assert_close(&format!("{what} value"), &flat(&[value.into_iter().next()]), &[y.sin()]);
        let [vjp, jvp, _, jacobian, hvp] = derivatives(&m, "g100", &[arg]).unwrap();
        assert_close(&format!("{what} vjp"), &vjp, &[0.25 * scale * y.cos()]);
        assert_close(&format!("{what} jvp"), &jvp, &[scale * y.cos()]);
        assert_close(&format!("{what} jacobian"), &jacobian, &[scale * y.cos()]);
        assert_close(&format!("{what} hvp"), &hvp, &[-scale * scale * y.sin()]);
    }
    // On a thread of 256 KiB, 3,000 levels of 8 arguments each are more
    // than the thread has: the call fails with a located out-of-memory
    // error instead of overflowing the stack, and a shallower entry of
    // the same module runs after it. (Cranelift: LLVM takes minutes to
    // compile thousands of definitions; tests/c_abi.rs fails a library
    // the same way on the main thread.)
    let source = deep_chain(3_000, 7);
    let args: Vec<Value> = (0..8).map(|i| Value::F64(0.3 + i as f64)).collect();
    let argv: Vec<Arg<'_>> = args.iter().map(Arg::Value).collect();
    let m = Module::compile_with("deep.arr", &source, Options::backend(Backend::Cranelift).with_keep_calls_above(1));
    let m = m.unwrap();
    let (deep, shallow) = (m.function("g3000").unwrap(), m.function("g20").unwrap());
    let (err, got) = std::thread::scope(|s| {
        let small = std::thread::Builder::new().stack_size(256 << 10);
        let run = small.spawn_scoped(s, || (deep.call(&argv).map_err(|e| e.to_string()), shallow.call(&argv)));
        run.unwrap().join().unwrap()
    });
    let err = err.unwrap_err();
    assert!(err.contains("out of memory") && err.contains("calls nest too deeply at `g"), "{err}");
    assert!(err.starts_with("deep.arr:") && err.contains("need more stack than the thread has left"), "{err}");
    let got = got.unwrap();
    assert_close("g20 after the failure", &flat(&[got.into_iter().next()]), &[(0.3 * 0.5f64.powi(20)).sin()]);
}

/// Straight-line callees that fail one after another: a straight-line
/// caller checks the statuses of its calls once, at its end
/// (`arrayad_codegen`'s `calls_straight_line_code_only`), so it runs on after
/// `quotient(0)` fails and calls `remainder(1)`, which fails too, on values
/// the failed call left unset. The first error is the one reported, as
/// the interpreter reports it, in the value and in every derivative.
const FAILING: &str = "def quotient(k: i64) -> f64 = f64(100 / k)
def remainder(k: i64) -> f64 = f64(7 % (k - 1))
def deep(x: f64, k: i64) -> f64 = quotient(k) * x + remainder(k + 1) * x * x
def top(x: f64, k: i64) -> f64 = deep(x, k) + quotient(k - 3) * x + deep(x * 2.0, k + 5)
";

#[test]
fn straight_line_callers_report_the_first_failed_call_as_the_interpreter_does() {
    let reference = Module::compile_with("failing.arr", FAILING, Options::backend(Backend::Interp)).unwrap();
    // Each entry point of `top` at (x, k): its values, or its error.
    type Entry = fn(&arrayad::Function, &[Arg<'_>]) -> Result<Vec<f64>, String>;
    let entries: [(&str, Entry); 4] = [
        ("value", |f, a| {
            f.call(a).map(|v| flat(&v.into_iter().map(Some).collect::<Vec<_>>())).map_err(|e| e.to_string())
        }),
        ("jvp", |f, a| f.jvp(a, &[Some(Arg::F64(1.0)), None]).map(|j| flat(&j.tangent)).map_err(|e| e.to_string())),
        ("vjp", |f, a| {
            f.vjp(a, &[Some(Arg::F64(1.0))]).map(|v| flat(v.cotangent.as_slice())).map_err(|e| e.to_string())
        }),
        ("hvp", |f, a| {
            f.hvp(a, &[Some(Arg::F64(1.0)), None]).map(|h| flat(h.hvp.as_slice())).map_err(|e| e.to_string())
        }),
    ];
    let mut failures = 0;
    for k in [0, 3, -5, 1, 2] {
        let args = [Value::F64(0.75), Value::I64(k)];
        let argv: Vec<Arg<'_>> = args.iter().map(Arg::Value).collect();
        for (name, entry) in &entries {
            let want = entry(&reference.function("top").unwrap(), &argv);
            for (what, m) in compiled("failing.arr", FAILING) {
                let got = entry(&m.function("top").unwrap(), &argv);
                match (&got, &want) {
                    (Ok(g), Ok(w)) => assert_close(&format!("{name} {what} k = {k}"), g, w),
                    (Err(g), Err(w)) => {
                        let at = |m: &str| m.split(": ").next().map(str::to_string);
                        assert_eq!(at(g), at(w), "{name} {what} k = {k}");
                        assert!(g.starts_with("failing.arr:1:") && g.contains("division by zero"), "{g}");
                        failures += 1;
                    }
                    _ => panic!("{name} {what} k = {k}: {got:?} against {want:?}"),
                }
            }
        }
    }
    assert!(failures >= 8, "only {failures} failures");
}

/// `g0(x) = sin(x)`, `gk(x) = g{k-1}(x / 2) + g{k-1}(x / 4)`: straight-line
/// code whose callers check their calls' statuses at their end. When the
/// stack runs out, every caller on the chain runs on and makes its second
/// call, which returns at its entry (the context refuses further calls
/// once an error is recorded): a few thousand calls, not 2^depth.
#[test]
fn straight_line_callers_run_on_after_a_failure_in_bounded_time() {
    let mut source = String::from("def g0(x: f64) -> f64 = sin(x)\n");
    for k in 1..=3_000 {
        let p = k - 1;
        source += &format!("def g{k}(x: f64) -> f64 = g{p}(x * 0.5) + g{p}(x * 0.25)\n");
    }
    let m =
        Module::compile_with("doubling.arr", &source, Options::backend(Backend::Cranelift).with_keep_calls_above(1));
    let m = m.unwrap();
    let (deep, shallow) = (m.function("g3000").unwrap(), m.function("g10").unwrap());
    let x = Value::F64(0.3);
    let argv = [Arg::Value(&x)];
    let (err, grad_err, got) = std::thread::scope(|s| {
        let small = std::thread::Builder::new().stack_size(256 << 10);
        let run = small.spawn_scoped(s, || {
            let err = deep.call(&argv).map_err(|e| e.to_string());
            let grad_err = deep.vjp(&argv, &[Some(Arg::F64(1.0))]).map_err(|e| e.to_string());
            (err, grad_err.map(|_| ()), shallow.call(&argv))
        });
        run.unwrap().join().unwrap()
    });
    for err in [err.unwrap_err(), grad_err.unwrap_err()] {
        assert!(err.starts_with("doubling.arr:") && err.contains("calls nest too deeply at `g"), "{err}");
    }
    let want: f64 = (0..=10).map(|j| (0.3 * 0.5f64.powi(10 - j) * 0.25f64.powi(j)).sin() * binomial(10, j)).sum();
    assert_close("g10 after the failure", &flat(&[got.unwrap().into_iter().next()]), &[want]);
}

/// `n` choose `k`.
fn binomial(n: i32, k: i32) -> f64 {
    (0..k).map(|i| f64::from(n - i) / f64::from(i + 1)).product()
}

/// `g0(x) = sin(x)`, `gk(x) = sum of g{k-j}(x * j / 10)` for `j` in
/// `1..=min(k, 10)`: a library of helpers each called from 10 sites.
fn helpers(n: usize) -> String {
    let mut src = String::from("def g0(x: f64) -> f64 = sin(x)\n");
    for k in 1..=n {
        let terms: Vec<String> = (1..=k.min(10)).map(|j| format!("g{}(x * {j}.0e-1)", k - j)).collect();
        src += &format!("def g{k}(x: f64) -> f64 = {}\n", terms.join(" + "));
    }
    src
}

/// The value and derivative of `gk(x)` of [`helpers`].
fn helper_value(k: usize, x: f64) -> (f64, f64) {
    if k == 0 {
        return (x.sin(), x.cos());
    }
    let (mut v, mut d) = (0.0, 0.0);
    for j in 1..=k.min(10) {
        let c = j as f64 / 10.0;
        let (a, b) = helper_value(k - j, x * c);
        (v, d) = (v + a, d + b * c);
    }
    (v, d)
}

#[test]
fn definitions_made_of_kept_calls_are_kept_rather_than_copied_to_each_call_site() {
    // Each g_k above the first few is 10 calls, and g16 is about 2^16
    // applications of sin once inlined: by default its callees are kept,
    // and each is called (the policy that keeps a definition made of kept
    // calls rather than copy them to its 10 call sites shows at larger
    // sizes: `bench/scaling.sh --shapes helpers`).
    let source = helpers(16);
    let (value, derivative) = helper_value(16, 0.7);
    for b in common::api_backends() {
        let m = Module::compile_with("helpers.arr", &source, Options::backend(b)).unwrap();
        let f = m.function("g16").unwrap();
        let x = Value::F64(0.7);
        let got = flat(&[f.call(&[Arg::Value(&x)]).unwrap().into_iter().next()]);
        assert_close(&format!("{b:?} value"), &got, &[value]);
        let g = f.vjp(&[Arg::Value(&x)], &[Some(Arg::Value(&Value::F64(1.0)))]).unwrap();
        assert_close(&format!("{b:?} derivative"), &flat(g.cotangent.as_slice()), &[derivative]);
        if b == Backend::Cranelift {
            let text = f.backend_ir("primal").unwrap().unwrap_or_default();
            let calls = text.matches("call_indirect").count();
            assert!((1..=12).contains(&calls), "{calls} calls in g16:\n{text}");
        }
    }
    // `m` weighs less than the threshold (its statements and two kept
    // calls of 64 each), but inlined into its three call sites it would
    // copy both calls to two more places: it is kept, and `top` makes 3
    // calls, not 6.
    let mut src = String::from("def a(x: f64) -> f64 =\n  let s0 = x\n");
    for i in 1..=300 {
        src += &format!("  let s{i} = sin(s{}) + x\n", i - 1);
    }
    src += "  in s300\ndef m(x: f64) -> f64 = a(x) + a(x * 2.0)\n";
    src += "def top(x: f64) -> f64 = m(x) + m(x * 3.0) + m(x * 5.0)\n";
    let kept = Module::compile_with("m.arr", &src, Options::default().with_keep_calls_above(200)).unwrap();
    let inlined = Module::compile_with("m.arr", &src, Options::default().with_keep_calls_above(u64::MAX)).unwrap();
    let top = kept.function("top").unwrap();
    let text = top.backend_ir("primal").unwrap().unwrap_or_default();
    assert_eq!(text.matches("call_indirect").count(), 3, "{text}");
    let x = [Value::F64(0.4)];
    let (got, want) = (derivatives(&kept, "top", &x).unwrap(), derivatives(&inlined, "top", &x).unwrap());
    for (k, name) in ["vjp", "jvp", "jvp_many", "jacobian", "hvp"].iter().enumerate() {
        assert_close(&format!("top {name}"), &got[k], &want[k]);
    }
}

/// A long definition of `steps` steps, each using the step before: arrays
/// built and reduced, a branch, a loop, an index that fails when `k` is
/// out of bounds, and integer and boolean values crossing steps.
fn long_definition(steps: usize) -> String {
    let mut src = String::from("def long(x: [n]f64, k: i64, s: f64) -> f64 =\n");
    src += "  let a0 = x\n  let t0 = s\n  let j0 = k\n  let p0 = true\n";
    for i in 1..=steps {
        let h = i - 1;
        src += &format!("  let a{i} = for i < n => sin(a{h}[i]) * t{h} + x[i]\n");
        src += &format!("  let u{i} = sum(a{i}) / f64(n)\n");
        src += &format!("  let b{i} = if p{h} then u{i} * u{i} else u{i} + s\n");
        src += &format!("  let c{i} = loop acc = b{i} for r < 2 do cos(acc) * 0.5 + s\n");
        src += &format!("  let t{i} = c{i} + a{i}[j{h}] * 0.25\n");
        src += &format!("  let j{i} = (j{h} + {i}) % n\n");
        src += &format!("  let p{i} = t{i} > 0.1\n");
    }
    src += &format!("  in t{steps} * s + sum(a{steps}) * 0.1\n");
    src
}

#[test]
fn a_huge_definition_split_into_parts_gives_the_values_errors_and_derivatives_of_the_whole() {
    use arrayad_ir::passes::outline::{is_part, outline_with, OutlineLimits};
    let source = long_definition(12);
    let limits = OutlineLimits { above: 60, part: 20, max_crossing: 8 };
    let x = vector(vec![0.3, -1.2, 0.8, 2.0]);
    let runs: Vec<Vec<Value>> = vec![
        vec![x.clone(), Value::I64(1), Value::F64(0.7)],
        vec![x.clone(), Value::I64(3), Value::F64(-0.4)],
        // Out of bounds in the first step, inside the first part.
        vec![x.clone(), Value::I64(9), Value::F64(0.7)],
        // Empty: the first step's `a1[j0]` fails.
        vec![vector(Vec::new()), Value::I64(0), Value::F64(0.7)],
    ];
    let mut split = arrayad_frontend::compile("long.arr", &source).unwrap();
    outline_with(&mut split, limits);
    let parts = split.funcs.iter().filter(|f| is_part(&f.name)).count();
    assert!(parts >= 3, "{parts} parts");
    let interp = Module::compile_with("long.arr", &source, Options::backend(Backend::Interp)).unwrap();
    for b in common::api_backends() {
        let whole = Options::backend(b).with_keep_calls_above(u64::MAX);
        let whole = Module::compile_with("long.arr", &source, whole).unwrap();
        // Parts are kept when they weigh `keep_calls_above` statements.
        let kept = Module::from_program(split.clone(), Options::backend(b).with_keep_calls_above(1)).unwrap();
        assert_eq!(kept.functions().count(), 1);
        if b == Backend::Cranelift {
            let text = kept.function("long").unwrap().backend_ir("primal").unwrap().unwrap_or_default();
            assert_eq!(text.matches("call_indirect").count(), parts, "{text}");
        }
        for args in &runs {
            let (got, want) = (values(&kept, "long", args), values(&interp, "long", args));
            match (&got, &want) {
                (Ok(g), Ok(w)) => assert_eq!(bits(g), bits(w), "{b:?} {args:?}"),
                (Err(g), Err(w)) => assert_eq!(g, w, "{b:?} {args:?}"),
                _ => panic!("{b:?} {args:?}: {got:?} against {want:?}"),
            }
            let (got, want) = (derivatives(&kept, "long", args), derivatives(&whole, "long", args));
            match (&got, &want) {
                (Ok(g), Ok(w)) => {
                    for (k, name) in ["vjp", "jvp", "jvp_many", "jacobian", "hvp"].iter().enumerate() {
                        assert_close(&format!("{b:?} {args:?} {name}"), &g[k], &w[k]);
                    }
                }
                (Err(g), Err(w)) => assert_eq!(g, w, "{b:?} {args:?}"),
                _ => panic!("{b:?} {args:?}: {got:?} against {want:?}"),
            }
        }
    }
}

/// `ir::passes::optimize` skips the passes that rewrite arrays and loops on
/// straight-line scalar functions: the kept helpers' primals, jvps, vjps
/// and jvps of their vjps are such functions, and each of those passes
/// leaves every one of them, optimised, unchanged.
#[test]
fn array_and_loop_passes_find_nothing_in_straight_line_scalar_derivatives() {
    use arrayad_ir::passes::{broadcast, contract, fuse, fuse_for, licm, scalarize, unroll};
    let program = arrayad::driver::load("helpers.arr", &helpers(30)).unwrap();
    let root = program.find("g30").unwrap();
    let kept = arrayad_ir::passes::inline::KeptCalls::new(&program, &[root], 200);
    let opts = arrayad_ad::AdOptions::default();
    let (mut checked, mut with_calls) = (0, 0);
    for id in kept.kept() {
        let primal = arrayad::driver::prepare_code(&program, id, &kept).unwrap();
        let (jvp, vjp) = arrayad::driver::kept_derivatives_of(&program, id, &primal, opts).unwrap();
        let vjp_jvp = arrayad::driver::vjp_jvp(&program, &vjp).unwrap();
        for f in [primal, jvp, vjp, vjp_jvp] {
            assert!(f.is_straight_line_scalar(), "{}: an array variable or a nested block", f.name);
            let calls = |s: &arrayad_ir::Stmt| {
                matches!(s.kind, arrayad_ir::StmtKind::Let { expr: arrayad_ir::Expr::Call { .. }, .. })
            };
            with_calls += usize::from(f.body.stmts.iter().any(calls));
            type Pass = fn(&mut arrayad_ir::Function);
            let passes: [(&str, Pass); 7] = [
                ("broadcast", broadcast::forward_broadcasts),
                ("unroll", unroll::unroll),
                ("scalarize", scalarize::scalarize),
                ("fuse", fuse::fuse),
                ("fuse for", fuse_for::fuse_for_loops),
                ("contract", contract::contract_accumulators),
                ("licm", licm::licm),
            ];
            for (name, pass) in passes {
                let mut g = f.clone();
                pass(&mut g);
                assert!(g == f, "{name} changed {}", f.name);
            }
            checked += 1;
        }
    }
    assert!(checked >= 40 && with_calls >= 40, "{checked} functions checked, {with_calls} with calls");
}
