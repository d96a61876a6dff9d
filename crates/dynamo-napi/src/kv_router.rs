//! KV-aware routing: the frontend's `KvRouter` (events and load reports in, one decision per
//! request out) and the worker's `KvEventBatcher` (engine events in, stock-format envelopes out).
//! Routers of one model share their bookings through replica-sync envelopes.
//! Each call crosses once per message or per request; hashing and msgpack stay in Rust.

use dynamo_kv_router::{
    self as kv, ActiveLoad, Envelope, ReplicaKind, RouteRequest, RouterOptions,
    SessionAffinityUpdate, WorkerInfo, WorkerKey,
};
use dynamo_llm_core::block_hash::{block_hashes, sequence_hashes, HashScope};
use napi::bindgen_prelude::{BigInt, BigUint64Array, Buffer, Null, Uint32Array};
use napi::Either;
use napi_derive::napi;

use crate::convert::{invalid, js_error, u64_of, whole};

/// Hashes full blocks of tokens as routers hash prompts, scoped by the LoRA adapter.
fn hash_blocks(tokens: &[u32], block_size: usize, lora_name: Option<&str>) -> Vec<u64> {
    let scope = HashScope {
        lora_name,
        salt: None,
    };
    block_hashes(tokens, block_size, &scope)
}

/// The router's settings; unset fields take stock Dynamo 1.6's defaults.
#[napi(object)]
pub struct KvRouterOptions {
    /// Tokens per KV block (the card's `kv_cache_block_size`).
    pub block_size: u32,
    /// Weight of the prefill term (`--router-prefill-load-scale`, default 1).
    pub prefill_load_scale: Option<f64>,
    /// Stock's older name for `prefillLoadScale` (`--kv-overlap-score-weight`): wins when set,
    /// and 0 also drops the cache credit.
    pub overlap_score_weight: Option<f64>,
    /// Blocks of prompt work each cached block saves, 0 to 1 (default 1).
    pub overlap_score_credit: Option<f64>,
    /// How fast that credit shrinks on a worker behind in prefill (default 0).
    pub overlap_score_credit_decay: Option<f64>,
    /// Softmax temperature (`--router-temperature`, default 0: always the cheapest).
    pub temperature: Option<f64>,
    /// Count blocks a worker already holds for other requests once (`--no-assume-kv-reuse` turns it off).
    pub assume_kv_reuse: Option<bool>,
    /// Busy above this fraction (0 to 1) of a worker's KV blocks in use.
    pub active_decode_blocks_threshold: Option<f64>,
    /// Busy above this many prompt tokens still to prefill.
    pub active_prefill_tokens_threshold: Option<f64>,
    /// Weight of each request in flight on a worker (default 0).
    pub decode_active_request_weight: Option<f64>,
    /// When false, no KV events are expected: the router remembers what it sent where for
    /// `ttlSecs` instead (`--no-router-kv-events`).
    pub use_kv_events: Option<bool>,
    /// How long a guessed block lives in approximate mode (`--router-ttl-secs`, default 120).
    pub ttl_secs: Option<f64>,
    /// Approximate mode prunes the oldest guesses past this many blocks (default 2^20).
    pub max_tree_size: Option<u32>,
    /// and keeps this fraction of `maxTreeSize` (default 0.8).
    pub prune_target_ratio: Option<f64>,
    /// LoRA adapter name scoping the block hashes.
    pub lora_name: Option<String>,
}

/// A worker a request may go to.
#[napi(object)]
pub struct KvCandidate {
    pub worker_id: BigInt,
    pub dp_rank: Option<u32>,
    /// Its KV capacity in blocks (the card's `total_kv_blocks`), when known.
    pub total_blocks: Option<f64>,
}

/// Where a request goes and why.
#[napi(object)]
pub struct KvDecision {
    pub worker_id: BigInt,
    pub dp_rank: u32,
    /// Leading prompt blocks the worker caches.
    pub overlap_blocks: u32,
    /// The prompt's full blocks.
    pub request_blocks: u32,
    /// Its cost (lower is better).
    pub logit: f64,
    /// The lowest cost's best overlap among the candidates, to tell when load won over cache.
    pub best_overlap_blocks: u32,
}

