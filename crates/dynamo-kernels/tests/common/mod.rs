//! Helpers shared by the integration tests (no external crates).
#![allow(dead_code)]

use dynamo_kernels::{BlockLayout, DType, LayoutSpec};

pub const POISON: u8 = 0xDE;

/// Small deterministic xorshift generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

pub fn spec(layout: BlockLayout, dtype: DType, dims: [u32; 5]) -> LayoutSpec {
    let [num_layers, outer_dim, block_size, num_heads, head_dim] = dims;
    LayoutSpec {
        layout,
        dtype,
        num_layers,
        outer_dim,
        block_size,
        num_heads,
        head_dim,
    }
}

/// `[num_layers, outer_dim, block_size, num_heads, head_dim]` shapes exercised everywhere:
/// the Dynamo test shape, all-ones, odd primes, MLA (outer 1), the benchmark shape, and chunks
/// with more rows than the kernel's thread rows and a head count that does not divide them.
pub const SHAPES: [[u32; 5]; 9] = [
    [2, 2, 4, 3, 5],
    [1, 1, 1, 1, 1],
    [3, 1, 7, 5, 9],
    [1, 2, 3, 1, 127],
    [2, 2, 16, 8, 128],
    [5, 2, 2, 3, 3],
    [1, 2, 256, 3, 8],
    [1, 1, 128, 5, 64],
    [1, 1, 97, 7, 3],
];

pub const LAYOUTS: [BlockLayout; 2] = [BlockLayout::Nhd, BlockLayout::Hnd];
