//! The `arrayad` command line (LANGUAGE.md section 7).
//!
//! Each command returns its standard output as a string or an [`Error`];
//! [`run`] prints either and returns the exit status.

use arrayad::json::{self, encode_f64, encode_per_param, encode_result, encode_tree};
use arrayad::{driver, Arg, Backend, Error, Module, Options, Scalar, SrcType, Value};
use arrayad_ad::Which;
use arrayad_codegen::{Backend as CodegenBackend, JitModule, LinkOptions, TargetOptions};
use arrayad_ir::{printer::print_function, FuncId, Program};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Read;
use std::path::{Path, PathBuf};

/// arrayad: compile a first-order array language, with derivatives.
#[derive(Parser, Debug)]
#[command(name = "arrayad", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and type-check FILE.
    Check {
        /// The source file (.arr).
        file: PathBuf,
    },
    /// Run definition FUNC of FILE on ARGS and print one JSON object
    /// {"value": ...} (plus the derivative asked for).
    #[command(allow_negative_numbers = true)]
    Run(RunArgs),
    /// Build a shared library with a C header.
    Build(BuildArgs),
    /// Print an intermediate stage of compilation.
    Emit(EmitArgs),
    /// Explain an error code (`arrayad explain E0101`); without a code,
    /// list them all.
    Explain {
        /// The code, as printed in `error[E0101]` (`E0101`, `e0101` or `101`).
        code: Option<String>,
    },
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The source file (.arr).
    file: PathBuf,
    /// The definition to run.
    func: String,
    /// The arguments: a JSON file, `-` for standard input, or inline JSON
    /// starting with `[`; an array with one entry per parameter.
    #[arg(long, value_name = "ARGS")]
    args: String,
    #[command(flatten)]
    mode: Mode,
    /// Differentiate only these parameters (comma separated).
    #[arg(long, value_name = "P,..", value_delimiter = ',')]
    wrt: Option<Vec<String>>,
    /// The backend.
    #[arg(long, value_enum, default_value_t = BackendArg::Cranelift)]
    backend: BackendArg,
    #[command(flatten)]
    codegen: CodegenArgs,
    /// The most memory (arena and tape) the call may use, in bytes or with
    /// a suffix K, M, G or T (powers of 1024); a call that needs more fails
    /// with an out-of-memory error (exit 3) at the allocating statement.
    /// Default: $ARRAYAD_MAX_MEMORY, else half of the physical memory.
    /// Compiled backends only.
    #[arg(long, value_name = "SIZE", value_parser = parse_memory_size)]
    max_memory: Option<u64>,
    /// The threads on which parallel maps run (1 to 256; 1: one thread).
    /// Results are the same for every number. Default: $ARRAYAD_NUM_THREADS,
    /// else the cores the process may run on. Compiled backends only.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
}

/// An entry of `build --entries`.
fn parse_entry(s: &str) -> Result<arrayad_codegen::Entry, String> {
    arrayad_codegen::Entry::from_name(s.trim()).ok_or_else(|| {
        let names: Vec<&str> = arrayad_codegen::Entry::ALL.iter().map(|e| e.name()).collect();
        format!("`{s}` is not an entry: use {}", names.join(", "))
    })
}

/// A memory limit ([`driver::parse_memory_size`]), positive.
fn parse_memory_size(s: &str) -> Result<u64, String> {
    match driver::parse_memory_size(s)? {
        0 => Err("the memory limit must be positive".into()),
        n => Ok(n),
    }
}

