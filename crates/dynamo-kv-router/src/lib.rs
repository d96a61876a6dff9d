//! KV-aware routing for Dynamo for TypeScript, as stock Dynamo 1.6 routes: an index of the
//! blocks each worker caches (fed by its KV events, or guessed from past routing), the router's
//! own count of each worker's active prefill and decode load, and the cost function that weighs
//! the two. Sans-IO: the caller decodes events, supplies the clock and the randomness, and
//! sends the request. [`RouterOptions`] turns a user's options into the router's settings.
//! The worker's side is here too: [`KvEventBatcher`] numbers its KV events per rank, queues
//! them into envelopes and answers routers' recovery queries from its [`LocalIndexer`]s.
//! Routers of one model share what each booked where through [`ActiveSequenceEvent`]s
//! (stock's replica sync), so each counts the others' load too.

mod affinity;
mod approx;
mod batcher;
mod children;
mod envelope;
mod hasher;
mod index;
mod local;
mod options;
mod replica;
mod selector;
mod sequences;
mod vllm;
mod wire;

pub use affinity::{SessionAffinityUpdate, SESSION_AFFINITY_TOPIC};
pub use approx::{ApproxCache, ApproxConfig};
pub use batcher::{KvEventBatcher, DEFAULT_RECOVERY_BUFFER_EVENTS};
pub use envelope::{ActiveLoad, Envelope, KV_EVENTS_TOPIC, KV_METRICS_TOPIC};
pub use index::{ApplyOutcome, KvEventData, RadixIndex, StoredBlock};
pub use local::{LocalIndexer, QueryRequest};
pub use options::{InvalidOption, RouterOptions, RouterSettings};
pub use replica::{
    decode_replica_payload, encode_replica_batch, replica_envelope, ActiveSequenceEvent,
    ActiveSequenceEventData, PrefillLoadHint, ReplicaKind, ReplicaReport, ACTIVE_SEQUENCES_TOPIC,
    MAX_REPLICA_BATCH_EVENTS,
};
pub use selector::{Candidate, CostConfig, Scored};
pub use sequences::{ActiveRequest, ActiveSequences, Load};
pub use vllm::{decode_vllm_batch, VllmBatch, VllmEvent};
pub use wire::{
    decode_event_batch, decode_recovery_reply, encode_event_batch, RecoveryReply, WireEvent,
};

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// A worker instance and one of its data-parallel ranks: the unit that holds a KV cache. Its
/// serde shape is stock's `WorkerWithDpRank`, as replica-sync events carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WorkerKey {
    pub worker_id: u64,
    pub dp_rank: u32,
}

/// What routing needs to know of a live worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerInfo {
    pub worker: WorkerKey,
    /// Its KV capacity in blocks, when it reported one.
    pub total_blocks: Option<u64>,
}

/// The result of applying a KV event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventReport {
    pub outcome: ApplyOutcome,
    /// The event ids skipped before this one (`event_id` − last − 1), when there was a gap.
    pub missed: Option<u64>,
}

/// What applying a batch of KV events did, for the caller's logs and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub applied: u32,
    /// Stored events whose parent block the worker never reported: dropped.
    pub unknown_parent: u32,
    /// Events of another storage tier than `device`: not indexed.
    pub other_tier: u32,
    /// Worker ranks whose event ids skipped some, with how many, in the batch's order.
    pub gaps: Vec<(WorkerKey, u64)>,
}

/// Where a request goes, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub worker: WorkerKey,
    pub overlap_blocks: u32,
    pub logit: f64,
    /// Every candidate's cost, in the order given.
    pub scores: Vec<Scored>,
}

impl Decision {
    /// The largest overlap any candidate had: above `overlap_blocks` when load won over cache.
    pub fn best_overlap_blocks(&self) -> u32 {
        self.scores
            .iter()
            .map(|s| s.overlap_blocks)
            .max()
            .unwrap_or(0)
    }
}

/// Why no worker was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoWorker {
    NoCandidates,
    /// Every candidate is past a busy threshold.
    AllBusy,
}

/// A request as the router sees it.
pub struct RouteRequest<'a> {
    pub request_id: &'a str,
    /// Token hashes of the prompt's full blocks (what the index matches).
    pub tokens_hashes: &'a [u64],
    /// Sequence hashes of the same blocks (what load tracking counts).
    pub sequence_hashes: &'a [u64],
    pub isl_tokens: u64,
    /// The LoRA adapter it runs under, kept with the booking for replica-sync events.
    pub lora_name: Option<&'a str>,
}

