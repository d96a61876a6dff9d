//! Stock Dynamo 1.6's KV event payload, decoded: a msgpack array of RouterEvent maps
//! (`worker_id`, `storage_tier`, `residency_domain`, `event: {event_id, data, dp_rank}`), where
//! `data` is `{"stored": {...}}`, `{"removed": {...}}` or the bare string `"cleared"`.
//! Decoding a whole batch here keeps the frontend at one boundary crossing per message.

use serde::Deserialize;

use crate::index::{KvEventData, StoredBlock};
use crate::WorkerKey;

/// One decoded event of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireEvent {
    pub worker: WorkerKey,
    pub event_id: u64,
    /// `device` unless the publisher says otherwise; only device-tier events feed the index.
    pub storage_tier: String,
    pub data: KvEventData,
}

#[derive(Deserialize)]
struct RouterEvent {
    worker_id: u64,
    #[serde(default)]
    storage_tier: Option<String>,
    event: KvCacheEvent,
}

#[derive(Deserialize)]
struct KvCacheEvent {
    event_id: u64,
    data: Data,
    #[serde(default)]
    dp_rank: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Data {
    Stored(Stored),
    Removed(Removed),
    Cleared,
}

#[derive(Deserialize)]
struct Stored {
    #[serde(default)]
    parent_hash: Option<u64>,
    blocks: Vec<Block>,
}

#[derive(Deserialize)]
struct Block {
    block_hash: u64,
    tokens_hash: u64,
}

#[derive(Deserialize)]
struct Removed {
    block_hashes: Vec<u64>,
}

/// Decodes a `kv-events` payload. The error names what did not match stock's format.
pub fn decode_event_batch(payload: &[u8]) -> Result<Vec<WireEvent>, String> {
    let events: Vec<RouterEvent> = rmp_serde::from_slice(payload).map_err(|e| format!("not a KV event batch (msgpack array of RouterEvent): {e}"))?;
    Ok(events
        .into_iter()
        .map(|e| WireEvent {
            worker: WorkerKey { worker_id: e.worker_id, dp_rank: e.event.dp_rank },
            event_id: e.event.event_id,
            storage_tier: e.storage_tier.unwrap_or_else(|| "device".to_owned()),
            data: match e.event.data {
                Data::Stored(s) => KvEventData::Stored { parent_hash: s.parent_hash, blocks: s.blocks.into_iter().map(|b| StoredBlock { block_hash: b.block_hash, tokens_hash: b.tokens_hash }).collect() },
                Data::Removed(r) => KvEventData::Removed { block_hashes: r.block_hashes },
                Data::Cleared => KvEventData::Cleared,
            },
        })
        .collect())
}
