//! JIT compilation of IR functions (Cranelift, or LLVM with the `llvm`
//! feature) and calls with [`Value`]s.

use crate::calls::Callees;
use crate::error::CodegenError;
use crate::target::{Backend, TargetOptions};
use arrayad_ir::{ArrayData, ArrayValue, ErrorKind, RuntimeError, Scalar, Type, Value};
use arrayad_runtime::{Ctx, OwnedCtx};
use smallvec::SmallVec;

/// The machine-code signature of every compiled function.
type RawFn = unsafe extern "C" fn(*mut Ctx, *const u64, *mut u64) -> i32;

struct JitFunction {
    code: RawFn,
    params: Vec<Type>,
    results: Vec<Type>,
    /// The backend's IR of the function (Cranelift IR as generated, or
    /// optimised LLVM IR), kept by [`JitModule::compile_keeping_ir`] only.
    text: Option<String>,
}

/// Functions compiled to machine code in this process, callable by name.
///
/// The code is immutable once compiled; every call gets its own context
/// (arena, tape, error), so a module can be shared between threads.
pub struct JitModule {
    // Dropped after `funcs`: the code the function pointers point to.
    // (Looked up by name linearly: a module holds a few functions, and
    // comparing a short name beats hashing it on every call.)
    funcs: Vec<(String, JitFunction)>,
    _code: crate::backend::JitCode,
    backend: Backend,
    /// The most bytes of arena and tape a call may hold (None: the
    /// runtime's default, [`OwnedCtx::default_limit`]).
    max_memory: Option<u64>,
    /// Each call flushes subnormal numbers to zero
    /// ([`TargetOptions::flush_subnormals`]).
    flush_subnormals: bool,
}

// SAFETY: after compilation the code is never mutated again; the module
// only owns the executable memory (freed on drop) and read-only tables.
// Calls share nothing but that read-only code and data.
unsafe impl Send for JitModule {}
// SAFETY: as above; `&JitModule` only reads.
unsafe impl Sync for JitModule {}

impl std::fmt::Debug for JitModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.funcs.iter().map(|(n, _)| n).collect();
        names.sort();
        f.debug_struct("JitModule").field("backend", &self.backend).field("functions", &names).finish()
    }
}

impl JitModule {
    /// Compiles functions (verified, without `Expr::Call`) into executable
    /// code with Cranelift. `file` is the source file name used in error
    /// messages.
    pub fn compile(file: &str, funcs: &[arrayad_ir::Function]) -> Result<JitModule, CodegenError> {
        JitModule::compile_with(Backend::Cranelift, &TargetOptions::host(), file, funcs)
    }

    /// Compiles functions with `backend` for this machine (`options.cpu`
    /// and `options.fast_math` apply to LLVM; a `triple` other than the
    /// host's is an error: JIT code runs here).
    ///
    /// Errors: [`CodegenError::Target`] for another machine or a backend
    /// this build lacks; [`CodegenError::Malformed`] for two functions of
    /// one name; the backend's errors.
    pub fn compile_with(
        backend: Backend,
        options: &TargetOptions,
        file: &str,
        funcs: &[arrayad_ir::Function],
    ) -> Result<JitModule, CodegenError> {
        JitModule::compile_calling(backend, options, file, funcs, &Callees::none())
    }

    /// [`Self::compile_with`] for functions that call definitions kept as
    /// calls (`Expr::Call`), each at its address in `callees`
    /// ([`crate::CallTarget::Address`]: JIT code compiled before, which the
    /// caller keeps alive as long as this module).
    ///
    /// Errors: as [`Self::compile_with`]; [`CodegenError::Malformed`] for a
    /// call of a definition `callees` lacks.
    pub fn compile_calling(
        backend: Backend,
        options: &TargetOptions,
        file: &str,
        funcs: &[arrayad_ir::Function],
        callees: &Callees,
    ) -> Result<JitModule, CodegenError> {
        JitModule::compile_inner(backend, options, file, funcs, callees, false)
    }

