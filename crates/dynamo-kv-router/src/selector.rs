//! Stock Dynamo's worker cost: prompt work the worker must still do (its active prefill plus
//! the request's prompt, less credit for the blocks it already caches) plus the KV blocks it
//! would hold; the lowest cost wins, or a softmax draw over costs when the temperature is above 0.

use crate::sequences::Load;
use crate::WorkerKey;

/// The cost function's settings, with stock's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CostConfig {
    pub block_size: u32,
    /// Weight of the prefill term (stock's `prefill_load_scale`; `--kv-overlap-score-weight` sets it).
    pub prefill_load_scale: f64,
    /// Blocks of prompt work each cached block saves (0..=1).
    pub overlap_score_credit: f64,
    /// How fast that credit shrinks on a worker with more active prefill than the least loaded.
    pub overlap_score_credit_decay: f64,
    pub decode_active_request_weight: f64,
    /// 0: the lowest cost; above 0: a softmax draw, hotter is more random.
    pub temperature: f64,
    /// Blocks a worker already holds for other requests are not counted again.
    pub assume_kv_reuse: bool,
    /// Busy when its active decode blocks exceed this fraction of its KV blocks.
    pub active_decode_blocks_threshold: Option<f64>,
    /// Busy when its active prefill tokens exceed this.
    pub active_prefill_tokens_threshold: Option<u64>,
}

impl Default for CostConfig {
    fn default() -> Self {
        Self {
            block_size: 16,
            prefill_load_scale: 1.0,
            overlap_score_credit: 1.0,
            overlap_score_credit_decay: 0.0,
            decode_active_request_weight: 0.0,
            temperature: 0.0,
            assume_kv_reuse: true,
            active_decode_blocks_threshold: None,
            active_prefill_tokens_threshold: None,
        }
    }
}

/// One worker the request could go to, with what the router knows about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub worker: WorkerKey,
    /// Leading request blocks it caches.
    pub overlap_blocks: u32,
    pub load: Load,
    /// Request blocks it does not hold active yet.
    pub new_blocks: u64,
    /// Its KV capacity in blocks, when known (for the decode-blocks busy threshold).
    pub total_blocks: Option<u64>,
}

/// A candidate's cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub worker: WorkerKey,
    pub overlap_blocks: u32,
    pub logit: f64,
}

impl CostConfig {
    /// Whether the candidate is past a busy threshold.
    pub fn is_busy(&self, c: &Candidate) -> bool {
        let decode = match (self.active_decode_blocks_threshold, c.total_blocks) {
            (Some(frac), Some(total)) if total > 0 => {
                c.load.decode_blocks as f64 / total as f64 > frac
            }
            _ => false,
        };
        decode
            || self
                .active_prefill_tokens_threshold
                .is_some_and(|t| c.load.prefill_tokens > t)
    }

    /// Each candidate's cost for a request of `isl_tokens` prompt tokens.
    pub fn score(&self, isl_tokens: u64, candidates: &[Candidate]) -> Vec<Scored> {
        let bs = f64::from(self.block_size.max(1));
        let min_prefill = candidates
            .iter()
            .map(|c| c.load.prefill_tokens)
            .min()
            .unwrap_or(0);
        candidates
            .iter()
            .map(|c| {
                let raw_prefill_blocks = (c.load.prefill_tokens + isl_tokens) as f64 / bs;
                // 1 / (1 + decay × excess), excess in request-equivalents: decay 1 halves the
                // credit of a worker one whole request behind the least loaded.
                let excess = if isl_tokens == 0 {
                    0.0
                } else {
                    (c.load.prefill_tokens - min_prefill) as f64 / isl_tokens as f64
                };
                let credit = self.overlap_score_credit
                    / (1.0 + self.overlap_score_credit_decay * excess)
                    * f64::from(c.overlap_blocks);
                let prefill = (raw_prefill_blocks - credit).max(0.0);
                let request_blocks = if self.assume_kv_reuse {
                    c.new_blocks
                } else {
                    isl_tokens / u64::from(self.block_size.max(1))
                };
                let decode = (c.load.decode_blocks + request_blocks) as f64;
                let logit = self.prefill_load_scale * prefill
                    + decode
                    + self.decode_active_request_weight * f64::from(c.load.requests);
                Scored {
                    worker: c.worker,
                    overlap_blocks: c.overlap_blocks,
                    logit,
                }
            })
            .collect()
    }

    /// Picks one of `scored` (non-empty): the lowest logit (ties by `random` in [0, 1)) at
    /// temperature 0, else a softmax draw over the logits scaled to [0, 1].
    pub fn pick(&self, scored: &[Scored], random: f64) -> usize {
        assert!(!scored.is_empty(), "pick needs a candidate");
        let min = scored.iter().map(|s| s.logit).fold(f64::INFINITY, f64::min);
        if self.temperature <= 0.0 {
            let best: Vec<usize> = (0..scored.len())
                .filter(|&i| scored[i].logit == min)
                .collect();
            return best[((random * best.len() as f64) as usize).min(best.len() - 1)];
        }
        let max = scored
            .iter()
            .map(|s| s.logit)
            .fold(f64::NEG_INFINITY, f64::max);
        let span = if max > min { max - min } else { 1.0 };
        let weights: Vec<f64> = scored
            .iter()
            .map(|s| (-(s.logit - min) / span / self.temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut target = random * total;
        for (i, w) in weights.iter().enumerate() {
            if target < *w {
                return i;
            }
            target -= w;
        }
        scored.len() - 1
    }
}
