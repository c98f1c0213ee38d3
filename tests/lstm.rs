//! The ADBench LSTM loss (`examples/lstm.arr`, function `lstm`) and its
//! gradient with respect to `main` and `extra` (ADBench's active
//! parameters) against an independent plain-Rust implementation of the
//! mathematics of `../shared/data/adbench/README.md` ("LSTM"), on every
//! compiled backend (Cranelift; LLVM in a build with the `llvm` feature):
//!
//! - the loss equals the reference to ~1e-12 (relative to the size of the
//!   terms it sums);
//! - the reverse-mode gradient (`Function::grad`) agrees with central finite
//!   differences of the reference (Richardson-extrapolated, ~1e-6 relative),
//!   and with forward mode (one `jvp` per component, ~1e-10); a `jvp` in a
//!   random direction equals the gradient's inner product with it;
//!   `state` and `seq` get no cotangent.
//!
//! Inputs: generated problems (a deterministic LCG; every gradient
//! component checked by finite differences), and, when
//! `../shared/data/adbench/lstm/lstm_l2_c1024.txt` exists, that file: its
//! loss printed to 8 digits is ADBench's reference 0.66666518, and a spread
//! of gradient components is checked by finite differences (all of them
//! forward against reverse).

use arrayad::{Arg, Backend, Module, Options, Value};
use std::path::PathBuf;

/// One LSTM problem (README "LSTM", file layout), row-major.
#[derive(Clone, Debug)]
struct Problem {
    l: usize,
    c: usize,
    b: usize,
    /// `[l][8][b]`: per layer W_f, W_i, W_o, W_c, B_f, B_i, B_o, B_c.
    main: Vec<f64>,
    /// `[3][b]`: input weight, output weight, output bias.
    extra: Vec<f64>,
    /// `[l][2][b]`: per layer the hidden state, then the cell state.
    state: Vec<f64>,
    /// `[c][b]`: the characters.
    seq: Vec<f64>,
}

// ---------------------------------------------------------------------------
// The independent reference (README "LSTM", written from the mathematics).

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The loss and the sum of the absolute values of the terms it adds up
/// (the scale for comparing it), for parameters `main`, `extra` (which may
/// differ from `p.main`, `p.extra`, for finite differences).
fn loss_and_scale(p: &Problem, main: &[f64], extra: &[f64]) -> (f64, f64) {
    let (l, c, b) = (p.l, p.c, p.b);
    let w = |layer: usize, block: usize, j: usize| main[(8 * layer + block) * b + j];
    let (input_weight, output_weight, output_bias) = (&extra[0..b], &extra[b..2 * b], &extra[2 * b..3 * b]);
    let mut hidden: Vec<Vec<f64>> = (0..l).map(|k| p.state[2 * k * b..(2 * k + 1) * b].to_vec()).collect();
    let mut cell: Vec<Vec<f64>> = (0..l).map(|k| p.state[(2 * k + 1) * b..(2 * k + 2) * b].to_vec()).collect();
    // The total is summed with Neumaier's compensation, so that the loss is
    // accurate to ~1e-16 relative and finite differences of it stay
    // accurate (a plain sum of the (c - 1) b terms loses ~1e-14).
    let (mut total, mut compensation, mut scale) = (0.0f64, 0.0f64, 0.0);
    let mut logits = vec![0.0; b];
    for t in 0..c - 1 {
        let x = &p.seq[t * b..(t + 1) * b];
        for j in 0..b {
            // Every weight is diagonal: element j of each layer depends
            // only on element j of its input and of its own states.
            let mut z = x[j] * input_weight[j];
            for layer in 0..l {
                let h = hidden[layer][j];
                let forget = logistic(z * w(layer, 0, j) + w(layer, 4, j));
                let input = logistic(h * w(layer, 1, j) + w(layer, 5, j));
                let output = logistic(z * w(layer, 2, j) + w(layer, 6, j));
                let candidate = (h * w(layer, 3, j) + w(layer, 7, j)).tanh();
                let s = cell[layer][j] * forget + input * candidate;
                cell[layer][j] = s;
                hidden[layer][j] = output * s.tanh();
                z = hidden[layer][j];
            }
            logits[j] = z * output_weight[j] + output_bias[j];
        }
        let normaliser = (logits.iter().map(|y| y.exp()).sum::<f64>() + 2.0).ln();
        let next = &p.seq[(t + 1) * b..(t + 2) * b];
        for j in 0..b {
            let term = next[j] * (logits[j] - normaliser);
            let sum = total + term;
            compensation += if total.abs() >= term.abs() { (total - sum) + term } else { (term - sum) + total };
            total = sum;
            scale += term.abs();
        }
    }
    let n = ((c - 1) * b) as f64;
    (-(total + compensation) / n, scale / n)
}

