//! The per-call cost of the Rust API on tiny inputs (where the arithmetic is
//! nothing and the calling is everything): `call`, `grad` and `grad_into`
//! of a 3-element dot product, `grad` of a function of 10^5 elements
//! (where copying the arguments would show), and `jacobian` of one
//! bundle-adjustment observation (`examples/ba.arr`'s `ba_obs`: a 3 x 15
//! block, one forward and three backward passes).
//!
//!     cargo run --release --example call_overhead [-- cranelift|llvm]
//!
//! Prints the median time per call over repeated batches.

use arrayad::{Arg, Backend, Module, Options};
use std::time::Instant;

fn median_ns(mut f: impl FnMut(), per_batch: usize) -> f64 {
    let mut batches: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            start.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

fn main() -> Result<(), arrayad::Error> {
    let backend = match std::env::args().nth(1).as_deref() {
        Some("llvm") => Backend::Llvm,
        _ => Backend::Cranelift,
    };
    let src = "def f(x: [n]f64, w: [n]f64) -> f64 = dot(x, w)";
    let m = Module::compile_with("tiny.arr", src, Options::backend(backend))?;
    let f = m.function("f")?;
    let (x, w) = ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0]);
    let args = [Arg::Vector(&x), Arg::Vector(&w)];
    // Warm up (compiles on first use).
    f.call(&args)?;
    f.grad(&args)?;
    let call = median_ns(
        || {
            std::hint::black_box(f.call(&args).ok());
        },
        20_000,
    );
    let grad = median_ns(
        || {
            std::hint::black_box(f.grad(&args).ok());
        },
        20_000,
    );
    let (mut dx, mut dw) = ([0.0; 3], [0.0; 3]);
    let grad_into = median_ns(
        || {
            std::hint::black_box(f.grad_into(&args, &mut [&mut dx, &mut dw]).ok());
        },
        20_000,
    );
    let n = 100_000;
    let (bx, bw): (Vec<f64>, Vec<f64>) = ((0..n).map(|i| i as f64).collect(), vec![0.5; n]);
    let big = [Arg::Vector(&bx), Arg::Vector(&bw)];
    let (mut gx, mut gw) = (vec![0.0; n], vec![0.0; n]);
    f.grad(&big)?;
    let big_grad = median_ns(
        || {
            std::hint::black_box(f.grad(&big).ok());
        },
        200,
    );
    let big_into = median_ns(
        || {
            std::hint::black_box(f.grad_into(&big, &mut [&mut gx, &mut gw]).ok());
        },
        200,
    );
    let ba =
        Module::compile_with("ba.arr", include_str!("ba.arr"), Options::backend(backend).with_wrt(&["cam", "x", "w"]))?;
    let obs = ba.function("ba_obs")?;
    let cam = [0.1, -0.2, 0.3, 1.0, 2.0, 3.0, 500.0, 250.0, 200.0, 1e-3, 1e-6];
    let (pt, feat) = ([0.5, -1.0, 6.0], [240.0, 180.0]);
    let ba_args = [Arg::Vector(&cam), Arg::Vector(&pt), Arg::F64(0.8), Arg::Vector(&feat)];
    obs.jacobian(&ba_args)?;
    let ba_call = median_ns(
        || {
            std::hint::black_box(obs.call(&ba_args).ok());
        },
        20_000,
    );
    let ba_jacobian = median_ns(
        || {
            std::hint::black_box(obs.jacobian(&ba_args).ok());
        },
        20_000,
    );
    println!("backend {backend:?}");
    println!("call of dot (n = 3):             {call:8.0} ns");
    println!("grad of dot (n = 3):             {grad:8.0} ns");
    println!("grad_into of dot (n = 3):        {grad_into:8.0} ns");
    println!("grad of dot (n = 10^5):          {big_grad:8.0} ns");
    println!("call of ba_obs:                  {ba_call:8.0} ns");
    println!("jacobian of ba_obs (3 x 15):     {ba_jacobian:8.0} ns");
    println!("grad_into of dot (n = 10^5):     {big_into:8.0} ns");
    Ok(())
}
