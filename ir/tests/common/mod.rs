//! Helpers of the generated-program tests of the IR passes.

#![allow(dead_code)]

use arrayad_ir::builder::Builder;
use arrayad_ir::program::{Atom, FuncId, Program, StmtKind, VarId};
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::{interp, ArrayValue, Value};

/// `[n]f64`.
pub const F1: Type = Type { elem: Scalar::F64, rank: 1 };

/// xorshift64*: a deterministic generator without dependencies.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `if cond then { body }` as a statement.
pub fn when(b: &mut Builder, cond: Atom, body: impl FnOnce(&mut Builder)) {
    b.begin_block();
    body(b);
    let then_branch = b.end_block(vec![]);
    b.begin_block();
    let else_branch = b.end_block(vec![]);
    b.stmt(StmtKind::If { cond, then_branch, else_branch });
}

pub fn v(x: VarId) -> Atom {
    Atom::Var(x)
}

/// The bits of every element of `f64` results, to compare them exactly.
pub fn bits(values: &[Value]) -> Vec<Vec<u64>> {
    values.iter().map(|v| v.f64_elements().expect("f64 results").iter().map(|x| x.to_bits()).collect()).collect()
}

/// Asserts that `after` (a pass's output) gives bitwise the results of
/// `before` under the interpreter, for `x: [n]f64` at each `n` of `sizes`
/// (generated case `case`; `what` names the transformed program).
pub fn assert_same_results(before: &Program, after: &Program, case: usize, sizes: &[usize], what: &str) {
    for &n in sizes {
        let data: Vec<f64> = (0..n).map(|k| 0.3 + k as f64 * 1.37 + (case % 5) as f64 * 0.11).collect();
        let args = [Value::Array(ArrayValue::f64(vec![n], data).expect("array"))];
        let want = interp::run(before, FuncId(0), &args).expect("original program runs");
        let got = interp::run(after, FuncId(0), &args).unwrap_or_else(|e| panic!("{what} program fails: {e:?}"));
        assert_eq!(bits(&got), bits(&want), "case {case}, n = {n}:\n{}", arrayad_ir::printer::print_program(after));
    }
}