    /// [`Self::compile_calling`], keeping each function's backend IR for
    /// [`Self::backend_ir`] (the other constructors keep none: formatting
    /// it costs about as much as Cranelift's compilation).
    ///
    /// Errors: as [`Self::compile_calling`].
    pub fn compile_keeping_ir(
        backend: Backend,
        options: &TargetOptions,
        file: &str,
        funcs: &[arrayad_ir::Function],
        callees: &Callees,
    ) -> Result<JitModule, CodegenError> {
        JitModule::compile_inner(backend, options, file, funcs, callees, true)
    }

    fn compile_inner(
        backend: Backend,
        options: &TargetOptions,
        file: &str,
        funcs: &[arrayad_ir::Function],
        callees: &Callees,
        keep_ir: bool,
    ) -> Result<JitModule, CodegenError> {
        if options.is_cross() {
            return Err(CodegenError::Target(format!(
                "JIT code runs on this machine; `{}` is another one (build a shared library for it instead)",
                options.triple.as_deref().unwrap_or_default()
            )));
        }
        let mut names = std::collections::HashSet::new();
        for f in funcs {
            if !names.insert(f.name.as_str()) {
                return Err(CodegenError::Malformed {
                    func: f.name.clone(),
                    message: "two functions with this name".into(),
                });
            }
        }
        let generator = crate::backend::generator(backend)?;
        // Parallel maps: their chunk functions first, which the functions
        // call at their addresses (`crate::parallel`).
        let refs: Vec<&arrayad_ir::Function> = funcs.iter().collect();
        let (split, chunks) = crate::schedule::schedule(&refs, callees, backend);
        let mut callees = callees.clone();
        let mut chunk_texts: Vec<Vec<String>> = vec![Vec::new(); funcs.len()];
        let chunk_code = if chunks.is_empty() {
            None
        } else {
            let mut chunk_callees = callees.clone();
            chunks.iter().for_each(|c| chunk_callees.mark_chunk(c));
            let chunk_funcs: Vec<&arrayad_ir::Function> = chunks.iter().map(|c| &c.func).collect();
            let (code, entries) = generator.compile_jit(options, file, &chunk_funcs, &chunk_callees, keep_ir)?;
            for (c, (ptr, text)) in chunks.iter().zip(entries) {
                if ptr.is_null() {
                    return Err(CodegenError::Malformed {
                        func: c.func.name.clone(),
                        message: "no code was produced".into(),
                    });
                }
                callees.insert_chunk(c, crate::CallTarget::Address(ptr as usize));
                chunk_texts[c.host].extend(text);
            }
            Some(code)
        };
        let hosts: Vec<&arrayad_ir::Function> = split.iter().zip(funcs).map(|(s, f)| s.as_ref().unwrap_or(f)).collect();
        let (code, compiled) = generator.compile_jit(options, file, &hosts, &callees, keep_ir)?;
        let code: crate::backend::JitCode = Box::new((code, chunk_code));
        let mut map = Vec::with_capacity(funcs.len());
        for ((f, (ptr, text)), chunk_text) in funcs.iter().zip(compiled).zip(chunk_texts) {
            // A function's IR, then that of its chunk functions.
            let text = text.map(|t| std::iter::once(t).chain(chunk_text).collect::<Vec<_>>().join("\n"));
            if ptr.is_null() {
                return Err(CodegenError::Malformed { func: f.name.clone(), message: "no code was produced".into() });
            }
            // SAFETY: the function was compiled with the internal signature.
            let code = unsafe { std::mem::transmute::<*const u8, RawFn>(ptr) };
            map.push((
                f.name.clone(),
                JitFunction { code, params: f.param_types(), results: f.result_types.clone(), text },
            ));
        }
        Ok(JitModule { funcs: map, _code: code, backend, max_memory: None, flush_subnormals: options.flush_subnormals })
    }

    /// Sets the most bytes of arena and tape memory one call may hold; a
    /// call that would need more fails with an out-of-memory error naming
    /// the allocating statement. `None` restores the default: the
    /// environment variable `ARRAYAD_MAX_MEMORY` (bytes, or with a suffix
    /// K, M, G or T), else half of the physical memory.
    pub fn set_max_memory(&mut self, bytes: Option<u64>) {
        self.max_memory = bytes;
    }

