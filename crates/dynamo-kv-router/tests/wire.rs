//! KV event batches, envelopes and load reports in stock 1.6.1's bytes (built by hand from its
//! observed format), and vLLM's raw batches.

use dynamo_kv_router::{
    decode_event_batch, decode_vllm_batch, encode_event_batch, ActiveLoad, Envelope, KvEventData,
    StoredBlock, VllmEvent, WireEvent, WorkerKey,
};

mod msgpack;

use msgpack::{arr, map, str_, u64_};

fn router_event(worker: u64, event_id: u64, data: Vec<u8>, dp_rank: u8) -> Vec<u8> {
    map(&[
        ("worker_id", u64_(worker)),
        ("storage_tier", str_("device")),
        ("residency_domain", str_("worker")),
        (
            "event",
            map(&[
                ("event_id", u64_(event_id)),
                ("data", data),
                ("dp_rank", vec![dp_rank]),
            ]),
        ),
    ])
}

/// A stored event of one block (ids as stock 1.6.1 sent them), every optional field nil.
fn stored_event_bytes() -> Vec<u8> {
    map(&[(
        "stored",
        map(&[
            ("parent_hash", vec![0xc0]),
            ("start_position", vec![0xc0]),
            (
                "blocks",
                arr(&[map(&[
                    ("block_hash", u64_(u64::MAX - 4)),
                    ("tokens_hash", u64_(14643705804678351452)),
                    ("mm_extra_info", vec![0xc0]),
                ])]),
            ),
        ]),
    )])
}

#[test]
fn decodes_stored_removed_and_cleared_as_stock_sends_them() {
    let stored = stored_event_bytes();
    let removed = map(&[(
        "removed",
        map(&[("block_hashes", arr(&[u64_(7), vec![0x05]]))]),
    )]);
    let batch = arr(&[
        router_event(42, 1, stored, 0),
        router_event(42, 2, removed, 1),
        router_event(42, 3, str_("cleared"), 0),
    ]);
    let events = decode_event_batch(&batch).unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[0].worker,
        WorkerKey {
            worker_id: 42,
            dp_rank: 0
        }
    );
    assert_eq!(events[0].storage_tier, "device");
    assert_eq!(
        events[0].data,
        KvEventData::Stored {
            parent_hash: None,
            blocks: vec![StoredBlock {
                block_hash: u64::MAX - 4,
                tokens_hash: 14643705804678351452
            }]
        }
    );
    assert_eq!((events[1].event_id, events[1].worker.dp_rank), (2, 1));
    assert_eq!(
        events[1].data,
        KvEventData::Removed {
            block_hashes: vec![7, 5]
        }
    );
    assert_eq!(events[2].data, KvEventData::Cleared);
}

#[test]
fn a_payload_that_is_not_a_batch_is_named() {
    let err = decode_event_batch(&map(&[("worker_id", u64_(1))])).unwrap_err();
    assert!(err.starts_with("not a KV event batch"), "{err}");
    assert!(decode_event_batch(&[0xc1]).is_err());
}

#[test]
fn encodes_a_batch_exactly_as_stock_publishes_it() {
    let events = vec![
        WireEvent {
            worker: WorkerKey {
                worker_id: 42,
                dp_rank: 0,
            },
            event_id: 1,
            storage_tier: "device".into(),
            data: KvEventData::Stored {
                parent_hash: None,
                blocks: vec![StoredBlock {
                    block_hash: u64::MAX - 4,
                    tokens_hash: 14643705804678351452,
                }],
            },
        },
        WireEvent {
            worker: WorkerKey {
                worker_id: 42,
                dp_rank: 1,
            },
            event_id: 2,
            storage_tier: "device".into(),
            data: KvEventData::Removed {
                block_hashes: vec![7],
            },
        },
        WireEvent {
            worker: WorkerKey {
                worker_id: 42,
                dp_rank: 0,
            },
            event_id: 3,
            storage_tier: "device".into(),
            data: KvEventData::Cleared,
        },
    ];
    let stored = stored_event_bytes();
    let removed = map(&[("removed", map(&[("block_hashes", arr(&[vec![0x07]]))]))]);
    let expected = arr(&[
        router_event(42, 1, stored, 0),
        router_event(42, 2, removed, 1),
        router_event(42, 3, str_("cleared"), 0),
    ]);
    // rmp-serde writes small ints in their shortest form, as stock does.
    let mut want = expected.clone();
    for id in [1u64, 2, 3] {
        let long = [&str_("event_id")[..], &u64_(id)[..]].concat();
        let short = [&str_("event_id")[..], &[id as u8][..]].concat();
        want = replace(&want, &long, &short);
    }
    want = replace(
        &want,
        &[&str_("worker_id")[..], &u64_(42)[..]].concat(),
        &[&str_("worker_id")[..], &[42u8][..]].concat(),
    );
    assert_eq!(encode_event_batch(&events), want);
    assert_eq!(
        decode_event_batch(&encode_event_batch(&events)).unwrap(),
        events
    );
}

fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn the_envelope_has_stock_s_five_named_fields_and_a_bin_payload() {
    let envelope = Envelope {
        publisher_id: 5249398591840922,
        sequence: 0,
        published_at: 1_700_000_000_000,
        topic: "kv-events".into(),
        payload: vec![0x90],
    };
    let bytes = envelope.encode();
    assert_eq!(bytes[0], 0x85);
    let tail = [&str_("payload")[..], &[0xc4, 0x01, 0x90][..]].concat();
    assert!(
        bytes.ends_with(&tail),
        "payload must be msgpack bin: {bytes:02x?}"
    );
    assert_eq!(Envelope::decode(&bytes).unwrap(), envelope);
    assert!(Envelope::decode(&[0x90])
        .unwrap_err()
        .starts_with("not an event-plane envelope"));
}

#[test]
fn active_load_keeps_absent_values_as_nil() {
    let load = ActiveLoad {
        worker_id: 9,
        dp_rank: 0,
        active_decode_blocks: Some(12),
        active_prefill_tokens: None,
        kv_used_blocks: Some(40),
    };
    let bytes = load.encode();
    let want = map(&[
        ("worker_id", vec![9]),
        ("dp_rank", vec![0]),
        ("active_decode_blocks", vec![12]),
        ("active_prefill_tokens", vec![0xc0]),
        ("kv_used_blocks", vec![40]),
    ]);
    assert_eq!(bytes, want);
    assert_eq!(ActiveLoad::decode(&bytes).unwrap(), load);
    assert!(ActiveLoad::decode(&[0xc0])
        .unwrap_err()
        .starts_with("not a load report"));
}

#[test]
fn decodes_vllm_raw_batches_as_the_relay_receives_them() {
    let stored = arr(&[
        str_("BlockStored"),
        arr(&[vec![0x6f], vec![0xd0, 0x80]]),
        vec![0xc0],
        arr(&(1..=8u8).map(|t| vec![t]).collect::<Vec<_>>()),
        vec![4],
        vec![0xc0],
        str_("GPU"),
    ]);
    let digest = [&[0xc4, 0x20][..], &[0xab; 32][..]].concat();
    let removed = arr(&[str_("BlockRemoved"), arr(&[digest]), str_("GPU")]);
    let batch = arr(&[
        vec![0xcb, 0x41, 0xd9, 0, 0, 0, 0, 0, 0],
        arr(&[stored, removed, arr(&[str_("AllBlocksCleared")])]),
        vec![1],
    ]);
    let decoded = decode_vllm_batch(&batch).unwrap();
    assert_eq!(decoded.dp_rank, Some(1));
    assert_eq!(
        decoded.events[0],
        VllmEvent::Stored {
            block_hashes: vec![111, (-128i64) as u64],
            parent_hash: None,
            token_ids: (1..=8).collect(),
            block_size: 4
        }
    );
    assert_eq!(
        decoded.events[1],
        VllmEvent::Removed {
            block_hashes: vec![u64::from_le_bytes([0xab; 8])]
        }
    );
    assert_eq!(decoded.events[2], VllmEvent::Cleared);

    let short = arr(&[
        str_("BlockStored"),
        arr(&[vec![1]]),
        vec![0xc0],
        arr(&[vec![1]]),
        vec![4],
        vec![0xc0],
        str_("GPU"),
    ]);
    let err = decode_vllm_batch(&arr(&[vec![0], arr(&[short])])).unwrap_err();
    assert_eq!(
        err,
        "event 0: BlockStored: 1 token ids do not fill 1 blocks of 4"
    );
    let err = decode_vllm_batch(&arr(&[vec![0], arr(&[arr(&[str_("Nope")])])])).unwrap_err();
    assert!(err.contains("unknown event type \"Nope\""), "{err}");
}
