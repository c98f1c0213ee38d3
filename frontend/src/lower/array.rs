//! Lowering of the array operations: elementwise maps (with size checks and
//! scalar broadcasting), `sum` of any rank and `dot`.

use super::Lowerer;
use arrayad_ir::{Atom, BinOp, Block, Expr, Loc, ReduceOp, Scalar, StmtKind, Type, VarId};

impl Lowerer<'_, '_> {
    /// Opens `n` nested blocks, runs `inner` in the innermost, and closes
    /// them into nested `Build`s over `dims` with indices `idx`, yielding an
    /// array of rank `n` whose elements have type `elem`.
    fn nested_builds(
        &mut self,
        name: &str,
        dims: &[Atom],
        idx: &[VarId],
        elem: Type,
        inner: impl FnOnce(&mut Self) -> Atom,
    ) -> Atom {
        for _ in dims {
            self.b.begin_block();
        }
        let mut cur = inner(self);
        let mut ty = elem;
        for k in (0..dims.len()).rev() {
            let body = self.b.end_block(vec![cur]);
            ty = ty.lift();
            let n = dims.get(k).copied().unwrap_or(Atom::I64(0));
            let index = idx.get(k).copied().unwrap_or(VarId(0));
            cur = self.let1(if k == 0 { name } else { "row" }, Expr::Build { n, index, body }, ty);
        }
        cur
    }

    /// The extents of all axes of `array`.
    fn dims(&mut self, array: VarId, rank: u8) -> Vec<Atom> {
        (0..rank).map(|axis| self.let1("n", Expr::Dim { array, axis }, Type::I64)).collect()
    }

    /// An elementwise operation `f` over `operands` (arrays of one rank,
    /// scalars broadcast): checks that every array has the shape of the
    /// first, then nested `Build`s apply `f` to the elements.
    pub(super) fn map(
        &mut self,
        loc: Loc,
        name: &str,
        sym: &str,
        operands: &[(Atom, Type)],
        out_elem: Scalar,
        f: impl FnOnce(&mut Self, &[Atom]) -> Atom,
    ) -> Atom {
        self.b.loc = loc;
        let arrays: Vec<(usize, VarId, Type)> = operands
            .iter()
            .enumerate()
            .filter(|(_, (_, t))| t.is_array())
            .map(|(k, (a, t))| (k, self.var_of(*a, *t), *t))
            .collect();
        let Some(&(first, shape_of, ty)) = arrays.first() else {
            let atoms: Vec<Atom> = operands.iter().map(|(a, _)| *a).collect();
            return f(self, &atoms);
        };
        let dims = self.dims(shape_of, ty.rank);
        let describe = |k: usize| match (operands.len(), k) {
            (2, 0) => "the left operand".to_string(),
            (2, _) => "the right operand".to_string(),
            (_, k) => format!("operand {}", k + 1),
        };
        for &(k, other, t) in arrays.iter().skip(1) {
            let theirs = self.dims(other, t.rank);
            for (axis, (d, e)) in dims.iter().zip(theirs).enumerate() {
                let what = format!(
                    "elementwise `{sym}` needs equal shapes: axis {axis} of {} must equal axis {axis} of {}",
                    describe(k),
                    describe(first)
                );
                self.b.stmt(StmtKind::CheckSize { a: e, b: *d, what });
            }
        }
        let idx: Vec<VarId> = (0..ty.rank).map(|_| self.b.var("i", Type::I64)).collect();
        let indices: Vec<Atom> = idx.iter().map(|v| Atom::Var(*v)).collect();
        self.nested_builds(name, &dims, &idx, Type::scalar(out_elem), |lw| {
            let elems: Vec<Atom> = operands
                .iter()
                .enumerate()
                .map(|(k, (a, t))| match arrays.iter().find(|(j, _, _)| *j == k) {
                    Some(&(_, array, _)) => {
                        let expr = Expr::Index { array, indices: indices.clone() };
                        lw.let1("elem", expr, Type::scalar(t.elem))
                    }
                    None => *a,
                })
                .collect();
            f(lw, &elems)
        })
    }

    /// `sum(array)`: a reduction for rank 1; for rank `r > 1`, nested
    /// `Build`s over axes `1..r` of the sum of each column along axis 0.
    pub(super) fn sum(&mut self, loc: Loc, name: &str, array: VarId, ty: Type) -> Atom {
        self.b.loc = loc;
        if ty.rank <= 1 {
            return self.let1(name, Expr::Reduce { op: ReduceOp::Sum, array }, Type::scalar(ty.elem));
        }
        let dims = self.dims(array, ty.rank);
        let outer: Vec<VarId> = (1..ty.rank).map(|_| self.b.var("j", Type::I64)).collect();
        let elem = Type::scalar(ty.elem);
        let n0 = dims.first().copied().unwrap_or(Atom::I64(0));
        self.nested_builds(name, dims.get(1..).unwrap_or(&[]), &outer, elem, |lw| {
            let i = lw.b.var("i", Type::I64);
            let mut indices = vec![Atom::Var(i)];
            indices.extend(outer.iter().map(|v| Atom::Var(*v)));
            lw.b.begin_block();
            let x = lw.let1("x", Expr::Index { array, indices }, elem);
            let body = lw.b.end_block(vec![x]);
            let column = lw.let1("column", Expr::Build { n: n0, index: i, body }, elem.lift());
            let Atom::Var(column) = column else { return column };
            lw.let1("s", Expr::Reduce { op: ReduceOp::Sum, array: column }, elem)
        })
    }

