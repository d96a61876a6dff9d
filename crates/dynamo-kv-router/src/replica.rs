//! Stock Dynamo 1.6's replica sync (`active_sequences_events`): the routers of one model tell
//! each other which requests they booked on which worker, when prefill ended and when each
//! request ended, so every router counts the others' load too. Workers publish the prefill mark
//! as well, under their own id. Payloads are msgpack with named fields: one
//! [`ActiveSequenceEvent`] per NATS message, or an `{events: [...]}` batch of up to
//! [`MAX_REPLICA_BATCH_EVENTS`] over ZMQ.

use std::time::Duration;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::{Envelope, KvRouter, WorkerKey};

/// The topic of replica-sync events.
pub const ACTIVE_SEQUENCES_TOPIC: &str = "active_sequences_events";
/// Stock publishers cut a batch at this many events; a longer one is not stock's.
pub const MAX_REPLICA_BATCH_EVENTS: usize = 256;

/// One booking change, as stock serializes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveSequenceEvent {
    pub request_id: String,
    pub worker: WorkerKey,
    pub data: ActiveSequenceEventData,
    /// Who published it: a router's id, or the worker's id for a worker's prefill mark.
    pub router_id: u64,
    pub lora_name: Option<String>,
}

/// What changed (externally tagged: a map for `AddRequest`, a bare string otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActiveSequenceEventData {
    AddRequest {
        /// Sequence hashes of the prompt's full blocks.
        token_sequence: Option<Vec<u64>>,
        /// False: the request adds no prefill load.
        #[serde(default = "tracked")]
        track_prefill_tokens: bool,
        expected_output_tokens: Option<u32>,
        /// The prompt tokens left to compute; absent when none are.
        prefill_load_hint: Option<PrefillLoadHint>,
    },
    Free,
    MarkPrefillCompleted,
}

fn tracked() -> bool {
    true
}

/// A booking's prefill load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefillLoadHint {
    pub initial_effective_prefill_tokens: u64,
    /// Stock decays the load over this when it is known; this router keeps it whole until the
    /// prefill mark, so it sends none and ignores what it receives.
    pub expected_prefill_duration: Option<Duration>,
}

/// Which booking change of a request to publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaKind {
    Add,
    Free,
    PrefillDone,
}

/// What applying a payload did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaReport {
    /// Events that changed the router's counts.
    pub applied: u32,
    /// Own echoes, events dropped with sync off, and changes to bookings it does not hold.
    pub ignored: u32,
}

impl ActiveSequenceEvent {
    /// The event as one NATS payload.
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(self).expect("a replica event always encodes")
    }
}

#[derive(Serialize)]
struct BatchOut<'a> {
    events: &'a [ActiveSequenceEvent],
}

#[derive(Deserialize)]
struct BatchIn {
    events: Vec<ActiveSequenceEvent>,
}

/// Tells a batch from a single event: only a batch has `events`.
#[derive(Deserialize)]
struct Shape {
    events: Option<IgnoredAny>,
}

/// The events as one ZMQ payload (`ActiveSequenceEventBatch`).
pub fn encode_replica_batch(events: &[ActiveSequenceEvent]) -> Result<Vec<u8>, String> {
    check_batch_len(events.len())?;
    Ok(rmp_serde::to_vec_named(&BatchOut { events }).expect("a replica batch always encodes"))
}

fn check_batch_len(n: usize) -> Result<(), String> {
    if n > MAX_REPLICA_BATCH_EVENTS {
        return Err(format!(
            "a replica batch holds at most {MAX_REPLICA_BATCH_EVENTS} events, got {n}"
        ));
    }
    Ok(())
}

/// Decodes an `active_sequences_events` payload, a batch or a single event. The error names
/// what did not match stock's format.
pub fn decode_replica_payload(payload: &[u8]) -> Result<Vec<ActiveSequenceEvent>, String> {
    let shape: Shape = rmp_serde::from_slice(payload).map_err(|e| {
        format!("not a replica-sync payload (msgpack ActiveSequenceEvent or ActiveSequenceEventBatch): {e}")
    })?;
    if shape.events.is_some() {
        let batch: BatchIn = rmp_serde::from_slice(payload).map_err(|e| {
            format!(
                "not an ActiveSequenceEventBatch (msgpack map events: [ActiveSequenceEvent]): {e}"
            )
        })?;
        check_batch_len(batch.events.len())?;
        return Ok(batch.events);
    }
    let event: ActiveSequenceEvent = rmp_serde::from_slice(payload).map_err(|e| {
        format!("not an ActiveSequenceEvent (msgpack map request_id, worker, data, router_id, lora_name): {e}")
    })?;
    Ok(vec![event])
}

