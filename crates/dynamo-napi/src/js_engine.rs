//! A JavaScript engine seen through the conformance kit's `Engine` trait.
//!
//! JS exposes one `dispatch(message: string) => Promise<string>` function; each call is a JSON
//! operation (`start`, `generate`, `next`, `stop`, ...) answered with `{"ok": ..}` or
//! `{"error": {"kind", "message"}}`. One function keeps the boundary narrow and the JS side free
//! to batch stream chunks into a single `next` reply.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dynamo_conformance::{
    ChunkStream, Context, Engine, EngineConfig, EngineError, GenerateRequest, KvEventSource,
    RawChunkStream, RawEngine,
};
use futures::stream::BoxStream;
use futures::StreamExt;
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi::Status;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::{oneshot, OnceCell};

/// Weak: a pending dispatch must not keep Node alive on its own.
pub type Dispatch = ThreadsafeFunction<String, Promise<String>, String, Status, false, true>;

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Ok(Value),
    Error { kind: String, message: String },
}

#[derive(Clone)]
pub struct Bridge(Arc<Dispatch>);

impl Bridge {
    pub fn new(dispatch: Dispatch) -> Self {
        Self(Arc::new(dispatch))
    }

    async fn call(&self, message: Value) -> Result<Value, EngineError> {
        let boundary = |e: napi::Error| EngineError {
            kind: "Unknown".into(),
            message: format!("engine bridge: {}", e.reason),
        };
        let promise = self
            .0
            .call_async_catch(message.to_string())
            .await
            .map_err(boundary)?;
        let reply = promise.await.map_err(boundary)?;
        match serde_json::from_str::<Reply>(&reply) {
            Ok(Reply::Ok(value)) => Ok(value),
            Ok(Reply::Error { kind, message }) => Err(EngineError { kind, message }),
            Err(e) => Err(EngineError {
                kind: "Unknown".into(),
                message: format!("engine bridge sent a malformed reply ({e}): {reply}"),
            }),
        }
    }

    /// Fire-and-forget for paths that cannot await (drop).
    fn notify(&self, message: Value) {
        let bridge = self.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = bridge.call(message).await;
            });
        }
    }
}

static NEXT_ENGINE: AtomicU64 = AtomicU64::new(1);

/// One engine instance on the JS side, created there lazily on its first operation so the kit's
/// synchronous factory can hand out engines without a round trip.
pub struct JsEngine {
    bridge: Bridge,
    id: u64,
}

impl JsEngine {
    pub fn new(bridge: Bridge) -> Self {
        Self {
            bridge,
            id: NEXT_ENGINE.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn decode<T: serde::de::DeserializeOwned>(what: &str, value: Value) -> Result<T, EngineError> {
        serde_json::from_value(value).map_err(|e| EngineError {
            kind: "InvalidArgument".into(),
            message: format!("invalid {what}: {e}"),
        })
    }
}

impl JsEngine {
    async fn start_op(&self, worker_id: u64) -> Result<EngineConfig, EngineError> {
        let config = self
            .bridge
            .call(json!({"op": "start", "engine": self.id, "worker_id": worker_id.to_string()}))
            .await?;
        Self::decode("EngineConfig returned by start()", config)
    }

    /// Opens a stream on the JS side; `T` is what each chunk must decode to.
    async fn generate_op<T: DeserializeOwned + Send + 'static>(
        &self,
        request: Value,
        ctx: Context,
    ) -> Result<BoxStream<'static, Result<T, EngineError>>, EngineError> {
        let reply = self
            .bridge
            .call(json!({"op": "generate", "engine": self.id, "context": ctx.id(), "request": request}))
            .await?;
        let stream = reply
            .get("stream")
            .and_then(Value::as_u64)
            .ok_or_else(|| EngineError {
                kind: "Unknown".into(),
                message: format!("engine bridge: generate reply without a stream id: {reply}"),
            })?;
        Ok(JsStream::spawn(self.bridge.clone(), stream, ctx))
    }

    async fn abort_op(&self, ctx: Context) {
        let _ = self
            .bridge
            .call(json!({"op": "abort", "engine": self.id, "context": ctx.id()}))
            .await;
    }

    async fn cleanup_op(&self) -> Result<(), EngineError> {
        self.bridge
            .call(json!({"op": "cleanup", "engine": self.id}))
            .await
            .map(drop)
    }
}

#[async_trait::async_trait]
impl Engine for JsEngine {
    async fn start(&self, worker_id: u64) -> Result<EngineConfig, EngineError> {
        self.start_op(worker_id).await
    }

    async fn generate(
        &self,
        request: GenerateRequest,
        ctx: Context,
    ) -> Result<ChunkStream, EngineError> {
        let request = serde_json::to_value(request).map_err(|e| EngineError {
            kind: "Unknown".into(),
            message: format!("engine bridge: request not serializable: {e}"),
        })?;
        self.generate_op(request, ctx).await
    }

