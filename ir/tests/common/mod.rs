//! Helpers of the generated-program tests of the IR passes.

#![allow(dead_code)]

use arrayad_ir::program::{Atom, VarId};
use arrayad_ir::types::{Scalar, Type};
use arrayad_ir::Value;

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

pub fn v(x: VarId) -> Atom {
    Atom::Var(x)
}

/// The bits of every element of `f64` results, to compare them exactly.
pub fn bits(values: &[Value]) -> Vec<Vec<u64>> {
    values.iter().map(|v| v.f64_elements().expect("f64 results").iter().map(|x| x.to_bits()).collect()).collect()
}
