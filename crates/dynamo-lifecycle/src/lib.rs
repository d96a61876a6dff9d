//! Pure, sans-IO building blocks for the worker lifecycle of the Dynamo unified backend.
//!
//! Nothing here reads clocks, the environment, sockets or threads: the host (the
//! TypeScript worker, through the napi binding) passes time and environment in, and
//! performs the actions that come out. That keeps every shutdown edge case a
//! deterministic unit test, and lets all enums cross into JS as tagged JSON.

pub mod config;
pub mod engine_state;
pub mod finish_reason;
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
