//! The router's options as a user gives them (stock's flags, each optional) and how they become
//! its settings: which option wins when two name the same weight, the defaults of stock Dynamo
//! 1.6, and the ranges each must be in. Bindings convert their own types into `RouterOptions`
//! and report an [`InvalidOption`] in their own spelling of the option's name.

use std::fmt;

use crate::{ApproxConfig, CostConfig};

/// The router's options; unset fields take stock Dynamo 1.6's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterOptions {
    /// Tokens per KV block (the card's `kv_cache_block_size`), at least 1.
    pub block_size: u32,
    /// Weight of the prefill term (`--router-prefill-load-scale`, default 1).
    pub prefill_load_scale: Option<f64>,
    /// Stock's older name for `prefill_load_scale` (`--kv-overlap-score-weight`): wins when
    /// set, and 0 also drops the cache credit.
    pub overlap_score_weight: Option<f64>,
    /// Blocks of prompt work each cached block saves, 0 to 1 (default 1).
    pub overlap_score_credit: Option<f64>,
    /// How fast that credit shrinks on a worker behind in prefill (default 0).
    pub overlap_score_credit_decay: Option<f64>,
    /// Softmax temperature (`--router-temperature`, default 0: always the cheapest).
    pub temperature: Option<f64>,
    /// Count blocks a worker already holds for other requests once (default true).
    pub assume_kv_reuse: Option<bool>,
    /// Busy above this fraction (0 to 1) of a worker's KV blocks in use.
    pub active_decode_blocks_threshold: Option<f64>,
    /// Busy above this many prompt tokens still to prefill.
    pub active_prefill_tokens_threshold: Option<u64>,
    /// Weight of each request in flight on a worker (default 0).
    pub decode_active_request_weight: Option<f64>,
    /// When false, no KV events are expected: the router remembers what it sent where for
    /// `ttl_secs` instead (`--no-router-kv-events`). Default true.
    pub use_kv_events: Option<bool>,
    /// How long a guessed block lives in approximate mode (`--router-ttl-secs`, default 120).
    pub ttl_secs: Option<f64>,
    /// Approximate mode prunes the oldest guesses past this many blocks (default 2^20)
    pub max_tree_size: Option<usize>,
    /// and keeps this fraction of `max_tree_size` (default 0.8).
    pub prune_target_ratio: Option<f64>,
}

/// What the router runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterSettings {
    pub cost: CostConfig,
    /// Present in approximate mode (`use_kv_events` false).
    pub approx: Option<ApproxConfig>,
}

/// An option out of its range. `option` is the field's name in [`RouterOptions`], so a binding
/// can spell it as its users write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidOption {
    pub option: &'static str,
    /// What was wrong, to follow the name: "must be at most 1, got 2".
    pub problem: String,
}

impl InvalidOption {
    pub(crate) fn new(option: &'static str, problem: impl Into<String>) -> Self {
        Self {
            option,
            problem: problem.into(),
        }
    }
}

impl fmt::Display for InvalidOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.option, self.problem)
    }
}

impl std::error::Error for InvalidOption {}

/// A weight, scale or fraction: finite and not negative, when set.
fn non_negative(option: &'static str, value: Option<f64>) -> Result<Option<f64>, InvalidOption> {
    match value {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(InvalidOption::new(
            option,
            format!("must be a non-negative number, got {x}"),
        )),
        other => Ok(other),
    }
}

/// A share of something: also at most 1.
fn at_most_one(option: &'static str, value: f64) -> Result<f64, InvalidOption> {
    if value > 1.0 {
        return Err(InvalidOption::new(
            option,
            format!("must be at most 1, got {value}"),
        ));
    }
    Ok(value)
}

/// The busy threshold on decode blocks: a fraction of a worker's KV blocks, in [0, 1] as stock
/// requires. Shared by the options and [`crate::KvRouter::set_busy_thresholds`].
pub(crate) fn decode_blocks_threshold(value: Option<f64>) -> Result<Option<f64>, InvalidOption> {
    const NAME: &str = "active_decode_blocks_threshold";
    non_negative(NAME, value)?
        .map(|x| at_most_one(NAME, x))
        .transpose()
}

