//! IR -> Cranelift IR, one function at a time.
//!
//! Every IR variable becomes Cranelift [`Variable`]s (a scalar: one; an
//! array: its data pointer and one `i64` per axis), so mutable variables and
//! loop states get SSA form from `cranelift_frontend`. Generated functions
//! have the internal calling convention
//! `extern "C" fn(ctx: *mut Ctx, args: *const u64, results: *mut u64) -> i32`
//! (see the crate docs); a failing run-time check branches to a cold block
//! that records the error in the context and returns its kind.

mod analysis;
mod expr;
pub(crate) mod imports;
mod memory;
mod stmt;

use crate::error::CodegenError;
use arrayad_ir::{Atom, ErrorKind, Expr, Loc, Scalar, StmtKind, VarId};
use cranelift_codegen::ir::{
    self as clif, condcodes::IntCC, types, AbiParam, FuncRef, InstBuilder, MemFlagsData, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_module::{DataId, FuncId, Module};
use imports::{Extern, Imports};
use std::collections::{HashMap, HashSet};

pub(crate) type Result<T> = std::result::Result<T, CodegenError>;

/// The Cranelift signature of every generated function:
/// `(ctx, args, results) -> status`.
pub(crate) fn internal_signature<M: Module>(m: &M) -> clif::Signature {
    let mut sig = m.make_signature();
    sig.params.extend([AbiParam::new(types::I64), AbiParam::new(types::I64), AbiParam::new(types::I64)]);
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

/// The number of 8-byte slots a value of type `t` takes.
pub(crate) fn slots(t: arrayad_ir::Type) -> usize {
    1 + t.rank as usize
}

/// Lowers `f` into `func` (whose signature must be [`internal_signature`]).
pub(crate) fn lower_function<M: Module>(
    m: &mut M,
    imp: &mut Imports,
    file: &str,
    f: &arrayad_ir::Function,
    func: &mut clif::Function,
    fbc: &mut FunctionBuilderContext,
) -> Result<()> {
    if m.target_config().pointer_type() != types::I64 {
        return Err(CodegenError::Target("only 64-bit targets are supported".into()));
    }
    let mut b = FunctionBuilder::new(func, fbc);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let params = b.block_params(entry).to_vec();
    let mut l = Lower {
        m,
        imp,
        b,
        f,
        file,
        ctx: params[0],
        vars: vec![None; f.vars.len()],
        frefs: HashMap::new(),
        msgs: HashMap::new(),
        loc: f.loc,
        rebound: rebound_vars(f),
        in_bounds: Vec::new(),
        equal: Vec::new(),
        memo: Vec::new(),
    };
    // Arguments.
    let args = params[1];
    let mut slot = 0i32;
    for &p in &f.params {
        let t = l.var_ty(p)?;
        let val = if t.is_scalar() {
            let v = l.b.ins().load(types::I64, MemFlagsData::trusted(), args, slot * 8);
            slot += 1;
            Val::S(l.slot_to_scalar(v, t.elem))
        } else {
            let ptr = l.b.ins().load(types::I64, MemFlagsData::trusted(), args, slot * 8);
            let dims = (0..t.rank as i32)
                .map(|a| l.b.ins().load(types::I64, MemFlagsData::trusted(), args, (slot + 1 + a) * 8))
                .collect();
            slot += 1 + t.rank as i32;
            Val::A(Arr { ptr, dims })
        };
        l.def(p, val)?;
    }
    l.stmts(&f.body.stmts)?;
    // Results.
    let results = params[2];
    let mut slot = 0i32;
    for r in &f.body.results {
        let t = l.f.atom_ty(r);
        match l.atom(r)? {
            Val::S(v) => {
                let v = l.scalar_to_slot(v, t.elem);
                l.b.ins().store(MemFlagsData::trusted(), v, results, slot * 8);
                slot += 1;
            }
            Val::A(a) => {
                l.b.ins().store(MemFlagsData::trusted(), a.ptr, results, slot * 8);
                for (k, d) in a.dims.iter().enumerate() {
                    l.b.ins().store(MemFlagsData::trusted(), *d, results, (slot + 1 + k as i32) * 8);
                }
                slot += 1 + a.dims.len() as i32;
            }
        }
    }
    let zero = l.b.ins().iconst(types::I32, 0);
    l.b.ins().return_(&[zero]);
    l.b.seal_all_blocks();
    let cfg = l.m.target_config();
    l.b.finalize(cfg);
    Ok(())
}

/// How an IR variable lives in Cranelift.
#[derive(Clone, Debug)]
pub(crate) enum Repr {
    /// A variable bound once (the IR's scoping makes its definition dominate
    /// every use): the SSA values themselves, so that identical values stay
    /// recognisable (bounds-check elimination compares them).
    Fixed(Val),
    Scalar(Variable),
    Array {
        ptr: Variable,
        dims: Vec<Variable>,
    },
}

/// An array at one program point: data pointer and extents.
#[derive(Clone, Debug)]
pub(crate) struct Arr {
    pub ptr: Value,
    pub dims: Vec<Value>,
}

/// A lowered value.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    S(Value),
    A(Arr),
}

/// The Cranelift type of a scalar.
pub(crate) fn clif_ty(s: Scalar) -> clif::Type {
    match s {
        Scalar::F64 => types::F64,
        Scalar::I64 => types::I64,
        Scalar::Bool => types::I8,
    }
}

/// Bytes per element of an array of `s`.
pub(crate) fn elem_size(s: Scalar) -> i64 {
    match s {
        Scalar::Bool => 1,
        _ => 8,
    }
}

/// The variables bound more than once: loop states.
fn rebound_vars(f: &arrayad_ir::Function) -> HashSet<VarId> {
    fn walk(b: &arrayad_ir::Block, out: &mut HashSet<VarId>) {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { expr, .. } => match expr {
                    Expr::Loop { states, body, .. } => {
                        out.extend(states.iter().copied());
                        walk(body, out);
                    }
                    Expr::Build { body, .. } => walk(body, out),
                    Expr::If { then_branch, else_branch, .. } => {
                        walk(then_branch, out);
                        walk(else_branch, out);
                    }
                    _ => {}
                },
                StmtKind::For { body, .. } => walk(body, out),
                StmtKind::If { then_branch, else_branch, .. } => {
                    walk(then_branch, out);
                    walk(else_branch, out);
                }
                _ => {}
            }
        }
    }
    let mut out = HashSet::new();
    walk(&f.body, &mut out);
    out
}

