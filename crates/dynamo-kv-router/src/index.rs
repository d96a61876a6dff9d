//! The radix index of cached KV blocks: a tree keyed by each block's token hash (the hash a
//! router computes from a request's tokens), where every node lists the workers holding that
//! block. Workers describe their cache with stored / removed / cleared events that name blocks
//! by their own ids (`block_hash`); a per-worker map from those ids to tree nodes makes removal
//! direct. A request's overlap with a worker is how many of its leading blocks the worker holds,
//! counting only an unbroken prefix.

use crate::children::{Children, Holders};
use crate::hasher::IdMap;
use crate::WorkerKey;

/// One block of a stored event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBlock {
    /// The worker's own id for the block.
    pub block_hash: u64,
    /// The hash of the block's tokens, as the router computes it for requests.
    pub tokens_hash: u64,
}

/// What a KV event says happened in a worker's cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvEventData {
    /// `blocks` now follow the block `parent_hash` (or start a sequence when `None`).
    Stored {
        parent_hash: Option<u64>,
        blocks: Vec<StoredBlock>,
    },
    Removed {
        block_hashes: Vec<u64>,
    },
    Cleared,
}

/// How applying an event went, for the caller's logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    Applied,
    /// A stored event whose parent the worker never stored (or already removed): ignored,
    /// since its blocks cannot be placed in the tree.
    UnknownParent,
}

const ROOT: u32 = 0;
const FREE: u32 = u32::MAX;

struct Node {
    tokens_hash: u64,
    parent: u32,
    children: Children,
    /// Worker slots holding this block.
    workers: Holders,
}

struct WorkerEntry {
    key: WorkerKey,
    /// The worker's block ids → nodes.
    blocks: IdMap<u64, u32>,
}

/// The index of which worker (and data-parallel rank) holds which blocks.
pub struct RadixIndex {
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    workers: Vec<Option<WorkerEntry>>,
    free_slots: Vec<u32>,
    slot_of: std::collections::HashMap<WorkerKey, u32>,
}

impl Default for RadixIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl RadixIndex {
    pub fn new() -> Self {
        let root = Node {
            tokens_hash: 0,
            parent: FREE,
            children: Children::None,
            workers: Holders::default(),
        };
        Self {
            nodes: vec![root],
            free_nodes: Vec::new(),
            workers: Vec::new(),
            free_slots: Vec::new(),
            slot_of: Default::default(),
        }
    }

    /// Blocks in the tree (nodes other than the root).
    pub fn node_count(&self) -> usize {
        self.nodes.len() - 1 - self.free_nodes.len()
    }

    /// How many blocks `worker` holds.
    pub fn worker_blocks(&self, worker: WorkerKey) -> usize {
        self.slot_of
            .get(&worker)
            .and_then(|&s| self.workers[s as usize].as_ref())
            .map_or(0, |w| w.blocks.len())
    }

    /// Blocks held, summed over workers (a block two workers hold counts twice).
    pub fn block_count(&self) -> usize {
        self.workers.iter().flatten().map(|w| w.blocks.len()).sum()
    }