    fn get(&self, name: &str) -> Option<&JitFunction> {
        self.funcs.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    /// The entry address of the compiled function `name` (internal calling
    /// convention), for the calls of modules compiled after this one
    /// ([`Self::compile_calling`]); valid as long as this module lives.
    pub fn entry_address(&self, name: &str) -> Option<usize> {
        self.get(name).map(|f| f.code as usize)
    }

    /// The backend that compiled the module.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The names of the compiled functions.
    pub fn functions(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.funcs.iter().map(|(n, _)| n.as_str()).collect();
        v.sort();
        v
    }

    /// The backend IR of a compiled function: Cranelift IR as generated
    /// (before Cranelift's passes), or LLVM IR after optimisation; `None`
    /// for a name the module lacks, or a module compiled without
    /// [`Self::compile_keeping_ir`].
    pub fn backend_ir(&self, name: &str) -> Option<String> {
        self.get(name).and_then(|f| f.text.clone())
    }

    /// Calls a compiled function with one value per IR parameter. Checks the
    /// number of arguments, their types and data lengths (InvalidArgument),
    /// runs the code and copies the results into owned values.
    pub fn call(&self, name: &str, args: &[Value]) -> Result<Vec<Value>, RuntimeError> {
        let (out, ctx) = self.call_in(name, args, take_ctx());
        give_back_ctx(ctx);
        out
    }

    /// [`JitModule::call`], also returning the bytes of memory the call
    /// held at its peak: arena chunks and tape capacity (everything
    /// generated code allocates; chunks are kept until the call returns,
    /// so what the context holds afterwards is the peak).
    pub fn call_with_memory(&self, name: &str, args: &[Value]) -> (Result<Vec<Value>, RuntimeError>, u64) {
        // A fresh context: what it holds afterwards is what this call used.
        let (out, ctx) = self.call_in(name, args, OwnedCtx::new());
        (out, ctx.capacity())
    }

    /// Calls `name` with the context `ctx`, which it gives back.
    fn call_in(&self, name: &str, args: &[Value], mut ctx: OwnedCtx) -> (Result<Vec<Value>, RuntimeError>, OwnedCtx) {
        static DEFAULT_LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        ctx.set_limit(self.max_memory.unwrap_or_else(|| *DEFAULT_LIMIT.get_or_init(OwnedCtx::default_limit)));
        let f = match self
            .get(name)
            .ok_or_else(|| RuntimeError::new(ErrorKind::InvalidArgument, format!("no compiled function `{name}`")))
        {
            Ok(f) => f,
            Err(e) => return (Err(e), ctx),
        };
        let slots = match pack_args(name, &f.params, args) {
            Ok(s) => s,
            Err(e) => return (Err(e), ctx),
        };
        let mut results = vec![0u64; f.results.iter().map(|t| crate::lower::slots(*t)).sum()];
        ctx.set_stack_limit_here();
        let flushed = self.flush_subnormals.then(arrayad_runtime::SubnormalsFlushed::new);
        // SAFETY: `slots` describes live argument memory borrowed from `args`
        // for the duration of the call (checked lengths), `results` has one
        // slot per result slot, and the code follows the internal convention.
        let status = unsafe { (f.code)(ctx.as_ptr(), slots.as_ptr(), results.as_mut_ptr()) };
        drop(flushed);
        let out = if status != 0 {
            Err(RuntimeError {
                kind: ErrorKind::from_code(status).unwrap_or(ErrorKind::InvalidArgument),
                message: ctx.error_message(),
            })
        } else {
            // SAFETY: the results point into the ctx arena (alive until the
            // context is reset, after this) or into the arguments.
            unsafe { unpack_results(name, &f.results, &results) }
        };
        (out, ctx)
    }

    /// Calls a compiled function on borrowed arguments (no copy: arrays are
    /// passed as pointers into the caller's slices) and gives `f` its
    /// results, borrowed from the call's memory (valid only inside `f`).
    /// Checks the number of arguments, their types and that each array's
    /// data has the length its shape says (InvalidArgument).
    ///
    /// Errors: the call's run-time error, or InvalidArgument.
    pub fn call_with<R>(
        &self,
        name: &str,
        args: &[ArgRef<'_>],
        f: impl FnOnce(&[ResultRef<'_>]) -> R,
    ) -> Result<R, RuntimeError> {
        // SAFETY: no destinations.
        unsafe { self.call_with_dest(name, args, &[], f) }
    }

    /// [`JitModule::call_with`], offering the caller's buffers as the
    /// memory of the array results (destination passing: a result the
    /// function allocates itself is then computed there, and its
    /// [`ResultRef`] points into the buffer). `dest` has one entry per
    /// result, in order (another length offers nothing); a buffer is
    /// offered only to an array result of its element type.
    ///
    /// # Safety
    ///
    /// Each buffer must be valid for writes of its size for the duration of
    /// the call and overlap no argument and no other buffer.
    pub unsafe fn call_with_dest<R>(
        &self,
        name: &str,
        args: &[ArgRef<'_>],
        dest: &[Option<Dest>],
        f: impl FnOnce(&[ResultRef<'_>]) -> R,
    ) -> Result<R, RuntimeError> {
        let func = self
            .get(name)
            .ok_or_else(|| RuntimeError::new(ErrorKind::InvalidArgument, format!("no compiled function `{name}`")))?;
        let mut slots: SmallVec<[u64; 32]> = SmallVec::new();
        pack_refs(name, &func.params, args, &mut slots)?;
        let n_results: usize = func.results.iter().map(|t| crate::lower::slots(*t)).sum();
        let mut results: SmallVec<[u64; 32]> = smallvec::smallvec![0u64; n_results];
        let mut ctx = take_ctx();
        static DEFAULT_LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        ctx.set_limit(self.max_memory.unwrap_or_else(|| *DEFAULT_LIMIT.get_or_init(OwnedCtx::default_limit)));
        // The context's table: for result `i`, a pointer and a byte count.
        let mut table: SmallVec<[u64; 16]> = SmallVec::new();
        if !dest.is_empty() && dest.len() == func.results.len() {
            for (t, d) in func.results.iter().zip(dest) {
                match d {
                    Some(d) if t.is_array() && t.elem == d.elem => table.extend([d.ptr as u64, d.bytes as u64]),
                    _ => table.extend([0, 0]),
                }
            }
            ctx.set_dest(table.as_ptr());
        }
        ctx.set_stack_limit_here();
        let flushed = self.flush_subnormals.then(arrayad_runtime::SubnormalsFlushed::new);
        // SAFETY: `slots` describes live argument memory borrowed from `args`
        // for the duration of the call (lengths checked against the shapes),
        // `results` has one slot per result slot, the buffers of `dest` are
        // the caller's to offer, and the code follows the internal
        // convention.
        let status = unsafe { (func.code)(ctx.as_ptr(), slots.as_ptr(), results.as_mut_ptr()) };
        drop(flushed);
        ctx.set_dest(std::ptr::null());
        let out = if status != 0 {
            Err(RuntimeError {
                kind: ErrorKind::from_code(status).unwrap_or(ErrorKind::InvalidArgument),
                message: ctx.error_message(),
            })
        } else {
            // SAFETY: the result slots point into the context's arena (alive
            // until it is given back, after `f`), into the arguments or into
            // the buffers of `dest`.
            unsafe { result_refs(name, &func.results, &results) }.map(|refs| f(&refs))
        };
        give_back_ctx(ctx);
        out
    }

    /// The parameter types of a compiled function.
    pub fn param_types(&self, name: &str) -> Option<&[Type]> {
        self.get(name).map(|f| f.params.as_slice())
    }

    /// The result types of a compiled function.
    pub fn result_types(&self, name: &str) -> Option<&[Type]> {
        self.get(name).map(|f| f.results.as_slice())
    }
}

/// A caller's buffer offered to [`JitModule::call_with_dest`] as the
/// memory of an array result: its address, its size in bytes and its
/// element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    /// The first byte of the buffer.
    pub ptr: *mut u8,
    /// Its size in bytes.
    pub bytes: usize,
    /// The type of its elements.
    pub elem: Scalar,
}

/// A borrowed argument of [`JitModule::call_with`]: a scalar, or an
/// array's elements (row-major, contiguous) and extents.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgRef<'a> {
    F64(f64),
    I64(i64),
    Bool(bool),
    F64s { data: &'a [f64], shape: &'a [usize] },
    I64s { data: &'a [i64], shape: &'a [usize] },
    Bools { data: &'a [bool], shape: &'a [usize] },
}

impl<'a> ArgRef<'a> {
    /// The argument of a value (borrowing its elements).
    pub fn of(v: &'a Value) -> ArgRef<'a> {
        match v {
            Value::F64(x) => ArgRef::F64(*x),
            Value::I64(x) => ArgRef::I64(*x),
            Value::Bool(x) => ArgRef::Bool(*x),
            Value::Array(a) => match &a.data {
                ArrayData::F64(d) => ArgRef::F64s { data: d, shape: &a.shape },
                ArrayData::I64(d) => ArgRef::I64s { data: d, shape: &a.shape },
                ArrayData::Bool(d) => ArgRef::Bools { data: d, shape: &a.shape },
            },
        }
    }

    /// The IR type of the argument.
    pub fn ty(&self) -> Type {
        match self {
            ArgRef::F64(_) => Type::F64,
            ArgRef::I64(_) => Type::I64,
            ArgRef::Bool(_) => Type::BOOL,
            ArgRef::F64s { shape, .. } => Type::array(Scalar::F64, rank(shape)),
            ArgRef::I64s { shape, .. } => Type::array(Scalar::I64, rank(shape)),
            ArgRef::Bools { shape, .. } => Type::array(Scalar::Bool, rank(shape)),
        }
    }

    /// The extents (empty for a scalar).
    pub fn shape(&self) -> &'a [usize] {
        match self {
            ArgRef::F64(_) | ArgRef::I64(_) | ArgRef::Bool(_) => &[],
            ArgRef::F64s { shape, .. } | ArgRef::I64s { shape, .. } | ArgRef::Bools { shape, .. } => shape,
        }
    }
}

fn rank(shape: &[usize]) -> u8 {
    u8::try_from(shape.len()).unwrap_or(u8::MAX)
}

/// A result of [`JitModule::call_with`], borrowed from the call's memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResultRef<'a> {
    F64(f64),
    I64(i64),
    Bool(bool),
    F64s { data: &'a [f64], shape: &'a [usize] },
    I64s { data: &'a [i64], shape: &'a [usize] },
    Bools { data: &'a [bool], shape: &'a [usize] },
}

impl ResultRef<'_> {
    /// A copy of the result as a value.
    pub fn to_value(&self) -> Value {
        let arr = |shape: &[usize], data: ArrayData| Value::Array(ArrayValue { shape: shape.to_vec(), data });
        match *self {
            ResultRef::F64(x) => Value::F64(x),
            ResultRef::I64(x) => Value::I64(x),
            ResultRef::Bool(x) => Value::Bool(x),
            ResultRef::F64s { data, shape } => arr(shape, ArrayData::F64(data.to_vec())),
            ResultRef::I64s { data, shape } => arr(shape, ArrayData::I64(data.to_vec())),
            ResultRef::Bools { data, shape } => arr(shape, ArrayData::Bool(data.to_vec())),
        }
    }

    /// The extents (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        match self {
            ResultRef::F64(_) | ResultRef::I64(_) | ResultRef::Bool(_) => &[],
            ResultRef::F64s { shape, .. } | ResultRef::I64s { shape, .. } | ResultRef::Bools { shape, .. } => shape,
        }
    }

    /// The `f64` elements: the scalar, or the array's.
    pub fn f64s(&self) -> Option<&[f64]> {
        match self {
            ResultRef::F64(x) => Some(std::slice::from_ref(x)),
            ResultRef::F64s { data, .. } => Some(data),
            _ => None,
        }
    }
}

/// The argument slots of borrowed arguments (after checking them).
fn pack_refs(
    name: &str,
    params: &[Type],
    args: &[ArgRef<'_>],
    slots: &mut SmallVec<[u64; 32]>,
) -> Result<(), RuntimeError> {
    if args.len() != params.len() {
        return Err(invalid(format!("`{name}` takes {} arguments, got {}", params.len(), args.len())));
    }
    for (k, (a, t)) in args.iter().zip(params).enumerate() {
        if a.ty() != *t {
            return Err(invalid(format!("argument {k} of `{name}`: expected {t}, got {}", a.ty())));
        }
        let (ptr, len, shape) = match a {
            ArgRef::F64(x) => {
                slots.push(x.to_bits());
                continue;
            }
            ArgRef::I64(x) => {
                slots.push(*x as u64);
                continue;
            }
            ArgRef::Bool(x) => {
                slots.push(*x as u64);
                continue;
            }
            ArgRef::F64s { data, shape } => (data.as_ptr() as u64, data.len(), *shape),
            ArgRef::I64s { data, shape } => (data.as_ptr() as u64, data.len(), *shape),
            ArgRef::Bools { data, shape } => (data.as_ptr() as u64, data.len(), *shape),
        };
        let count = shape.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d));
        if count != Some(len) || shape.iter().any(|d| *d > i64::MAX as usize) {
            return Err(invalid(format!("argument {k} of `{name}`: shape {shape:?} does not match {len} elements")));
        }
        slots.push(ptr);
        slots.extend(shape.iter().map(|d| *d as u64));
    }
    Ok(())
}

