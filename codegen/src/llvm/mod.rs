//! The LLVM backend (cargo feature `llvm`, LLVM 19 through inkwell):
//! [`LlvmEmitter`] implements the lowering's [`Emitter`] over an LLVM IR
//! builder; [`build_module`] lowers a set of IR functions into one LLVM
//! module, verifies it and optimises it at `-O3` for the target CPU.
//! `jit.rs` runs the module in process (MCJIT), `object.rs` writes an
//! object file for shared libraries.
//!
//! What the generated IR tells LLVM, so that it can optimise:
//! - pointers are `ptr` values and element addresses `getelementptr
//!   inbounds`, so alias analysis and scalar evolution see through them;
//! - the three parameters (context, argument slots, result slots) are
//!   `noalias` (the runtime and the C wrappers pass distinct objects) and
//!   the argument slots `readonly`; their loads are `!invariant.load`;
//! - every memory access carries a TBAA tag of its [`Mem`] kind (array
//!   data, context fields, slots, tape and stack are disjoint objects);
//! - element loads and additions into accumulators carry the alias scope
//!   of the array they reach (`!alias.scope`, `!noalias` with the
//!   function's other scopes: arrays it makes, parameters it does not
//!   write; `lower/roots.rs`), declared where an array is made
//!   (`llvm.experimental.noalias.scope.decl`), so that a loop adding into
//!   one array while reading others is vectorised without run-time
//!   overlap checks;
//! - math functions are LLVM intrinsics where LLVM has one that lowers to
//!   the same libm call (`llvm.log.f64`, ...), other libm functions are
//!   declared `memory(none) nounwind willreturn`, so calls are hoisted and
//!   shared; failure reporting functions are `cold`, and branches to the
//!   error blocks carry branch weights;
//! - floats follow IEEE semantics unless [`TargetOptions::fast_math`] adds
//!   `reassoc contract nsz` to every float instruction;
//! - large frames are probed (`"probe-stack"="inline-asm"`), so a small
//!   caller stack is never overrun silently.
//! - a loop up to an enclosing loop's index (`for c < r`, a row of a
//!   triangle: GMM's factor rows) carries `llvm.loop.interleave.count 1`
//!   ([`Emitter::mark_short_loop`]): the vectoriser's main loop then takes
//!   one vector per iteration rather than two, so rows of 8 to 15 elements
//!   (AVX-512) run vectorised instead of in the scalar remainder (GMM
//!   gradient 3-9% faster at d10 to d64; interleaving turned off for
//!   every loop made the packed GMM 50% slower);
//! - in processes that opt in ([`vectorise_epilogues`]: the `arrayad`
//!   command, the GradBench tool), the remainder of a vectorised loop is
//!   vectorised too, 2 lanes wide, so such a row's last elements run
//!   mostly in vectors.
//!
//! Variables are `alloca`s in the entry block; `mem2reg`/SROA turn them
//! into SSA form.
//!
//! The size budget: LLVM's greedy register allocator takes time quadratic
//! in the size of a straight-line function whose values stay live across
//! many calls (the gradient of a chain of `sin`s: 1.0 s to build at 500
//! lets, 7.1 s at 2,000, 45 s at 5,000, over 15 minutes at 30,000), so a
//! function of more than [`MAX_STATEMENTS`] IR statements is handed to
//! Cranelift, whose allocator stays near linear, and the module's other
//! functions stay with LLVM (the JIT keeps both codes; a library links
//! both objects). Both follow IEEE semantics, so the results are the same;
//! `--fast-math` and the CPU choice do not apply to such a function.

pub(crate) mod jit;
pub(crate) mod object;

/// The LLVM backend ([`crate::backend::CodegenBackend`]).
pub(crate) struct Llvm;

/// The most IR statements (nested blocks included) of a function LLVM
/// compiles; larger ones go to Cranelift (module docs). The largest
/// functions of the GradBench evals have about 6,400.
pub const MAX_STATEMENTS: usize = 10_000;

/// Whether `f` is over the size budget (module docs).
fn over_budget(f: &arrayad_ir::Function) -> bool {
    lower::ir_size(f) > MAX_STATEMENTS
}

impl crate::backend::CodegenBackend for Llvm {
    fn compile_jit(
        &self,
        options: &TargetOptions,
        file: &str,
        funcs: &[&arrayad_ir::Function],
        callees: &crate::Callees,
        keep_ir: bool,
    ) -> std::result::Result<(crate::backend::JitCode, crate::backend::Entries), CodegenError> {
        let (large, small): (Vec<usize>, Vec<usize>) = (0..funcs.len()).partition(|&k| over_budget(funcs[k]));
        if large.is_empty() {
            let (code, entries) = jit::compile(options, file, funcs, callees, keep_ir)?;
            return Ok((Box::new(code), entries));
        }
        let pick = |ks: &[usize]| ks.iter().map(|&k| funcs[k]).collect::<Vec<_>>();
        let (clif_code, clif_entries) =
            crate::clif::Cranelift.compile_jit(options, file, &pick(&large), callees, keep_ir)?;
        let (llvm_code, llvm_entries) = if small.is_empty() {
            (None, Vec::new())
        } else {
            let (code, entries) = jit::compile(options, file, &pick(&small), callees, keep_ir)?;
            (Some(code), entries)
        };
        // The entries in the order of `funcs`.
        let mut entries = vec![(std::ptr::null(), None); funcs.len()];
        for (k, e) in large.iter().zip(clif_entries).chain(small.iter().zip(llvm_entries)) {
            entries[*k] = e;
        }
        Ok((Box::new((clif_code, llvm_code)), entries))
    }

    fn compile_object(
        &self,
        options: &TargetOptions,
        file: &str,
        funcs: &[(String, &arrayad_ir::Function)],
        callees: &crate::Callees,
    ) -> std::result::Result<Vec<Vec<u8>>, CodegenError> {
        let (large, small): (Vec<_>, Vec<_>) = funcs.iter().cloned().partition(|(_, f)| over_budget(f));
        let mut objects = Vec::new();
        if !small.is_empty() || large.is_empty() {
            objects.extend(object::compile_objects(options, file, &small, callees)?);
        }
        if !large.is_empty() {
            objects.extend(crate::clif::Cranelift.compile_object(options, file, &large, callees)?);
        }
        Ok(objects)
    }
}

use crate::error::CodegenError;
use crate::lower::emit::{Conv, Emitter, FloatCC, FloatOp, FloatUnary, IntCC, IntOp, Mem, Ty};
use crate::lower::{self, Result};
use crate::target::{parse_triple, TargetOptions};
use arrayad_ir::{MathFn, Scalar};
use arrayad_runtime::{AbiType, Callee, RuntimeFn};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::types::{BasicType, BasicTypeEnum, VectorType};
use inkwell::values::{
    AnyValue, BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue, InstructionValue, IntMathValue,
    IntValue, MetadataValue, PointerValue, VectorValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate, OptimizationLevel};
use std::collections::HashMap;
use std::sync::Once;

/// An LLVM error, reported as [`CodegenError::Llvm`].
fn llvm_err(func: &str, message: impl std::fmt::Display) -> CodegenError {
    CodegenError::Llvm { func: func.to_string(), message: message.to_string() }
}

/// Lets LLVM's loop vectoriser follow a vectorised main loop of 4 lanes or
/// more with a vectorised epilogue (LLVM's option
/// `-epilogue-vectorization-minimum-VF=4`; its default, 16, leaves the
/// epilogue of a 4- or 8-lane loop scalar). A short row of a triangle
/// (GMM's factor rows, 0 to 19 elements at d20) runs most of its
/// remainder 2 lanes wide instead of one element at a time: the GMM
/// gradient took about 5% less time at d20 and d64 (`bench/gmm_bench.c`,
/// one thread). Values are unchanged: epilogues vectorise what the main
/// loop does, and float reductions keep their order without
/// `--fast-math`.
///
/// The option belongs to the LLVM library, so it applies to every later
/// LLVM compilation in the process, the caller's own included: the
/// `arrayad` command sets it once at start, and library users may. Only
/// the first call parses the option; later calls do nothing.
pub fn vectorise_epilogues() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        let args: [&std::ffi::CStr; 2] = [c"arrayad", c"-epilogue-vectorization-minimum-VF=4"];
        let argv: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: `argv` holds `argv.len()` pointers to NUL-terminated
        // strings that outlive the call, and the overview is one too;
        // LLVM copies what it keeps. `Once` keeps this process's calls
        // from racing each other.
        unsafe { llvm_sys::support::LLVMParseCommandLineOptions(argv.len() as i32, argv.as_ptr(), c"".as_ptr()) }
    });
}

