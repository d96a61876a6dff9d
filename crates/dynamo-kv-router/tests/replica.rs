//! Replica sync: stock 1.6.1's `active_sequences_events` payloads (built by hand from its
//! struct definitions) and what applying a peer's events does to the router's counts.

use std::time::Duration;

use dynamo_kv_router::{
    decode_replica_payload, encode_replica_batch, replica_envelope, ActiveSequenceEvent,
    ActiveSequenceEventData, CostConfig, Envelope, KvRouter, Load, PrefillLoadHint, ReplicaKind,
    ReplicaReport, RouteRequest, WorkerInfo, WorkerKey, ACTIVE_SEQUENCES_TOPIC,
    MAX_REPLICA_BATCH_EVENTS,
};

mod msgpack;

use msgpack::{arr, map, str_, uint, NIL, TRUE};

fn w(id: u64, dp_rank: u32) -> WorkerKey {
    WorkerKey {
        worker_id: id,
        dp_rank,
    }
}

fn add_event(request_id: &str, worker: WorkerKey, router_id: u64) -> ActiveSequenceEvent {
    ActiveSequenceEvent {
        request_id: request_id.into(),
        worker,
        data: ActiveSequenceEventData::AddRequest {
            token_sequence: Some(vec![11, 12, 13]),
            track_prefill_tokens: true,
            expected_output_tokens: None,
            prefill_load_hint: Some(PrefillLoadHint {
                initial_effective_prefill_tokens: 40,
                expected_prefill_duration: None,
            }),
        },
        router_id,
        lora_name: None,
    }
}

fn event(
    request_id: &str,
    worker: WorkerKey,
    router_id: u64,
    data: ActiveSequenceEventData,
) -> ActiveSequenceEvent {
    ActiveSequenceEvent {
        data,
        ..add_event(request_id, worker, router_id)
    }
}

fn router() -> KvRouter {
    KvRouter::new(
        CostConfig {
            block_size: 16,
            ..Default::default()
        },
        None,
    )
}

const ME: u64 = 1;
const PEER: u64 = 2;

#[test]
fn an_add_request_is_encoded_exactly_as_stock_serializes_it() {
    let event = ActiveSequenceEvent {
        lora_name: Some("sql".into()),
        ..add_event("req-1", w(7_587_890_123_456_789_012, 1), 0xdead_beef_0000)
    };
    let expected = map(&[
        ("request_id", str_("req-1")),
        (
            "worker",
            map(&[
                ("worker_id", uint(7_587_890_123_456_789_012)),
                ("dp_rank", uint(1)),
            ]),
        ),
        (
            "data",
            map(&[(
                "AddRequest",
                map(&[
                    ("token_sequence", arr(&[uint(11), uint(12), uint(13)])),
                    ("track_prefill_tokens", vec![TRUE]),
                    ("expected_output_tokens", vec![NIL]),
                    (
                        "prefill_load_hint",
                        map(&[
                            ("initial_effective_prefill_tokens", uint(40)),
                            ("expected_prefill_duration", vec![NIL]),
                        ]),
                    ),
                ]),
            )]),
        ),
        ("router_id", uint(0xdead_beef_0000)),
        ("lora_name", str_("sql")),
    ]);
    assert_eq!(event.encode(), expected);
    assert_eq!(decode_replica_payload(&expected).unwrap(), vec![event]);
}

#[test]
fn free_and_the_prefill_mark_are_bare_strings_and_a_batch_is_a_map_of_events() {
    let free = event("r", w(3, 0), 9, ActiveSequenceEventData::Free);
    let mark = event(
        "r",
        w(3, 0),
        3,
        ActiveSequenceEventData::MarkPrefillCompleted,
    );
    let bytes = |data: &str, router_id: u64| {
        map(&[
            ("request_id", str_("r")),
            (
                "worker",
                map(&[("worker_id", uint(3)), ("dp_rank", uint(0))]),
            ),
            ("data", str_(data)),
            ("router_id", uint(router_id)),
            ("lora_name", vec![NIL]),
        ])
    };
    assert_eq!(free.encode(), bytes("Free", 9));
    assert_eq!(mark.encode(), bytes("MarkPrefillCompleted", 3));
    let batch = map(&[(
        "events",
        arr(&[bytes("Free", 9), bytes("MarkPrefillCompleted", 3)]),
    )]);
    assert_eq!(
        encode_replica_batch(&[free.clone(), mark.clone()]).unwrap(),
        batch
    );
    assert_eq!(decode_replica_payload(&batch).unwrap(), vec![free, mark]);
}

