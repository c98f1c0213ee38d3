//! The GradBench tool of arrayad: the protocol ([`Tool::handle`]), the
//! timing of evaluations ([`protocol::Runs`]) and the evals ([`evals`]),
//! each an `.arr` program (`tools/gradbench/evals/NAME.arr`) with a small
//! glue that maps the eval's input to the arguments of one definition and
//! its results to the eval's output.
//!
//! See `main.rs` for the command line; `run.sh` runs GradBench's own evals
//! against this tool.

pub mod evals;
pub mod protocol;

use arrayad::{Backend, Module, Options, Value};
use evals::{Eval, Outcome};
use protocol::{Message, Runs};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::time::Instant;

/// How the tool compiles.
#[derive(Clone, Debug)]
pub struct ToolOptions {
    /// Cranelift or LLVM.
    pub backend: Backend,
    /// Every call flushes subnormal numbers to zero on all its threads
    /// (arrayad's `--flush-subnormals`, as XLA's CPU threads compute for
    /// GradBench's `jax` tool); off by default, as GradBench's `manual`
    /// tool computes with IEEE arithmetic. The interpreter ignores it.
    pub flush_subnormals: bool,
}

impl ToolOptions {
    /// The options for a `--backend` argument (`None`: the fastest built
    /// in), with IEEE arithmetic.
    ///
    /// Errors: an unknown backend, or `llvm` in a build without it.
    pub fn new(backend: Option<&str>) -> Result<ToolOptions, String> {
        let backend = match backend {
            None if cfg!(feature = "llvm") => Backend::Llvm,
            None => Backend::Cranelift,
            Some("cranelift") => Backend::Cranelift,
            // The reference interpreter: slow, for checking the others.
            Some("interp") => Backend::Interp,
            Some("llvm") if cfg!(feature = "llvm") => Backend::Llvm,
            Some("llvm") => {
                return Err("this build has no LLVM backend: build with `--features llvm` (needs LLVM 19)".into())
            }
            Some(other) => return Err(format!("unknown backend `{other}` (cranelift, llvm or interp)")),
        };
        Ok(ToolOptions { backend, flush_subnormals: false })
    }

    /// These options, flushing subnormal numbers or not.
    pub fn with_flush_subnormals(self, flush_subnormals: bool) -> ToolOptions {
        ToolOptions { flush_subnormals, ..self }
    }

    fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Cranelift => "cranelift",
            Backend::Llvm => "llvm",
            Backend::Interp => "interp",
        }
    }
}

/// A defined module: the eval and its compiled program.
struct Defined {
    eval: &'static dyn Eval,
    module: Module,
}

/// The state of one protocol session: the modules defined so far.
pub struct Tool {
    options: ToolOptions,
    modules: HashMap<String, Defined>,
}

impl Tool {
    /// A tool with no module defined yet.
    pub fn new(options: ToolOptions) -> Tool {
        Tool { options, modules: HashMap::new() }
    }

    /// The response (one line of JSON) to one message line. Never fails:
    /// a message that cannot be read is answered with `"success": false`
    /// (and the `id` when it has one).
    pub fn handle(&mut self, line: &str) -> String {
        let response = match Message::parse(line) {
            Ok(m) => self.respond(m),
            Err((id, error)) => json!({ "id": id, "success": false, "error": error }),
        };
        response.to_string()
    }

    fn respond(&mut self, m: Message) -> Json {
        match m {
            Message::Start { id } => json!({
                "id": id,
                "tool": "arrayad",
                "config": {
                    "backend": self.options.backend_name(),
                    "flush_subnormals": self.options.flush_subnormals,
                    "version": env!("CARGO_PKG_VERSION"),
                },
            }),
            Message::Define { id, module } => self.define(id, &module),
            Message::Evaluate { id, module, function, input } => self.evaluate(id, &module, &function, &input),
            Message::Other { id } => json!({ "id": id }),
        }
    }