impl RouterOptions {
    /// The settings these options give; the error names the first option found out of range.
    pub fn resolve(&self) -> Result<RouterSettings, InvalidOption> {
        if self.block_size == 0 {
            return Err(InvalidOption::new("block_size", "must be at least 1"));
        }
        let defaults = CostConfig::default();
        let weight = non_negative("overlap_score_weight", self.overlap_score_weight)?;
        let credit = non_negative("overlap_score_credit", self.overlap_score_credit)?
            .unwrap_or(defaults.overlap_score_credit);
        let credit = at_most_one("overlap_score_credit", credit)?;
        let scale = non_negative("prefill_load_scale", self.prefill_load_scale)?;
        let cost = CostConfig {
            block_size: self.block_size,
            prefill_load_scale: weight.or(scale).unwrap_or(defaults.prefill_load_scale),
            // Stock's overlap weight of 0 turned cache overlap off altogether.
            overlap_score_credit: if weight == Some(0.0) { 0.0 } else { credit },
            overlap_score_credit_decay: non_negative(
                "overlap_score_credit_decay",
                self.overlap_score_credit_decay,
            )?
            .unwrap_or(defaults.overlap_score_credit_decay),
            temperature: non_negative("temperature", self.temperature)?
                .unwrap_or(defaults.temperature),
            assume_kv_reuse: self.assume_kv_reuse.unwrap_or(defaults.assume_kv_reuse),
            active_decode_blocks_threshold: decode_blocks_threshold(
                self.active_decode_blocks_threshold,
            )?,
            active_prefill_tokens_threshold: self.active_prefill_tokens_threshold,
            decode_active_request_weight: non_negative(
                "decode_active_request_weight",
                self.decode_active_request_weight,
            )?
            .unwrap_or(defaults.decode_active_request_weight),
        };
        Ok(RouterSettings {
            cost,
            approx: self.approx()?,
        })
    }