/// The router's whole state.
pub struct KvRouter {
    cost: CostConfig,
    index: RadixIndex,
    sequences: ActiveSequences,
    /// Present in approximate mode (no KV events).
    approx: Option<ApproxCache>,
    last_event: HashMap<WorkerKey, u64>,
    /// KV blocks each worker last reported in use (`kv_metrics`), for the busy check.
    reported_blocks: HashMap<WorkerKey, u64>,
}

impl KvRouter {
    /// A router fed by KV events (`approx` None) or guessing from its own decisions.
    pub fn new(cost: CostConfig, approx: Option<ApproxConfig>) -> Self {
        Self {
            cost,
            index: RadixIndex::new(),
            sequences: ActiveSequences::new(),
            approx: approx.map(ApproxCache::new),
            last_event: HashMap::new(),
            reported_blocks: HashMap::new(),
        }
    }

    pub fn cost_config(&self) -> &CostConfig {
        &self.cost
    }

    pub fn index(&self) -> &RadixIndex {
        &self.index
    }

    pub fn sequences(&self) -> &ActiveSequences {
        &self.sequences
    }

    /// Replaces both busy thresholds (None turns that check off), as stock's busy-threshold
    /// endpoint does at run time. The decode threshold is a fraction in [0, 1].
    pub fn set_busy_thresholds(
        &mut self,
        active_decode_blocks_threshold: Option<f64>,
        active_prefill_tokens_threshold: Option<u64>,
    ) -> Result<(), InvalidOption> {
        self.cost.active_decode_blocks_threshold =
            options::decode_blocks_threshold(active_decode_blocks_threshold)?;
        self.cost.active_prefill_tokens_threshold = active_prefill_tokens_threshold;
        Ok(())
    }

    /// The predicted load of every worker rank the router has booked requests on (idle ones it
    /// still knows included), by key.
    pub fn loads(&self) -> Vec<(WorkerKey, Load)> {
        self.sequences.loads()
    }

    /// Applies event `event_id` of `worker`, noting a gap in its ids.
    pub fn apply_event(
        &mut self,
        worker: WorkerKey,
        event_id: u64,
        data: &KvEventData,
    ) -> EventReport {
        let missed = match self.last_event.insert(worker, event_id) {
            Some(last) if event_id > last + 1 => Some(event_id - last - 1),
            _ => None,
        };
        EventReport {
            outcome: self.index.apply(worker, data),
            missed,
        }
    }

    /// Applies a decoded batch of events in order; only `device`-tier events feed the index.
    pub fn apply_events(&mut self, events: &[WireEvent]) -> BatchReport {
        let mut report = BatchReport::default();
        for event in events {
            if event.storage_tier != "device" {
                report.other_tier += 1;
                continue;
            }
            let outcome = self.apply_event(event.worker, event.event_id, &event.data);
            if let Some(missed) = outcome.missed {
                report.gaps.push((event.worker, missed));
            }
            match outcome.outcome {
                ApplyOutcome::Applied => report.applied += 1,
                ApplyOutcome::UnknownParent => report.unknown_parent += 1,
            }
        }
        report
    }

    /// Chooses a worker among `candidates` and counts the request on it until
    /// [`KvRouter::free`]. `random` is a uniform draw in [0, 1) (clamped into it); `now_ms` the
    /// clock for guesses. A request id routed again (a retry, a migration) is freed first, so its earlier
    /// placement neither weighs on the choice nor stays counted.
    pub fn route(
        &mut self,
        request: &RouteRequest,
        candidates: &[WorkerInfo],
        random: f64,
        now_ms: u64,
    ) -> Result<Decision, NoWorker> {
        if candidates.is_empty() {
            return Err(NoWorker::NoCandidates);
        }
        self.sequences.free(request.request_id);
        let decision = self.decide(request, candidates, random, now_ms)?;
        let prefill = request
            .isl_tokens
            .saturating_sub(u64::from(decision.overlap_blocks) * u64::from(self.cost.block_size));
        self.sequences.add(
            request.request_id,
            decision.worker,
            request.sequence_hashes.to_vec(),
            prefill,
            request.lora_name.map(str::to_owned),
        );
        if let Some(approx) = &mut self.approx {
            approx.insert(
                &mut self.index,
                decision.worker,
                request.tokens_hashes,
                request.sequence_hashes,
                now_ms,
            );
        }
        Ok(decision)
    }

