//! KV block hashes as stock Dynamo's router computes them.

use dynamo_llm_core::block_hash::{block_hashes, sequence_hashes, HashScope};
use napi::bindgen_prelude::BigUint64Array;
use napi_derive::napi;

use crate::convert::invalid;

/// What scopes the hashes: a LoRA adapter name and a cache salt.
#[napi(object)]
pub struct BlockHashOptions {
    pub lora_name: Option<String>,
    pub salt: Option<String>,
}

/// The XXH3-64 hash of every full block of `blockSize` token ids (a trailing partial block is
/// not hashed).
#[napi]
pub fn compute_block_hashes(
    token_ids: &[u32],
    block_size: u32,
    options: Option<BlockHashOptions>,
) -> napi::Result<BigUint64Array> {
    if block_size == 0 {
        return Err(invalid("blockSize must be at least 1, got 0"));
    }
    let options = options.unwrap_or(BlockHashOptions {
        lora_name: None,
        salt: None,
    });
    let scope = HashScope {
        lora_name: options.lora_name.as_deref(),
        salt: options.salt.as_deref(),
    };
    Ok(BigUint64Array::new(block_hashes(
        token_ids,
        block_size as usize,
        &scope,
    )))
}

/// Sequence hashes chained from block hashes.
#[napi]
pub fn compute_sequence_hashes(block_hashes: &[u64]) -> BigUint64Array {
    BigUint64Array::new(sequence_hashes(block_hashes))
}
