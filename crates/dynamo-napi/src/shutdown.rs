//! Graceful shutdown: the lifecycle crate's settings resolution and its sans-IO planner. Events
//! arrive as the crate's tagged JSON (`{"type": "inflight_timed_out", "inflight": 3}`); actions
//! leave as typed objects whose `type` tells TypeScript their fields, so the executor in
//! `@dynamo/backend` performs them without casts.

use std::collections::HashMap;

use dynamo_lifecycle::{
    LogLevel, ShutdownAction as Action, ShutdownConfig, ShutdownEvent, ShutdownPlanner as Planner,
    ShutdownSettings, Stage, StageReason, WorkerSituation,
};
use napi::Result;
use napi_derive::napi;
use serde_json::Value;

use crate::convert::{decode, encode};

/// A shutdown stage, in execution order (the `stage` label of
/// `dynamo_component_shutdown_stage_seconds`).
#[napi(string_enum = "snake_case")]
pub enum ShutdownStage {
    Unregister,
    RouterGrace,
    StopAdmission,
    Inflight,
    KvTransfer,
    Cleanup,
}

impl From<Stage> for ShutdownStage {
    fn from(stage: Stage) -> Self {
        match stage {
            Stage::Unregister => Self::Unregister,
            Stage::RouterGrace => Self::RouterGrace,
            Stage::StopAdmission => Self::StopAdmission,
            Stage::Inflight => Self::Inflight,
            Stage::KvTransfer => Self::KvTransfer,
            Stage::Cleanup => Self::Cleanup,
        }
    }
}

/// How a shutdown stage ended (the `reason` label of `dynamo_component_shutdown_stage_seconds`).
#[napi(string_enum = "snake_case")]
pub enum ShutdownStageReason {
    Completed,
    Skipped,
    TimedOut,
    Cancelled,
    /// The engine never answered the question the stage asks.
    Unsupported,
}

impl From<StageReason> for ShutdownStageReason {
    fn from(reason: StageReason) -> Self {
        match reason {
            StageReason::Completed => Self::Completed,
            StageReason::Skipped => Self::Skipped,
            StageReason::TimedOut => Self::TimedOut,
            StageReason::Cancelled => Self::Cancelled,
            StageReason::Unsupported => Self::Unsupported,
        }
    }
}

/// Severity of a shutdown log line.
#[napi(string_enum = "snake_case")]
pub enum ShutdownLogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl From<LogLevel> for ShutdownLogLevel {
    fn from(level: LogLevel) -> Self {
        match level {
            LogLevel::Debug => Self::Debug,
            LogLevel::Info => Self::Info,
            LogLevel::Warn => Self::Warn,
            LogLevel::Error => Self::Error,
        }
    }
}

/// One thing the host does for the planner; `type` says which. Each action that waits on the
/// outside world is answered by exactly one event; the others are fire-and-forget.
#[napi(
    discriminant = "type",
    discriminant_case = "snake_case",
    use_nullable = true,
    object_from_js = false
)]
pub enum ShutdownAction {
    /// Remove the instance from discovery; answer `unregistered`.
    Unregister,
    /// Wait `ms`; answer `wake`.
    Sleep { ms: f64 },
    /// Flip the admission bit; answer `admission_stopped`.
    StopAdmission,
    /// Wait for no request to be running; answer `inflight_drained` or `inflight_timed_out`.
    /// `timeout_ms: null` = no bound.
    WaitInflight {
        #[napi(js_name = "timeout_ms")]
        timeout_ms: Option<f64>,
    },
    /// Call the engine's `drain()` once; answer `drained`, or `tick` if it outlives
    /// `timeout_ms` (`null` = no bound).
    CallDrain {
        #[napi(js_name = "timeout_ms")]
        timeout_ms: Option<f64>,
    },
    /// Call `is_quiescent()` once; answer `quiescent`, or `tick` if it outlives `timeout_ms`
    /// (`null` = no bound).
    PollQuiescent {
        #[napi(js_name = "timeout_ms")]
        timeout_ms: Option<f64>,
    },
    /// Call engine cleanup (at most once); answer `cleanup_done` or `cleanup_timed_out`.
    CallCleanup {
        #[napi(js_name = "timeout_ms")]
        timeout_ms: f64,
    },
    /// A stage ended: log it and observe the stage-duration metric. `elapsed_ms` is the time
    /// it took, `remaining_total_ms` the budget left (null: unbounded), `detail` extra context
    /// (error text, why it was skipped).
    RecordStage {
        stage: ShutdownStage,
        reason: ShutdownStageReason,
        #[napi(js_name = "elapsed_ms")]
        elapsed_ms: f64,
        #[napi(js_name = "remaining_total_ms")]
        remaining_total_ms: Option<f64>,
        detail: Option<String>,
    },
    /// Log a line.
    Log {
        level: ShutdownLogLevel,
        message: String,
    },
    /// Exit the process now with `code`.
    Exit { code: i32 },
    /// Every stage is recorded; shutdown orchestration is over.
    Done,
}