    /// What [`KvRouter::route`] would choose, without counting the request.
    pub fn decide(
        &mut self,
        request: &RouteRequest,
        candidates: &[WorkerInfo],
        random: f64,
        now_ms: u64,
    ) -> Result<Decision, NoWorker> {
        if candidates.is_empty() {
            return Err(NoWorker::NoCandidates);
        }
        if let Some(approx) = &mut self.approx {
            approx.expire(&mut self.index, now_ms);
        }
        let overlaps: HashMap<WorkerKey, u32> = self
            .index
            .overlaps(request.tokens_hashes)
            .into_iter()
            .collect();
        let all: Vec<Candidate> = candidates
            .iter()
            .map(|w| Candidate {
                worker: w.worker,
                overlap_blocks: overlaps.get(&w.worker).copied().unwrap_or(0),
                load: self.sequences.load(w.worker),
                new_blocks: self.sequences.new_blocks(w.worker, request.sequence_hashes),
                total_blocks: w.total_blocks,
            })
            .collect();
        // A worker is as busy as the larger of the router's own count and its last report.
        let free: Vec<Candidate> = all
            .iter()
            .copied()
            .filter(|c| {
                let reported = self.reported_blocks.get(&c.worker).copied().unwrap_or(0);
                !self.cost.is_busy(&Candidate {
                    load: Load {
                        decode_blocks: c.load.decode_blocks.max(reported),
                        ..c.load
                    },
                    ..*c
                })
            })
            .collect();
        if free.is_empty() {
            return Err(NoWorker::AllBusy);
        }
        let scores = self.cost.score(request.isl_tokens, &free);
        let chosen = scores[self
            .cost
            .pick(&scores, random.clamp(0.0, 1.0 - f64::EPSILON))];
        Ok(Decision {
            worker: chosen.worker,
            overlap_blocks: chosen.overlap_blocks,
            logit: chosen.logit,
            scores,
        })
    }

    /// Applies a worker rank's reply to a recovery query: replayed events in order, or a dump
    /// that replaces what the index held for the rank. Event ids continue from the reply's
    /// `last_event_id`. Returns the events applied.
    pub fn apply_recovery(
        &mut self,
        worker: WorkerKey,
        reply: &RecoveryReply,
    ) -> Result<usize, String> {
        let (events, last, reset) = match reply {
            RecoveryReply::Events {
                events,
                last_event_id,
            } => (events, *last_event_id, false),
            RecoveryReply::TreeDump {
                events,
                last_event_id,
            } => (events, *last_event_id, true),
            RecoveryReply::Refused(why) => return Err(why.clone()),
        };
        if reset {
            self.index.apply(worker, &KvEventData::Cleared);
        }
        let mut applied = 0;
        for event in events
            .iter()
            .filter(|e| e.worker == worker && e.storage_tier == "device")
        {
            self.index.apply(worker, &event.data);
            applied += 1;
        }
        let seen = self.last_event.entry(worker).or_insert(0);
        *seen = if reset { last } else { (*seen).max(last) };
        Ok(applied)
    }

    /// The last event id applied for a worker rank.
    pub fn last_event_id(&self, worker: WorkerKey) -> Option<u64> {
        self.last_event.get(&worker).copied()
    }

    /// A worker's load report: its KV blocks in use (`kv_used_blocks`, else
    /// `active_decode_blocks`) count toward the busy threshold.
    pub fn apply_load(&mut self, load: &ActiveLoad) {
        let worker = WorkerKey {
            worker_id: load.worker_id,
            dp_rank: load.dp_rank,
        };
        match load.kv_used_blocks.or(load.active_decode_blocks) {
            Some(blocks) => self.reported_blocks.insert(worker, blocks),
            None => self.reported_blocks.remove(&worker),
        };
    }

    /// The request's first token arrived.
    pub fn prefill_done(&mut self, request_id: &str) {
        self.sequences.prefill_done(request_id);
    }

    /// The request ended.
    pub fn free(&mut self, request_id: &str) {
        self.sequences.free(request_id);
    }

    /// A worker left: its cache, load and event ids are forgotten.
    pub fn remove_worker(&mut self, worker_id: u64) {
        self.index.remove_worker(worker_id, None);
        self.sequences.remove_worker(worker_id);
        self.last_event.retain(|k, _| k.worker_id != worker_id);
        self.reported_blocks.retain(|k, _| k.worker_id != worker_id);
        if let Some(approx) = &mut self.approx {
            approx.remove_worker(worker_id);
        }
    }
}
