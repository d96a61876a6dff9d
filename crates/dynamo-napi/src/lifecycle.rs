//! The lifecycle crate's engine gate and finish reasons. Events arrive as the crate's tagged
//! JSON (`{"type": "cleanup_requested", "timeout_ms": 5000}`); the action leaves as a typed
//! object whose `type` tells TypeScript its fields. The shutdown planner is in `shutdown.rs`.

use dynamo_lifecycle::{
    parse_finish_reason_json, EngineAction as Action, EngineEvent, EngineLifecycle as Machine,
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

/// What the host does next with the engine; `type` says which.
#[napi(
    discriminant = "type",
    discriminant_case = "snake_case",
    object_from_js = false
)]
pub enum EngineAction {
    /// Call `engine.start()` and report `start_succeeded` / `start_failed`.
    CallStart,
    /// Call `engine.cleanup()` bounded by `timeout_ms`, then report `cleanup_finished`.
    CallCleanup {
        #[napi(js_name = "timeout_ms")]
        timeout_ms: f64,
    },
    /// A cleanup is already running: await that one instead of calling again.
    WaitForCleanup,
    /// `start` is still running: await it, then request cleanup again.
    WaitForStart,
    /// Nothing to do (cleanup never owed, or already done).
    Noop,
}

impl From<Action> for EngineAction {
    fn from(action: Action) -> Self {
        match action {
            Action::CallStart => Self::CallStart,
            Action::CallCleanup { timeout_ms } => Self::CallCleanup {
                timeout_ms: timeout_ms as f64,
            },
            Action::WaitForCleanup => Self::WaitForCleanup,
            Action::WaitForStart => Self::WaitForStart,
            Action::Noop => Self::Noop,
        }
    }
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
    // JS builds it with `new`; a Default impl would have no caller.
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
    #[napi(ts_args_type = "event: { type: string; [key: string]: unknown }")]
    pub fn on(&mut self, event: Value) -> Result<EngineAction> {
        let event: EngineEvent = decode("engine lifecycle event", event)?;
        let action = self.machine.on(event).map_err(failure)?;
        Ok(action.into())
    }
}
