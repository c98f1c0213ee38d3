//! Compiles the C runtime (`src/arrayad_runtime.c`) into the crate, for the JIT.

fn main() {
    println!("cargo:rerun-if-changed=src/arrayad_runtime.c");
    println!("cargo:rerun-if-changed=src/arrayad_runtime.h");
    cc::Build::new()
        .file("src/arrayad_runtime.c")
        .include("src")
        .flag_if_supported("-std=c99")
        .flag_if_supported("-ffp-contract=off")
        .opt_level(2)
        .warnings(true)
        .compile("arrayad_runtime");
    // libm: the math functions the generated code calls.
    let target = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target != "windows" && target != "macos" {
        println!("cargo:rustc-link-lib=m");
    }
}
