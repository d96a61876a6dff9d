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
    /// The hard-exit timer ([`total_budget`]) fired.
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
    if ms % 1000 == 0 {
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
            Step::KvTransfer(_) => Some(Stage::KvTransfer),
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
            Stage::KvTransfer if !self.situation.prefill => Some("not a prefill worker".into()),
            Stage::KvTransfer if self.kv_policy == KvTransferPolicy::Skip => {
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
                            format!("failed to unregister from discovery: {e}; continuing shutdown"),
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
            (&Step::Inflight { until_ms: Some(until) }, E::Tick) if now_ms >= until => {
                self.inflight_timed_out(now_ms, None, &mut out)
            }
            (Step::KvTransfer(_), ev @ (E::Quiescent { .. } | E::Wake | E::Tick)) => {
                self.kv_event(now_ms, ev, &mut out)
            }
            (Step::RouterGrace { .. } | Step::Inflight { .. } | Step::KvTransfer(_), E::Cancel) => {
                self.finish(
                    now_ms,
                    StageReason::Cancelled,
                    Some("cancelled by the host".into()),
                    &mut out,
                )
            }
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

    fn inflight_timed_out(&mut self, now_ms: u64, inflight: Option<u64>, out: &mut Vec<ShutdownAction>) {
        let waited = secs(now_ms.saturating_sub(self.stage_started_ms));
        let message = match inflight {
            Some(n) => format!("{n} request(s) still in flight after {waited}; continuing shutdown"),
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
                out.push(ShutdownAction::PollQuiescent {
                    timeout_ms: allowance,
                });
                Ok(Step::KvTransfer(KvProgress {
                    until_ms: allowance.map(|a| now_ms + a),
                    waiting: KvWait::Poll,
                    poll_started_ms: now_ms,
                    last_progress_log_ms: now_ms,
                    saw_not_quiescent: false,
                    last_error: None,
                }))
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