/// The state of the lowering of one function.
pub(crate) struct Lower<'a, 'b, M: Module> {
    m: &'a mut M,
    imp: &'a mut Imports,
    pub(crate) b: FunctionBuilder<'b>,
    f: &'a arrayad_ir::Function,
    file: &'a str,
    /// The `ctx` parameter.
    ctx: Value,
    vars: Vec<Option<Repr>>,
    frefs: HashMap<FuncId, FuncRef>,
    msgs: HashMap<DataId, clif::GlobalValue>,
    /// The location of the statement being lowered.
    loc: Loc,
    /// Variables assigned more than once (loop states, mutable variables):
    /// they live in Cranelift `Variable`s.
    rebound: HashSet<VarId>,
    /// `(i, n)`: `0 <= i < n` holds here (counted-loop indices).
    in_bounds: Vec<(Value, Value)>,
    /// `(a, b)`: `a == b` holds here (size checks passed).
    equal: Vec<(Value, Value)>,
    /// Integer constants and differences computed in enclosing scopes, reused
    /// so that equal sizes are the same SSA value (for bounds checks).
    memo: Vec<(Memo, Value)>,
}

/// A memoised integer computation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Memo {
    Const(i64),
    Sub(Value, Value),
}

impl<M: Module> Lower<'_, '_, M> {
    fn malformed(&self, msg: impl Into<String>) -> CodegenError {
        CodegenError::malformed(&self.f.name, msg)
    }

    fn var_ty(&self, v: VarId) -> Result<arrayad_ir::Type> {
        self.f.vars.get(v.index()).map(|i| i.ty).ok_or_else(|| self.malformed(format!("unknown variable %{}", v.0)))
    }

    fn var_name(&self, v: VarId) -> String {
        self.f.vars.get(v.index()).map(|i| i.name.clone()).unwrap_or_else(|| format!("%{}", v.0))
    }