/// A worker whose event ids skipped some.
#[napi(object)]
pub struct KvEventGap {
    pub worker_id: BigInt,
    pub dp_rank: u32,
    pub missed: f64,
}

/// What applying one message did.
#[napi(object)]
pub struct KvEventReport {
    /// The envelope's publisher id and sequence (absent for a bare payload).
    pub publisher_id: Option<BigInt>,
    pub sequence: Option<BigInt>,
    pub applied: u32,
    /// Stored events whose parent block the worker never reported: dropped.
    pub unknown_parent: u32,
    /// Events of another storage tier than `device`: not indexed.
    pub other_tier: u32,
    pub gaps: Vec<KvEventGap>,
}

/// The router's size, for metrics and benchmarks.
#[napi(object)]
pub struct KvRouterStats {
    pub cached_blocks: f64,
    pub tree_nodes: f64,
    pub memory_bytes: f64,
    pub active_requests: f64,
}

/// The busy thresholds to run with from now on; an absent or null one turns its check off.
#[napi(object)]
pub struct KvBusyThresholds {
    /// Busy above this fraction (0 to 1) of a worker's KV blocks in use.
    #[napi(ts_type = "number | null")]
    pub active_decode_blocks_threshold: Option<Either<f64, Null>>,
    /// Busy above this many prompt tokens still to prefill (a whole number).
    #[napi(ts_type = "number | null")]
    pub active_prefill_tokens_threshold: Option<Either<f64, Null>>,
}

/// A field JS may leave out or set to null: both mean none.
fn nullable(value: Option<Either<f64, Null>>) -> Option<f64> {
    match value {
        Some(Either::A(x)) => Some(x),
        _ => None,
    }
}

/// A worker rank's load as the router predicts it from the requests booked on it.
#[napi(object)]
pub struct KvWorkerLoad {
    pub worker_id: BigInt,
    pub dp_rank: u32,
    /// KV blocks its requests hold (shared prefixes once).
    pub decode_blocks: f64,
    /// Prompt tokens still to prefill.
    pub prefill_tokens: f64,
    /// Requests in flight.
    pub requests: u32,
}

/// What applying a replica-sync envelope did.
#[napi(object)]
pub struct KvReplicaReport {
    /// Events that changed the router's counts.
    pub applied: u32,
    /// The router's own echoes, events dropped with sync off, and changes to requests it does
    /// not hold on that worker.
    pub ignored: u32,
}

/// Stock Dynamo's KV-aware router for one model: the radix index of each worker's cached blocks
/// (from its KV events, or guessed from past decisions), the load it has sent each worker, and
/// the cost function that weighs the two.
#[napi]
pub struct KvRouter {
    inner: kv::KvRouter,
    block_size: u32,
    lora_name: Option<String>,
}

#[napi]
impl KvRouter {
    /// Throws `InvalidArg` naming a bad option.
    #[napi(constructor)]
    pub fn new(options: KvRouterOptions) -> napi::Result<Self> {
        let settings = RouterOptions {
            block_size: options.block_size,
            prefill_load_scale: options.prefill_load_scale,
            overlap_score_weight: options.overlap_score_weight,
            overlap_score_credit: options.overlap_score_credit,
            overlap_score_credit_decay: options.overlap_score_credit_decay,
            temperature: options.temperature,
            assume_kv_reuse: options.assume_kv_reuse,
            active_decode_blocks_threshold: options.active_decode_blocks_threshold,
            active_prefill_tokens_threshold: options
                .active_prefill_tokens_threshold
                .map(|t| whole("activePrefillTokensThreshold", t))
                .transpose()?,
            decode_active_request_weight: options.decode_active_request_weight,
            use_kv_events: options.use_kv_events,
            ttl_secs: options.ttl_secs,
            max_tree_size: options.max_tree_size.map(|n| n as usize),
            prune_target_ratio: options.prune_target_ratio,
        }
        .resolve()
        .map_err(js_error)?;
        Ok(Self {
            inner: kv::KvRouter::new(settings.cost, settings.approx),
            block_size: options.block_size,
            lora_name: options.lora_name,
        })
    }

