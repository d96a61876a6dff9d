//! Without KV events the router guesses: the blocks of each request it routes are taken as
//! cached on that worker for `ttl_ms`, and the oldest guesses go first when the tree outgrows
//! `max_tree_size`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::index::{KvEventData, RadixIndex, StoredBlock};
use crate::WorkerKey;

/// Settings of approximate mode, with stock's defaults (120 s, 2^20 blocks, down to 80 %).
#[derive(Debug, Clone, PartialEq)]
pub struct ApproxConfig {
    pub ttl_ms: u64,
    pub max_tree_size: usize,
    pub prune_target_ratio: f64,
}

impl Default for ApproxConfig {
    fn default() -> Self {
        Self {
            ttl_ms: 120_000,
            max_tree_size: 1 << 20,
            prune_target_ratio: 0.8,
        }
    }
}

/// A guess in expiry order: (expires at, deeper first, worker, sequence hash).
type Expiry = Reverse<(u64, Reverse<u32>, WorkerKey, u64)>;

/// The guessed blocks and when each expires.
pub struct ApproxCache {
    config: ApproxConfig,
    /// (worker, sequence hash) → expiry; the heap may hold older expiries of an entry, skipped when popped.
    expiry: HashMap<(WorkerKey, u64), u64>,
    /// Deeper blocks first among equal expiries, so a prefix outlives its tail.
    heap: BinaryHeap<Expiry>,
}

impl ApproxCache {
    pub fn new(config: ApproxConfig) -> Self {
        Self {
            config,
            expiry: HashMap::new(),
            heap: BinaryHeap::new(),
        }
    }

    /// Takes the request's blocks as cached on `worker` from `now_ms`: `tokens_hashes` match
    /// requests, `sequence_hashes` name the blocks.
    pub fn insert(
        &mut self,
        index: &mut RadixIndex,
        worker: WorkerKey,
        tokens_hashes: &[u64],
        sequence_hashes: &[u64],
        now_ms: u64,
    ) {
        let expires = now_ms + self.config.ttl_ms;
        let blocks = tokens_hashes
            .iter()
            .zip(sequence_hashes)
            .map(|(&t, &s)| StoredBlock {
                block_hash: s,
                tokens_hash: t,
            })
            .collect();
        index.apply(
            worker,
            &KvEventData::Stored {
                parent_hash: None,
                blocks,
            },
        );
        for (depth, &seq) in sequence_hashes.iter().enumerate() {
            self.expiry.insert((worker, seq), expires);
            self.heap
                .push(Reverse((expires, Reverse(depth as u32), worker, seq)));
        }
        self.prune(index);
    }

    /// Removes the guesses that expired by `now_ms`.
    pub fn expire(&mut self, index: &mut RadixIndex, now_ms: u64) {
        while let Some(Reverse((at, _, _, _))) = self.heap.peek() {
            if *at > now_ms {
                break;
            }
            self.pop(index);
        }
    }

    /// Forgets a worker's guesses (the index entries go with `RadixIndex::remove_worker`).
    pub fn remove_worker(&mut self, worker_id: u64) {
        self.expiry.retain(|(w, _), _| w.worker_id != worker_id);
    }

    fn prune(&mut self, index: &mut RadixIndex) {
        if index.node_count() <= self.config.max_tree_size {
            return;
        }
        let target = (self.config.max_tree_size as f64 * self.config.prune_target_ratio) as usize;
        while index.node_count() > target && !self.heap.is_empty() {
            self.pop(index);
        }
    }

    /// Removes the earliest-expiring guess, if it is still current.
    fn pop(&mut self, index: &mut RadixIndex) {
        let Some(Reverse((at, _, worker, seq))) = self.heap.pop() else {
            return;
        };
        if self.expiry.get(&(worker, seq)) == Some(&at) {
            self.expiry.remove(&(worker, seq));
            index.apply(
                worker,
                &KvEventData::Removed {
                    block_hashes: vec![seq],
                },
            );
        }
    }
}
