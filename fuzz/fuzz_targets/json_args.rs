//! Arbitrary bytes as the `--args` JSON (and the same text as `--jvp`
//! tangents and the `--vjp` cotangent) of the fixed definitions of
//! [`arrayad_fuzz::json_args::SOURCE`], decoded as `arrayad run` decodes them
//! (`arrayad::json`) and run on the interpreter and the Cranelift JIT:
//! never a panic, and both backends agree (values, or the same error).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    arrayad_fuzz::json_args::check(data);
});