    /// Tokens per block the router hashes prompts with.
    #[napi(getter)]
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Replaces both busy thresholds at run time (stock's busy-threshold endpoint); an absent
    /// or null one turns its check off. Throws `InvalidArg` naming a threshold out of range;
    /// nothing changes then.
    #[napi]
    pub fn set_busy_thresholds(&mut self, thresholds: KvBusyThresholds) -> napi::Result<()> {
        let prefill = nullable(thresholds.active_prefill_tokens_threshold)
            .map(|t| whole("activePrefillTokensThreshold", t))
            .transpose()?;
        self.inner
            .set_busy_thresholds(nullable(thresholds.active_decode_blocks_threshold), prefill)
            .map_err(js_error)
    }

    /// The predicted load of every worker rank the router has booked requests on (idle ones
    /// it still knows included), by worker id and rank.
    #[napi]
    pub fn worker_loads(&self) -> Vec<KvWorkerLoad> {
        self.inner
            .loads()
            .into_iter()
            .map(|(worker, load)| KvWorkerLoad {
                worker_id: BigInt::from(worker.worker_id),
                dp_rank: worker.dp_rank,
                decode_blocks: load.decode_blocks as f64,
                prefill_tokens: load.prefill_tokens as f64,
                requests: load.requests,
            })
            .collect()
    }

    /// An `active_sequences_events` envelope telling peer routers (published as `routerId`)
    /// that a request this router holds was booked (`add`, after `route`), finished prefill
    /// (`prefill_done`) or ended (`free`, before `free`). `batch` frames the event as a batch
    /// of one, as stock sends over ZMQ; otherwise it is the single event NATS carries. Null
    /// when the router does not hold the request.
    #[napi(
        ts_args_type = "publisherId: bigint, sequence: bigint, nowMs: number, routerId: bigint, requestId: string, kind: 'add' | 'free' | 'prefill_done', batch: boolean"
    )]
    #[allow(clippy::too_many_arguments)] // the envelope's fields plus the event's, one crossing
    pub fn replica_event_envelope(
        &self,
        publisher_id: BigInt,
        sequence: BigInt,
        now_ms: f64,
        router_id: BigInt,
        request_id: String,
        kind: String,
        batch: bool,
    ) -> napi::Result<Option<Buffer>> {
        let publisher_id = u64_of("publisherId", &publisher_id)?;
        let sequence = u64_of("sequence", &sequence)?;
        let now_ms = whole("nowMs", now_ms.floor())?;
        let router_id = u64_of("routerId", &router_id)?;
        let kind = match kind.as_str() {
            "add" => ReplicaKind::Add,
            "free" => ReplicaKind::Free,
            "prefill_done" => ReplicaKind::PrefillDone,
            other => {
                return Err(invalid(format!(
                    "kind must be 'add', 'free' or 'prefill_done', got '{other}'"
                )))
            }
        };
        let Some(event) = self.inner.replica_event(router_id, &request_id, kind) else {
            return Ok(None);
        };
        let payload = if batch {
            kv::encode_replica_batch(std::slice::from_ref(&event)).map_err(invalid)?
        } else {
            event.encode()
        };
        Ok(Some(
            kv::replica_envelope(publisher_id, sequence, now_ms, payload)
                .encode()
                .into(),
        ))
    }

    /// Applies a peer's `active_sequences_events` envelope (one event, or a batch of up to
    /// 256): events published as `ownRouterId` are dropped, and with `syncEnabled` false so is
    /// everything but prefill marks. Throws `InvalidArg` naming what did not decode; nothing
    /// is applied then.
    #[napi]
    pub fn apply_replica_envelope(
        &mut self,
        envelope: &[u8],
        own_router_id: BigInt,
        sync_enabled: bool,
    ) -> napi::Result<KvReplicaReport> {
        let own_router_id = u64_of("ownRouterId", &own_router_id)?;
        let envelope = Envelope::decode(envelope).map_err(invalid)?;
        let report = self
            .inner
            .apply_replica_payload(&envelope.payload, own_router_id, sync_enabled)
            .map_err(invalid)?;
        Ok(KvReplicaReport {
            applied: report.applied,
            ignored: report.ignored,
        })
    }

    /// Applies an event-plane envelope of `kv-events` (its payload a batch of RouterEvents).
    /// Throws `InvalidArg` naming what did not decode; nothing is applied then.
    #[napi]
    pub fn apply_event_envelope(&mut self, envelope: &[u8]) -> napi::Result<KvEventReport> {
        let envelope = Envelope::decode(envelope).map_err(invalid)?;
        let mut report = self.apply_event_batch(&envelope.payload)?;
        report.publisher_id = Some(BigInt::from(envelope.publisher_id));
        report.sequence = Some(BigInt::from(envelope.sequence));
        Ok(report)
    }

    /// Applies a bare batch of RouterEvents (msgpack).
    #[napi]
    pub fn apply_event_batch(&mut self, payload: &[u8]) -> napi::Result<KvEventReport> {
        let events = kv::decode_event_batch(payload).map_err(invalid)?;
        let report = self.inner.apply_events(&events);
        Ok(KvEventReport {
            publisher_id: None,
            sequence: None,
            applied: report.applied,
            unknown_parent: report.unknown_parent,
            other_tier: report.other_tier,
            gaps: report
                .gaps
                .into_iter()
                .map(|(worker, missed)| KvEventGap {
                    worker_id: BigInt::from(worker.worker_id),
                    dp_rank: worker.dp_rank,
                    missed: missed as f64,
                })
                .collect(),
        })
    }

    /// Applies a worker rank's JSON reply to a recovery query (replayed events, or a dump that
    /// replaces what the index held for the rank). Returns the events applied; throws
    /// `InvalidArg` naming what did not decode, or why the worker refused.
    #[napi]
    pub fn apply_recovery(
        &mut self,
        worker_id: BigInt,
        dp_rank: u32,
        reply: String,
    ) -> napi::Result<u32> {
        let worker = WorkerKey {
            worker_id: u64_of("workerId", &worker_id)?,
            dp_rank,
        };
        let reply = kv::decode_recovery_reply(&reply).map_err(invalid)?;
        self.inner
            .apply_recovery(worker, &reply)
            .map(|n| n as u32)
            .map_err(|why| invalid(format!("the worker refused: {why}")))
    }

    /// Applies an event-plane envelope of `kv_metrics` (an ActiveLoad). Returns the reporting worker.
    #[napi]
    pub fn apply_load_envelope(&mut self, envelope: &[u8]) -> napi::Result<BigInt> {
        let envelope = Envelope::decode(envelope).map_err(invalid)?;
        let load = ActiveLoad::decode(&envelope.payload).map_err(invalid)?;
        self.inner.apply_load(&load);
        Ok(BigInt::from(load.worker_id))
    }

    /// Chooses a worker for a prompt and counts the request on it until `free`. Returns null
    /// when every candidate is past a busy threshold. `random` is a uniform draw in [0, 1).
    /// `loraName` (default: the router's) is the adapter the request runs under: its name
    /// seeds the prompt's block hashes, so only that adapter's cached blocks match.
    #[napi]
    pub fn route(
        &mut self,
        request_id: String,
        token_ids: Uint32Array,
        candidates: Vec<KvCandidate>,
        random: f64,
        now_ms: f64,
        lora_name: Option<String>,
    ) -> napi::Result<Option<KvDecision>> {
        let workers = candidates
            .iter()
            .map(|c| {
                Ok(WorkerInfo {
                    worker: WorkerKey {
                        worker_id: u64_of("candidates[].workerId", &c.worker_id)?,
                        dp_rank: c.dp_rank.unwrap_or(0),
                    },
                    total_blocks: c
                        .total_blocks
                        .map(|t| whole("candidates[].totalBlocks", t))
                        .transpose()?,
                })
            })
            .collect::<napi::Result<Vec<_>>>()?;
        let now_ms = whole("nowMs", now_ms.floor())?;
        let tokens = hash_blocks(
            &token_ids,
            self.block_size as usize,
            lora_name.as_deref().or(self.lora_name.as_deref()),
        );
        let sequence = sequence_hashes(&tokens);
        let request = RouteRequest {
            request_id: &request_id,
            tokens_hashes: &tokens,
            sequence_hashes: &sequence,
            isl_tokens: token_ids.len() as u64,
            lora_name: lora_name.as_deref().or(self.lora_name.as_deref()),
        };
        match self.inner.route(&request, &workers, random, now_ms) {
            Ok(d) => Ok(Some(KvDecision {
                worker_id: BigInt::from(d.worker.worker_id),
                dp_rank: d.worker.dp_rank,
                overlap_blocks: d.overlap_blocks,
                request_blocks: tokens.len() as u32,
                logit: d.logit,
                best_overlap_blocks: d.best_overlap_blocks(),
            })),
            Err(kv::NoWorker::AllBusy) => Ok(None),
            Err(kv::NoWorker::NoCandidates) => Err(invalid("route needs at least one candidate")),
        }
    }

    /// The request's first token arrived: its prompt no longer counts as prefill load.
    #[napi]
    pub fn prefill_done(&mut self, request_id: String) {
        self.inner.prefill_done(&request_id);
    }

    /// The request ended.
    #[napi]
    pub fn free(&mut self, request_id: String) {
        self.inner.free(&request_id);
    }

    /// A worker left: its cached blocks, load and event ids are forgotten.
    #[napi]
    pub fn remove_worker(&mut self, worker_id: BigInt) -> napi::Result<()> {
        self.inner.remove_worker(u64_of("workerId", &worker_id)?);
        Ok(())
    }

    /// Blocks a worker (rank) is known to cache.
    #[napi]
    pub fn worker_blocks(&self, worker_id: BigInt, dp_rank: Option<u32>) -> napi::Result<f64> {
        Ok(self.inner.index().worker_blocks(WorkerKey {
            worker_id: u64_of("workerId", &worker_id)?,
            dp_rank: dp_rank.unwrap_or(0),
        }) as f64)
    }

    #[napi]
    pub fn stats(&self) -> KvRouterStats {
        let index = self.inner.index();
        KvRouterStats {
            cached_blocks: index.block_count() as f64,
            tree_nodes: index.node_count() as f64,
            memory_bytes: index.memory_bytes() as f64,
            active_requests: self.inner.sequences().len() as f64,
        }
    }
}

