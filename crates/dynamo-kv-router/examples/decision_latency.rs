//! Routing decision latency and index memory: 16 workers holding 100,000 cached blocks in all
//! (shared system-prompt prefixes plus per-request tails), then 20,000 decisions for 64-block
//! requests. Prints p50 / p99 per decision and the index's bytes per million blocks.
//! `cargo run --release -p dynamo-kv-router --example decision_latency`

use std::time::Instant;

use dynamo_kv_router::{
    CostConfig, KvEventData, KvRouter, RouteRequest, StoredBlock, WorkerInfo, WorkerKey,
};

/// A cheap deterministic generator (xorshift), so runs compare.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORKERS: u64 = 16;
const TARGET_BLOCKS: usize = 100_000;
const PREFIXES: u64 = 32;
const PREFIX_BLOCKS: u64 = 16;
const REQUEST_BLOCKS: u64 = 64;

/// The token hashes of request `r` under system prompt `p`: the prompt's blocks, then its own.
/// Patterned on purpose (real ones are uniform): the index's maps must not depend on that.
fn request_hashes(p: u64, r: u64) -> Vec<u64> {
    (0..REQUEST_BLOCKS)
        .map(|i| {
            if i < PREFIX_BLOCKS {
                (p << 32) | i
            } else {
                (1 << 63) | (p << 40) | (r << 8) | i
            }
        })
        .collect()
}

fn main() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut router = KvRouter::new(
        CostConfig {
            block_size: 16,
            ..Default::default()
        },
        None,
    );
    let mut event_id = vec![0u64; WORKERS as usize];
    let mut stored = 0usize;
    let mut r = 0;
    while stored < TARGET_BLOCKS {
        let (w, p) = (rng.below(WORKERS), rng.below(PREFIXES));
        r += 1;
        let hashes = request_hashes(p, r);
        let blocks: Vec<StoredBlock> = hashes
            .iter()
            .map(|&h| StoredBlock {
                block_hash: h ^ (w << 56),
                tokens_hash: h,
            })
            .collect();
        event_id[w as usize] += 1;
        router.apply_event(
            WorkerKey {
                worker_id: w,
                dp_rank: 0,
            },
            event_id[w as usize],
            &KvEventData::Stored {
                parent_hash: None,
                blocks,
            },
        );
        stored = (0..WORKERS)
            .map(|w| {
                router.index().worker_blocks(WorkerKey {
                    worker_id: w,
                    dp_rank: 0,
                })
            })
            .sum();
    }
    let workers: Vec<WorkerInfo> = (0..WORKERS)
        .map(|w| WorkerInfo {
            worker: WorkerKey {
                worker_id: w,
                dp_rank: 0,
            },
            total_blocks: Some(16_384),
        })
        .collect();
    let mut nanos = Vec::with_capacity(20_000);
    for i in 0..20_000u64 {
        let hashes = request_hashes(rng.below(PREFIXES), rng.below(r + 1000));
        let id = format!("req-{i}");
        let request = RouteRequest {
            request_id: &id,
            tokens_hashes: &hashes,
            sequence_hashes: &hashes,
            isl_tokens: REQUEST_BLOCKS * 16,
            lora_name: None,
        };
        let draw = (rng.below(1 << 20) as f64) / f64::from(1 << 20);
        let start = Instant::now();
        router.route(&request, &workers, draw, 0).expect("a worker");
        nanos.push(start.elapsed().as_nanos() as u64);
        // Keep about 256 requests in flight, as a busy frontend would.
        if i >= 256 {
            router.free(&format!("req-{}", i - 256));
        }
    }
    nanos.sort_unstable();
    let at =
        |q: f64| nanos[((nanos.len() as f64 * q) as usize).min(nanos.len() - 1)] as f64 / 1000.0;
    let bytes = router.index().memory_bytes();
    println!(
        "workers {WORKERS}, cached blocks {stored}, tree nodes {}, decisions {}",
        router.index().node_count(),
        nanos.len()
    );
    println!(
        "decision latency p50 {:.1} us, p99 {:.1} us",
        at(0.5),
        at(0.99)
    );
    println!(
        "index memory {:.1} MiB, {:.1} MiB per million cached blocks",
        bytes as f64 / 1048576.0,
        bytes as f64 / 1048576.0 / (stored as f64 / 1e6)
    );
}