/// Registers the x86-64 and AArch64 targets with LLVM (once per process).
fn init_targets() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let cfg = InitializationConfig::default();
        Target::initialize_x86(&cfg);
        Target::initialize_aarch64(&cfg);
    });
}

/// A target machine with the CPU and feature strings it was created with
/// (every function gets them as attributes).
pub(crate) struct Machine {
    pub tm: TargetMachine,
    pub cpu: String,
    pub features: String,
}

/// The target machine for `opts`: the host's CPU and features when
/// compiling for the host without a CPU given, `generic` when compiling
/// for another machine.
pub(crate) fn target_machine(opts: &TargetOptions, pic: bool) -> Result<Machine> {
    init_targets();
    let triple = match &opts.triple {
        Some(t) if opts.is_cross() => {
            parse_triple(t)?;
            TargetTriple::create(t)
        }
        _ => TargetMachine::get_default_triple(),
    };
    let (cpu, features) = match (&opts.cpu, opts.is_cross()) {
        (Some(c), _) if c == "native" && !opts.is_cross() => host_cpu(),
        (Some(c), _) => (c.clone(), String::new()),
        (None, false) => host_cpu(),
        (None, true) => ("generic".to_string(), String::new()),
    };
    let target = Target::from_triple(&triple).map_err(|e| {
        CodegenError::Target(format!("LLVM has no target for {}: {e}", triple.as_str().to_string_lossy()))
    })?;
    let tm = target
        .create_target_machine(
            &triple,
            &cpu,
            &features,
            OptimizationLevel::Aggressive,
            if pic { RelocMode::PIC } else { RelocMode::Default },
            CodeModel::Default,
        )
        .ok_or_else(|| CodegenError::Target(format!("LLVM cannot create a target machine for CPU `{cpu}`")))?;
    Ok(Machine { tm, cpu, features })
}

fn host_cpu() -> (String, String) {
    (
        TargetMachine::get_host_cpu_name().to_string_lossy().into_owned(),
        TargetMachine::get_host_cpu_features().to_string_lossy().into_owned(),
    )
}

/// An LLVM module holding compiled IR functions, with per function its
/// LLVM name and, when asked for, its optimised IR text.
pub(crate) struct Built<'ctx> {
    pub module: Module<'ctx>,
    pub funcs: Vec<(String, Option<String>)>,
}

/// Loop nests deeper than this are compiled for size ([`build_module`]).
const DEEP_LOOP_NEST: usize = 6;

/// Functions with more calls of kept definitions than this are not
/// vectorised ([`build_module`]).
const MANY_CALLS: usize = 64;

/// The number of calls of kept definitions (`Expr::Call`) in `f`.
fn call_count(f: &arrayad_ir::Function) -> usize {
    let mut n = 0;
    arrayad_ir::visit::for_each_block(&f.body, &mut |b| {
        n += b
            .stmts
            .iter()
            .filter(|s| matches!(s.kind, arrayad_ir::StmtKind::Let { expr: arrayad_ir::Expr::Call { .. }, .. }))
            .count();
    });
    n
}

/// The depth of the deepest nest of loops (builds, loops, while loops and
/// effect loops) in `f`.
fn loop_depth(f: &arrayad_ir::Function) -> usize {
    fn block(b: &arrayad_ir::Block) -> usize {
        b.stmts
            .iter()
            .map(|s| {
                let is_loop = matches!(
                    &s.kind,
                    arrayad_ir::StmtKind::For { .. }
                        | arrayad_ir::StmtKind::Let {
                            expr: arrayad_ir::Expr::Build { .. }
                                | arrayad_ir::Expr::Loop { .. }
                                | arrayad_ir::Expr::While { .. },
                            ..
                        }
                );
                let inner = arrayad_ir::visit::child_blocks(&s.kind).map(block).max().unwrap_or(0);
                inner + usize::from(is_loop)
            })
            .max()
            .unwrap_or(0)
    }
    block(&f.body)
}

/// Lowers `funcs` (symbol name, IR) into a new module of `ctx` for `tm`,
/// verifies each function (a failure is an internal error naming it) and
/// runs the `-O3` pipeline; with `keep_ir`, prints each function's
/// optimised IR.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_module<'ctx>(
    ctx: &'ctx Context,
    machine: &Machine,
    opts: &TargetOptions,
    file: &str,
    funcs: &[(String, &arrayad_ir::Function)],
    hidden: bool,
    callees: &crate::Callees,
    keep_ir: bool,
) -> Result<Built<'ctx>> {
    let Machine { tm, cpu, features } = machine;
    let module = ctx.create_module("arrayad");
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let mut shared = ModuleState::new(ctx, callees.clone(), pair_lanes(tm));
    let ptr = ctx.ptr_type(AddressSpace::default());
    let fn_ty = ctx.i32_type().fn_type(&[ptr.into(), ptr.into(), ptr.into()], false);
    let attr = |name: &str| ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(name), 0);
    let mut values = Vec::new();
    for (sym, f) in funcs {
        if module.get_function(sym).is_some() {
            return Err(CodegenError::malformed(&f.name, format!("duplicate symbol `{sym}`")));
        }
        let fv = module.add_function(sym, fn_ty, Some(Linkage::External));
        if hidden {
            fv.as_global_value().set_visibility(inkwell::GlobalVisibility::Hidden);
        }
        for k in 0..3 {
            fv.add_attribute(AttributeLoc::Param(k), attr("noalias"));
            fv.add_attribute(AttributeLoc::Param(k), attr("nocapture"));
        }
        fv.add_attribute(AttributeLoc::Param(1), attr("readonly"));
        fv.add_attribute(AttributeLoc::Function, attr("nounwind"));
        fv.add_attribute(AttributeLoc::Function, ctx.create_string_attribute("target-cpu", cpu));
        if !features.is_empty() {
            fv.add_attribute(AttributeLoc::Function, ctx.create_string_attribute("target-features", features));
        }
        fv.add_attribute(AttributeLoc::Function, ctx.create_string_attribute("probe-stack", "inline-asm"));
        // Subnormal numbers flushed at run time are flushed when LLVM
        // folds constants too (`TargetOptions::flush_subnormals`).
        if opts.flush_subnormals {
            fv.add_attribute(
                AttributeLoc::Function,
                ctx.create_string_attribute("denormal-fp-math", "preserve-sign,preserve-sign"),
            );
        }
        // Non-trivial loop unswitching (O3) copies a loop per invariant
        // branch inside it, so its code grows exponentially with the depth
        // of a loop nest: the gradient of det by minors (11 nested loops)
        // took 26 s to compile. Functions with nests that deep are
        // optimised for size, which turns it off.
        if loop_depth(f) > DEEP_LOOP_NEST {
            fv.add_attribute(AttributeLoc::Function, attr("optsize"));
        }
        // The SLP vectoriser's dependence scheduling is quadratic in the
        // memory operations of a block, and calls of kept definitions are
        // straight-line stores of arguments and loads of results: the
        // doubling chain's vjps of 1,024 calls took seconds each.
        // `noimplicitfloat` turns the vectorisers off for such functions
        // (their floating-point arithmetic is unchanged).
        if call_count(f) > MANY_CALLS {
            fv.add_attribute(AttributeLoc::Function, attr("noimplicitfloat"));
        }
        values.push(fv);
    }
    for ((_, f), fv) in funcs.iter().zip(&values) {
        let mut e = LlvmEmitter::new(ctx, &module, &mut shared, *fv, opts.fast_math, &f.name);
        lower::lower_function(&mut e, file, f, callees)?;
        e.finish()?;
        if !fv.verify(false) {
            let why = module.verify().err().map(|s| s.to_string()).unwrap_or_default();
            return Err(llvm_err(&f.name, format!("the LLVM verifier rejected the generated code: {why}")));
        }
    }
    let popts = PassBuilderOptions::create();
    popts.set_loop_vectorization(true);
    popts.set_loop_slp_vectorization(true);
    popts.set_loop_unrolling(true);
    popts.set_loop_interleaving(true);
    module.run_passes("default<O3>", tm, popts).map_err(|e| llvm_err("(module)", format!("optimisation: {e}")))?;
    let nodes = keep_ir.then(|| metadata_nodes(&module.print_to_string().to_string()));
    let funcs = funcs
        .iter()
        .zip(&values)
        .map(|((sym, _), fv)| {
            let text = nodes.as_ref().map(|nodes| with_metadata(fv.print_to_string().to_string(), nodes));
            (sym.clone(), text)
        })
        .collect();
    Ok(Built { module, funcs })
}

