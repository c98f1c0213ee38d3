//! The reverse of an array update (`a with [i] = v`, LANGUAGE.md 11).

use crate::reverse::*;

impl Rev<'_> {
    /// `dy = dA with [indices] = dv`: the cotangent of `dv` is the result's
    /// at `indices`, that of `dA` the result's with `indices` zeroed. When
    /// the result's cotangent buffer is its own (nothing reads it after
    /// this), that position is cleared in place and the buffer handed to
    /// `dA` (O(1) when `dA`'s cotangent is still zero: a loop state updated
    /// in place costs O(1) backward too); otherwise a cleared copy is added.
    /// Nothing when the result's cotangent is a zero lazy one.
    pub(in crate::reverse) fn update_rule(
        &mut self,
        dy: VarId,
        array: VarId,
        indices: &[Atom],
        value: Atom,
        out: &mut Vec<Stmt>,
    ) -> Result<(), AdError> {
        let g = self.ct[&dy];
        let live = self.live.get(&dy).copied();
        let mut body = Vec::new();
        let row_ty = self.out.atom_ty(&value).with_elem(Scalar::F64);
        let at = Expr::Index { array: g, indices: indices.to_vec() };
        if self.is_lin(&value).is_some() {
            let t = self.let1(&mut body, "ct", at.clone(), row_ty);
            self.accumulate(&value, t, &mut body);
        }
        if self.is_lin(&Atom::Var(array)).is_some() {
            if self.owned_ct.contains(&dy) {
                self.push(&mut body, StmtKind::AccZero { acc: g, indices: indices.to_vec() });
                self.accumulate_from(&Atom::Var(array), Atom::Var(g), None, true, &mut body);
            } else {
                let zero = if row_ty.is_scalar() {
                    Atom::F64(0.0)
                } else {
                    let row = self.let1(&mut body, "ct_row", at, row_ty);
                    let row = row.as_var().ok_or_else(|| AdError::new("a row cotangent is not a variable"))?;
                    self.let1(&mut body, "zeros", Expr::ZerosLike(row), row_ty)
                };
                let ty = self.out.ty(g);
                let masked =
                    self.let1(&mut body, "ct", Expr::Update { array: g, indices: indices.to_vec(), value: zero }, ty);
                self.accumulate_from(&Atom::Var(array), masked, None, true, &mut body);
            }
        }
        match live {
            Some(l) => self.push(
                out,
                StmtKind::If {
                    cond: Atom::Var(l),
                    then_branch: Block { stmts: body, results: vec![] },
                    else_branch: Block::default(),
                },
            ),
            None => out.extend(body),
        }
        Ok(())
    }
}