/// Code generation options (LLVM).
#[derive(Args, Debug, Clone)]
struct CodegenArgs {
    /// The CPU to generate code for (LLVM names, e.g. `x86-64-v3`,
    /// `skylake-avx512`, `neoverse-n1`, `generic` for a portable library);
    /// default: this machine's CPU, or `generic` with --target. LLVM uses
    /// it; Cranelift, which cannot select features by CPU name, compiles
    /// for the architecture's baseline when any CPU but `native` is named.
    #[arg(long, value_name = "CPU")]
    target_cpu: Option<String>,
    /// LLVM backend only: allow reassociation of floating-point arithmetic
    /// (reductions such as sum and dot are vectorised and summed in another
    /// order, so results change in the last bits), contraction into fused
    /// multiply-adds and the assumption that no NaN or infinity arises.
    /// Without it, floats follow IEEE semantics and results equal the
    /// interpreter's bit for bit.
    #[arg(long)]
    fast_math: bool,
    /// Every call flushes subnormal numbers (below 2.2e-308 in magnitude)
    /// to zero, as results and operands, on all its threads, and gives the
    /// caller back its own mode when it returns (x86-64: MXCSR's FTZ and
    /// DAZ; AArch64: FPCR.FZ). Arithmetic that meets them then runs at full
    /// speed (many x86-64 CPUs take a slow microcode assist for each);
    /// results differ from IEEE's only where a value would be subnormal.
    /// Both backends; the interpreter ignores it.
    #[arg(long)]
    flush_subnormals: bool,
    /// Reverse mode checkpoints every counted loop: a gradient through a
    /// loop of n iterations keeps about sqrt(n) saved states and one
    /// segment of residuals instead of the residuals of all n iterations,
    /// for one more run of the loop body. Array states of a checkpointed
    /// loop must keep their shape.
    #[arg(long)]
    checkpoint: bool,
    /// Definitions of at least N statements (with their own calls inlined
    /// or kept, a kept call counting as 64) called from two places or more
    /// are compiled once, with their derivatives, and called instead of
    /// being inlined at every call site; default 2000. The reverse-mode
    /// derivatives of a definition containing `grad` or `vjp` inline every
    /// call.
    #[arg(long, value_name = "N")]
    keep_calls_above: Option<u64>,
}

impl CodegenArgs {
    fn target(&self, triple: Option<String>) -> TargetOptions {
        TargetOptions {
            triple,
            cpu: self.target_cpu.clone(),
            fast_math: self.fast_math,
            flush_subnormals: self.flush_subnormals,
        }
    }

    fn ad(&self) -> arrayad_ad::AdOptions {
        arrayad_ad::AdOptions { checkpoint: self.checkpoint }
    }
}

/// What to compute besides the value (at most one).
#[derive(Args, Debug)]
#[group(multiple = false)]
struct Mode {
    /// Also print the gradient (the result must be one f64).
    #[arg(long)]
    grad: bool,
    /// Also print the tangent of the result for these tangents (one per
    /// parameter, `null` for those without f64 parts).
    #[arg(long, value_name = "TANGENTS")]
    jvp: Option<String>,
    /// Also print the cotangent of every parameter for this cotangent of the
    /// result.
    #[arg(long, value_name = "COTANGENT")]
    vjp: Option<String>,
    /// Also print the Jacobian: one row per f64 element of the result.
    #[arg(long)]
    jacobian: bool,
    /// Also print the dense Hessian (the result must be one f64): one row
    /// and column per f64 element of the active parameters, by forward
    /// over reverse (one Hessian-vector product per column).
    #[arg(long)]
    hessian: bool,
}

