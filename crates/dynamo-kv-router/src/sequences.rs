//! The router's own view of each worker's load, from the requests it sent there: prefill tokens
//! until the first output token, and the request's KV blocks until it ends. Blocks are counted
//! by sequence hash, so requests sharing a prefix on one worker share its blocks.

use std::collections::HashMap;

use crate::hasher::IdMap;
use crate::WorkerKey;

#[derive(Default)]
struct WorkerLoad {
    /// Active blocks (sequence hashes) → how many requests use them.
    blocks: IdMap<u64, u32>,
    prefill_tokens: u64,
    requests: u32,
}

/// A request the tracker holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRequest {
    pub worker: WorkerKey,
    /// Sequence hashes of its prompt blocks.
    pub blocks: Vec<u64>,
    /// Still counted as prefill load; zero once the first token arrived.
    pub prefill_tokens: u64,
    /// The LoRA adapter it runs under: replica-sync events name it.
    pub lora_name: Option<String>,
}

/// A worker's load as the cost function sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    pub decode_blocks: u64,
    pub prefill_tokens: u64,
    pub requests: u32,
}

/// Requests in flight per worker.
#[derive(Default)]
pub struct ActiveSequences {
    workers: HashMap<WorkerKey, WorkerLoad>,
    requests: HashMap<String, ActiveRequest>,
}

impl ActiveSequences {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a request routed to `worker`: `blocks` are its sequence hashes and
    /// `prefill_tokens` the prompt tokens the worker must compute. A known id is replaced.
    pub fn add(
        &mut self,
        request_id: &str,
        worker: WorkerKey,
        blocks: Vec<u64>,
        prefill_tokens: u64,
        lora_name: Option<String>,
    ) {
        self.free(request_id);
        let load = self.workers.entry(worker).or_default();
        for &b in &blocks {
            *load.blocks.entry(b).or_insert(0) += 1;
        }
        load.prefill_tokens += prefill_tokens;
        load.requests += 1;
        self.requests.insert(
            request_id.to_owned(),
            ActiveRequest {
                worker,
                blocks,
                prefill_tokens,
                lora_name,
            },
        );
    }

    /// The first output token arrived: the request no longer counts as prefill load.
    pub fn prefill_done(&mut self, request_id: &str) {
        if let Some(r) = self.requests.get_mut(request_id) {
            if let Some(load) = self.workers.get_mut(&r.worker) {
                load.prefill_tokens -= r.prefill_tokens;
            }
            r.prefill_tokens = 0;
        }
    }

    /// The request ended (finished, failed or cancelled). Unknown ids are ignored.
    pub fn free(&mut self, request_id: &str) {
        let Some(r) = self.requests.remove(request_id) else {
            return;
        };
        let Some(load) = self.workers.get_mut(&r.worker) else {
            return;
        };
        for b in &r.blocks {
            if let Some(count) = load.blocks.get_mut(b) {
                *count -= 1;
                if *count == 0 {
                    load.blocks.remove(b);
                }
            }
        }
        load.prefill_tokens -= r.prefill_tokens;
        load.requests -= 1;
    }

    /// Forgets a worker and its requests (it left).
    pub fn remove_worker(&mut self, worker_id: u64) {
        self.workers.retain(|k, _| k.worker_id != worker_id);
        self.requests.retain(|_, r| r.worker.worker_id != worker_id);
    }

    /// The worker's load now.
    pub fn load(&self, worker: WorkerKey) -> Load {
        self.workers.get(&worker).map_or(Load::default(), |w| Load {
            decode_blocks: w.blocks.len() as u64,
            prefill_tokens: w.prefill_tokens,
            requests: w.requests,
        })
    }

    /// Every worker rank's load, by key. Ranks stay known (at zero) after their requests end,
    /// until [`ActiveSequences::remove_worker`].
    pub fn loads(&self) -> Vec<(WorkerKey, Load)> {
        let mut loads: Vec<(WorkerKey, Load)> =
            self.workers.keys().map(|&k| (k, self.load(k))).collect();
        loads.sort_unstable_by_key(|&(k, _)| k);
        loads
    }

    /// The request, when the tracker holds it.
    pub fn get(&self, request_id: &str) -> Option<&ActiveRequest> {
        self.requests.get(request_id)
    }

    /// Blocks of `blocks` the worker does not hold active yet (what the request would add).
    pub fn new_blocks(&self, worker: WorkerKey, blocks: &[u64]) -> u64 {
        match self.workers.get(&worker) {
            Some(w) => blocks.iter().filter(|b| !w.blocks.contains_key(b)).count() as u64,
            None => blocks.len() as u64,
        }
    }

    /// Requests in flight, on every worker.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}
