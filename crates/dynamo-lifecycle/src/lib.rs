//! Pure, sans-IO building blocks for the worker lifecycle of the Dynamo unified backend.
//!
//! Nothing here reads clocks, the environment, sockets or threads: the host (the
//! TypeScript worker, through the napi binding) passes time and environment in and
//! performs the actions that come out. That keeps every shutdown edge case a
//! deterministic unit test, and lets every enum cross into JS as tagged JSON.

/// Shutdown knobs: code config over env over defaults, resolved once with warnings.
pub mod config;
/// Engine start/cleanup gate: start at most once, cleanup at most once.
pub mod engine_state;
/// Stream finish reasons and their wire spellings.
pub mod finish_reason;
/// Shutdown stages, the shared budget, and the sans-IO planner that drives them.
pub mod shutdown;

pub use config::{
    KvTransferFallback, ResolvedSettings, ShutdownConfig, ShutdownSettings, CLEANUP_RESERVE_MS,
};
pub use engine_state::{
    CleanupOutcome, EngineAction, EngineEvent, EngineLifecycle, EngineLifecycleError, EngineState,
};
pub use finish_reason::{parse_finish_reason_json, FinishReason, FinishReasonError};
pub use shutdown::{
    total_budget, CleanupBound, KvTransferPolicy, LogLevel, PlannedStage, ShutdownAction,
    ShutdownBudget, ShutdownEvent, ShutdownPlanner, Stage, StageOutcome, StageReason,
    WorkerSituation, EXIT_CODE_SHUTDOWN_TIMEOUT,
};
