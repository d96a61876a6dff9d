//! The sans-IO shutdown driver: events in, actions out.

use serde::{Deserialize, Serialize};

use super::{ShutdownBudget, Stage, StageOutcome, StageReason, EXIT_CODE_SHUTDOWN_TIMEOUT};
use super::{KV_PROGRESS_LOG_INTERVAL_MS, QUIESCENCE_POLL_INTERVAL_MS};
use crate::config::{
    KvTransferFallback, ShutdownSettings, CLEANUP_RESERVE_MS, ENV_CLEANUP_TIMEOUT_SECS,
    ENV_GRACEFUL_SHUTDOWN_TIMEOUT, ENV_KV_TRANSFER_FALLBACK,
};

/// What the worker had reached when shutdown began, and what it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerSituation {
    /// The endpoint was serving (an admission tracker exists). When false, the
    /// admission and in-flight stages are skipped.
    pub served: bool,
    /// This is a prefill worker; only those wait for KV transfers.
    pub prefill: bool,
    /// The engine's own `kv_transfer_fallback()` declaration, if any.
    pub engine_kv_transfer_fallback: Option<KvTransferFallback>,
    /// The engine has a `drain()` hook: it runs first in the KV-transfer stage, on every
    /// worker kind, while discovery and the request plane are still up.
    pub drain: bool,
}

/// The KV-transfer policy in force after applying precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvTransferPolicy {
    /// Poll quiescence until the drain timeout.
    Wait,
    /// Do not wait.
    Skip,
    /// Nobody chose: behaves like `Wait`, with an extra warning if the engine never answers.
    Undeclared,
}

impl KvTransferPolicy {
    /// Precedence: explicit config > env (both already merged into
    /// `ShutdownSettings::kv_transfer_fallback`) > the engine's declaration.
    pub fn resolve(
        configured: Option<KvTransferFallback>,
        engine: Option<KvTransferFallback>,
    ) -> Self {
        match configured.or(engine) {
            Some(KvTransferFallback::Wait) => KvTransferPolicy::Wait,
            Some(KvTransferFallback::Skip) => KvTransferPolicy::Skip,
            None => KvTransferPolicy::Undeclared,
        }
    }
}

/// One line of the plan returned by [`ShutdownPlanner::plan`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedStage {
    /// Which stage.
    pub stage: Stage,
    /// Whether it will do anything (false: it will be recorded as `skipped`).
    pub runs: bool,
    /// Time it may take if started at the planning instant; `None` = unbounded.
    pub allowance_ms: Option<u64>,
    /// Why it is skipped, when it is.
    pub skip_detail: Option<String>,
}

/// Severity of a [`ShutdownAction::Log`] line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Diagnostic detail.
    Debug,
    /// Lifecycle milestone.
    Info,
    /// Recovered fault.
    Warn,
    /// Something the operator must fix.
    Error,
}

/// Input to [`ShutdownPlanner::on`]. JSON: `{"type": "<snake_case name>", ...fields}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ShutdownEvent {
    /// Shutdown begins (signal, serve exit, or error): arms the budget. Repeats are ignored.
    Begin,
    /// Answer to `Unregister`; an error is logged and shutdown continues.
    Unregistered {
        /// Failure message, if it failed.
        #[serde(default)]
        error: Option<String>,
    },
    /// Answer to `Sleep`: the requested time has passed.
    Wake,
    /// Answer to `StopAdmission`.
    AdmissionStopped,
    /// Answer to `WaitInflight`: no request is running any more.
    InflightDrained,
    /// Answer to `WaitInflight`: its timeout passed with requests still running.
    InflightTimedOut {
        /// Requests still running.
        inflight: u64,
    },
    /// Answer to `CallDrain`: `drain()` returned (an error is logged and shutdown continues).
    Drained {
        /// Failure message, if it failed.
        #[serde(default)]
        error: Option<String>,
    },
    /// Answer to `PollQuiescent`: the engine's `is_quiescent()` result.
    Quiescent {
        /// `Some(true)` done, `Some(false)` still transferring, `None` cannot tell.
        #[serde(default)]
        value: Option<bool>,
        /// `is_quiescent()` raised; counts as "cannot tell".
        #[serde(default)]
        error: Option<String>,
    },
    /// Answer to `CallCleanup`: cleanup returned (an error still counts as completed).
    CleanupDone {
        /// Failure message, if it failed.
        #[serde(default)]
        error: Option<String>,
    },
    /// Answer to `CallCleanup`: its timeout passed; the call is abandoned.
    CleanupTimedOut,
    /// Time has passed; ends the current stage if its allowance ran out. Safe at any time.
    Tick,
    /// Interrupt the current wait (router grace, in-flight or KV transfer) and move on.
    Cancel,
    /// The hard-exit timer ([`total_budget`](super::total_budget)) fired.
    Deadline,
}

/// Output of [`ShutdownPlanner::on`]. JSON: `{"type": "<snake_case name>", ...fields}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ShutdownAction {
    /// Remove the instance from discovery; answer `Unregistered`.
    Unregister,
    /// Wait `ms`; answer `Wake`.
    Sleep {
        /// Duration.
        ms: u64,
    },
    /// Flip the admission bit; answer `AdmissionStopped`.
    StopAdmission,
    /// Wait for the in-flight count to reach 0; answer `InflightDrained` or
    /// `InflightTimedOut`. `timeout_ms: null` = no bound.
    WaitInflight {
        /// Bound for the wait.
        timeout_ms: Option<u64>,
    },
    /// Call the engine's `drain()` once; answer `Drained`, or `Tick` if it outlives
    /// `timeout_ms` (`null` = no bound; the call is then abandoned).
    CallDrain {
        /// Bound for the call (the stage's allowance).
        timeout_ms: Option<u64>,
    },
    /// Call `is_quiescent()` once; answer `Quiescent`, or `Tick` if it outlives
    /// `timeout_ms` (`null` = no bound). The planner schedules the next poll itself.
    PollQuiescent {
        /// Bound for this call (time left in the stage).
        timeout_ms: Option<u64>,
    },
    /// Call engine cleanup (via the engine lifecycle, so it runs at most once);
    /// answer `CleanupDone` or `CleanupTimedOut`.
    CallCleanup {
        /// Bound for the call.
        timeout_ms: u64,
    },
    /// A stage ended: log it and observe the stage-duration metric.
    RecordStage(StageOutcome),
    /// Log a line.
    Log {
        /// Severity.
        level: LogLevel,
        /// Text.
        message: String,
    },
    /// Exit the process now.
    Exit {
        /// Exit code ([`EXIT_CODE_SHUTDOWN_TIMEOUT`]).
        code: i32,
    },
    /// All stages are recorded; shutdown orchestration is over.
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum KvWait {
    Poll,
    Sleep,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct KvProgress {
    until_ms: Option<u64>,
    waiting: KvWait,
    poll_started_ms: u64,
    last_progress_log_ms: u64,
    saw_not_quiescent: bool,
    last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Idle,
    Unregistering,
    RouterGrace { until_ms: u64 },
    StoppingAdmission,
    Inflight { until_ms: Option<u64> },
    Draining { until_ms: Option<u64> },
    KvTransfer(KvProgress),
    Cleanup { until_ms: u64 },
    Done,
    Exited,
}

/// The sans-IO shutdown driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownPlanner {
    budget: ShutdownBudget,
    situation: WorkerSituation,
    kv_policy: KvTransferPolicy,
    step: Step,
    stage_started_ms: u64,
    outcomes: Vec<StageOutcome>,
}

/// `1500` → `"1.5s"`, for log lines.
fn secs(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        let s = format!("{:.3}", ms as f64 / 1000.0);
        format!("{}s", s.trim_end_matches('0'))
    }
}

fn log(level: LogLevel, message: impl Into<String>) -> ShutdownAction {
    ShutdownAction::Log {
        level,
        message: message.into(),
    }
}

