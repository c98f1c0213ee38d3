//! Cranelift JIT: machine code for IR functions in this process.

use super::{define_functions, isa};
use crate::backend::Entries;
use crate::error::CodegenError;
use crate::target::TargetOptions;
use arrayad_runtime::Callee;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::Linkage;

/// The executable memory of one Cranelift JIT module, freed on drop.
pub(crate) struct ClifCode {
    module: Option<JITModule>,
}

impl Drop for ClifCode {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the owner (`JitModule`) drops this only when no
            // function of the module can run any more (calls borrow it).
            unsafe { m.free_memory() };
        }
    }
}

/// Compiles `funcs` (verified IR, calling `callees` at their addresses)
/// for the host: the code, and per function its entry address and, with
/// `keep_ir`, its Cranelift IR text.
pub(crate) fn compile(
    file: &str,
    funcs: &[&arrayad_ir::Function],
    callees: &crate::Callees,
    keep_ir: bool,
) -> Result<(ClifCode, Entries), CodegenError> {
    let host = TargetOptions::host();
    let isa = isa(&host, false)?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    for c in Callee::all() {
        builder.symbol(c.symbol(), c.address());
    }
    let mut module = JITModule::new(builder);
    let items: Vec<(String, Linkage, &arrayad_ir::Function)> =
        funcs.iter().enumerate().map(|(k, f)| (format!("arrayad_jit_{k}_{}", f.name), Linkage::Local, *f)).collect();
    let defined = define_functions(&mut module, file, &items, &host, false, keep_ir, callees)?;
    module.finalize_definitions()?;
    let out = defined
        .into_iter()
        .map(|d| (module.get_finalized_function(d.id), d.clif.map(|c| c.display().to_string())))
        .collect();
    Ok((ClifCode { module: Some(module) }, out))
}
