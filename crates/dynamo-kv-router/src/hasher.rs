//! Maps keyed by block hashes need only a cheap mix, not SipHash: one folded multiply spreads
//! every input bit over the result. Token hashes are uniform already, but the ids engines give
//! their blocks may be patterned (small or sequential numbers), and a map keyed by an unmixed
//! patterned id degrades to long probe chains.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys that are not plain integers; fold them in (FNV-style).
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        let m = u128::from(n ^ self.0) * 0x9e37_79b9_7f4a_7c15;
        self.0 = (m >> 64) as u64 ^ m as u64;
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
