//! Building a shared library: object file + wrappers + runtime, linked by
//! the system C compiler.

use super::abi::Interface;
use super::header::try_c_header;
use super::wrappers::{internal_symbol, wrappers_sources, EXPORTS_PER_FILE, MODULE_HEADER_NAME};
use crate::error::CodegenError;
use crate::target::{parse_triple, Backend, TargetOptions};
use crate::ExportedFunction;
use arrayad_ir::timing::time;
use arrayad_ir::Function;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory removed on drop (and by [`remove_build_files`]).
struct TempDir(PathBuf);

/// The scratch directories and temporary output files of builds under way.
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn track(path: &Path) {
    if let Ok(mut live) = LIVE.lock() {
        live.push(path.to_path_buf());
    }
}

fn untrack(path: &Path) {
    if let Ok(mut live) = LIVE.lock() {
        live.retain(|p| p != path);
    }
}

/// Removes the scratch directories and temporary output files of every
/// build under way in this process: for a signal handler (the command
/// line's, on SIGINT, SIGTERM and SIGHUP) that ends the process without
/// unwinding, so that an interrupted `arrayad build` leaves nothing behind.
/// A build still running afterwards fails writing its files.
pub fn remove_build_files() {
    let Ok(mut live) = LIVE.lock() else { return };
    for p in live.drain(..) {
        if p.is_dir() {
            remove_dir_racing_writers(&p);
        } else {
            let _ = std::fs::remove_file(&p);
        }
    }
}

/// Removes the directory `dir` while C compilers of the interrupted build,
/// which a signal sent to this process alone leaves running, may still be
/// writing files into it: a file created between the removal of the
/// entries and of the directory makes the removal fail, so it is retried
/// (for at most about a second). Once the directory is gone, nothing can
/// be created in it again.
fn remove_dir_racing_writers(dir: &Path) {
    for _ in 0..200 {
        let _ = std::fs::remove_dir_all(dir);
        if !dir.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

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
            // Tracked before it exists, so that a signal arriving between
            // the creation and the tracking cannot leave it behind.
            track(&p);
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) => {
                    untrack(&p);
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        continue;
                    }
                    return Err(CodegenError::Link(format!("creating a directory in {}: {e}", base.display())));
                }
            }
        }
        Err(CodegenError::Link("could not create a temporary directory".into()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        untrack(&self.0);
        // `ARRAYAD_KEEP_BUILD_DIR=1` keeps the generated sources for inspection.
        if std::env::var_os("ARRAYAD_KEEP_BUILD_DIR").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn write(path: &Path, contents: &[u8]) -> Result<(), CodegenError> {
    std::fs::write(path, contents).map_err(|e| CodegenError::Link(format!("writing {}: {e}", path.display())))
}

/// How [`build_shared_library`] builds: the backend that compiles the
/// code, the target machine, and the C compiler that compiles the runtime
/// and the wrappers and links them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkOptions {
    /// The code generator.
    pub backend: Backend,
    /// The machine and float policy.
    pub target: TargetOptions,
    /// The C compiler (and linker driver); `None`: `$CC`, else `cc` for the
    /// host or `ARCH-linux-gnu-gcc` for another target.
    pub cc: Option<String>,
}

impl LinkOptions {
    /// The C compiler to run.
    pub fn c_compiler(&self) -> Result<String, CodegenError> {
        if let Some(cc) = self.cc.as_ref().filter(|s| !s.trim().is_empty()) {
            return Ok(cc.clone());
        }
        if let Some(cc) = std::env::var("CC").ok().filter(|s| !s.trim().is_empty()) {
            return Ok(cc);
        }
        match &self.target.triple {
            Some(t) if self.target.is_cross() => {
                let triple = parse_triple(t)?;
                let arch = match triple.architecture {
                    target_lexicon::Architecture::Aarch64(_) => "aarch64",
                    _ => "x86_64",
                };
                Ok(format!("{arch}-linux-gnu-gcc"))
            }
            _ => Ok("cc".into()),
        }
    }
}

/// Extra flags for the C compiler from `$ARRAYAD_CFLAGS` (split at
/// whitespace, no quoting), appended after the built-in ones: e.g.
/// `-fsanitize=address,undefined -g` to build the runtime and the wrappers
/// of a library under the sanitizers (`scripts/sanitize.sh`).
fn extra_c_flags() -> Vec<String> {
    std::env::var("ARRAYAD_CFLAGS").map(|s| s.split_whitespace().map(str::to_string).collect()).unwrap_or_default()
}

/// The object files of `funcs` (symbol, IR) for `opts`.
fn compile_object(
    opts: &LinkOptions,
    file: &str,
    funcs: &[(String, &Function)],
    callees: &crate::Callees,
) -> Result<Vec<Vec<u8>>, CodegenError> {
    crate::backend::generator(opts.backend)?.compile_object(&opts.target, file, funcs, callees)
}

/// Runs the C compiler (`cc`, for messages) as `command`; its output
/// becomes the error when it fails.
fn run_c_compiler(cc: &str, mut command: Command) -> Result<(), CodegenError> {
    let output = command.output().map_err(|e| CodegenError::Link(format!("running the C compiler `{cc}`: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    Err(CodegenError::Link(format!(
        "the C compiler `{cc}` failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )))
}

/// `-fuse-ld=gold` when `cc` can link with gold, else nothing (asked once
/// per C compiler and process). Gold links the large objects of generated
/// code in half the time of the default BFD linker (10,000 small
/// definitions: 0.64 s instead of 1.33 s). With the soname and the version
/// script of `build_calling`, the library exports what BFD's does; a link
/// gold fails is done again without it. `ARRAYAD_CFLAGS=-fuse-ld=bfd`
/// (which comes later on the command line) chooses the default linker.
fn faster_linker(cc: &str) -> Option<&'static str> {
    static CHECKED: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, gold)) = checked.iter().find(|(c, _)| c == cc) {
        return gold.then_some("-fuse-ld=gold");
    }
    let gold = Command::new(cc)
        .args(["-fuse-ld=gold", "-Wl,--version"])
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("gold"));
    checked.push((cc.to_string(), gold));
    gold.then_some("-fuse-ld=gold")
}

