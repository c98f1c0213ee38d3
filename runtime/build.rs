//! Compiles the C runtime (`src/arrayad_runtime.c`) into the crate, for the
//! JIT; and compiles it with `src/arrayad_abi.c` once more as objects of
//! shared libraries for this machine, which `arrayad build` links instead
//! of compiling them on every build (`SHARED_RUNTIME_OBJECTS`).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/arrayad_runtime.c");
    println!("cargo:rerun-if-changed=src/arrayad_runtime.h");
    println!("cargo:rerun-if-changed=src/arrayad_abi.c");
    cc::Build::new()
        .file("src/arrayad_runtime.c")
        .include("src")
        // The JIT's calls clamp the stack of kept calls to the thread's
        // (pthread_getattr_np, which a shared library would need
        // ld-linux for).
        .define("ARRAYAD_STACK_BOUNDS", None)
        .flag_if_supported("-std=c99")
        .flag_if_supported("-ffp-contract=off")
        .opt_level(2)
        .warnings(true)
        .compile("arrayad_runtime");
    // The flags of `codegen/src/cabi/link.rs` (`FLAGS`), and nothing else:
    // with a compiler or flags from the environment (which `cc` would
    // apply, e.g. `-march=native`), no objects are prebuilt and
    // `arrayad build` compiles the sources as it would (empty files).
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = std::env::var("TARGET").unwrap_or_default();
    let mut vars: Vec<String> =
        ["CC", "CFLAGS", "TARGET_CC", "TARGET_CFLAGS", "HOST_CC", "HOST_CFLAGS", "CRATE_CC_NO_DEFAULTS"]
            .map(String::from)
            .to_vec();
    for t in [target.clone(), target.replace('-', "_")] {
        vars.push(format!("CC_{t}"));
        vars.push(format!("CFLAGS_{t}"));
    }
    let from_env = vars.iter().any(|v| {
        println!("cargo:rerun-if-env-changed={v}");
        std::env::var_os(v).is_some_and(|s| !s.is_empty())
    });
    if from_env {
        for stem in ["arrayad_runtime", "arrayad_abi"] {
            std::fs::write(out.join(format!("shared_{stem}.o")), b"").expect("writing an empty object file");
        }
        link_libm();
        return;
    }
    let objects = cc::Build::new()
        .files(["src/arrayad_runtime.c", "src/arrayad_abi.c"])
        .include("src")
        .no_default_flags(true)
        .inherit_rustflags(false)
        .debug(false)
        .flag("-fPIC")
        .flag("-O2")
        .flag("-std=gnu99")
        .flag("-ffp-contract=off")
        .flag("-fvisibility=hidden")
        .flag("-Wall")
        .compile_intermediates();
    for stem in ["arrayad_runtime", "arrayad_abi"] {
        let object = objects
            .iter()
            .find(|o| o.file_stem().and_then(|s| s.to_str()).is_some_and(|s| s.ends_with(stem)))
            .unwrap_or_else(|| panic!("no object of {stem}.c among {objects:?}"));
        std::fs::copy(object, out.join(format!("shared_{stem}.o")))
            .unwrap_or_else(|e| panic!("copying the object of {stem}.c: {e}"));
    }
    link_libm();
}

/// libm: the math functions the generated code calls.
fn link_libm() {
    let target = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target != "windows" && target != "macos" {
        println!("cargo:rustc-link-lib=m");
    }
}