#[derive(Args, Debug)]
struct BuildArgs {
    /// The source file (.arr).
    file: PathBuf,
    /// The shared library to write.
    #[arg(short = 'o', long = "output", value_name = "OUT.so")]
    output: PathBuf,
    /// The backend that compiles the code.
    #[arg(long, value_enum, default_value_t = BackendArg::Cranelift)]
    backend: BackendArg,
    /// The target triple to build for (`x86_64-unknown-linux-gnu`,
    /// `aarch64-unknown-linux-gnu`); default: this machine. The runtime is
    /// compiled and the library linked by the target's C compiler
    /// (`ARCH-linux-gnu-gcc` unless --cc or $CC says otherwise).
    #[arg(long, value_name = "TRIPLE")]
    target: Option<String>,
    /// The C compiler that compiles the runtime and links the library
    /// (default: $CC, else `cc`, or `ARCH-linux-gnu-gcc` with --target).
    #[arg(long, value_name = "CC")]
    cc: Option<String>,
    #[command(flatten)]
    codegen: CodegenArgs,
    /// Export only these definitions (comma separated; default: all).
    #[arg(long, value_name = "f,g", value_delimiter = ',')]
    export: Option<Vec<String>>,
    /// Differentiate only these parameters (comma separated).
    #[arg(long, value_name = "P,..", value_delimiter = ',')]
    wrt: Option<Vec<String>>,
    /// The C functions to build for each export, comma separated: value
    /// (`f`), jvp, vjp, grad, jacobian, hvp (grad and hvp only where the
    /// result is one f64). Default: all. Only what they need is
    /// differentiated and compiled.
    #[arg(long, value_name = "E,..", value_delimiter = ',', value_parser = parse_entry)]
    entries: Option<Vec<arrayad_codegen::Entry>>,
    /// The module name (prefix of MODULE_last_error); default: OUT's file
    /// stem without a leading `lib`.
    #[arg(long, value_name = "MODULE")]
    name: Option<String>,
    /// The C header to write; default: OUT with `.h` in place of `.so`.
    #[arg(long, value_name = "PATH")]
    header: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct EmitArgs {
    /// The source file (.arr).
    file: PathBuf,
    /// The stage to print.
    #[arg(long, value_enum)]
    stage: Stage,
    /// Print only this definition (default: all, then the parts `f#1`,
    /// `f#2`, ... that definitions of 32,000 statements or more are split
    /// into, each compiled on its own).
    #[arg(long, value_name = "F")]
    function: Option<String>,
    /// Differentiate only these parameters (jvp, vjp, delta, clif, llvm).
    #[arg(long, value_name = "P,..", value_delimiter = ',')]
    wrt: Option<Vec<String>>,
    #[command(flatten)]
    codegen: CodegenArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    /// Cranelift (JIT for `run`, object code for `build`): compiles fast.
    Cranelift,
    /// LLVM at -O3 for the target CPU (JIT for `run`, object code for
    /// `build`; a function of over 10,000 IR statements is compiled by
    /// Cranelift, whose compile time stays linear); only when arrayad is
    /// built with the `llvm` feature.
    Llvm,
    /// The reference interpreter (`run` only).
    Interp,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// The syntax tree.
    Ast,
    /// The optimised IR of the primal as `build` compiles it: calls
    /// inlined, except those of definitions kept as calls
    /// (`--keep-calls-above`), printed `call g(...)` (`call g_jvp(...)`,
    /// `g_vjp`, `g_vjp_jvp` for their derivatives in the stages below).
    Ir,
    /// The forward-mode (jvp) IR.
    Jvp,
    /// The reverse-mode (vjp) IR.
    Vjp,
    /// The many-row vjp IR of dense Jacobians: one forward pass, one
    /// backward pass per cotangent row (tape rewound in between).
    #[value(name = "vjp_rows")]
    VjpRows,
    /// The vector forward-mode IR of forward-mode Jacobians: the primal
    /// once, the tangents of several directions (lanes) side by side.
    #[value(name = "jvp_lanes")]
    JvpLanes,
    /// The linearised program: the Delta bindings of reverse mode (every
    /// call inlined).
    Delta,
    /// Cranelift IR of the primal, jvp and vjp (every call inlined).
    Clif,
    /// Optimised LLVM IR of the primal, jvp and vjp (every call inlined;
    /// only when built with the `llvm` feature).
    Llvm,
}

/// Parses `argv`, runs the command, prints its output or error and returns
/// the exit status (0 success, 1 compile error, 2 usage error, 3 run-time
/// error, 70 internal error).
pub fn run(argv: Vec<std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match execute(cli) {
        Ok(out) => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            if stdout.write_all(out.as_bytes()).and_then(|_| stdout.flush()).is_err() {
                eprintln!("arrayad: error: cannot write to standard output");
                return 2;
            }
            0
        }
        Err(e) => {
            report(&e);
            e.exit_code()
        }
    }
}

/// Prints an error to standard error. Characters a terminal would interpret
/// (control characters from a file name, an argument or a source file) are
/// escaped, whatever the message.
fn report(e: &Error) {
    let text = match e {
        // Rendered diagnostics already say `error: ...` with locations.
        Error::Compile(d) => {
            let d = d.render();
            if d.ends_with('\n') {
                d
            } else {
                format!("{d}\n")
            }
        }
        Error::Runtime(r) => format!("error[{}]: {}\n", r.kind.error_code(), r.message),
        Error::Internal(m) => format!("arrayad: internal error: {m}\n"),
        other => format!("error: {other}\n"),
    };
    eprint!("{}", arrayad_frontend::diagnostics::escape_text(&text, true));
}

