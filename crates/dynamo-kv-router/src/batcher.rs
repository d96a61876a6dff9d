//! A worker's KV events on their way out: the engine's stored / removed / cleared calls (or a
//! relayed vLLM batch) are numbered per data-parallel rank, from 1 as stock numbers them,
//! recorded in that rank's local indexer for recovery queries, and queued; `flush` takes the
//! queue as one stock-format `kv-events` envelope. Sans-IO: the caller publishes the envelope
//! and supplies the clock.

use std::collections::HashMap;

use crate::envelope::{Envelope, KV_EVENTS_TOPIC};
use crate::index::{KvEventData, StoredBlock};
use crate::local::LocalIndexer;
use crate::options::InvalidOption;
use crate::vllm::{decode_vllm_batch, VllmEvent};
use crate::wire::{encode_event_batch, WireEvent};
use crate::WorkerKey;

/// Events kept per rank for replay when the publisher names no other number; older ranges are
/// answered with a dump of the cache.
pub const DEFAULT_RECOVERY_BUFFER_EVENTS: usize = 1024;

/// One worker's outgoing KV events. `H` hashes a block-aligned run of tokens into one tokens
/// hash per block (given the block size and the LoRA adapter the blocks belong to, if any),
/// exactly as routers hash prompts: it is passed in so this crate needs no tokenizer stack.
pub struct KvEventBatcher<H> {
    worker_id: u64,
    block_size: u32,
    hash_blocks: H,
    recovery_buffer: usize,
    last_event_id: HashMap<u32, u64>,
    queue: Vec<WireEvent>,
    local: HashMap<u32, LocalIndexer>,
}

impl<H: Fn(&[u32], usize, Option<&str>) -> Vec<u64>> KvEventBatcher<H> {
    /// A batcher for `worker_id`'s blocks of `block_size` tokens, keeping `recovery_buffer`
    /// events per rank for replay (default [`DEFAULT_RECOVERY_BUFFER_EVENTS`]).
    pub fn new(
        worker_id: u64,
        block_size: u32,
        recovery_buffer: Option<usize>,
        hash_blocks: H,
    ) -> Result<Self, InvalidOption> {
        if block_size == 0 {
            return Err(InvalidOption::new("block_size", "must be at least 1"));
        }
        Ok(Self {
            worker_id,
            block_size,
            hash_blocks,
            recovery_buffer: recovery_buffer.unwrap_or(DEFAULT_RECOVERY_BUFFER_EVENTS),
            last_event_id: HashMap::new(),
            queue: Vec::new(),
            local: HashMap::new(),
        })
    }

    fn worker(&self, dp_rank: u32) -> WorkerKey {
        WorkerKey {
            worker_id: self.worker_id,
            dp_rank,
        }
    }

    /// Numbers `data` as the rank's next event, records it and queues it.
    fn push(&mut self, dp_rank: u32, data: KvEventData) {
        let worker = self.worker(dp_rank);
        let id = self.last_event_id.entry(dp_rank).or_insert(0);
        *id += 1;
        let event = WireEvent {
            worker,
            event_id: *id,
            storage_tier: "device".into(),
            data,
        };
        let capacity = self.recovery_buffer;
        self.local
            .entry(dp_rank)
            .or_insert_with(|| LocalIndexer::new(worker, capacity))
            .record(&event);
        self.queue.push(event);
    }

    /// The stored blocks of `block_ids`, one per `block_size` tokens of `token_ids`. The error
    /// says why the tokens do not make those blocks.
    fn stored_blocks(
        &self,
        token_ids: &[u32],
        block_ids: &[u64],
        block_size: u32,
        lora_name: Option<&str>,
    ) -> Result<Vec<StoredBlock>, String> {
        if block_size != self.block_size {
            return Err(format!(
                "blocks of {block_size} tokens do not match the model's kv_cache_block_size {}",
                self.block_size
            ));
        }
        if token_ids.len() != block_ids.len() * block_size as usize {
            return Err(format!(
                "{} token ids do not fill {} blocks of {block_size}",
                token_ids.len(),
                block_ids.len()
            ));
        }
        let tokens = (self.hash_blocks)(token_ids, block_size as usize, lora_name);
        Ok(block_ids
            .iter()
            .zip(tokens)
            .map(|(&block_hash, tokens_hash)| StoredBlock {
                block_hash,
                tokens_hash,
            })
            .collect())
    }