/// The metadata nodes of a module's text (`!7 = !{...}`), by number.
fn metadata_nodes(module: &str) -> HashMap<u64, String> {
    module
        .lines()
        .filter_map(|l| {
            let (id, _) = l.strip_prefix('!')?.split_once(" = ")?;
            Some((id.parse().ok()?, l.to_string()))
        })
        .collect()
}

/// A function's text followed by the metadata nodes it refers to (`!tbaa
/// !3`, `!llvm.loop !11`), and those they refer to: the text reads alone.
fn with_metadata(mut text: String, nodes: &HashMap<u64, String>) -> String {
    let refs = |line: &str| -> Vec<u64> {
        line.split('!').skip(1).filter_map(|s| s.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()).collect()
    };
    let mut seen: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
    let mut todo = refs(&text);
    while let Some(id) = todo.pop() {
        if let Some(line) = nodes.get(&id).filter(|_| seen.insert(id)) {
            todo.extend(refs(line));
        }
    }
    for id in seen {
        text.push('\n');
        text.push_str(&nodes[&id]);
    }
    text
}

/// Declarations and constants shared by the functions of one module.
struct ModuleState<'ctx> {
    callees: HashMap<Callee, FunctionValue<'ctx>>,
    messages: HashMap<String, PointerValue<'ctx>>,
    tbaa: HashMap<&'static str, MetadataValue<'ctx>>,
    tbaa_root: MetadataValue<'ctx>,
    invariant: MetadataValue<'ctx>,
    /// `!range` of extents: `0..=i64::MAX` (`[0, 2^63)`, the upper bound
    /// written as the wrapped `i64::MIN`).
    extent_range: MetadataValue<'ctx>,
    cold_weights: MetadataValue<'ctx>,
    /// Where calls of generated functions go.
    generated: crate::Callees,
    /// The `f64`s of a pair ([`pair_lanes`]).
    pair_lanes: usize,
}

impl<'ctx> ModuleState<'ctx> {
    fn new(ctx: &'ctx Context, generated: crate::Callees, pair_lanes: usize) -> Self {
        let root = ctx.metadata_node(&[ctx.metadata_string("arrayad tbaa").into()]);
        let i32t = ctx.i32_type();
        let cold_weights = ctx.metadata_node(&[
            ctx.metadata_string("branch_weights").into(),
            i32t.const_int(2000, false).into(),
            i32t.const_int(1, false).into(),
        ]);
        ModuleState {
            callees: HashMap::new(),
            messages: HashMap::new(),
            tbaa: HashMap::new(),
            tbaa_root: root,
            invariant: ctx.metadata_node(&[]),
            extent_range: ctx.metadata_node(&[
                ctx.i64_type().const_zero().into(),
                ctx.i64_type().const_int(1u64 << 63, false).into(),
            ]),
            cold_weights,
            generated,
            pair_lanes,
        }
    }
}

/// The lowering's emitter over an LLVM IR builder.
pub(crate) struct LlvmEmitter<'a, 'ctx> {
    ctx: &'ctx Context,
    module: &'a Module<'ctx>,
    shared: &'a mut ModuleState<'ctx>,
    b: Builder<'ctx>,
    /// Builds the `alloca`s at the end of the entry block, which jumps to
    /// `body` when the function is finished.
    allocas: Builder<'ctx>,
    entry: BasicBlock<'ctx>,
    func: FunctionValue<'ctx>,
    fast_math: bool,
    name: String,
    /// Each variable's slot and type: `None` for a pair
    /// ([`Emitter::declare_pair_var`]).
    vars: Vec<(PointerValue<'ctx>, Option<Ty>)>,
    cold: Vec<BasicBlock<'ctx>>,
    /// The last conditional branch built ([`Emitter::mark_short_loop`]).
    last_branch: Option<inkwell::values::InstructionValue<'ctx>>,
    /// The alias scope of the array elements accessed next, and the
    /// number of scopes ([`Emitter::set_data_scope`]).
    data_scope: Option<(u32, u32)>,
    /// The function's alias scopes: one self-referential node per scope,
    /// in one domain.
    scope_nodes: Vec<inkwell::llvm_sys::prelude::LLVMMetadataRef>,
    /// Per scope, once made: its `!alias.scope` list (the scope) and its
    /// `!noalias` list (every other scope).
    scope_lists: Vec<Option<(MetadataValue<'ctx>, MetadataValue<'ctx>)>>,
    /// The first error of the builder (reported by `finish`).
    error: Option<String>,
    /// Pointers made by [`Emitter::loose_base`] and selects of them:
    /// element addresses from them are plain `getelementptr`s.
    loose: std::collections::HashSet<BasicValueEnum<'ctx>>,
}

impl<'a, 'ctx> LlvmEmitter<'a, 'ctx> {
    fn new(
        ctx: &'ctx Context,
        module: &'a Module<'ctx>,
        shared: &'a mut ModuleState<'ctx>,
        func: FunctionValue<'ctx>,
        fast_math: bool,
        name: &str,
    ) -> Self {
        let entry = ctx.append_basic_block(func, "entry");
        let body = ctx.append_basic_block(func, "body");
        let b = ctx.create_builder();
        b.position_at_end(body);
        let allocas = ctx.create_builder();
        allocas.position_at_end(entry);
        LlvmEmitter {
            ctx,
            module,
            shared,
            b,
            allocas,
            entry,
            func,
            fast_math,
            name: name.to_string(),
            vars: Vec::new(),
            cold: Vec::new(),
            last_branch: None,
            data_scope: None,
            scope_nodes: Vec::new(),
            scope_lists: Vec::new(),
            error: None,
            loose: Default::default(),
        }
    }

    /// Ends the entry block with the jump to the body; reports the first
    /// builder error.
    fn finish(self) -> Result<()> {
        let mut err = self.error;
        match self.entry.get_next_basic_block() {
            Some(body) => {
                if let Err(e) = self.allocas.build_unconditional_branch(body) {
                    err.get_or_insert(e.to_string());
                }
            }
            None => {
                err.get_or_insert("no body block".into());
            }
        }
        match err {
            None => Ok(()),
            Some(e) => Err(llvm_err(&self.name, format!("building LLVM IR: {e}"))),
        }
    }

    fn fail(&mut self, what: impl std::fmt::Display) {
        if self.error.is_none() {
            self.error = Some(what.to_string());
        }
    }

    fn ok<T>(&mut self, r: std::result::Result<T, impl std::fmt::Display>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    fn basic_ty(&self, t: Ty) -> BasicTypeEnum<'ctx> {
        match t {
            Ty::Bool => self.ctx.bool_type().into(),
            Ty::I32 => self.ctx.i32_type().into(),
            Ty::I64 => self.ctx.i64_type().into(),
            Ty::F64 => self.ctx.f64_type().into(),
            Ty::Ptr => self.ctx.ptr_type(AddressSpace::default()).into(),
        }
    }