fn execute(cli: Cli) -> Result<String, Error> {
    match cli.command {
        Command::Check { file } => {
            let (name, source) = driver::read_source(&file)?;
            driver::load(&name, &source)?;
            Ok(String::new())
        }
        Command::Run(a) => run_command(a),
        Command::Build(a) => build_command(a),
        Command::Emit(a) => emit_command(a),
        Command::Explain { code: Some(code) } => match arrayad::explain(&code) {
            Some(text) => Ok(text.to_string()),
            None => {
                Err(Error::Usage(format!("`{code}` is not an error code of arrayad (`arrayad explain` lists them)")))
            }
        },
        Command::Explain { code: None } => {
            Ok(arrayad::error_codes().map(|(code, title)| format!("{code}  {title}\n")).collect())
        }
    }
}

fn backend(b: BackendArg, what: &str) -> Result<Backend, Error> {
    match b {
        BackendArg::Cranelift => Ok(Backend::Cranelift),
        BackendArg::Interp => Ok(Backend::Interp),
        BackendArg::Llvm => match CodegenBackend::Llvm.check_available() {
            Ok(()) => Ok(Backend::Llvm),
            Err(e) => Err(Error::Usage(format!("{what}: {e}"))),
        },
    }
}

// ----------------------------------------------------------------------------
// run
// ----------------------------------------------------------------------------

/// Where a JSON input comes from; standard input can be read once.
struct Inputs {
    stdin_used: bool,
}

impl Inputs {
    /// Reads `ARGS`/`TANGENTS`/`COTANGENT`: inline JSON starting with `[`,
    /// `-` for standard input, or a file. A text that is not an existing
    /// file but is valid JSON (e.g. `1.0` as a scalar cotangent) is taken
    /// inline too. The syntax is checked here; the text is decoded later,
    /// against the signature, into typed buffers ([`json::Input::Text`]).
    fn read(&mut self, what: &str, spec: &str) -> Result<JsonText, Error> {
        if spec.strip_prefix('\u{feff}').unwrap_or(spec).trim_start().starts_with('[') {
            return JsonText::checked(what.to_string(), spec.to_string());
        }
        if spec == "-" {
            if self.stdin_used {
                return Err(Error::Usage(format!("{what}: standard input is already used by another input")));
            }
            self.stdin_used = true;
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| read_error(what, "standard input", e))?;
            return JsonText::checked(format!("{what} (standard input)"), text);
        }
        let path = Path::new(spec);
        if path.is_file() {
            let text = std::fs::read_to_string(path).map_err(|e| read_error(what, &path.display().to_string(), e))?;
            return JsonText::checked(format!("{what} ({})", path.display()), text);
        }
        if json::check_syntax(what, spec).is_ok() {
            return Ok(JsonText { what: what.to_string(), text: spec.to_string() });
        }
        Err(Error::Io(format!(
            "{what}: `{spec}` is neither a readable file, `-`, nor JSON text (inline JSON starts with `[`)"
        )))
    }
}

/// The error of reading a JSON input: out of memory (a run-time error, exit
/// status 3) or an I/O error.
fn read_error(what: &str, from: &str, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::OutOfMemory {
        let detail = format!("{what}: no memory to read {from}");
        Error::Runtime(arrayad::RuntimeError::new(arrayad::ErrorKind::OutOfMemory, detail))
    } else {
        Error::Io(format!("{what}: cannot read {from}: {e}"))
    }
}

/// A JSON input's text, its syntax checked, and its name in messages.
struct JsonText {
    what: String,
    text: String,
}

impl JsonText {
    /// `text` if it is one JSON value.
    ///
    /// Errors: [`Error::InvalidArgument`] (malformed JSON) naming `what`.
    fn checked(what: String, text: String) -> Result<JsonText, Error> {
        json::check_syntax(&what, &text)?;
        Ok(JsonText { what, text })
    }

    fn input(&self) -> json::Input<'_> {
        json::Input::Text { what: &self.what, text: &self.text }
    }
}

