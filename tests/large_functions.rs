//! Functions over the LLVM backend's size budget: LLVM's register allocator
//! takes time quadratic in the size of a long straight-line function, so
//! one of more than `MAX_STATEMENTS` IR statements is compiled by
//! Cranelift while the module's smaller functions stay with LLVM
//! (`codegen/src/llvm/mod.rs`). The values are those of the interpreter and
//! of Cranelift, bit for bit, in the JIT and in a shared library that links
//! both codes.

mod support;

use arrayad::{Backend, Module, Options};
use support::{arrayad, have, run_in, scratch};

/// A chain of `n` lets: its primal has about 3 statements per let, its
/// gradient about 8 (the vjp is over the budget at n = 1,500, the primal
/// not).
fn chain(n: usize) -> String {
    let mut s = String::from("def f(x: f64) -> f64 =\n  let a0 = x\n");
    for i in 1..=n {
        s.push_str(&format!("  let a{i} = sin(a{}) * 0.5 + x * {}.0\n", i - 1, i % 7 + 1));
    }
    s.push_str(&format!("  in a{n}\n"));
    s
}

#[test]
fn a_gradient_over_the_llvm_budget_is_compiled_by_cranelift_with_the_same_values() {
    let source = chain(1500);
    let grad_on = |backend| {
        let m = Module::compile_with("chain.arr", &source, Options::backend(backend)).unwrap();
        let f = m.function("f").unwrap();
        let g = f.grad(&[0.3.into()]).unwrap();
        (g.value, g.gradient.f64s("x").unwrap()[0], f)
    };
    let (vi, gi, _) = grad_on(Backend::Interp);
    let (vc, gc, _) = grad_on(Backend::Cranelift);
    assert_eq!((vc.to_bits(), gc.to_bits()), (vi.to_bits(), gi.to_bits()), "Cranelift vs the interpreter");
    if !cfg!(feature = "llvm") {
        return;
    }
    let (vl, gl, f) = grad_on(Backend::Llvm);
    assert_eq!((vl.to_bits(), gl.to_bits()), (vi.to_bits(), gi.to_bits()), "LLVM vs the interpreter");
    // The primal is LLVM's, the gradient Cranelift's.
    let primal = f.backend_ir("primal").unwrap().unwrap();
    let vjp = f.backend_ir("vjp").unwrap().unwrap();
    assert!(primal.contains("define "), "the primal is LLVM IR: {}", &primal[..200.min(primal.len())]);
    assert!(vjp.starts_with("function "), "the vjp is Cranelift IR: {}", &vjp[..200.min(vjp.len())]);

    // A library with both: `f` from LLVM, `f_grad` from Cranelift.
    if !have("cc") {
        eprintln!("note: no C compiler `cc`: skipping the library");
        return;
    }
    let dir = scratch("large_functions", "library");
    std::fs::write(dir.join("chain.arr"), &source).unwrap();
    let out = arrayad(&dir, &["build", "chain.arr", "-o", "libchain.so", "--backend", "llvm"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let main = r#"#include <stdio.h>
#include "libchain.h"
int main(void) {
    double v = 0, g = 0, p = 0;
    int rc = f_grad(0.3, &v, &g);
    int rp = f(0.3, &p);
    printf("%d %d %.17g %.17g %.17g\n", rc, rp, v, g, p);
    return 0;
}
"#;
    std::fs::write(dir.join("main.c"), main).unwrap();
    let cc = run_in(&dir, "cc", &["-o", "main", "main.c", "-L.", "-lchain", "-Wl,-rpath,."], None);
    assert_eq!(cc.code, 0, "{cc:#?}");
    let run = run_in(&dir, "./main", &[], None);
    assert_eq!(run.code, 0, "{run:#?}");
    let got: Vec<f64> = run.stdout.split_whitespace().map(|w| w.parse().unwrap()).collect();
    let want = [0.0, 0.0, vi, gi, vi];
    assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{got:?} vs {want:?}");
}