#[test]
fn an_add_request_decodes_with_stocks_defaults_and_a_prefill_duration() {
    // track_prefill_tokens absent (stock's default: true); a hint with a duration.
    let payload = map(&[
        ("request_id", str_("r")),
        (
            "worker",
            map(&[("worker_id", uint(3)), ("dp_rank", uint(2))]),
        ),
        (
            "data",
            map(&[(
                "AddRequest",
                map(&[
                    ("token_sequence", vec![NIL]),
                    ("expected_output_tokens", uint(128)),
                    (
                        "prefill_load_hint",
                        map(&[
                            ("initial_effective_prefill_tokens", uint(300)),
                            (
                                "expected_prefill_duration",
                                map(&[("secs", uint(1)), ("nanos", uint(500_000_000))]),
                            ),
                        ]),
                    ),
                ]),
            )]),
        ),
        ("router_id", uint(PEER)),
        ("lora_name", vec![NIL]),
    ]);
    let events = decode_replica_payload(&payload).unwrap();
    assert_eq!(
        events[0].data,
        ActiveSequenceEventData::AddRequest {
            token_sequence: None,
            track_prefill_tokens: true,
            expected_output_tokens: Some(128),
            prefill_load_hint: Some(PrefillLoadHint {
                initial_effective_prefill_tokens: 300,
                expected_prefill_duration: Some(Duration::from_millis(1500)),
            }),
        }
    );
    let mut router = router();
    let report = router.apply_replica_payload(&payload, ME, true).unwrap();
    assert_eq!(
        report,
        ReplicaReport {
            applied: 1,
            ignored: 0
        }
    );
    assert_eq!(
        router.sequences().load(w(3, 2)),
        Load {
            decode_blocks: 0,
            prefill_tokens: 300,
            requests: 1
        }
    );
}

#[test]
fn the_envelope_names_the_topic_and_round_trips() {
    let payload = add_event("r", w(3, 0), PEER).encode();
    let bytes = replica_envelope(5, 6, 7, payload.clone()).encode();
    let envelope = Envelope::decode(&bytes).unwrap();
    assert_eq!(envelope.topic, ACTIVE_SEQUENCES_TOPIC);
    assert_eq!(envelope.topic, "active_sequences_events");
    assert_eq!(
        (
            envelope.publisher_id,
            envelope.sequence,
            envelope.published_at
        ),
        (5, 6, 7)
    );
    assert_eq!(envelope.payload, payload);
}

#[test]
fn a_peers_add_request_raises_the_workers_load_and_its_free_lowers_it() {
    let mut router = router();
    let worker = w(3, 0);
    assert!(router.apply_replica_event(add_event("r", worker, PEER), ME, true));
    assert_eq!(
        router.sequences().load(worker),
        Load {
            decode_blocks: 3,
            prefill_tokens: 40,
            requests: 1
        }
    );
    let mark = event(
        "r",
        worker,
        3,
        ActiveSequenceEventData::MarkPrefillCompleted,
    );
    assert!(router.apply_replica_event(mark.clone(), ME, true));
    assert_eq!(router.sequences().load(worker).prefill_tokens, 0);
    // A second mark changes nothing.
    assert!(!router.apply_replica_event(mark, ME, true));
    assert!(router.apply_replica_event(
        event("r", worker, PEER, ActiveSequenceEventData::Free),
        ME,
        true
    ));
    assert_eq!(router.sequences().load(worker), Load::default());
    assert!(router.sequences().is_empty());
}