fn run_command(a: RunArgs) -> Result<String, Error> {
    let backend = backend(a.backend, "--backend llvm")?;
    let (name, source) = driver::read_source(&a.file)?;
    let options = Options {
        backend,
        wrt: None,
        target: a.codegen.target(None),
        checkpoint: a.codegen.checkpoint,
        max_memory: a.max_memory,
        keep_calls_above: a.codegen.keep_calls_above,
    };
    if let Some(n) = a.threads {
        arrayad::set_num_threads(Some(usize::from(n)));
    }
    let module = Module::compile_with(&name, &source, options)?;
    let program = module.program();
    let id = driver::find(program, &a.func)?;
    driver::check_wrt(program, Some(&[id]), a.wrt.as_deref())?;
    let result_ty = program.func(id).signature.result.clone();
    for (on, flag) in [(a.mode.grad, "--grad"), (a.mode.hessian, "--hessian")] {
        if on && result_ty != SrcType::Scalar(Scalar::F64) {
            return Err(Error::Usage(format!(
                "{flag} needs a function whose result is one f64, but `{}` returns {result_ty} \
                 (use --vjp or --jacobian)",
                a.func
            )));
        }
    }
    let mut inputs = Inputs { stdin_used: false };
    let args_json = inputs.read("ARGS", &a.args)?;
    let f = match &a.wrt {
        Some(wrt) => module.function(&a.func)?.with_wrt(wrt)?,
        None => module.function(&a.func)?,
    };
    let sig = f.signature();
    let args = json::decode_args(&a.func, sig, args_json.input())?;
    drop(args_json);
    if a.codegen.checkpoint && (a.mode.grad || a.mode.vjp.is_some() || a.mode.jacobian || a.mode.hessian) {
        for w in f.checkpoint_warnings()? {
            eprintln!("{w}");
        }
    }

    let mut out = String::from("{\"value\": ");
    let argv: Vec<Arg<'_>> = args.iter().map(Arg::Value).collect();
    if a.mode.grad {
        let g = f.grad(&argv)?;
        out.push_str(&encode_f64(g.value));
        out.push_str(", \"gradient\": ");
        out.push_str(&encode_per_param(sig, g.gradient.as_slice()));
    } else if let Some(spec) = &a.mode.jvp {
        let tj = inputs.read("TANGENTS", spec)?;
        let tangents = json::decode_tangents(&a.func, sig, &args, f.active(), tj.input())?;
        let targs: Vec<Option<Arg<'_>>> = tangents.iter().map(|t| t.as_ref().map(Arg::Value)).collect();
        let r = f.jvp(&argv, &targs)?;
        out.push_str(&encode_result(&result_ty, &r.value));
        out.push_str(", \"tangent\": ");
        let leaves: Vec<Option<&Value>> = r.tangent.iter().map(Option::as_ref).collect();
        out.push_str(&encode_tree(&result_ty, &leaves));
    } else if let Some(spec) = &a.mode.vjp {
        let cj = inputs.read("COTANGENT", spec)?;
        let shapes = f.result_shapes(&argv)?;
        let cts = json::decode_cotangent(&result_ty, &shapes, cj.input())?;
        let cargs: Vec<Option<Arg<'_>>> = cts.iter().map(|t| t.as_ref().map(Arg::Value)).collect();
        let r = f.vjp(&argv, &cargs)?;
        out.push_str(&encode_result(&result_ty, &r.value));
        out.push_str(", \"cotangent\": ");
        out.push_str(&encode_per_param(sig, r.cotangent.as_slice()));
    } else if a.mode.jacobian || a.mode.hessian {
        let (j, key) = if a.mode.hessian { (f.hessian(&argv)?, "hessian") } else { (f.jacobian(&argv)?, "jacobian") };
        out.push_str(&encode_result(&result_ty, &j.value));
        out.push_str(&format!(", \"{key}\": ["));
        for r in 0..j.rows {
            if r > 0 {
                out.push_str(", ");
            }
            out.push('[');
            for (c, x) in j.row(r).iter().enumerate() {
                if c > 0 {
                    out.push_str(", ");
                }
                out.push_str(&encode_f64(*x));
            }
            out.push(']');
        }
        out.push(']');
    } else {
        let value = f.call(&argv)?;
        out.push_str(&encode_result(&result_ty, &value));
    }
    out.push_str("}\n");
    // The process ends after printing: the system takes back the module's
    // IR and code at once (freeing them piece by piece took a third of a
    // second after the gradient of a 100,000-let chain).
    drop(f);
    std::mem::forget(module);
    Ok(out)
}

