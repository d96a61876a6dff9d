//! vLLM's raw KV event batches, as its engine publishes them on its own ZMQ socket: a msgpack
//! array `[ts, events, dp_rank?]` whose events are tagged arrays (`BlockStored`,
//! `BlockRemoved`, `AllBlocksCleared`). A worker relays them to the router in Dynamo's format.

use serde::Deserialize;

/// vLLM names a block by an int, or (newer versions) by a hash digest in bytes.
#[derive(Deserialize)]
#[serde(untagged)]
enum ExternalHash {
    Unsigned(u64),
    Signed(i64),
    Digest(#[serde(with = "serde_bytes")] Vec<u8>),
}

impl ExternalHash {
    /// Only identity matters for these ids (the router matches on the tokens' hash), so a
    /// digest is folded to its first 8 bytes, and a negative int keeps its bits.
    fn id(&self) -> u64 {
        match self {
            Self::Unsigned(n) => *n,
            Self::Signed(n) => *n as u64,
            Self::Digest(bytes) => {
                let mut first = [0u8; 8];
                let n = bytes.len().min(8);
                first[..n].copy_from_slice(&bytes[..n]);
                u64::from_le_bytes(first)
            }
        }
    }
}

/// One relayed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VllmEvent {
    /// Full blocks of `block_size` tokens, `token_ids` all of them in order.
    Stored {
        block_hashes: Vec<u64>,
        parent_hash: Option<u64>,
        token_ids: Vec<u32>,
        block_size: u32,
    },
    Removed {
        block_hashes: Vec<u64>,
    },
    Cleared,
}

/// A decoded batch.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmBatch {
    pub events: Vec<VllmEvent>,
    pub dp_rank: Option<u32>,
}

#[derive(Deserialize)]
struct RawBatch(
    f64,
    Vec<Vec<rmpv_like::Value>>,
    #[serde(default)] Option<u32>,
);

/// A tiny dynamic msgpack value: enough to read the tagged event arrays.
mod rmpv_like {
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(untagged)]
    pub enum Value {
        Nil(()),
        Str(String),
        // Before Hash: serde_bytes would also take a list of small ints as a digest.
        List(Vec<Value>),
        Hash(super::ExternalHash),
        Other(serde::de::IgnoredAny),
    }
}

use rmpv_like::Value;

fn hashes(v: Option<&Value>, field: &str) -> Result<Vec<u64>, String> {
    match v {
        Some(Value::List(items)) => items
            .iter()
            .map(|i| match i {
                Value::Hash(h) => Ok(h.id()),
                _ => Err(format!("{field}: every entry must be an int or bytes hash")),
            })
            .collect(),
        _ => Err(format!("{field}: must be a list of hashes")),
    }
}

fn event(fields: &[Value]) -> Result<VllmEvent, String> {
    let tag = match fields.first() {
        Some(Value::Str(tag)) => tag.as_str(),
        _ => return Err("an event must start with its type name".into()),
    };
    match tag {
        "BlockStored" => {
            let parent_hash = match fields.get(2) {
                Some(Value::Hash(h)) => Some(h.id()),
                Some(Value::Nil(())) | None => None,
                _ => return Err("BlockStored.parent_block_hash: must be a hash or nil".into()),
            };
            let token_ids = match fields.get(3) {
                Some(Value::List(items)) => items
                    .iter()
                    .map(|i| match i {
                        Value::Hash(ExternalHash::Unsigned(n)) if *n <= u64::from(u32::MAX) => {
                            Ok(*n as u32)
                        }
                        _ => Err(
                            "BlockStored.token_ids: every entry must be a token id (u32)"
                                .to_owned(),
                        ),
                    })
                    .collect::<Result<Vec<u32>, String>>()?,
                _ => return Err("BlockStored.token_ids: must be a list".into()),
            };
            let block_size = match fields.get(4) {
                Some(Value::Hash(ExternalHash::Unsigned(n)))
                    if *n > 0 && *n <= u64::from(u32::MAX) =>
                {
                    *n as u32
                }
                _ => return Err("BlockStored.block_size: must be a positive int".into()),
            };
            let block_hashes = hashes(fields.get(1), "BlockStored.block_hashes")?;
            if token_ids.len() != block_hashes.len() * block_size as usize {
                return Err(format!(
                    "BlockStored: {} token ids do not fill {} blocks of {block_size}",
                    token_ids.len(),
                    block_hashes.len()
                ));
            }
            Ok(VllmEvent::Stored {
                block_hashes,
                parent_hash,
                token_ids,
                block_size,
            })
        }
        "BlockRemoved" => Ok(VllmEvent::Removed {
            block_hashes: hashes(fields.get(1), "BlockRemoved.block_hashes")?,
        }),
        "AllBlocksCleared" => Ok(VllmEvent::Cleared),
        other => Err(format!(
            "unknown event type {other:?} (expected BlockStored, BlockRemoved or AllBlocksCleared)"
        )),
    }
}

/// Decodes one vLLM batch; the error names the event and field that did not match.
pub fn decode_vllm_batch(bytes: &[u8]) -> Result<VllmBatch, String> {
    let RawBatch(_ts, raw, dp_rank) = rmp_serde::from_slice(bytes)
        .map_err(|e| format!("not a vLLM KV event batch (msgpack [ts, events, dp_rank]): {e}"))?;
    let events = raw
        .iter()
        .enumerate()
        .map(|(i, fields)| event(fields).map_err(|e| format!("event {i}: {e}")))
        .collect::<Result<_, _>>()?;
    Ok(VllmBatch { events, dp_rank })
}