impl ShutdownPlanner {
    /// A planner with a bounded budget of `settings.total_ms`.
    pub fn new(settings: &ShutdownSettings, situation: WorkerSituation) -> Self {
        Self::with_budget(ShutdownBudget::new(settings), situation, settings)
    }

    /// A planner whose stages have no deadline (reversible admin drain).
    pub fn unbounded(settings: &ShutdownSettings, situation: WorkerSituation) -> Self {
        Self::with_budget(ShutdownBudget::unbounded(settings), situation, settings)
    }

    fn with_budget(
        budget: ShutdownBudget,
        situation: WorkerSituation,
        settings: &ShutdownSettings,
    ) -> Self {
        ShutdownPlanner {
            budget,
            situation,
            kv_policy: KvTransferPolicy::resolve(
                settings.kv_transfer_fallback,
                situation.engine_kv_transfer_fallback,
            ),
            step: Step::Idle,
            stage_started_ms: 0,
            outcomes: Vec::new(),
        }
    }

    /// The budget (for its deadline, remaining time, cleanup bound).
    pub fn budget(&self) -> &ShutdownBudget {
        &self.budget
    }

    /// The hard-exit timer length; `None` when unbounded.
    pub fn total_budget(&self) -> Option<u64> {
        self.budget.total_ms()
    }

    /// The KV-transfer policy after precedence.
    pub fn kv_policy(&self) -> KvTransferPolicy {
        self.kv_policy
    }

    /// Stages recorded so far, in order.
    pub fn outcomes(&self) -> &[StageOutcome] {
        &self.outcomes
    }

    /// The stage in progress, if any.
    pub fn current_stage(&self) -> Option<Stage> {
        match self.step {
            Step::Unregistering => Some(Stage::Unregister),
            Step::RouterGrace { .. } => Some(Stage::RouterGrace),
            Step::StoppingAdmission => Some(Stage::StopAdmission),
            Step::Inflight { .. } => Some(Stage::Inflight),
            Step::Draining { .. } | Step::KvTransfer(_) => Some(Stage::KvTransfer),
            Step::Cleanup { .. } => Some(Stage::Cleanup),
            Step::Idle | Step::Done | Step::Exited => None,
        }
    }

    /// All stages recorded and `Done` emitted.
    pub fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    /// `Exit` was emitted.
    pub fn has_exited(&self) -> bool {
        self.step == Step::Exited
    }

    /// Time spent in the KV-transfer stage (`drain_time_seconds`), once recorded.
    pub fn drain_time_ms(&self) -> Option<u64> {
        self.outcomes
            .iter()
            .find(|o| o.stage == Stage::KvTransfer)
            .map(|o| o.elapsed_ms)
    }

    /// Why a stage will be skipped regardless of time, if it will.
    fn static_skip(&self, stage: Stage) -> Option<String> {
        match stage {
            Stage::StopAdmission | Stage::Inflight if !self.situation.served => {
                Some("shutdown reached before serving".into())
            }
            Stage::KvTransfer if !self.situation.drain && !self.situation.prefill => {
                Some("not a prefill worker".into())
            }
            Stage::KvTransfer
                if !self.situation.drain && self.kv_policy == KvTransferPolicy::Skip =>
            {
                Some("kv_transfer_fallback=skip".into())
            }
            _ => None,
        }
    }

    /// Why a time-bounded stage has no time, if it has none.
    fn zero_allowance_skip(&self, stage: Stage, allowance: Option<u64>) -> Option<String> {
        if allowance != Some(0) {
            return None;
        }
        Some(if self.budget.stage_cap(stage) == Some(0) {
            format!("{stage} is disabled (timeout 0)")
        } else {
            "shutdown budget exhausted".into()
        })
    }

    /// The ordered plan as it would run if started at `now_ms` (before `Begin`, the
    /// full budget is assumed). Stages that wait may of course end early.
    pub fn plan(&self, now_ms: u64) -> Vec<PlannedStage> {
        Stage::ALL
            .iter()
            .map(|&stage| {
                let allowance = match stage {
                    Stage::Cleanup => Some(self.budget.cleanup_bound(now_ms).timeout_ms),
                    Stage::RouterGrace => self.router_grace_allowance(now_ms),
                    _ => self.budget.allowance(stage, now_ms),
                };
                let skip = self.static_skip(stage).or_else(|| match stage {
                    Stage::RouterGrace | Stage::Inflight | Stage::KvTransfer => {
                        self.zero_allowance_skip(stage, allowance)
                    }
                    _ => None,
                });
                PlannedStage {
                    stage,
                    runs: skip.is_none(),
                    allowance_ms: if skip.is_some() { Some(0) } else { allowance },
                    skip_detail: skip,
                }
            })
            .collect()
    }

    /// Router grace is a sleep, so it needs a finite length even when unbounded.
    fn router_grace_allowance(&self, now_ms: u64) -> Option<u64> {
        Some(
            self.budget
                .allowance(Stage::RouterGrace, now_ms)
                .unwrap_or(self.budget.settings.router_grace_ms),
        )
    }

    /// Feed one event at `now_ms`; returns the actions to perform, in order.
    pub fn on(&mut self, now_ms: u64, event: ShutdownEvent) -> Vec<ShutdownAction> {
        let mut out = Vec::new();
        use ShutdownEvent as E;
        match (&self.step, event) {
            (Step::Done | Step::Exited, _) => {}
            (_, E::Deadline) => self.hard_exit(now_ms, &mut out),
            (Step::Idle, E::Begin) => {
                self.budget.arm(now_ms);
                out.push(log(
                    LogLevel::Info,
                    match self.budget.total_ms() {
                        Some(t) => format!("graceful shutdown started; budget {}", secs(t)),
                        None => "graceful shutdown started; no deadline".to_string(),
                    },
                ));
                self.enter(Stage::Unregister, now_ms, &mut out);
            }
            (Step::Unregistering, E::Unregistered { error }) => {
                let reason = match &error {
                    None => StageReason::Completed,
                    Some(e) => {
                        out.push(log(
                            LogLevel::Warn,
                            format!(
                                "failed to unregister from discovery: {e}; continuing shutdown"
                            ),
                        ));
                        StageReason::Skipped
                    }
                };
                self.finish(now_ms, reason, error, &mut out);
            }
            (Step::RouterGrace { .. }, E::Wake) => {
                self.finish(now_ms, StageReason::Completed, None, &mut out)
            }
            (&Step::RouterGrace { until_ms }, E::Tick) if now_ms >= until_ms => {
                self.finish(now_ms, StageReason::Completed, None, &mut out)
            }
            (Step::StoppingAdmission, E::AdmissionStopped) => {
                self.finish(now_ms, StageReason::Completed, None, &mut out)
            }
            (Step::Inflight { .. }, E::InflightDrained) => {
                self.finish(now_ms, StageReason::Completed, None, &mut out)
            }
            (Step::Inflight { .. }, E::InflightTimedOut { inflight }) => {
                self.inflight_timed_out(now_ms, Some(inflight), &mut out)
            }
            (
                &Step::Inflight {
                    until_ms: Some(until),
                },
                E::Tick,
            ) if now_ms >= until => self.inflight_timed_out(now_ms, None, &mut out),
            (&Step::Draining { until_ms }, E::Drained { error }) => {
                if let Some(e) = &error {
                    out.push(log(
                        LogLevel::Warn,
                        format!("engine drain() failed: {e}; continuing shutdown"),
                    ));
                }
                self.drained(now_ms, until_ms, error, &mut out)
            }
            (
                &Step::Draining {
                    until_ms: Some(until),
                },
                E::Tick,
            ) if now_ms >= until => {
                let waited = secs(now_ms.saturating_sub(self.stage_started_ms));
                let message =
                    format!("engine drain() did not return within {waited}; continuing shutdown");
                out.push(log(LogLevel::Warn, message.clone()));
                self.finish(now_ms, StageReason::TimedOut, Some(message), &mut out);
            }
            (Step::KvTransfer(_), ev @ (E::Quiescent { .. } | E::Wake | E::Tick)) => {
                self.kv_event(now_ms, ev, &mut out)
            }
            (
                Step::RouterGrace { .. }
                | Step::Inflight { .. }
                | Step::Draining { .. }
                | Step::KvTransfer(_),
                E::Cancel,
            ) => self.finish(
                now_ms,
                StageReason::Cancelled,
                Some("cancelled by the host".into()),
                &mut out,
            ),
            (Step::Cleanup { .. }, E::CleanupDone { error }) => {
                if let Some(e) = &error {
                    out.push(log(LogLevel::Warn, format!("engine cleanup failed: {e}")));
                }
                self.finish(now_ms, StageReason::Completed, error, &mut out);
            }
            (Step::Cleanup { .. }, E::CleanupTimedOut) => self.cleanup_timed_out(now_ms, &mut out),
            (&Step::Cleanup { until_ms }, E::Tick) if now_ms >= until_ms => {
                self.cleanup_timed_out(now_ms, &mut out)
            }
            _ => {}
        }
        out
    }

