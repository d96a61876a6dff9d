//! Load tracking, the cost function, approximate mode and the router as a whole.

use dynamo_kv_router::{
    ActiveLoad, ActiveSequences, ApproxConfig, BatchReport, Candidate, CostConfig, KvEventData,
    KvRouter, Load, NoWorker, RouteRequest, StoredBlock, WireEvent, WorkerInfo, WorkerKey,
};

fn w(id: u64) -> WorkerKey {
    WorkerKey {
        worker_id: id,
        dp_rank: 0,
    }
}

fn info(id: u64) -> WorkerInfo {
    WorkerInfo {
        worker: w(id),
        total_blocks: Some(100),
    }
}

#[test]
fn active_sequences_share_blocks_and_drop_prefill_at_the_first_token() {
    let mut seqs = ActiveSequences::new();
    seqs.add("a", w(1), vec![10, 11, 12], 48, None);
    seqs.add("b", w(1), vec![10, 11, 13], 16, None);
    assert_eq!(
        seqs.load(w(1)),
        Load {
            decode_blocks: 4,
            prefill_tokens: 64,
            requests: 2
        }
    );
    assert_eq!(seqs.new_blocks(w(1), &[10, 14, 15]), 2);
    seqs.prefill_done("a");
    assert_eq!(seqs.load(w(1)).prefill_tokens, 16);
    seqs.free("a");
    assert_eq!(
        seqs.load(w(1)),
        Load {
            decode_blocks: 3,
            prefill_tokens: 16,
            requests: 1
        }
    );
    seqs.free("b");
    seqs.free("unknown");
    assert_eq!(seqs.load(w(1)), Load::default());
    assert!(seqs.is_empty());
}

/// The worked example of stock's router docs: raw prefill 10 blocks each; device overlaps 2, 5
/// and 8 blocks; decode loads 10, 5 and 9 blocks → costs 18, 10 and 11, and worker 2 wins.
#[test]
fn cost_weighs_uncached_prompt_blocks_against_decode_load() {
    let config = CostConfig {
        block_size: 16,
        ..Default::default()
    };
    let candidates: Vec<Candidate> = [(1, 2, 10), (2, 5, 5), (3, 8, 9)]
        .into_iter()
        .map(|(id, overlap, decode)| Candidate {
            worker: w(id),
            overlap_blocks: overlap,
            load: Load {
                decode_blocks: decode,
                prefill_tokens: 0,
                requests: 0,
            },
            new_blocks: 0,
            total_blocks: None,
        })
        .collect();
    let scores = config.score(160, &candidates);
    assert_eq!(
        scores.iter().map(|s| s.logit).collect::<Vec<_>>(),
        vec![18.0, 10.0, 11.0]
    );
    assert_eq!(config.pick(&scores, 0.99), 1);
    // Half the prefill weight makes the cache-rich, busier worker 3 lose by less but still lose.
    let half = CostConfig {
        prefill_load_scale: 0.5,
        ..config.clone()
    };
    assert_eq!(
        half.score(160, &candidates)
            .iter()
            .map(|s| s.logit)
            .collect::<Vec<_>>(),
        vec![14.0, 7.5, 10.0]
    );
}

#[test]
fn credit_decays_on_a_worker_behind_in_prefill_and_ties_break_by_the_draw() {
    let config = CostConfig {
        block_size: 16,
        overlap_score_credit_decay: 1.0,
        ..Default::default()
    };
    let c = |id, overlap, prefill| Candidate {
        worker: w(id),
        overlap_blocks: overlap,
        load: Load {
            decode_blocks: 0,
            prefill_tokens: prefill,
            requests: 0,
        },
        new_blocks: 0,
        total_blocks: None,
    };
    // Worker 2 is one request (160 tokens) behind: its 8-block credit halves to 4.
    let scores = config.score(160, &[c(1, 0, 0), c(2, 8, 160)]);
    assert_eq!(scores[1].logit, (160.0 + 160.0) / 16.0 - 4.0);
    let tie = config.score(160, &[c(1, 0, 0), c(2, 0, 0)]);
    assert_eq!((config.pick(&tie, 0.1), config.pick(&tie, 0.9)), (0, 1));
}

#[test]
fn temperature_spreads_picks_toward_the_cheaper_worker() {
    let config = CostConfig {
        temperature: 0.5,
        ..Default::default()
    };
    let c = |id, decode| Candidate {
        worker: w(id),
        overlap_blocks: 0,
        load: Load {
            decode_blocks: decode,
            prefill_tokens: 0,
            requests: 0,
        },
        new_blocks: 0,
        total_blocks: None,
    };
    let scores = config.score(16, &[c(1, 0), c(2, 10)]);
    let picks: Vec<usize> = (0..1000)
        .map(|i| config.pick(&scores, i as f64 / 1000.0))
        .collect();
    let cheap = picks.iter().filter(|&&p| p == 0).count();
    // Weights e^0 and e^-2: the cheaper one takes about 88 %.
    assert!((850..=910).contains(&cheap), "{cheap}");
}

