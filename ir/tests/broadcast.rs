//! Forwarding of broadcast cotangents (`passes::broadcast`) on every
//! combination of the shapes around it: the zero array made by `zeros`,
//! `zeros_like` or `zeros` of another extent; the fill loop over the
//! extent, over `dim a 0`, or over fewer elements, alone or inside another
//! loop; another write or a read before the fill; reads at the loop index
//! or at an index the pass cannot prove in bounds. The rewritten program
//! must give bitwise the original results under the interpreter, the fill
//! must go exactly when the module's conditions hold.

mod common;

use arrayad_ir::builder::Builder;
use arrayad_ir::passes::broadcast::forward_broadcasts;
use arrayad_ir::program::*;
use arrayad_ir::types::Type;
use arrayad_ir::verify::verify_program;
use common::{assert_same_results, v, when, F1};

#[derive(Clone, Copy, Debug)]
struct Shape {
    /// 0: `zeros_like x`, 1: `zeros [n]`, 2: `zeros [n + 1]`.
    zeros: u8,
    /// 0: the fill runs to `n`, 1: to `dim a 0`, 2: to `n / 2`.
    count: u8,
    /// The fill runs inside `for t < 2`.
    nested: bool,
    /// `a[0] += 1.0` (under `n > 0`) after the fill.
    second_write: bool,
    /// A read of `a` before the fill.
    early_read: bool,
    /// The reads are at `n - 1 - i`, in bounds but not provably.
    mirrored: bool,
}

impl Shape {
    /// Whether the fill may go.
    fn qualifies(self) -> bool {
        // The fill covers the extent: all of it, or `n` of a `zeros [n]`
        // or `zeros_like x`.
        let covers = self.count == 1 || (self.count == 0 && self.zeros != 2);
        let only_write = !(self.nested || self.second_write || self.early_read);
        covers && only_write
    }
}

fn program(s: Shape) -> Program {
    let (mut f, ps) = Function::with_params("f", &[F1], &[F1]);
    let x = ps[0];
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let g = b.binary(BinOp::Mul, Atom::F64(1.5), Atom::F64(-0.75));
    let a = match s.zeros {
        0 => b.let1("a", Expr::ZerosLike(x), F1),
        1 => b.let1("a", Expr::Zeros(vec![n]), F1),
        _ => {
            let m = b.binary(BinOp::Add, n, Atom::I64(1));
            b.let1("a", Expr::Zeros(vec![m]), F1)
        }
    };
    let out = b.let1("out", Expr::ZerosLike(x), F1);
    let positive = b.binary(BinOp::Gt, n, Atom::I64(0));
    if s.early_read {
        when(&mut b, positive, |b| {
            let r = b.let_one("r", Expr::Index { array: a, indices: vec![Atom::I64(0)] });
            b.stmt(StmtKind::AccAdd { acc: out, indices: vec![Atom::I64(0)], value: r });
        });
    }
    let count = match s.count {
        0 => n,
        1 => b.let_one("da", Expr::Dim { array: a, axis: 0 }),
        _ => b.binary(BinOp::Div, n, Atom::I64(2)),
    };
    let fill = |b: &mut Builder| {
        let j = b.var("j", Type::I64);
        b.begin_block();
        b.stmt(StmtKind::AccAdd { acc: a, indices: vec![v(j)], value: g });
        let body = b.end_block(vec![]);
        b.stmt(StmtKind::For { n: count, index: j, reverse: true, body });
    };
    if s.nested {
        let t = b.var("t", Type::I64);
        b.begin_block();
        fill(&mut b);
        let body = b.end_block(vec![]);
        b.stmt(StmtKind::For { n: Atom::I64(2), index: t, reverse: false, body });
    } else {
        fill(&mut b);
    }
    if s.second_write {
        when(&mut b, positive, |b| {
            b.stmt(StmtKind::AccAdd { acc: a, indices: vec![Atom::I64(0)], value: Atom::F64(1.0) });
        });
    }
    let i = b.var("i", Type::I64);
    b.begin_block();
    let at = if s.mirrored {
        let last = b.binary(BinOp::Sub, n, Atom::I64(1));
        b.binary(BinOp::Sub, last, v(i))
    } else {
        v(i)
    };
    let c = b.let_one("c", Expr::Index { array: a, indices: vec![at] });
    let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![v(i)] });
    let t = b.binary(BinOp::Mul, c, xi);
    b.stmt(StmtKind::AccAdd { acc: out, indices: vec![v(i)], value: t });
    let body = b.end_block(vec![]);
    b.stmt(StmtKind::For { n, index: i, reverse: true, body });
    f.body = b.finish(vec![v(out)]);
    Program { file: "t.arr".into(), funcs: vec![f] }
}

/// Whether a loop whose body adds into `a` is left.
fn has_fill(b: &Block) -> bool {
    let mut found = false;
    arrayad_ir::visit::for_each_block(b, &mut |b| {
        found |= b.stmts.iter().any(|s| match &s.kind {
            StmtKind::For { body, .. } => {
                matches!(body.stmts.as_slice(), [Stmt { kind: StmtKind::AccAdd { value: Atom::Var(_), .. }, .. }])
            }
            _ => false,
        });
    });
    found
}

#[test]
fn broadcasts_are_forwarded_exactly_when_legal_with_bitwise_the_same_results() {
    let mut case = 0;
    let (mut forwarded, mut kept) = (0, 0);
    for zeros in 0..3 {
        for count in 0..3 {
            for bits in 0..16u8 {
                let s = Shape {
                    zeros,
                    count,
                    nested: bits & 1 != 0,
                    second_write: bits & 2 != 0,
                    early_read: bits & 4 != 0,
                    mirrored: bits & 8 != 0,
                };
                let p = program(s);
                verify_program(&p).unwrap_or_else(|e| panic!("{s:?}: {e:?}"));
                assert!(has_fill(&p.funcs[0].body));
                let mut q = p.clone();
                forward_broadcasts(&mut q.funcs[0]);
                verify_program(&q).unwrap_or_else(|e| panic!("{s:?}: rewritten program fails to verify: {e:?}"));
                let gone = !has_fill(&q.funcs[0].body);
                assert_eq!(gone, s.qualifies(), "{s:?}:\n{}", arrayad_ir::printer::print_program(&q));
                forwarded += usize::from(gone);
                kept += usize::from(!gone);
                assert_same_results(&p, &q, case, &[0, 1, 2, 5], "forwarded");
                case += 1;
            }
        }
    }
    assert!(forwarded >= 8 && kept >= 100, "{forwarded} forwarded, {kept} kept");
}