// ----------------------------------------------------------------------------
// build
// ----------------------------------------------------------------------------

fn build_command(a: BuildArgs) -> Result<String, Error> {
    let backend = match backend(a.backend, "--backend llvm")? {
        Backend::Interp => {
            return Err(Error::Usage("--backend interp cannot build a shared library (use --backend cranelift)".into()))
        }
        b => b.codegen().unwrap_or_default(),
    };
    let module_name = match &a.name {
        Some(n) => n.clone(),
        None => default_module_name(&a.output)?,
    };
    if module_name.is_empty() {
        return Err(Error::Usage("--name: the module name must not be empty".into()));
    }
    let header = a.header.clone().unwrap_or_else(|| a.output.with_extension("h"));
    if same_file(&header, &a.output) {
        return Err(Error::Usage(format!(
            "the header and the library would both be written to {}; use --header",
            header.display()
        )));
    }
    for (what, out) in [("the library (-o)", &a.output), ("the header (--header)", &header)] {
        if same_file(out, &a.file) {
            return Err(Error::Usage(format!(
                "{what} would overwrite the source file {}; choose another output path",
                a.file.display()
            )));
        }
    }
    let (name, source) = driver::read_source(&a.file)?;
    let program = std::sync::Arc::new(driver::load(&name, &source)?);
    let ids: Vec<FuncId> = match &a.export {
        None => program.definitions().collect(),
        Some(names) => {
            let mut ids = Vec::new();
            for n in names {
                let id = driver::find(&program, n)?;
                if ids.contains(&id) {
                    return Err(Error::Usage(format!("--export lists `{n}` twice")));
                }
                ids.push(id);
            }
            ids
        }
    };
    if ids.is_empty() {
        return Err(Error::Usage(format!("{name} has no definition to export")));
    }
    driver::check_wrt(&program, Some(&ids), a.wrt.as_deref())?;
    check_c_names(&program, &ids, &module_name)?;
    // Every export fits, and all of them together, before any is derived.
    let keep_calls_above = a.codegen.keep_calls_above.unwrap_or(arrayad_ir::passes::inline::KEEP_CALLS_ABOVE);
    let kept = driver::kept_calls(&program, &ids, keep_calls_above);
    // The derivatives keep the large calls too (but for the reverse mode
    // of a definition running reverse mode inside, whose export checks its
    // size inlined: `driver::keeps_calls`).
    driver::check_sizes(&program, &ids, &kept)?;
    let request = driver::ExportRequest {
        wrt: a.wrt.as_deref(),
        entries: a.entries.as_deref(),
        opts: a.codegen.ad(),
        kept: &kept,
    };
    use arrayad_codegen::Entry;
    // Without --export, a definition that can have none of the entries
    // asked for (`--entries grad` of an array-valued one) is left out.
    let no_entry = |id: FuncId| {
        let scalar = program.func(id).signature.result == SrcType::Scalar(Scalar::F64);
        a.export.is_none()
            && !scalar
            && a.entries.as_ref().is_some_and(|es| es.iter().all(|e| matches!(e, Entry::Grad | Entry::Hvp)))
    };
    // Derived on one big-stack thread for all exports, not one per step.
    let derive_exports = || {
        ids.iter()
            .filter(|&&id| !no_entry(id))
            .map(|&id| {
                let f = program.func(id);
                let f64_result = f.signature.result == SrcType::Scalar(Scalar::F64);
                // `f_grad` and `f_hvp` exist where the result is one f64; an
                // export left with no entry at all is an error.
                if let Some(es) = &a.entries {
                    if !f64_result && es.iter().all(|e| matches!(e, Entry::Grad | Entry::Hvp)) && a.export.is_some() {
                        let asked = es.iter().map(|e| e.name()).collect::<Vec<_>>().join(",");
                        let (name, result) = (&f.name, &f.signature.result);
                        return Err(Error::Usage(format!(
                            "--entries {asked}: `{name}` returns {result}, not one f64, so it would have no entry \
                             (add value, jvp, vjp or jacobian, or leave it out of --export)"
                        )));
                    }
                }
                let (export, warnings) = driver::export(&program, id, &request)?;
                for w in warnings {
                    eprintln!("{w}");
                }
                Ok(export)
            })
            .collect::<Result<Vec<_>, Error>>()
    };
    let exports = arrayad_ir::timing::time("derive the exports", || driver::compiling(derive_exports))?;
    if exports.is_empty() {
        return Err(Error::Usage(format!("{name}: no definition can have the entries of --entries")));
    }
    let funcs: Vec<&arrayad_ir::Function> = exports
        .iter()
        .flat_map(|e| {
            [Some(&e.primal), e.jvp.as_ref(), e.vjp.as_ref(), e.vjp_rows.as_ref(), e.jvp_lanes.as_ref(), e.hvp.as_ref()]
        })
        .flatten()
        .collect();
    let called = arrayad_ir::timing::time("the called definitions", || {
        driver::called_definitions(&program, &funcs, &kept, a.codegen.ad())
    })?;
    let opts = LinkOptions { backend, target: a.codegen.target(a.target.clone()), cc: a.cc.clone() };
    let called = arrayad_codegen::Called { program: program.clone(), funcs: called };
    arrayad_codegen::build_shared_library_calling(&name, &exports, &called, &module_name, &a.output, &header, &opts)?;
    // The process ends after the build: the system takes back the IR of
    // every export and called definition at once, where freeing it piece
    // by piece took a second for 10,000 definitions.
    std::mem::forget((exports, called, program));
    Ok(String::new())
}

