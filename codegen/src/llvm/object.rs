//! LLVM object files (for shared libraries): position-independent code for
//! the target triple and CPU, each function under its symbol with hidden
//! visibility.

use super::{build_module, llvm_err, target_machine};
use crate::error::CodegenError;
use crate::target::TargetOptions;
use inkwell::context::Context;
use inkwell::targets::FileType;

/// The object file of `funcs` (symbol, IR) for `opts`.
pub(crate) fn compile_object(
    opts: &TargetOptions,
    file: &str,
    funcs: &[(String, &arrayad_ir::Function)],
) -> Result<Vec<u8>, CodegenError> {
    let machine = target_machine(opts, true)?;
    let context = Context::create();
    let built = build_module(&context, &machine, opts, file, funcs, true)?;
    let buf = machine
        .tm
        .write_to_memory_buffer(&built.module, FileType::Object)
        .map_err(|e| llvm_err("(module)", format!("writing the object file: {e}")))?;
    Ok(buf.as_slice().to_vec())
}