    /// Approximate mode's settings, when KV events are off.
    fn approx(&self) -> Result<Option<ApproxConfig>, InvalidOption> {
        if self.use_kv_events.unwrap_or(true) {
            return Ok(None);
        }
        let base = ApproxConfig::default();
        let ratio = non_negative("prune_target_ratio", self.prune_target_ratio)?
            .unwrap_or(base.prune_target_ratio);
        Ok(Some(ApproxConfig {
            prune_target_ratio: at_most_one("prune_target_ratio", ratio)?,
            ttl_ms: non_negative("ttl_secs", self.ttl_secs)?
                .map_or(base.ttl_ms, |s| (s * 1000.0) as u64),
            max_tree_size: self.max_tree_size.unwrap_or(base.max_tree_size),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(block_size: u32) -> RouterOptions {
        RouterOptions {
            block_size,
            ..Default::default()
        }
    }

    #[test]
    fn unset_options_take_stocks_defaults_and_kv_events_are_on() {
        let settings = options(32).resolve().unwrap();
        assert_eq!(
            settings.cost,
            CostConfig {
                block_size: 32,
                ..CostConfig::default()
            }
        );
        assert_eq!(settings.approx, None);
    }

    #[test]
    fn overlap_score_weight_wins_over_prefill_load_scale() {
        let settings = RouterOptions {
            prefill_load_scale: Some(2.0),
            overlap_score_weight: Some(0.5),
            ..options(16)
        }
        .resolve()
        .unwrap();
        assert_eq!(settings.cost.prefill_load_scale, 0.5);
        assert_eq!(settings.cost.overlap_score_credit, 1.0);

        let settings = RouterOptions {
            prefill_load_scale: Some(2.0),
            ..options(16)
        }
        .resolve()
        .unwrap();
        assert_eq!(settings.cost.prefill_load_scale, 2.0);
    }

    #[test]
    fn an_overlap_score_weight_of_zero_also_drops_the_cache_credit() {
        let settings = RouterOptions {
            overlap_score_weight: Some(0.0),
            overlap_score_credit: Some(0.7),
            ..options(16)
        }
        .resolve()
        .unwrap();
        assert_eq!(settings.cost.prefill_load_scale, 0.0);
        assert_eq!(settings.cost.overlap_score_credit, 0.0);
    }

    #[test]
    fn each_set_option_reaches_the_cost_config() {
        let settings = RouterOptions {
            overlap_score_credit: Some(0.25),
            overlap_score_credit_decay: Some(0.5),
            temperature: Some(0.7),
            assume_kv_reuse: Some(false),
            active_decode_blocks_threshold: Some(0.9),
            active_prefill_tokens_threshold: Some(4096),
            decode_active_request_weight: Some(3.0),
            ..options(8)
        }
        .resolve()
        .unwrap();
        assert_eq!(
            settings.cost,
            CostConfig {
                block_size: 8,
                prefill_load_scale: 1.0,
                overlap_score_credit: 0.25,
                overlap_score_credit_decay: 0.5,
                decode_active_request_weight: 3.0,
                temperature: 0.7,
                assume_kv_reuse: false,
                active_decode_blocks_threshold: Some(0.9),
                active_prefill_tokens_threshold: Some(4096),
            }
        );
    }

    #[test]
    fn without_kv_events_approximate_mode_takes_its_defaults_or_the_options() {
        let off = RouterOptions {
            use_kv_events: Some(false),
            ..options(16)
        };
        assert_eq!(off.resolve().unwrap().approx, Some(ApproxConfig::default()));
        let tuned = RouterOptions {
            ttl_secs: Some(1.5),
            max_tree_size: Some(100),
            prune_target_ratio: Some(0.5),
            ..off
        };
        assert_eq!(
            tuned.resolve().unwrap().approx,
            Some(ApproxConfig {
                ttl_ms: 1500,
                max_tree_size: 100,
                prune_target_ratio: 0.5,
            })
        );
        // Approximate-mode options mean nothing while KV events are on.
        let on = RouterOptions {
            use_kv_events: Some(true),
            ttl_secs: Some(1.0),
            ..options(16)
        };
        assert_eq!(on.resolve().unwrap().approx, None);
    }

    #[test]
    fn an_option_out_of_range_is_named_with_what_was_wrong() {
        let err = |o: RouterOptions| o.resolve().unwrap_err().to_string();
        assert_eq!(err(options(0)), "block_size must be at least 1");
        assert_eq!(
            err(RouterOptions {
                temperature: Some(-1.0),
                ..options(16)
            }),
            "temperature must be a non-negative number, got -1"
        );
        assert_eq!(
            err(RouterOptions {
                overlap_score_weight: Some(f64::NAN),
                ..options(16)
            }),
            "overlap_score_weight must be a non-negative number, got NaN"
        );
        assert_eq!(
            err(RouterOptions {
                overlap_score_credit: Some(1.5),
                ..options(16)
            }),
            "overlap_score_credit must be at most 1, got 1.5"
        );
        assert_eq!(
            err(RouterOptions {
                use_kv_events: Some(false),
                prune_target_ratio: Some(2.0),
                ..options(16)
            }),
            "prune_target_ratio must be at most 1, got 2"
        );
        assert_eq!(
            err(RouterOptions {
                active_decode_blocks_threshold: Some(1.2),
                ..options(16)
            }),
            "active_decode_blocks_threshold must be at most 1, got 1.2"
        );
        assert_eq!(
            err(RouterOptions {
                use_kv_events: Some(false),
                ttl_secs: Some(f64::INFINITY),
                ..options(16)
            }),
            "ttl_secs must be a non-negative number, got inf"
        );
    }

    #[test]
    fn the_first_option_out_of_range_is_the_one_named() {
        let err = RouterOptions {
            overlap_score_weight: Some(-1.0),
            temperature: Some(-1.0),
            ..options(0)
        }
        .resolve()
        .unwrap_err();
        assert_eq!(err.option, "block_size");
    }
}