/// `payload` as publication `sequence` of `publisher_id` on `active_sequences_events`.
pub fn replica_envelope(
    publisher_id: u64,
    sequence: u64,
    now_ms: u64,
    payload: Vec<u8>,
) -> Envelope {
    Envelope {
        publisher_id,
        sequence,
        published_at: now_ms,
        topic: ACTIVE_SEQUENCES_TOPIC.into(),
        payload,
    }
}

impl KvRouter {
    /// The event that tells peers of a change to a request this router holds, published as
    /// `router_id`; None when it does not hold the request (publish `Free` before freeing it).
    pub fn replica_event(
        &self,
        router_id: u64,
        request_id: &str,
        kind: ReplicaKind,
    ) -> Option<ActiveSequenceEvent> {
        let request = self.sequences.get(request_id)?;
        let data = match kind {
            ReplicaKind::Add => ActiveSequenceEventData::AddRequest {
                token_sequence: Some(request.blocks.clone()),
                track_prefill_tokens: true,
                expected_output_tokens: None,
                // Stock sends no hint when nothing is left to prefill.
                prefill_load_hint: (request.prefill_tokens > 0).then_some(PrefillLoadHint {
                    initial_effective_prefill_tokens: request.prefill_tokens,
                    expected_prefill_duration: None,
                }),
            },
            ReplicaKind::Free => ActiveSequenceEventData::Free,
            ReplicaKind::PrefillDone => ActiveSequenceEventData::MarkPrefillCompleted,
        };
        Some(ActiveSequenceEvent {
            request_id: request_id.to_owned(),
            worker: request.worker,
            data,
            router_id,
            lora_name: request.lora_name.clone(),
        })
    }

    /// Applies a peer's event as stock's receiver does: its own echoes (`router_id` ==
    /// `own_router_id`) are dropped, and with sync off so is all but the prefill mark (workers
    /// publish that one whether routers sync or not). A new booking is added with its blocks
    /// and hinted prefill tokens; a known request id is left as it is. Free and the prefill
    /// mark touch only a request booked on the event's worker. Returns whether counts changed.
    pub fn apply_replica_event(
        &mut self,
        event: ActiveSequenceEvent,
        own_router_id: u64,
        sync_enabled: bool,
    ) -> bool {
        if event.router_id == own_router_id {
            return false;
        }
        let held = self.sequences.get(&event.request_id);
        let held_on_worker = held.filter(|r| r.worker == event.worker);
        match event.data {
            ActiveSequenceEventData::MarkPrefillCompleted => {
                // Nothing to do once its prefill no longer counts.
                if held_on_worker.is_none_or(|r| r.prefill_tokens == 0) {
                    return false;
                }
                self.sequences.prefill_done(&event.request_id);
            }
            _ if !sync_enabled => return false,
            ActiveSequenceEventData::AddRequest {
                token_sequence,
                track_prefill_tokens,
                prefill_load_hint,
                ..
            } => {
                if held.is_some() {
                    return false;
                }
                let prefill = match prefill_load_hint {
                    Some(hint) if track_prefill_tokens => hint.initial_effective_prefill_tokens,
                    _ => 0,
                };
                self.sequences.add(
                    &event.request_id,
                    event.worker,
                    token_sequence.unwrap_or_default(),
                    prefill,
                    event.lora_name,
                );
            }
            ActiveSequenceEventData::Free => {
                if held_on_worker.is_none() {
                    return false;
                }
                self.sequences.free(&event.request_id);
            }
        }
        true
    }

    /// Decodes an `active_sequences_events` payload (a batch or one event) and applies its
    /// events in order. Nothing is applied when it does not decode.
    pub fn apply_replica_payload(
        &mut self,
        payload: &[u8],
        own_router_id: u64,
        sync_enabled: bool,
    ) -> Result<ReplicaReport, String> {
        let mut report = ReplicaReport::default();
        for event in decode_replica_payload(payload)? {
            if self.apply_replica_event(event, own_router_id, sync_enabled) {
                report.applied += 1;
            } else {
                report.ignored += 1;
            }
        }
        Ok(report)
    }
}