/// Identifies a worker's KV event publication.
#[napi(object)]
pub struct KvPublisherIdentity {
    /// The worker's instance id (RouterEvent `worker_id`).
    pub worker_id: BigInt,
    pub block_size: u32,
    pub lora_name: Option<String>,
    /// Events kept per rank to replay to a router that missed some (default 1024); older ranges
    /// are answered with a dump of the cache.
    pub recovery_buffer_events: Option<u32>,
}

/// Hashes a block-aligned run of tokens for the batcher, under the event's LoRA adapter or else
/// the publisher's.
type BlockHasher = Box<dyn Fn(&[u32], usize, Option<&str>) -> Vec<u64>>;

/// A worker's KV events on their way out: the engine's stored / removed / cleared calls are
/// numbered per data-parallel rank (from 1, as stock numbers them) and queued; `flush` encodes
/// the queue as one stock-format envelope. Token hashes are computed here from the block's tokens.
#[napi]
pub struct KvEventBatcher {
    inner: kv::KvEventBatcher<BlockHasher>,
}

#[napi]
impl KvEventBatcher {
    #[napi(constructor)]
    pub fn new(identity: KvPublisherIdentity) -> napi::Result<Self> {
        let worker_id = u64_of("workerId", &identity.worker_id)?;
        let default_lora = identity.lora_name;
        let hasher: BlockHasher = Box::new(move |tokens, block_size, lora_name| {
            hash_blocks(tokens, block_size, lora_name.or(default_lora.as_deref()))
        });
        let inner = kv::KvEventBatcher::new(
            worker_id,
            identity.block_size,
            identity.recovery_buffer_events.map(|n| n as usize),
            hasher,
        )
        .map_err(js_error)?;
        Ok(Self { inner })
    }