    /// Full blocks now cached: `block_ids` are the engine's ids for them (one per `block_size`
    /// tokens of `token_ids`), following the block `parent_id` (None: a prompt's first). No
    /// blocks, no event.
    pub fn stored(
        &mut self,
        dp_rank: u32,
        token_ids: &[u32],
        block_ids: &[u64],
        parent_id: Option<u64>,
    ) -> Result<(), String> {
        self.stored_for(dp_rank, token_ids, block_ids, parent_id, None)
    }

    /// [`Self::stored`] for blocks computed under a LoRA adapter (`None`: the hasher's
    /// default), whose name seeds their tokens hashes as routers seed an adapter's prompts.
    pub fn stored_for(
        &mut self,
        dp_rank: u32,
        token_ids: &[u32],
        block_ids: &[u64],
        parent_id: Option<u64>,
        lora_name: Option<&str>,
    ) -> Result<(), String> {
        let blocks = self.stored_blocks(token_ids, block_ids, self.block_size, lora_name)?;
        if !blocks.is_empty() {
            self.push(
                dp_rank,
                KvEventData::Stored {
                    parent_hash: parent_id,
                    blocks,
                },
            );
        }
        Ok(())
    }

    /// Blocks evicted. No blocks, no event.
    pub fn removed(&mut self, dp_rank: u32, block_ids: &[u64]) {
        if !block_ids.is_empty() {
            self.push(
                dp_rank,
                KvEventData::Removed {
                    block_hashes: block_ids.to_vec(),
                },
            );
        }
    }

    /// The whole cache of the rank was dropped.
    pub fn cleared(&mut self, dp_rank: u32) {
        self.push(dp_rank, KvEventData::Cleared);
    }