    /// `concat(x, y)` (arrays of type `ty`): `for i < n + m => if i < n
    /// then x[i] else y[i - n]` (rows of one shape, or an irregular-array
    /// error).
    pub(super) fn concat(&mut self, loc: Loc, name: &str, x: VarId, y: VarId, ty: Type) -> Atom {
        self.b.loc = loc;
        let n = self.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let m = self.let1("m", Expr::Dim { array: y, axis: 0 }, Type::I64);
        let total = self.let1("size", Expr::Binary(BinOp::Add, n, m), Type::I64);
        let row = ty.row();
        let i = self.b.var("i", Type::I64);
        self.b.begin_block();
        let first = self.let1("first", Expr::Binary(BinOp::Lt, Atom::Var(i), n), Type::BOOL);
        self.b.begin_block();
        let a = self.let1("elem", Expr::Index { array: x, indices: vec![Atom::Var(i)] }, row);
        let then_branch = self.b.end_block(vec![a]);
        self.b.begin_block();
        let j = self.let1("j", Expr::Binary(BinOp::Sub, Atom::Var(i), n), Type::I64);
        let b = self.let1("elem", Expr::Index { array: y, indices: vec![j] }, row);
        let else_branch = self.b.end_block(vec![b]);
        let e = self.let1("elem", Expr::If { cond: first, then_branch, else_branch }, row);
        let body = self.b.end_block(vec![e]);
        self.let1(name, Expr::Build { n: total, index: i, body }, ty)
    }

    /// `argmax(a)` (`max`) or `argmin(a)` of a rank-1 f64 array: the first
    /// position of the extreme, by one loop with a strict comparison after
    /// the check that `a` is not empty (the empty-array error of
    /// `maximum`/`minimum`, on its first element).
    pub(super) fn arg_extreme(&mut self, loc: Loc, name: &str, max: bool, a: VarId) -> Atom {
        self.b.loc = loc;
        let n = self.let1("n", Expr::Dim { array: a, axis: 0 }, Type::I64);
        let one = self.let1("n", Expr::Binary(BinOp::Min, n, Atom::I64(1)), Type::I64);
        let head_name = self.b.func.var(a).name.clone();
        let head =
            self.b.let1(head_name, Expr::Slice { array: a, lo: Atom::I64(0), hi: one }, Type::array(Scalar::F64, 1));
        let op = if max { ReduceOp::Max } else { ReduceOp::Min };
        let first = self.let1("first", Expr::Reduce { op, array: head }, Type::F64);
        let k = self.b.var("k", Type::I64);
        let best = self.b.var("best", Type::F64);
        let i = self.b.var("i", Type::I64);
        self.b.begin_block();
        let ai = self.let1("a", Expr::Index { array: a, indices: vec![Atom::Var(i)] }, Type::F64);
        let cmp = if max { BinOp::Gt } else { BinOp::Lt };
        let better = self.let1("better", Expr::Binary(cmp, ai, Atom::Var(best)), Type::BOOL);
        let then_branch = Block { stmts: Vec::new(), results: vec![Atom::Var(i), ai] };
        let else_branch = Block { stmts: Vec::new(), results: vec![Atom::Var(k), Atom::Var(best)] };
        let k2 = self.b.var("k", Type::I64);
        let best2 = self.b.var("best", Type::F64);
        self.b.stmt(StmtKind::Let { vars: vec![k2, best2], expr: Expr::If { cond: better, then_branch, else_branch } });
        let body = self.b.end_block(vec![Atom::Var(k2), Atom::Var(best2)]);
        let kf = self.b.var(name, Type::I64);
        let bf = self.b.var("best", Type::F64);
        self.b.stmt(StmtKind::Let {
            vars: vec![kf, bf],
            expr: Expr::Loop { n, index: i, states: vec![k, best], init: vec![Atom::I64(0), first], body },
        });
        Atom::Var(kf)
    }

    /// `dot(x, y)`: a size check, the products, their sum.
    pub(super) fn dot(&mut self, loc: Loc, name: &str, x: VarId, y: VarId) -> Atom {
        self.b.loc = loc;
        let nx = self.let1("n", Expr::Dim { array: x, axis: 0 }, Type::I64);
        let ny = self.let1("m", Expr::Dim { array: y, axis: 0 }, Type::I64);
        let what = "the arguments of `dot` must have the same length".to_string();
        self.b.stmt(StmtKind::CheckSize { a: ny, b: nx, what });
        let i = self.b.var("i", Type::I64);
        self.b.begin_block();
        let a = self.let1("x", Expr::Index { array: x, indices: vec![Atom::Var(i)] }, Type::F64);
        let b = self.let1("y", Expr::Index { array: y, indices: vec![Atom::Var(i)] }, Type::F64);
        let p = self.let1("p", Expr::Binary(arrayad_ir::BinOp::Mul, a, b), Type::F64);
        let body = self.b.end_block(vec![p]);
        let products = self.let1("products", Expr::Build { n: nx, index: i, body }, Type::array(Scalar::F64, 1));
        let Atom::Var(products) = products else { return products };
        self.let1(name, Expr::Reduce { op: ReduceOp::Sum, array: products }, Type::F64)
    }
}
