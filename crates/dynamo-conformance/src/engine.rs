//! The engine contract the kit checks: the lifecycle and generate hooks the worker
//! calls, in the shape a TypeScript engine is adapted to by the napi binding.

use std::fmt;
use std::sync::Arc;

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::context::Context;
use crate::types::{EngineConfig, EngineOutput, GenerateRequest, KvEventSource};

/// An engine-reported error: a type name the worker maps to a Dynamo error kind
/// (`"InvalidArgument"`, `"Unknown"`, ...) plus a message meant for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineError {
    /// Error type, e.g. `"InvalidArgument"`.
    pub kind: String,
    /// What went wrong, naming the offending input.
    pub message: String,
}

impl EngineError {
    /// An error of the given kind.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        EngineError {
            kind: kind.into(),
            message: message.into(),
        }
    }

    /// A request the engine refuses because of its content.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        EngineError::new("InvalidArgument", message)
    }

    /// Anything the engine cannot classify.
    pub fn unknown(message: impl Into<String>) -> Self {
        EngineError::new("Unknown", message)
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for EngineError {}

/// A response stream. An `Err` item is terminal, like a chunk with `finish_reason`.
pub type ChunkStream = BoxStream<'static, Result<EngineOutput, EngineError>>;

/// An LLM engine as the worker drives it.
///
/// The worker calls `start` once, then `generate` concurrently per request, `abort`
/// when a request is explicitly cancelled, and `cleanup` once at shutdown (also
/// after a failed `start`, never if `start` was not called).
#[async_trait::async_trait]
pub trait Engine: Send + Sync {
    /// Loads the model; after it returns, `generate` must accept concurrent calls.
    async fn start(&self, worker_id: u64) -> Result<EngineConfig, EngineError>;

    /// Starts one request. The stream must end with exactly one terminal item and
    /// must end with a `cancelled` terminal soon after `ctx` is stopped.
    async fn generate(
        &self,
        request: GenerateRequest,
        ctx: Context,
    ) -> Result<ChunkStream, EngineError>;

    /// Told about an explicit cancel; per-request cleanup belongs in the stream
    /// body instead, because a dropped stream never reaches here.
    async fn abort(&self, _ctx: Context) {}

    /// Releases everything `start` acquired. Must tolerate a failed or missing
    /// `start` and must succeed when called twice.
    async fn cleanup(&self) -> Result<(), EngineError>;

    /// KV event sources to subscribe to; their ranks must not change between calls.
    async fn kv_event_sources(&self) -> Result<Vec<KvEventSource>, EngineError> {
        Ok(vec![])
    }

    /// The data-parallel ranks whose KV cache metrics the engine reports (stock Dynamo's
    /// `setup_metrics().dp_ranks`); the set must not change between calls.
    async fn component_metrics_dp_ranks(&self) -> Result<Vec<u32>, EngineError> {
        Ok(vec![])
    }
}

/// Forwards every method to the pointee, so a factory can hand out `Box<dyn Engine>` (e.g. a JS
/// engine behind the binding) or share one implementation behind an `Arc`.
macro_rules! forward_engine {
    ($($ptr:ident),*) => {$(
        #[async_trait::async_trait]
        impl<T: Engine + ?Sized> Engine for $ptr<T> {
            async fn start(&self, worker_id: u64) -> Result<EngineConfig, EngineError> {
                (**self).start(worker_id).await
            }
            async fn generate(&self, request: GenerateRequest, ctx: Context) -> Result<ChunkStream, EngineError> {
                (**self).generate(request, ctx).await
            }
            async fn abort(&self, ctx: Context) {
                (**self).abort(ctx).await
            }
            async fn cleanup(&self) -> Result<(), EngineError> {
                (**self).cleanup().await
            }
            async fn kv_event_sources(&self) -> Result<Vec<KvEventSource>, EngineError> {
                (**self).kv_event_sources().await
            }
            async fn component_metrics_dp_ranks(&self) -> Result<Vec<u32>, EngineError> {
                (**self).component_metrics_dp_ranks().await
            }
        }
    )*};
}

forward_engine!(Box, Arc);

/// A raw response stream: opaque JSON objects, no terminal marker. An `Err` item ends it.
pub type RawChunkStream = BoxStream<'static, Result<Map<String, Value>, EngineError>>;

/// A raw media engine (stock Dynamo's `RawEngine`): requests and responses are JSON objects the
/// worker forwards untouched, with no token pipeline, so no KV events and no `llm` registration.
#[async_trait::async_trait]
pub trait RawEngine: Send + Sync {
    /// Loads the model; the returned config must leave `llm` unset.
    async fn start(&self, worker_id: u64) -> Result<EngineConfig, EngineError>;

    /// Starts one request. The stream must end soon after `ctx` is stopped.
    async fn generate(
        &self,
        request: Map<String, Value>,
        ctx: Context,
    ) -> Result<RawChunkStream, EngineError>;

    /// Told about an explicit cancel.
    async fn abort(&self, _ctx: Context) {}

    /// Releases everything `start` acquired; idempotent and safe without `start`.
    async fn cleanup(&self) -> Result<(), EngineError>;
}

macro_rules! forward_raw_engine {
    ($($ptr:ident),*) => {$(
        #[async_trait::async_trait]
        impl<T: RawEngine + ?Sized> RawEngine for $ptr<T> {
            async fn start(&self, worker_id: u64) -> Result<EngineConfig, EngineError> {
                (**self).start(worker_id).await
            }
            async fn generate(&self, request: Map<String, Value>, ctx: Context) -> Result<RawChunkStream, EngineError> {
                (**self).generate(request, ctx).await
            }
            async fn abort(&self, ctx: Context) {
                (**self).abort(ctx).await
            }
            async fn cleanup(&self) -> Result<(), EngineError> {
                (**self).cleanup().await
            }
        }
    )*};
}

forward_raw_engine!(Box, Arc);