/// The results in their slots, borrowed.
///
/// # Safety
/// Array slots must describe live memory of the given shapes (non-negative
/// extents, as generated code makes them).
unsafe fn result_refs<'a>(name: &str, types: &[Type], slots: &'a [u64]) -> Result<Vec<ResultRef<'a>>, RuntimeError> {
    const _: () = assert!(std::mem::size_of::<usize>() == std::mem::size_of::<u64>());
    let mut out = Vec::with_capacity(types.len());
    let mut k = 0;
    for t in types {
        let s = slots[k];
        if t.is_scalar() {
            out.push(match t.elem {
                Scalar::F64 => ResultRef::F64(f64::from_bits(s)),
                Scalar::I64 => ResultRef::I64(s as i64),
                Scalar::Bool => ResultRef::Bool(s != 0),
            });
            k += 1;
            continue;
        }
        let rank = t.rank as usize;
        let dims = &slots[k + 1..k + 1 + rank];
        k += 1 + rank;
        let mut count = 1usize;
        for &d in dims {
            let d = usize::try_from(d as i64)
                .map_err(|_| invalid(format!("`{name}` returned an array with a negative extent")))?;
            count = count
                .checked_mul(d)
                .ok_or_else(|| invalid(format!("`{name}` returned an array of impossible size")))?;
        }
        // SAFETY: usize and u64 have one size and alignment (asserted above)
        // and the extents were just checked non-negative.
        let shape: &'a [usize] = unsafe { std::slice::from_raw_parts(dims.as_ptr() as *const usize, rank) };
        let ptr = s as *const u8;
        // SAFETY: the caller guarantees `count` elements at `ptr` (or none).
        unsafe {
            out.push(match t.elem {
                Scalar::F64 => ResultRef::F64s { data: slice(ptr as *const f64, count), shape },
                Scalar::I64 => ResultRef::I64s { data: slice(ptr as *const i64, count), shape },
                Scalar::Bool => ResultRef::Bools { data: slice(ptr as *const bool, count), shape },
            });
        }
    }
    Ok(out)
}