fn loss(p: &Problem, main: &[f64], extra: &[f64]) -> f64 {
    loss_and_scale(p, main, extra).0
}

/// d loss / d parameter `k` of `[main, extra]` by central differences at
/// steps h, h/2, h/4 with two Richardson steps (error O(h^6)), for
/// `h = 1e-2 * max(1, |theta_k|)`: large enough that the rounding error of
/// the loss (a sum of (c - 1) b terms) stays near 1e-13 in the derivative.
fn fd_component(p: &Problem, k: usize) -> f64 {
    let nm = p.main.len();
    let value = |delta: f64| -> (f64, f64) {
        let (mut main, mut extra) = (p.main.clone(), p.extra.clone());
        let slot = if k < nm { &mut main[k] } else { &mut extra[k - nm] };
        *slot += delta;
        let at = *slot;
        (loss(p, &main, &extra), at)
    };
    let theta = if k < nm { p.main[k] } else { p.extra[k - nm] };
    let h = 1e-2 * theta.abs().max(1.0);
    let central = |h: f64| {
        let ((fp, xp), (fm, xm)) = (value(h), value(-h));
        (fp - fm) / (xp - xm)
    };
    let (d1, d2, d4) = (central(h), central(h / 2.0), central(h / 4.0));
    let (r1, r2) = ((4.0 * d2 - d1) / 3.0, (4.0 * d4 - d2) / 3.0);
    (16.0 * r2 - r1) / 15.0
}

// ---------------------------------------------------------------------------
// Inputs.

/// A 64-bit LCG (Knuth's MMIX constants); uniform numbers from the high bits.
struct Lcg(u64);

impl Lcg {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }
    fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// A random problem; `bits` makes the sequence 0/1 as in ADBench's files,
/// else uniform in [0, 1].
fn generate(l: usize, c: usize, b: usize, seed: u64, bits: bool) -> Problem {
    let mut rng = Lcg(seed);
    let main = rng.vec(8 * l * b, -1.0, 1.0);
    let extra = rng.vec(3 * b, -1.0, 1.0);
    let state = rng.vec(2 * l * b, -1.0, 1.0);
    let seq = (0..c * b).map(|_| if bits { (rng.next_f64() < 0.5) as u8 as f64 } else { rng.next_f64() }).collect();
    Problem { l, c, b, main, extra, state, seq }
}

/// An ADBench LSTM file: `l c b`, then main (8lb), extra (3b), state (2lb)
/// and the sequence (cb), whitespace-separated.
fn read_adbench_lstm(path: &std::path::Path) -> Problem {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut tokens = text.split_whitespace();
    let mut size = || -> usize { tokens.next().and_then(|t| t.parse().ok()).expect("a size") };
    let (l, c, b) = (size(), size(), size());
    let values: Vec<f64> =
        tokens.map(|t| t.parse().unwrap_or_else(|e| panic!("{}: bad number {t:?}: {e}", path.display()))).collect();
    let (nm, ne, ns) = (8 * l * b, 3 * b, 2 * l * b);
    assert_eq!(values.len(), nm + ne + ns + c * b, "{}: wrong number of values", path.display());
    Problem {
        l,
        c,
        b,
        main: values[..nm].to_vec(),
        extra: values[nm..nm + ne].to_vec(),
        state: values[nm + ne..nm + ne + ns].to_vec(),
        seq: values[nm + ne + ns..].to_vec(),
    }
}

// ---------------------------------------------------------------------------
// arrayad.

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The compiling backends of this build.
fn compiled() -> Vec<Backend> {
    if cfg!(feature = "llvm") {
        vec![Backend::Cranelift, Backend::Llvm]
    } else {
        vec![Backend::Cranelift]
    }
}

fn compile(backend: Backend) -> Module {
    let source = std::fs::read_to_string(manifest_dir().join("examples/lstm.arr")).expect("examples/lstm.arr");
    let opts = Options::backend(backend).with_wrt(&["main", "extra"]);
    Module::compile_with("examples/lstm.arr", &source, opts).unwrap_or_else(|e| panic!("lstm.arr ({backend:?}): {e}"))
}

fn f64s(v: &Option<Value>) -> Vec<f64> {
    v.as_ref().and_then(Value::f64_elements).expect("f64 data").to_vec()
}

