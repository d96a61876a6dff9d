//! Shutdown configuration: explicit values from code, then environment, then defaults.
//!
//! The environment is read only through an injected lookup so the TS side (which
//! owns `process.env`) stays the single reader, and tests can pass a map.
//! Everything is resolved once into [`ShutdownSettings`]; invalid input never
//! fails startup, it falls back and produces a warning for the caller to log.

use serde::{Deserialize, Serialize};

/// Post-signal deadline, integer seconds.
pub const ENV_GRACEFUL_SHUTDOWN_TIMEOUT: &str = "DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT";
/// Router grace period, seconds (float).
pub const ENV_GRACE_PERIOD_SECS: &str = "DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS";
/// Prefill KV-transfer drain cap, seconds (float).
pub const ENV_PREFILL_DRAIN_TIMEOUT_S: &str = "DYN_PREFILL_DRAIN_TIMEOUT_S";
/// In-flight request barrier cap, seconds (float).
pub const ENV_INFLIGHT_TIMEOUT_SECS: &str = "DYN_WORKER_SHUTDOWN_INFLIGHT_TIMEOUT_SECS";
/// Engine cleanup cap, seconds (float, must be > 0).
pub const ENV_CLEANUP_TIMEOUT_SECS: &str = "DYN_WORKER_SHUTDOWN_CLEANUP_TIMEOUT_SECS";
/// `wait` or `skip`: what to do when the engine cannot say whether KV transfers are done.
pub const ENV_KV_TRANSFER_FALLBACK: &str = "DYN_WORKER_SHUTDOWN_KV_TRANSFER_FALLBACK";

/// Default for [`ENV_GRACEFUL_SHUTDOWN_TIMEOUT`], seconds.
pub const DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_SECS: u64 = 30;
/// Default for [`ENV_GRACE_PERIOD_SECS`].
pub const DEFAULT_GRACE_PERIOD_SECS: f64 = 5.0;
/// Default for [`ENV_PREFILL_DRAIN_TIMEOUT_S`].
pub const DEFAULT_PREFILL_DRAIN_TIMEOUT_SECS: f64 = 30.0;
/// Default for [`ENV_INFLIGHT_TIMEOUT_SECS`].
pub const DEFAULT_INFLIGHT_TIMEOUT_SECS: f64 = 900.0;
/// Largest accepted duration (ten years); anything above is treated as a typo.
pub const MAX_DURATION_SECS: f64 = 315_360_000.0;
/// Cleanup time granted when nothing else applies (budget spent, or a zero
/// graceful timeout would otherwise make the default cleanup timeout zero).
pub const CLEANUP_RESERVE_MS: u64 = 5_000;

/// Policy for the KV-transfer stage when the engine cannot report quiescence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvTransferFallback {
    /// Keep polling (and so wait out the drain timeout if the engine never answers).
    Wait,
    /// Do not wait for KV transfers at all.
    Skip,
}

impl KvTransferFallback {
    /// The spelling used in env values and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            KvTransferFallback::Wait => "wait",
            KvTransferFallback::Skip => "skip",
        }
    }
}

/// Shutdown knobs set from code. Every field is optional; a set field wins over
/// the environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShutdownConfig {
    /// Whole shutdown budget; default is graceful timeout + router grace.
    pub total_secs: Option<f64>,
    /// Router grace period (0 skips the stage).
    pub router_grace_secs: Option<f64>,
    /// In-flight request barrier cap (0 skips the stage).
    pub inflight_timeout_secs: Option<f64>,
    /// KV-transfer drain cap (0 skips the stage).
    pub kv_transfer_timeout_secs: Option<f64>,
    /// Engine cleanup cap; non-positive values are ignored.
    pub cleanup_timeout_secs: Option<f64>,
    /// KV-transfer fallback policy; beats env and the engine's own declaration.
    pub kv_transfer_fallback: Option<KvTransferFallback>,
}