/// True when `a` and `b` name the same file: the same path, or (when both
/// exist, through links) the same inode.
fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => {
            // `a` may not exist yet: compare its canonical directory and name.
            let canon = |p: &Path| -> Option<PathBuf> {
                let dir = match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
            };
            matches!((canon(a), canon(b)), (Some(x), Some(y)) if x == y)
        }
    }
}

/// OUT's file stem without a leading `lib`: `libgmm.so` -> `gmm`.
fn default_module_name(out: &Path) -> Result<String, Error> {
    let stem = out
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| Error::Usage(format!("cannot derive a module name from {}; use --name", out.display())))?;
    let name = stem.strip_prefix("lib").filter(|s| !s.is_empty()).unwrap_or(stem);
    Ok(name.to_string())
}

/// Rejects exports whose C symbols would collide (a definition `f_jvp`
/// next to the jvp of `f`, or `MODULE_last_error`).
fn check_c_names(program: &Program, ids: &[FuncId], module: &str) -> Result<(), Error> {
    let mut symbols: std::collections::HashMap<String, String> = [
        ("last_error", "the last-error function"),
        ("release_memory", "the function that releases memory"),
        ("num_threads", "the function that tells the number of threads"),
        ("set_num_threads", "the function that sets the number of threads"),
    ]
    .into_iter()
    .map(|(f, what)| (format!("{module}_{f}"), what.to_string()))
    .collect();
    for &id in ids {
        let f = program.func(id);
        let mut names = vec![
            (f.name.clone(), format!("`{}`", f.name)),
            (format!("{}_jvp", f.name), format!("the jvp of `{}`", f.name)),
            (format!("{}_vjp", f.name), format!("the vjp of `{}`", f.name)),
            (format!("{}_jacobian", f.name), format!("the Jacobian of `{}`", f.name)),
        ];
        if f.signature.result == SrcType::Scalar(Scalar::F64) {
            names.push((format!("{}_grad", f.name), format!("the gradient of `{}`", f.name)));
        }
        for (sym, what) in names {
            if let Some(other) = symbols.get(&sym) {
                return Err(Error::Usage(format!(
                    "the C symbol `{sym}` would name both {other} and {what}; export fewer definitions \
                     (--export) or choose another module name (--name)"
                )));
            }
            symbols.insert(sym, what);
        }
    }
    Ok(())
}

// ----------------------------------------------------------------------------
// emit
// ----------------------------------------------------------------------------