/// The loss and the gradient `[d main, d extra]` by arrayad (reverse
/// mode), after checking the loss against the reference and the inactive
/// arguments.
fn loss_and_gradient(module: &Module, label: &str, p: &Problem) -> (f64, Vec<f64>) {
    let f = module.function("lstm").expect("lstm is defined");
    assert_eq!(f.active(), [true, true, false, false], "{label}: main and extra active; state and seq not");
    let (sm, se, ss, sq) = ([p.l, 8, p.b], [3, p.b], [p.l, 2, p.b], [p.c, p.b]);
    let args = [
        Arg::Array { data: &p.main, shape: &sm },
        Arg::Array { data: &p.extra, shape: &se },
        Arg::Array { data: &p.state, shape: &ss },
        Arg::Array { data: &p.seq, shape: &sq },
    ];
    let out = f.call(&args).unwrap_or_else(|e| panic!("{label}: lstm failed: {e}"));
    assert_eq!(out.len(), 1, "{label}: one result");
    let value = out[0].as_f64().expect("an f64 loss");
    let (want, scale) = loss_and_scale(p, &p.main, &p.extra);
    let err = (value - want).abs() / scale.max(want.abs());
    assert!(err <= 1e-12, "{label}: loss {value:e} vs reference {want:e} (relative error {err:e})");

    let gr = f.grad(&args).unwrap_or_else(|e| panic!("{label}: lstm gradient failed: {e}"));
    let (v, grad) = (gr.value, gr.gradient);
    assert_eq!(v, value, "{label}: the gradient's value is the primal's");
    assert_eq!(grad.len(), 4, "{label}: one entry per argument");
    assert!(grad[2].is_none() && grad[3].is_none(), "{label}: state and seq are not differentiated");
    let mut g = f64s(&grad[0]);
    assert_eq!(g.len(), p.main.len(), "{label}: d main has 8lb entries");
    g.extend(f64s(&grad[1]));
    assert_eq!(g.len(), p.main.len() + p.extra.len(), "{label}: d extra has 3b entries");
    eprintln!("{label}: loss {value:.17} (reference {want:.17}, relative error {err:e})");
    (value, g)
}

/// Forward mode against the reverse-mode gradient `grad`: one one-hot
/// `jvp` per component in `components`, and one in a random direction.
fn check_forward(module: &Module, label: &str, p: &Problem, grad: &[f64], components: &[usize]) {
    let f = module.function("lstm").expect("lstm is defined");
    let (sm, se, ss, sq) = ([p.l, 8, p.b], [3, p.b], [p.l, 2, p.b], [p.c, p.b]);
    let args = [
        Arg::Array { data: &p.main, shape: &sm },
        Arg::Array { data: &p.extra, shape: &se },
        Arg::Array { data: &p.state, shape: &ss },
        Arg::Array { data: &p.seq, shape: &sq },
    ];
    let nm = p.main.len();
    let jvp = |tm: &[f64], te: &[f64]| -> f64 {
        let tangents =
            [Some(Arg::Array { data: tm, shape: &sm }), Some(Arg::Array { data: te, shape: &se }), None, None];
        let j = f.jvp(&args, &tangents).unwrap_or_else(|e| panic!("{label}: jvp failed: {e}"));
        j.tangent[0].as_ref().and_then(Value::as_f64).expect("an f64 tangent")
    };
    let mut worst = 0.0f64;
    for &k in components {
        let (mut tm, mut te) = (vec![0.0; nm], vec![0.0; p.extra.len()]);
        if k < nm {
            tm[k] = 1.0;
        } else {
            te[k - nm] = 1.0;
        }
        let fwd = jvp(&tm, &te);
        let err = if fwd == grad[k] { 0.0 } else { (fwd - grad[k]).abs() / grad[k].abs() };
        assert!(err <= 1e-10, "{label}: component {k}: forward {fwd:e} vs reverse {:e} (error {err:e})", grad[k]);
        worst = worst.max(err);
    }
    let mut rng = Lcg(17);
    let (dm, de) = (rng.vec(nm, -1.0, 1.0), rng.vec(p.extra.len(), -1.0, 1.0));
    let dir: Vec<f64> = dm.iter().chain(&de).copied().collect();
    let fwd = jvp(&dm, &de);
    let want: f64 = grad.iter().zip(&dir).map(|(g, d)| g * d).sum();
    let scale: f64 = grad.iter().zip(&dir).map(|(g, d)| (g * d).abs()).sum();
    assert!((fwd - want).abs() <= 1e-10 * scale, "{label}: jvp in a random direction {fwd:e} vs grad . v {want:e}");
    eprintln!("{label}: {} components forward vs reverse, worst relative error {worst:e}", components.len());
}

