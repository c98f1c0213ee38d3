//! Module-level declarations shared by all functions of one Cranelift module:
//! the imported runtime, libm and libc functions, and the static message
//! strings of error sites.

use crate::error::CodegenError;
use cranelift_codegen::ir::{types, AbiParam, Signature, Type};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};
use std::collections::HashMap;

/// An external function the generated code calls.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Extern {
    /// `void *arrayad_alloc_slow(ctx, u64 size)`.
    AllocSlow,
    /// `int32_t arrayad_tape_grow(ctx, u64 slots)`.
    TapeGrow,
    /// `int32_t arrayad_fail(ctx, i32 kind, const char *msg, i64, i64, i64)`.
    Fail,
    /// `int32_t arrayad_fail_shapes(ctx, i32 kind, const char *msg, i64 row, i64 rank,
    /// const i64 *shape, const i64 *first)`.
    FailShapes,
    /// `void *memset(void *, int, size_t)`.
    Memset,
    /// A libm (or runtime) function `double f(double)`.
    Unary(&'static str),
    /// A libm function `double f(double, double)`.
    Binary(&'static str),
}

impl Extern {
    fn name(self) -> &'static str {
        match self {
            Extern::AllocSlow => "arrayad_alloc_slow",
            Extern::TapeGrow => "arrayad_tape_grow",
            Extern::Fail => "arrayad_fail",
            Extern::FailShapes => "arrayad_fail_shapes",
            Extern::Memset => "memset",
            Extern::Unary(n) | Extern::Binary(n) => n,
        }
    }

    fn signature(self, mut sig: Signature) -> Signature {
        let p = |t: Type| AbiParam::new(t);
        let (params, rets): (Vec<Type>, Vec<Type>) = match self {
            Extern::AllocSlow => (vec![types::I64, types::I64], vec![types::I64]),
            Extern::TapeGrow => (vec![types::I64, types::I64], vec![types::I32]),
            Extern::Fail => {
                (vec![types::I64, types::I32, types::I64, types::I64, types::I64, types::I64], vec![types::I32])
            }
            Extern::FailShapes => (
                vec![types::I64, types::I32, types::I64, types::I64, types::I64, types::I64, types::I64],
                vec![types::I32],
            ),
            Extern::Memset => (vec![types::I64, types::I32, types::I64], vec![types::I64]),
            Extern::Unary(_) => (vec![types::F64], vec![types::F64]),
            Extern::Binary(_) => (vec![types::F64, types::F64], vec![types::F64]),
        };
        sig.params.extend(params.into_iter().map(p));
        sig.returns.extend(rets.into_iter().map(p));
        sig
    }
}

/// The declarations of one module, created on first use.
#[derive(Default)]
pub(crate) struct Imports {
    funcs: HashMap<Extern, FuncId>,
    messages: HashMap<String, DataId>,
}

impl Imports {
    /// The id of an imported function, declaring it on first use.
    pub(crate) fn func<M: Module>(&mut self, m: &mut M, e: Extern) -> Result<FuncId, CodegenError> {
        if let Some(id) = self.funcs.get(&e) {
            return Ok(*id);
        }
        let sig = e.signature(m.make_signature());
        let id = m.declare_function(e.name(), Linkage::Import, &sig)?;
        self.funcs.insert(e, id);
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
