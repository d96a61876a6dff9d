//! Conformance kit for engines behind the Dynamo unified backend.
//!
//! An engine author (Rust, or TypeScript through the napi binding) hands the kit a
//! factory; the kit starts one engine, drives it through the contract checks in a
//! fixed order ([`CHECKS`]) and names the first rule it broke as a
//! [`ConformanceFailure`]. The checks pin the invariants the worker relies on but
//! cannot enforce at run time: one terminal chunk per stream, cancellation that is
//! observed promptly, stable KV ranks, and an idempotent, null-safe `cleanup`.
//!
//! ```no_run
//! # async fn demo<E: dynamo_conformance::Engine>(make: impl FnMut() -> E) {
//! dynamo_conformance::run_conformance(make).await.expect("engine breaks the contract");
//! # }
//! ```

#![warn(missing_docs)]

pub mod context;
pub mod engine;
pub mod failure;
pub mod kit;
pub mod types;

pub use context::Context;
pub use dynamo_lifecycle::FinishReason;
pub use engine::{ChunkStream, Engine, EngineError, RawChunkStream, RawEngine};
pub use failure::{ConformanceFailure, ALL_KINDS};
pub use kit::{
    run_conformance, run_conformance_report, run_conformance_with, run_encode_conformance,
    run_raw_conformance, run_raw_conformance_report, CheckOutcome, CheckStatus, ConformanceMode,
    ConformanceOptions, ConformanceReport, CHECKS, DEFAULT_CANCEL_DEADLINE, DEFAULT_CONCURRENCY,
    DEFAULT_LONG_MAX_TOKENS, RAW_CHECKS, RAW_LONG_STEPS,
};
pub use types::{
    CompletionUsage, EngineConfig, EngineOutput, GenerateRequest, KvEventSource, KvEventSourceKind,
    LlmRegistration, StopConditions,
};
