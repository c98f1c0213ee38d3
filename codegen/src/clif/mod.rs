//! The Cranelift backend: [`ClifEmitter`] implements the lowering's
//! [`Emitter`] over a `cranelift_frontend::FunctionBuilder`; this module
//! also compiles whole sets of IR functions into a Cranelift module, for
//! the JIT (`jit.rs`) or an object file (`object.rs`).

mod imports;
pub(crate) mod jit;
pub(crate) mod object;

use crate::error::CodegenError;
use crate::lower::emit::{Conv, Emitter, FloatCC, FloatOp, FloatUnary, IntCC, IntOp, Mem, Ty};
use crate::lower::{self, Result};
use crate::target::{parse_triple, TargetOptions};
use arrayad_ir::timing::time;
use arrayad_ir::Scalar;
use arrayad_runtime::Callee;
use cranelift_codegen::ir::{
    self as clif, condcodes, types, AbiParam, FuncRef, InstBuilder, MemFlagsData, UserFuncName, Value,
};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_module::{DataId, FuncId, Linkage, Module};
use imports::Imports;
use std::collections::HashMap;

/// The Cranelift backend ([`crate::backend::CodegenBackend`]).
pub(crate) struct Cranelift;

impl crate::backend::CodegenBackend for Cranelift {
    fn compile_jit(
        &self,
        _options: &TargetOptions,
        file: &str,
        funcs: &[&arrayad_ir::Function],
        callees: &crate::Callees,
        keep_ir: bool,
    ) -> std::result::Result<(crate::backend::JitCode, crate::backend::Entries), CodegenError> {
        // Cranelift compiles for the host's features whatever CPU is named.
        let (code, entries) = jit::compile(file, funcs, callees, keep_ir)?;
        Ok((Box::new(code), entries))
    }

    fn compile_object(
        &self,
        options: &TargetOptions,
        file: &str,
        funcs: &[(String, &arrayad_ir::Function)],
        callees: &crate::Callees,
    ) -> std::result::Result<Vec<Vec<u8>>, CodegenError> {
        Ok(vec![object::compile_object(options, file, funcs, callees)?])
    }
}

/// The ISA for `target` (the host's when it names none; `opt_level=none`,
/// see below); `pic` for shared-library objects.
pub(crate) fn isa(target: &TargetOptions, pic: bool) -> Result<OwnedTargetIsa> {
    isa_with(target, pic, false)
}

/// Functions with more IR statements than this (at every depth) are
/// compiled with Cranelift's single-pass register allocator: the
/// backtracking one took most of the time and memory of compiling a
/// function of 100,000 statements (a long chain of `let`s and its
/// derivatives), and such a function is straight-line code that the
/// choice hardly slows. Every loop body of a usual program is far smaller.
pub(crate) const LARGE_FUNCTION: usize = 20_000;

