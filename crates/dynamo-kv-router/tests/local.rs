//! The worker's local indexer answering stock routers' recovery queries.

use dynamo_kv_router::{KvEventData, LocalIndexer, StoredBlock, WireEvent, WorkerKey};
use serde_json::{json, Value};

const W: WorkerKey = WorkerKey {
    worker_id: 7,
    dp_rank: 0,
};

fn event(id: u64, data: KvEventData) -> WireEvent {
    WireEvent {
        worker: W,
        event_id: id,
        storage_tier: "device".into(),
        data,
    }
}

fn stored(parent: Option<u64>, blocks: &[(u64, u64)]) -> KvEventData {
    KvEventData::Stored {
        parent_hash: parent,
        blocks: blocks
            .iter()
            .map(|&(block_hash, tokens_hash)| StoredBlock {
                block_hash,
                tokens_hash,
            })
            .collect(),
    }
}

fn ask(indexer: &LocalIndexer, request: Value) -> Value {
    serde_json::from_str(&indexer.query_json(&request.to_string())).unwrap()
}

fn indexer() -> LocalIndexer {
    let mut local = LocalIndexer::new(W, 3);
    local.record(&event(1, stored(None, &[(10, 100), (11, 101)])));
    local.record(&event(2, stored(Some(11), &[(12, 102)])));
    local.record(&event(
        3,
        KvEventData::Removed {
            block_hashes: vec![12],
        },
    ));
    local.record(&event(4, stored(None, &[(20, 200)])));
    local
}

#[test]
fn replays_a_range_still_in_the_buffer_with_the_original_ids() {
    let reply = ask(
        &indexer(),
        json!({"worker_id": 7, "dp_rank": 0, "start_event_id": 3, "end_event_id": null}),
    );
    let events = &reply["Events"]["events"];
    assert_eq!(reply["Events"]["last_event_id"], 4);
    assert_eq!(events.as_array().unwrap().len(), 2);
    assert_eq!(events[0]["event"]["event_id"], 3);
    assert_eq!(
        events[0]["event"]["data"],
        json!({"removed": {"block_hashes": [12]}})
    );
    assert_eq!(events[1]["worker_id"], 7);
    assert_eq!(events[1]["storage_tier"], "device");
    assert_eq!(
        events[1]["event"]["data"]["stored"]["blocks"][0],
        json!({"block_hash": 20, "tokens_hash": 200, "mm_extra_info": null})
    );
    let part = ask(
        &indexer(),
        json!({"worker_id": 7, "start_event_id": 2, "end_event_id": 3}),
    );
    assert_eq!(part["Events"]["last_event_id"], 3);
}

#[test]
fn dumps_the_cache_when_asked_for_everything_or_for_ids_older_than_the_buffer() {
    for start in [Value::Null, json!(1)] {
        let reply = ask(
            &indexer(),
            json!({"worker_id": 7, "dp_rank": 0, "start_event_id": start, "end_event_id": null, "supports_tree_dump_failed": true, "kind": "recovery"}),
        );
        let dump = &reply["TreeDump"];
        assert_eq!(dump["last_event_id"], 4);
        assert_eq!(dump["reset_scope"], "all");
        let blocks: Vec<(Value, Value)> = dump["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["event"]["data"]["stored"]["parent_hash"].clone(),
                    e["event"]["data"]["stored"]["blocks"][0]["block_hash"].clone(),
                )
            })
            .collect();
        // Block 12 was removed; parents come before children; ids restart at 0.
        assert_eq!(
            blocks,
            vec![
                (Value::Null, json!(10)),
                (json!(10), json!(11)),
                (Value::Null, json!(20))
            ]
        );
        assert_eq!(dump["events"][0]["event"]["event_id"], 0);
    }
}

#[test]
fn refuses_ranges_it_cannot_serve_as_stock_does() {
    let local = indexer();
    assert_eq!(
        ask(
            &local,
            json!({"worker_id": 7, "start_event_id": 9, "end_event_id": null})
        ),
        json!({"TooNew": {"requested_start": 9, "requested_end": null, "newest_available": 4}})
    );
    assert_eq!(
        ask(
            &local,
            json!({"worker_id": 7, "start_event_id": 4, "end_event_id": 2})
        ),
        json!({"InvalidRange": {"start_id": 4, "end_id": 2}})
    );
    assert!(
        ask(&local, json!({"worker_id": 8, "start_event_id": 1}))["Error"]
            .as_str()
            .unwrap()
            .contains("reached worker 7")
    );
    assert!(
        ask(&local, json!({"worker_id": 7, "kind": {"status": {}}}))["Error"]
            .as_str()
            .unwrap()
            .contains("only recovery")
    );
    assert!(local
        .query_json("[1]")
        .contains("not a WorkerKvQueryRequest"));
}

#[test]
fn a_cleared_cache_dumps_empty() {
    let mut local = indexer();
    local.record(&event(5, KvEventData::Cleared));
    let reply = ask(&local, json!({"worker_id": 7, "start_event_id": null}));
    assert_eq!(reply["TreeDump"]["events"], json!([]));
    assert_eq!(reply["TreeDump"]["last_event_id"], 5);
}

#[test]
fn a_router_rebuilds_a_worker_from_its_replies() {
    use dynamo_kv_router::{decode_recovery_reply, CostConfig, KvRouter, RecoveryReply};
    let local = indexer();
    let mut router = KvRouter::new(CostConfig::default(), None);
    // Something stale the dump must replace.
    router.apply_event(W, 1, &stored(None, &[(99, 999)]));
    let dump = decode_recovery_reply(&local.query_json(r#"{"worker_id":7,"start_event_id":null}"#))
        .unwrap();
    assert_eq!(router.apply_recovery(W, &dump), Ok(3));
    assert_eq!(router.index().worker_blocks(W), 3);
    assert_eq!(router.last_event_id(W), Some(4));
    let overlaps = router.index().overlaps(&[100, 101, 102]);
    assert_eq!(overlaps, vec![(W, 2)]);
    // Replayed events apply on top, in order.
    let mut newer = indexer();
    newer.record(&event(
        5,
        KvEventData::Removed {
            block_hashes: vec![20],
        },
    ));
    let events =
        decode_recovery_reply(&newer.query_json(r#"{"worker_id":7,"start_event_id":5}"#)).unwrap();
    assert_eq!(router.apply_recovery(W, &events), Ok(1));
    assert_eq!(router.index().worker_blocks(W), 2);
    assert_eq!(router.last_event_id(W), Some(5));
    let refused = decode_recovery_reply(
        r#"{"TooNew":{"requested_start":9,"requested_end":null,"newest_available":4}}"#,
    )
    .unwrap();
    assert!(matches!(&refused, RecoveryReply::Refused(why) if why.starts_with("TooNew")));
    assert!(router.apply_recovery(W, &refused).is_err());
    assert!(decode_recovery_reply("[]")
        .unwrap_err()
        .starts_with("not a WorkerKvQueryResponse"));
}