#[test]
fn busy_workers_are_skipped_and_all_busy_is_an_error() {
    let cost = CostConfig {
        block_size: 4,
        active_prefill_tokens_threshold: Some(10),
        ..Default::default()
    };
    let mut router = KvRouter::new(cost, None);
    let request = |id| RouteRequest {
        request_id: id,
        tokens_hashes: &[],
        sequence_hashes: &[],
        isl_tokens: 20,
        lora_name: None,
    };
    let first = router.route(&request("a"), &[info(1)], 0.0, 0).unwrap();
    assert_eq!(first.worker, w(1));
    // Worker 1 now has 20 prefill tokens in flight, past the threshold of 10.
    assert_eq!(
        router.route(&request("b"), &[info(1)], 0.0, 0),
        Err(NoWorker::AllBusy)
    );
    assert_eq!(
        router
            .route(&request("b"), &[info(1), info(2)], 0.0, 0)
            .unwrap()
            .worker,
        w(2)
    );
    router.prefill_done("a");
    assert_eq!(
        router
            .decide(&request("c"), &[info(1)], 0.0, 0)
            .unwrap()
            .worker,
        w(1)
    );
    assert_eq!(
        router.route(&request("d"), &[], 0.0, 0),
        Err(NoWorker::NoCandidates)
    );
}

#[test]
fn a_request_routed_again_is_freed_first_and_counted_once() {
    let cost = CostConfig {
        block_size: 4,
        active_prefill_tokens_threshold: Some(10),
        ..Default::default()
    };
    let mut router = KvRouter::new(cost, None);
    let request = RouteRequest {
        request_id: "a",
        tokens_hashes: &[],
        sequence_hashes: &[],
        isl_tokens: 20,
        lora_name: None,
    };
    router.route(&request, &[info(1)], 0.0, 0).unwrap();
    // Its own 20 prefill tokens would make worker 1 busy, were they still counted.
    let again = router.route(&request, &[info(1)], 0.0, 0).unwrap();
    assert_eq!(again.worker, w(1));
    assert_eq!(router.sequences().len(), 1);
    assert_eq!(router.sequences().load(w(1)).prefill_tokens, 20);
    // A draw outside [0, 1) is clamped into it.
    assert_eq!(
        router.route(&request, &[info(1)], 7.0, 0).unwrap().worker,
        w(1)
    );
}

#[test]
fn a_worker_reporting_its_cache_nearly_full_is_busy() {
    let cost = CostConfig {
        block_size: 4,
        active_decode_blocks_threshold: Some(0.8),
        ..Default::default()
    };
    let mut router = KvRouter::new(cost, None);
    let request = RouteRequest {
        request_id: "a",
        tokens_hashes: &[],
        sequence_hashes: &[],
        isl_tokens: 4,
        lora_name: None,
    };
    let report = |used| ActiveLoad {
        worker_id: 1,
        dp_rank: 0,
        active_decode_blocks: None,
        active_prefill_tokens: None,
        kv_used_blocks: Some(used),
    };
    router.apply_load(&report(90));
    assert_eq!(
        router
            .decide(&request, &[info(1), info(2)], 0.0, 0)
            .unwrap()
            .worker,
        w(2)
    );
    assert_eq!(
        router.decide(&request, &[info(1)], 0.0, 0),
        Err(NoWorker::AllBusy)
    );
    router.apply_load(&report(10));
    assert_eq!(
        router.decide(&request, &[info(1)], 0.0, 0).unwrap().worker,
        w(1)
    );
}

#[test]
fn events_steer_a_repeated_prefix_to_the_worker_that_cached_it_and_gaps_are_reported() {
    let mut router = KvRouter::new(
        CostConfig {
            block_size: 4,
            ..Default::default()
        },
        None,
    );
    let blocks = |pairs: &[(u64, u64)]| {
        pairs
            .iter()
            .map(|&(block_hash, tokens_hash)| StoredBlock {
                block_hash,
                tokens_hash,
            })
            .collect()
    };
    let report = router.apply_event(
        w(2),
        1,
        &KvEventData::Stored {
            parent_hash: None,
            blocks: blocks(&[(7, 100), (8, 101), (9, 102)]),
        },
    );
    assert_eq!(report.missed, None);
    let request = RouteRequest {
        request_id: "r",
        tokens_hashes: &[100, 101, 102, 103],
        sequence_hashes: &[1, 2, 3, 4],
        isl_tokens: 16,
        lora_name: None,
    };
    let decision = router
        .route(&request, &[info(1), info(2), info(3)], 0.0, 0)
        .unwrap();
    assert_eq!((decision.worker, decision.overlap_blocks), (w(2), 3));
    assert_eq!(
        router.sequences().load(w(2)),
        Load {
            decode_blocks: 4,
            prefill_tokens: 4,
            requests: 1
        }
    );
    assert_eq!(
        router
            .apply_event(
                w(2),
                5,
                &KvEventData::Removed {
                    block_hashes: vec![9]
                }
            )
            .missed,
        Some(3)
    );
    router.remove_worker(2);
    assert_eq!(router.index().node_count(), 0);
    assert_eq!(router.sequences().load(w(2)), Load::default());
    assert_eq!(
        router
            .route(
                &RouteRequest {
                    request_id: "s",
                    ..request
                },
                &[info(1), info(3)],
                0.0,
                0
            )
            .unwrap()
            .overlap_blocks,
        0
    );
}