    /// Answers a router's recovery query for one rank (stock's `WorkerKvQueryRequest` as JSON):
    /// the events it asks for, or a dump of the cache when they are no longer kept.
    #[napi]
    pub fn query(&self, dp_rank: u32, request: String) -> String {
        self.inner.query(dp_rank, &request)
    }

    /// Full blocks now cached: `blockIds` are the engine's ids for them (one per
    /// `blockSize` tokens of `tokenIds`), following the block `parentId` (null: a prompt's first),
    /// computed under the LoRA adapter `loraName` (default: the publisher's).
    #[napi]
    pub fn stored(
        &mut self,
        dp_rank: u32,
        token_ids: Uint32Array,
        block_ids: BigUint64Array,
        parent_id: Option<BigInt>,
        lora_name: Option<String>,
    ) -> napi::Result<()> {
        let parent_id = parent_id.map(|p| u64_of("parentId", &p)).transpose()?;
        self.inner
            .stored_for(
                dp_rank,
                &token_ids,
                &block_ids,
                parent_id,
                lora_name.as_deref(),
            )
            .map_err(invalid)
    }

    /// Blocks evicted.
    #[napi]
    pub fn removed(&mut self, dp_rank: u32, block_ids: BigUint64Array) {
        self.inner.removed(dp_rank, &block_ids);
    }