#[test]
fn an_untracked_or_unhinted_add_request_adds_no_prefill_load() {
    let mut router = router();
    let untracked = ActiveSequenceEventData::AddRequest {
        token_sequence: Some(vec![1]),
        track_prefill_tokens: false,
        expected_output_tokens: None,
        prefill_load_hint: Some(PrefillLoadHint {
            initial_effective_prefill_tokens: 40,
            expected_prefill_duration: None,
        }),
    };
    let unhinted = ActiveSequenceEventData::AddRequest {
        token_sequence: Some(vec![2]),
        track_prefill_tokens: true,
        expected_output_tokens: None,
        prefill_load_hint: None,
    };
    assert!(router.apply_replica_event(event("a", w(3, 0), PEER, untracked), ME, true));
    assert!(router.apply_replica_event(event("b", w(3, 0), PEER, unhinted), ME, true));
    assert_eq!(
        router.sequences().load(w(3, 0)),
        Load {
            decode_blocks: 2,
            prefill_tokens: 0,
            requests: 2
        }
    );
}

#[test]
fn the_routers_own_events_are_ignored() {
    let mut router = router();
    let report = router
        .apply_replica_payload(&add_event("r", w(3, 0), ME).encode(), ME, true)
        .unwrap();
    assert_eq!(
        report,
        ReplicaReport {
            applied: 0,
            ignored: 1
        }
    );
    assert!(router.sequences().is_empty());
}

#[test]
fn with_sync_off_only_the_prefill_mark_is_applied() {
    let mut router = router();
    let worker = w(3, 0);
    assert!(!router.apply_replica_event(add_event("peer", worker, PEER), ME, false));
    assert!(router.sequences().is_empty());

    // A request this router booked itself; the worker marks its prefill done.
    let request = RouteRequest {
        request_id: "mine",
        tokens_hashes: &[],
        sequence_hashes: &[21, 22],
        isl_tokens: 32,
        lora_name: None,
    };
    let candidates = [WorkerInfo {
        worker,
        total_blocks: None,
    }];
    router.route(&request, &candidates, 0.0, 0).unwrap();
    assert_eq!(router.sequences().load(worker).prefill_tokens, 32);
    let free = event("mine", worker, PEER, ActiveSequenceEventData::Free);
    let mark = event(
        "mine",
        worker,
        3,
        ActiveSequenceEventData::MarkPrefillCompleted,
    );
    let batch = encode_replica_batch(&[free, mark]).unwrap();
    let report = router.apply_replica_payload(&batch, ME, false).unwrap();
    assert_eq!(
        report,
        ReplicaReport {
            applied: 1,
            ignored: 1
        }
    );
    assert_eq!(
        router.sequences().load(worker),
        Load {
            decode_blocks: 2,
            prefill_tokens: 0,
            requests: 1
        }
    );
}

#[test]
fn changes_to_unknown_requests_or_another_workers_are_ignored() {
    let mut router = router();
    router.apply_replica_event(add_event("r", w(3, 0), PEER), ME, true);
    let before = router.sequences().load(w(3, 0));
    for e in [
        event("unknown", w(3, 0), PEER, ActiveSequenceEventData::Free),
        event("r", w(3, 1), PEER, ActiveSequenceEventData::Free),
        event(
            "r",
            w(4, 0),
            PEER,
            ActiveSequenceEventData::MarkPrefillCompleted,
        ),
        // A known id is not booked again, wherever the event puts it.
        add_event("r", w(4, 0), PEER),
    ] {
        assert!(!router.apply_replica_event(e, ME, true));
    }
    assert_eq!(router.sequences().load(w(3, 0)), before);
    assert_eq!(router.sequences().load(w(4, 0)), Load::default());
    assert_eq!(router.sequences().len(), 1);
}