/// Moves the file `from` (in a scratch directory) over `to`, never
/// leaving a partial file there, with the permissions `from` has (the
/// linker's): renamed when both are on one file system (a library of
/// 10,000 definitions is 145 MB: no copy), else copied by
/// [`replace_file`].
fn move_file(from: &Path, to: &Path) -> Result<(), CodegenError> {
    let failed = |e: std::io::Error| CodegenError::Link(format!("writing {}: {e}", to.display()));
    std::fs::File::open(from).and_then(|f| f.sync_all()).map_err(failed)?;
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            let bytes =
                std::fs::read(from).map_err(|e| CodegenError::Link(format!("reading {}: {e}", from.display())))?;
            replace_file(to, &bytes)?;
            let mode = std::fs::metadata(from).map(|m| m.permissions()).map_err(failed)?;
            std::fs::set_permissions(to, mode).map_err(failed)
        }
        Err(e) => Err(failed(e)),
    }
}

/// Writes `contents` to `path` without ever leaving a partial file there:
/// into a temporary file in the same directory, then renamed over `path`
/// (a process that has the old file mapped keeps its copy).
fn replace_file(path: &Path, contents: &[u8]) -> Result<(), CodegenError> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.arrayad-{}.tmp", std::process::id()));
    track(&tmp);
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    untrack(&tmp);
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(CodegenError::Link(format!("writing {}: {e}", path.display())));
    }
    Ok(())
}

/// Writes `out_so`, a shared library that depends only on libc and libm,
/// and `out_h`, its C header, for `exports` of module `module` (LANGUAGE.md
/// section 8). `file` is the source file name used in error messages.
/// Each output is written to a temporary file and renamed into place.
pub fn build_shared_library(
    file: &str,
    exports: &[ExportedFunction],
    module: &str,
    out_so: &Path,
    out_h: &Path,
    opts: &LinkOptions,
) -> Result<(), CodegenError> {
    build_calling(file, exports, None, module, out_so, out_h, opts)
}

/// A function the exports' code calls (a definition kept as a call, or its
/// jvp or vjp: `arrayad_ir::KeptKind`), compiled once into the library
/// under a hidden symbol.
#[derive(Clone, Debug)]
pub struct CalledDefinition {
    /// Its callee id (`arrayad_ir::KeptKind::callee`).
    pub id: arrayad_ir::FuncId,
    /// Its IR (which may call other called definitions).
    pub primal: Function,
}

