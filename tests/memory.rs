//! Memory follows liveness (DESIGN.md, "Memory"): loops and comprehensions
//! release what an iteration allocated and does not keep, so the primal of
//! a long loop runs in memory independent of its trip count, and the
//! gradient holds little more than the residuals its backward pass reads.
//! Measured as the bytes of arena and tape a call held at its peak
//! ([`arrayad_codegen::JitModule::call_with_memory`]), on every backend.

mod common;

use arrayad_ir::{ArrayData, ArrayValue, Value};

fn vector(n: usize) -> Value {
    Value::Array(ArrayValue { shape: vec![n], data: ArrayData::F64((0..n).map(|i| 0.001 * i as f64).collect()) })
}

/// Bytes held by the primal and the gradient (vjp with cotangent 1) of
/// `func` in `src` at `args` (the first argument active), per backend.
fn memory(src: &str, func: &str, args: &[Value]) -> Vec<(u64, u64)> {
    let program = arrayad_frontend::compile("mem.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let id = program.find(func).unwrap();
    let mut active = vec![false; args.len()];
    active[0] = true;
    let d = common::ad::derive_all(&program, id, &active).unwrap();
    let mut out = Vec::new();
    for (b, jit) in common::jits("mem.arr", &[d.primal.clone(), d.vjp.clone()]) {
        let (r, primal) = jit.call_with_memory(&d.primal.name, args);
        r.unwrap_or_else(|e| panic!("{b:?}: {e}"));
        let mut vargs = args.to_vec();
        vargs.push(Value::F64(1.0));
        let (r, grad) = jit.call_with_memory(&d.vjp.name, &vargs);
        r.unwrap_or_else(|e| panic!("{b:?}: {e}"));
        out.push((primal, grad));
    }
    out
}

const IT5: &str = "def it5(x: [n]f64, t: i64) -> f64 = sum(loop h = x for s < t do h + 0.001 * sin(h * 1.3 + 0.2))";

#[test]
fn long_loops_with_array_states_run_in_constant_memory() {
    let n = 1000;
    let short = memory(IT5, "it5", &[vector(n), Value::I64(2)]);
    let long = memory(IT5, "it5", &[vector(n), Value::I64(3000)]);
    for ((p_short, g_short), (p_long, g_long)) in short.iter().zip(&long) {
        // The primal: no more memory for 3000 iterations than for 2.
        assert_eq!(p_long, p_short, "primal memory grows with the trip count");
        // The gradient: the residuals (one cos per element and iteration)
        // plus what a short run needs; the tape doubles as it grows.
        let residuals = (3000 * n * 8) as u64;
        assert!(
            *g_long <= g_short + residuals * 2,
            "gradient memory {g_long} for {residuals} bytes of residuals (short run: {g_short})"
        );
    }
}

#[test]
fn states_passed_through_swapped_and_shared_are_kept_and_the_rest_released() {
    let n = 500;
    let srcs = [
        // One state passed through unchanged, one recomputed from it.
        "def f(x: [n]f64, t: i64) -> f64 = let (a, h) = loop (a, h) = (x, x) for s < t do (a, h * 0.5 + a) in sum(h) + sum(a)",
        // Swapped states.
        "def f(x: [n]f64, t: i64) -> f64 = let (a, b) = loop (a, b) = (x, x * 2.0) for s < t do (b * 0.5, a + 1.0) in sum(a) + sum(b)",
        // Two states holding the same fresh array.
        "def f(x: [n]f64, t: i64) -> f64 = let (a, b) = loop (a, b) = (x, x) for s < t do (a * 0.9, a * 0.9) in sum(a) + dot(a, b)",
        // A state that is a slice of a fresh array, and a nested loop.
        "def f(x: [n]f64, t: i64) -> f64 =
           let h = loop h = x for s < t do
             let y = loop z = h for k < 3 do z * 0.99
             in (for i < length(y) + 1 => if i < length(y) then y[i] else 0.0)[0:length(y)]
           in sum(h)",
    ];
    for src in srcs {
        let short = memory(src, "f", &[vector(n), Value::I64(3)]);
        let long = memory(src, "f", &[vector(n), Value::I64(2000)]);
        for ((p_short, _), (p_long, _)) in short.iter().zip(&long) {
            assert_eq!(p_long, p_short, "primal memory grows with the trip count:\n{src}");
        }
    }
}

#[test]
fn comprehensions_release_their_temporaries() {
    // Each row needs a temporary of n elements; the result holds t scalars.
    let src = "def f(x: [n]f64, t: i64) -> f64 = sum(for i < t => sum(x * f64(i) + exp(x)) * x[i % n])";
    let n = 2000;
    let short = memory(src, "f", &[vector(n), Value::I64(2)]);
    let long = memory(src, "f", &[vector(n), Value::I64(3000)]);
    for ((p_short, _), (p_long, _)) in short.iter().zip(&long) {
        assert!(*p_long <= p_short + 3000 * 8 * 2, "primal {p_long} vs {p_short}");
    }
}

#[test]
fn checkpointed_long_loops_keep_about_sqrt_n_states() {
    let n = 1000;
    let t = 3000;
    let program = arrayad_frontend::compile("mem.arr", IT5).unwrap();
    let id = program.find("it5").unwrap();
    let plain = common::ad::derive_all(&program, id, &[true, false]).unwrap();
    let cp = common::ad::derive_with(&program, id, &[true, false], arrayad_ad::AdOptions { checkpoint: true }).unwrap();
    let args = [vector(n), Value::I64(t), Value::F64(1.0)];
    for ((b, jp), (_, jc)) in common::jits("mem.arr", std::slice::from_ref(&plain.vjp))
        .into_iter()
        .zip(common::jits("mem.arr", std::slice::from_ref(&cp.vjp)))
    {
        let (want, taped) = jp.call_with_memory(&plain.vjp.name, &args);
        let (got, checkpointed) = jc.call_with_memory(&cp.vjp.name, &args);
        assert_eq!(got.unwrap(), want.unwrap(), "{b:?}: the checkpointed gradient differs");
        let residuals = (t as u64) * (n as u64) * 8;
        // sqrt(3000) ~ 55 saved states and one segment of 55 iterations of
        // residuals: about 2 x 55 x 8 KB, against 24 MB taped.
        assert!(taped >= residuals, "{b:?}: taped {taped}");
        assert!(checkpointed <= residuals / 10, "{b:?}: checkpointed {checkpointed} vs residuals {residuals}");
    }
}

/// GradBench's RK4 `ode` (tools/gradbench/evals/ode.arr): four stages per
/// step, each a comprehension of cheap elements; the backward pass reads
/// the state and the four stages of each step. The tape holds the state
/// (copied there, the step's other arrays released) and the stages are
/// recomputed from it; with checkpointing memory grows like the square
/// root of the steps.
const RK4: &str = "
def ode_fun(x: [n]f64, y: [n]f64) -> [n]f64 = for i < n => if i == 0 then x[0] else x[i] * y[i - 1]
def ode_last(x: [n]f64, s: i64) -> f64 =
  let h = 2.0 / f64(s)
  let y = loop y = for i < n => 0.0 for step < s do
    let k1 = ode_fun(x, y)
    let k2 = ode_fun(x, y + h * k1 / 2.0)
    let k3 = ode_fun(x, y + h * k2 / 2.0)
    let k4 = ode_fun(x, y + h * k3)
    in y + h * (k1 + 2.0 * k2 + 2.0 * k3 + k4) / 6.0
  in y[n - 1]
";

#[test]
fn rk4_tapes_its_state_per_step_and_checkpoints_in_sqrt_memory() {
    let n = 2000usize;
    let program = arrayad_frontend::compile("rk4.arr", RK4).unwrap();
    let id = program.find("ode_last").unwrap();
    let plain = common::ad::derive_all(&program, id, &[true, false]).unwrap();
    let cp = common::ad::derive_with(&program, id, &[true, false], arrayad_ad::AdOptions { checkpoint: true }).unwrap();
    let array = (n * 8) as u64;
    let mut checkpointed_at = Vec::new();
    for steps in [100i64, 400] {
        let args = [vector(n), Value::I64(steps), Value::F64(1.0)];
        for ((b, jp), (_, jc)) in common::jits("rk4.arr", std::slice::from_ref(&plain.vjp))
            .into_iter()
            .zip(common::jits("rk4.arr", std::slice::from_ref(&cp.vjp)))
        {
            let (want, taped) = jp.call_with_memory(&plain.vjp.name, &args);
            let (got, checkpointed) = jc.call_with_memory(&cp.vjp.name, &args);
            assert_eq!(got.unwrap(), want.unwrap(), "{b:?}: the checkpointed gradient differs");
            // The state of each step (the stages, comprehensions of cheap
            // elements, are recomputed from it), the tape doubling as it
            // grows: at least 1 and at most 2 arrays per step, and never
            // more than the 5 that taping the stages would take.
            let per_step = taped as f64 / (steps as f64 * array as f64);
            assert!((1.0..=2.5).contains(&per_step), "{b:?}, {steps} steps: {per_step:.1} arrays per step taped");
            checkpointed_at.push((b, steps, checkpointed));
        }
    }
    for (b, steps, bytes) in &checkpointed_at {
        // sqrt(steps) saved states and one segment of residuals (5 arrays
        // per step), with slack for the tape's doubling and temporaries,
        // and for iterations too small to be worth releasing: up to 32 KiB
        // and one iteration's 13 arrays per loop level (the recomputed
        // segment, the backward pass).
        let segment = (*steps as f64).sqrt().ceil();
        let bound = (2.0 * (segment + 5.0 * segment) + 40.0 + 2.0 * 13.0) * array as f64 + 2.0 * 32768.0;
        assert!((*bytes as f64) <= bound, "{b:?}, {steps} steps: checkpointed {bytes} bytes, bound {bound}");
    }
}

/// Loops that `--checkpoint` cannot checkpoint are named, never skipped
/// silently: a warning with the loop's location on the command line's
/// standard error and from `Function::checkpoint_warnings`; their gradients
/// are the taped ones. A loop that is checkpointed, or a module compiled
/// without checkpointing, has none.
const UNCHECKPOINTED: &str = "\
def grow(x: f64) -> f64 =
  loop y = x while y < 100.0 do y * 1.5 + sin(y)

def shifts(x: [n]f64, m: i64) -> f64 =
  let (s, ks) = loop (s, ks) = (1.0, for i < n => i) for t < m do
    (s + sum(x * f64(ks[0])) * s, ks + 1)
  in s

def smooth(x: [n]f64, m: i64) -> f64 =
  sum(loop h = x for s < m do h + 0.1 * sin(h))
";

#[test]
fn loops_that_cannot_be_checkpointed_are_warned_about() {
    use arrayad::{Arg, Module, Options};
    let checkpointed =
        Module::compile_with("cp.arr", UNCHECKPOINTED, Options::default().with_checkpoint(true)).unwrap();
    let taped = Module::compile("cp.arr", UNCHECKPOINTED).unwrap();
    let x = [0.5, 1.5, -2.0];
    let cases: [(&str, Vec<Arg<'_>>, &str); 3] = [
        ("grow", vec![Arg::F64(1.5)], "cp.arr:2:3: warning: a while loop is not checkpointed"),
        (
            "shifts",
            vec![Arg::Vector(&x), Arg::I64(4)],
            "cp.arr:5:17: warning: this loop is not checkpointed: its state `ks` is an array of i64",
        ),
        ("smooth", vec![Arg::Vector(&x), Arg::I64(40)], ""),
    ];
    for (name, args, want) in cases {
        let f = checkpointed.function(name).unwrap();
        let warnings: Vec<String> = f.checkpoint_warnings().unwrap().iter().map(ToString::to_string).collect();
        if want.is_empty() {
            assert!(warnings.is_empty(), "{name}: {warnings:?}");
        } else {
            assert_eq!(warnings.len(), 1, "{name}: {warnings:?}");
            assert!(warnings[0].starts_with(want), "{name}: {warnings:?}");
        }
        assert!(taped.function(name).unwrap().checkpoint_warnings().unwrap().is_empty());
        let (g, t) = (f.grad(&args).unwrap(), taped.function(name).unwrap().grad(&args).unwrap());
        assert_eq!((g.value, g.gradient.as_slice()), (t.value, t.gradient.as_slice()), "{name}");
    }

    let dir = std::env::temp_dir().join(format!("arrayad-cp-warnings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cp.arr"), UNCHECKPOINTED).unwrap();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
            .args(["run", "cp.arr", "grow", "--args", "[1.5]", "--grad"])
            .args(extra)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    assert!(run(&["--checkpoint"]).starts_with("cp.arr:2:3: warning: a while loop is not checkpointed"));
    assert_eq!(run(&[]), "");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_arrayad"))
        .args(["build", "cp.arr", "-o", "libcp.so", "--checkpoint", "--export", "shifts,smooth"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("cp.arr:5:17: warning: this loop is not checkpointed"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Checkpointing holds for every kind of counted loop body: a
/// comprehension, a nested counted loop, a call, a branch on the state,
/// and a nested loop of its own checkpointed (each outer iteration taping
/// several inner states). No loop is reported left taped; on every
/// backend the checkpointed gradient is bitwise the taped one and holds
/// far less memory at 400 steps (about sqrt(400) = 20 saved states and one
/// segment of residuals, against at least one array per step taped).
const BODIES: &str = "
def step(h: [n]f64, c: f64) -> [n]f64 = h + 0.001 * sin(h * c + 0.2)
def comprehension(x: [n]f64, t: i64) -> f64 =
  sum(loop h = x for s < t do for i < n => h[i] + 0.001 * sin(h[i] * 1.3))
def nested(x: [n]f64, t: i64) -> f64 =
  sum(loop h = x for s < t do loop g = h for r < 3 do g + 0.001 * sin(g * 1.3))
def called(x: [n]f64, t: i64) -> f64 =
  sum(loop h = x for s < t do step(step(h, 1.3), 0.7))
def branch(x: [n]f64, t: i64) -> f64 =
  sum(loop h = x for s < t do
    if s % 3 == 0 then h + 0.001 * sin(h) else h * 0.999 + 0.001 * cos(h * h))
def mixed(x: [n]f64, t: i64) -> f64 =
  sum(loop h = x for s < t do
    let g = if sum(h) > 0.0 then step(h, 1.1) else h * 0.5
    in loop k = g for r < 2 do for i < n => k[i] * 0.9995 + 0.0001 * sin(k[i]))
";

#[test]
fn every_kind_of_loop_body_is_checkpointed() {
    use arrayad::{Module, Options};
    let module = Module::compile_with("bodies.arr", BODIES, Options::default().with_checkpoint(true)).unwrap();
    let program = arrayad_frontend::compile("bodies.arr", BODIES).unwrap();
    let (n, t) = (500usize, 400i64);
    let args = [vector(n), Value::I64(t), Value::F64(1.0)];
    for name in ["comprehension", "nested", "called", "branch", "mixed"] {
        let warnings = module.function(name).unwrap().checkpoint_warnings().unwrap();
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
        let id = program.find(name).unwrap();
        let plain = common::ad::derive_all(&program, id, &[true, false]).unwrap();
        let opts = arrayad_ad::AdOptions { checkpoint: true };
        let cp = common::ad::derive_with(&program, id, &[true, false], opts).unwrap();
        for ((b, jp), (_, jc)) in common::jits("bodies.arr", std::slice::from_ref(&plain.vjp))
            .into_iter()
            .zip(common::jits("bodies.arr", std::slice::from_ref(&cp.vjp)))
        {
            let (want, taped) = jp.call_with_memory(&plain.vjp.name, &args);
            let (got, checkpointed) = jc.call_with_memory(&cp.vjp.name, &args);
            let want = want.unwrap_or_else(|e| panic!("{name} {b:?}: {e}"));
            assert_eq!(got.unwrap(), want, "{name} {b:?}: the checkpointed gradient differs");
            let array = (n * 8) as u64;
            assert!(taped >= t as u64 * array, "{name} {b:?}: taped {taped} bytes");
            assert!(checkpointed * 4 <= taped, "{name} {b:?}: checkpointed {checkpointed} bytes, taped {taped}");
        }
    }
}

/// The Jacobian's many-row vjp replays the forward pass's tape for every
/// row, so it is not checkpointed (a checkpointed loop's backward pass
/// pushes the segments it recomputes over slots the next row pops again):
/// under `--checkpoint` its rows equal those without, bit for bit.
#[test]
fn jacobian_rows_under_checkpointing_equal_those_without() {
    use arrayad::{Arg, Module, Options};
    const SRC: &str = "
def f(x: [n]f64) -> [n]f64 =
  let s = loop acc = 1.0 for t < 20 do acc * (1.0 + 0.1 * sin(acc + x[t % n])) in
  for i < n => s * x[i] + sin(x[i]) * s
";
    let x = Value::Array(ArrayValue { shape: vec![3], data: ArrayData::F64(vec![0.3, -0.2, 0.5]) });
    for b in common::api_backends() {
        let jacobian = |checkpoint: bool| {
            let m = Module::compile_with("ck.arr", SRC, Options::backend(b).with_checkpoint(checkpoint)).unwrap();
            m.function("f").unwrap().jacobian(&[Arg::Value(&x)]).unwrap()
        };
        let (want, got) = (jacobian(false), jacobian(true));
        assert_eq!((want.rows, want.cols), (3, 3));
        assert_eq!(got.data, want.data, "{b:?}");
    }
}

#[test]
fn a_large_array_does_not_double_the_chunk_after_it() {
    // y (4 MB) gets an arena chunk of its own size; the row sums after it
    // (8 KB) get a small chunk, not one of 8 MB (the arena doubles the
    // chunk size the doubling reached, not the size of one large array;
    // 12 MB held before).
    let (n, m) = (1000, 500);
    let x = Value::Array(ArrayValue {
        shape: vec![n, m],
        data: ArrayData::F64((0..n * m).map(|i| 0.001 * i as f64).collect()),
    });
    let y = (n * m * 8) as u64;
    let rows = "for i < n => for j < m => x[i, j] * 2.0";
    for src in [
        format!("def g(x: [n][m]f64, c: bool) -> f64 = let y = ({rows}) in sum(for i < n => sum(y[i]))"),
        format!(
            "def g(x: [n][m]f64, c: bool) -> f64 = let y = if c then ({rows}) else x in sum(for i < n => sum(y[i]))"
        ),
    ] {
        for (primal, grad) in memory(&src, "g", &[x.clone(), Value::Bool(true)]) {
            assert!(primal <= y + (1 << 19), "{src}: the primal held {primal} bytes for a result of {y}");
            // y, its cotangent and x's: three arrays of y's size (28 MB
            // held before, chunks of 4, 8 and 16 MB).
            assert!(grad <= 3 * y + (1 << 20), "{src}: the gradient held {grad} bytes for arrays of {y}");
        }
    }
}

#[test]
fn rows_of_jammed_residuals_are_computed_where_they_are_kept() {
    // The vjp's forward pass keeps each point's row of `exp`s (800 KB) and
    // runs two points per iteration (`arrayad_ir::passes::jam_builds`),
    // yielding the literal `[e0, e1]`: the rows are computed in their
    // places in the literal, and the literal in its place in the residuals
    // (`codegen/src/lower/placed.rs`), so the gradient holds the
    // residuals' 3.2 MB and rows of cotangents (5.4 MB in all). Copied,
    // each pair's rows and literal took chunks of their own (11.7 MB).
    let (n, m) = (4usize, 100_000usize);
    let w =
        Value::Array(ArrayValue { shape: vec![m], data: ArrayData::F64((0..m).map(|r| 1e-6 * r as f64).collect()) });
    let x = Value::Array(ArrayValue { shape: vec![n], data: ArrayData::F64((0..n).map(|i| 0.5 + i as f64).collect()) });
    let src =
        "def g(w: [m]f64, x: [n]f64) -> f64 = sum(for i < n => let q = for r < m => exp(w[r] * x[i]) in log(sum(q)))";
    let row = (m * 8) as u64;
    for (primal, grad) in memory(src, "g", &[w, x]) {
        assert!(primal <= row + (1 << 19), "the primal held {primal} bytes for rows of {row}");
        // The residuals (n rows) and two rows of cotangents.
        assert!(grad <= (n as u64 + 2) * row + (1 << 20), "the gradient held {grad} bytes for rows of {row}");
    }
}