    /// Fresh Cranelift variables for a value of type `t`.
    fn fresh_repr(&mut self, t: arrayad_ir::Type) -> Repr {
        if t.is_scalar() {
            Repr::Scalar(self.b.declare_var(clif_ty(t.elem)))
        } else {
            let ptr = self.b.declare_var(types::I64);
            let dims = (0..t.rank).map(|_| self.b.declare_var(types::I64)).collect();
            Repr::Array { ptr, dims }
        }
    }

    fn def_repr(&mut self, r: &Repr, v: Val) -> Result<()> {
        match (r, v) {
            (Repr::Fixed(_), _) => return Err(self.malformed("a variable bound twice")),
            (Repr::Scalar(var), Val::S(x)) => self.b.def_var(*var, x),
            (Repr::Array { ptr, dims }, Val::A(a)) if dims.len() == a.dims.len() => {
                self.b.def_var(*ptr, a.ptr);
                for (d, x) in dims.iter().zip(a.dims) {
                    self.b.def_var(*d, x);
                }
            }
            _ => return Err(self.malformed("a value of the wrong kind or rank")),
        }
        Ok(())
    }

    fn use_repr(&mut self, r: &Repr) -> Val {
        match r {
            Repr::Fixed(v) => v.clone(),
            Repr::Scalar(v) => Val::S(self.b.use_var(*v)),
            Repr::Array { ptr, dims } => {
                let ptr = self.b.use_var(*ptr);
                let dims = dims.iter().map(|d| self.b.use_var(*d)).collect();
                Val::A(Arr { ptr, dims })
            }
        }
    }

    /// Binds (or, for mutable variables and loop states, rebinds) an IR variable.
    fn def(&mut self, v: VarId, val: Val) -> Result<()> {
        let t = self.var_ty(v)?;
        let r = match &self.vars[v.index()] {
            Some(r) => r.clone(),
            None if !self.f.var(v).mutable && !self.rebound.contains(&v) => {
                self.vars[v.index()] = Some(Repr::Fixed(val));
                return Ok(());
            }
            None => {
                let r = self.fresh_repr(t);
                self.vars[v.index()] = Some(r.clone());
                r
            }
        };
        self.def_repr(&r, val)
    }

    /// The current value of an IR variable.
    fn use_ir_var(&mut self, v: VarId) -> Result<Val> {
        match self.vars.get(v.index()).cloned().flatten() {
            Some(r) => Ok(self.use_repr(&r)),
            None => Err(self.malformed(format!("`{}` (%{}) used before it is bound", self.var_name(v), v.0))),
        }
    }

    fn atom(&mut self, a: &Atom) -> Result<Val> {
        Ok(match a {
            Atom::Var(v) => self.use_ir_var(*v)?,
            Atom::F64(x) => Val::S(self.b.ins().f64const(*x)),
            Atom::I64(x) => Val::S(self.memo_const(*x)),
            Atom::Bool(x) => Val::S(self.b.ins().iconst(types::I8, *x as i64)),
        })
    }

    /// The `i64` constant `x`, shared within the current scope.
    pub(crate) fn memo_const(&mut self, x: i64) -> Value {
        if let Some((_, v)) = self.memo.iter().rev().find(|(k, _)| *k == Memo::Const(x)) {
            return *v;
        }
        let v = self.b.ins().iconst(types::I64, x);
        self.memo.push((Memo::Const(x), v));
        v
    }

    /// `a - b` (`i64`), shared within the current scope.
    pub(crate) fn memo_sub(&mut self, a: Value, b: Value) -> Value {
        if let Some((_, v)) = self.memo.iter().rev().find(|(k, _)| *k == Memo::Sub(a, b)) {
            return *v;
        }
        let v = self.b.ins().isub(a, b);
        self.memo.push((Memo::Sub(a, b), v));
        v
    }

    fn scalar(&mut self, a: &Atom) -> Result<Value> {
        match self.atom(a)? {
            Val::S(v) => Ok(v),
            Val::A(_) => Err(self.malformed("an array where a scalar is expected")),
        }
    }

    fn array(&mut self, v: VarId) -> Result<Arr> {
        match self.use_ir_var(v)? {
            Val::A(a) => Ok(a),
            Val::S(_) => Err(self.malformed(format!("`{}` is not an array", self.var_name(v)))),
        }
    }