/// [`isa`], with the single-pass register allocator when `fast_regalloc`.
fn isa_with(target: &TargetOptions, pic: bool, fast_regalloc: bool) -> Result<OwnedTargetIsa> {
    let mut fb = settings::builder();
    let set = |fb: &mut settings::Builder, k: &str, v: &str| {
        fb.set(k, v).map_err(|e| CodegenError::Target(format!("setting {k}={v}: {e}")))
    };
    // Measured on the ADBench GMM (d=20, K=50): Cranelift's e-graph
    // optimiser (`speed`) sinks address arithmetic of loop-invariant views
    // into inner loops, which made the primal 19% and the gradient 33% slower
    // than `none`. The IR reaching codegen is already simplified, CSE'd and
    // fused, so `none` loses nothing measurable.
    set(&mut fb, "opt_level", "none")?;
    if fast_regalloc {
        set(&mut fb, "regalloc_algorithm", "single_pass")?;
    }
    set(&mut fb, "is_pic", if pic { "true" } else { "false" })?;
    set(&mut fb, "use_colocated_libcalls", "false")?;
    set(&mut fb, "enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })?;
    // Frames larger than a page touch every page on the way down, so a
    // large frame on a small thread stack hits the guard page (a fault)
    // instead of silently writing below the stack.
    set(&mut fb, "enable_probestack", "true")?;
    set(&mut fb, "probestack_strategy", "inline")?;
    let flags = settings::Flags::new(fb);
    let isa = match &target.triple {
        Some(t) if target.is_cross() => {
            let triple = parse_triple(t)?;
            cranelift_codegen::isa::lookup(triple)
                .map_err(|e| CodegenError::Target(format!("Cranelift cannot compile for `{t}`: {e}")))?
                .finish(flags)
                .map_err(|e| CodegenError::Target(e.to_string()))?
        }
        // A CPU named for another machine (`--target-cpu generic` for a
        // portable library): Cranelift cannot select features by LLVM CPU
        // names, so it compiles for the architecture's baseline rather
        // than this machine's features.
        _ if target.cpu.as_deref().is_some_and(|c| c != "native") => {
            cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
                .map_err(|e| CodegenError::Target(e.to_string()))?
                .finish(flags)
                .map_err(|e| CodegenError::Target(e.to_string()))?
        }
        _ => cranelift_native::builder()
            .map_err(|e| CodegenError::Target(e.to_string()))?
            .finish(flags)
            .map_err(|e| CodegenError::Target(e.to_string()))?,
    };
    if isa.pointer_bits() != 64 {
        return Err(CodegenError::Target("only 64-bit targets are supported".into()));
    }
    Ok(isa)
}

/// One compiled function: its id in the module and, when kept
/// (`define_functions`' `keep_ir`), its Cranelift IR as generated (before
/// Cranelift's own passes).
pub(crate) struct Defined {
    pub id: FuncId,
    pub clif: Option<clif::Function>,
}

/// The Cranelift signature of every generated function:
/// `(ctx, args, results) -> status`.
fn internal_signature<M: Module>(m: &M) -> clif::Signature {
    let mut sig = m.make_signature();
    sig.params.extend([AbiParam::new(types::I64), AbiParam::new(types::I64), AbiParam::new(types::I64)]);
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

/// Declares and defines `funcs` (symbol name, linkage, IR) in `m`, built
/// for `target` (`pic` as `m`'s ISA). With `keep_ir`, each [`Defined`]
/// holds the Cranelift IR of its function.
///
/// This thread lowers the functions one after the other, largest first
/// (the lowering declares imports in `m`), while up to
/// [`arrayad_ir::stack::threads`] threads, this one included, compile them
/// with Cranelift; the code is defined in `m` in the order lowered, so the
/// output does not depend on the threads.
pub(crate) fn define_functions<M: Module>(
    m: &mut M,
    file: &str,
    funcs: &[(String, Linkage, &arrayad_ir::Function)],
    target: &TargetOptions,
    pic: bool,
    keep_ir: bool,
    callees: &crate::Callees,
) -> Result<Vec<Defined>> {
    let sig = internal_signature(m);
    let mut ids = Vec::new();
    for (sym, linkage, f) in funcs {
        if m.get_name(sym).is_some() {
            return Err(CodegenError::malformed(&f.name, format!("duplicate symbol `{sym}`")));
        }
        ids.push(m.declare_function(sym, *linkage, &sig)?);
    }
    // Functions of very many statements, and straight-line scalar ones,
    // are compiled with the single-pass allocator. A straight-line
    // function's code runs once per call and its values live across calls
    // of the runtime or of other functions, so the backtracking allocator
    // saves little on it, while it took most of the compile time of a
    // library of many small definitions (`bench/scaling.sh --shapes
    // helpers`).
    let sizes: Vec<usize> = funcs.iter().map(|(_, _, f)| crate::lower::ir_size(f)).collect();
    let single_pass: Vec<bool> =
        funcs.iter().zip(&sizes).map(|((_, _, f), &n)| n > LARGE_FUNCTION || f.is_straight_line_scalar()).collect();
    let isas = Isas {
        usual: isa_with(target, pic, false)?,
        fast: if single_pass.contains(&true) { Some(isa_with(target, pic, true)?) } else { None },
    };
    // The largest functions first, so that the last one compiled is a
    // small one: the order of the code in the output depends on the
    // functions only.
    let mut order: Vec<usize> = (0..funcs.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(sizes[k]));
    let mut definer = Definer {
        m,
        file,
        sig,
        imports: Imports::calling(callees.clone()),
        fbc: FunctionBuilderContext::new(),
        ctx: cranelift_codegen::Context::new(),
        ready: HashMap::new(),
        defined: (0..funcs.len()).map(|_| None).collect(),
        guarded: Vec::new(),
        kept_ir: vec![None; funcs.len()],
        next: 0,
        order: &order,
        funcs,
        ids: &ids,
        single_pass: &single_pass,
        isas: &isas,
    };
    let lower_one = |d: &mut Definer<'_, '_, M>, k: usize| -> Result<clif::Function> {
        let f = d.funcs[k].2;
        let func = d.lower(d.ids[k], |e| lower::lower_function(e, file, f, callees))?;
        d.kept_ir[k] = keep_ir.then(|| func.clone());
        Ok(func)
    };
    let threads = arrayad_ir::stack::threads().min(funcs.len());
    if threads <= 1 {
        for &k in &order {
            let func = lower_one(&mut definer, k)?;
            definer.compile_here(k, func);
            definer.define_ready()?;
        }
        return definer.finish();
    }
    // This thread compiles too, whenever the others are busy.
    let jobs = JobQueue::default();
    let (done_tx, done) = std::sync::mpsc::channel::<(usize, std::thread::Result<Result<Compiled>>)>();
    let mut panicked = None;
    let status = std::thread::scope(|s| {
        for _ in 1..threads {
            let done_tx = done_tx.clone();
            let (jobs, isas, single_pass) = (&jobs, &isas, &single_pass);
            let work = move || {
                let mut ctx = cranelift_codegen::Context::new();
                while let Some((k, func)) = jobs.take() {
                    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        compile_function(&mut ctx, isas, single_pass[k], func, &funcs[k].2.name)
                    }));
                    if code.is_err() {
                        // A context a panic left half-way is not reused.
                        ctx = cranelift_codegen::Context::new();
                    }
                    if done_tx.send((k, code)).is_err() {
                        break;
                    }
                }
            };
            // A thread that cannot be started leaves its jobs to this one.
            let _ = std::thread::Builder::new()
                .name("arrayad-cranelift".into())
                .stack_size(arrayad_ir::stack::COMPILER_STACK)
                .spawn_scoped(s, work);
        }
        drop(done_tx);
        // The compiling threads end once the queue is closed and empty,
        // however this thread leaves the scope (a panic included).
        let closing = CloseOnDrop(&jobs);
        let mut receive = |definer: &mut Definer<'_, '_, M>, (k, code): (usize, std::thread::Result<_>)| match code {
            Ok(code) => {
                definer.ready.insert(k, code);
            }
            Err(payload) => {
                panicked.get_or_insert(payload);
            }
        };
        let mut lowered = || -> Result<()> {
            for &k in &order {
                let func = lower_one(&mut definer, k)?;
                // With the other threads busy, this one compiles the job
                // waiting (the larger) and queues the new one.
                if let Some((k, func)) = jobs.put((k, func)) {
                    definer.compile_here(k, func);
                }
                while let Ok(done) = done.try_recv() {
                    receive(&mut definer, done);
                }
                definer.define_ready()?;
            }
            Ok(())
        };
        let status = lowered();
        drop(closing);
        // This thread takes its part of what is left, then defines every
        // function compiled: the first error in the order of definition
        // is the one reported, as with one thread.
        while let Some((k, func)) = jobs.take_now() {
            definer.compile_here(k, func);
        }
        for done in done.iter() {
            receive(&mut definer, done);
        }
        definer.define_ready()?;
        status
    });
    if let Some(payload) = panicked {
        std::panic::resume_unwind(payload);
    }
    status?;
    definer.finish()
}

