//! Stock Dynamo 1.6's KV event payload, decoded: a msgpack array of RouterEvent maps
//! (`worker_id`, `storage_tier`, `residency_domain`, `event: {event_id, data, dp_rank}`), where
//! `data` is `{"stored": {...}}`, `{"removed": {...}}` or the bare string `"cleared"`.
//! Decoding (and encoding) a whole batch here keeps each side at one boundary crossing per message.

use serde::{Deserialize, Serialize};

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

impl From<RouterEvent> for WireEvent {
    fn from(e: RouterEvent) -> Self {
        WireEvent {
            worker: WorkerKey {
                worker_id: e.worker_id,
                dp_rank: e.event.dp_rank,
            },
            event_id: e.event.event_id,
            storage_tier: e.storage_tier.unwrap_or_else(|| "device".to_owned()),
            data: match e.event.data {
                Data::Stored(s) => KvEventData::Stored {
                    parent_hash: s.parent_hash,
                    blocks: s
                        .blocks
                        .into_iter()
                        .map(|b| StoredBlock {
                            block_hash: b.block_hash,
                            tokens_hash: b.tokens_hash,
                        })
                        .collect(),
                },
                Data::Removed(r) => KvEventData::Removed {
                    block_hashes: r.block_hashes,
                },
                Data::Cleared => KvEventData::Cleared,
            },
        }
    }
}

/// Decodes a `kv-events` payload. The error names what did not match stock's format.
pub fn decode_event_batch(payload: &[u8]) -> Result<Vec<WireEvent>, String> {
    let events: Vec<RouterEvent> = rmp_serde::from_slice(payload)
        .map_err(|e| format!("not a KV event batch (msgpack array of RouterEvent): {e}"))?;
    Ok(events.into_iter().map(WireEvent::from).collect())
}

/// A worker's answer to a recovery query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryReply {
    /// The events asked for, with their ids.
    Events {
        events: Vec<WireEvent>,
        last_event_id: u64,
    },
    /// The worker's whole cache (ids meaningless), as of `last_event_id`.
    TreeDump {
        events: Vec<WireEvent>,
        last_event_id: u64,
    },
    /// Why the worker could not answer (`TooNew`, `InvalidRange`, `Error`, ...).
    Refused(String),
}

#[derive(Deserialize)]
struct RawEvents {
    events: Vec<RouterEvent>,
    last_event_id: u64,
}

/// Decodes a worker's JSON reply to a recovery query (stock's externally tagged
/// `WorkerKvQueryResponse`); replies other than events or a dump come back as `Refused`.
pub fn decode_recovery_reply(json: &str) -> Result<RecoveryReply, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("recovery reply is not JSON: {e}"))?;
    let Some((tag, body)) = value
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
    else {
        return Err(format!(
            "not a WorkerKvQueryResponse (an object with one variant): {value}"
        ));
    };
    let events = |body: &serde_json::Value| -> Result<(Vec<WireEvent>, u64), String> {
        let raw: RawEvents =
            serde_json::from_value(body.clone()).map_err(|e| format!("{tag}: {e}"))?;
        Ok((
            raw.events.into_iter().map(WireEvent::from).collect(),
            raw.last_event_id,
        ))
    };
    Ok(match tag.as_str() {
        "Events" => events(body).map(|(events, last_event_id)| RecoveryReply::Events {
            events,
            last_event_id,
        })?,
        "TreeDump" => events(body).map(|(events, last_event_id)| RecoveryReply::TreeDump {
            events,
            last_event_id,
        })?,
        other => RecoveryReply::Refused(format!("{other}: {body}")),
    })
}

#[derive(Serialize)]
pub(crate) struct OutEvent<'a> {
    worker_id: u64,
    storage_tier: &'a str,
    residency_domain: &'static str,
    event: OutCacheEvent<'a>,
}

#[derive(Serialize)]
struct OutCacheEvent<'a> {
    event_id: u64,
    data: OutData<'a>,
    dp_rank: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum OutData<'a> {
    Stored {
        parent_hash: Option<u64>,
        start_position: Option<u32>,
        blocks: Vec<OutBlock>,
    },
    Removed {
        block_hashes: &'a [u64],
    },
    Cleared,
}

#[derive(Serialize)]
struct OutBlock {
    block_hash: u64,
    tokens_hash: u64,
    mm_extra_info: Option<()>,
}

/// Events in the shape stock serializes them (msgpack on the event plane, JSON in recovery
/// replies): every field present, `residency_domain` "worker", `cleared` a bare string.
pub(crate) fn out_events(events: &[WireEvent]) -> Vec<OutEvent<'_>> {
    events
        .iter()
        .map(|e| OutEvent {
            worker_id: e.worker.worker_id,
            storage_tier: &e.storage_tier,
            residency_domain: "worker",
            event: OutCacheEvent {
                event_id: e.event_id,
                dp_rank: e.worker.dp_rank,
                data: match &e.data {
                    KvEventData::Stored {
                        parent_hash,
                        blocks,
                    } => OutData::Stored {
                        parent_hash: *parent_hash,
                        start_position: None,
                        blocks: blocks
                            .iter()
                            .map(|b| OutBlock {
                                block_hash: b.block_hash,
                                tokens_hash: b.tokens_hash,
                                mm_extra_info: None,
                            })
                            .collect(),
                    },
                    KvEventData::Removed { block_hashes } => OutData::Removed { block_hashes },
                    KvEventData::Cleared => OutData::Cleared,
                },
            },
        })
        .collect()
}

/// Encodes events as a stock publisher sends them (see [`out_events`]).
pub fn encode_event_batch(events: &[WireEvent]) -> Vec<u8> {
    rmp_serde::to_vec_named(&out_events(events)).expect("KV events always encode")
}