    /// Queues a vLLM raw batch (as a vLLM engine publishes on its own ZMQ socket); its
    /// `dp_rank` wins over `dp_rank`. Returns the events queued. The error names the event and
    /// field that did not decode; nothing is queued then.
    pub fn relay_vllm(&mut self, dp_rank: u32, payload: &[u8]) -> Result<usize, String> {
        let batch = decode_vllm_batch(payload)?;
        let rank = batch.dp_rank.unwrap_or(dp_rank);
        let decoded = batch
            .events
            .into_iter()
            .map(|event| {
                Ok(match event {
                    VllmEvent::Stored {
                        block_hashes,
                        parent_hash,
                        token_ids,
                        block_size,
                    } => KvEventData::Stored {
                        parent_hash,
                        blocks: self.stored_blocks(&token_ids, &block_hashes, block_size, None)?,
                    },
                    VllmEvent::Removed { block_hashes } => KvEventData::Removed { block_hashes },
                    VllmEvent::Cleared => KvEventData::Cleared,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let count = decoded.len();
        for data in decoded {
            self.push(rank, data);
        }
        Ok(count)
    }

    /// Answers a router's recovery query for one rank (stock's `WorkerKvQueryRequest` as JSON):
    /// the events it asks for, or a dump of the cache when they are no longer kept.
    pub fn query(&self, dp_rank: u32, request: &str) -> String {
        match self.local.get(&dp_rank) {
            Some(local) => local.query_json(request),
            // Nothing published yet: an empty cache.
            None => LocalIndexer::new(self.worker(dp_rank), 1).query_json(request),
        }
    }

    /// Events queued since the last flush.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Takes the queue as one `kv-events` envelope, the publisher's `sequence`, published at
    /// `now_ms`; None when nothing is queued.
    pub fn flush(&mut self, publisher_id: u64, sequence: u64, now_ms: u64) -> Option<Envelope> {
        if self.queue.is_empty() {
            return None;
        }
        let payload = encode_event_batch(&self.queue);
        self.queue.clear();
        Some(Envelope {
            publisher_id,
            sequence,
            published_at: now_ms,
            topic: KV_EVENTS_TOPIC.into(),
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::wire::decode_event_batch;

    const WORKER: u64 = 7;

    /// A stand-in for the tokens hash: each block's token ids summed, plus 1000, plus 500 for
    /// any adapter.
    fn sum_blocks(tokens: &[u32], block_size: usize, lora_name: Option<&str>) -> Vec<u64> {
        let seed = if lora_name.is_some() { 1500 } else { 1000 };
        tokens
            .chunks(block_size)
            .map(|b| seed + b.iter().map(|&t| u64::from(t)).sum::<u64>())
            .collect()
    }

    type Hasher = fn(&[u32], usize, Option<&str>) -> Vec<u64>;

    fn batcher() -> KvEventBatcher<Hasher> {
        KvEventBatcher::new(WORKER, 2, None, sum_blocks as Hasher).unwrap()
    }

    /// The events of a flushed envelope.
    fn flushed(b: &mut KvEventBatcher<Hasher>) -> Vec<WireEvent> {
        let envelope = b.flush(1, 0, 0).expect("events were queued");
        decode_event_batch(&envelope.payload).unwrap()
    }

    fn ids(events: &[WireEvent]) -> Vec<(u32, u64)> {
        events
            .iter()
            .map(|e| (e.worker.dp_rank, e.event_id))
            .collect()
    }

    fn ask(b: &KvEventBatcher<Hasher>, dp_rank: u32, request: Value) -> Value {
        serde_json::from_str(&b.query(dp_rank, &request.to_string())).unwrap()
    }

    #[test]
    fn a_block_size_of_zero_is_refused() {
        let err = KvEventBatcher::new(WORKER, 0, None, sum_blocks as Hasher).err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("block_size must be at least 1")
        );
    }

    #[test]
    fn flush_is_none_when_nothing_is_queued() {
        let mut b = batcher();
        assert_eq!(b.flush(1, 0, 0), None);
        b.cleared(0);
        assert!(b.flush(1, 0, 0).is_some());
        assert_eq!(b.pending(), 0);
        assert_eq!(b.flush(1, 1, 0), None);
    }

    #[test]
    fn an_adapters_blocks_are_hashed_under_its_name() {
        let mut b = batcher();
        b.stored_for(0, &[1, 2], &[10], None, Some("pirate"))
            .unwrap();
        b.stored(0, &[1, 2], &[20], None).unwrap();
        let hashes: Vec<u64> = flushed(&mut b)
            .into_iter()
            .flat_map(|e| match e.data {
                KvEventData::Stored { blocks, .. } => {
                    blocks.into_iter().map(|b| b.tokens_hash).collect()
                }
                _ => vec![],
            })
            .collect();
        assert_eq!(hashes, [1503, 1003]);
    }

    #[test]
    fn flush_takes_the_queue_as_one_kv_events_envelope() {
        let mut b = batcher();
        b.stored(0, &[1, 2, 3, 4], &[10, 11], None).unwrap();
        b.removed(0, &[11]);
        assert_eq!(b.pending(), 2);
        let envelope = b.flush(99, 5, 1_700_000_000_000).unwrap();
        assert_eq!(
            (
                envelope.publisher_id,
                envelope.sequence,
                envelope.published_at,
                envelope.topic.as_str()
            ),
            (99, 5, 1_700_000_000_000, "kv-events")
        );
        let events = decode_event_batch(&envelope.payload).unwrap();
        assert_eq!(
            events[0],
            WireEvent {
                worker: WorkerKey {
                    worker_id: WORKER,
                    dp_rank: 0
                },
                event_id: 1,
                storage_tier: "device".into(),
                data: KvEventData::Stored {
                    parent_hash: None,
                    blocks: vec![
                        StoredBlock {
                            block_hash: 10,
                            tokens_hash: 1003
                        },
                        StoredBlock {
                            block_hash: 11,
                            tokens_hash: 1007
                        },
                    ],
                },
            }
        );
        assert_eq!(
            events[1].data,
            KvEventData::Removed {
                block_hashes: vec![11]
            }
        );
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn event_ids_count_from_one_and_continue_across_flushes() {
        let mut b = batcher();
        b.stored(0, &[1, 2], &[10], None).unwrap();
        b.stored(0, &[3, 4], &[11], Some(10)).unwrap();
        assert_eq!(ids(&flushed(&mut b)), [(0, 1), (0, 2)]);
        b.removed(0, &[11]);
        b.cleared(0);
        assert_eq!(ids(&flushed(&mut b)), [(0, 3), (0, 4)]);
    }

    #[test]
    fn each_dp_rank_numbers_its_own_events() {
        let mut b = batcher();
        b.cleared(0);
        b.cleared(1);
        b.cleared(1);
        b.cleared(0);
        assert_eq!(ids(&flushed(&mut b)), [(0, 1), (1, 1), (1, 2), (0, 2)]);
    }

    #[test]
    fn empty_stored_and_removed_calls_are_no_events() {
        let mut b = batcher();
        b.stored(0, &[], &[], None).unwrap();
        b.removed(0, &[]);
        assert_eq!(b.pending(), 0);
        b.cleared(0);
        assert_eq!(ids(&flushed(&mut b)), [(0, 1)]);
    }

    #[test]
    fn stored_blocks_must_be_full_blocks_of_the_models_size() {
        let mut b = batcher();
        assert_eq!(
            b.stored(0, &[1, 2, 3], &[10, 11], None),
            Err("3 token ids do not fill 2 blocks of 2".into())
        );
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn the_local_indexer_replays_a_ranks_events_and_dumps_its_cache() {
        let mut b = batcher();
        b.stored(0, &[1, 2, 3, 4], &[10, 11], None).unwrap();
        b.stored(1, &[5, 6], &[20], None).unwrap();
        b.removed(0, &[11]);
        // Flushing does not forget what was published.
        flushed(&mut b);

        let replay = ask(
            &b,
            0,
            json!({ "worker_id": WORKER, "dp_rank": 0, "start_event_id": 2 }),
        );
        assert_eq!(replay["Events"]["last_event_id"], 2);
        let events = replay["Events"]["events"].as_array().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["event"]["event_id"], 2);

        let dump = ask(&b, 1, json!({ "worker_id": WORKER, "dp_rank": 1 }));
        assert_eq!(dump["TreeDump"]["last_event_id"], 1);
        assert_eq!(dump["TreeDump"]["events"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_rank_that_published_nothing_answers_with_an_empty_cache() {
        let b = batcher();
        let dump = ask(&b, 3, json!({ "worker_id": WORKER, "dp_rank": 3 }));
        assert_eq!(dump["TreeDump"]["last_event_id"], 0);
        assert_eq!(dump["TreeDump"]["events"], json!([]));
    }

    /// A vLLM raw batch: `[ts, events, dp_rank?]`.
    fn vllm_batch(events: Value, dp_rank: Option<u32>) -> Vec<u8> {
        let batch = match dp_rank {
            Some(rank) => json!([1.5, events, rank]),
            None => json!([1.5, events]),
        };
        rmp_serde::to_vec(&batch).unwrap()
    }

    #[test]
    fn a_relayed_vllm_batch_is_numbered_on_its_own_dp_rank() {
        let mut b = batcher();
        b.cleared(2);
        let payload = vllm_batch(
            json!([
                ["BlockStored", [10, 11], null, [1, 2, 3, 4], 2],
                ["BlockRemoved", [10]],
                ["AllBlocksCleared"],
            ]),
            Some(2),
        );
        assert_eq!(b.relay_vllm(0, &payload), Ok(3));
        let events = flushed(&mut b);
        assert_eq!(ids(&events), [(2, 1), (2, 2), (2, 3), (2, 4)]);
        assert_eq!(
            events[1].data,
            KvEventData::Stored {
                parent_hash: None,
                blocks: vec![
                    StoredBlock {
                        block_hash: 10,
                        tokens_hash: 1003
                    },
                    StoredBlock {
                        block_hash: 11,
                        tokens_hash: 1007
                    },
                ],
            }
        );
        assert_eq!(events[3].data, KvEventData::Cleared);

        // Without its own dp_rank, the batch goes on the caller's.
        let payload = vllm_batch(json!([["AllBlocksCleared"]]), None);
        assert_eq!(b.relay_vllm(1, &payload), Ok(1));
        assert_eq!(ids(&flushed(&mut b)), [(1, 1)]);
    }

    #[test]
    fn a_relayed_batch_with_a_bad_event_queues_nothing() {
        let mut b = batcher();
        let other_size = vllm_batch(
            json!([
                ["AllBlocksCleared"],
                ["BlockStored", [10], null, [1, 2, 3, 4], 4],
            ]),
            None,
        );
        assert_eq!(
            b.relay_vllm(0, &other_size),
            Err("blocks of 4 tokens do not match the model's kv_cache_block_size 2".into())
        );
        let unknown = vllm_batch(json!([["BlockMoved"]]), None);
        assert!(b
            .relay_vllm(0, &unknown)
            .unwrap_err()
            .starts_with("event 0: unknown event type"));
        assert_eq!(b.pending(), 0);
        b.cleared(0);
        assert_eq!(ids(&flushed(&mut b)), [(0, 1)]);
    }
}
