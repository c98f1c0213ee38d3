//! LLVM in process: the module is optimised for this machine's CPU and
//! compiled to memory by MCJIT; the runtime's functions are mapped to their
//! addresses in this process (the C library's resolve as usual).

use super::{build_module, llvm_err, target_machine};
use crate::backend::Entries;
use crate::error::CodegenError;
use crate::target::TargetOptions;
use arrayad_runtime::Callee;
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::module::Module;
use inkwell::OptimizationLevel;
use std::mem::ManuallyDrop;

/// The LLVM context, module and execution engine that own JIT code; freed
/// on drop (module, then engine, then context).
pub(crate) struct LlvmCode {
    module: ManuallyDrop<Module<'static>>,
    engine: ManuallyDrop<ExecutionEngine<'static>>,
    context: ManuallyDrop<Box<Context>>,
}

impl Drop for LlvmCode {
    fn drop(&mut self) {
        // SAFETY: each field is dropped exactly once, the borrowers (module,
        // engine) before the context they borrow; the owner (`JitModule`)
        // drops this only when no compiled function can run any more.
        unsafe {
            ManuallyDrop::drop(&mut self.module);
            ManuallyDrop::drop(&mut self.engine);
            ManuallyDrop::drop(&mut self.context);
        }
    }
}

/// Compiles `funcs` (verified IR, calling `callees` at their addresses)
/// for this machine: the code, and per function its entry address and,
/// with `keep_ir`, its optimised LLVM IR.
pub(crate) fn compile(
    opts: &TargetOptions,
    file: &str,
    funcs: &[&arrayad_ir::Function],
    callees: &crate::Callees,
    keep_ir: bool,
) -> Result<(LlvmCode, Entries), CodegenError> {
    let machine = target_machine(opts, false)?;
    let context = Box::new(Context::create());
    // SAFETY: the context lives in a box that `LlvmCode` drops only after
    // the module and the engine that borrow it; the lifetime is erased so
    // that the three can live in one struct.
    let ctx: &'static Context = unsafe { &*(context.as_ref() as *const Context) };
    let syms: Vec<(String, &arrayad_ir::Function)> =
        funcs.iter().enumerate().map(|(k, f)| (format!("arrayad_jit_{k}_{}", f.name), *f)).collect();
    let built = build_module(ctx, &machine, opts, file, &syms, false, callees, keep_ir)?;
    let engine = built
        .module
        .create_jit_execution_engine(OptimizationLevel::Aggressive)
        .map_err(|e| llvm_err("(module)", format!("creating the JIT: {e}")))?;
    // The runtime's functions by address (the optimiser may have removed
    // declarations it no longer needs: look them up after it ran).
    for callee in Callee::all() {
        if let Some(f) = built.module.get_function(callee.symbol()) {
            engine.add_global_mapping(&f, callee.address() as usize);
        }
    }
    let mut entries = Vec::new();
    for ((sym, text), f) in built.funcs.iter().zip(funcs) {
        let addr = engine
            .get_function_address(sym)
            .map_err(|e| llvm_err(&f.name, format!("the JIT has no code for it: {e:?}")))?;
        entries.push((addr as *const u8, text.clone()));
    }
    let code = LlvmCode {
        module: ManuallyDrop::new(built.module),
        engine: ManuallyDrop::new(engine),
        context: ManuallyDrop::new(context),
    };
    Ok((code, entries))
}
