//! The backward statements of one linear binding: the `eval` case of each
//! Delta constructor (Krawiec et al., Fig. 10), specialised to the static
//! Delta program.

use super::*;

impl Rev<'_> {
    /// Backward statements of one linear binding `dy = e` (the `eval` case
    /// of each Delta constructor, Krawiec et al. Fig. 10).
    pub(in crate::reverse) fn transpose(&mut self, dy: VarId, e: &Expr, out: &mut Vec<Stmt>) -> Result<(), AdError> {
        let g = Atom::Var(self.ct[&dy]);
        match e {
            Expr::Atom(a) => {
                // A copy: its cotangent is consumed by the copied value.
                let live = self.live.get(&dy).copied();
                self.accumulate_from(a, g, live, true, out)
            }
            Expr::Unary(UnOp::Neg, a) => {
                if self.is_lin(a).is_some() {
                    let t = self.let1(out, "ct", Expr::Unary(UnOp::Neg, g), Type::F64);
                    self.accumulate(a, t, out);
                }
            }
            Expr::Binary(BinOp::Add, a, b) => {
                self.accumulate(a, g, out);
                self.accumulate(b, g, out);
            }
            Expr::Binary(BinOp::Sub, a, b) => {
                self.accumulate(a, g, out);
                if self.is_lin(b).is_some() {
                    let t = self.let1(out, "ct", Expr::Unary(UnOp::Neg, g), Type::F64);
                    self.accumulate(b, t, out);
                }
            }
            Expr::Binary(BinOp::Mul, a, b) => {
                let (l, c) = if self.is_lin(a).is_some() { (a, b) } else { (b, a) };
                if self.is_lin(l).is_some() {
                    let t = self.let1(out, "ct", Expr::Binary(BinOp::Mul, *c, g), Type::F64);
                    self.accumulate(l, t, out);
                }
            }
            Expr::Binary(BinOp::Div, a, b) => {
                if self.is_lin(a).is_some() {
                    let t = self.let1(out, "ct", Expr::Binary(BinOp::Div, g, *b), Type::F64);
                    self.accumulate(a, t, out);
                }
            }
            Expr::Index { array, indices } => {
                if let Some(&c) = self.ct.get(array) {
                    if self.out.ty(dy).is_scalar() {
                        self.need_live(*array, out);
                        self.push(out, StmtKind::AccAdd { acc: c, indices: indices.clone(), value: g });
                    } else if !self.views.contains(&dy) {
                        return Err(AdError::new("the cotangent of a row is not a view of its parent's"));
                    }
                    // A row's cotangent is a view of the parent's: its
                    // contributions are already there.
                }
            }
            Expr::Slice { array, .. } => {
                if self.ct.contains_key(array) && !self.views.contains(&dy) {
                    return Err(AdError::new("the cotangent of a slice is not a view of its parent's"));
                }
            }
            Expr::Reshape { array, .. } => {
                if self.ct.contains_key(array) && !self.views.contains(&dy) {
                    return Err(AdError::new("the cotangent of a reshape is not a view of its parent's"));
                }
            }
            Expr::Update { array, indices, value } => self.update_rule(dy, *array, indices, *value, out)?,
            Expr::Reduce { op: ReduceOp::Sum, array } => {
                if let Some(&c) = self.ct.get(array) {
                    self.need_live(*array, out);
                    let n = self.let1(out, "n", Expr::Dim { array: c, axis: 0 }, Type::I64);
                    let j = self.new_var("j", Type::I64);
                    let body = Block {
                        stmts: vec![Stmt {
                            kind: StmtKind::AccAdd { acc: c, indices: vec![Atom::Var(j)], value: g },
                            loc: self.loc,
                        }],
                        results: vec![],
                    };
                    // Its iterations are independent. `passes::broadcast`
                    // turns the reads of the cotangent into `0.0 + g`; where
                    // it cannot, the loop runs backwards like the backward
                    // loop of a comprehension summed here, so that the two
                    // fuse (`fuse_for`) and the array contracts (`contract`).
                    self.push(out, StmtKind::For { n, index: j, reverse: true, body });
                }
            }
            Expr::ArrayLit { elems, elem_ty } => {
                if elems.iter().any(|el| self.is_lin(el).is_some()) {
                    self.need_live(dy, out);
                }
                for (k, el) in elems.iter().enumerate() {
                    if self.is_lin(el).is_some() {
                        let gv = g.as_var().ok_or_else(|| AdError::new("array cotangent is not a variable"))?;
                        let t = self.let1(
                            out,
                            "ct",
                            Expr::Index { array: gv, indices: vec![Atom::I64(k as i64)] },
                            elem_ty.with_elem(Scalar::F64),
                        );
                        self.accumulate(el, t, out);
                    }
                }
            }
            Expr::ZerosLike(_) | Expr::Zeros(_) => {}
            other => return Err(AdError::new(format!("no transposition rule for linear expression {other:?}"))),
        }
        Ok(())
    }
}