impl From<Action> for ShutdownAction {
    fn from(action: Action) -> Self {
        let ms = |ms: u64| ms as f64;
        match action {
            Action::Unregister => Self::Unregister,
            Action::Sleep { ms: duration } => Self::Sleep { ms: ms(duration) },
            Action::StopAdmission => Self::StopAdmission,
            Action::WaitInflight { timeout_ms } => Self::WaitInflight {
                timeout_ms: timeout_ms.map(ms),
            },
            Action::CallDrain { timeout_ms } => Self::CallDrain {
                timeout_ms: timeout_ms.map(ms),
            },
            Action::PollQuiescent { timeout_ms } => Self::PollQuiescent {
                timeout_ms: timeout_ms.map(ms),
            },
            Action::CallCleanup { timeout_ms } => Self::CallCleanup {
                timeout_ms: ms(timeout_ms),
            },
            Action::RecordStage(outcome) => Self::RecordStage {
                stage: outcome.stage.into(),
                reason: outcome.reason.into(),
                elapsed_ms: ms(outcome.elapsed_ms),
                remaining_total_ms: outcome.remaining_total_ms.map(ms),
                detail: outcome.detail,
            },
            Action::Log { level, message } => Self::Log {
                level: level.into(),
                message,
            },
            Action::Exit { code } => Self::Exit { code },
            Action::Done => Self::Done,
        }
    }
}

/// Resolved shutdown settings (milliseconds) plus warnings about ignored values.
#[napi(object)]
pub struct ResolvedShutdownSettings {
    #[napi(
        ts_type = "{ graceful_shutdown_timeout_ms: number; router_grace_ms: number; inflight_timeout_ms: number; kv_transfer_timeout_ms: number; cleanup_timeout_ms: number; total_ms: number; kv_transfer_fallback: 'wait' | 'skip' | null }"
    )]
    pub settings: Value,
    pub warnings: Vec<String>,
}

/// Resolves the shutdown budget: `config` (snake_case `ShutdownConfig`) beats `env`
/// (`DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT`, ...), which beats the defaults.
#[napi(
    ts_args_type = "config: Record<string, unknown> | null | undefined, env: Record<string, string | undefined>"
)]
pub fn resolve_shutdown_settings(
    config: Option<Value>,
    env: HashMap<String, String>,
) -> Result<ResolvedShutdownSettings> {
    let config: ShutdownConfig = match config {
        Some(Value::Null) | None => ShutdownConfig::default(),
        Some(v) => decode("shutdown config", v)?,
    };
    let resolved = ShutdownSettings::resolve(&config, |name| env.get(name).cloned());
    Ok(ResolvedShutdownSettings {
        settings: encode(&resolved.settings)?,
        warnings: resolved.warnings,
    })
}

/// The graceful-shutdown orchestrator: stages, the single budget and its allowances.
#[napi]
pub struct ShutdownPlanner {
    planner: Planner,
}

#[napi]
impl ShutdownPlanner {
    /// `settings` as returned by `resolveShutdownSettings().settings`; `situation` is
    /// `{served, prefill, engine_kv_transfer_fallback, drain}`.
    #[napi(
        constructor,
        ts_args_type = "settings: ResolvedShutdownSettings['settings'], situation: { served?: boolean; prefill?: boolean; engine_kv_transfer_fallback?: 'wait' | 'skip' | null; drain?: boolean }"
    )]
    pub fn new(settings: Value, situation: Value) -> Result<Self> {
        let settings: ShutdownSettings = decode("shutdown settings", settings)?;
        let situation: WorkerSituation = decode("worker situation", situation)?;
        Ok(Self {
            planner: Planner::new(&settings, situation),
        })
    }

    /// Feeds one event at `nowMs` (any monotonic millisecond clock) and returns the actions to
    /// perform, in order.
    #[napi(ts_args_type = "nowMs: number, event: { type: string; [key: string]: unknown }")]
    pub fn on(&mut self, now_ms: f64, event: Value) -> Result<Vec<ShutdownAction>> {
        let event: ShutdownEvent = decode("shutdown event", event)?;
        let actions = self.planner.on(now_ms.max(0.0) as u64, event);
        Ok(actions.into_iter().map(ShutdownAction::from).collect())
    }

    /// The stages as they would run from `nowMs`, with their allowances.
    #[napi(
        ts_args_type = "nowMs: number",
        ts_return_type = "Array<{ stage: string; runs: boolean; allowance_ms: number | null; skip_detail: string | null }>"
    )]
    pub fn plan(&self, now_ms: f64) -> Result<Value> {
        encode(&self.planner.plan(now_ms.max(0.0) as u64))
    }

    /// The budget for the hard-exit timer, in ms (null when unbounded).
    #[napi(getter)]
    pub fn total_budget_ms(&self) -> Option<f64> {
        self.planner.total_budget().map(|ms| ms as f64)
    }

    /// True once every stage has run (or the hard exit fired).
    #[napi(getter)]
    pub fn done(&self) -> bool {
        self.planner.is_done()
    }
}