    /// The type in memory (a bool is a byte there).
    fn mem_ty(&self, t: Ty) -> BasicTypeEnum<'ctx> {
        match t {
            Ty::Bool => self.ctx.i8_type().into(),
            t => self.basic_ty(t),
        }
    }

    /// A `<L x double>` ([`pair_lanes`]): a pair of the partial sums of a
    /// sum ([`Emitter::pairs_in_sums`]).
    fn pair_ty(&self) -> inkwell::types::VectorType<'ctx> {
        self.ctx.f64_type().vec_type(self.shared.pair_lanes as u32)
    }

    /// The type of a variable's slot (`None`: a pair).
    fn slot_ty(&self, ty: Option<Ty>) -> BasicTypeEnum<'ctx> {
        match ty {
            Some(t) => self.basic_ty(t),
            None => self.pair_ty().into(),
        }
    }

    /// A new variable: an `alloca` in the entry block (`None`: a pair).
    fn declare_slot(&mut self, ty: Option<Ty>) -> usize {
        let t = self.slot_ty(ty);
        let r = self.allocas.build_alloca(t, "");
        let p = self.ok(r).unwrap_or_else(|| self.ctx.ptr_type(AddressSpace::default()).const_null());
        self.vars.push((p, ty));
        self.vars.len() - 1
    }

    fn undef(&self, t: Ty) -> BasicValueEnum<'ctx> {
        match self.basic_ty(t) {
            BasicTypeEnum::IntType(t) => t.get_undef().into(),
            BasicTypeEnum::FloatType(t) => t.get_undef().into(),
            BasicTypeEnum::PointerType(t) => t.get_undef().into(),
            other => other.const_zero(),
        }
    }

    /// The vector of type `t` (of [`pair_lanes`] lanes) with `x` in every
    /// lane.
    fn splat(&mut self, t: VectorType<'ctx>, x: BasicValueEnum<'ctx>) -> BasicValueEnum<'ctx> {
        let mut v: BasicValueEnum<'ctx> = t.get_undef().into();
        for lane in 0..self.shared.pair_lanes {
            let k = self.ctx.i32_type().const_int(lane as u64, false);
            let r = match v {
                BasicValueEnum::VectorValue(vv) => self.b.build_insert_element(vv, x, k, ""),
                _ => return v,
            };
            v = self.ok(r).map(Into::into).unwrap_or(v);
        }
        v
    }

    /// [`Emitter::int`] on a pair of `i64` lanes `x` (the inline math
    /// functions' integer lanes, `lower/inline_math.rs`); a scalar `b` (a
    /// shift amount) applies to every lane. Not `SMin` nor `SMax`.
    fn int_lanes(&mut self, op: IntOp, x: VectorValue<'ctx>, b: BasicValueEnum<'ctx>) -> BasicValueEnum<'ctx> {
        let b = if b.is_int_value() { self.splat(x.get_type(), b) } else { b };
        let BasicValueEnum::VectorValue(y) = b else {
            self.fail("integer lanes expected");
            return x.into();
        };
        match self.int_instruction(op, x, y) {
            Some(r) => self.ok(r).map(Into::into).unwrap_or_else(|| x.into()),
            None => {
                self.fail(format!("{op:?} of integer lanes"));
                x.into()
            }
        }
    }

    /// `x op y`, of `i64`s or of integer lanes, for the operations that
    /// are one LLVM instruction (all but `SMin` and `SMax`: `None`).
    fn int_instruction<T: IntMathValue<'ctx>>(
        &self,
        op: IntOp,
        x: T,
        y: T,
    ) -> Option<std::result::Result<T, BuilderError>> {
        Some(match op {
            IntOp::Add => self.b.build_int_add(x, y, ""),
            IntOp::Sub => self.b.build_int_sub(x, y, ""),
            IntOp::Mul => self.b.build_int_mul(x, y, ""),
            IntOp::SDiv => self.b.build_int_signed_div(x, y, ""),
            IntOp::SRem => self.b.build_int_signed_rem(x, y, ""),
            IntOp::And => self.b.build_and(x, y, ""),
            IntOp::Or => self.b.build_or(x, y, ""),
            IntOp::Xor => self.b.build_xor(x, y, ""),
            IntOp::Shl => self.b.build_left_shift(x, y, ""),
            IntOp::UShr => self.b.build_right_shift(x, y, false, ""),
            IntOp::SShr => self.b.build_right_shift(x, y, true, ""),
            IntOp::SMin | IntOp::SMax => return None,
        })
    }

    fn int_of(&mut self, v: BasicValueEnum<'ctx>) -> IntValue<'ctx> {
        match v {
            BasicValueEnum::IntValue(i) => i,
            other => {
                self.fail(format!("an integer expected, found {other:?}"));
                self.ctx.i64_type().const_zero()
            }
        }
    }

    fn float_of(&mut self, v: BasicValueEnum<'ctx>) -> inkwell::values::FloatValue<'ctx> {
        match v {
            BasicValueEnum::FloatValue(f) => f,
            other => {
                self.fail(format!("a float expected, found {other:?}"));
                self.ctx.f64_type().const_zero()
            }
        }
    }

    fn ptr_of(&mut self, v: BasicValueEnum<'ctx>) -> PointerValue<'ctx> {
        match v {
            BasicValueEnum::PointerValue(p) => p,
            other => {
                self.fail(format!("a pointer expected, found {other:?}"));
                self.ctx.ptr_type(AddressSpace::default()).const_null()
            }
        }
    }

    /// Applies the fast-math flags to a float instruction when enabled.
    fn fm(&mut self, v: BasicValueEnum<'ctx>) -> BasicValueEnum<'ctx> {
        if self.fast_math {
            if let Some(i) = v.as_instruction_value() {
                use inkwell::values::FastMathFlags as F;
                let _ = i.set_fast_math_flags(F::AllowReassoc | F::AllowContract | F::NoSignedZeros);
            }
        }
        v
    }

    /// The TBAA access tag of a kind of memory.
    fn tbaa(&mut self, mem: Mem) -> MetadataValue<'ctx> {
        let name = match mem {
            Mem::Ctx => "context",
            Mem::Slots => "slots",
            Mem::Data => "array data",
            Mem::Tape => "tape",
            Mem::Stack => "stack",
        };
        if let Some(m) = self.shared.tbaa.get(name) {
            return *m;
        }
        let i64t = self.ctx.i64_type();
        let ty = self.ctx.metadata_node(&[
            self.ctx.metadata_string(name).into(),
            self.shared.tbaa_root.into(),
            i64t.const_zero().into(),
        ]);
        let tag = self.ctx.metadata_node(&[ty.into(), ty.into(), i64t.const_zero().into()]);
        self.shared.tbaa.insert(name, tag);
        tag
    }

    fn tag(&mut self, inst: Option<InstructionValue<'ctx>>, mem: Mem, align: u32, load: bool) {
        let Some(inst) = inst else { return };
        let _ = inst.set_alignment(align);
        let t = self.tbaa(mem);
        let _ = inst.set_metadata(t, self.ctx.get_kind_id("tbaa"));
        if load && mem == Mem::Slots {
            let _ = inst.set_metadata(self.shared.invariant, self.ctx.get_kind_id("invariant.load"));
        }
        if let (Mem::Data, Some((r, n))) = (mem, self.data_scope) {
            let (scope, noalias) = self.scope_lists(r, n);
            let _ = inst.set_metadata(scope, self.ctx.get_kind_id("alias.scope"));
            let _ = inst.set_metadata(noalias, self.ctx.get_kind_id("noalias"));
        }
    }

    /// The `!alias.scope` and `!noalias` lists of scope `r` of `n`
    /// (the function's scopes made on the first call).
    fn scope_lists(&mut self, r: u32, n: u32) -> (MetadataValue<'ctx>, MetadataValue<'ctx>) {
        use inkwell::llvm_sys::core::{LLVMMDNodeInContext2, LLVMMetadataAsValue};
        use inkwell::llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
        use inkwell::llvm_sys::prelude::LLVMMetadataRef;
        let c = self.ctx.raw();
        // A node whose first operand is itself, then `rest`: made from a
        // temporary node replaced by the node that holds it (as a loop ID).
        // SAFETY: nodes of this emitter's context; the temporary is
        // consumed by the replacement.
        let distinct = |rest: &[LLVMMetadataRef]| unsafe {
            let tmp = LLVMTemporaryMDNode(c, std::ptr::null_mut(), 0);
            let mut ops = vec![tmp];
            ops.extend_from_slice(rest);
            let node = LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(tmp, node);
            node
        };
        if self.scope_nodes.len() != n as usize {
            let domain = distinct(&[]);
            self.scope_nodes = (0..n).map(|_| distinct(&[domain])).collect();
            self.scope_lists = vec![None; n as usize];
        }
        if let Some(lists) = self.scope_lists[r as usize] {
            return lists;
        }
        let mut own = vec![self.scope_nodes[r as usize]];
        let mut others: Vec<LLVMMetadataRef> =
            (0..n).filter(|i| *i != r).map(|i| self.scope_nodes[i as usize]).collect();
        // SAFETY: lists of this context's nodes, wrapped as the metadata
        // values they are.
        let lists = unsafe {
            let list = |ops: &mut Vec<LLVMMetadataRef>| {
                MetadataValue::new(LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len())))
            };
            (list(&mut own), list(&mut others))
        };
        self.scope_lists[r as usize] = Some(lists);
        lists
    }

    fn intrinsic(&mut self, name: &str, tys: &[BasicTypeEnum<'ctx>]) -> Option<FunctionValue<'ctx>> {
        let f = Intrinsic::find(name).and_then(|i| i.get_declaration(self.module, tys));
        if f.is_none() {
            self.fail(format!("no LLVM intrinsic {name}"));
        }
        f
    }

    fn call_fn(&mut self, f: FunctionValue<'ctx>, args: &[BasicValueEnum<'ctx>]) -> BasicValueEnum<'ctx> {
        let margs: Vec<BasicMetadataValueEnum<'ctx>> = args.iter().map(|a| (*a).into()).collect();
        let r = self.b.build_call(f, &margs, "");
        match self.ok(r).map(|c| c.try_as_basic_value()) {
            Some(inkwell::values::ValueKind::Basic(v)) => v,
            _ => {
                self.fail(format!("the call of {} has no value", f.get_name().to_string_lossy()));
                self.undef(Ty::I64)
            }
        }
    }

    /// The declaration of a runtime, C library or math function.
    fn declare(&mut self, callee: Callee) -> FunctionValue<'ctx> {
        if let Some(f) = self.shared.callees.get(&callee) {
            return *f;
        }
        let abi = |t: AbiType| -> BasicTypeEnum<'ctx> {
            match t {
                AbiType::I32 => self.ctx.i32_type().into(),
                AbiType::I64 => self.ctx.i64_type().into(),
                AbiType::F64 => self.ctx.f64_type().into(),
                AbiType::Ptr => self.ctx.ptr_type(AddressSpace::default()).into(),
            }
        };
        let (params, ret) = callee.signature();
        let ps: Vec<inkwell::types::BasicMetadataTypeEnum<'ctx>> = params.iter().map(|t| abi(*t).into()).collect();
        let fn_ty = abi(ret).fn_type(&ps, false);
        let f = match self.module.get_function(callee.symbol()) {
            Some(f) => f,
            None => self.module.add_function(callee.symbol(), fn_ty, Some(Linkage::External)),
        };
        let attr = |name: &str, v: u64| self.ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(name), v);
        f.add_attribute(AttributeLoc::Function, attr("nounwind", 0));
        match callee {
            Callee::Math(_) => {
                // memory(none): no memory effects at all (LLVM's encoding 0).
                f.add_attribute(AttributeLoc::Function, attr("memory", 0));
                f.add_attribute(AttributeLoc::Function, attr("willreturn", 0));
                f.add_attribute(AttributeLoc::Function, attr("nosync", 0));
            }
            c if c.is_failure() => {
                f.add_attribute(AttributeLoc::Function, attr("cold", 0));
                f.add_attribute(AttributeLoc::Function, attr("noinline", 0));
            }
            _ => {}
        }
        self.shared.callees.insert(callee, f);
        f
    }
}