fn emit_command(a: EmitArgs) -> Result<String, Error> {
    if a.stage == Stage::Llvm {
        backend(BackendArg::Llvm, "--stage llvm")?;
    }
    let (name, source) = driver::read_source(&a.file)?;
    if a.stage == Stage::Ast {
        let ast = arrayad_frontend::parse(&name, &source)?;
        return Ok(match &a.function {
            None => format!("{ast:#?}\n"),
            Some(f) => {
                let def = ast
                    .defs
                    .iter()
                    .find(|d| d.name.name == *f)
                    .ok_or_else(|| Error::Usage(format!("no definition `{f}` in {name}")))?;
                format!("{def:#?}\n")
            }
        });
    }
    let program = driver::load(&name, &source)?;
    let defs: Vec<FuncId> = match &a.function {
        Some(f) => vec![driver::find(&program, f)?],
        None => program.definitions().collect(),
    };
    driver::check_wrt(&program, Some(&defs), a.wrt.as_deref())?;
    // Without `--function`, the parts of huge definitions too
    // (`passes::outline`).
    let parts = program.parts().filter(|_| a.function.is_none());
    let ids: Vec<FuncId> = defs.iter().copied().chain(parts).collect();
    let wrt = a.wrt.as_deref();
    // The IR stages show the code `build` compiles: the calls of the
    // definitions it keeps stay calls.
    let keep_calls_above = a.codegen.keep_calls_above.unwrap_or(arrayad_ir::passes::inline::KEEP_CALLS_ABOVE);
    let kept = driver::kept_calls(&program, &ids, keep_calls_above);
    let mut out = String::new();
    for (n, &id) in ids.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let f = program.func(id);
        let active = arrayad_ad::active_leaves(&f.signature, wrt);
        let primals = driver::Primals::new(&program, id, &kept)?;
        let code = primals.code();
        let derive = |which| primals.derive_one(&program, &active, a.codegen.ad(), which);
        let print = |f: &arrayad_ir::Function| print_function(f, Some(&program));
        match a.stage {
            Stage::Ir => out.push_str(&print(code)),
            Stage::Jvp => out.push_str(&print(&derive(Which::Jvp)?)),
            Stage::Vjp => out.push_str(&print(&derive(Which::Vjp)?)),
            Stage::VjpRows => out.push_str(&print(&derive(Which::VjpRows)?)),
            Stage::JvpLanes => out.push_str(&print(&derive(Which::JvpLanes)?)),
            Stage::Delta => {
                // The Delta and backend stages inline every call.
                let lin = arrayad_ad::linearize(primals.inlined(&program)?, &active).map_err(Error::from)?;
                let mut ids: Vec<_> = lin.linear.iter().copied().collect();
                ids.sort();
                let linear: Vec<String> = ids.iter().map(|v| format!("{}%{}", lin.func.var(*v).name, v.0)).collect();
                out.push_str(&format!("// linear (Delta) variables: {}\n", linear.join(", ")));
                out.push_str(&print_function(&lin.func, None));
            }
            Stage::Clif | Stage::Llvm => {
                let primal = primals.inlined(&program)?.clone();
                let mut d = driver::derive(&program, id, &primal, &active, a.codegen.ad(), &[Which::Jvp, Which::Vjp])?;
                let (jvp, vjp) = (d.take(Which::Jvp), d.take(Which::Vjp));
                let funcs: Vec<arrayad_ir::Function> = [Some(primal), jvp, vjp].into_iter().flatten().collect();
                let cg = if a.stage == Stage::Clif { CodegenBackend::Cranelift } else { CodegenBackend::Llvm };
                let none = arrayad_codegen::Callees::none();
                let jit = JitModule::compile_keeping_ir(cg, &a.codegen.target(None), &name, &funcs, &none)?;
                for (k, func) in funcs.iter().enumerate() {
                    if k > 0 {
                        out.push('\n');
                    }
                    out.push_str(&format!("; {}\n", func.name));
                    match jit.backend_ir(&func.name) {
                        Some(text) => out.push_str(&text),
                        None => out.push_str("; (no IR recorded)\n"),
                    }
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                }
            }
            Stage::Ast => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names() {
        assert_eq!(default_module_name(Path::new("out/libgmm.so")).unwrap(), "gmm");
        assert_eq!(default_module_name(Path::new("quick.so")).unwrap(), "quick");
        assert_eq!(default_module_name(Path::new("lib.so")).unwrap(), "lib");
    }

    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
