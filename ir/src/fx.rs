//! A fast, non-cryptographic hash for the compiler's tables keyed by
//! variables and small keys (the multiply-rotate hash of rustc and Firefox):
//! the passes look a variable up several times per statement, and the
//! standard library's SipHash dominated their time on large functions.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl FxHasher {
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.add(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.add(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }
    fn finish(&self) -> u64 {
        // The multiply-rotate state's low bits depend only on the low bits
        // of what was hashed: keys that differ in their high bits (`f64`
        // literals) would share buckets. A final mix spreads every bit.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^ (x >> 33)
    }
}

/// [`FxHasher`] for collections.
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, FxBuildHasher>;
/// A `HashSet` with [`FxHasher`].
pub type FxHashSet<K> = HashSet<K, FxBuildHasher>;