/// The functions a library's exports call ([`CalledDefinition`]), of
/// definitions of `program`.
#[derive(Clone, Debug)]
pub struct Called {
    /// The program whose definitions the callee ids name
    /// (`arrayad_ir::KeptKind`).
    pub program: std::sync::Arc<arrayad_ir::Program>,
    /// Every function any export's IR, or a called function's, calls.
    pub funcs: Vec<CalledDefinition>,
}

/// [`build_shared_library`] whose exports call the functions of `called`.
///
/// Errors: as [`build_shared_library`].
pub fn build_shared_library_calling(
    file: &str,
    exports: &[ExportedFunction],
    called: &Called,
    module: &str,
    out_so: &Path,
    out_h: &Path,
    opts: &LinkOptions,
) -> Result<(), CodegenError> {
    build_calling(file, exports, Some(called), module, out_so, out_h, opts)
}

fn build_calling(
    file: &str,
    exports: &[ExportedFunction],
    called: Option<&Called>,
    module: &str,
    out_so: &Path,
    out_h: &Path,
    opts: &LinkOptions,
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
        for (which, f) in [("jvp", &e.jvp), ("vjp", &e.vjp), ("vjp_rows", &e.vjp_rows), ("jvp_lanes", &e.jvp_lanes)] {
            if let Some(f) = f {
                funcs.push((internal_symbol(module, &e.name, which), f));
            }
        }
        if let Some(h) = &e.hvp {
            funcs.push((internal_symbol(module, &e.name, "hvp"), h));
        }
    }
    let mut callees = crate::Callees::none();
    if let Some(c) = called {
        callees.set_program(crate::CalledProgram::new(c.program.clone()));
    }
    for c in called.map_or(&[][..], |c| &c.funcs) {
        let sym = internal_symbol(module, &format!("{}__{}", c.primal.name, c.id.0), "called");
        callees.insert(c.id, crate::CallTarget::Symbol(sym.clone()));
        funcs.push((sym, &c.primal));
    }
    // Parallel maps: the chunk functions split out of the functions, under
    // the symbol of their function with `.parK` appended (`crate::parallel`).
    let refs: Vec<&arrayad_ir::Function> = funcs.iter().map(|(_, f)| *f).collect();
    let (split, chunks) = crate::schedule::schedule(&refs, &callees, opts.backend);
    let mut all: Vec<(String, &arrayad_ir::Function)> =
        funcs.iter().zip(&split).map(|((sym, f), s)| (sym.clone(), s.as_ref().unwrap_or(f))).collect();
    for c in &chunks {
        let sym = format!("{}.par{}", funcs[c.host].0, u32::MAX - c.id.0);
        callees.insert_chunk(c, crate::CallTarget::Symbol(sym.clone()));
        callees.mark_chunk(c);
        all.push((sym, &c.func));
    }
    let code_objects = time("compile the code", || compile_object(opts, file, &all, &callees))?;
    let dir = TempDir::new()?;
    let d = &dir.0;
    let mut code_paths = Vec::new();
    for (k, obj) in code_objects.iter().enumerate() {
        let path = d.join(format!("arrayad_code_{k}.o"));
        write(&path, obj)?;
        code_paths.push(path);
    }
    write(&d.join(arrayad_runtime::RUNTIME_C_HEADER_NAME), arrayad_runtime::RUNTIME_C_HEADER.as_bytes())?;
    write(&d.join(MODULE_HEADER_NAME), header.as_bytes())?;
    let cc = opts.c_compiler()?;
    // The runtime: its objects built with this program, for this machine's
    // default compiler without extra flags, else compiled here.
    let prebuilt = opts.cc.is_none()
        && std::env::var_os("CC").is_none_or(|s| s.is_empty())
        && extra_c_flags().is_empty()
        && !opts.target.is_cross()
        && arrayad_runtime::SHARED_RUNTIME_OBJECTS.iter().all(|(_, bytes)| !bytes.is_empty());
    // (runtime/build.rs compiles the prebuilt runtime objects with these.)
    const FLAGS: [&str; 6] = ["-fPIC", "-O2", "-std=gnu99", "-ffp-contract=off", "-fvisibility=hidden", "-Wall"];
    // The wrappers without `-Wall`, whose flow-sensitive warnings take a
    // quarter of gcc's time on them (a library of 1,000 exports spends
    // most of its build there; tests/c_abi.rs builds them with `-Wall
    // -Werror`). `-O1` would halve it again, but small calls cost 5 to 8%
    // more.
    const WRAPPER_FLAGS: [&str; 5] = ["-fPIC", "-O2", "-std=gnu99", "-ffp-contract=off", "-fvisibility=hidden"];
    // Each C source with its flags.
    let mut sources: Vec<(PathBuf, &[&str])> = Vec::new();
    let mut prebuilt_objects = Vec::new();
    if prebuilt {
        for (name, bytes) in arrayad_runtime::SHARED_RUNTIME_OBJECTS {
            write(&d.join(name), bytes)?;
            prebuilt_objects.push(d.join(name));
        }
    } else {
        write(&d.join("arrayad_runtime.c"), arrayad_runtime::RUNTIME_C_SOURCE.as_bytes())?;
        write(&d.join("arrayad_abi.c"), arrayad_runtime::ABI_C_SOURCE.as_bytes())?;
        sources.extend([(d.join("arrayad_abi.c"), &FLAGS[..]), (d.join("arrayad_runtime.c"), &FLAGS[..])]);
    }
    // Large modules: the wrappers in several files, compiled in parallel.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let files = interfaces.len().div_ceil(EXPORTS_PER_FILE).clamp(1, cores.max(1));
    for (k, text) in wrappers_sources(&interfaces, module, file, files, opts.target.flush_subnormals).iter().enumerate()
    {
        let path = d.join(format!("arrayad_wrappers_{k}.c"));
        write(&path, text.as_bytes())?;
        sources.push((path, &WRAPPER_FLAGS[..]));
    }
    let objects: Vec<PathBuf> = sources.iter().map(|(s, _)| s.with_extension("o")).collect();
    let compile = |(src, flags): &(PathBuf, &[&str]), obj: &PathBuf| {
        let mut c = Command::new(&cc);
        c.arg("-c").args(*flags).arg("-o").arg(obj).arg(src).args(extra_c_flags());
        run_c_compiler(&cc, c)
    };
    let results: Vec<Result<(), CodegenError>> = time("compile the runtime and the wrappers", || {
        if sources.len() > 1 && cores > 1 {
            std::thread::scope(|s| {
                let handles: Vec<_> =
                    sources.iter().zip(&objects).map(|(src, obj)| s.spawn(move || compile(src, obj))).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(CodegenError::Link("a compiler thread panicked".into()))))
                    .collect()
            })
        } else {
            sources.iter().zip(&objects).map(|(src, obj)| compile(src, obj)).collect()
        }
    });
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    let tmp_so = d.join("out.so");
    // Gold, when there, with a version script: gold exports the linker's
    // `_end`, `_edata` and `__bss_start`, which BFD keeps to itself, and
    // the library exports only its API.
    let gold = match faster_linker(&cc) {
        Some(flag) => {
            let hide = d.join("arrayad_hide.map");
            write(&hide, b"{ local: _end; _edata; __bss_start; };\n")?;
            let mut script = std::ffi::OsString::from("--version-script=");
            script.push(&hide);
            Some([std::ffi::OsString::from(flag), "-Xlinker".into(), script])
        }
        None => None,
    };
    let link = |gold: Option<&[std::ffi::OsString; 3]>| {
        let mut link = Command::new(&cc);
        link.arg("-shared").args(FLAGS).args(gold.into_iter().flatten());
        // The library's own name as its soname: what programs linked with
        // it record, and what gold would otherwise take from the scratch
        // path of its output (for the version definition), making every
        // build differ.
        if let Some(name) = out_so.file_name() {
            link.args(["-Xlinker", "-soname", "-Xlinker"]).arg(name);
        }
        link.arg("-o").arg(&tmp_so).args(&objects).args(&prebuilt_objects).args(&code_paths);
        link.arg("-lm").args(extra_c_flags());
        link
    };
    // A failure of gold is retried with the compiler's own linker, whose
    // error is the one reported.
    time("link", || match &gold {
        Some(g) => run_c_compiler(&cc, link(Some(g))).or_else(|_| run_c_compiler(&cc, link(None))),
        None => run_c_compiler(&cc, link(None)),
    })?;
    move_file(&tmp_so, out_so)?;
    replace_file(out_h, header.as_bytes())?;
    Ok(())
}
