//! The radix index against hand-built cases and against a naive model under random events.

use std::collections::{HashMap, HashSet};

use dynamo_kv_router::{ApplyOutcome, KvEventData, RadixIndex, StoredBlock, WorkerKey};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const A: WorkerKey = WorkerKey {
    worker_id: 1,
    dp_rank: 0,
};
const B: WorkerKey = WorkerKey {
    worker_id: 2,
    dp_rank: 0,
};
const B1: WorkerKey = WorkerKey {
    worker_id: 2,
    dp_rank: 1,
};

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

fn sorted(mut v: Vec<(WorkerKey, u32)>) -> Vec<(WorkerKey, u32)> {
    v.sort();
    v
}

#[test]
fn overlap_counts_the_leading_blocks_each_worker_holds() {
    let mut index = RadixIndex::new();
    index.apply(A, &stored(None, &[(100, 1), (101, 2), (102, 3)]));
    index.apply(B, &stored(None, &[(200, 1), (201, 2)]));
    index.apply(B1, &stored(None, &[(300, 1)]));
    assert_eq!(
        sorted(index.overlaps(&[1, 2, 3, 4])),
        vec![(A, 3), (B, 2), (B1, 1)]
    );
    assert_eq!(
        sorted(index.overlaps(&[1, 9])),
        vec![(A, 1), (B, 1), (B1, 1)]
    );
    assert_eq!(index.overlaps(&[2, 3]), vec![]);
    assert_eq!(index.node_count(), 3);
}

#[test]
fn stored_blocks_continue_from_their_parent_and_an_unknown_parent_is_refused() {
    let mut index = RadixIndex::new();
    index.apply(A, &stored(None, &[(100, 1)]));
    assert_eq!(
        index.apply(A, &stored(Some(100), &[(101, 2)])),
        ApplyOutcome::Applied
    );
    assert_eq!(
        index.apply(A, &stored(Some(999), &[(102, 3)])),
        ApplyOutcome::UnknownParent
    );
    assert_eq!(index.overlaps(&[1, 2, 3]), vec![(A, 2)]);
}

#[test]
fn only_a_contiguous_prefix_counts_after_a_middle_block_is_removed() {
    let mut index = RadixIndex::new();
    index.apply(A, &stored(None, &[(100, 1), (101, 2), (102, 3)]));
    index.apply(
        A,
        &KvEventData::Removed {
            block_hashes: vec![101],
        },
    );
    assert_eq!(index.overlaps(&[1, 2, 3]), vec![(A, 1)]);
    // The node of block 2 stays while block 3 hangs under it.
    assert_eq!(index.node_count(), 3);
    index.apply(
        A,
        &KvEventData::Removed {
            block_hashes: vec![102, 100],
        },
    );
    assert_eq!(index.node_count(), 0);
}

#[test]
fn cleared_and_removed_workers_leave_nothing_behind() {
    let mut index = RadixIndex::new();
    index.apply(A, &stored(None, &[(100, 1), (101, 2)]));
    index.apply(B, &stored(None, &[(200, 1), (201, 2)]));
    index.apply(B1, &stored(None, &[(300, 1), (301, 5)]));
    index.apply(A, &KvEventData::Cleared);
    assert_eq!(index.worker_blocks(A), 0);
    assert_eq!(sorted(index.overlaps(&[1, 2])), vec![(B, 2), (B1, 1)]);
    index.remove_worker(2, None);
    assert_eq!(index.overlaps(&[1, 2]), vec![]);
    assert_eq!(index.node_count(), 0);
    assert_eq!(index.workers().count(), 1, "A stays known, with no blocks");
}

/// A worker's cache as paths of token hashes, the way an engine would report it: a block's id
/// is a function of its path, as with vLLM's chained block hashes.
#[derive(Default)]
struct Model {
    /// worker → block id → path
    blocks: HashMap<WorkerKey, HashMap<u64, Vec<u64>>>,
}

impl Model {
    fn id(path: &[u64]) -> u64 {
        path.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, t| {
            (h ^ t).wrapping_mul(0x100_0000_01b3)
        })
    }

    fn overlap(&self, worker: WorkerKey, query: &[u64]) -> u32 {
        let held: HashSet<&Vec<u64>> = self
            .blocks
            .get(&worker)
            .map(|b| b.values().collect())
            .unwrap_or_default();
        (1..=query.len())
            .take_while(|&k| held.contains(&query[..k].to_vec()))
            .count() as u32
    }
}

#[test]
fn matches_a_naive_model_under_random_events() {
    let workers: Vec<WorkerKey> = (0..4)
        .flat_map(|w| {
            (0..2).map(move |r| WorkerKey {
                worker_id: w,
                dp_rank: r,
            })
        })
        .collect();
    for seed in 0..40u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut index = RadixIndex::new();
        let mut model = Model::default();
        for step in 0..400 {
            let w = workers[rng.random_range(0..workers.len())];
            let held = model.blocks.entry(w).or_default();
            match rng.random_range(0..10) {
                0..=5 => {
                    // Extend from the root or from a block it holds, with 1-4 new blocks.
                    let parent = if held.is_empty() || rng.random_bool(0.3) {
                        None
                    } else {
                        held.keys().nth(rng.random_range(0..held.len())).copied()
                    };
                    let mut path = parent.map(|p| held[&p].clone()).unwrap_or_default();
                    let mut blocks = Vec::new();
                    for _ in 0..rng.random_range(1..5) {
                        path.push(rng.random_range(1..4));
                        blocks.push((Model::id(&path), *path.last().unwrap()));
                        held.insert(Model::id(&path), path.clone());
                    }
                    assert_eq!(
                        index.apply(w, &stored(parent, &blocks)),
                        ApplyOutcome::Applied
                    );
                }
                6..=8 if !held.is_empty() => {
                    let victims: Vec<u64> = held
                        .keys()
                        .copied()
                        .filter(|_| rng.random_bool(0.4))
                        .collect();
                    for v in &victims {
                        held.remove(v);
                    }
                    index.apply(
                        w,
                        &KvEventData::Removed {
                            block_hashes: victims,
                        },
                    );
                }
                9 if rng.random_bool(0.3) => {
                    held.clear();
                    index.apply(w, &KvEventData::Cleared);
                }
                9 => {
                    for r in 0..2 {
                        model.blocks.remove(&WorkerKey {
                            worker_id: w.worker_id,
                            dp_rank: r,
                        });
                    }
                    index.remove_worker(w.worker_id, None);
                }
                _ => {}
            }
            let query: Vec<u64> = (0..rng.random_range(1..7))
                .map(|_| rng.random_range(1..4))
                .collect();
            let got: HashMap<WorkerKey, u32> = index.overlaps(&query).into_iter().collect();
            for &k in &workers {
                assert_eq!(
                    got.get(&k).copied().unwrap_or(0),
                    model.overlap(k, &query),
                    "seed {seed} step {step} worker {k:?} query {query:?}"
                );
            }
            let blocks: usize = workers.iter().map(|&k| index.worker_blocks(k)).sum();
            assert_eq!(
                blocks,
                model.blocks.values().map(|b| b.len()).sum::<usize>()
            );
            // No leaked nodes: the tree is exactly the held paths and their prefixes.
            let closure: HashSet<Vec<u64>> = model
                .blocks
                .values()
                .flat_map(|b| b.values())
                .flat_map(|p| (1..=p.len()).map(move |k| p[..k].to_vec()))
                .collect();
            assert_eq!(index.node_count(), closure.len(), "seed {seed} step {step}");
        }
    }
}
