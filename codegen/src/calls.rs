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

/// The program whose definitions kept calls name (callee ids:
/// `arrayad_ir::KeptKind`), with what the lowering of a call needs to know
/// of its callee. Made once per program: the analysis walks all of it.
#[derive(Debug)]
pub struct CalledProgram {
    program: Arc<Program>,
    /// [`Program::straight_line_scalar_closure`], by definition.
    straight_line: Vec<bool>,
}

impl CalledProgram {
    /// `program` and its analysis (linear in its size).
    pub fn new(program: Arc<Program>) -> Arc<CalledProgram> {
        let straight_line = program.straight_line_scalar_closure();
        Arc::new(CalledProgram { program, straight_line })
    }

    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }
}

/// The target of each definition called by the functions of one module
/// (`Expr::Call { func }`); empty for call-free code.
#[derive(Clone, Debug, Default)]
pub struct Callees {
    targets: HashMap<FuncId, CallTarget>,
    /// The program the callees' ids refer to: the extents of their results
    /// where code needs them before a call runs (the rows of a
    /// comprehension that runs zero times: `arrayad_ir::shape`), and which
    /// callees are straight-line.
    called: Option<Arc<CalledProgram>>,
    /// The chunk functions of parallel maps that calls go to, by id
    /// (`crate::parallel`): such a call runs through the runtime.
    parallel: HashMap<FuncId, crate::parallel::ParallelMap>,
    /// The chunk functions among the functions compiled with these
    /// callees (lowered in chunk mode), by name, with how they run.
    chunks: HashMap<String, crate::parallel::ParallelMap>,
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

    /// The callees' ids refer to definitions of `called`
    /// (`arrayad_ir::KeptKind`).
    pub fn set_program(&mut self, called: Arc<CalledProgram>) {
        self.called = Some(called);
    }

    /// The program the callees' ids refer to.
    pub fn program(&self) -> Option<&Program> {
        self.called.as_deref().map(CalledProgram::program)
    }

    /// True when the callee `func` (any [`arrayad_ir::KeptKind`] of a
    /// definition) and everything it calls are straight-line scalar code
    /// ([`Program::straight_line_scalar_closure`]): it returns, after a
    /// bounded number of statements, on any arguments. False when unknown.
    pub fn is_straight_line(&self, func: FuncId) -> bool {
        let Some(c) = &self.called else { return false };
        let Some((def, _)) = arrayad_ir::KeptKind::of_callee(c.program.funcs.len(), func) else { return false };
        c.straight_line.get(def.0 as usize).copied().unwrap_or(false)
    }

    /// Calls of `chunk.id` go to `target` through the runtime's parallel
    /// map.
    pub(crate) fn insert_chunk(&mut self, chunk: &crate::parallel::Chunk, target: CallTarget) {
        self.targets.insert(chunk.id, target);
        self.parallel.insert(chunk.id, chunk.map.clone());
    }

    /// The function of `chunk` is compiled with these callees: it is
    /// lowered in chunk mode.
    pub(crate) fn mark_chunk(&mut self, chunk: &crate::parallel::Chunk) {
        self.chunks.insert(chunk.func.name.clone(), chunk.map.clone());
    }

    /// How a call of `func` runs when it is a parallel map.
    pub(crate) fn parallel_map(&self, func: FuncId) -> Option<&crate::parallel::ParallelMap> {
        self.parallel.get(&func)
    }

    /// How the function named `name` runs when it is a chunk function
    /// (`crate::parallel`), lowered in chunk mode.
    pub(crate) fn chunk(&self, name: &str) -> Option<&crate::parallel::ParallelMap> {
        self.chunks.get(name)
    }

    /// Where calls of `func` go.
    pub fn get(&self, func: FuncId) -> Option<&CallTarget> {
        self.targets.get(&func)
    }
}