#[test]
fn approximate_mode_remembers_routed_prefixes_until_their_ttl() {
    let mut router = KvRouter::new(
        CostConfig {
            block_size: 4,
            ..Default::default()
        },
        Some(ApproxConfig {
            ttl_ms: 1000,
            ..Default::default()
        }),
    );
    let request = |id| RouteRequest {
        request_id: id,
        tokens_hashes: &[100, 101],
        sequence_hashes: &[1, 2],
        isl_tokens: 8,
        lora_name: None,
    };
    // No cache anywhere: the tie goes by the draw (0.99 → the last candidate).
    let first = router
        .route(&request("a"), &[info(1), info(2)], 0.99, 0)
        .unwrap();
    assert_eq!(first.worker, w(2));
    router.free("a");
    let again = router
        .route(&request("b"), &[info(1), info(2)], 0.0, 500)
        .unwrap();
    assert_eq!((again.worker, again.overlap_blocks), (w(2), 2));
    router.free("b");
    // Re-routing at 500 ms pushed the guess to 1500 ms; past that it is gone.
    assert_eq!(
        router
            .decide(&request("c"), &[info(1), info(2)], 0.0, 1499)
            .unwrap()
            .overlap_blocks,
        2
    );
    assert_eq!(
        router
            .decide(&request("c"), &[info(1), info(2)], 0.0, 1500)
            .unwrap()
            .overlap_blocks,
        0
    );
    assert_eq!(router.index().node_count(), 0);
}

#[test]
fn approximate_mode_prunes_the_oldest_guesses_past_max_tree_size() {
    let mut router = KvRouter::new(
        CostConfig {
            block_size: 1,
            ..Default::default()
        },
        Some(ApproxConfig {
            ttl_ms: 1_000_000,
            max_tree_size: 10,
            prune_target_ratio: 0.5,
        }),
    );
    for i in 0..6u64 {
        let tokens = [1000 + 2 * i, 1001 + 2 * i];
        let request = RouteRequest {
            request_id: "x",
            tokens_hashes: &tokens,
            sequence_hashes: &tokens,
            isl_tokens: 2,
            lora_name: None,
        };
        router.route(&request, &[info(1)], 0.0, i).unwrap();
        router.free("x");
    }
    // The sixth request made 12 blocks > 10: the oldest went until 5 or fewer were left.
    assert!(
        router.index().node_count() <= 5,
        "{}",
        router.index().node_count()
    );
    let newest = RouteRequest {
        request_id: "y",
        tokens_hashes: &[1010, 1011],
        sequence_hashes: &[1010, 1011],
        isl_tokens: 2,
        lora_name: None,
    };
    assert_eq!(
        router
            .decide(&newest, &[info(1)], 0.0, 10)
            .unwrap()
            .overlap_blocks,
        2
    );
    let oldest = RouteRequest {
        request_id: "z",
        tokens_hashes: &[1000, 1001],
        sequence_hashes: &[1000, 1001],
        isl_tokens: 2,
        lora_name: None,
    };
    assert_eq!(
        router
            .decide(&oldest, &[info(1)], 0.0, 10)
            .unwrap()
            .overlap_blocks,
        0
    );
}

