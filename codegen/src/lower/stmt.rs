//! Lowering of statements.

use super::analysis::{allocates, nothing_escapes};
use super::{Lower, Result, Val};
use arrayad_ir::{Atom, Block, ErrorKind, Scalar, Stmt, StmtKind, VarId};
use cranelift_codegen::ir::{condcodes::IntCC, InstBuilder, MemFlagsData};
use cranelift_module::Module;

impl<M: Module> Lower<'_, '_, M> {
    pub(super) fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        // Facts learnt inside a block do not hold after it.
        let (facts, memo, loc) = (self.equal.len(), self.memo.len(), self.loc);
        let r = stmts.iter().try_for_each(|s| self.stmt(s));
        self.equal.truncate(facts);
        self.memo.truncate(memo);
        // Checks the enclosing statement makes after its body (irregular
        // rows, ...) report the enclosing statement's location.
        self.loc = loc;
        r
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        self.loc = s.loc;
        match &s.kind {
            StmtKind::Let { vars, expr } => {
                let vals = self.expr(vars, expr)?;
                if vals.len() != vars.len() {
                    return Err(self.malformed(format!("binding {} variables to {} values", vars.len(), vals.len())));
                }
                for (v, val) in vars.iter().zip(vals) {
                    self.def(*v, val)?;
                }
            }
            StmtKind::Assign { var, value } => {
                let v = self.atom(value)?;
                self.def(*var, v)?;
            }
            StmtKind::AccAdd { acc, indices, value } => self.acc_add(*acc, indices, value)?,
            StmtKind::CheckSize { a, b, what } => {
                let x = self.scalar(a)?;
                let y = self.scalar(b)?;
                let ok = self.b.ins().icmp(IntCC::Equal, x, y);
                self.check(
                    ok,
                    ErrorKind::SizeMismatch,
                    &format!("{}: %1 and %2 differ", what.replace('%', "%%")),
                    &[x, y],
                )?;
                self.equal.push((x, y));
            }
            StmtKind::Push(a) => {
                let t = self.f.atom_ty(a);
                let vals = match self.atom(a)? {
                    Val::S(v) => vec![self.scalar_to_slot(v, t.elem)],
                    Val::A(arr) => {
                        let mut v = vec![arr.ptr];
                        v.extend(arr.dims);
                        v
                    }
                };
                self.tape_push(&vals)?;
            }
            StmtKind::TapeRewind(m) => {
                let m = self.scalar(m)?;
                self.tape_rewind(m)?;
            }
            StmtKind::For { n, index, reverse, body } => self.for_(n, *index, *reverse, body)?,
            StmtKind::If { cond, then_branch, else_branch } => {
                let c = self.scalar(cond)?;
                self.if_else(c, &mut |l| l.stmts(&then_branch.stmts), &mut |l| l.stmts(&else_branch.stmts))?;
            }
        }
        Ok(())
    }

    fn acc_add(&mut self, acc: VarId, indices: &[Atom], value: &Atom) -> Result<()> {
        let a = self.array(acc)?;
        let name = self.var_name(acc);
        let rank = a.dims.len();
        if indices.is_empty() {
            // The whole accumulator.
            return self.acc_add_rows(a.ptr, &a.dims, value, &name);
        }
        let off = self.checked_offset(&a, indices, &name)?;
        if indices.len() == rank {
            let v = self.scalar(value)?;
            let addr = self.elem_addr(a.ptr, off, Scalar::F64);
            let old = self.b.ins().load(cranelift_codegen::ir::types::F64, MemFlagsData::trusted(), addr, 0);
            let new = self.b.ins().fadd(old, v);
            self.b.ins().store(MemFlagsData::trusted(), new, addr, 0);
            Ok(())
        } else {
            let rest = a.dims[indices.len()..].to_vec();
            let stride = self.product(&rest);
            let eoff = self.b.ins().imul(off, stride);
            let base = self.elem_addr(a.ptr, eoff, Scalar::F64);
            self.acc_add_rows(base, &rest, value, &name)
        }
    }

    /// `dst[..] += value` elementwise, for an array `value` of extents `dims`.
    fn acc_add_rows(
        &mut self,
        dst: cranelift_codegen::ir::Value,
        dims: &[cranelift_codegen::ir::Value],
        value: &Atom,
        name: &str,
    ) -> Result<()> {
        let v = self.array_atom(value)?;
        if v.dims.len() != dims.len() {
            return Err(self.malformed("accumulating an array of the wrong rank"));
        }
        for (ax, (&d, &e)) in v.dims.iter().zip(dims).enumerate() {
            let ok = self.b.ins().icmp(IntCC::Equal, d, e);
            self.check(
                ok,
                ErrorKind::SizeMismatch,
                &format!(
                    "accumulation into `{}`, axis {ax} of the addend and of the target: %1 and %2 differ",
                    name.replace('%', "%%")
                ),
                &[d, e],
            )?;
        }
        let count = self.product(dims);
        let zero = self.iconst(0);
        let src = v.ptr;
        self.counted_loop(zero, count, false, &mut |l, i| {
            let x = l.load_elem(src, i, Scalar::F64);
            let y = l.load_elem(dst, i, Scalar::F64);
            let s = l.b.ins().fadd(y, x);
            l.store_elem(dst, i, Scalar::F64, s);
            Ok(())
        })
    }

    fn for_(&mut self, n: &Atom, index: VarId, reverse: bool, body: &Block) -> Result<()> {
        let n = self.scalar(n)?;
        let release = nothing_escapes(self.f, body) && allocates(body);
        let mark = release.then(|| self.arena_mark());
        let zero = self.iconst(0);
        self.counted_loop(zero, n, reverse, &mut |l, i| {
            l.def(index, Val::S(i))?;
            l.stmts(&body.stmts)?;
            if let Some(m) = &mark {
                l.arena_release(m);
            }
            Ok(())
        })
    }
}