/// Fully resolved shutdown settings, in milliseconds so a JS host can use them directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShutdownSettings {
    /// [`ENV_GRACEFUL_SHUTDOWN_TIMEOUT`]; also the default cleanup timeout.
    pub graceful_shutdown_timeout_ms: u64,
    /// Router grace stage cap.
    pub router_grace_ms: u64,
    /// In-flight stage cap.
    pub inflight_timeout_ms: u64,
    /// KV-transfer stage cap.
    pub kv_transfer_timeout_ms: u64,
    /// Cleanup stage cap; always > 0.
    pub cleanup_timeout_ms: u64,
    /// The single budget shared by all stages, and the hard-exit timer.
    pub total_ms: u64,
    /// Config or env choice; `None` defers to the engine's declaration.
    pub kv_transfer_fallback: Option<KvTransferFallback>,
}

impl Default for ShutdownSettings {
    fn default() -> Self {
        let graceful = DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_SECS * 1000;
        let grace = secs_to_ms(DEFAULT_GRACE_PERIOD_SECS);
        ShutdownSettings {
            graceful_shutdown_timeout_ms: graceful,
            router_grace_ms: grace,
            inflight_timeout_ms: secs_to_ms(DEFAULT_INFLIGHT_TIMEOUT_SECS),
            kv_transfer_timeout_ms: secs_to_ms(DEFAULT_PREFILL_DRAIN_TIMEOUT_SECS),
            cleanup_timeout_ms: graceful,
            total_ms: graceful + grace,
            kv_transfer_fallback: None,
        }
    }
}

/// [`ShutdownSettings`] plus the warnings produced while resolving them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedSettings {
    /// The settings to use.
    pub settings: ShutdownSettings,
    /// One human-readable line per ignored or adjusted value, naming its source.
    pub warnings: Vec<String>,
}

impl ShutdownSettings {
    /// Resolve `config` over the environment (read through `lookup`) over built-in defaults.
    pub fn resolve<F>(config: &ShutdownConfig, lookup: F) -> ResolvedSettings
    where
        F: Fn(&str) -> Option<String>,
    {
        let mut r = Resolver {
            lookup,
            warnings: Vec::new(),
        };

        let graceful_ms = r.env_graceful_timeout();

        let grace_ms = r.clamped(
            "ShutdownConfig.router_grace_secs",
            config.router_grace_secs,
            ENV_GRACE_PERIOD_SECS,
            DEFAULT_GRACE_PERIOD_SECS,
        );
        let inflight_ms = r.clamped(
            "ShutdownConfig.inflight_timeout_secs",
            config.inflight_timeout_secs,
            ENV_INFLIGHT_TIMEOUT_SECS,
            DEFAULT_INFLIGHT_TIMEOUT_SECS,
        );
        let kv_ms = r.clamped(
            "ShutdownConfig.kv_transfer_timeout_secs",
            config.kv_transfer_timeout_secs,
            ENV_PREFILL_DRAIN_TIMEOUT_S,
            DEFAULT_PREFILL_DRAIN_TIMEOUT_SECS,
        );
        let cleanup_ms = r.cleanup(config.cleanup_timeout_secs, graceful_ms);

        // Grace is added on top of the graceful timeout so a grace equal to the
        // timeout cannot eat the whole budget.
        let total_ms = match r.config_total(config.total_secs) {
            Some(ms) => ms,
            None => graceful_ms.saturating_add(grace_ms),
        };

        let kv_transfer_fallback = match config.kv_transfer_fallback {
            Some(p) => Some(p),
            None => r.env_fallback(),
        };

        ResolvedSettings {
            settings: ShutdownSettings {
                graceful_shutdown_timeout_ms: graceful_ms,
                router_grace_ms: grace_ms,
                inflight_timeout_ms: inflight_ms,
                kv_transfer_timeout_ms: kv_ms,
                cleanup_timeout_ms: cleanup_ms,
                total_ms,
                kv_transfer_fallback,
            },
            warnings: r.warnings,
        }
    }

