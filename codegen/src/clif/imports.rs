//! Module-level declarations shared by all functions of one Cranelift
//! module: the imported runtime, C library and math functions
//! ([`Callee`]), and the static message strings of error sites.

use crate::calls::{CallTarget, Callees};
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
    /// Where calls of generated functions go.
    callees: Callees,
    /// The declarations of generated functions called by symbol.
    generated: HashMap<arrayad_ir::FuncId, FuncId>,
}

/// A generated function called by the module's code ([`Callees`]).
pub(crate) enum Generated {
    /// A function of the module (or of the object's link) by symbol.
    Func(FuncId),
    /// JIT code at this address.
    Address(usize),
}

impl Imports {
    /// The declarations of a module whose calls of generated functions go
    /// to `callees`.
    pub(crate) fn calling(callees: Callees) -> Imports {
        Imports { callees, ..Imports::default() }
    }

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

    /// The generated function that calls of the definition `func` go to,
    /// declared on first use (`sig`: the internal signature).
    pub(crate) fn generated<M: Module>(
        &mut self,
        m: &mut M,
        func: arrayad_ir::FuncId,
        sig: &Signature,
    ) -> Result<Generated, CodegenError> {
        if let Some(id) = self.generated.get(&func) {
            return Ok(Generated::Func(*id));
        }
        let id = match self.callees.get(func) {
            Some(CallTarget::Address(a)) => return Ok(Generated::Address(*a)),
            Some(CallTarget::Symbol(sym)) => match m.get_name(sym) {
                Some(cranelift_module::FuncOrDataId::Func(id)) => id,
                _ => m.declare_function(sym, Linkage::Import, sig)?,
            },
            None => {
                return Err(CodegenError::Malformed {
                    func: format!("definition {}", func.0),
                    message: "a call of a definition that was not compiled".into(),
                })
            }
        };
        self.generated.insert(func, id);
        Ok(Generated::Func(id))
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