#[test]
fn a_batch_is_tallied_by_outcome_with_each_ranks_gap() {
    let mut router = KvRouter::new(CostConfig::default(), None);
    let event = |worker: WorkerKey, event_id: u64, tier: &str, data: KvEventData| WireEvent {
        worker,
        event_id,
        storage_tier: tier.into(),
        data,
    };
    let stored = |parent_hash: Option<u64>, block_hash: u64| KvEventData::Stored {
        parent_hash,
        blocks: vec![StoredBlock {
            block_hash,
            tokens_hash: block_hash + 100,
        }],
    };
    let rank1 = WorkerKey {
        worker_id: 1,
        dp_rank: 1,
    };
    let report = router.apply_events(&[
        event(w(1), 1, "device", stored(None, 10)),
        event(w(1), 2, "host_pinned", stored(None, 11)),
        event(w(1), 4, "device", stored(Some(99), 12)),
        // A rank's first event is no gap, whatever its id.
        event(rank1, 3, "device", KvEventData::Cleared),
        event(rank1, 6, "device", KvEventData::Cleared),
    ]);
    assert_eq!(
        report,
        BatchReport {
            applied: 3,
            unknown_parent: 1,
            other_tier: 1,
            gaps: vec![(w(1), 2), (rank1, 2)],
        }
    );
    assert_eq!(router.index().worker_blocks(w(1)), 1);
}

#[test]
fn the_best_overlap_shows_when_load_won_over_cache() {
    let mut router = KvRouter::new(
        CostConfig {
            block_size: 4,
            ..Default::default()
        },
        None,
    );
    router.apply_event(
        w(2),
        1,
        &KvEventData::Stored {
            parent_hash: None,
            blocks: vec![StoredBlock {
                block_hash: 7,
                tokens_hash: 100,
            }],
        },
    );
    // Worker 2 caches the first block but is far busier.
    let busy = RouteRequest {
        request_id: "busy",
        tokens_hashes: &[],
        sequence_hashes: &[50, 51, 52, 53, 54, 55, 56, 57],
        isl_tokens: 32,
        lora_name: None,
    };
    router.route(&busy, &[info(2)], 0.0, 0).unwrap();
    let request = RouteRequest {
        request_id: "r",
        tokens_hashes: &[100, 101],
        sequence_hashes: &[1, 2],
        isl_tokens: 8,
        lora_name: None,
    };
    let decision = router.route(&request, &[info(1), info(2)], 0.0, 0).unwrap();
    assert_eq!(
        (
            decision.worker,
            decision.overlap_blocks,
            decision.best_overlap_blocks()
        ),
        (w(1), 0, 1)
    );
}

#[test]
fn busy_thresholds_change_at_run_time_and_none_turns_a_check_off() {
    let mut router = KvRouter::new(
        CostConfig {
            block_size: 4,
            ..Default::default()
        },
        None,
    );
    let request = |id| RouteRequest {
        request_id: id,
        tokens_hashes: &[],
        sequence_hashes: &[],
        isl_tokens: 20,
        lora_name: None,
    };
    router.route(&request("a"), &[info(1)], 0.0, 0).unwrap();
    router.set_busy_thresholds(None, Some(10)).unwrap();
    assert_eq!(
        router.cost_config().active_prefill_tokens_threshold,
        Some(10)
    );
    assert_eq!(
        router.decide(&request("b"), &[info(1)], 0.0, 0),
        Err(NoWorker::AllBusy)
    );
    router.set_busy_thresholds(Some(0.5), None).unwrap();
    assert_eq!(router.cost_config().active_prefill_tokens_threshold, None);
    assert_eq!(
        router.cost_config().active_decode_blocks_threshold,
        Some(0.5)
    );
    assert!(router.decide(&request("b"), &[info(1)], 0.0, 0).is_ok());
    let err = router.set_busy_thresholds(Some(1.5), Some(3)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "active_decode_blocks_threshold must be at most 1, got 1.5"
    );
    // A refused change leaves both as they were.
    assert_eq!(
        router.cost_config().active_decode_blocks_threshold,
        Some(0.5)
    );
    assert_eq!(router.cost_config().active_prefill_tokens_threshold, None);
}

#[test]
fn loads_list_every_known_rank_by_key_idle_ones_included() {
    let mut router = KvRouter::new(
        CostConfig {
            block_size: 4,
            ..Default::default()
        },
        None,
    );
    assert!(router.loads().is_empty());
    let rank = |id, dp_rank| WorkerInfo {
        worker: WorkerKey {
            worker_id: id,
            dp_rank,
        },
        total_blocks: None,
    };
    let request = |id, hashes: &'static [u64]| RouteRequest {
        request_id: id,
        tokens_hashes: &[],
        sequence_hashes: hashes,
        isl_tokens: 8,
        lora_name: None,
    };
    router
        .route(&request("a", &[1, 2]), &[rank(2, 1)], 0.0, 0)
        .unwrap();
    router
        .route(&request("b", &[3]), &[rank(2, 0)], 0.0, 0)
        .unwrap();
    router.free("b");
    assert_eq!(
        router.loads(),
        vec![
            (rank(2, 0).worker, Load::default()),
            (
                rank(2, 1).worker,
                Load {
                    decode_blocks: 2,
                    prefill_tokens: 8,
                    requests: 1
                }
            ),
        ]
    );
    router.remove_worker(2);
    assert!(router.loads().is_empty());
}
