//! The math functions compiled inline (`arrayad_ir::inline_math`): every
//! backend, with and without `--fast-math`, in a loop (which LLVM
//! vectorises) and on a scalar, gives the bits of the interpreter's
//! function, and the derivatives reuse them.

use arrayad::{Arg, Backend, Module, Options, Value};
use arrayad_ir::inline_math::{exp, tanh};

/// `map_F`, `scalar_F` and `sum_F` for `F` in `exp` and `tanh`.
fn source() -> String {
    ["exp", "tanh"]
        .iter()
        .map(|f| {
            format!(
                "def map_{f}(x: [n]f64) -> [n]f64 = for i < n => {f}(x[i])\n\
                 def scalar_{f}(x: f64) -> f64 = {f}(x)\n\
                 def sum_{f}(x: [n]f64) -> f64 = sum({f}(x))\n"
            )
        })
        .collect()
}

/// Edge cases (the clamps, the overflow and underflow thresholds, the
/// subnormal results, signed zeros, infinities, a NaN with a payload) and
/// a fixed pseudo-random spread over the whole range.
fn inputs() -> Vec<f64> {
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5 * std::f64::consts::LN_2,
        -0.5 * std::f64::consts::LN_2,
        1.5 * std::f64::consts::LN_2,
        1e-300,
        -1e-300,
        f64::MIN_POSITIVE,
        5e-324,
        709.782712893384,
        709.7827128933841,
        709.79,
        710.0,
        710.5,
        1e300,
        f64::MAX,
        f64::INFINITY,
        -708.0,
        -708.4,
        -720.0,
        -744.4,
        -745.1332191019411,
        -745.1332191019412,
        -746.0,
        -746.5,
        -f64::MAX,
        f64::NEG_INFINITY,
        0.625,
        -0.625,
        0.624_999_999_999_999_9,
        19.0,
        -22.0,
        f64::from_bits(0x7ff8_0000_dead_beef),
        f64::from_bits(0xfff8_0000_0000_0001),
    ];
    let mut s: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..20_000 {
        s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let u = (s >> 11) as f64 / (1u64 << 53) as f64;
        xs.push(match i % 3 {
            0 => -750.0 + 1465.0 * u,
            1 => -40.0 + 80.0 * u,
            _ => -745.5 + 40.0 * u,
        });
    }
    xs
}

fn backends() -> Vec<Backend> {
    let mut backends = vec![Backend::Interp, Backend::Cranelift];
    if cfg!(feature = "llvm") {
        backends.push(Backend::Llvm);
    }
    backends
}

/// Each inline function, its name, and its derivative from its value (the
/// rule of `ad/src/rules.rs`).
type Inline = (&'static str, fn(f64) -> f64, fn(f64, f64) -> f64);

const FUNCTIONS: [Inline; 2] = [("exp", exp, |_, y| y), ("tanh", tanh, |_, y| 1.0 - y * y)];

#[test]
fn every_backend_gives_the_interpreters_bits_for_inline_math() {
    let xs = inputs();
    let source = source();
    for backend in backends() {
        for fast_math in [false, true] {
            let options = Options::backend(backend).with_fast_math(fast_math);
            let m = Module::compile_with("inline.arr", &source, options).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
            for (name, f, derivative) in FUNCTIONS {
                let what = format!("{name}, {backend:?}, fast math {fast_math}");
                let want: Vec<f64> = xs.iter().map(|&x| f(x)).collect();
                let out = m.function(&format!("map_{name}")).unwrap().call(&[Arg::Vector(&xs)]).unwrap();
                let got = out[0].f64_elements().unwrap();
                if let Some(k) = (0..xs.len()).find(|&k| got[k].to_bits() != want[k].to_bits()) {
                    panic!("{what}: {name}({:e}) = {:e}, the interpreter's {:e}", xs[k], got[k], want[k]);
                }
                let scalar = m.function(&format!("scalar_{name}")).unwrap();
                for &x in &xs[..64] {
                    let out = scalar.call(&[Arg::F64(x)]).unwrap();
                    let Value::F64(got) = out[0] else { panic!("{what}: a scalar expected") };
                    assert_eq!(got.to_bits(), f(x).to_bits(), "{what}: scalar {name}({x:e})");
                }
                // The gradient of sum(f(x)) is f'(x), from the primal's
                // values (`--fast-math` may contract tanh's `1 - y * y`).
                if fast_math {
                    continue;
                }
                let finite: Vec<f64> = xs.iter().copied().filter(|x| x.abs() < 700.0).collect();
                // The sum in the order of `sum` (on LLVM, its rounds on
                // vectors of eight lanes on x86-64, four elsewhere, `exp`
                // lane by lane).
                let want = arrayad_ir::interp::ops::sum_f64(&finite.iter().map(|&x| f(x)).collect::<Vec<_>>());
                let out = m.function(&format!("sum_{name}")).unwrap().call(&[Arg::Vector(&finite)]).unwrap();
                let Value::F64(got) = out[0] else { panic!("{what}: a scalar sum expected") };
                assert_eq!(got.to_bits(), want.to_bits(), "{what}: sum of {name}");
                let grad = m.function(&format!("sum_{name}")).unwrap().grad(&[Arg::Vector(&finite)]).unwrap();
                let got = grad.gradient.f64s("x").unwrap();
                let want: Vec<f64> = finite.iter().map(|&x| derivative(x, f(x))).collect();
                if let Some(k) = (0..want.len()).find(|&k| got[k].to_bits() != want[k].to_bits()) {
                    panic!("{what}: the gradient at {:e} is {:e}, not {:e}", finite[k], got[k], want[k]);
                }
            }
        }
    }
}

/// On LLVM a sum of `exp` or `tanh` runs on vectors of all eight of its
/// partial sums on x86-64 (of four elsewhere): `codegen/src/llvm/mod.rs`,
/// `pair_lanes`.
#[cfg(feature = "llvm")]
#[test]
fn llvm_sums_inline_math_on_vectors_of_the_targets_width() {
    let m = Module::compile_with("inline.arr", &source(), Options::backend(Backend::Llvm)).expect("compiles");
    let vector = if cfg!(target_arch = "x86_64") { "<8 x double>" } else { "<4 x double>" };
    for name in ["exp", "tanh"] {
        let ir = m.function(&format!("sum_{name}")).unwrap().backend_ir("primal").unwrap().expect("LLVM IR");
        assert!(ir.contains(vector), "sum_{name}: no {vector} in\n{ir}");
    }
}