/// `count` elements at `ptr`, or the empty slice (whatever `ptr` is) when
/// there are none.
///
/// # Safety
/// `count > 0` elements must be live at `ptr`.
unsafe fn slice<'a, T>(ptr: *const T, count: usize) -> &'a [T] {
    if count == 0 {
        &[]
    } else {
        // SAFETY: as the caller guarantees.
        unsafe { std::slice::from_raw_parts(ptr, count) }
    }
}

/// Contexts kept at most this large between calls of one thread
/// (`arrayad_runtime::OwnedCtx::keep_limit`, read once).
fn keep_ctx_bytes() -> u64 {
    static KEEP: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEEP.get_or_init(arrayad_runtime::OwnedCtx::keep_limit)
}

thread_local! {
    /// The context of the thread's previous call, reused (reset) so that
    /// calls do not map fresh arena and tape memory every time.
    static SPARE_CTX: std::cell::RefCell<Option<OwnedCtx>> = const { std::cell::RefCell::new(None) };
}

fn take_ctx() -> OwnedCtx {
    SPARE_CTX.try_with(|c| c.borrow_mut().take()).ok().flatten().unwrap_or_default()
}

fn give_back_ctx(mut ctx: OwnedCtx) {
    if ctx.capacity() <= keep_ctx_bytes() {
        ctx.reset();
        let _ = SPARE_CTX.try_with(|c| *c.borrow_mut() = Some(ctx));
    }
}

