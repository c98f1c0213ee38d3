//! Arbitrary bytes as a source file, read as `arrayad check` reads one
//! (invalid UTF-8 is a diagnostic at the first bad byte), through
//! `arrayad_frontend::compile`: never a panic (the frontend turns one into
//! an "internal compiler error" diagnostic, which counts as a crash here
//! too), and every diagnostic renders.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    arrayad_fuzz::check_frontend(data);
});