/// The gradient components `components` against finite differences of the
/// reference (`fd[i]` for `components[i]`).
fn check_fd(label: &str, grad: &[f64], components: &[usize], fd: &[f64]) {
    // Relative error, except that a component more than 1e5 times below
    // the largest is compared against 1e-5 of the largest (such components,
    // 1e-9 in the generated problems, are below the finite differences'
    // rounding error of ~1e-13).
    let g_max = grad.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    let mut worst = 0.0f64;
    for (&k, &want) in components.iter().zip(fd) {
        let err = (grad[k] - want).abs() / want.abs().max(1e-5 * g_max);
        assert!(
            err <= 1e-6,
            "{label}: d loss / d theta_{k}: arrayad {:e} vs finite differences {want:e} (error {err:e})",
            grad[k]
        );
        worst = worst.max(err);
    }
    eprintln!("{label}: {} components vs finite differences, worst relative error {worst:e}", components.len());
}

// ---------------------------------------------------------------------------
// Tests.

#[test]
fn reference_single_step_by_hand() {
    // One layer, one element, two characters: the reference against the
    // formula written out for this case.
    let p = Problem {
        l: 1,
        c: 2,
        b: 1,
        main: vec![0.3, -0.2, 0.5, 0.7, 0.1, -0.4, 0.2, 0.05],
        extra: vec![0.9, -1.1, 0.25],
        state: vec![0.6, -0.3],
        seq: vec![0.8, 1.0],
    };
    let z = 0.8 * 0.9;
    let f = 1.0 / (1.0 + (-(z * 0.3 + 0.1f64)).exp());
    let i = 1.0 / (1.0 + (-(0.6 * -0.2 - 0.4f64)).exp());
    let o = 1.0 / (1.0 + (-(z * 0.5 + 0.2f64)).exp());
    let g = (0.6 * 0.7 + 0.05f64).tanh();
    let s = -0.3 * f + i * g;
    let y = o * s.tanh() * -1.1 + 0.25;
    let want = -(y - (y.exp() + 2.0).ln());
    let got = loss(&p, &p.main, &p.extra);
    assert!((got - want).abs() <= 1e-15, "{got} vs {want}");
}

#[test]
fn lstm_generated_problems() {
    let problems = [
        ("l2 c8 b5 bits", generate(2, 8, 5, 1, true)),
        ("l3 c6 b4", generate(3, 6, 4, 2, false)),
        ("l1 c2 b3", generate(1, 2, 3, 3, false)),
    ];
    for b in compiled() {
        let module = compile(b);
        for (name, p) in &problems {
            let label = format!("{name} ({b:?})");
            let (_, grad) = loss_and_gradient(&module, &label, p);
            let all: Vec<usize> = (0..grad.len()).collect();
            let fd: Vec<f64> = all.iter().map(|&k| fd_component(p, k)).collect();
            check_fd(&label, &grad, &all, &fd);
            check_forward(&module, &label, p, &grad, &all);
        }
    }
}

#[test]
fn lstm_adbench_l2_c1024() {
    let path = manifest_dir().join("../shared/data/adbench/lstm/lstm_l2_c1024.txt");
    if !path.is_file() {
        eprintln!("note: {} not found: skipping the ADBench LSTM file", path.display());
        return;
    }
    let p = read_adbench_lstm(&path);
    assert_eq!((p.l, p.c, p.b), (2, 1024, 14));
    let n = p.main.len() + p.extra.len();
    assert_eq!(n, 266);
    // A spread of components: the first and last of every block of b in
    // main (each layer's 8 weights and biases) and of extra, and a middle one.
    let mut components: Vec<usize> = (0..n / p.b).flat_map(|blk| [blk * p.b, blk * p.b + p.b - 1]).collect();
    components.push(n / 2 + 3);
    let fd: Vec<f64> = components.iter().map(|&k| fd_component(&p, k)).collect();
    let all: Vec<usize> = (0..n).collect();
    for b in compiled() {
        let module = compile(b);
        let label = format!("lstm_l2_c1024 ({b:?})");
        let (value, grad) = loss_and_gradient(&module, &label, &p);
        assert_eq!(format!("{value:.8}"), "0.66666518", "{label}: ADBench's reference loss");
        check_fd(&label, &grad, &components, &fd);
        check_forward(&module, &label, &p, &grad, &all);
    }
}