fn invalid(msg: String) -> RuntimeError {
    RuntimeError::new(ErrorKind::InvalidArgument, msg)
}

/// The argument slots of a call.
fn pack_args(name: &str, params: &[Type], args: &[Value]) -> Result<Vec<u64>, RuntimeError> {
    if args.len() != params.len() {
        return Err(invalid(format!("`{name}` takes {} arguments, got {}", params.len(), args.len())));
    }
    let mut slots = Vec::new();
    for (k, (a, t)) in args.iter().zip(params).enumerate() {
        if a.ty() != *t {
            return Err(invalid(format!("argument {k} of `{name}`: expected {t}, got {}", a.ty())));
        }
        match a {
            Value::F64(x) => slots.push(x.to_bits()),
            Value::I64(x) => slots.push(*x as u64),
            Value::Bool(x) => slots.push(*x as u64),
            Value::Array(av) => {
                let count = av.shape.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d));
                if count != Some(av.data.len()) || av.shape.iter().any(|d| *d > i64::MAX as usize) {
                    return Err(invalid(format!(
                        "argument {k} of `{name}`: shape {:?} does not match {} elements",
                        av.shape,
                        av.data.len()
                    )));
                }
                let ptr = match &av.data {
                    ArrayData::F64(v) => v.as_ptr() as u64,
                    ArrayData::I64(v) => v.as_ptr() as u64,
                    ArrayData::Bool(v) => v.as_ptr() as u64,
                };
                slots.push(ptr);
                slots.extend(av.shape.iter().map(|d| *d as u64));
            }
        }
    }
    Ok(slots)
}

