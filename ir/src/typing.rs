//! The types an expression yields, computed from the types of its operands.

use crate::program::{Atom, BinOp, Expr, Function, ReduceOp, UnOp};
use crate::types::{Scalar, Type};

impl Function {
    /// The types of the values `expr` yields, or a description of why it is
    /// ill-typed. `Pop` has no intrinsic type: it yields an empty list and
    /// the bound variable's type is taken as given.
    pub fn expr_types(&self, expr: &Expr) -> Result<Vec<Type>, String> {
        let t = |a: &Atom| self.atom_ty(a);
        Ok(match expr {
            Expr::Atom(a) => vec![t(a)],
            Expr::Unary(op, a) => {
                let ta = t(a);
                if !ta.is_scalar() {
                    return Err(format!("{} of an array", op.name()));
                }
                let ok = match op {
                    UnOp::Neg => ta.elem != Scalar::Bool,
                    UnOp::Not => ta.elem == Scalar::Bool,
                    UnOp::ToF64 => ta.elem == Scalar::I64 || ta.elem == Scalar::F64,
                    UnOp::ToI64 => ta.elem == Scalar::F64 || ta.elem == Scalar::I64,
                    _ => ta.elem == Scalar::F64,
                };
                if !ok {
                    return Err(format!("{} of {}", op.name(), ta));
                }
                vec![crate::program::unop_result(*op, ta)]
            }
            Expr::Binary(op, a, b) => {
                let (ta, tb) = (t(a), t(b));
                if ta != tb || !ta.is_scalar() {
                    return Err(format!("{} of {} and {}", op.name(), ta, tb));
                }
                let ok = match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => {
                        ta.elem != Scalar::Bool
                    }
                    BinOp::Rem => ta.elem == Scalar::I64,
                    BinOp::Pow | BinOp::Atan2 | BinOp::Polygamma => ta.elem == Scalar::F64,
                    BinOp::And | BinOp::Or => ta.elem == Scalar::Bool,
                    BinOp::Eq | BinOp::Ne => true,
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => ta.elem != Scalar::Bool,
                };
                if !ok {
                    return Err(format!("{} of {}", op.name(), ta));
                }
                vec![crate::program::binop_result(*op, ta)]
            }
            Expr::Index { array, indices } => {
                let ta = self.ty(*array);
                if indices.is_empty() || indices.len() > ta.rank as usize {
                    return Err(format!("{} indices into {}", indices.len(), ta));
                }
                if indices.iter().any(|i| t(i) != Type::I64) {
                    return Err("index is not i64".into());
                }
                vec![Type { elem: ta.elem, rank: ta.rank - indices.len() as u8 }]
            }
            Expr::Slice { array, lo, hi } => {
                let ta = self.ty(*array);
                if ta.rank == 0 || t(lo) != Type::I64 || t(hi) != Type::I64 {
                    return Err("bad slice".into());
                }
                vec![ta]
            }
            Expr::Reshape { array, dims } => {
                let ta = self.ty(*array);
                if ta.rank == 0 || dims.is_empty() || dims.len() > u8::MAX as usize {
                    return Err(format!("reshape of {} to rank {}", ta, dims.len()));
                }
                if dims.iter().any(|d| t(d) != Type::I64) {
                    return Err("reshape with a non-i64 extent".into());
                }
                vec![Type { elem: ta.elem, rank: dims.len() as u8 }]
            }
            Expr::Update { array, indices, value } => {
                let ta = self.ty(*array);
                if indices.is_empty() || indices.len() > ta.rank as usize {
                    return Err(format!("update of {} at {} indices", ta, indices.len()));
                }
                if indices.iter().any(|i| t(i) != Type::I64) {
                    return Err("update index is not i64".into());
                }
                let row = Type { elem: ta.elem, rank: ta.rank - indices.len() as u8 };
                if t(value) != row {
                    return Err(format!("update of {} with a {} where a {} belongs", ta, t(value), row));
                }
                vec![ta]
            }
            Expr::Dim { array, axis } => {
                if *axis >= self.ty(*array).rank {
                    return Err(format!("dim {} of {}", axis, self.ty(*array)));
                }
                vec![Type::I64]
            }
            Expr::Reduce { op, array } => {
                let ta = self.ty(*array);
                let ok = ta.rank == 1
                    && match op {
                        ReduceOp::Sum => ta.elem != Scalar::Bool,
                        _ => ta.elem == Scalar::F64,
                    };
                if !ok {
                    return Err(format!("{} of {}", op.name(), ta));
                }
                vec![Type::scalar(ta.elem)]
            }
            Expr::ArrayLit { elem_ty, elems } => {
                if elems.iter().any(|e| t(e) != *elem_ty) {
                    return Err("array literal elements of different types".into());
                }
                vec![elem_ty.lift()]
            }
            Expr::Build { n, index, body } => {
                if t(n) != Type::I64 || self.ty(*index) != Type::I64 {
                    return Err("build size or index is not i64".into());
                }
                body.results.iter().map(|r| t(r).lift()).collect()
            }
            Expr::Loop { n, index, states, init, body } => {
                if t(n) != Type::I64 || self.ty(*index) != Type::I64 {
                    return Err("loop count or index is not i64".into());
                }
                if states.len() != init.len() || states.len() != body.results.len() {
                    return Err("loop states, initial values and results differ in number".into());
                }
                for ((s, i), r) in states.iter().zip(init).zip(&body.results) {
                    if self.ty(*s) != t(i) || self.ty(*s) != t(r) {
                        return Err("loop state changes type".into());
                    }
                }
                states.iter().map(|s| self.ty(*s)).collect()
            }
            Expr::While { states, init, cond, body } => {
                if cond.results.len() != 1 || t(&cond.results[0]) != Type::BOOL {
                    return Err("while condition is not one bool".into());
                }
                if states.len() != init.len() || states.len() != body.results.len() {
                    return Err("while states, initial values and results differ in number".into());
                }
                for ((s, i), r) in states.iter().zip(init).zip(&body.results) {
                    if self.ty(*s) != t(i) || self.ty(*s) != t(r) {
                        return Err("while state changes type".into());
                    }
                }
                states.iter().map(|s| self.ty(*s)).collect()
            }
            Expr::If { cond, then_branch, else_branch } => {
                if t(cond) != Type::BOOL {
                    return Err("condition is not bool".into());
                }
                let a: Vec<Type> = then_branch.results.iter().map(t).collect();
                let b: Vec<Type> = else_branch.results.iter().map(t).collect();
                if a != b {
                    return Err("branches yield different types".into());
                }
                a
            }
            Expr::Call { .. } => return Err("call types need the program".into()),
            Expr::ZerosLike(v) => {
                let ta = self.ty(*v);
                if ta.rank == 0 {
                    return Err("zeros_like of a scalar".into());
                }
                vec![ta.with_elem(Scalar::F64)]
            }
            Expr::Zeros(dims) => {
                if dims.is_empty() || dims.len() > u8::MAX as usize {
                    return Err("zeros of rank 0 or above 255".into());
                }
                for d in dims {
                    if self.atom_ty(d) != Type::I64 {
                        return Err("zeros with a non-i64 extent".into());
                    }
                }
                vec![Type::array(Scalar::F64, dims.len() as u8)]
            }
            Expr::Pop => vec![],
            Expr::TapeMark => vec![Type::I64],
        })
    }
}
