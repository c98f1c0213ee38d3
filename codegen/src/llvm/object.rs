//! LLVM object files (for shared libraries): position-independent code for
//! the target triple and CPU, each function under its symbol with hidden
//! visibility.
//!
//! The functions of a library are split into one LLVM module per thread
//! ([`compile_objects`]): LLVM optimises and emits a module on one thread,
//! and a library of many exports (six entry points each) spends nearly all
//! of its build time there. Each function is compiled alone either way
//! (calls between generated functions are never inlined, and a callee in
//! another part is declared hidden and resolved by the link), so the code
//! does not depend on the split.

use super::{build_module, llvm_err, target_machine};
use crate::error::CodegenError;
use crate::target::TargetOptions;
use inkwell::context::Context;
use inkwell::targets::FileType;

/// The object files of `funcs` (symbol, IR) for `opts`: one per thread of
/// [`arrayad_ir::stack::threads`] (at most one per function), the functions
/// dealt to them largest first, each to the least loaded (by IR
/// statements), so the split is the same on every run.
///
/// Errors: those of [`compile_object`] (the first part's first); a panic
/// of a thread is resumed here.
pub(crate) fn compile_objects(
    opts: &TargetOptions,
    file: &str,
    funcs: &[(String, &arrayad_ir::Function)],
    callees: &crate::Callees,
) -> Result<Vec<Vec<u8>>, CodegenError> {
    let threads = arrayad_ir::stack::threads().min(funcs.len());
    if threads <= 1 {
        return Ok(vec![compile_object(opts, file, funcs, callees)?]);
    }
    let mut order: Vec<(usize, usize)> =
        funcs.iter().enumerate().map(|(k, (_, f))| (crate::lower::ir_size(f), k)).collect();
    order.sort_by(|a, b| b.cmp(a));
    let mut groups: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); threads];
    for (size, k) in order {
        let Some(g) = groups.iter_mut().min_by_key(|g| g.0) else { break };
        g.0 += size.max(1);
        g.1.push(k);
    }
    // Target registration is process-wide: done here, before any thread.
    target_machine(opts, true)?;
    let parts: Vec<Vec<(String, &arrayad_ir::Function)>> = groups
        .into_iter()
        .map(|(_, mut ks)| {
            ks.sort_unstable();
            ks.into_iter().map(|k| funcs[k].clone()).collect()
        })
        .collect();
    let mut objects: Vec<Option<Result<Vec<u8>, CodegenError>>> = parts.iter().map(|_| None).collect();
    let work: Vec<_> = parts.iter().zip(objects.iter_mut()).collect();
    arrayad_ir::stack::for_each_parallel(work, arrayad_ir::stack::COMPILER_STACK, |(part, out)| {
        *out = Some(compile_object(opts, file, part, callees));
    });
    objects.into_iter().map(|o| o.unwrap_or_else(|| Err(llvm_err("(module)", "a part was not compiled")))).collect()
}

/// The object file of `funcs` (symbol, IR) for `opts`.
pub(crate) fn compile_object(
    opts: &TargetOptions,
    file: &str,
    funcs: &[(String, &arrayad_ir::Function)],
    callees: &crate::Callees,
) -> Result<Vec<u8>, CodegenError> {
    let machine = target_machine(opts, true)?;
    let context = Context::create();
    let built = build_module(&context, &machine, opts, file, funcs, true, callees, false)?;
    let buf = machine
        .tm
        .write_to_memory_buffer(&built.module, FileType::Object)
        .map_err(|e| llvm_err("(module)", format!("writing the object file: {e}")))?;
    Ok(buf.as_slice().to_vec())
}