    /// The whole cache of the rank was dropped.
    #[napi]
    pub fn cleared(&mut self, dp_rank: u32) {
        self.inner.cleared(dp_rank);
    }

    /// Queues a vLLM raw batch (as a vLLM engine publishes on its own ZMQ socket); its
    /// `dp_rank` wins over `dpRank`. Returns the events queued. Throws `InvalidArg` naming the
    /// event and field that did not decode; nothing is queued then.
    #[napi]
    pub fn relay_vllm(&mut self, dp_rank: u32, payload: &[u8]) -> napi::Result<u32> {
        self.inner
            .relay_vllm(dp_rank, payload)
            .map(|n| n as u32)
            .map_err(invalid)
    }

    /// Events queued since the last flush.
    #[napi(getter)]
    pub fn pending(&self) -> u32 {
        self.inner.pending() as u32
    }

    /// The queue as one `kv-events` envelope of the publisher's `sequence` (null when empty).
    #[napi]
    pub fn flush(
        &mut self,
        publisher_id: BigInt,
        sequence: BigInt,
        now_ms: f64,
    ) -> napi::Result<Option<Buffer>> {
        let publisher_id = u64_of("publisherId", &publisher_id)?;
        let sequence = u64_of("sequence", &sequence)?;
        let now_ms = whole("nowMs", now_ms.floor())?;
        Ok(self
            .inner
            .flush(publisher_id, sequence, now_ms)
            .map(|envelope| envelope.encode().into()))
    }
}

/// A worker's load report on `kv_metrics`.
#[napi(object)]
pub struct ActiveLoadReport {
    pub worker_id: BigInt,
    pub dp_rank: u32,
    pub active_decode_blocks: Option<f64>,
    pub active_prefill_tokens: Option<f64>,
    pub kv_used_blocks: Option<f64>,
}

