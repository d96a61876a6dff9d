//! The lifecycle crate's sans-IO machines and parsers, with events and actions crossing as the
//! crate's tagged JSON (`{"type": "call_cleanup", "timeout_ms": 5000}`).

use std::collections::HashMap;

use dynamo_lifecycle::{
    parse_finish_reason_json, EngineEvent, EngineLifecycle as Machine, ShutdownConfig,
    ShutdownEvent, ShutdownPlanner as Planner, ShutdownSettings, WorkerSituation,
};
use napi::Result;
use napi_derive::napi;
use serde_json::Value;

use crate::convert::{decode, encode, failure, invalid};

/// Normalizes a finish reason as Dynamo does ("abort" becomes "cancelled", `{error: msg}` kept);
/// throws naming the value when it is not one.
#[napi(
    ts_args_type = "value: unknown",
    ts_return_type = "string | { error: string }"
)]
pub fn normalize_finish_reason(value: Value) -> Result<Value> {
    let reason =
        parse_finish_reason_json(&value).map_err(|e| invalid(format!("finish_reason: {e}")))?;
    encode(&reason)
}

/// The OpenAI `finish_reason` for a Dynamo one (eos/stop/cancelled/error → stop, length, content_filter).
#[napi(ts_args_type = "value: unknown")]
pub fn finish_reason_to_openai(value: Value) -> Result<&'static str> {
    let reason =
        parse_finish_reason_json(&value).map_err(|e| invalid(format!("finish_reason: {e}")))?;
    Ok(reason.as_openai())
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

/// The engine lifecycle gate (init → running | start_failed → stopped): feed it events, perform
/// the action it returns.
#[napi]
pub struct EngineLifecycle {
    machine: Machine,
}

#[napi]
impl EngineLifecycle {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self {
            machine: Machine::new(),
        }
    }

    /// `init`, `running`, `start_failed` or `stopped`.
    #[napi(getter)]
    pub fn state(&self) -> &'static str {
        self.machine.state().as_str()
    }

    /// Applies one event (`{type: "start_requested"}`, ...) and returns the action to perform;
    /// throws when the event is not allowed in the current state.
    #[napi(
        ts_args_type = "event: { type: string; [key: string]: unknown }",
        ts_return_type = "{ type: string; [key: string]: unknown }"
    )]
    pub fn on(&mut self, event: Value) -> Result<Value> {
        let event: EngineEvent = decode("engine lifecycle event", event)?;
        let action = self.machine.on(event).map_err(failure)?;
        encode(&action)
    }
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
    #[napi(
        ts_args_type = "nowMs: number, event: { type: string; [key: string]: unknown }",
        ts_return_type = "Array<{ type: string; [key: string]: unknown }>"
    )]
    pub fn on(&mut self, now_ms: f64, event: Value) -> Result<Value> {
        let event: ShutdownEvent = decode("shutdown event", event)?;
        encode(&self.planner.on(now_ms.max(0.0) as u64, event))
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
