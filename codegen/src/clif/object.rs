//! Compiling IR functions into a relocatable object file (for shared libraries).

use super::{define_functions, isa};
use crate::error::CodegenError;
use crate::target::TargetOptions;
use cranelift_module::Linkage;
use cranelift_object::{ObjectBuilder, ObjectModule};

/// An ELF object for `target` with each function under its symbol name,
/// position-independent, with hidden visibility.
pub(crate) fn compile_object(
    target: &TargetOptions,
    file: &str,
    funcs: &[(String, &arrayad_ir::Function)],
    callees: &crate::Callees,
) -> Result<Vec<u8>, CodegenError> {
    let isa = isa(target, true)?;
    let builder = ObjectBuilder::new(isa, "arrayad", cranelift_module::default_libcall_names())?;
    let mut module = ObjectModule::new(builder);
    let items: Vec<(String, Linkage, &arrayad_ir::Function)> =
        funcs.iter().map(|(s, f)| (s.clone(), Linkage::Hidden, *f)).collect();
    define_functions(&mut module, file, &items, target, true, false, callees)?;
    module.finish().emit().map_err(|e| CodegenError::Cranelift(format!("writing the object file: {e}")))
}