/// Encodes `load` as a stock `kv_metrics` envelope.
#[napi]
pub fn encode_active_load(
    publisher_id: BigInt,
    sequence: BigInt,
    now_ms: f64,
    load: ActiveLoadReport,
) -> napi::Result<Buffer> {
    let opt = |name: &str, v: Option<f64>| v.map(|x| whole(name, x)).transpose();
    let load = ActiveLoad {
        worker_id: u64_of("workerId", &load.worker_id)?,
        dp_rank: load.dp_rank,
        active_decode_blocks: opt("activeDecodeBlocks", load.active_decode_blocks)?,
        active_prefill_tokens: opt("activePrefillTokens", load.active_prefill_tokens)?,
        kv_used_blocks: opt("kvUsedBlocks", load.kv_used_blocks)?,
    };
    let envelope = load.envelope(
        u64_of("publisherId", &publisher_id)?,
        u64_of("sequence", &sequence)?,
        whole("nowMs", now_ms.floor())?,
    );
    Ok(envelope.encode().into())
}

/// Decodes a `kv_metrics` envelope (a worker's load report), for routers that only weigh load.
/// `InvalidArg` naming what did not decode.
#[napi]
pub fn decode_active_load(envelope: &[u8]) -> napi::Result<ActiveLoadReport> {
    let envelope = Envelope::decode(envelope).map_err(invalid)?;
    let load = ActiveLoad::decode(&envelope.payload).map_err(invalid)?;
    Ok(ActiveLoadReport {
        worker_id: BigInt::from(load.worker_id),
        dp_rank: load.dp_rank,
        active_decode_blocks: load.active_decode_blocks.map(|v| v as f64),
        active_prefill_tokens: load.active_prefill_tokens.map(|v| v as f64),
        kv_used_blocks: load.kv_used_blocks.map(|v| v as f64),
    })
}

/// A session binding as frontends share it on `session_affinity_events`.
#[napi(object)]
pub struct SessionBinding {
    pub session_id: String,
    pub worker_id: BigInt,
    /// Absent for a binding to the worker rather than one of its ranks.
    pub dp_rank: Option<u32>,
    /// With `writerId`, orders the versions of a binding.
    pub sequence: BigInt,
    /// The publishing frontend's discovery instance id.
    pub writer_id: BigInt,
}

/// Encodes a session binding as a stock `session_affinity_events` envelope.
#[napi]
pub fn encode_session_binding(
    publisher_id: BigInt,
    sequence: BigInt,
    now_ms: f64,
    binding: SessionBinding,
) -> napi::Result<Buffer> {
    let update = SessionAffinityUpdate {
        session_id: binding.session_id,
        worker_id: u64_of("workerId", &binding.worker_id)?,
        dp_rank: binding.dp_rank,
        sequence: u64_of("sequence", &binding.sequence)?,
        writer_id: u64_of("writerId", &binding.writer_id)?,
    };
    let envelope = update.envelope(
        u64_of("publisherId", &publisher_id)?,
        u64_of("sequence", &sequence)?,
        whole("nowMs", now_ms.floor())?,
    );
    Ok(envelope.encode().into())
}

/// A peer's session binding and the publisher it came from.
#[napi(object)]
pub struct ReceivedSessionBinding {
    pub publisher_id: BigInt,
    pub binding: SessionBinding,
}

/// Decodes a `session_affinity_events` envelope. `InvalidArg` naming what did not decode.
#[napi]
pub fn decode_session_binding(envelope: &[u8]) -> napi::Result<ReceivedSessionBinding> {
    let envelope = Envelope::decode(envelope).map_err(invalid)?;
    let update = SessionAffinityUpdate::decode(&envelope.payload).map_err(invalid)?;
    Ok(ReceivedSessionBinding {
        publisher_id: BigInt::from(envelope.publisher_id),
        binding: SessionBinding {
            session_id: update.session_id,
            worker_id: BigInt::from(update.worker_id),
            dp_rank: update.dp_rank,
            sequence: BigInt::from(update.sequence),
            writer_id: BigInt::from(update.writer_id),
        },
    })
}