/// A function compiled by Cranelift: its code, relocations (against the
/// function's own id), alignment and stack frame in bytes.
struct Compiled {
    code: Vec<u8>,
    relocs: Vec<cranelift_module::ModuleReloc>,
    alignment: u64,
    frame: u32,
}

/// Closes the queue when dropped.
struct CloseOnDrop<'a>(&'a JobQueue);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The functions lowered and waiting to be compiled (at most one), for
/// the threads of [`define_functions`].
#[derive(Default)]
struct JobQueue {
    /// The waiting function (its index and Cranelift IR) and whether the
    /// queue is closed.
    state: std::sync::Mutex<(Option<(usize, clif::Function)>, bool)>,
    changed: std::sync::Condvar,
}

impl JobQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<(usize, clif::Function)>, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job`; returns the job that was waiting, if any, for the
    /// caller to compile.
    fn put(&self, job: (usize, clif::Function)) -> Option<(usize, clif::Function)> {
        let waiting = self.lock().0.replace(job);
        self.changed.notify_one();
        waiting
    }

    /// The waiting job, once there is one; `None` once the queue is closed
    /// and empty.
    fn take(&self) -> Option<(usize, clif::Function)> {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.0.take() {
                return Some(job);
            }
            if state.1 {
                return None;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The waiting job, if any.
    fn take_now(&self) -> Option<(usize, clif::Function)> {
        self.lock().0.take()
    }

    /// No more jobs will come: the threads waiting end.
    fn close(&self) {
        self.lock().1 = true;
        self.changed.notify_all();
    }
}

/// The ISAs functions are compiled for: `fast` (the single-pass register
/// allocator) for functions of more than [`LARGE_FUNCTION`] statements and
/// straight-line scalar ones ([`straight_line`]).
struct Isas {
    usual: OwnedTargetIsa,
    fast: Option<OwnedTargetIsa>,
}

/// Compiles `func` (with the fast ISA when `single_pass`), on any thread,
/// in `ctx` (one per thread: Cranelift reuses its analyses' and register
/// allocator's memory from one function to the next); its relocations
/// are against `func`'s own name.
fn compile_function(
    ctx: &mut cranelift_codegen::Context,
    isas: &Isas,
    single_pass: bool,
    func: clif::Function,
    name: &str,
) -> Result<Compiled> {
    let isa = match (&isas.fast, single_pass) {
        (Some(fast), true) => fast.as_ref(),
        _ => isas.usual.as_ref(),
    };
    ctx.clear();
    ctx.func = func;
    compile(ctx, isa, name)?;
    let Some(code) = ctx.compiled_code() else {
        return Err(CodegenError::Cranelift(format!("compiling `{name}`: no code")));
    };
    let UserFuncName::User(own) = &ctx.func.name else {
        return Err(CodegenError::Cranelift(format!("compiling `{name}`: a function without an id")));
    };
    let id = FuncId::from_u32(own.index);
    Ok(Compiled {
        code: code.buffer.data().to_vec(),
        relocs: code
            .buffer
            .relocs()
            .iter()
            .map(|r| cranelift_module::ModuleReloc::from_mach_reloc(r, &ctx.func, id))
            .collect(),
        alignment: u64::from(code.buffer.alignment),
        frame: code.buffer.frame_layout().map_or(0, |l| l.frame_to_fp_offset),
    })
}

/// The state of [`define_functions`] on the thread that owns the module:
/// it lowers functions, and defines compiled code in the order lowered.
struct Definer<'m, 'a, M: Module> {
    m: &'m mut M,
    file: &'a str,
    sig: clif::Signature,
    imports: Imports,
    fbc: FunctionBuilderContext,
    /// The Cranelift context of the functions this thread compiles.
    ctx: cranelift_codegen::Context,
    /// Compiled functions not yet defined, by index.
    ready: HashMap<usize, Result<Compiled>>,
    /// The functions defined, by index.
    defined: Vec<Option<Defined>>,
    /// Functions whose frame needs a guard, in order, defined last
    /// ([`Self::finish`]): what they declare in the module then does not
    /// depend on when their compilation ended.
    guarded: Vec<(usize, Compiled)>,
    /// The Cranelift IR of each function as lowered, when kept.
    kept_ir: Vec<Option<clif::Function>>,
    /// The order in which functions are lowered and defined (indices),
    /// and the position in it of the next one to define.
    order: &'a [usize],
    next: usize,
    funcs: &'a [(String, Linkage, &'a arrayad_ir::Function)],
    ids: &'a [FuncId],
    /// Whether each function is compiled with the fast ISA.
    single_pass: &'a [bool],
    isas: &'a Isas,
}

impl<M: Module> Definer<'_, '_, M> {
    /// A new Cranelift function named for `id`, emitted by `emit`.
    fn lower(
        &mut self,
        id: FuncId,
        emit: impl FnOnce(&mut ClifEmitter<'_, '_, M>) -> Result<()>,
    ) -> Result<clif::Function> {
        let mut func = clif::Function::with_name_signature(UserFuncName::user(0, id.as_u32()), self.sig.clone());
        let mut e = ClifEmitter::new(self.m, &mut self.imports, &mut func, &mut self.fbc);
        time("lower to Cranelift IR", || emit(&mut e))?;
        e.finish();
        Ok(func)
    }

    /// Compiles function `k` on this thread, to be defined in its turn.
    fn compile_here(&mut self, k: usize, func: clif::Function) {
        let code = compile_function(&mut self.ctx, self.isas, self.single_pass[k], func, &self.funcs[k].2.name);
        self.ready.insert(k, code);
    }

    /// Defines the compiled functions that come next in order (those whose
    /// frame needs a guard are kept for [`Self::finish`]).
    fn define_ready(&mut self) -> Result<()> {
        while let Some(&k) = self.order.get(self.next) {
            let Some(code) = self.ready.remove(&k) else { break };
            self.next += 1;
            let code = code?;
            let id = self.ids[k];
            if code.frame <= GUARDED_FRAME {
                self.define(id, &code, &self.funcs[k].2.name)?;
            } else {
                self.guarded.push((k, code));
            }
            self.defined[k] = Some(Defined { id, clif: self.kept_ir[k].take() });
        }
        Ok(())
    }

    /// Defines `id` as `code`.
    fn define(&mut self, id: FuncId, code: &Compiled, name: &str) -> Result<()> {
        self.m
            .define_function_bytes(id, code.alignment, &code.code, &code.relocs)
            .map_err(|e| CodegenError::Cranelift(format!("compiling `{name}`: {e:?}")))
    }

    /// Defines the functions whose frame needs a guard: each one's code
    /// under a local name, and a guard under its own name that checks the
    /// frame against the stack ([`lower::lower_frame_guard`]). Returns
    /// every function defined, in the order of the functions.
    fn finish(mut self) -> Result<Vec<Defined>> {
        for (k, mut code) in std::mem::take(&mut self.guarded) {
            let ((sym, _, f), id) = (&self.funcs[k], self.ids[k]);
            let body = self.m.declare_function(&format!("{sym}.body"), Linkage::Local, &self.sig)?;
            for r in &mut code.relocs {
                if let cranelift_module::ModuleRelocTarget::FunctionOffset(own, _) = &mut r.name {
                    if *own == id {
                        *own = body;
                    }
                }
            }
            self.define(body, &code, &f.name)?;
            let file = self.file;
            let guard = self.lower(id, |e| {
                lower::lower_frame_guard(e, file, f, u64::from(code.frame), FRAME_SLACK, |e, params| {
                    e.call_id(body, &params)
                        .ok_or_else(|| CodegenError::Cranelift(format!("the call of `{sym}.body` has no result")))
                })
            })?;
            let guard = compile_function(&mut self.ctx, self.isas, false, guard, &f.name)?;
            self.define(id, &guard, &f.name)?;
        }
        self.defined
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| CodegenError::Cranelift("a compiling thread ended early".into()))
    }
}

/// Compiled code whose frame is larger than this many bytes is called
/// through a guard ([`lower::lower_frame_guard`]); smaller frames fit in
/// the 64 KiB that the stack limit keeps above the bottom of the thread's
/// stack where that is known (and in the 1 MiB below the caller's frame
/// that generated code may use elsewhere).
const GUARDED_FRAME: u32 = 32 << 10;

/// What a guarded function needs beyond its frame: the return address and
/// saved frame pointer, the guard's own frame, and the runtime functions
/// it calls (which the margin below the limit holds as well).
const FRAME_SLACK: u64 = 4 << 10;

/// Compiles the function in `ctx` with `isa`, keeping the code in `ctx`.
fn compile(
    ctx: &mut cranelift_codegen::Context,
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    name: &str,
) -> Result<()> {
    let mut ctrl = cranelift_codegen::control::ControlPlane::default();
    match time("Cranelift", || ctx.compile(isa, &mut ctrl)) {
        Ok(_) => Ok(()),
        Err(e) => {
            let msg = cranelift_codegen::print_errors::pretty_error(e.func, e.inner);
            Err(CodegenError::Cranelift(format!("compiling `{name}`: {msg}")))
        }
    }
}

/// The Cranelift type of a value type.
fn clif_ty(t: Ty) -> clif::Type {
    match t {
        Ty::Bool => types::I8,
        Ty::I32 => types::I32,
        Ty::I64 | Ty::Ptr => types::I64,
        Ty::F64 => types::F64,
    }
}

/// The lowering's emitter over a Cranelift function builder.
pub(crate) struct ClifEmitter<'a, 'b, M: Module> {
    m: &'a mut M,
    imp: &'a mut Imports,
    b: FunctionBuilder<'b>,
    frefs: HashMap<FuncId, FuncRef>,
    msgs: HashMap<DataId, clif::GlobalValue>,
    params: [Value; 3],
    /// Variables whose scope has ended, by type, to declare again: the SSA
    /// builder keeps a table as long as the blocks of the function for
    /// every variable, so a variable per loop, push or IR variable would
    /// make that quadratic in the size of the function.
    free_vars: HashMap<types::Type, Vec<Variable>>,
    /// The type of every variable declared, by index.
    var_types: Vec<types::Type>,
}

impl<'a, 'b, M: Module> ClifEmitter<'a, 'b, M> {
    /// An emitter positioned in the entry block of `func` (whose signature
    /// is the internal one).
    fn new(
        m: &'a mut M,
        imp: &'a mut Imports,
        func: &'b mut clif::Function,
        fbc: &'b mut FunctionBuilderContext,
    ) -> Self {
        let mut b = FunctionBuilder::new(func, fbc);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let p = b.block_params(entry).to_vec();
        ClifEmitter {
            m,
            imp,
            b,
            frefs: HashMap::new(),
            msgs: HashMap::new(),
            params: [p[0], p[1], p[2]],
            free_vars: HashMap::new(),
            var_types: Vec::new(),
        }
    }

    /// The reference to function `id` in this function.
    fn fref(&mut self, id: FuncId) -> FuncRef {
        match self.frefs.get(&id) {
            Some(r) => *r,
            None => {
                let r = self.m.declare_func_in_func(id, self.b.func);
                self.frefs.insert(id, r);
                r
            }
        }
    }

    /// A call of function `id` of the module; returns its result (`None`
    /// for a function without one).
    fn call_id(&mut self, id: FuncId, args: &[Value]) -> Option<Value> {
        let fref = self.fref(id);
        let inst = self.b.ins().call(fref, args);
        self.b.inst_results(inst).first().copied()
    }

    /// Seals every block and finishes the function.
    fn finish(mut self) {
        self.b.seal_all_blocks();
        let cfg = self.m.target_config();
        self.b.finalize(cfg);
    }
}

fn flags(_mem: Mem) -> MemFlagsData {
    MemFlagsData::trusted()
}

impl<M: Module> ClifEmitter<'_, '_, M> {
    /// A variable of Cranelift type `t`, reusing a released one of that
    /// type when there is one.
    fn declare_clif_var(&mut self, t: clif::Type) -> Variable {
        if let Some(v) = self.free_vars.get_mut(&t).and_then(Vec::pop) {
            return v;
        }
        let v = self.b.declare_var(t);
        let i = cranelift_codegen::entity::EntityRef::index(v);
        if self.var_types.len() <= i {
            self.var_types.resize(i + 1, types::INVALID);
        }
        self.var_types[i] = t;
        v
    }
}

impl<M: Module> Emitter for ClifEmitter<'_, '_, M> {
    type Value = Value;
    type Block = clif::Block;
    type Var = Variable;
    type Slot = clif::StackSlot;

    fn params(&self) -> [Value; 3] {
        self.params
    }

    fn iconst(&mut self, ty: Ty, x: i64) -> Value {
        self.b.ins().iconst(clif_ty(ty), x)
    }

    fn fconst(&mut self, x: f64) -> Value {
        self.b.ins().f64const(x)
    }

    fn int(&mut self, op: IntOp, a: Value, b: Value) -> Value {
        let i = self.b.ins();
        match op {
            IntOp::Add => i.iadd(a, b),
            IntOp::Sub => i.isub(a, b),
            IntOp::Mul => i.imul(a, b),
            IntOp::SDiv => i.sdiv(a, b),
            IntOp::SRem => i.srem(a, b),
            IntOp::And => i.band(a, b),
            IntOp::Or => i.bor(a, b),
            IntOp::Xor => i.bxor(a, b),
            IntOp::SMin => i.smin(a, b),
            IntOp::SMax => i.smax(a, b),
            IntOp::Shl => i.ishl(a, b),
            IntOp::UShr => i.ushr(a, b),
            IntOp::SShr => i.sshr(a, b),
        }
    }

    fn umul_overflow(&mut self, a: Value, b: Value) -> (Value, Value) {
        self.b.ins().umul_overflow(a, b)
    }

    fn icmp(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        use condcodes::IntCC as C;
        let cc = match cc {
            IntCC::Eq => C::Equal,
            IntCC::Ne => C::NotEqual,
            IntCC::Slt => C::SignedLessThan,
            IntCC::Sle => C::SignedLessThanOrEqual,
            IntCC::Sgt => C::SignedGreaterThan,
            IntCC::Sge => C::SignedGreaterThanOrEqual,
            IntCC::Ult => C::UnsignedLessThan,
            IntCC::Ule => C::UnsignedLessThanOrEqual,
            IntCC::Uge => C::UnsignedGreaterThanOrEqual,
        };
        self.b.ins().icmp(cc, a, b)
    }

    fn float(&mut self, op: FloatOp, a: Value, b: Value) -> Value {
        let i = self.b.ins();
        match op {
            FloatOp::Add => i.fadd(a, b),
            FloatOp::Sub => i.fsub(a, b),
            FloatOp::Mul => i.fmul(a, b),
            FloatOp::Div => i.fdiv(a, b),
        }
    }

    fn float_unary(&mut self, op: FloatUnary, a: Value) -> Value {
        let i = self.b.ins();
        match op {
            FloatUnary::Neg => i.fneg(a),
            FloatUnary::Abs => i.fabs(a),
            FloatUnary::Sqrt => i.sqrt(a),
            FloatUnary::Floor => i.floor(a),
            FloatUnary::Ceil => i.ceil(a),
        }
    }

    fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        use condcodes::FloatCC as C;
        let cc = match cc {
            FloatCC::Eq => C::Equal,
            FloatCC::Ne => C::NotEqual,
            FloatCC::Lt => C::LessThan,
            FloatCC::Le => C::LessThanOrEqual,
            FloatCC::Gt => C::GreaterThan,
            FloatCC::Ge => C::GreaterThanOrEqual,
            FloatCC::Uno => C::Unordered,
        };
        self.b.ins().fcmp(cc, a, b)
    }

    fn select(&mut self, c: Value, a: Value, b: Value) -> Value {
        // A pair of lane masks (a pair `fcmp`) selects lane by lane.
        if self.b.func.dfg.value_type(c).is_vector() {
            let ty = self.b.func.dfg.value_type(a);
            let mask = self.b.ins().bitcast(ty, MemFlagsData::new(), c);
            return self.b.ins().bitselect(mask, a, b);
        }
        self.b.ins().select(c, a, b)
    }

    fn convert(&mut self, conv: Conv, a: Value) -> Value {
        let pair = self.b.func.dfg.value_type(a).is_vector();
        let i = self.b.ins();
        match conv {
            Conv::I64ToF64 => i.fcvt_from_sint(types::F64, a),
            Conv::F64ToI64Sat => i.fcvt_to_sint_sat(types::I64, a),
            Conv::BoolToI64 => i.uextend(types::I64, a),
            Conv::I64ToBool => i.icmp_imm_s(condcodes::IntCC::NotEqual, a, 0),
            // Lane by lane on pairs.
            Conv::F64Bits if pair => i.bitcast(types::I64X2, MemFlagsData::new(), a),
            Conv::BitsF64 if pair => i.bitcast(types::F64X2, MemFlagsData::new(), a),
            Conv::F64Bits => i.bitcast(types::I64, MemFlagsData::new(), a),
            Conv::BitsF64 => i.bitcast(types::F64, MemFlagsData::new(), a),
        }
    }

    fn load(&mut self, ty: Ty, addr: Value, offset: i32, mem: Mem) -> Value {
        self.b.ins().load(clif_ty(ty), flags(mem), addr, offset)
    }

    fn store(&mut self, _ty: Ty, v: Value, addr: Value, offset: i32, mem: Mem) {
        self.b.ins().store(flags(mem), v, addr, offset);
    }

    fn elem_addr(&mut self, base: Value, index: Value, elem: Scalar) -> Value {
        // A shift rather than a multiply: the x64 backend folds
        // `base + (index << 3)` into one scaled addressing mode.
        let off = match lower::elem_size(elem) {
            8 => self.b.ins().ishl_imm_u(index, 3),
            1 => index,
            n => self.b.ins().imul_imm_s(index, n),
        };
        self.b.ins().iadd(base, off)
    }

    fn ptr_offset(&mut self, base: Value, bytes: Value) -> Value {
        self.b.ins().iadd(base, bytes)
    }

    fn ptr_diff(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().isub(a, b)
    }

    fn stack_slot(&mut self, bytes: u32) -> Value {
        let ss = self.b.create_sized_stack_slot(clif::StackSlotData::new(clif::StackSlotKind::ExplicitSlot, bytes, 3));
        self.b.ins().stack_addr(types::I64, ss, 0)
    }

    fn create_block(&mut self) -> clif::Block {
        self.b.create_block()
    }

    fn switch_to(&mut self, b: clif::Block) {
        self.b.switch_to_block(b);
    }

    fn jump(&mut self, b: clif::Block) {
        self.b.ins().jump(b, &[]);
    }

    fn brif(&mut self, c: Value, then_: clif::Block, else_: clif::Block) {
        self.b.ins().brif(c, then_, &[], else_, &[]);
    }

    fn seal(&mut self, b: clif::Block) {
        self.b.seal_block(b);
    }

    fn set_cold(&mut self, b: clif::Block) {
        self.b.set_cold_block(b);
    }

    fn ret(&mut self, status: Value) {
        self.b.ins().return_(&[status]);
    }

    fn declare_var(&mut self, ty: Ty) -> Variable {
        self.declare_clif_var(clif_ty(ty))
    }

    fn slot(&mut self) -> clif::StackSlot {
        self.b.create_sized_stack_slot(clif::StackSlotData::new(clif::StackSlotKind::ExplicitSlot, 8, 3))
    }

    fn slot_store(&mut self, _ty: Ty, v: Value, s: clif::StackSlot) {
        self.b.ins().stack_store(types::I64, v, s, 0);
    }

    fn slot_load(&mut self, ty: Ty, s: clif::StackSlot) -> Value {
        self.b.ins().stack_load(types::I64, clif_ty(ty), s, 0)
    }

    fn release_var(&mut self, var: Variable) {
        if let Some(t) = self.var_types.get(cranelift_codegen::entity::EntityRef::index(var)) {
            self.free_vars.entry(*t).or_default().push(var);
        }
    }

    fn def_var(&mut self, var: Variable, v: Value) {
        self.b.def_var(var, v);
    }

    fn f64_pairs(&self) -> bool {
        true
    }

    fn declare_pair_var(&mut self) -> Variable {
        self.declare_clif_var(types::F64X2)
    }

    fn load_pair(&mut self, addr: Value) -> Value {
        // Not `aligned` (the pair is aligned to 8 bytes only), so no SSE
        // instruction that needs 16 is folded with it.
        self.b.ins().load(types::F64X2, MemFlagsData::new().with_notrap(), addr, 0)
    }

    fn store_pair(&mut self, v: Value, addr: Value) {
        self.b.ins().store(MemFlagsData::new().with_notrap(), v, addr, 0);
    }

    fn splat_pair(&mut self, x: Value) -> Value {
        self.b.ins().splat(types::F64X2, x)
    }

    fn splat_int_pair(&mut self, x: Value) -> Value {
        self.b.ins().splat(types::I64X2, x)
    }

    fn const_pair(&mut self, x: f64) -> Value {
        // One load from the constant pool (a splat of a constant is built
        // in registers, three instructions, where it is used).
        let c = self.b.func.dfg.constants.insert([x.to_le_bytes(), x.to_le_bytes()].concat().into());
        self.b.ins().vconst(types::F64X2, c)
    }

    fn const_int_pair(&mut self, x: i64) -> Value {
        let c = self.b.func.dfg.constants.insert([x.to_le_bytes(), x.to_le_bytes()].concat().into());
        self.b.ins().vconst(types::I64X2, c)
    }

    fn pair_lane(&mut self, pair: Value, lane: u8) -> Value {
        self.b.ins().extractlane(pair, lane)
    }

    fn use_var(&mut self, var: Variable) -> Value {
        self.b.use_var(var)
    }

    fn call(&mut self, callee: Callee, args: &[Value]) -> Result<Value> {
        let id = self.imp.func(self.m, callee)?;
        self.call_id(id, args)
            .ok_or_else(|| CodegenError::Cranelift(format!("the call of `{}` has no result", callee.symbol())))
    }

    fn call_function(&mut self, func: arrayad_ir::FuncId, args: [Value; 3]) -> Result<Value> {
        let sig = internal_signature(self.m);
        let inst = match self.imp.generated(self.m, func, &sig)? {
            imports::Generated::Func(id) => {
                let fref = self.fref(id);
                self.b.ins().call(fref, &args)
            }
            imports::Generated::Address(a) => {
                let sigref = self.b.import_signature(sig);
                let callee = self.b.ins().iconst(types::I64, a as i64);
                self.b.ins().call_indirect(sigref, callee, &args)
            }
        };
        self.b
            .inst_results(inst)
            .first()
            .copied()
            .ok_or_else(|| CodegenError::Cranelift(format!("the call of definition {} has no result", func.0)))
    }

    fn function_address(&mut self, func: arrayad_ir::FuncId) -> Result<Value> {
        let sig = internal_signature(self.m);
        Ok(match self.imp.generated(self.m, func, &sig)? {
            imports::Generated::Func(id) => {
                let fref = self.fref(id);
                self.b.ins().func_addr(types::I64, fref)
            }
            imports::Generated::Address(a) => self.b.ins().iconst(types::I64, a as i64),
        })
    }

    fn message(&mut self, text: &str) -> Result<Value> {
        let id = self.imp.message(self.m, text)?;
        let gv = match self.msgs.get(&id) {
            Some(g) => *g,
            None => {
                let g = self.m.declare_data_in_func(id, self.b.func);
                // In the JIT (not PIC) a module's data is mapped apart from
                // its code, possibly more than 2 GiB away: address it
                // absolutely (an 8-byte relocation), not PC-relative (a
                // 4-byte one, whose overflow panicked in cranelift-jit).
                if !self.m.isa().flags().is_pic() {
                    if let clif::GlobalValueData::Symbol { colocated, .. } = &mut self.b.func.global_values[g] {
                        *colocated = false;
                    }
                }
                self.msgs.insert(id, g);
                g
            }
        };
        Ok(self.b.ins().symbol_value(types::I64, gv))
    }
}
