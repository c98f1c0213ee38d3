//! Generated well-typed programs (the fuzz bytes are the generator's
//! choices and the arguments) run through `arrayad::Module` on the
//! interpreter and the Cranelift JIT: primal, jvp, vjp and (sometimes) the
//! Jacobian must agree (NaN-aware, relative tolerance), the same run-time
//! errors on both, the vjp and jvp with the runtime Delta and dual-number
//! oracles where they apply (programs without derivative operators), and
//! `<ct, J t> == <J^T ct, t>`. A mismatch or a panic is a crash.
//!
//! `ARRAYAD_FUZZ_SHOW=1` prints each generated program and its arguments.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    arrayad_fuzz::programs::check(data);
});
