//! Module-level declarations shared by all functions of one Cranelift
//! module: the imported runtime, C library and math functions
//! ([`Callee`]), and the static message strings of error sites.

use crate::error::CodegenError;
use arrayad_runtime::{AbiType, Callee};
use cranelift_codegen::ir::{types, AbiParam, Signature};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};
use std::collections::HashMap;

/// The Cranelift signature of a callee.
fn signature(callee: Callee, mut sig: Signature) -> Signature {
    let ty = |t: AbiType| match t {
        AbiType::I32 => types::I32,
        AbiType::I64 | AbiType::Ptr => types::I64,
        AbiType::F64 => types::F64,
    };
    let (params, ret) = callee.signature();
    sig.params.extend(params.iter().map(|t| AbiParam::new(ty(*t))));
    sig.returns.push(AbiParam::new(ty(ret)));
    sig
}

/// The declarations of one module, created on first use.
#[derive(Default)]
pub(crate) struct Imports {
    funcs: HashMap<Callee, FuncId>,
    messages: HashMap<String, DataId>,
}

impl Imports {
    /// The id of an imported function, declaring it on first use.
    pub(crate) fn func<M: Module>(&mut self, m: &mut M, callee: Callee) -> Result<FuncId, CodegenError> {
        if let Some(id) = self.funcs.get(&callee) {
            return Ok(*id);
        }
        let sig = signature(callee, m.make_signature());
        let id = m.declare_function(callee.symbol(), Linkage::Import, &sig)?;
        self.funcs.insert(callee, id);
        Ok(id)
    }

    /// A read-only, NUL-terminated copy of `text` in the module, defined
    /// once per distinct text.
    pub(crate) fn message<M: Module>(&mut self, m: &mut M, text: &str) -> Result<DataId, CodegenError> {
        if let Some(id) = self.messages.get(text) {
            return Ok(*id);
        }
        let id = m.declare_anonymous_data(false, false)?;
        let mut bytes: Vec<u8> = text.bytes().filter(|b| *b != 0).collect();
        bytes.push(0);
        let mut desc = DataDescription::new();
        desc.define(bytes.into_boxed_slice());
        desc.set_align(1);
        m.define_data(id, &desc)?;
        self.messages.insert(text.to_string(), id);
        Ok(id)
    }
}
