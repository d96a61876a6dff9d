//! KV block hashing the way stock Dynamo's KV router does it: each full block of
//! `block_size` token ids, as little-endian u32s, hashed with XXH3-64; a sequence hash chains
//! the block hashes so a block's identity includes everything before it. A trailing partial
//! block is never hashed (it is not a cached unit).

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The seed stock Dynamo uses for block and sequence hashes.
pub const KV_HASH_SEED: u64 = 1337;

/// What makes the same tokens hash differently: a LoRA adapter or a cache salt.
#[derive(Debug, Clone, Default)]
pub struct HashScope<'a> {
    pub lora_name: Option<&'a str>,
    pub salt: Option<&'a str>,
}

impl HashScope<'_> {
    /// The seed for this scope: 1337, plus the XXH3 of the LoRA name (seed 0) and of the salt
    /// (seed 1) when they are non-empty, with wrapping addition.
    pub fn seed(&self) -> u64 {
        let mut seed = KV_HASH_SEED;
        if let Some(lora) = self.lora_name.filter(|s| !s.is_empty()) {
            seed = seed.wrapping_add(xxh3_64_with_seed(lora.as_bytes(), 0));
        }
        if let Some(salt) = self.salt.filter(|s| !s.is_empty()) {
            seed = seed.wrapping_add(xxh3_64_with_seed(salt.as_bytes(), 1));
        }
        seed
    }
}

/// The local hash of every full block of `tokens`.
///
/// # Panics
/// When `block_size` is 0.
pub fn block_hashes(tokens: &[u32], block_size: usize, scope: &HashScope) -> Vec<u64> {
    assert!(block_size > 0, "block_size must be at least 1");
    let seed = scope.seed();
    let mut bytes = Vec::with_capacity(block_size * 4);
    tokens
        .chunks_exact(block_size)
        .map(|block| {
            bytes.clear();
            for id in block {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            xxh3_64_with_seed(&bytes, seed)
        })
        .collect()
}

/// Chains local block hashes into sequence hashes: the first is the first block's hash, each
/// next one hashes the previous sequence hash and the block's hash (both u64 little-endian).
pub fn sequence_hashes(block_hashes: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(block_hashes.len());
    let mut prev: Option<u64> = None;
    for &block in block_hashes {
        let next = match prev {
            None => block,
            Some(p) => {
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&p.to_le_bytes());
                bytes[8..].copy_from_slice(&block.to_le_bytes());
                xxh3_64_with_seed(&bytes, KV_HASH_SEED)
            }
        };
        out.push(next);
        prev = Some(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_full_blocks_are_hashed() {
        let tokens: Vec<u32> = (0..47).collect();
        assert_eq!(block_hashes(&tokens, 16, &HashScope::default()).len(), 2);
        assert!(block_hashes(&tokens[..15], 16, &HashScope::default()).is_empty());
    }

    #[test]
    fn a_block_hash_is_xxh3_of_little_endian_ids_with_seed_1337() {
        let tokens = [1u32, 2, 3, 4];
        let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        assert_eq!(
            block_hashes(&tokens, 4, &HashScope::default()),
            vec![xxh3_64_with_seed(&bytes, 1337)]
        );
    }

    #[test]
    fn equal_blocks_hash_equal_but_their_sequence_hashes_differ() {
        let tokens: Vec<u32> = [7u32; 32].to_vec();
        let blocks = block_hashes(&tokens, 16, &HashScope::default());
        assert_eq!(blocks[0], blocks[1]);
        let seq = sequence_hashes(&blocks);
        assert_eq!(seq[0], blocks[0]);
        assert_ne!(seq[1], seq[0]);
    }

    #[test]
    fn lora_and_salt_change_the_seed_and_empty_strings_do_not() {
        let base = HashScope::default().seed();
        assert_eq!(
            HashScope {
                lora_name: Some(""),
                salt: Some("")
            }
            .seed(),
            base
        );
        let lora = HashScope {
            lora_name: Some("adapter"),
            salt: None,
        }
        .seed();
        let salt = HashScope {
            lora_name: None,
            salt: Some("adapter"),
        }
        .seed();
        assert_ne!(lora, base);
        assert_ne!(lora, salt);
    }
}
