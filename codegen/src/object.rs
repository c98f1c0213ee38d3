//! Compiling IR functions into a relocatable object file (for shared libraries).

use crate::compile::{define_functions, host_isa};
use crate::error::CodegenError;
use cranelift_module::Linkage;
use cranelift_object::{ObjectBuilder, ObjectModule};

/// An ELF (or the host's format) object with each function under its symbol
/// name, position-independent, with hidden visibility.
pub(crate) fn compile_object(file: &str, funcs: &[(String, &arrayad_ir::Function)]) -> Result<Vec<u8>, CodegenError> {
    let isa = host_isa(true)?;
    let builder = ObjectBuilder::new(isa, "arrayad", cranelift_module::default_libcall_names())?;
    let mut module = ObjectModule::new(builder);
    let items: Vec<(String, Linkage, &arrayad_ir::Function)> =
        funcs.iter().map(|(s, f)| (s.clone(), Linkage::Hidden, *f)).collect();
    define_functions(&mut module, file, &items)?;
    module.finish().emit().map_err(|e| CodegenError::Cranelift(format!("writing the object file: {e}")))
}