    fn hard_exit(&mut self, now_ms: u64, out: &mut Vec<ShutdownAction>) {
        if let Some(stage) = self.current_stage() {
            self.record(
                stage,
                now_ms,
                StageReason::TimedOut,
                Some("shutdown deadline reached".into()),
                out,
            );
        }
        let budget = self
            .budget
            .total_ms()
            .map(secs)
            .unwrap_or_else(|| "its budget".into());
        out.push(log(
            LogLevel::Error,
            format!(
                "graceful shutdown did not finish within {budget}; exiting with code \
                 {EXIT_CODE_SHUTDOWN_TIMEOUT}. Set {ENV_GRACEFUL_SHUTDOWN_TIMEOUT} to allow more time"
            ),
        ));
        out.push(ShutdownAction::Exit {
            code: EXIT_CODE_SHUTDOWN_TIMEOUT,
        });
        self.step = Step::Exited;
    }

    fn inflight_timed_out(
        &mut self,
        now_ms: u64,
        inflight: Option<u64>,
        out: &mut Vec<ShutdownAction>,
    ) {
        let waited = secs(now_ms.saturating_sub(self.stage_started_ms));
        let message = match inflight {
            Some(n) => {
                format!("{n} request(s) still in flight after {waited}; continuing shutdown")
            }
            None => format!("requests still in flight after {waited}; continuing shutdown"),
        };
        out.push(log(LogLevel::Warn, message.clone()));
        self.finish(now_ms, StageReason::TimedOut, Some(message), out);
    }

    fn cleanup_timed_out(&mut self, now_ms: u64, out: &mut Vec<ShutdownAction>) {
        let waited = secs(now_ms.saturating_sub(self.stage_started_ms));
        out.push(log(
            LogLevel::Error,
            format!(
                "engine cleanup did not finish within {waited}; abandoning it. \
                 Set {ENV_CLEANUP_TIMEOUT_SECS} to allow more time"
            ),
        ));
        self.finish(
            now_ms,
            StageReason::TimedOut,
            Some(format!("abandoned after {waited}")),
            out,
        );
    }

    fn kv_event(&mut self, now_ms: u64, ev: ShutdownEvent, out: &mut Vec<ShutdownAction>) {
        let Step::KvTransfer(kv) = &mut self.step else {
            return;
        };
        let timed_out = kv.until_ms.is_some_and(|u| now_ms >= u);
        match (ev, &kv.waiting) {
            (ShutdownEvent::Quiescent { value, error }, KvWait::Poll) => {
                if value == Some(true) {
                    let detail = kv.last_error.clone();
                    return self.finish(now_ms, StageReason::Completed, detail, out);
                }
                if value == Some(false) {
                    kv.saw_not_quiescent = true;
                }
                if let Some(e) = error {
                    out.push(log(LogLevel::Debug, format!("is_quiescent() failed: {e}")));
                    kv.last_error = Some(e);
                }
                if now_ms.saturating_sub(kv.last_progress_log_ms) >= KV_PROGRESS_LOG_INTERVAL_MS {
                    kv.last_progress_log_ms = now_ms;
                    let elapsed = secs(now_ms.saturating_sub(self.stage_started_ms));
                    let left = match kv.until_ms {
                        Some(u) => format!("{} left", secs(u.saturating_sub(now_ms))),
                        None => "no deadline".into(),
                    };
                    out.push(log(
                        LogLevel::Info,
                        format!("waiting for KV transfers to finish ({elapsed} elapsed, {left})"),
                    ));
                }
            }
            (ShutdownEvent::Wake, KvWait::Sleep) => {}
            (ShutdownEvent::Tick, _) if timed_out => {}
            _ => return,
        }
        if timed_out {
            return self.kv_gave_up(now_ms, out);
        }
        // Keep a fixed cadence from the start of each poll, never overshooting the deadline.
        let next_at = kv.poll_started_ms + QUIESCENCE_POLL_INTERVAL_MS;
        let next_at = kv.until_ms.map_or(next_at, |u| next_at.min(u));
        if kv.waiting == KvWait::Poll && next_at > now_ms {
            kv.waiting = KvWait::Sleep;
            out.push(ShutdownAction::Sleep {
                ms: next_at - now_ms,
            });
        } else {
            kv.waiting = KvWait::Poll;
            kv.poll_started_ms = now_ms;
            out.push(ShutdownAction::PollQuiescent {
                timeout_ms: kv.until_ms.map(|u| u - now_ms),
            });
        }
    }

    /// Whether this worker waits for KV transfers after `drain()`.
    fn waits_for_kv(&self) -> bool {
        self.situation.prefill && self.kv_policy != KvTransferPolicy::Skip
    }

    fn start_polling(
        &self,
        now_ms: u64,
        until_ms: Option<u64>,
        last_error: Option<String>,
        out: &mut Vec<ShutdownAction>,
    ) -> Step {
        out.push(ShutdownAction::PollQuiescent {
            timeout_ms: until_ms.map(|u| u.saturating_sub(now_ms)),
        });
        Step::KvTransfer(KvProgress {
            until_ms,
            waiting: KvWait::Poll,
            poll_started_ms: now_ms,
            last_progress_log_ms: now_ms,
            saw_not_quiescent: false,
            last_error,
        })
    }

    /// `drain()` returned: wait for KV transfers in what is left of the stage, or end it.
    fn drained(
        &mut self,
        now_ms: u64,
        until_ms: Option<u64>,
        error: Option<String>,
        out: &mut Vec<ShutdownAction>,
    ) {
        if !self.waits_for_kv() {
            return self.finish(now_ms, StageReason::Completed, error, out);
        }
        if until_ms.is_some_and(|u| now_ms >= u) {
            return self.finish(now_ms, StageReason::TimedOut, error, out);
        }
        self.step = self.start_polling(now_ms, until_ms, error, out);
    }

    fn kv_gave_up(&mut self, now_ms: u64, out: &mut Vec<ShutdownAction>) {
        let Step::KvTransfer(kv) = &self.step else {
            return;
        };
        let detail = kv.last_error.clone();
        if kv.saw_not_quiescent {
            return self.finish(now_ms, StageReason::TimedOut, detail, out);
        }
        if self.kv_policy == KvTransferPolicy::Undeclared {
            out.push(log(
                LogLevel::Warn,
                format!(
                    "engine never reported KV-transfer quiescence and declares no \
                     kv_transfer_fallback; waited {}. Set {ENV_KV_TRANSFER_FALLBACK}=skip or =wait \
                     to choose explicitly",
                    secs(now_ms.saturating_sub(self.stage_started_ms))
                ),
            ));
        }
        self.finish(now_ms, StageReason::Unsupported, detail, out);
    }

    /// Push the outcome of `stage` and remember it.
    fn record(
        &mut self,
        stage: Stage,
        now_ms: u64,
        reason: StageReason,
        detail: Option<String>,
        out: &mut Vec<ShutdownAction>,
    ) {
        let outcome = StageOutcome {
            stage,
            reason,
            elapsed_ms: now_ms.saturating_sub(self.stage_started_ms),
            remaining_total_ms: self.budget.remaining(now_ms),
            detail,
        };
        self.outcomes.push(outcome.clone());
        out.push(ShutdownAction::RecordStage(outcome));
    }