    /// Resolve from the environment alone (no values set in code).
    pub fn from_env<F>(lookup: F) -> ResolvedSettings
    where
        F: Fn(&str) -> Option<String>,
    {
        Self::resolve(&ShutdownConfig::default(), lookup)
    }
}

/// Seconds → whole milliseconds, rounding up so a tiny positive value never becomes 0.
fn secs_to_ms(secs: f64) -> u64 {
    (secs * 1000.0).ceil() as u64
}

fn fmt_secs(secs: f64) -> String {
    format!("{secs}s")
}

struct Resolver<F> {
    lookup: F,
    warnings: Vec<String>,
}

/// Result of reading one float variable.
enum EnvValue {
    Unset,
    Value(f64),
    Invalid,
}

impl<F: Fn(&str) -> Option<String>> Resolver<F> {
    fn raw(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// Reads a float env var; warns (and reports Invalid) on unparseable,
    /// non-finite or absurdly large values.
    fn env_f64(&mut self, name: &str, default_secs: f64) -> EnvValue {
        let Some(raw) = self.raw(name) else {
            return EnvValue::Unset;
        };
        let problem = match raw.parse::<f64>() {
            Err(_) => "is not a number",
            Ok(v) if !v.is_finite() => "is not finite",
            Ok(v) if v > MAX_DURATION_SECS => "exceeds the 315360000s maximum",
            Ok(v) => return EnvValue::Value(v),
        };
        self.warnings.push(format!(
            "{name}={raw:?} {problem}; using the default {}",
            fmt_secs(default_secs)
        ));
        EnvValue::Invalid
    }

    /// Validates a value set in code. `None` means "not usable, fall through".
    fn config_f64(&mut self, field: &str, value: Option<f64>) -> Option<f64> {
        let v = value?;
        let problem = if !v.is_finite() {
            "is not finite"
        } else if v > MAX_DURATION_SECS {
            "exceeds the 315360000s maximum"
        } else {
            return Some(v);
        };
        self.warnings
            .push(format!("{field}={v} {problem}; ignoring it"));
        None
    }

    fn env_graceful_timeout(&mut self) -> u64 {
        let name = ENV_GRACEFUL_SHUTDOWN_TIMEOUT;
        let default = DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_SECS;
        let Some(raw) = self.raw(name) else {
            return default * 1000;
        };
        match raw.parse::<u64>() {
            Ok(v) if (v as f64) <= MAX_DURATION_SECS => v * 1000,
            Ok(_) => {
                self.warnings.push(format!(
                    "{name}={raw:?} exceeds the 315360000s maximum; using the default {default}s"
                ));
                default * 1000
            }
            Err(_) => {
                self.warnings.push(format!(
                    "{name}={raw:?} is not a non-negative integer number of seconds; using the default {default}s"
                ));
                default * 1000
            }
        }
    }

    /// Grace / drain / in-flight: negative clamps to 0, which skips the stage.
    fn clamped(&mut self, field: &str, config: Option<f64>, env: &str, default: f64) -> u64 {
        if let Some(v) = self.config_f64(field, config) {
            if v < 0.0 {
                self.warnings
                    .push(format!("{field}={v} is negative; using 0 (stage skipped)"));
                return 0;
            }
            return secs_to_ms(v);
        }
        match self.env_f64(env, default) {
            EnvValue::Value(v) if v < 0.0 => {
                self.warnings
                    .push(format!("{env}={v} is negative; using 0 (stage skipped)"));
                0
            }
            EnvValue::Value(v) => secs_to_ms(v),
            EnvValue::Unset | EnvValue::Invalid => secs_to_ms(default),
        }
    }

    /// Cleanup must stay positive: a zero timeout would cancel teardown on its first poll.
    fn cleanup(&mut self, config: Option<f64>, graceful_ms: u64) -> u64 {
        let default_ms = if graceful_ms > 0 {
            graceful_ms
        } else {
            CLEANUP_RESERVE_MS
        };
        let default_secs = default_ms as f64 / 1000.0;
        let field = "ShutdownConfig.cleanup_timeout_secs";
        if let Some(v) = self.config_f64(field, config) {
            if v > 0.0 {
                return secs_to_ms(v);
            }
            self.warnings
                .push(format!("{field}={v} must be greater than 0; ignoring it"));
        }
        let env = ENV_CLEANUP_TIMEOUT_SECS;
        match self.env_f64(env, default_secs) {
            EnvValue::Value(v) if v > 0.0 => secs_to_ms(v),
            EnvValue::Value(v) => {
                self.warnings.push(format!(
                    "{env}={v} must be greater than 0; using the default {}",
                    fmt_secs(default_secs)
                ));
                default_ms
            }
            EnvValue::Unset | EnvValue::Invalid => default_ms,
        }
    }

    fn config_total(&mut self, total: Option<f64>) -> Option<u64> {
        let field = "ShutdownConfig.total_secs";
        let v = self.config_f64(field, total)?;
        if v < 0.0 {
            self.warnings
                .push(format!("{field}={v} is negative; using 0"));
            return Some(0);
        }
        Some(secs_to_ms(v))
    }

    fn env_fallback(&mut self) -> Option<KvTransferFallback> {
        let name = ENV_KV_TRANSFER_FALLBACK;
        let raw = self.raw(name)?;
        match raw.to_ascii_lowercase().as_str() {
            "wait" => Some(KvTransferFallback::Wait),
            "skip" => Some(KvTransferFallback::Skip),
            _ => {
                self.warnings.push(format!(
                    "{name}={raw:?} is not one of wait, skip; ignoring it"
                ));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn from_env(pairs: &[(&str, &str)]) -> ResolvedSettings {
        ShutdownSettings::from_env(env(pairs))
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let r = from_env(&[]);
        assert!(r.warnings.is_empty());
        let s = r.settings;
        assert_eq!(s, ShutdownSettings::default());
        assert_eq!(s.graceful_shutdown_timeout_ms, 30_000);
        assert_eq!(s.router_grace_ms, 5_000);
        assert_eq!(s.kv_transfer_timeout_ms, 30_000);
        assert_eq!(s.inflight_timeout_ms, 900_000);
        assert_eq!(s.cleanup_timeout_ms, 30_000);
        assert_eq!(s.total_ms, 35_000);
        assert_eq!(s.kv_transfer_fallback, None);
    }

    #[test]
    fn env_values_override_defaults() {
        let r = from_env(&[
            (ENV_GRACEFUL_SHUTDOWN_TIMEOUT, "12"),
            (ENV_GRACE_PERIOD_SECS, "1.5"),
            (ENV_PREFILL_DRAIN_TIMEOUT_S, "7"),
            (ENV_INFLIGHT_TIMEOUT_SECS, "60"),
            (ENV_CLEANUP_TIMEOUT_SECS, "3.25"),
            (ENV_KV_TRANSFER_FALLBACK, "skip"),
        ]);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let s = r.settings;
        assert_eq!(s.graceful_shutdown_timeout_ms, 12_000);
        assert_eq!(s.router_grace_ms, 1_500);
        assert_eq!(s.kv_transfer_timeout_ms, 7_000);
        assert_eq!(s.inflight_timeout_ms, 60_000);
        assert_eq!(s.cleanup_timeout_ms, 3_250);
        assert_eq!(s.total_ms, 13_500);
        assert_eq!(s.kv_transfer_fallback, Some(KvTransferFallback::Skip));
    }

    #[test]
    fn cleanup_default_follows_graceful_timeout() {
        let s = from_env(&[(ENV_GRACEFUL_SHUTDOWN_TIMEOUT, "8")]).settings;
        assert_eq!(s.cleanup_timeout_ms, 8_000);
    }

    #[test]
    fn zero_graceful_timeout_is_allowed_but_cleanup_stays_positive() {
        let r = from_env(&[(ENV_GRACEFUL_SHUTDOWN_TIMEOUT, "0")]);
        assert!(r.warnings.is_empty());
        assert_eq!(r.settings.graceful_shutdown_timeout_ms, 0);
        assert_eq!(r.settings.cleanup_timeout_ms, CLEANUP_RESERVE_MS);
        assert_eq!(r.settings.total_ms, 5_000);
    }

    #[test]
    fn unset_and_empty_values_are_silent_defaults() {
        let r = from_env(&[
            (ENV_GRACEFUL_SHUTDOWN_TIMEOUT, ""),
            (ENV_GRACE_PERIOD_SECS, "   "),
            (ENV_KV_TRANSFER_FALLBACK, ""),
        ]);
        assert!(r.warnings.is_empty());
        assert_eq!(r.settings, ShutdownSettings::default());
    }

    #[test]
    fn values_are_trimmed() {
        let s = from_env(&[
            (ENV_GRACEFUL_SHUTDOWN_TIMEOUT, " 10 "),
            (ENV_KV_TRANSFER_FALLBACK, " Wait "),
        ])
        .settings;
        assert_eq!(s.graceful_shutdown_timeout_ms, 10_000);
        assert_eq!(s.kv_transfer_fallback, Some(KvTransferFallback::Wait));
    }

    #[test]
    fn graceful_timeout_must_be_an_integer() {
        for bad in ["30.5", "-1", "abc", "1e3"] {
            let r = from_env(&[(ENV_GRACEFUL_SHUTDOWN_TIMEOUT, bad)]);
            assert_eq!(r.settings.graceful_shutdown_timeout_ms, 30_000, "{bad}");
            assert_eq!(r.warnings.len(), 1, "{bad}");
            assert!(r.warnings[0].contains(ENV_GRACEFUL_SHUTDOWN_TIMEOUT));
            assert!(r.warnings[0].contains(bad), "{}", r.warnings[0]);
        }
    }

    #[test]
    fn graceful_timeout_above_max_is_rejected() {
        let r = from_env(&[(ENV_GRACEFUL_SHUTDOWN_TIMEOUT, "315360001")]);
        assert_eq!(r.settings.graceful_shutdown_timeout_ms, 30_000);
        assert!(r.warnings[0].contains("315360001"));
        let r = from_env(&[(ENV_GRACEFUL_SHUTDOWN_TIMEOUT, "315360000")]);
        assert!(r.warnings.is_empty());
        assert_eq!(r.settings.graceful_shutdown_timeout_ms, 315_360_000_000);
    }

    #[test]
    fn invalid_float_values_fall_back_with_a_warning() {
        for (name, default_ms) in [
            (ENV_GRACE_PERIOD_SECS, 5_000),
            (ENV_PREFILL_DRAIN_TIMEOUT_S, 30_000),
            (ENV_INFLIGHT_TIMEOUT_SECS, 900_000),
            (ENV_CLEANUP_TIMEOUT_SECS, 30_000),
        ] {
            for bad in ["soon", "NaN", "inf", "-inf", "315360000.5", "1e12"] {
                let r = from_env(&[(name, bad)]);
                let s = &r.settings;
                let got = match name {
                    ENV_GRACE_PERIOD_SECS => s.router_grace_ms,
                    ENV_PREFILL_DRAIN_TIMEOUT_S => s.kv_transfer_timeout_ms,
                    ENV_INFLIGHT_TIMEOUT_SECS => s.inflight_timeout_ms,
                    _ => s.cleanup_timeout_ms,
                };
                assert_eq!(got, default_ms, "{name}={bad}");
                assert_eq!(r.warnings.len(), 1, "{name}={bad}: {:?}", r.warnings);
                assert!(r.warnings[0].contains(name));
                assert!(r.warnings[0].contains(bad), "{}", r.warnings[0]);
            }
        }
    }

    #[test]
    fn negative_grace_drain_inflight_clamp_to_zero() {
        let r = from_env(&[
            (ENV_GRACE_PERIOD_SECS, "-1"),
            (ENV_PREFILL_DRAIN_TIMEOUT_S, "-0.5"),
            (ENV_INFLIGHT_TIMEOUT_SECS, "-900"),
        ]);
        assert_eq!(r.settings.router_grace_ms, 0);
        assert_eq!(r.settings.kv_transfer_timeout_ms, 0);
        assert_eq!(r.settings.inflight_timeout_ms, 0);
        assert_eq!(r.warnings.len(), 3);
        // total = graceful + clamped grace
        assert_eq!(r.settings.total_ms, 30_000);
    }

    #[test]
    fn zero_grace_is_valid_and_silent() {
        let r = from_env(&[(ENV_GRACE_PERIOD_SECS, "0")]);
        assert!(r.warnings.is_empty());
        assert_eq!(r.settings.router_grace_ms, 0);
    }

    #[test]
    fn non_positive_cleanup_env_is_rejected() {
        for bad in ["0", "-3", "0.0"] {
            let r = from_env(&[
                (ENV_GRACEFUL_SHUTDOWN_TIMEOUT, "20"),
                (ENV_CLEANUP_TIMEOUT_SECS, bad),
            ]);
            assert_eq!(r.settings.cleanup_timeout_ms, 20_000, "{bad}");
            assert_eq!(r.warnings.len(), 1);
            assert!(r.warnings[0].contains(ENV_CLEANUP_TIMEOUT_SECS));
        }
    }

    #[test]
    fn tiny_positive_values_round_up_to_a_millisecond() {
        let s = from_env(&[(ENV_CLEANUP_TIMEOUT_SECS, "0.0001")]).settings;
        assert_eq!(s.cleanup_timeout_ms, 1);
    }

    #[test]
    fn unknown_fallback_value_warns_and_is_ignored() {
        let r = from_env(&[(ENV_KV_TRANSFER_FALLBACK, "maybe")]);
        assert_eq!(r.settings.kv_transfer_fallback, None);
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].contains(ENV_KV_TRANSFER_FALLBACK));
        assert!(r.warnings[0].contains("maybe"));
    }

    #[test]
    fn config_beats_env() {
        let cfg = ShutdownConfig {
            total_secs: Some(100.0),
            router_grace_secs: Some(2.0),
            inflight_timeout_secs: Some(10.0),
            kv_transfer_timeout_secs: Some(4.0),
            cleanup_timeout_secs: Some(6.0),
            kv_transfer_fallback: Some(KvTransferFallback::Wait),
        };
        let r = ShutdownSettings::resolve(
            &cfg,
            env(&[
                (ENV_GRACE_PERIOD_SECS, "9"),
                (ENV_INFLIGHT_TIMEOUT_SECS, "9"),
                (ENV_PREFILL_DRAIN_TIMEOUT_S, "9"),
                (ENV_CLEANUP_TIMEOUT_SECS, "9"),
                (ENV_KV_TRANSFER_FALLBACK, "skip"),
            ]),
        );
        assert!(r.warnings.is_empty());
        let s = r.settings;
        assert_eq!(s.router_grace_ms, 2_000);
        assert_eq!(s.inflight_timeout_ms, 10_000);
        assert_eq!(s.kv_transfer_timeout_ms, 4_000);
        assert_eq!(s.cleanup_timeout_ms, 6_000);
        assert_eq!(s.total_ms, 100_000);
        assert_eq!(s.kv_transfer_fallback, Some(KvTransferFallback::Wait));
    }

    #[test]
    fn env_is_not_consulted_when_config_is_set() {
        let cfg = ShutdownConfig {
            router_grace_secs: Some(1.0),
            ..Default::default()
        };
        let r = ShutdownSettings::resolve(&cfg, env(&[(ENV_GRACE_PERIOD_SECS, "garbage")]));
        assert!(r.warnings.is_empty());
        assert_eq!(r.settings.router_grace_ms, 1_000);
    }

    #[test]
    fn total_defaults_to_graceful_plus_resolved_grace() {
        let cfg = ShutdownConfig {
            router_grace_secs: Some(10.0),
            ..Default::default()
        };
        let s =
            ShutdownSettings::resolve(&cfg, env(&[(ENV_GRACEFUL_SHUTDOWN_TIMEOUT, "10")])).settings;
        assert_eq!(s.total_ms, 20_000);
    }

    #[test]
    fn non_positive_config_cleanup_is_ignored_and_env_used() {
        for bad in [0.0, -1.0] {
            let cfg = ShutdownConfig {
                cleanup_timeout_secs: Some(bad),
                ..Default::default()
            };
            let r = ShutdownSettings::resolve(&cfg, env(&[(ENV_CLEANUP_TIMEOUT_SECS, "4")]));
            assert_eq!(r.settings.cleanup_timeout_ms, 4_000);
            assert_eq!(r.warnings.len(), 1);
            assert!(r.warnings[0].contains("cleanup_timeout_secs"));
            let r = ShutdownSettings::resolve(&cfg, env(&[]));
            assert_eq!(r.settings.cleanup_timeout_ms, 30_000);
        }
    }

    #[test]
    fn invalid_config_values_fall_through_to_env() {
        let cfg = ShutdownConfig {
            total_secs: Some(f64::INFINITY),
            router_grace_secs: Some(f64::NAN),
            inflight_timeout_secs: Some(1e12),
            ..Default::default()
        };
        let r = ShutdownSettings::resolve(&cfg, env(&[(ENV_GRACE_PERIOD_SECS, "2")]));
        assert_eq!(r.warnings.len(), 3, "{:?}", r.warnings);
        assert_eq!(r.settings.router_grace_ms, 2_000);
        assert_eq!(r.settings.inflight_timeout_ms, 900_000);
        assert_eq!(r.settings.total_ms, 32_000);
        assert!(r.warnings.iter().any(|w| w.contains("total_secs")));
    }

    #[test]
    fn negative_config_values_clamp_to_zero() {
        let cfg = ShutdownConfig {
            total_secs: Some(-1.0),
            router_grace_secs: Some(-1.0),
            inflight_timeout_secs: Some(-1.0),
            kv_transfer_timeout_secs: Some(-1.0),
            ..Default::default()
        };
        let r = ShutdownSettings::resolve(&cfg, env(&[]));
        let s = r.settings;
        assert_eq!(
            (
                s.total_ms,
                s.router_grace_ms,
                s.inflight_timeout_ms,
                s.kv_transfer_timeout_ms
            ),
            (0, 0, 0, 0)
        );
        assert_eq!(r.warnings.len(), 4);
    }

    #[test]
    fn config_deserializes_from_partial_json() {
        let cfg: ShutdownConfig =
            serde_json::from_str(r#"{"total_secs": 12, "kv_transfer_fallback": "skip"}"#).unwrap();
        assert_eq!(cfg.total_secs, Some(12.0));
        assert_eq!(cfg.kv_transfer_fallback, Some(KvTransferFallback::Skip));
        assert_eq!(cfg.router_grace_secs, None);
        let cfg: ShutdownConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg, ShutdownConfig::default());
    }

    #[test]
    fn settings_serialize_in_milliseconds() {
        let v = serde_json::to_value(ShutdownSettings::default()).unwrap();
        assert_eq!(v["total_ms"], 35_000);
        assert_eq!(v["kv_transfer_fallback"], serde_json::Value::Null);
        assert_eq!(KvTransferFallback::Wait.as_str(), "wait");
        assert_eq!(
            serde_json::to_value(KvTransferFallback::Skip).unwrap(),
            "skip"
        );
    }
}