/// Copies results out of their slots.
///
/// # Safety
/// Array slots must describe live memory of the given shapes.
unsafe fn unpack_results(name: &str, types: &[Type], slots: &[u64]) -> Result<Vec<Value>, RuntimeError> {
    let mut out = Vec::with_capacity(types.len());
    let mut k = 0;
    for t in types {
        let s = slots[k];
        if t.is_scalar() {
            out.push(match t.elem {
                Scalar::F64 => Value::F64(f64::from_bits(s)),
                Scalar::I64 => Value::I64(s as i64),
                Scalar::Bool => Value::Bool(s != 0),
            });
            k += 1;
            continue;
        }
        let rank = t.rank as usize;
        let dims = &slots[k + 1..k + 1 + rank];
        k += 1 + rank;
        let mut shape = Vec::with_capacity(rank);
        let mut count = 1usize;
        for &d in dims {
            let d = usize::try_from(d as i64)
                .map_err(|_| invalid(format!("`{name}` returned an array with a negative extent")))?;
            count = count
                .checked_mul(d)
                .ok_or_else(|| invalid(format!("`{name}` returned an array of impossible size")))?;
            shape.push(d);
        }
        let ptr = s as *const u8;
        let data = if count == 0 {
            match t.elem {
                Scalar::F64 => ArrayData::F64(Vec::new()),
                Scalar::I64 => ArrayData::I64(Vec::new()),
                Scalar::Bool => ArrayData::Bool(Vec::new()),
            }
        } else {
            // SAFETY: the caller guarantees `count` elements at `ptr`.
            unsafe {
                match t.elem {
                    Scalar::F64 => ArrayData::F64(std::slice::from_raw_parts(ptr as *const f64, count).to_vec()),
                    Scalar::I64 => ArrayData::I64(std::slice::from_raw_parts(ptr as *const i64, count).to_vec()),
                    Scalar::Bool => {
                        ArrayData::Bool(std::slice::from_raw_parts(ptr, count).iter().map(|b| *b != 0).collect())
                    }
                }
            }
        };
        out.push(Value::Array(ArrayValue { shape, data }));
    }
    Ok(out)
}