    fn array_atom(&mut self, a: &Atom) -> Result<Arr> {
        match self.atom(a)? {
            Val::A(a) => Ok(a),
            Val::S(_) => Err(self.malformed("a scalar where an array is expected")),
        }
    }

    /// A slot (`i64`) converted to a scalar of type `s`.
    fn slot_to_scalar(&mut self, v: Value, s: Scalar) -> Value {
        match s {
            Scalar::F64 => self.b.ins().bitcast(types::F64, MemFlagsData::new(), v),
            Scalar::I64 => v,
            Scalar::Bool => {
                let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0);
                nz
            }
        }
    }

    /// A scalar of type `s` as a slot (`i64`; bool as 0/1).
    fn scalar_to_slot(&mut self, v: Value, s: Scalar) -> Value {
        match s {
            Scalar::F64 => self.b.ins().bitcast(types::I64, MemFlagsData::new(), v),
            Scalar::I64 => v,
            Scalar::Bool => self.b.ins().uextend(types::I64, v),
        }
    }

    fn iconst(&mut self, x: i64) -> Value {
        self.b.ins().iconst(types::I64, x)
    }

    /// Calls an external function and returns its results.
    fn call(&mut self, e: Extern, args: &[Value]) -> Result<Vec<Value>> {
        let id = self.imp.func(self.m, e)?;
        let fref = match self.frefs.get(&id) {
            Some(r) => *r,
            None => {
                let r = self.m.declare_func_in_func(id, self.b.func);
                self.frefs.insert(id, r);
                r
            }
        };
        let inst = self.b.ins().call(fref, args);
        Ok(self.b.inst_results(inst).to_vec())
    }

    /// The full message template of an error raised at the current location:
    /// `FILE:LINE:COL: KIND: DETAIL` (`%1`..`%3` in `detail` are the values).
    fn template(&self, kind: ErrorKind, detail: &str) -> String {
        format!("{}:{}:{}: {}: {}", self.file.replace('%', "%%"), self.loc.line, self.loc.col, kind.describe(), detail)
    }

    /// Emits, in the current block, the recording of an error and the
    /// return of its kind.
    pub(super) fn raise(&mut self, kind: ErrorKind, detail: &str, vals: &[Value]) -> Result<()> {
        let text = self.template(kind, detail);
        let msg = self.message_ptr(&text)?;
        let k = self.b.ins().iconst(types::I32, kind.code() as i64);
        let mut args = vec![self.ctx, k, msg];
        for i in 0..3 {
            let v = match vals.get(i) {
                Some(v) => *v,
                None => self.iconst(0),
            };
            args.push(v);
        }
        self.call(Extern::Fail, &args)?;
        self.b.ins().return_(&[k]);
        Ok(())
    }

    /// The address of a static message in the module.
    fn message_ptr(&mut self, text: &str) -> Result<Value> {
        let id = self.imp.message(self.m, text)?;
        let gv = match self.msgs.get(&id) {
            Some(g) => *g,
            None => {
                let g = self.m.declare_data_in_func(id, self.b.func);
                self.msgs.insert(id, g);
                g
            }
        };
        Ok(self.b.ins().symbol_value(types::I64, gv))
    }

    /// Checks that a row of extents `dims` has the extents `first` of row 0
    /// (IrregularArray otherwise; the message shows both shapes).
    fn check_regular(&mut self, row: Value, dims: &[Value], first: &[Value]) -> Result<()> {
        let mut ok: Option<Value> = None;
        for (d, f) in dims.iter().zip(first) {
            let eq = self.b.ins().icmp(IntCC::Equal, *d, *f);
            ok = Some(match ok {
                None => eq,
                Some(o) => self.b.ins().band(o, eq),
            });
        }
        let Some(ok) = ok else { return Ok(()) };
        let cont = self.branch_to_cold(ok);
        let rank = dims.len();
        let ss = self.b.create_sized_stack_slot(clif::StackSlotData::new(
            clif::StackSlotKind::ExplicitSlot,
            (16 * rank) as u32,
            3,
        ));
        for (k, v) in dims.iter().chain(first).enumerate() {
            self.b.ins().stack_store(types::I64, *v, ss, (8 * k) as i32);
        }
        let a = self.b.ins().stack_addr(types::I64, ss, 0);
        let b = self.b.ins().stack_addr(types::I64, ss, (8 * rank) as i32);
        let kind = ErrorKind::IrregularArray;
        let text = self.template(kind, "row %1 has shape %A but row 0 has shape %B");
        let msg = self.message_ptr(&text)?;
        let k = self.b.ins().iconst(types::I32, kind.code() as i64);
        let r = self.iconst(rank as i64);
        self.call(Extern::FailShapes, &[self.ctx, k, msg, row, r, a, b])?;
        self.b.ins().return_(&[k]);
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// Branches on `ok` (an `i8` truth value): to a new block, returned, when
    /// it holds, else to a cold block, where the builder is left to emit the
    /// failure (which must end in a return).
    fn branch_to_cold(&mut self, ok: Value) -> clif::Block {
        let cold = self.b.create_block();
        self.b.set_cold_block(cold);
        let cont = self.b.create_block();
        self.b.ins().brif(ok, cont, &[], cold, &[]);
        self.b.seal_block(cold);
        self.b.seal_block(cont);
        self.b.switch_to_block(cold);
        cont
    }

    /// Continues when `ok` (an `i8` truth value) holds; otherwise raises the
    /// error from a cold block.
    fn check(&mut self, ok: Value, kind: ErrorKind, detail: &str, vals: &[Value]) -> Result<()> {
        let cont = self.branch_to_cold(ok);
        self.raise(kind, detail, vals)?;
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// A counted loop: `body(i)` for `i` from `start` up to `n - 1`, or from
    /// `n - 1` down to `start` when `reverse` (the loop is rotated: one test
    /// before it and one per iteration).
    fn counted_loop(
        &mut self,
        start: Value,
        n: Value,
        reverse: bool,
        body: &mut dyn FnMut(&mut Self, Value) -> Result<()>,
    ) -> Result<()> {
        let ivar = self.b.declare_var(types::I64);
        let body_blk = self.b.create_block();
        let exit = self.b.create_block();
        let (first, enter) = if reverse {
            let first = self.b.ins().iadd_imm_s(n, -1);
            (first, self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, first, start))
        } else {
            (start, self.b.ins().icmp(IntCC::SignedLessThan, start, n))
        };
        self.b.def_var(ivar, first);
        self.b.ins().brif(enter, body_blk, &[], exit, &[]);
        self.b.switch_to_block(body_blk);
        let i = self.b.use_var(ivar);
        // Every caller starts at a non-negative constant: 0 <= i < n.
        self.in_bounds.push((i, n));
        let memo = self.memo.len();
        let r = body(self, i);
        self.memo.truncate(memo);
        self.in_bounds.pop();
        r?;
        let (next, again) = if reverse {
            let next = self.b.ins().iadd_imm_s(i, -1);
            (next, self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, next, start))
        } else {
            let next = self.b.ins().iadd_imm_s(i, 1);
            (next, self.b.ins().icmp(IntCC::SignedLessThan, next, n))
        };
        self.b.def_var(ivar, next);
        self.b.ins().brif(again, body_blk, &[], exit, &[]);
        // All predecessors of the loop header and the exit are known now:
        // sealing here keeps loop-invariant variables out of block params.
        self.b.seal_block(body_blk);
        self.b.seal_block(exit);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// Two-way branch on `cond`; each arm runs its closure; control joins after.
    fn if_else(
        &mut self,
        cond: Value,
        then_: &mut dyn FnMut(&mut Self) -> Result<()>,
        else_: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let t = self.b.create_block();
        let e = self.b.create_block();
        let join = self.b.create_block();
        self.b.ins().brif(cond, t, &[], e, &[]);
        self.b.seal_block(t);
        self.b.seal_block(e);
        // Values computed in one arm do not dominate the other or the join.
        let memo = self.memo.len();
        self.b.switch_to_block(t);
        then_(self)?;
        self.memo.truncate(memo);
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(e);
        else_(self)?;
        self.memo.truncate(memo);
        self.b.ins().jump(join, &[]);
        self.b.seal_block(join);
        self.b.switch_to_block(join);
        Ok(())
    }
}
