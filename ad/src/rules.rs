//! Derivative rules of the scalar primitives, as tangent (linear) code.
//!
//! Each rule emits primal statements that compute the coefficients (the
//! residuals the Delta bindings need: `cos x` for `sin x`, ...) and linear
//! statements `dy = c * dx`. The same rules serve forward mode directly and
//! reverse mode after unzipping and transposition (Krawiec et al. 2022,
//! Fig. 3 for the dual-number rules; Smeding's thesis ch. 4.6 for
//! "forward-differentiate, unzip, transpose"). Conventions at
//! non-differentiable points follow LANGUAGE.md section 6.
//!
//! To add a primitive: give it a rule here (and a transposition rule in
//! `reverse.rs` if it is a new *linear* form).

use crate::forward::Jvp;
use arrayad_ir::builder::Builder;
use arrayad_ir::{Atom, BinOp, Block, Expr, Type, UnOp};

/// `2 / sqrt(pi)`, the scale of erf's derivative.
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

impl Jvp {
    /// The tangent of `y = op(x)` given the tangent `dx` of `x`; `None` when
    /// the derivative is identically zero.
    pub(crate) fn unary_rule(&mut self, b: &mut Builder, op: UnOp, x: Atom, y: Atom, dx: Atom) -> Option<Atom> {
        use UnOp::*;
        let coeff = match op {
            Neg => return Some(self.lin(b, Expr::Unary(Neg, dx), Type::F64, None)),
            Not | Floor | Ceil | ToI64 | ToF64 | Sign => return None,
            Log => return Some(self.lin(b, Expr::Binary(BinOp::Div, dx, x), Type::F64, None)),
            Log1p => {
                let d = b.binary(BinOp::Add, Atom::F64(1.0), x);
                return Some(self.lin(b, Expr::Binary(BinOp::Div, dx, d), Type::F64, None));
            }
            Sqrt => {
                let d = b.binary(BinOp::Mul, Atom::F64(2.0), y);
                return Some(self.lin(b, Expr::Binary(BinOp::Div, dx, d), Type::F64, None));
            }
            Exp => y,
            Expm1 => b.binary(BinOp::Add, y, Atom::F64(1.0)),
            Sin => b.unary(Cos, x),
            Cos => {
                let s = b.unary(Sin, x);
                b.unary(Neg, s)
            }
            Tan => {
                let y2 = b.binary(BinOp::Mul, y, y);
                b.binary(BinOp::Add, Atom::F64(1.0), y2)
            }
            Tanh => {
                let y2 = b.binary(BinOp::Mul, y, y);
                b.binary(BinOp::Sub, Atom::F64(1.0), y2)
            }
            Sinh => b.unary(Cosh, x),
            Cosh => b.unary(Sinh, x),
            Asin | Acos => {
                let x2 = b.binary(BinOp::Mul, x, x);
                let one_m = b.binary(BinOp::Sub, Atom::F64(1.0), x2);
                let r = b.unary(Sqrt, one_m);
                let num = if op == Asin { 1.0 } else { -1.0 };
                b.binary(BinOp::Div, Atom::F64(num), r)
            }
            Atan => {
                let x2 = b.binary(BinOp::Mul, x, x);
                let d = b.binary(BinOp::Add, Atom::F64(1.0), x2);
                b.binary(BinOp::Div, Atom::F64(1.0), d)
            }
            Erf => {
                let x2 = b.binary(BinOp::Mul, x, x);
                let nx2 = b.unary(Neg, x2);
                let e = b.unary(Exp, nx2);
                b.binary(BinOp::Mul, Atom::F64(TWO_OVER_SQRT_PI), e)
            }
            Lgamma => b.unary(Digamma, x),
            // digamma' = trigamma = polygamma(1, .), and so on to any order.
            Digamma => b.binary(BinOp::Polygamma, Atom::F64(1.0), x),
            // abs'(x) = sign(x), with abs'(0) = 0.
            Abs => b.unary(Sign, x),
        };
        Some(self.scale(b, coeff, dx))
    }