    /// Compiles the eval's program and the entry points its functions call.
    fn define(&mut self, id: Json, name: &str) -> Json {
        let Some(eval) = evals::find(name) else {
            let known: Vec<&str> = evals::ALL.iter().map(|e| e.module()).collect();
            return json!({
                "id": id,
                "success": false,
                "error": format!("arrayad has no implementation of the module `{name}` (it has: {})", known.join(", ")),
            });
        };
        let start = Instant::now();
        let compiled = compile(eval, &self.options);
        let ns = elapsed_ns(start);
        match compiled {
            Ok(module) => {
                self.modules.insert(name.to_string(), Defined { eval, module });
                json!({ "id": id, "success": true, "timings": [{ "name": "compile", "nanoseconds": ns }] })
            }
            Err(e) => json!({ "id": id, "success": false, "error": e }),
        }
    }

    fn evaluate(&mut self, id: Json, module: &str, function: &str, input: &Json) -> Json {
        let Some(d) = self.modules.get(module) else {
            return json!({
                "id": id,
                "success": false,
                "error": format!("the module `{module}` is not defined (send `define` first)"),
            });
        };
        match run(d, function, input) {
            Ok((output, timings)) => {
                let timings: Vec<Json> =
                    timings.into_iter().map(|ns| json!({ "name": "evaluate", "nanoseconds": ns })).collect();
                json!({ "id": id, "success": true, "output": output, "timings": timings })
            }
            Err(e) => json!({ "id": id, "success": false, "error": e }),
        }
    }
}

/// Compiles the program of `eval` and its entry points.
fn compile(eval: &dyn Eval, options: &ToolOptions) -> Result<Module, String> {
    let mut opts = Options::backend(options.backend).with_flush_subnormals(options.flush_subnormals);
    if let Some(wrt) = eval.wrt() {
        opts = opts.with_wrt(wrt);
    }
    let file = format!("{}.arr", eval.module());
    let module = Module::compile_with(&file, eval.source(), opts).map_err(|e| e.to_string())?;
    for (def, entry) in eval.entries() {
        module.function(def).and_then(|f| f.precompile(*entry)).map_err(|e| e.to_string())?;
    }
    Ok(module)
}

/// Runs `function` of a defined module on `input` as the protocol asks
/// (module docs of [`protocol::Runs`]): the output and one time per run,
/// in nanoseconds.
fn run(d: &Defined, function: &str, input: &Json) -> Result<(Json, Vec<u64>), String> {
    let call = d.eval.call(function, input)?;
    let runs = Runs::of(input)?;
    let f = d.module.function(call.def).map_err(|e| e.to_string())?;
    let args = match call.args {
        evals::Args::Values(v) => v,
        evals::Args::Json(j) => {
            arrayad::json::decode_args(call.def, f.signature(), &Json::Array(j)).map_err(|e| e.to_string())?
        }
    };
    let argv: Vec<arrayad::Arg<'_>> = args.iter().map(arrayad::Arg::Value).collect();
    let directions: Vec<Vec<Option<arrayad::Arg<'_>>>> =
        call.directions.iter().map(|d| d.iter().map(|t| t.as_ref().map(arrayad::Arg::Value)).collect()).collect();
    // A primal's results, and a gradient, go into buffers made before the
    // timed runs.
    let mut results = match call.entry {
        arrayad::Entry::Grad | arrayad::Entry::Jvp => Vec::new(),
        _ => result_buffers(&f, &argv)?,
    };
    let mut gradient = match call.entry {
        arrayad::Entry::Grad => gradient_buffers(&f, &args)?,
        _ => Vec::new(),
    };
    let mut timings = Vec::new();
    let mut total: u64 = 0;
    let mut outcome = None;
    while runs.more(timings.len(), total) {
        let start = Instant::now();
        let result = match call.entry {
            arrayad::Entry::Grad => {
                let mut buffers: Vec<&mut [f64]> = gradient.iter_mut().map(Vec::as_mut_slice).collect();
                f.grad_into(&argv, &mut buffers).map(|value| Outcome::Grad { value, gradient: Vec::new() })
            }
            arrayad::Entry::Jvp => f.jvp_many(&argv, &directions).map(Outcome::JvpMany),
            _ => f.call_into(&argv, &mut outs(&mut results)).map(|()| Outcome::Values(Vec::new())),
        };
        let ns = elapsed_ns(start);
        outcome = Some(result.map_err(|e| e.to_string())?);
        timings.push(ns);
        total = total.saturating_add(ns);
    }
    let outcome = match outcome.ok_or("no run was made")? {
        Outcome::Values(_) => Outcome::Values(results),
        Outcome::Grad { value, .. } => Outcome::Grad { value, gradient: gradient_values(&f, &args, gradient) },
        other => other,
    };
    let output = (call.output)(&outcome)?;
    Ok((output, timings))
}

