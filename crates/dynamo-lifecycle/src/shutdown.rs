//! Graceful shutdown: six ordered stages sharing one time budget.
//!
//! [`ShutdownBudget`] holds the budget arithmetic; [`ShutdownPlanner`] is a sans-IO
//! driver. The host feeds [`ShutdownEvent`]s with the current time (`now_ms`, from any
//! monotonic epoch) and performs the returned [`ShutdownAction`]s in order. Each
//! action that waits on the outside world is answered by exactly one event; every
//! other action is fire-and-forget. Events that do not fit the current step (for
//! example a late timer) are ignored, so the host can be sloppy about cancelling timers.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::ShutdownSettings;

mod budget;
mod planner;

pub use crate::config::CLEANUP_RESERVE_MS;
pub use budget::{CleanupBound, ShutdownBudget};
pub use planner::{
    KvTransferPolicy, LogLevel, PlannedStage, ShutdownAction, ShutdownEvent, ShutdownPlanner,
    WorkerSituation,
};

/// Process exit code when shutdown overruns its budget.
pub const EXIT_CODE_SHUTDOWN_TIMEOUT: i32 = 911;
/// How often the engine is asked whether KV transfers are done.
pub const QUIESCENCE_POLL_INTERVAL_MS: u64 = 250;
/// How often a progress line is logged while waiting for KV transfers.
pub const KV_PROGRESS_LOG_INTERVAL_MS: u64 = 5_000;

/// The hard-exit timer for a shutdown with these settings: the same budget the stages share.
pub fn total_budget(settings: &ShutdownSettings) -> u64 {
    settings.total_ms
}

/// One shutdown stage, in execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Remove the instance from discovery so routers stop picking it.
    Unregister,
    /// Keep serving briefly so routers observe the removal.
    RouterGrace,
    /// Refuse new requests; running ones continue.
    StopAdmission,
    /// Wait for running requests to finish.
    Inflight,
    /// The engine's `drain()` hook, then (prefill workers) wait for KV blocks to be pulled by
    /// decode workers.
    KvTransfer,
    /// Call the engine's cleanup (at most once).
    Cleanup,
}

impl Stage {
    /// All stages in execution order.
    pub const ALL: [Stage; 6] = [
        Stage::Unregister,
        Stage::RouterGrace,
        Stage::StopAdmission,
        Stage::Inflight,
        Stage::KvTransfer,
        Stage::Cleanup,
    ];

    /// Metric / log label (`dynamo_component_shutdown_stage_seconds{stage}`).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Unregister => "unregister",
            Stage::RouterGrace => "router_grace",
            Stage::StopAdmission => "stop_admission",
            Stage::Inflight => "inflight",
            Stage::KvTransfer => "kv_transfer",
            Stage::Cleanup => "cleanup",
        }
    }

    pub(crate) fn next(self) -> Option<Stage> {
        let i = Stage::ALL.iter().position(|s| *s == self)?;
        Stage::ALL.get(i + 1).copied()
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageReason {
    /// Did its job.
    Completed,
    /// Not applicable, disabled, or failed harmlessly (see `detail`).
    Skipped,
    /// Ran out of its allowance.
    TimedOut,
    /// Interrupted by the host.
    Cancelled,
    /// The engine never answered the question the stage asks.
    Unsupported,
}

impl StageReason {
    /// Metric / log label (`dynamo_component_shutdown_stage_seconds{reason}`).
    pub fn as_str(self) -> &'static str {
        match self {
            StageReason::Completed => "completed",
            StageReason::Skipped => "skipped",
            StageReason::TimedOut => "timed_out",
            StageReason::Cancelled => "cancelled",
            StageReason::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for StageReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The record of one finished stage, for logs and the stage-duration histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageOutcome {
    /// Which stage.
    pub stage: Stage,
    /// How it ended.
    pub reason: StageReason,
    /// Time spent in the stage.
    pub elapsed_ms: u64,
    /// Budget left when it ended; `None` for an unbounded budget.
    pub remaining_total_ms: Option<u64>,
    /// Extra context (error text, why it was skipped).
    pub detail: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stage_names_and_order() {
        let names: Vec<_> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "unregister",
                "router_grace",
                "stop_admission",
                "inflight",
                "kv_transfer",
                "cleanup"
            ]
        );
        for s in Stage::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
            assert_eq!(s.to_string(), s.as_str());
        }
        assert_eq!(Stage::Unregister.next(), Some(Stage::RouterGrace));
        assert_eq!(Stage::KvTransfer.next(), Some(Stage::Cleanup));
        assert_eq!(Stage::Cleanup.next(), None);
        assert!(Stage::Unregister < Stage::Cleanup);
    }

    #[test]
    fn reason_names() {
        let all = [
            (StageReason::Completed, "completed"),
            (StageReason::Skipped, "skipped"),
            (StageReason::TimedOut, "timed_out"),
            (StageReason::Cancelled, "cancelled"),
            (StageReason::Unsupported, "unsupported"),
        ];
        for (r, name) in all {
            assert_eq!(r.as_str(), name);
            assert_eq!(r.to_string(), name);
            assert_eq!(serde_json::to_value(r).unwrap(), json!(name));
        }
    }

    #[test]
    fn outcome_json_shape() {
        let o = StageOutcome {
            stage: Stage::Inflight,
            reason: StageReason::TimedOut,
            elapsed_ms: 10,
            remaining_total_ms: None,
            detail: Some("x".into()),
        };
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            json!({"stage": "inflight", "reason": "timed_out", "elapsed_ms": 10,
                   "remaining_total_ms": null, "detail": "x"})
        );
    }

    #[test]
    fn total_budget_is_the_settings_total() {
        let s = ShutdownSettings::default();
        assert_eq!(total_budget(&s), 35_000);
        assert_eq!(EXIT_CODE_SHUTDOWN_TIMEOUT, 911);
    }
}
