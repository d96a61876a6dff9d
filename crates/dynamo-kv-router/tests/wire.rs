//! Decoding KV event batches in stock 1.6.1's bytes (built by hand from its observed format).

use dynamo_kv_router::{decode_event_batch, KvEventData, StoredBlock, WorkerKey};

/// msgpack helpers: maps with string keys, u64 as 0xcf, nil.
fn str_(s: &str) -> Vec<u8> {
    let mut v = vec![0xa0 | s.len() as u8];
    v.extend_from_slice(s.as_bytes());
    v
}
fn u64_(n: u64) -> Vec<u8> {
    let mut v = vec![0xcf];
    v.extend_from_slice(&n.to_be_bytes());
    v
}
fn map(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut v = vec![0x80 | entries.len() as u8];
    for (k, val) in entries {
        v.extend(str_(k));
        v.extend_from_slice(val);
    }
    v
}
fn arr(items: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![0x90 | items.len() as u8];
    for i in items {
        v.extend_from_slice(i);
    }
    v
}

fn router_event(worker: u64, event_id: u64, data: Vec<u8>, dp_rank: u8) -> Vec<u8> {
    map(&[
        ("worker_id", u64_(worker)),
        ("storage_tier", str_("device")),
        ("residency_domain", str_("worker")),
        ("event", map(&[("event_id", u64_(event_id)), ("data", data), ("dp_rank", vec![dp_rank])])),
    ])
}

#[test]
fn decodes_stored_removed_and_cleared_as_stock_sends_them() {
    let stored = map(&[(
        "stored",
        map(&[
            ("parent_hash", vec![0xc0]),
            ("start_position", vec![0xc0]),
            ("blocks", arr(&[map(&[("block_hash", u64_(u64::MAX - 4)), ("tokens_hash", u64_(14643705804678351452)), ("mm_extra_info", vec![0xc0])])])),
        ]),
    )]);
    let removed = map(&[("removed", map(&[("block_hashes", arr(&[u64_(7), vec![0x05]]))]))]);
    let batch = arr(&[router_event(42, 1, stored, 0), router_event(42, 2, removed, 1), router_event(42, 3, str_("cleared"), 0)]);
    let events = decode_event_batch(&batch).unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(events[0].worker, WorkerKey { worker_id: 42, dp_rank: 0 });
    assert_eq!(events[0].storage_tier, "device");
    assert_eq!(events[0].data, KvEventData::Stored { parent_hash: None, blocks: vec![StoredBlock { block_hash: u64::MAX - 4, tokens_hash: 14643705804678351452 }] });
    assert_eq!((events[1].event_id, events[1].worker.dp_rank), (2, 1));
    assert_eq!(events[1].data, KvEventData::Removed { block_hashes: vec![7, 5] });
    assert_eq!(events[2].data, KvEventData::Cleared);
}

#[test]
fn a_payload_that_is_not_a_batch_is_named() {
    let err = decode_event_batch(&map(&[("worker_id", u64_(1))])).unwrap_err();
    assert!(err.starts_with("not a KV event batch"), "{err}");
    assert!(decode_event_batch(&[0xc1]).is_err());
}