    /// End the current stage and start the next.
    fn finish(
        &mut self,
        now_ms: u64,
        reason: StageReason,
        detail: Option<String>,
        out: &mut Vec<ShutdownAction>,
    ) {
        let Some(stage) = self.current_stage() else {
            return;
        };
        self.record(stage, now_ms, reason, detail, out);
        match stage.next() {
            Some(next) => self.enter(next, now_ms, out),
            None => {
                self.step = Step::Done;
                out.push(ShutdownAction::Done);
            }
        }
    }

    /// Start `stage`, skipping forward through stages that finish immediately.
    fn enter(&mut self, stage: Stage, now_ms: u64, out: &mut Vec<ShutdownAction>) {
        let mut stage = stage;
        loop {
            self.stage_started_ms = now_ms;
            let skip = match self.start(stage, now_ms, out) {
                Ok(step) => {
                    self.step = step;
                    return;
                }
                Err(skip) => skip,
            };
            self.record(stage, now_ms, StageReason::Skipped, Some(skip), out);
            // Cleanup is never skipped, so there is always a next stage here.
            match stage.next() {
                Some(next) => stage = next,
                None => return,
            }
        }
    }

    /// Emit the actions that begin `stage`; `Err(detail)` when it is skipped.
    fn start(
        &mut self,
        stage: Stage,
        now_ms: u64,
        out: &mut Vec<ShutdownAction>,
    ) -> Result<Step, String> {
        if let Some(skip) = self.static_skip(stage) {
            return Err(skip);
        }
        match stage {
            Stage::Unregister => {
                out.push(ShutdownAction::Unregister);
                Ok(Step::Unregistering)
            }
            Stage::RouterGrace => {
                let ms = self.router_grace_allowance(now_ms).unwrap_or(0);
                if let Some(skip) = self.zero_allowance_skip(stage, Some(ms)) {
                    return Err(skip);
                }
                out.push(ShutdownAction::Sleep { ms });
                Ok(Step::RouterGrace {
                    until_ms: now_ms + ms,
                })
            }
            Stage::StopAdmission => {
                out.push(ShutdownAction::StopAdmission);
                Ok(Step::StoppingAdmission)
            }
            Stage::Inflight => {
                let allowance = self.budget.allowance(stage, now_ms);
                if let Some(skip) = self.zero_allowance_skip(stage, allowance) {
                    return Err(skip);
                }
                out.push(ShutdownAction::WaitInflight {
                    timeout_ms: allowance,
                });
                Ok(Step::Inflight {
                    until_ms: allowance.map(|a| now_ms + a),
                })
            }
            Stage::KvTransfer => {
                let allowance = self.budget.allowance(stage, now_ms);
                if let Some(skip) = self.zero_allowance_skip(stage, allowance) {
                    return Err(skip);
                }
                let until_ms = allowance.map(|a| now_ms + a);
                if self.situation.drain {
                    out.push(ShutdownAction::CallDrain {
                        timeout_ms: allowance,
                    });
                    return Ok(Step::Draining { until_ms });
                }
                Ok(self.start_polling(now_ms, until_ms, None, out))
            }
            Stage::Cleanup => {
                let bound = self.budget.cleanup_bound(now_ms);
                if bound.reserve_granted {
                    out.push(log(
                        LogLevel::Warn,
                        format!(
                            "shutdown budget exhausted before cleanup; granting the {} reserve",
                            secs(CLEANUP_RESERVE_MS)
                        ),
                    ));
                }
                out.push(ShutdownAction::CallCleanup {
                    timeout_ms: bound.timeout_ms,
                });
                Ok(Step::Cleanup {
                    until_ms: now_ms + bound.timeout_ms,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use ShutdownAction as A;
    use ShutdownEvent as E;

    /// grace 5s, inflight 900s, kv 30s, cleanup 30s, total 35s.
    fn settings() -> ShutdownSettings {
        ShutdownSettings::default()
    }

    fn served() -> WorkerSituation {
        WorkerSituation {
            served: true,
            ..Default::default()
        }
    }

    fn prefill(engine: Option<KvTransferFallback>) -> WorkerSituation {
        WorkerSituation {
            served: true,
            prefill: true,
            engine_kv_transfer_fallback: engine,
            drain: false,
        }
    }

    /// Stage outcomes among `actions`, as (stage, reason).
    fn records(actions: &[ShutdownAction]) -> Vec<(Stage, StageReason)> {
        actions
            .iter()
            .filter_map(|a| match a {
                A::RecordStage(o) => Some((o.stage, o.reason)),
                _ => None,
            })
            .collect()
    }

    /// Actions other than logs and records: what the host must actually do.
    fn work(actions: &[ShutdownAction]) -> Vec<ShutdownAction> {
        actions
            .iter()
            .filter(|a| !matches!(a, A::RecordStage(_) | A::Log { .. }))
            .cloned()
            .collect()
    }

    fn logs(actions: &[ShutdownAction], level: LogLevel) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                A::Log { level: l, message } if *l == level => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    fn outcome(actions: &[ShutdownAction], stage: Stage) -> StageOutcome {
        actions
            .iter()
            .find_map(|a| match a {
                A::RecordStage(o) if o.stage == stage => Some(o.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no outcome for {stage} in {actions:?}"))
    }

    /// Begin at t=0 and get through unregister, router grace and stop admission.
    fn to_inflight(p: &mut ShutdownPlanner) {
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        p.on(5_000, E::Wake);
        let a = p.on(5_000, E::AdmissionStopped);
        assert!(matches!(work(&a)[..], [A::WaitInflight { .. }]), "{a:?}");
    }

    /// A prefill planner sitting in the KV stage, entered at t=5s with 30s allowance.
    fn in_kv(policy: Option<KvTransferFallback>) -> ShutdownPlanner {
        let mut p = ShutdownPlanner::new(&settings(), prefill(policy));
        to_inflight(&mut p);
        let a = p.on(5_000, E::InflightDrained);
        assert_eq!(
            work(&a),
            vec![A::PollQuiescent {
                timeout_ms: Some(30_000)
            }]
        );
        p
    }

    #[test]
    fn happy_path_runs_every_stage_in_order() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        let a = p.on(0, E::Begin);
        assert_eq!(work(&a), vec![A::Unregister]);
        assert_eq!(
            logs(&a, LogLevel::Info),
            vec!["graceful shutdown started; budget 35s"]
        );
        assert_eq!(p.current_stage(), Some(Stage::Unregister));

        let a = p.on(10, E::Unregistered { error: None });
        assert_eq!(
            records(&a),
            vec![(Stage::Unregister, StageReason::Completed)]
        );
        assert_eq!(work(&a), vec![A::Sleep { ms: 5_000 }]);

        let a = p.on(5_010, E::Wake);
        let o = outcome(&a, Stage::RouterGrace);
        assert_eq!(
            (o.reason, o.elapsed_ms, o.remaining_total_ms),
            (StageReason::Completed, 5_000, Some(29_990))
        );
        assert_eq!(work(&a), vec![A::StopAdmission]);

        let a = p.on(5_010, E::AdmissionStopped);
        assert_eq!(
            records(&a),
            vec![(Stage::StopAdmission, StageReason::Completed)]
        );
        // min(900s inflight cap, 29.99s remaining)
        assert_eq!(
            work(&a),
            vec![A::WaitInflight {
                timeout_ms: Some(29_990)
            }]
        );

        let a = p.on(8_000, E::InflightDrained);
        assert_eq!(
            records(&a),
            vec![
                (Stage::Inflight, StageReason::Completed),
                (Stage::KvTransfer, StageReason::Skipped)
            ]
        );
        assert_eq!(
            outcome(&a, Stage::KvTransfer).detail.as_deref(),
            Some("not a prefill worker")
        );
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 27_000 }]);

        let a = p.on(9_000, E::CleanupDone { error: None });
        assert_eq!(records(&a), vec![(Stage::Cleanup, StageReason::Completed)]);
        assert_eq!(work(&a), vec![A::Done]);
        assert!(p.is_done());
        let order: Vec<_> = p.outcomes().iter().map(|o| o.stage).collect();
        assert_eq!(order, Stage::ALL);
    }

    #[test]
    fn not_served_skips_admission_and_inflight() {
        let mut p = ShutdownPlanner::new(&settings(), WorkerSituation::default());
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        let a = p.on(5_000, E::Wake);
        assert_eq!(
            records(&a),
            vec![
                (Stage::RouterGrace, StageReason::Completed),
                (Stage::StopAdmission, StageReason::Skipped),
                (Stage::Inflight, StageReason::Skipped),
                (Stage::KvTransfer, StageReason::Skipped),
            ]
        );
        assert_eq!(
            outcome(&a, Stage::Inflight).detail.as_deref(),
            Some("shutdown reached before serving")
        );
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 30_000 }]);
    }

    #[test]
    fn unregister_failure_warns_and_continues() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        p.on(0, E::Begin);
        let a = p.on(
            0,
            E::Unregistered {
                error: Some("etcd down".into()),
            },
        );
        let o = outcome(&a, Stage::Unregister);
        assert_eq!(o.reason, StageReason::Skipped);
        assert_eq!(o.detail.as_deref(), Some("etcd down"));
        assert!(logs(&a, LogLevel::Warn)[0].contains("etcd down"));
        assert_eq!(work(&a), vec![A::Sleep { ms: 5_000 }]);
    }