/// Buffers for the results of a primal call of `f` on `args`, of the shapes
/// these arguments give, allocated and written once: the timed runs write
/// their results into them ([`arrayad::Function::call_into`]), as a program
/// calling repeatedly does, instead of allocating new result memory (which
/// the kernel zero-fills page by page) in every run.
///
/// Errors: the arguments' (as the call's), or memory for the results.
fn result_buffers(f: &arrayad::Function, args: &[arrayad::Arg<'_>]) -> Result<Vec<Value>, String> {
    use arrayad::{ArrayData, ArrayValue, Scalar};
    let shapes = f.result_shapes(args).map_err(|e| e.to_string())?;
    let leaves = f.signature().result.leaves();
    leaves
        .iter()
        .zip(shapes)
        .map(|(ty, shape)| {
            if ty.rank == 0 {
                return Ok(match ty.elem {
                    Scalar::F64 => Value::F64(0.0),
                    Scalar::I64 => Value::I64(0),
                    Scalar::Bool => Value::Bool(false),
                });
            }
            let len = shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d)).ok_or("a result is too large")?;
            let data = match ty.elem {
                Scalar::F64 => ArrayData::F64(filled(len, 0.0)?),
                Scalar::I64 => ArrayData::I64(filled(len, 0)?),
                Scalar::Bool => ArrayData::Bool(filled(len, false)?),
            };
            Ok(Value::Array(ArrayValue { shape, data }))
        })
        .collect()
}

/// Buffers for the gradient of `f` at `args`: one per active argument, of
/// its element count, written once.
///
/// Errors: memory for the gradient.
fn gradient_buffers(f: &arrayad::Function, args: &[Value]) -> Result<Vec<Vec<f64>>, String> {
    args.iter()
        .zip(f.active())
        .filter(|(_, active)| **active)
        .map(|(a, _)| match a {
            Value::Array(a) => filled(a.data.len(), 0.0),
            _ => filled(1, 0.0),
        })
        .collect()
}

/// The gradient in `buffers` ([`gradient_buffers`]) as values shaped as the
/// arguments, `None` for an inactive one.
fn gradient_values(f: &arrayad::Function, args: &[Value], buffers: Vec<Vec<f64>>) -> Vec<Option<Value>> {
    use arrayad::{ArrayData, ArrayValue};
    let mut buffers = buffers.into_iter();
    args.iter()
        .zip(f.active())
        .map(|(a, active)| {
            if !*active {
                return None;
            }
            let data = buffers.next()?;
            Some(match a {
                Value::Array(a) => Value::Array(ArrayValue { shape: a.shape.clone(), data: ArrayData::F64(data) }),
                _ => Value::F64(data.first().copied().unwrap_or(0.0)),
            })
        })
        .collect()
}

/// `len` copies of `x`, every element written.
fn filled<T: Copy>(len: usize, x: T) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| format!("cannot allocate a result of {len} elements"))?;
    v.resize(len, x);
    Ok(v)
}

/// The destinations of [`arrayad::Function::call_into`] in `values`.
fn outs(values: &mut [Value]) -> Vec<arrayad::Out<'_>> {
    use arrayad::{ArrayData, Out};
    values
        .iter_mut()
        .map(|v| match v {
            Value::F64(x) => Out::F64(x),
            Value::I64(x) => Out::I64(x),
            Value::Bool(x) => Out::Bool(x),
            Value::Array(a) => match &mut a.data {
                ArrayData::F64(d) => Out::F64s(d),
                ArrayData::I64(d) => Out::I64s(d),
                ArrayData::Bool(d) => Out::Bools(d),
            },
        })
        .collect()
}

fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
