//! Where the calls between generated functions go.
//!
//! A definition whose calls are kept (`arrayad_ir::passes::inline::KeptCalls`:
//! callees too large to inline at every call site) is compiled once, and
//! its callers call it (`lower/call.rs`). In JIT code the callee is code
//! compiled before its callers, called at its address (the caller's owner
//! keeps the callee's code alive); in a shared library it is a function of
//! the library, called by its (hidden) symbol.

use arrayad_ir::{FuncId, Program};
use std::collections::HashMap;
use std::sync::Arc;

/// The compiled function a call goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallTarget {
    /// The entry address of JIT code with the internal calling convention
    /// that outlives every caller compiled against it.
    Address(usize),
    /// A function of the same object or shared library, by symbol.
    Symbol(String),
}

/// The target of each definition called by the functions of one module
/// (`Expr::Call { func }`); empty for call-free code.
#[derive(Clone, Debug, Default)]
pub struct Callees {
    targets: HashMap<FuncId, CallTarget>,
    /// The program the callees' ids refer to: the extents of their results
    /// where code needs them before a call runs (the rows of a
    /// comprehension that runs zero times: `arrayad_ir::shape`).
    program: Option<Arc<Program>>,
}

impl Callees {
    /// No calls.
    pub fn none() -> Callees {
        Callees::default()
    }

    /// Calls of `func` go to `target`.
    pub fn insert(&mut self, func: FuncId, target: CallTarget) {
        self.targets.insert(func, target);
    }

    /// The callees' ids refer to definitions of `program`
    /// (`arrayad_ir::KeptKind`).
    pub fn set_program(&mut self, program: Arc<Program>) {
        self.program = Some(program);
    }

    /// The program the callees' ids refer to.
    pub fn program(&self) -> Option<&Program> {
        self.program.as_deref()
    }

    /// Where calls of `func` go.
    pub fn get(&self, func: FuncId) -> Option<&CallTarget> {
        self.targets.get(&func)
    }
}