    #[test]
    fn zero_grace_skips_router_grace() {
        let s = ShutdownSettings {
            router_grace_ms: 0,
            ..settings()
        };
        let mut p = ShutdownPlanner::new(&s, served());
        p.on(0, E::Begin);
        let a = p.on(0, E::Unregistered { error: None });
        let o = outcome(&a, Stage::RouterGrace);
        assert_eq!(o.reason, StageReason::Skipped);
        assert!(o.detail.unwrap().contains("disabled"));
        assert_eq!(work(&a), vec![A::StopAdmission]);
    }

    #[test]
    fn router_grace_is_capped_by_remaining_budget() {
        let s = ShutdownSettings {
            total_ms: 3_000,
            ..settings()
        };
        let mut p = ShutdownPlanner::new(&s, served());
        p.on(0, E::Begin);
        let a = p.on(1_000, E::Unregistered { error: None });
        assert_eq!(work(&a), vec![A::Sleep { ms: 2_000 }]);
    }

    #[test]
    fn router_grace_skipped_when_unregister_ate_the_budget() {
        let s = ShutdownSettings {
            total_ms: 3_000,
            ..settings()
        };
        let mut p = ShutdownPlanner::new(&s, served());
        p.on(0, E::Begin);
        let a = p.on(4_000, E::Unregistered { error: None });
        let o = outcome(&a, Stage::RouterGrace);
        assert_eq!(o.reason, StageReason::Skipped);
        assert_eq!(o.detail.as_deref(), Some("shutdown budget exhausted"));
        assert_eq!(o.remaining_total_ms, Some(0));
        // Admission still stops (unbounded stage); inflight gets no time and is skipped.
        assert_eq!(work(&a), vec![A::StopAdmission]);
        let a = p.on(4_000, E::AdmissionStopped);
        assert_eq!(outcome(&a, Stage::Inflight).reason, StageReason::Skipped);
        assert!(logs(&a, LogLevel::Warn).contains(
            &"shutdown budget exhausted before cleanup; granting the 5s reserve".to_string()
        ));
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 5_000 }]);
    }

    #[test]
    fn router_grace_ends_on_tick_after_its_end_only() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        assert!(p.on(4_999, E::Tick).is_empty());
        let a = p.on(5_000, E::Tick);
        assert_eq!(
            records(&a),
            vec![(Stage::RouterGrace, StageReason::Completed)]
        );
        // The host's sleep timer firing late is ignored.
        assert!(p.on(5_001, E::Wake).is_empty());
    }

    #[test]
    fn cancel_interrupts_router_grace() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        let a = p.on(1_000, E::Cancel);
        let o = outcome(&a, Stage::RouterGrace);
        assert_eq!((o.reason, o.elapsed_ms), (StageReason::Cancelled, 1_000));
        assert_eq!(work(&a), vec![A::StopAdmission]);
    }

    #[test]
    fn cancel_is_ignored_outside_waiting_stages() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        assert!(p.on(0, E::Cancel).is_empty());
        p.on(0, E::Begin);
        assert!(
            p.on(0, E::Cancel).is_empty(),
            "unregister is not cancellable"
        );
        p.on(0, E::Unregistered { error: None });
        p.on(5_000, E::Wake);
        assert!(
            p.on(5_000, E::Cancel).is_empty(),
            "stop_admission is not cancellable"
        );
        p.on(5_000, E::AdmissionStopped);
        p.on(5_000, E::InflightDrained);
        assert!(
            p.on(5_000, E::Cancel).is_empty(),
            "cleanup is owed, never cancelled"
        );
        assert_eq!(p.current_stage(), Some(Stage::Cleanup));
    }

    #[test]
    fn cancel_interrupts_inflight() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        to_inflight(&mut p);
        let a = p.on(6_000, E::Cancel);
        assert_eq!(outcome(&a, Stage::Inflight).reason, StageReason::Cancelled);
    }

    #[test]
    fn inflight_timeout_reports_count() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        to_inflight(&mut p);
        let a = p.on(35_000, E::InflightTimedOut { inflight: 3 });
        let o = outcome(&a, Stage::Inflight);
        assert_eq!(o.reason, StageReason::TimedOut);
        assert_eq!(o.remaining_total_ms, Some(0));
        let warn = &logs(&a, LogLevel::Warn)[0];
        assert!(
            warn.contains("3 request(s) still in flight after 30s"),
            "{warn}"
        );
        // Budget spent: cleanup gets the reserve.
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 5_000 }]);
    }

    #[test]
    fn inflight_times_out_on_tick_past_its_allowance() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        to_inflight(&mut p);
        assert!(p.on(34_999, E::Tick).is_empty());
        let a = p.on(35_000, E::Tick);
        assert_eq!(outcome(&a, Stage::Inflight).reason, StageReason::TimedOut);
    }

    #[test]
    fn inflight_cap_below_budget() {
        let s = ShutdownSettings {
            inflight_timeout_ms: 2_000,
            ..settings()
        };
        let mut p = ShutdownPlanner::new(&s, served());
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        p.on(5_000, E::Wake);
        let a = p.on(5_000, E::AdmissionStopped);
        assert_eq!(
            work(&a),
            vec![A::WaitInflight {
                timeout_ms: Some(2_000)
            }]
        );
    }

    #[test]
    fn zero_inflight_timeout_skips_the_stage() {
        let s = ShutdownSettings {
            inflight_timeout_ms: 0,
            ..settings()
        };
        let mut p = ShutdownPlanner::new(&s, served());
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        p.on(5_000, E::Wake);
        let a = p.on(5_000, E::AdmissionStopped);
        let o = outcome(&a, Stage::Inflight);
        assert_eq!(o.reason, StageReason::Skipped);
        assert_eq!(
            o.detail.as_deref(),
            Some("inflight is disabled (timeout 0)")
        );
    }

    #[test]
    fn kv_completes_when_engine_reports_quiescent() {
        let mut p = in_kv(Some(KvTransferFallback::Wait));
        let a = p.on(
            5_100,
            E::Quiescent {
                value: Some(true),
                error: None,
            },
        );
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!((o.reason, o.elapsed_ms), (StageReason::Completed, 100));
        assert_eq!(p.drain_time_ms(), Some(100));
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 29_900 }]);
    }

    #[test]
    fn kv_polls_every_250ms() {
        let mut p = in_kv(None);
        let a = p.on(
            5_010,
            E::Quiescent {
                value: Some(false),
                error: None,
            },
        );
        assert_eq!(a, vec![A::Sleep { ms: 240 }]);
        let a = p.on(5_250, E::Wake);
        assert_eq!(
            a,
            vec![A::PollQuiescent {
                timeout_ms: Some(29_750)
            }]
        );
        // A slow poll (longer than the interval) is followed by an immediate one.
        let a = p.on(
            5_600,
            E::Quiescent {
                value: None,
                error: None,
            },
        );
        assert_eq!(
            a,
            vec![A::PollQuiescent {
                timeout_ms: Some(29_400)
            }]
        );
        // Stale events are ignored: a wake while polling, a result while sleeping.
        assert!(p.on(5_610, E::Wake).is_empty());
        p.on(
            5_620,
            E::Quiescent {
                value: Some(false),
                error: None,
            },
        );
        assert!(p
            .on(
                5_630,
                E::Quiescent {
                    value: Some(true),
                    error: None
                }
            )
            .is_empty());
        assert_eq!(p.current_stage(), Some(Stage::KvTransfer));
    }

    /// Poll `value` every 250ms from t=5s until the planner leaves the KV stage.
    fn poll_until_done(
        p: &mut ShutdownPlanner,
        value: Option<bool>,
        error: Option<&str>,
    ) -> Vec<ShutdownAction> {
        let mut now = 5_000;
        let mut all = Vec::new();
        for _ in 0..1_000 {
            let a = p.on(
                now,
                E::Quiescent {
                    value,
                    error: error.map(String::from),
                },
            );
            all.extend(a.clone());
            if p.current_stage() != Some(Stage::KvTransfer) {
                return all;
            }
            if let [A::Sleep { ms }] = work(&a)[..] {
                now += ms;
                let a = p.on(now, E::Wake);
                all.extend(a.clone());
                if p.current_stage() != Some(Stage::KvTransfer) {
                    return all;
                }
            }
        }
        panic!("KV stage never ended");
    }

    #[test]
    fn kv_times_out_when_engine_keeps_saying_no() {
        let mut p = in_kv(None);
        let a = poll_until_done(&mut p, Some(false), None);
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!((o.reason, o.elapsed_ms), (StageReason::TimedOut, 30_000));
        // Progress lines every 5s: at 5, 10, 15, 20, 25s elapsed.
        let progress = logs(&a, LogLevel::Info);
        assert_eq!(progress.len(), 5, "{progress:?}");
        assert_eq!(
            progress[0],
            "waiting for KV transfers to finish (5s elapsed, 25s left)"
        );
        // The final sleep never overshoots the deadline.
        assert!(a.iter().all(|x| !matches!(x, A::Sleep { ms } if *ms > 250)));
        assert!(!logs(&a, LogLevel::Warn)
            .iter()
            .any(|w| w.contains("never reported")));
    }

    #[test]
    fn kv_unsupported_when_engine_never_reports_and_warns_if_undeclared() {
        let mut p = in_kv(None);
        assert_eq!(p.kv_policy(), KvTransferPolicy::Undeclared);
        let a = poll_until_done(&mut p, None, None);
        assert_eq!(
            outcome(&a, Stage::KvTransfer).reason,
            StageReason::Unsupported
        );
        let warns = logs(&a, LogLevel::Warn);
        assert!(
            warns.iter().any(|w| w.contains("never reported")
                && w.contains("DYN_WORKER_SHUTDOWN_KV_TRANSFER_FALLBACK")),
            "{warns:?}"
        );
    }

    #[test]
    fn kv_unsupported_without_extra_warning_when_policy_is_wait() {
        let mut p = in_kv(Some(KvTransferFallback::Wait));
        let a = poll_until_done(&mut p, None, None);
        assert_eq!(
            outcome(&a, Stage::KvTransfer).reason,
            StageReason::Unsupported
        );
        assert!(!logs(&a, LogLevel::Warn)
            .iter()
            .any(|w| w.contains("never reported")));
    }

    #[test]
    fn kv_false_then_unknown_is_still_timed_out() {
        let mut p = in_kv(None);
        p.on(
            5_000,
            E::Quiescent {
                value: Some(false),
                error: None,
            },
        );
        p.on(5_250, E::Wake);
        let a = poll_until_done(&mut p, None, None);
        assert_eq!(outcome(&a, Stage::KvTransfer).reason, StageReason::TimedOut);
    }

    #[test]
    fn kv_errors_are_debug_logged_and_kept_as_detail() {
        let mut p = in_kv(None);
        let a = poll_until_done(&mut p, None, Some("rpc failed"));
        assert_eq!(
            logs(&a, LogLevel::Debug)[0],
            "is_quiescent() failed: rpc failed"
        );
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!(o.reason, StageReason::Unsupported);
        assert_eq!(o.detail.as_deref(), Some("rpc failed"));
    }

    #[test]
    fn kv_times_out_on_tick_even_if_a_poll_hangs() {
        let mut p = in_kv(None);
        assert!(p.on(20_000, E::Tick).is_empty());
        let a = p.on(35_000, E::Tick);
        assert_eq!(
            outcome(&a, Stage::KvTransfer).reason,
            StageReason::Unsupported
        );
        assert!(matches!(work(&a)[..], [A::CallCleanup { .. }]));
    }

    #[test]
    fn kv_cancel() {
        let mut p = in_kv(None);
        let a = p.on(6_000, E::Cancel);
        assert_eq!(
            outcome(&a, Stage::KvTransfer).reason,
            StageReason::Cancelled
        );
    }

    #[test]
    fn kv_policy_precedence() {
        use KvTransferFallback::{Skip, Wait};
        assert_eq!(
            KvTransferPolicy::resolve(Some(Skip), Some(Wait)),
            KvTransferPolicy::Skip
        );
        assert_eq!(
            KvTransferPolicy::resolve(Some(Wait), Some(Skip)),
            KvTransferPolicy::Wait
        );
        assert_eq!(
            KvTransferPolicy::resolve(None, Some(Skip)),
            KvTransferPolicy::Skip
        );
        assert_eq!(
            KvTransferPolicy::resolve(None, Some(Wait)),
            KvTransferPolicy::Wait
        );
        assert_eq!(
            KvTransferPolicy::resolve(None, None),
            KvTransferPolicy::Undeclared
        );
    }

    #[test]
    fn kv_skip_policy_from_engine_skips_the_stage() {
        let mut p = ShutdownPlanner::new(&settings(), prefill(Some(KvTransferFallback::Skip)));
        to_inflight(&mut p);
        let a = p.on(5_000, E::InflightDrained);
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!(o.reason, StageReason::Skipped);
        assert_eq!(o.detail.as_deref(), Some("kv_transfer_fallback=skip"));
    }

    #[test]
    fn kv_configured_wait_beats_engine_skip() {
        let s = ShutdownSettings {
            kv_transfer_fallback: Some(KvTransferFallback::Wait),
            ..settings()
        };
        let mut p = ShutdownPlanner::new(&s, prefill(Some(KvTransferFallback::Skip)));
        assert_eq!(p.kv_policy(), KvTransferPolicy::Wait);
        to_inflight(&mut p);
        let a = p.on(5_000, E::InflightDrained);
        assert!(matches!(work(&a)[..], [A::PollQuiescent { .. }]));
    }

    #[test]
    fn kv_zero_drain_timeout_skips() {
        let s = ShutdownSettings {
            kv_transfer_timeout_ms: 0,
            ..settings()
        };
        let mut p = ShutdownPlanner::new(&s, prefill(None));
        to_inflight(&mut p);
        let a = p.on(5_000, E::InflightDrained);
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!(o.reason, StageReason::Skipped);
        assert_eq!(
            o.detail.as_deref(),
            Some("kv_transfer is disabled (timeout 0)")
        );
    }

    #[test]
    fn kv_runs_on_a_prefill_worker_that_never_served() {
        let mut p = ShutdownPlanner::new(
            &settings(),
            WorkerSituation {
                served: false,
                prefill: true,
                engine_kv_transfer_fallback: None,
                drain: false,
            },
        );
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        let a = p.on(5_000, E::Wake);
        assert_eq!(
            work(&a),
            vec![A::PollQuiescent {
                timeout_ms: Some(30_000)
            }]
        );
    }

    #[test]
    fn cleanup_error_counts_as_completed() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        to_inflight(&mut p);
        p.on(5_000, E::InflightDrained);
        let a = p.on(
            6_000,
            E::CleanupDone {
                error: Some("nccl".into()),
            },
        );
        let o = outcome(&a, Stage::Cleanup);
        assert_eq!(
            (o.reason, o.detail.as_deref()),
            (StageReason::Completed, Some("nccl"))
        );
        assert_eq!(
            logs(&a, LogLevel::Warn),
            vec!["engine cleanup failed: nccl"]
        );
        assert_eq!(a.last(), Some(&A::Done));
    }

    #[test]
    fn cleanup_timeout_is_logged_as_error_naming_the_variable() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        to_inflight(&mut p);
        let a = p.on(5_000, E::InflightDrained);
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 30_000 }]);
        let a = p.on(35_000, E::CleanupTimedOut);
        assert_eq!(outcome(&a, Stage::Cleanup).reason, StageReason::TimedOut);
        let err = &logs(&a, LogLevel::Error)[0];
        assert!(
            err.contains(ENV_CLEANUP_TIMEOUT_SECS) && err.contains("30s"),
            "{err}"
        );
        assert_eq!(a.last(), Some(&A::Done));
    }

    #[test]
    fn cleanup_times_out_on_tick() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        to_inflight(&mut p);
        p.on(5_000, E::InflightDrained);
        assert!(p.on(34_999, E::Tick).is_empty());
        let a = p.on(35_000, E::Tick);
        assert_eq!(outcome(&a, Stage::Cleanup).reason, StageReason::TimedOut);
        assert!(p.is_done());
    }

    #[test]
    fn deadline_records_current_stage_and_exits_911() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        to_inflight(&mut p);
        let a = p.on(35_000, E::Deadline);
        let o = outcome(&a, Stage::Inflight);
        assert_eq!(o.reason, StageReason::TimedOut);
        assert_eq!(o.detail.as_deref(), Some("shutdown deadline reached"));
        let err = &logs(&a, LogLevel::Error)[0];
        assert!(
            err.contains("DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT") && err.contains("35s"),
            "{err}"
        );
        assert_eq!(a.last(), Some(&A::Exit { code: 911 }));
        assert!(p.has_exited());
        assert!(p.on(35_001, E::InflightDrained).is_empty());
        assert!(p.on(35_001, E::Deadline).is_empty());
    }

    #[test]
    fn deadline_before_begin_still_exits() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        let a = p.on(0, E::Deadline);
        assert!(records(&a).is_empty());
        assert_eq!(
            work(&a),
            vec![A::Exit {
                code: EXIT_CODE_SHUTDOWN_TIMEOUT
            }]
        );
    }

    #[test]
    fn deadline_after_done_is_ignored() {
        let mut p = ShutdownPlanner::new(&settings(), WorkerSituation::default());
        p.on(0, E::Begin);
        p.on(0, E::Unregistered { error: None });
        p.on(5_000, E::Wake);
        p.on(5_000, E::CleanupDone { error: None });
        assert!(p.is_done());
        assert!(p.on(35_000, E::Deadline).is_empty());
    }

    #[test]
    fn begin_twice_does_not_rearm_or_restart() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        p.on(1_000, E::Begin);
        assert!(p.on(9_000, E::Begin).is_empty());
        assert_eq!(p.budget().deadline_ms(), Some(36_000));
        assert_eq!(p.current_stage(), Some(Stage::Unregister));
    }

    #[test]
    fn events_before_begin_and_mismatched_events_are_ignored() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        for ev in [
            E::Wake,
            E::Tick,
            E::InflightDrained,
            E::CleanupDone { error: None },
        ] {
            assert!(p.on(0, ev).is_empty());
        }
        assert!(!p.budget().is_armed());
        p.on(0, E::Begin);
        assert!(p.on(0, E::Wake).is_empty());
        assert!(p.on(0, E::AdmissionStopped).is_empty());
        assert_eq!(p.current_stage(), Some(Stage::Unregister));
    }

    #[test]
    fn unbounded_planner_waits_without_deadlines() {
        let mut p = ShutdownPlanner::unbounded(&settings(), prefill(None));
        assert_eq!(p.total_budget(), None);
        let a = p.on(0, E::Begin);
        assert_eq!(
            logs(&a, LogLevel::Info),
            vec!["graceful shutdown started; no deadline"]
        );
        let a = p.on(0, E::Unregistered { error: None });
        assert_eq!(work(&a), vec![A::Sleep { ms: 5_000 }]);
        p.on(5_000, E::Wake);
        let a = p.on(5_000, E::AdmissionStopped);
        assert_eq!(work(&a), vec![A::WaitInflight { timeout_ms: None }]);
        assert!(p.on(10_000_000, E::Tick).is_empty());
        let a = p.on(10_000_000, E::InflightDrained);
        assert_eq!(work(&a), vec![A::PollQuiescent { timeout_ms: None }]);
        let a = p.on(
            10_000_000,
            E::Quiescent {
                value: None,
                error: None,
            },
        );
        assert_eq!(work(&a), vec![A::Sleep { ms: 250 }]);
        assert!(p.on(99_000_000, E::Tick).is_empty());
        let a = p.on(99_000_000, E::Cancel);
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!(o.remaining_total_ms, None);
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 30_000 }]);
    }

    #[test]
    fn plan_lists_stages_with_allowances() {
        let p = ShutdownPlanner::new(&settings(), prefill(None));
        let plan = p.plan(0);
        let got: Vec<_> = plan
            .iter()
            .map(|s| (s.stage, s.runs, s.allowance_ms))
            .collect();
        assert_eq!(
            got,
            vec![
                (Stage::Unregister, true, Some(35_000)),
                (Stage::RouterGrace, true, Some(5_000)),
                (Stage::StopAdmission, true, Some(35_000)),
                (Stage::Inflight, true, Some(35_000)),
                (Stage::KvTransfer, true, Some(30_000)),
                (Stage::Cleanup, true, Some(30_000)),
            ]
        );
    }

    #[test]
    fn plan_marks_skipped_stages() {
        let s = ShutdownSettings {
            router_grace_ms: 0,
            ..settings()
        };
        let p = ShutdownPlanner::new(&s, WorkerSituation::default());
        let skipped: Vec<_> = p
            .plan(0)
            .into_iter()
            .filter(|s| !s.runs)
            .map(|s| (s.stage, s.skip_detail.unwrap()))
            .collect();
        assert_eq!(
            skipped,
            vec![
                (
                    Stage::RouterGrace,
                    "router_grace is disabled (timeout 0)".to_string()
                ),
                (
                    Stage::StopAdmission,
                    "shutdown reached before serving".to_string()
                ),
                (
                    Stage::Inflight,
                    "shutdown reached before serving".to_string()
                ),
                (Stage::KvTransfer, "not a prefill worker".to_string()),
            ]
        );
    }

    #[test]
    fn plan_reflects_time_already_spent() {
        let mut p = ShutdownPlanner::new(&settings(), served());
        p.on(0, E::Begin);
        let plan = p.plan(33_000);
        assert_eq!(plan[1].allowance_ms, Some(2_000));
        assert_eq!(plan[5].allowance_ms, Some(2_000));
        let plan = p.plan(40_000);
        assert!(!plan[1].runs);
        assert_eq!(plan[5].allowance_ms, Some(CLEANUP_RESERVE_MS));
    }

    #[test]
    fn actions_serialize_as_tagged_json() {
        let cases = [
            (A::Unregister, json!({"type": "unregister"})),
            (A::Sleep { ms: 250 }, json!({"type": "sleep", "ms": 250})),
            (A::StopAdmission, json!({"type": "stop_admission"})),
            (
                A::WaitInflight {
                    timeout_ms: Some(30_000),
                },
                json!({"type": "wait_inflight", "timeout_ms": 30000}),
            ),
            (
                A::WaitInflight { timeout_ms: None },
                json!({"type": "wait_inflight", "timeout_ms": null}),
            ),
            (
                A::PollQuiescent {
                    timeout_ms: Some(1),
                },
                json!({"type": "poll_quiescent", "timeout_ms": 1}),
            ),
            (
                A::CallCleanup { timeout_ms: 5_000 },
                json!({"type": "call_cleanup", "timeout_ms": 5000}),
            ),
            (
                A::Log {
                    level: LogLevel::Warn,
                    message: "m".into(),
                },
                json!({"type": "log", "level": "warn", "message": "m"}),
            ),
            (A::Exit { code: 911 }, json!({"type": "exit", "code": 911})),
            (A::Done, json!({"type": "done"})),
            (
                A::RecordStage(StageOutcome {
                    stage: Stage::Cleanup,
                    reason: StageReason::Completed,
                    elapsed_ms: 5,
                    remaining_total_ms: Some(7),
                    detail: None,
                }),
                json!({"type": "record_stage", "stage": "cleanup", "reason": "completed",
                       "elapsed_ms": 5, "remaining_total_ms": 7, "detail": null}),
            ),
        ];
        for (action, expected) in cases {
            assert_eq!(serde_json::to_value(&action).unwrap(), expected);
        }
    }

    #[test]
    fn events_deserialize_from_tagged_json() {
        let cases = [
            (json!({"type": "begin"}), E::Begin),
            (
                json!({"type": "unregistered"}),
                E::Unregistered { error: None },
            ),
            (
                json!({"type": "unregistered", "error": "x"}),
                E::Unregistered {
                    error: Some("x".into()),
                },
            ),
            (json!({"type": "wake"}), E::Wake),
            (json!({"type": "admission_stopped"}), E::AdmissionStopped),
            (json!({"type": "inflight_drained"}), E::InflightDrained),
            (
                json!({"type": "inflight_timed_out", "inflight": 2}),
                E::InflightTimedOut { inflight: 2 },
            ),
            (
                json!({"type": "quiescent", "value": true}),
                E::Quiescent {
                    value: Some(true),
                    error: None,
                },
            ),
            (
                json!({"type": "quiescent", "value": null, "error": "e"}),
                E::Quiescent {
                    value: None,
                    error: Some("e".into()),
                },
            ),
            (
                json!({"type": "quiescent"}),
                E::Quiescent {
                    value: None,
                    error: None,
                },
            ),
            (
                json!({"type": "cleanup_done"}),
                E::CleanupDone { error: None },
            ),
            (json!({"type": "cleanup_timed_out"}), E::CleanupTimedOut),
            (json!({"type": "tick"}), E::Tick),
            (json!({"type": "cancel"}), E::Cancel),
            (json!({"type": "deadline"}), E::Deadline),
        ];
        for (value, expected) in cases {
            let got: ShutdownEvent = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(got, expected, "{value}");
            assert_eq!(serde_json::to_value(&got).unwrap()["type"], value["type"]);
        }
        assert!(serde_json::from_value::<ShutdownEvent>(json!({"type": "explode"})).is_err());
    }

    #[test]
    fn situation_deserializes_with_defaults() {
        let s: WorkerSituation =
            serde_json::from_value(json!({"prefill": true, "engine_kv_transfer_fallback": "skip"}))
                .unwrap();
        assert_eq!(
            s,
            WorkerSituation {
                served: false,
                prefill: true,
                engine_kv_transfer_fallback: Some(KvTransferFallback::Skip),
                drain: false,
            }
        );
    }

    #[test]
    fn seconds_formatting() {
        assert_eq!(secs(5_000), "5s");
        assert_eq!(secs(1_500), "1.5s");
        assert_eq!(secs(1), "0.001s");
        assert_eq!(secs(0), "0s");
    }

    fn draining(prefill: bool, policy: Option<KvTransferFallback>) -> ShutdownPlanner {
        let mut p = ShutdownPlanner::new(
            &settings(),
            WorkerSituation {
                served: true,
                prefill,
                engine_kv_transfer_fallback: policy,
                drain: true,
            },
        );
        to_inflight(&mut p);
        let a = p.on(5_000, E::InflightDrained);
        assert_eq!(
            work(&a),
            vec![A::CallDrain {
                timeout_ms: Some(30_000)
            }]
        );
        assert_eq!(p.current_stage(), Some(Stage::KvTransfer));
        p
    }

    #[test]
    fn drain_runs_on_a_decode_worker_then_cleanup() {
        let mut p = draining(false, None);
        let a = p.on(5_400, E::Drained { error: None });
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!((o.reason, o.elapsed_ms), (StageReason::Completed, 400));
        assert_eq!(p.drain_time_ms(), Some(400));
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 29_600 }]);
    }

    #[test]
    fn drain_error_warns_and_continues() {
        let mut p = draining(false, None);
        let a = p.on(
            5_000,
            E::Drained {
                error: Some("boom".into()),
            },
        );
        assert_eq!(
            logs(&a, LogLevel::Warn),
            vec!["engine drain() failed: boom; continuing shutdown"]
        );
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!(
            (o.reason, o.detail.as_deref()),
            (StageReason::Completed, Some("boom"))
        );
        assert!(matches!(work(&a)[..], [A::CallCleanup { .. }]));
    }

    #[test]
    fn drain_that_hangs_times_out_on_tick() {
        let mut p = draining(false, None);
        assert!(p.on(34_999, E::Tick).is_empty());
        let a = p.on(35_000, E::Tick);
        assert_eq!(
            records(&a),
            vec![(Stage::KvTransfer, StageReason::TimedOut)]
        );
        assert!(logs(&a, LogLevel::Warn)[0].contains("drain() did not return within 30s"));
        // The budget is spent: cleanup gets the reserve.
        assert_eq!(work(&a), vec![A::CallCleanup { timeout_ms: 5_000 }]);
        // A late answer is ignored.
        assert!(p.on(36_000, E::Drained { error: None }).is_empty());
    }

    #[test]
    fn drain_then_quiescence_on_a_prefill_worker() {
        let mut p = draining(true, Some(KvTransferFallback::Wait));
        let a = p.on(6_000, E::Drained { error: None });
        assert_eq!(
            work(&a),
            vec![A::PollQuiescent {
                timeout_ms: Some(29_000)
            }]
        );
        let a = p.on(
            6_100,
            E::Quiescent {
                value: Some(true),
                error: None,
            },
        );
        let o = outcome(&a, Stage::KvTransfer);
        assert_eq!((o.reason, o.elapsed_ms), (StageReason::Completed, 1_100));
    }

    #[test]
    fn drain_runs_even_when_kv_waiting_is_skipped() {
        let mut p = draining(true, Some(KvTransferFallback::Skip));
        let a = p.on(5_000, E::Drained { error: None });
        assert_eq!(
            records(&a),
            vec![(Stage::KvTransfer, StageReason::Completed)]
        );
        assert!(matches!(work(&a)[..], [A::CallCleanup { .. }]));
    }

    #[test]
    fn drain_can_be_cancelled() {
        let mut p = draining(false, None);
        let a = p.on(5_000, E::Cancel);
        assert_eq!(
            records(&a),
            vec![(Stage::KvTransfer, StageReason::Cancelled)]
        );
    }

    #[test]
    fn drain_json_names() {
        assert_eq!(
            serde_json::to_value(A::CallDrain {
                timeout_ms: Some(5)
            })
            .unwrap(),
            json!({"type": "call_drain", "timeout_ms": 5})
        );
        let e: ShutdownEvent = serde_json::from_value(json!({"type": "drained"})).unwrap();
        assert_eq!(e, E::Drained { error: None });
    }
}