    /// The tangent of `y = a op b` given the tangents of `a` and `b`
    /// (`None` = zero).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn binary_rule(
        &mut self,
        b: &mut Builder,
        op: BinOp,
        x: Atom,
        z: Atom,
        y: Atom,
        dx: Option<Atom>,
        dz: Option<Atom>,
    ) -> Option<Atom> {
        if dx.is_none() && dz.is_none() {
            return None;
        }
        match op {
            BinOp::Add => self.add(b, dx, dz),
            BinOp::Sub => {
                let ndz = dz.map(|d| self.lin(b, Expr::Unary(UnOp::Neg, d), Type::F64, None));
                self.add(b, dx, ndz)
            }
            BinOp::Mul => {
                let t1 = dx.map(|d| self.scale(b, z, d));
                let t2 = dz.map(|d| self.scale(b, x, d));
                self.add(b, t1, t2)
            }
            BinOp::Div => {
                // d(x/z) = (dx - y dz) / z
                let t = dz.map(|d| {
                    let s = self.scale(b, y, d);
                    self.lin(b, Expr::Unary(UnOp::Neg, s), Type::F64, None)
                });
                let num = self.add(b, dx, t)?;
                Some(self.lin(b, Expr::Binary(BinOp::Div, num, z), Type::F64, None))
            }
            BinOp::Pow => {
                // dy/dx = (z == 0) ? 0 : z x^(z-1);  dy/dz = (x == 0) ? 0 : y log x
                let t1 = dx.map(|d| {
                    let is0 = b.binary(BinOp::Eq, z, Atom::F64(0.0));
                    b.begin_block();
                    let then_b = b.end_block(vec![Atom::F64(0.0)]);
                    b.begin_block();
                    let zm1 = b.binary(BinOp::Sub, z, Atom::F64(1.0));
                    let p = b.binary(BinOp::Pow, x, zm1);
                    let c = b.binary(BinOp::Mul, z, p);
                    let else_b = b.end_block(vec![c]);
                    let c = select(b, is0, then_b, else_b);
                    self.scale(b, c, d)
                });
                let t2 = dz.map(|d| {
                    let is0 = b.binary(BinOp::Eq, x, Atom::F64(0.0));
                    b.begin_block();
                    let then_b = b.end_block(vec![Atom::F64(0.0)]);
                    b.begin_block();
                    let l = b.unary(UnOp::Log, x);
                    let c = b.binary(BinOp::Mul, y, l);
                    let else_b = b.end_block(vec![c]);
                    let c = select(b, is0, then_b, else_b);
                    self.scale(b, c, d)
                });
                self.add(b, t1, t2)
            }
            // y = polygamma(x, z), x the (constant, whole-number) order:
            // dy = polygamma(x + 1, z) dz, differentiable again to any order.
            BinOp::Polygamma => {
                let dz = dz?;
                let n1 = b.binary(BinOp::Add, x, Atom::F64(1.0));
                let c = b.binary(BinOp::Polygamma, n1, z);
                Some(self.scale(b, c, dz))
            }
            BinOp::Atan2 => {
                // y = atan2(x, z): dy = (z dx - x dz) / (x^2 + z^2)
                let x2 = b.binary(BinOp::Mul, x, x);
                let z2 = b.binary(BinOp::Mul, z, z);
                let den = b.binary(BinOp::Add, x2, z2);
                let t1 = dx.map(|d| {
                    let c = b.binary(BinOp::Div, z, den);
                    self.scale(b, c, d)
                });
                let t2 = dz.map(|d| {
                    let nx = b.unary(UnOp::Neg, x);
                    let c = b.binary(BinOp::Div, nx, den);
                    self.scale(b, c, d)
                });
                self.add(b, t1, t2)
            }
            BinOp::Min | BinOp::Max => {
                // The chosen operand gets 1, the other 0; a tie splits 1/2 each.
                let (win, lose) = if op == BinOp::Max { (BinOp::Gt, BinOp::Lt) } else { (BinOp::Lt, BinOp::Gt) };
                let wins = b.binary(win, x, z);
                b.begin_block();
                let then_b = b.end_block(vec![Atom::F64(1.0)]);
                b.begin_block();
                let loses = b.binary(lose, x, z);
                b.begin_block();
                let t = b.end_block(vec![Atom::F64(0.0)]);
                b.begin_block();
                let e = b.end_block(vec![Atom::F64(0.5)]);
                let inner = select(b, loses, t, e);
                let else_b = b.end_block(vec![inner]);
                let cx = select(b, wins, then_b, else_b);
                let t1 = dx.map(|d| self.scale(b, cx, d));
                let t2 = dz.map(|d| {
                    let cz = b.binary(BinOp::Sub, Atom::F64(1.0), cx);
                    self.scale(b, cz, d)
                });
                self.add(b, t1, t2)
            }
            // Integer arithmetic, comparisons and logic carry no derivative.
            _ => None,
        }
    }
}

/// `if c then A else B` yielding one scalar.
pub(crate) fn select(b: &mut Builder, c: Atom, then_b: Block, else_b: Block) -> Atom {
    b.let_one("sel", Expr::If { cond: c, then_branch: then_b, else_branch: else_b })
}