#[test]
fn the_router_describes_only_requests_it_holds() {
    let mut router = router();
    let worker = w(3, 1);
    let request = RouteRequest {
        request_id: "r",
        tokens_hashes: &[],
        sequence_hashes: &[21, 22],
        isl_tokens: 40,
        lora_name: Some("sql"),
    };
    let candidates = [WorkerInfo {
        worker,
        total_blocks: None,
    }];
    router.route(&request, &candidates, 0.0, 0).unwrap();
    let add = router.replica_event(ME, "r", ReplicaKind::Add).unwrap();
    assert_eq!(
        add,
        ActiveSequenceEvent {
            request_id: "r".into(),
            worker,
            data: ActiveSequenceEventData::AddRequest {
                token_sequence: Some(vec![21, 22]),
                track_prefill_tokens: true,
                expected_output_tokens: None,
                prefill_load_hint: Some(PrefillLoadHint {
                    initial_effective_prefill_tokens: 40,
                    expected_prefill_duration: None,
                }),
            },
            router_id: ME,
            lora_name: Some("sql".into()),
        }
    );
    assert_eq!(
        router
            .replica_event(ME, "r", ReplicaKind::PrefillDone)
            .unwrap()
            .data,
        ActiveSequenceEventData::MarkPrefillCompleted
    );
    let free = router.replica_event(ME, "r", ReplicaKind::Free).unwrap();
    assert_eq!(free.data, ActiveSequenceEventData::Free);
    assert_eq!(free.lora_name.as_deref(), Some("sql"));
    assert_eq!(router.replica_event(ME, "other", ReplicaKind::Add), None);

    // A peer applying this router's events sees the same load.
    let mut peer = KvRouter::new(CostConfig::default(), None);
    assert!(peer.apply_replica_event(add, PEER, true));
    assert_eq!(
        peer.sequences().load(worker),
        router.sequences().load(worker)
    );
    router.prefill_done("r");
    // Nothing left to prefill: no hint.
    let late = router.replica_event(ME, "r", ReplicaKind::Add).unwrap();
    assert!(matches!(
        late.data,
        ActiveSequenceEventData::AddRequest {
            prefill_load_hint: None,
            ..
        }
    ));
}

#[test]
fn a_batch_over_stocks_limit_is_refused() {
    let one = add_event("r", w(3, 0), PEER);
    let events = vec![one.clone(); MAX_REPLICA_BATCH_EVENTS + 1];
    assert_eq!(
        encode_replica_batch(&events).unwrap_err(),
        "a replica batch holds at most 256 events, got 257"
    );
    assert!(encode_replica_batch(&events[1..]).is_ok());
    // The same batch as bytes: a map of events, array16 of 257.
    let mut bytes = [&[0x81][..], &str_("events"), &[0xdc, 0x01, 0x01]].concat();
    for _ in 0..257 {
        bytes.extend(one.encode());
    }
    let mut router = router();
    let err = router.apply_replica_payload(&bytes, ME, true).unwrap_err();
    assert_eq!(err, "a replica batch holds at most 256 events, got 257");
    assert!(router.sequences().is_empty());
}

#[test]
fn malformed_payloads_are_named_and_nothing_is_applied() {
    let good = add_event("r", w(3, 0), PEER).encode();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "not a replica-sync payload"),
        (vec![0xc1], "not a replica-sync payload"),
        (vec![0x07], "not a replica-sync payload"),
        (
            good[..good.len() - 3].to_vec(),
            "not a replica-sync payload",
        ),
        (
            map(&[("events", arr(&[vec![0x07]]))]),
            "not an ActiveSequenceEventBatch",
        ),
        (
            map(&[
                ("request_id", str_("r")),
                (
                    "worker",
                    map(&[("worker_id", uint(3)), ("dp_rank", uint(0))]),
                ),
                ("data", str_("Evict")),
                ("router_id", uint(PEER)),
                ("lora_name", vec![NIL]),
            ]),
            "not an ActiveSequenceEvent",
        ),
        (
            map(&[("request_id", str_("r")), ("router_id", uint(PEER))]),
            "not an ActiveSequenceEvent",
        ),
    ];
    let mut router = router();
    for (bytes, start) in cases {
        let err = router.apply_replica_payload(&bytes, ME, true).unwrap_err();
        assert!(err.starts_with(start), "{bytes:x?}: {err}");
    }
    assert!(router.sequences().is_empty());
}
