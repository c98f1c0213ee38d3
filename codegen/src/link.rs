//! Building a shared library: object file + wrappers + runtime, linked by
//! the system C compiler.

use crate::abi::Interface;
use crate::c_abi::{internal_symbol, wrappers_source, MODULE_HEADER_NAME};
use crate::error::CodegenError;
use crate::header::try_c_header;
use crate::object::compile_object;
use crate::ExportedFunction;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, CodegenError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let p = base.join(format!("arrayad-build-{}-{n}-{nanos}", std::process::id()));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(CodegenError::Link(format!("creating a directory in {}: {e}", base.display()))),
            }
        }
        Err(CodegenError::Link("could not create a temporary directory".into()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // `ARRAYAD_KEEP_BUILD_DIR=1` keeps the generated sources for inspection.
        if std::env::var_os("ARRAYAD_KEEP_BUILD_DIR").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn write(path: &Path, contents: &[u8]) -> Result<(), CodegenError> {
    std::fs::write(path, contents).map_err(|e| CodegenError::Link(format!("writing {}: {e}", path.display())))
}

/// The C compiler: `$CC` or `cc`.
pub(crate) fn c_compiler() -> String {
    std::env::var("CC").ok().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| "cc".into())
}

/// Writes `out_so`, a shared library that depends only on libc and libm,
/// and `out_h`, its C header, for `exports` of module `module` (LANGUAGE.md
/// section 8). `file` is the source file name used in error messages.
pub fn build_shared_library(
    file: &str,
    exports: &[ExportedFunction],
    module: &str,
    out_so: &Path,
    out_h: &Path,
) -> Result<(), CodegenError> {
    let interfaces: Vec<Interface> = exports.iter().map(Interface::new).collect::<Result<_, _>>()?;
    let mut names = std::collections::HashSet::new();
    for i in &interfaces {
        if !names.insert(i.name.clone()) {
            return Err(CodegenError::Abi(format!("`{}` is exported twice", i.name)));
        }
    }
    let header = try_c_header(exports, module)?;
    let mut funcs = Vec::new();
    for e in exports {
        funcs.push((internal_symbol(module, &e.name, "primal"), &e.primal));
        funcs.push((internal_symbol(module, &e.name, "jvp"), &e.jvp));
        funcs.push((internal_symbol(module, &e.name, "vjp"), &e.vjp));
        funcs.push((internal_symbol(module, &e.name, "vjp_rows"), &e.vjp_rows));
    }
    let obj = compile_object(file, &funcs)?;
    let dir = TempDir::new()?;
    let d = &dir.0;
    write(&d.join("arrayad_code.o"), &obj)?;
    write(&d.join(arrayad_runtime::RUNTIME_C_HEADER_NAME), arrayad_runtime::RUNTIME_C_HEADER.as_bytes())?;
    write(&d.join("arrayad_runtime.c"), arrayad_runtime::RUNTIME_C_SOURCE.as_bytes())?;
    write(&d.join(MODULE_HEADER_NAME), header.as_bytes())?;
    write(&d.join("arrayad_wrappers.c"), wrappers_source(&interfaces, module).as_bytes())?;
    let tmp_so = d.join("out.so");
    let cc = c_compiler();
    let output = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-std=gnu99", "-ffp-contract=off", "-fvisibility=hidden", "-o"])
        .arg(&tmp_so)
        .arg(d.join("arrayad_wrappers.c"))
        .arg(d.join("arrayad_runtime.c"))
        .arg(d.join("arrayad_code.o"))
        .arg("-lm")
        .output()
        .map_err(|e| CodegenError::Link(format!("running the C compiler `{cc}`: {e}")))?;
    if !output.status.success() {
        return Err(CodegenError::Link(format!(
            "the C compiler `{cc}` failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    std::fs::copy(&tmp_so, out_so).map_err(|e| CodegenError::Link(format!("writing {}: {e}", out_so.display())))?;
    write(out_h, header.as_bytes())?;
    Ok(())
}