/// The `f64`s of a pair on LLVM for the target machine `tm`: the partial
/// sums `L k .. L k + L - 1` of a sum ([`Emitter::pairs_in_sums`]).
///
/// - x86-64: 8, every partial of a sum in one vector: one AVX-512
///   register, or two AVX ones (LLVM splits the vector where 512-bit
///   registers are missing or not preferred). logsumexp's primal, a sum of
///   `exp`, at n = 10^6 took 0.84 ms instead of 1.45 with vectors of four
///   on an AVX-512 machine, 1.30-1.33 ms instead of 1.42-1.44 compiled
///   for `x86-64-v3` (AVX2), and 2.54-2.60 ms instead of 2.75-2.81 for the
///   baseline `x86-64` (SSE2: four registers a vector); GMM and LSTM
///   unchanged.
/// - Elsewhere (AArch64): 4, two NEON registers (a vector of eight takes
///   four, and `exp`'s chain would run out of the 32).
fn pair_lanes(tm: &TargetMachine) -> usize {
    if tm.get_triple().as_str().to_string_lossy().starts_with("x86_64") {
        8
    } else {
        4
    }
}

impl<'ctx> Emitter for LlvmEmitter<'_, 'ctx> {
    type Value = BasicValueEnum<'ctx>;
    type Block = BasicBlock<'ctx>;
    type Var = usize;
    type Slot = BasicValueEnum<'ctx>;

    fn params(&self) -> [Self::Value; 3] {
        let p = |k: u32| {
            self.func.get_nth_param(k).unwrap_or_else(|| self.ctx.ptr_type(AddressSpace::default()).const_null().into())
        };
        [p(0), p(1), p(2)]
    }

    fn iconst(&mut self, ty: Ty, x: i64) -> Self::Value {
        match ty {
            Ty::Bool => self.ctx.bool_type().const_int((x != 0) as u64, false).into(),
            Ty::I32 => self.ctx.i32_type().const_int(x as u64, true).into(),
            Ty::I64 => self.ctx.i64_type().const_int(x as u64, true).into(),
            Ty::F64 => self.ctx.f64_type().const_float(x as f64).into(),
            Ty::Ptr if x == 0 => self.ctx.ptr_type(AddressSpace::default()).const_null().into(),
            Ty::Ptr => {
                let i = self.ctx.i64_type().const_int(x as u64, true);
                i.const_to_pointer(self.ctx.ptr_type(AddressSpace::default())).into()
            }
        }
    }

    fn fconst(&mut self, x: f64) -> Self::Value {
        self.ctx.f64_type().const_float(x).into()
    }

    fn int(&mut self, op: IntOp, a: Self::Value, b: Self::Value) -> Self::Value {
        if let BasicValueEnum::VectorValue(x) = a {
            return self.int_lanes(op, x, b);
        }
        let (x, y) = (self.int_of(a), self.int_of(b));
        if let Some(r) = self.int_instruction(op, x, y) {
            return self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::I64));
        }
        // SMin, SMax.
        let name = if op == IntOp::SMin { "llvm.smin" } else { "llvm.smax" };
        let ty = x.get_type().as_basic_type_enum();
        match self.intrinsic(name, &[ty]) {
            Some(f) => self.call_fn(f, &[a, b]),
            None => self.undef(Ty::I64),
        }
    }

    fn umul_overflow(&mut self, a: Self::Value, b: Self::Value) -> (Self::Value, Self::Value) {
        let i64t = self.ctx.i64_type().as_basic_type_enum();
        let Some(f) = self.intrinsic("llvm.umul.with.overflow", &[i64t]) else {
            return (self.undef(Ty::I64), self.undef(Ty::Bool));
        };
        let pair = self.call_fn(f, &[a, b]);
        let BasicValueEnum::StructValue(s) = pair else {
            self.fail("umul.with.overflow did not give a pair");
            return (self.undef(Ty::I64), self.undef(Ty::Bool));
        };
        let p = self.b.build_extract_value(s, 0, "");
        let o = self.b.build_extract_value(s, 1, "");
        let p = self.ok(p).unwrap_or_else(|| self.undef(Ty::I64));
        let o = self.ok(o).unwrap_or_else(|| self.undef(Ty::Bool));
        (p, o)
    }

    fn icmp(&mut self, cc: IntCC, a: Self::Value, b: Self::Value) -> Self::Value {
        let p = match cc {
            IntCC::Eq => IntPredicate::EQ,
            IntCC::Ne => IntPredicate::NE,
            IntCC::Slt => IntPredicate::SLT,
            IntCC::Sle => IntPredicate::SLE,
            IntCC::Sgt => IntPredicate::SGT,
            IntCC::Sge => IntPredicate::SGE,
            IntCC::Ult => IntPredicate::ULT,
            IntCC::Ule => IntPredicate::ULE,
            IntCC::Uge => IntPredicate::UGE,
        };
        let r = match (a, b) {
            (BasicValueEnum::PointerValue(x), BasicValueEnum::PointerValue(y)) => self.b.build_int_compare(p, x, y, ""),
            _ => {
                let (x, y) = (self.int_of(a), self.int_of(b));
                self.b.build_int_compare(p, x, y, "")
            }
        };
        self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::Bool))
    }

    fn float(&mut self, op: FloatOp, a: Self::Value, b: Self::Value) -> Self::Value {
        if let (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) = (a, b) {
            let r = match op {
                FloatOp::Add => self.b.build_float_add(x, y, ""),
                FloatOp::Sub => self.b.build_float_sub(x, y, ""),
                FloatOp::Mul => self.b.build_float_mul(x, y, ""),
                FloatOp::Div => self.b.build_float_div(x, y, ""),
            };
            let v = self.ok(r).map(Into::into).unwrap_or_else(|| self.pair_ty().const_zero().into());
            return self.fm(v);
        }
        let (x, y) = (self.float_of(a), self.float_of(b));
        let r = match op {
            FloatOp::Add => self.b.build_float_add(x, y, ""),
            FloatOp::Sub => self.b.build_float_sub(x, y, ""),
            FloatOp::Mul => self.b.build_float_mul(x, y, ""),
            FloatOp::Div => self.b.build_float_div(x, y, ""),
        };
        let v = self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::F64));
        self.fm(v)
    }

    fn float_strict(&mut self, op: FloatOp, a: Self::Value, b: Self::Value) -> Self::Value {
        let fast_math = std::mem::replace(&mut self.fast_math, false);
        let v = self.float(op, a, b);
        self.fast_math = fast_math;
        v
    }

    fn float_unary(&mut self, op: FloatUnary, a: Self::Value) -> Self::Value {
        let name = match op {
            FloatUnary::Neg => {
                let r = match a {
                    BasicValueEnum::VectorValue(x) => self.b.build_float_neg(x, "").map(Into::into),
                    _ => {
                        let x = self.float_of(a);
                        self.b.build_float_neg(x, "").map(Into::into)
                    }
                };
                let v = self.ok(r).unwrap_or_else(|| self.undef(Ty::F64));
                return self.fm(v);
            }
            FloatUnary::Abs => "llvm.fabs",
            FloatUnary::Sqrt => "llvm.sqrt",
            FloatUnary::Floor => "llvm.floor",
            FloatUnary::Ceil => "llvm.ceil",
        };
        // The intrinsic of the operand's type: `f64`, or a pair's vector.
        let t = a.get_type();
        match self.intrinsic(name, &[t]) {
            Some(f) => {
                let v = self.call_fn(f, &[a]);
                self.fm(v)
            }
            None => t.const_zero(),
        }
    }

    fn fcmp(&mut self, cc: FloatCC, a: Self::Value, b: Self::Value) -> Self::Value {
        let p = match cc {
            FloatCC::Eq => FloatPredicate::OEQ,
            FloatCC::Ne => FloatPredicate::UNE,
            FloatCC::Lt => FloatPredicate::OLT,
            FloatCC::Le => FloatPredicate::OLE,
            FloatCC::Gt => FloatPredicate::OGT,
            FloatCC::Ge => FloatPredicate::OGE,
            FloatCC::Uno => FloatPredicate::UNO,
        };
        // Pairs: a vector of lane masks.
        if let (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) = (a, b) {
            let r = self.b.build_float_compare(p, x, y, "");
            return self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::Bool));
        }
        let (x, y) = (self.float_of(a), self.float_of(b));
        let r = self.b.build_float_compare(p, x, y, "");
        self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::Bool))
    }

    fn select(&mut self, c: Self::Value, a: Self::Value, b: Self::Value) -> Self::Value {
        // A vector of lane masks selects lane by lane.
        if let BasicValueEnum::VectorValue(mask) = c {
            let r = self.b.build_select(mask, a, b, "");
            return self.ok(r).unwrap_or_else(|| a.get_type().const_zero());
        }
        let c = self.int_of(c);
        let r = self.b.build_select(c, a, b, "");
        let v = self.ok(r).unwrap_or_else(|| self.undef(Ty::I64));
        if self.loose.contains(&a) || self.loose.contains(&b) {
            self.loose.insert(v);
        }
        if v.get_type().is_float_type() {
            self.fm(v)
        } else {
            v
        }
    }

    fn convert(&mut self, conv: Conv, a: Self::Value) -> Self::Value {
        let i64t = self.ctx.i64_type();
        match conv {
            Conv::I64ToF64 => {
                let x = self.int_of(a);
                let r = self.b.build_signed_int_to_float(x, self.ctx.f64_type(), "");
                self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::F64))
            }
            Conv::F64ToI64Sat => {
                let tys = [i64t.as_basic_type_enum(), self.ctx.f64_type().as_basic_type_enum()];
                match self.intrinsic("llvm.fptosi.sat", &tys) {
                    Some(f) => self.call_fn(f, &[a]),
                    None => self.undef(Ty::I64),
                }
            }
            Conv::BoolToI64 => {
                let x = self.int_of(a);
                let r = self.b.build_int_z_extend(x, i64t, "");
                self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::I64))
            }
            Conv::I64ToBool => {
                let x = self.int_of(a);
                let z = x.get_type().const_zero();
                let r = self.b.build_int_compare(IntPredicate::NE, x, z, "");
                self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::Bool))
            }
            // Lane by lane on pairs.
            Conv::F64Bits | Conv::BitsF64 if a.is_vector_value() => {
                let t =
                    if conv == Conv::F64Bits { i64t.vec_type(self.shared.pair_lanes as u32) } else { self.pair_ty() };
                let r = self.b.build_bit_cast(a, t, "");
                self.ok(r).unwrap_or_else(|| t.const_zero().into())
            }
            Conv::F64Bits => {
                let x = self.float_of(a);
                let r = self.b.build_bit_cast(x, i64t, "");
                self.ok(r).unwrap_or_else(|| self.undef(Ty::I64))
            }
            Conv::BitsF64 => {
                let x = self.int_of(a);
                let r = self.b.build_bit_cast(x, self.ctx.f64_type(), "");
                self.ok(r).unwrap_or_else(|| self.undef(Ty::F64))
            }
        }
    }

    fn load(&mut self, ty: Ty, addr: Self::Value, offset: i32, mem: Mem) -> Self::Value {
        let base = self.ptr_of(addr);
        let p = if offset == 0 {
            base
        } else {
            let off = self.ctx.i64_type().const_int(offset as i64 as u64, true);
            // SAFETY (of the IR): offsets address fields of one object.
            let r = unsafe { self.b.build_in_bounds_gep(self.ctx.i8_type(), base, &[off], "") };
            self.ok(r).unwrap_or(base)
        };
        let mty = self.mem_ty(ty);
        let r = self.b.build_load(mty, p, "");
        let Some(v) = self.ok(r) else { return self.undef(ty) };
        let align = if ty == Ty::Bool { 1 } else { 8 };
        self.tag(v.as_instruction_value(), mem, align, true);
        if ty == Ty::Bool {
            return self.convert(Conv::I64ToBool, v);
        }
        v
    }

    fn load_extent(&mut self, addr: Self::Value, offset: i32, mem: Mem) -> Self::Value {
        let v = self.load(Ty::I64, addr, offset, mem);
        if let Some(inst) = v.as_instruction_value() {
            let _ = inst.set_metadata(self.shared.extent_range, self.ctx.get_kind_id("range"));
        }
        v
    }

    fn store(&mut self, ty: Ty, v: Self::Value, addr: Self::Value, offset: i32, mem: Mem) {
        let base = self.ptr_of(addr);
        let p = if offset == 0 {
            base
        } else {
            let off = self.ctx.i64_type().const_int(offset as i64 as u64, true);
            // SAFETY (of the IR): offsets address fields of one object.
            let r = unsafe { self.b.build_in_bounds_gep(self.ctx.i8_type(), base, &[off], "") };
            self.ok(r).unwrap_or(base)
        };
        let v = if ty == Ty::Bool {
            let x = self.int_of(v);
            let r = self.b.build_int_z_extend(x, self.ctx.i8_type(), "");
            match self.ok(r) {
                Some(w) => w.into(),
                None => return,
            }
        } else {
            v
        };
        let r = self.b.build_store(p, v);
        let inst = self.ok(r);
        self.tag(inst, mem, if ty == Ty::Bool { 1 } else { 8 }, false);
    }

    fn elem_addr(&mut self, base: Self::Value, index: Self::Value, elem: Scalar) -> Self::Value {
        let p = self.ptr_of(base);
        let i = self.int_of(index);
        let ety: BasicTypeEnum<'ctx> = match elem {
            Scalar::F64 => self.ctx.f64_type().into(),
            Scalar::I64 => self.ctx.i64_type().into(),
            Scalar::Bool => self.ctx.i8_type().into(),
        };
        // SAFETY (of the IR): indices are checked (or known) in bounds, or
        // one past the end for empty views; from a loose base (outside its
        // buffer), a plain offset back into it.
        let r = if self.loose.contains(&base) {
            unsafe { self.b.build_gep(ety, p, &[i], "") }
        } else {
            unsafe { self.b.build_in_bounds_gep(ety, p, &[i], "") }
        };
        self.ok(r).map(Into::into).unwrap_or(base)
    }

    fn ptr_offset(&mut self, base: Self::Value, bytes: Self::Value) -> Self::Value {
        let p = self.ptr_of(base);
        let i = self.int_of(bytes);
        // SAFETY (of the IR): a plain (not inbounds) byte offset.
        let r = unsafe { self.b.build_gep(self.ctx.i8_type(), p, &[i], "") };
        self.ok(r).map(Into::into).unwrap_or(base)
    }

    fn loose_base(&mut self, base: Self::Value, bytes: Self::Value) -> Self::Value {
        let v = self.ptr_offset(base, bytes);
        self.loose.insert(v);
        v
    }

    fn ptr_diff(&mut self, a: Self::Value, b: Self::Value) -> Self::Value {
        let i64t = self.ctx.i64_type();
        let (pa, pb) = (self.ptr_of(a), self.ptr_of(b));
        let x = self.b.build_ptr_to_int(pa, i64t, "");
        let y = self.b.build_ptr_to_int(pb, i64t, "");
        match (self.ok(x), self.ok(y)) {
            (Some(x), Some(y)) => {
                let r = self.b.build_int_sub(x, y, "");
                self.ok(r).map(Into::into).unwrap_or_else(|| self.undef(Ty::I64))
            }
            _ => self.undef(Ty::I64),
        }
    }

    fn slot(&mut self) -> Self::Slot {
        self.stack_slot(8)
    }

    fn slot_store(&mut self, ty: Ty, v: Self::Value, s: Self::Slot) {
        self.store(ty, v, s, 0, Mem::Stack);
    }

    fn slot_load(&mut self, ty: Ty, s: Self::Slot) -> Self::Value {
        self.load(ty, s, 0, Mem::Stack)
    }

    fn stack_slot(&mut self, bytes: u32) -> Self::Value {
        let ty = self.ctx.i64_type().array_type(bytes.div_ceil(8).max(1));
        let r = self.allocas.build_alloca(ty, "shapes");
        match self.ok(r) {
            Some(p) => {
                if let Some(i) = p.as_instruction_value() {
                    let _ = i.set_alignment(8);
                }
                p.into()
            }
            None => self.undef(Ty::Ptr),
        }
    }

    fn create_block(&mut self) -> Self::Block {
        self.ctx.append_basic_block(self.func, "")
    }

    fn switch_to(&mut self, b: Self::Block) {
        self.b.position_at_end(b);
    }

    fn jump(&mut self, b: Self::Block) {
        let r = self.b.build_unconditional_branch(b);
        self.ok(r);
    }

    fn brif(&mut self, c: Self::Value, then_: Self::Block, else_: Self::Block) {
        let c = self.int_of(c);
        let r = self.b.build_conditional_branch(c, then_, else_);
        if let Some(inst) = self.ok(r) {
            self.last_branch = Some(inst);
            let weights = if self.cold.contains(&else_) {
                Some(self.shared.cold_weights)
            } else if self.cold.contains(&then_) {
                let i32t = self.ctx.i32_type();
                Some(self.ctx.metadata_node(&[
                    self.ctx.metadata_string("branch_weights").into(),
                    i32t.const_int(1, false).into(),
                    i32t.const_int(2000, false).into(),
                ]))
            } else {
                None
            };
            if let Some(w) = weights {
                let _ = inst.set_metadata(w, self.ctx.get_kind_id("prof"));
            }
        }
    }

    fn seal(&mut self, _b: Self::Block) {}

    fn set_data_scope(&mut self, scope: Option<(u32, u32)>) {
        self.data_scope = scope;
    }

    fn declare_data_scope(&mut self, (r, n): (u32, u32)) {
        let (scope, _) = self.scope_lists(r, n);
        let Some(decl) = self.intrinsic("llvm.experimental.noalias.scope.decl", &[]) else { return };
        let r = self.b.build_call(decl, &[scope.into()], "");
        self.ok(r);
    }

    fn mark_short_loop(&mut self) {
        let Some(inst) = self.last_branch.take() else { return };
        let i32t = self.ctx.i32_type();
        let hint = self.ctx.metadata_node(&[
            self.ctx.metadata_string("llvm.loop.interleave.count").into(),
            i32t.const_int(1, false).into(),
        ]);
        // A loop ID is a node whose first operand is itself: made from a
        // temporary node replaced by the node that holds it (inkwell has
        // no distinct nodes).
        // SAFETY: every reference is of this emitter's context and module,
        // alive for the call; the temporary is consumed by the replacement.
        unsafe {
            use inkwell::llvm_sys::core::{LLVMMDNodeInContext2, LLVMMetadataAsValue, LLVMValueAsMetadata};
            use inkwell::llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
            use inkwell::values::AsValueRef;
            let c = self.ctx.raw();
            let tmp = LLVMTemporaryMDNode(c, std::ptr::null_mut(), 0);
            let mut ops = [tmp, LLVMValueAsMetadata(hint.as_value_ref())];
            let id = LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(tmp, id);
            let kind = self.ctx.get_kind_id("llvm.loop");
            inkwell::llvm_sys::core::LLVMSetMetadata(inst.as_value_ref(), kind, LLVMMetadataAsValue(c, id));
        }
    }

    fn set_cold(&mut self, b: Self::Block) {
        self.cold.push(b);
    }

    fn ret(&mut self, status: Self::Value) {
        let r = self.b.build_return(Some(&status));
        self.ok(r);
    }

    fn declare_var(&mut self, ty: Ty) -> Self::Var {
        self.declare_slot(Some(ty))
    }

    fn def_var(&mut self, var: Self::Var, v: Self::Value) {
        let Some(&(p, _)) = self.vars.get(var) else {
            self.fail("an undeclared variable");
            return;
        };
        let r = self.b.build_store(p, v);
        self.ok(r);
    }

    fn use_var(&mut self, var: Self::Var) -> Self::Value {
        let Some(&(p, ty)) = self.vars.get(var) else {
            self.fail("an undeclared variable");
            return self.undef(Ty::I64);
        };
        let t = self.slot_ty(ty);
        let r = self.b.build_load(t, p, "");
        self.ok(r).unwrap_or_else(|| t.const_zero())
    }

    fn pairs_in_sums(&self, width: usize, inline_math: bool) -> bool {
        width >= 2 || inline_math
    }

    fn lanewise_pairs(&self) -> bool {
        true
    }

    fn splat_int_pair(&mut self, x: Self::Value) -> Self::Value {
        let t = self.ctx.i64_type().vec_type(self.shared.pair_lanes as u32);
        self.splat(t, x)
    }

    fn pair_lanes(&self) -> usize {
        self.shared.pair_lanes
    }

    fn declare_pair_var(&mut self) -> Self::Var {
        self.declare_slot(None)
    }

    fn load_pair(&mut self, addr: Self::Value) -> Self::Value {
        let p = self.ptr_of(addr);
        let t = self.pair_ty();
        let r = self.b.build_load(t, p, "");
        let Some(v) = self.ok(r) else { return t.const_zero().into() };
        self.tag(v.as_instruction_value(), Mem::Data, 8, true);
        v
    }

    fn store_pair(&mut self, v: Self::Value, addr: Self::Value) {
        let p = self.ptr_of(addr);
        let r = self.b.build_store(p, v);
        if let Some(i) = self.ok(r) {
            self.tag(Some(i), Mem::Data, 8, false);
        }
    }

    fn splat_pair(&mut self, x: Self::Value) -> Self::Value {
        let t = self.pair_ty();
        self.splat(t, x)
    }

    fn pair_lane(&mut self, pair: Self::Value, lane: u8) -> Self::Value {
        let BasicValueEnum::VectorValue(v) = pair else {
            self.fail("a pair expected");
            return self.undef(Ty::F64);
        };
        let k = self.ctx.i32_type().const_int(u64::from(lane), false);
        let r = self.b.build_extract_element(v, k, "");
        self.ok(r).unwrap_or_else(|| self.undef(Ty::F64))
    }

    fn call_function(&mut self, func: arrayad_ir::FuncId, args: [Self::Value; 3]) -> Result<Self::Value> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let fn_ty = self.ctx.i32_type().fn_type(&[ptr.into(), ptr.into(), ptr.into()], false);
        let margs: Vec<BasicMetadataValueEnum<'ctx>> = args.iter().map(|a| (*a).into()).collect();
        let call = match self.shared.generated.get(func).cloned() {
            // A function of this module or of another part of the same
            // library (hidden). Never inlined: its params are `noalias`
            // and its argument loads invariant, which hold for a call but
            // not for its body inlined among the caller's stores.
            Some(crate::CallTarget::Symbol(sym)) => {
                let f = match self.module.get_function(&sym) {
                    Some(f) => f,
                    None => {
                        let f = self.module.add_function(&sym, fn_ty, Some(Linkage::External));
                        f.as_global_value().set_visibility(inkwell::GlobalVisibility::Hidden);
                        f
                    }
                };
                let r = self.b.build_call(f, &margs, "");
                self.ok(r)
            }
            Some(crate::CallTarget::Address(a)) => {
                let addr = self.ctx.i64_type().const_int(a as u64, false);
                let r = self.b.build_int_to_ptr(addr, ptr, "");
                let p = self.ok(r).unwrap_or_else(|| ptr.const_null());
                let r = self.b.build_indirect_call(fn_ty, p, &margs, "");
                self.ok(r)
            }
            None => {
                return Err(CodegenError::malformed(&self.name, "a call of a definition that was not compiled"));
            }
        };
        let noinline = self.ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("noinline"), 0);
        match call {
            Some(c) => {
                c.add_attribute(AttributeLoc::Function, noinline);
                match c.try_as_basic_value() {
                    inkwell::values::ValueKind::Basic(v) => Ok(v),
                    _ => Err(llvm_err(&self.name, "the call of a generated function has no value")),
                }
            }
            None => Ok(self.undef(Ty::I32)),
        }
    }

    fn function_address(&mut self, func: arrayad_ir::FuncId) -> Result<Self::Value> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        match self.shared.generated.get(func).cloned() {
            Some(crate::CallTarget::Symbol(sym)) => {
                let f = match self.module.get_function(&sym) {
                    Some(f) => f,
                    None => {
                        let fn_ty = self.ctx.i32_type().fn_type(&[ptr.into(), ptr.into(), ptr.into()], false);
                        let f = self.module.add_function(&sym, fn_ty, Some(Linkage::External));
                        f.as_global_value().set_visibility(inkwell::GlobalVisibility::Hidden);
                        f
                    }
                };
                Ok(f.as_global_value().as_pointer_value().into())
            }
            Some(crate::CallTarget::Address(a)) => {
                let addr = self.ctx.i64_type().const_int(a as u64, false);
                let r = self.b.build_int_to_ptr(addr, ptr, "");
                Ok(self.ok(r).unwrap_or_else(|| ptr.const_null()).into())
            }
            None => Err(CodegenError::malformed(&self.name, "the address of a definition that was not compiled")),
        }
    }

    fn call(&mut self, callee: Callee, args: &[Self::Value]) -> Result<Self::Value> {
        let f64t = self.ctx.f64_type().as_basic_type_enum();
        let v = match callee {
            // `memset` as the intrinsic LLVM can reason about.
            Callee::Runtime(RuntimeFn::Memset) => {
                let [dst, _, bytes] = args else {
                    return Err(llvm_err(&self.name, "memset takes three arguments"));
                };
                let p = self.ptr_of(*dst);
                let n = self.int_of(*bytes);
                let zero = self.ctx.i8_type().const_zero();
                let r = self.b.build_memset(p, 8, zero, n);
                self.ok(r);
                *dst
            }
            // The intrinsics that lower to the very same libm call.
            Callee::Math(m @ (MathFn::Log | MathFn::Sin | MathFn::Cos | MathFn::Pow)) => {
                let name = match m {
                    MathFn::Log => "llvm.log",
                    MathFn::Sin => "llvm.sin",
                    MathFn::Cos => "llvm.cos",
                    _ => "llvm.pow",
                };
                match self.intrinsic(name, &[f64t]) {
                    Some(f) => {
                        let v = self.call_fn(f, args);
                        self.fm(v)
                    }
                    None => self.undef(Ty::F64),
                }
            }
            c => {
                let f = self.declare(c);
                self.call_fn(f, args)
            }
        };
        Ok(v)
    }

    fn message(&mut self, text: &str) -> Result<Self::Value> {
        if let Some(p) = self.shared.messages.get(text) {
            return Ok((*p).into());
        }
        let bytes: Vec<u8> = text.bytes().filter(|b| *b != 0).collect();
        let init = self.ctx.const_string(&bytes, true);
        let g = self.module.add_global(init.get_type(), None, "arrayad.msg");
        g.set_initializer(&init);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        g.set_unnamed_addr(true);
        g.set_alignment(1);
        let p = g.as_pointer_value();
        self.shared.messages.insert(text.to_string(), p);
        Ok(p.into())
    }
}
