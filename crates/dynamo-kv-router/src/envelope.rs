//! Stock Dynamo 1.6's event-plane messages: the envelope every publication travels in
//! (`publisher_id`, `sequence`, `published_at` in ms, `topic`, msgpack `payload` as bin) and the
//! `kv_metrics` payload, `ActiveLoad`. Both are msgpack maps with named fields.

use serde::{Deserialize, Serialize};

/// The topic of KV event batches.
pub const KV_EVENTS_TOPIC: &str = "kv-events";
/// The topic of load reports ([`ActiveLoad`]).
pub const KV_METRICS_TOPIC: &str = "kv_metrics";

/// One event-plane publication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// Random per publisher object, 53 bits so it survives JSON.
    pub publisher_id: u64,
    /// Per publisher, from 0.
    pub sequence: u64,
    /// Milliseconds since the Unix epoch.
    pub published_at: u64,
    pub topic: String,
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

impl Envelope {
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(self).expect("an envelope always encodes")
    }

    /// The error names what did not match stock's envelope.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        rmp_serde::from_slice(bytes).map_err(|e| format!("not an event-plane envelope (msgpack map publisher_id, sequence, published_at, topic, payload): {e}"))
    }
}

/// A worker's load report (`kv_metrics` topic). Workers fill decode blocks and / or KV used
/// blocks; routers fill prefill tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveLoad {
    pub worker_id: u64,
    #[serde(default)]
    pub dp_rank: u32,
    pub active_decode_blocks: Option<u64>,
    pub active_prefill_tokens: Option<u64>,
    pub kv_used_blocks: Option<u64>,
}

impl ActiveLoad {
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(self).expect("a load report always encodes")
    }

    /// The report as publication `sequence` of `publisher_id` on `kv_metrics`, at `now_ms`.
    pub fn envelope(&self, publisher_id: u64, sequence: u64, now_ms: u64) -> Envelope {
        Envelope {
            publisher_id,
            sequence,
            published_at: now_ms,
            topic: KV_METRICS_TOPIC.into(),
            payload: self.encode(),
        }
    }

    /// The error names what did not match stock's `ActiveLoad`.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        rmp_serde::from_slice(bytes).map_err(|e| format!("not a load report (msgpack ActiveLoad: worker_id, dp_rank, active_decode_blocks, active_prefill_tokens, kv_used_blocks): {e}"))
    }
}