    async fn abort(&self, ctx: Context) {
        self.abort_op(ctx).await
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        self.cleanup_op().await
    }

    async fn kv_event_sources(&self) -> Result<Vec<KvEventSource>, EngineError> {
        let sources = self
            .bridge
            .call(json!({"op": "kv_event_sources", "engine": self.id}))
            .await?;
        Self::decode("kvEventSources() result", sources)
    }

    async fn component_metrics_dp_ranks(&self) -> Result<Vec<u32>, EngineError> {
        let ranks = self
            .bridge
            .call(json!({"op": "component_metrics_dp_ranks", "engine": self.id}))
            .await?;
        Self::decode("componentMetricsDpRanks() result", ranks)
    }
}

/// The same JS engine seen as a raw media engine: the bridge passes requests and chunks through
/// as JSON objects.
#[async_trait::async_trait]
impl RawEngine for JsEngine {
    async fn start(&self, worker_id: u64) -> Result<EngineConfig, EngineError> {
        self.start_op(worker_id).await
    }

    async fn generate(
        &self,
        request: Map<String, Value>,
        ctx: Context,
    ) -> Result<RawChunkStream, EngineError> {
        self.generate_op(Value::Object(request), ctx).await
    }

    async fn abort(&self, ctx: Context) {
        self.abort_op(ctx).await
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        self.cleanup_op().await
    }
}

/// Pull side of one JS generate stream. Chunks arrive in batches; a stop on the Rust context is
/// forwarded to JS exactly once, and always before the next pull, so "stopped before the first
/// poll" means the JS engine sees `isStopped()` on its first step.
struct JsStream {
    bridge: Bridge,
    id: u64,
    ctx: Context,
    stop_sent: Arc<OnceCell<()>>,
    buffered: VecDeque<Value>,
    finished: bool,
    /// Dropping it ends the stop monitor; while the JS side still holds the stream, `Drop`
    /// tells it to close.
    _monitor: oneshot::Sender<()>,
}

impl JsStream {
    fn spawn<T: DeserializeOwned + Send + 'static>(
        bridge: Bridge,
        id: u64,
        ctx: Context,
    ) -> BoxStream<'static, Result<T, EngineError>> {
        let stop_sent = Arc::new(OnceCell::new());
        let (monitor_tx, monitor_rx) = oneshot::channel::<()>();
        {
            let (bridge, ctx, stop_sent) = (bridge.clone(), ctx.clone(), stop_sent.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = ctx.stopped() => forward_stop(&bridge, id, &ctx, &stop_sent).await,
                    _ = monitor_rx => {}
                }
            });
        }
        let state = JsStream {
            bridge,
            id,
            ctx,
            stop_sent,
            buffered: VecDeque::new(),
            finished: false,
            _monitor: monitor_tx,
        };
        futures::stream::unfold(state, |mut st| async move {
            let item = st.pull().await?;
            Some((item, st))
        })
        .boxed()
    }

    async fn pull<T: DeserializeOwned>(&mut self) -> Option<Result<T, EngineError>> {
        loop {
            if let Some(chunk) = self.buffered.pop_front() {
                return Some(serde_json::from_value(chunk).map_err(|e| {
                    self.finish();
                    EngineError {
                        kind: "InvalidArgument".into(),
                        message: format!("invalid chunk shape: {e}"),
                    }
                }));
            }
            if self.finished {
                return None;
            }
            if self.ctx.is_stopped() {
                forward_stop(&self.bridge, self.id, &self.ctx, &self.stop_sent).await;
            }
            match self
                .bridge
                .call(json!({"op": "next", "stream": self.id}))
                .await
            {
                Ok(batch) => {
                    let done = batch.get("done").and_then(Value::as_bool).unwrap_or(true);
                    if let Some(Value::Array(chunks)) = batch.get("chunks") {
                        self.buffered.extend(chunks.iter().cloned());
                    }
                    if done {
                        self.finished = true;
                    }
                }
                Err(e) => {
                    self.finish();
                    return Some(Err(e));
                }
            }
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        self.buffered.clear();
    }
}

impl Drop for JsStream {
    fn drop(&mut self) {
        if !self.finished {
            self.bridge
                .notify(json!({"op": "close", "stream": self.id}));
        }
    }
}

async fn forward_stop(bridge: &Bridge, stream: u64, ctx: &Context, sent: &OnceCell<()>) {
    sent.get_or_init(|| async {
        let _ = bridge
            .call(json!({"op": "stop", "stream": stream, "kill": ctx.is_killed()}))
            .await;
    })
    .await;
}
