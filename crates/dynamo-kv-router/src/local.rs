//! A worker's own record of the KV events it published, so a stock router that missed some can
//! recover (stock's "local indexer", queried on `worker_kv_query_source_{publisher_id:x}`): the
//! latest events in a ring buffer, replayed by id range, and the blocks cached now, dumped as
//! stored events when the range is older than the buffer.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::index::{KvEventData, StoredBlock};
use crate::wire::{out_events, OutEvent};
use crate::{WireEvent, WorkerKey};

/// A router's recovery query (stock's `WorkerKvQueryRequest`).
#[derive(Debug, Deserialize)]
pub struct QueryRequest {
    pub worker_id: u64,
    #[serde(default)]
    pub dp_rank: u32,
    /// None: dump the whole cache.
    pub start_event_id: Option<u64>,
    pub end_event_id: Option<u64>,
    #[serde(default)]
    pub supports_tree_dump_failed: bool,
    /// Only plain recovery is served; stock's state-agent kinds are refused.
    #[serde(default)]
    pub kind: Option<serde_json::Value>,
}

/// The reply (stock's `WorkerKvQueryResponse`, variant names as stock spells them).
#[derive(Serialize)]
enum QueryResponse<'a> {
    Events {
        events: Vec<OutEvent<'a>>,
        last_event_id: u64,
    },
    TreeDump {
        events: Vec<OutEvent<'a>>,
        last_event_id: u64,
        reset_scope: &'static str,
    },
    TooNew {
        requested_start: Option<u64>,
        requested_end: Option<u64>,
        newest_available: u64,
    },
    InvalidRange {
        start_id: u64,
        end_id: u64,
    },
    Error(String),
}

struct Cached {
    parent: Option<u64>,
    tokens_hash: u64,
    order: u64,
}

/// One worker rank's published events and current cache.
pub struct LocalIndexer {
    worker: WorkerKey,
    capacity: usize,
    recent: VecDeque<WireEvent>,
    last_event_id: u64,
    cached: HashMap<u64, Cached>,
    /// Insertion order of the cached blocks: a parent always precedes its children.
    order: BTreeMap<u64, u64>,
    next_order: u64,
}

impl LocalIndexer {
    /// Keeps the latest `capacity` events for replay.
    pub fn new(worker: WorkerKey, capacity: usize) -> Self {
        Self {
            worker,
            capacity: capacity.max(1),
            recent: VecDeque::new(),
            last_event_id: 0,
            cached: HashMap::new(),
            order: BTreeMap::new(),
            next_order: 0,
        }
    }

    /// Records an event as it is published.
    pub fn record(&mut self, event: &WireEvent) {
        match &event.data {
            KvEventData::Stored {
                parent_hash,
                blocks,
            } => {
                let mut parent = *parent_hash;
                for block in blocks {
                    let order = self.next_order;
                    self.next_order += 1;
                    if let Some(old) = self.cached.insert(
                        block.block_hash,
                        Cached {
                            parent,
                            tokens_hash: block.tokens_hash,
                            order,
                        },
                    ) {
                        self.order.remove(&old.order);
                    }
                    self.order.insert(order, block.block_hash);
                    parent = Some(block.block_hash);
                }
            }
            KvEventData::Removed { block_hashes } => {
                for hash in block_hashes {
                    if let Some(old) = self.cached.remove(hash) {
                        self.order.remove(&old.order);
                    }
                }
            }
            KvEventData::Cleared => {
                self.cached.clear();
                self.order.clear();
            }
        }
        self.last_event_id = event.event_id;
        if self.recent.len() == self.capacity {
            self.recent.pop_front();
        }
        self.recent.push_back(event.clone());
    }

    /// The cache now, as stored events (ids from 0) a router replays in order.
    fn dump(&self) -> Vec<WireEvent> {
        self.order
            .values()
            .enumerate()
            .map(|(i, hash)| {
                let block = &self.cached[hash];
                WireEvent {
                    worker: self.worker,
                    event_id: i as u64,
                    storage_tier: "device".into(),
                    data: KvEventData::Stored {
                        parent_hash: block.parent,
                        blocks: vec![StoredBlock {
                            block_hash: *hash,
                            tokens_hash: block.tokens_hash,
                        }],
                    },
                }
            })
            .collect()
    }

    /// Answers a recovery query (JSON in, JSON out), as stock's worker endpoint does.
    pub fn query_json(&self, request: &str) -> String {
        let reply = |response: QueryResponse| {
            serde_json::to_string(&response).expect("a reply always encodes")
        };
        let request: QueryRequest = match serde_json::from_str(request) {
            Ok(r) => r,
            Err(e) => {
                return reply(QueryResponse::Error(format!(
                    "not a WorkerKvQueryRequest: {e}"
                )))
            }
        };
        if !matches!(&request.kind, None | Some(serde_json::Value::Null))
            && request.kind.as_ref().and_then(|k| k.as_str()) != Some("recovery")
        {
            return reply(QueryResponse::Error(
                "only recovery queries are served by this worker".into(),
            ));
        }
        if request.worker_id != self.worker.worker_id || request.dp_rank != self.worker.dp_rank {
            return reply(QueryResponse::Error(format!(
                "query for worker {} dp_rank {} reached worker {} dp_rank {}",
                request.worker_id, request.dp_rank, self.worker.worker_id, self.worker.dp_rank
            )));
        }
        let newest = self.last_event_id;
        let tree = |dump: &[WireEvent]| {
            reply(QueryResponse::TreeDump {
                events: out_events(dump),
                last_event_id: newest,
                reset_scope: "all",
            })
        };
        let Some(start) = request.start_event_id else {
            return tree(&self.dump());
        };
        if let Some(end) = request.end_event_id.filter(|&end| end < start) {
            return reply(QueryResponse::InvalidRange {
                start_id: start,
                end_id: end,
            });
        }
        if start > newest {
            return reply(QueryResponse::TooNew {
                requested_start: Some(start),
                requested_end: request.end_event_id,
                newest_available: newest,
            });
        }
        let oldest = self.recent.front().map_or(u64::MAX, |e| e.event_id);
        if start < oldest {
            return tree(&self.dump());
        }
        let end = request.end_event_id.unwrap_or(newest).min(newest);
        let events: Vec<WireEvent> = self
            .recent
            .iter()
            .filter(|e| e.event_id >= start && e.event_id <= end)
            .cloned()
            .collect();
        reply(QueryResponse::Events {
            events: out_events(&events),
            last_event_id: end,
        })
    }
}