    /// The workers the index knows, in no particular order.
    pub fn workers(&self) -> impl Iterator<Item = WorkerKey> + '_ {
        self.workers.iter().flatten().map(|w| w.key)
    }

    /// Applies one event of `worker`.
    pub fn apply(&mut self, worker: WorkerKey, data: &KvEventData) -> ApplyOutcome {
        match data {
            KvEventData::Stored {
                parent_hash,
                blocks,
            } => self.store(worker, *parent_hash, blocks),
            KvEventData::Removed { block_hashes } => {
                if let Some(&slot) = self.slot_of.get(&worker) {
                    for &hash in block_hashes {
                        self.remove_block(slot, hash);
                    }
                }
                ApplyOutcome::Applied
            }
            KvEventData::Cleared => {
                self.clear(worker);
                ApplyOutcome::Applied
            }
        }
    }

    /// Forgets every block of `worker` (all its ranks when `dp_rank` is `None`), and the worker.
    pub fn remove_worker(&mut self, worker_id: u64, dp_rank: Option<u32>) {
        let keys: Vec<WorkerKey> = self
            .workers()
            .filter(|k| k.worker_id == worker_id && dp_rank.is_none_or(|r| r == k.dp_rank))
            .collect();
        for key in keys {
            self.clear(key);
            let slot = self.slot_of.remove(&key).expect("listed worker has a slot");
            self.workers[slot as usize] = None;
            self.free_slots.push(slot);
        }
    }

    /// Per worker, how many leading blocks of `tokens_hashes` it holds (workers with none are
    /// absent).
    pub fn overlaps(&self, tokens_hashes: &[u64]) -> Vec<(WorkerKey, u32)> {
        let mut out = Vec::new();
        let mut active: Vec<u32> = Vec::new();
        let mut node = ROOT;
        let mut matched = 0u32;
        for hash in tokens_hashes {
            let Some(child) = self.nodes[node as usize].children.get(*hash) else {
                break;
            };
            let holders = &self.nodes[child as usize].workers;
            if matched == 0 {
                active.extend(holders.iter());
            } else {
                // A worker missing this block keeps the prefix it had: only contiguous blocks count.
                active.retain(|slot| {
                    let keep = holders.contains(*slot);
                    if !keep {
                        out.push((self.key(*slot), matched));
                    }
                    keep
                });
            }
            if active.is_empty() {
                return out;
            }
            matched += 1;
            node = child;
        }
        out.extend(active.iter().map(|&s| (self.key(s), matched)));
        out
    }

    /// Rough heap bytes the index uses (nodes, child maps, worker lists, per-worker maps).
    pub fn memory_bytes(&self) -> usize {
        let map_entry = 8 + 4 + 1; // key, value, control byte
        let nodes = self.nodes.capacity() * std::mem::size_of::<Node>();
        let children: usize = self
            .nodes
            .iter()
            .map(|n| n.children.heap_bytes() + n.workers.heap_bytes())
            .sum();
        let workers: usize = self
            .workers
            .iter()
            .flatten()
            .map(|w| w.blocks.capacity() * map_entry)
            .sum();
        nodes + children + workers
    }

    fn key(&self, slot: u32) -> WorkerKey {
        self.workers[slot as usize]
            .as_ref()
            .expect("active slot")
            .key
    }

    fn slot(&mut self, worker: WorkerKey) -> u32 {
        if let Some(&slot) = self.slot_of.get(&worker) {
            return slot;
        }
        let entry = Some(WorkerEntry {
            key: worker,
            blocks: IdMap::default(),
        });
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.workers[slot as usize] = entry;
                slot
            }
            None => {
                self.workers.push(entry);
                (self.workers.len() - 1) as u32
            }
        };
        self.slot_of.insert(worker, slot);
        slot
    }

    fn store(
        &mut self,
        worker: WorkerKey,
        parent_hash: Option<u64>,
        blocks: &[StoredBlock],
    ) -> ApplyOutcome {
        let slot = self.slot(worker);
        let mut parent = match parent_hash {
            None => ROOT,
            Some(hash) => match self.entry(slot).blocks.get(&hash) {
                Some(&node) => node,
                None => return ApplyOutcome::UnknownParent,
            },
        };
        for block in blocks {
            let child = match self.nodes[parent as usize].children.get(block.tokens_hash) {
                Some(child) => child,
                None => self.new_node(parent, block.tokens_hash),
            };
            // The same id stored again elsewhere moves the block.
            if let Some(previous) = self.entry(slot).blocks.get(&block.block_hash).copied() {
                if previous != child {
                    self.remove_block(slot, block.block_hash);
                }
            }
            self.nodes[child as usize].workers.add(slot);
            self.entry_mut(slot).blocks.insert(block.block_hash, child);
            parent = child;
        }
        ApplyOutcome::Applied
    }

    fn clear(&mut self, worker: WorkerKey) {
        let Some(&slot) = self.slot_of.get(&worker) else {
            return;
        };
        let hashes: Vec<u64> = self.entry(slot).blocks.keys().copied().collect();
        for hash in hashes {
            self.remove_block(slot, hash);
        }
    }

    fn remove_block(&mut self, slot: u32, hash: u64) {
        let Some(node) = self.entry_mut(slot).blocks.remove(&hash) else {
            return;
        };
        self.nodes[node as usize].workers.remove(slot);
        self.prune_up(node);
    }

    /// Frees `node` and then its ancestors while they hold nothing and lead nowhere.
    fn prune_up(&mut self, mut node: u32) {
        while node != ROOT {
            let n = &self.nodes[node as usize];
            if !n.workers.is_empty() || !n.children.is_empty() {
                return;
            }
            let (parent, hash) = (n.parent, n.tokens_hash);
            self.nodes[parent as usize].children.remove(hash);
            let freed = &mut self.nodes[node as usize];
            freed.parent = FREE;
            freed.children = Children::None;
            freed.workers = Holders::default();
            self.free_nodes.push(node);
            node = parent;
        }
    }

    fn new_node(&mut self, parent: u32, tokens_hash: u64) -> u32 {
        let node = Node {
            tokens_hash,
            parent,
            children: Children::None,
            workers: Holders::default(),
        };
        let id = match self.free_nodes.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.nodes[parent as usize].children.insert(tokens_hash, id);
        id
    }

    fn entry(&self, slot: u32) -> &WorkerEntry {
        self.workers[slot as usize].as_ref().expect("active slot")
    }

    fn entry_mut(&mut self, slot: u32) -> &mut WorkerEntry {
        self.workers[slot as usize].as_mut().expect("active slot")
    }
}
