//! Test engines: a conforming "rotating tokens" engine and a wrapper that breaks
//! exactly one rule of the contract.
#![allow(dead_code)] // each test binary uses a different subset

pub mod media;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dynamo_conformance::{
    ChunkStream, CompletionUsage, Context, Engine, EngineConfig, EngineError, EngineOutput,
    FinishReason, GenerateRequest, KvEventSource, LlmRegistration,
};
use futures::stream::{self, StreamExt};

/// Counts what the kit does with the engines a factory builds.
#[derive(Clone, Default)]
pub struct Counters {
    pub built: Arc<AtomicUsize>,
    pub cleanup_calls: Arc<AtomicUsize>,
    pub teardowns: Arc<AtomicUsize>,
}

impl Counters {
    /// A counted reference engine, for use inside a factory.
    pub fn engine(&self) -> RotatingTokens {
        self.built.fetch_add(1, Ordering::SeqCst);
        RotatingTokens::default().counting(&self.cleanup_calls, &self.teardowns)
    }

    /// (engines built, cleanup calls, real teardowns)
    pub fn get(&self) -> (usize, usize, usize) {
        let load = |c: &AtomicUsize| c.load(Ordering::SeqCst);
        (
            load(&self.built),
            load(&self.cleanup_calls),
            load(&self.teardowns),
        )
    }
}

/// Token ids wrap at this vocabulary size.
const VOCAB: u32 = 32_000;

/// The reference engine: token `(i + 1) % 32000` per chunk, `length` terminal with
/// usage, a `cancelled` terminal with partial usage once the context is stopped.
pub struct RotatingTokens {
    pub model: String,
    /// Used when the request sets no (or a zero) `max_tokens`.
    pub max_tokens: u32,
    /// Pause before each token, so a test can observe a stream mid-flight.
    pub delay: Duration,
    started: AtomicBool,
    /// Every `cleanup()` call, shared with the test that built the engine.
    pub cleanup_calls: Arc<AtomicUsize>,
    /// Real teardowns (cleanup of a started engine), shared likewise.
    pub teardowns: Arc<AtomicUsize>,
}

impl Default for RotatingTokens {
    fn default() -> Self {
        RotatingTokens {
            model: "sample-model".to_string(),
            max_tokens: 16,
            delay: Duration::ZERO,
            started: AtomicBool::new(false),
            cleanup_calls: Arc::default(),
            teardowns: Arc::default(),
        }
    }
}

impl RotatingTokens {
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Shares the counters of `self` with a test (clone the `Arc`s before moving the engine).
    pub fn counting(
        mut self,
        cleanup_calls: &Arc<AtomicUsize>,
        teardowns: &Arc<AtomicUsize>,
    ) -> Self {
        self.cleanup_calls = cleanup_calls.clone();
        self.teardowns = teardowns.clone();
        self
    }

    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Engine for RotatingTokens {
    async fn start(&self, _worker_id: u64) -> Result<EngineConfig, EngineError> {
        self.started.store(true, Ordering::SeqCst);
        Ok(EngineConfig {
            served_model_name: Some(self.model.clone()),
            llm: Some(LlmRegistration {
                context_length: Some(2048),
                kv_cache_block_size: Some(16),
                total_kv_blocks: Some(1000),
                max_num_seqs: Some(64),
                max_num_batched_tokens: Some(2048),
                ..LlmRegistration::default()
            }),
            ..EngineConfig::new(self.model.clone())
        })
    }

    async fn generate(
        &self,
        request: GenerateRequest,
        ctx: Context,
    ) -> Result<ChunkStream, EngineError> {
        if !self.is_started() {
            return Err(EngineError::unknown("generate called before start"));
        }
        if request.token_ids.is_empty() {
            return Err(EngineError::invalid_argument(
                "token_ids must not be empty, got []",
            ));
        }
        let prompt = u32::try_from(request.token_ids.len()).unwrap_or(u32::MAX);
        let max_new = request
            .stop_conditions
            .max_tokens
            .filter(|&n| n > 0)
            .unwrap_or(self.max_tokens);
        Ok(rotating_stream(prompt, max_new, self.delay, ctx))
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        self.cleanup_calls.fetch_add(1, Ordering::SeqCst);
        if self.started.swap(false, Ordering::SeqCst) {
            self.teardowns.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    async fn kv_event_sources(&self) -> Result<Vec<KvEventSource>, EngineError> {
        Ok(vec![KvEventSource::push(0)])
    }
}

fn rotating_stream(prompt: u32, max_new: u32, delay: Duration, ctx: Context) -> ChunkStream {
    stream::unfold(Some(0u32), move |next| {
        let ctx = ctx.clone();
        async move {
            let i = next?;
            if ctx.is_stopped() {
                let cancelled =
                    EngineOutput::cancelled().with_usage(CompletionUsage::new(prompt, i));
                return Some((Ok(cancelled), None));
            }
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let chunk = EngineOutput::token((i + 1) % VOCAB);
            if i + 1 >= max_new {
                let last = chunk
                    .with_finish_reason(FinishReason::Length)
                    .with_usage(CompletionUsage::new(prompt, max_new));
                Some((Ok(last), None))
            } else {
                Some((Ok(chunk), Some(i + 1)))
            }
        }
    })
    .boxed()
}

/// The one rule a [`Faulty`] engine breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    StartFails,
    EmptyModel,
    KvSourcesFail,
    KvRanksDrift,
    MetricsSetupFails,
    MetricsRanksDrift,
    GenerateSetupFails,
    EmptyStream,
    ErrorItem,
    TokenAfterTerminal,
    NoTerminal,
    UsageOverCounts,
    RejectsConcurrent,
    EmptyWhenBusy,
    IgnoresCancel,
    CancelEndsWithLength,
    CancelEndsWithoutTerminal,
    CancelYieldsError,
    CancelYieldsNothing,
    CleanupFails,
    SecondCleanupFails,
    CleanupRequiresStart,
    /// Yields one token, then never another chunk.
    StreamHangs,
}

/// The reference engine with one fault injected.
pub struct Faulty {
    pub inner: RotatingTokens,
    pub fault: Fault,
    kv_calls: AtomicU32,
    in_flight: Arc<AtomicUsize>,
    ever_started: AtomicBool,
}

impl Faulty {
    pub fn new(fault: Fault) -> Self {
        Faulty::wrap(RotatingTokens::default(), fault)
    }

    pub fn wrap(inner: RotatingTokens, fault: Fault) -> Self {
        // Faults that only show while a stream is pending need the stream to
        // actually yield to the executor between tokens.
        let inner = match fault {
            Fault::RejectsConcurrent | Fault::EmptyWhenBusy | Fault::IgnoresCancel => {
                inner.with_delay(Duration::from_millis(1))
            }
            _ => inner,
        };
        Faulty {
            inner,
            fault,
            kv_calls: AtomicU32::new(0),
            in_flight: Arc::default(),
            ever_started: AtomicBool::new(false),
        }
    }
}

/// Decrements the in-flight count when the stream that owns it is dropped.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn is_cancelled_terminal(item: &Result<EngineOutput, EngineError>) -> bool {
    matches!(item, Ok(chunk) if chunk.finish_reason == Some(FinishReason::Cancelled))
}

#[async_trait::async_trait]
impl Engine for Faulty {
    async fn start(&self, worker_id: u64) -> Result<EngineConfig, EngineError> {
        self.ever_started.store(true, Ordering::SeqCst);
        match self.fault {
            Fault::StartFails => Err(EngineError::unknown("model weights not found at /nowhere")),
            Fault::EmptyModel => {
                let mut config = self.inner.start(worker_id).await?;
                config.model.clear();
                Ok(config)
            }
            _ => self.inner.start(worker_id).await,
        }
    }

    async fn generate(
        &self,
        request: GenerateRequest,
        ctx: Context,
    ) -> Result<ChunkStream, EngineError> {
        match self.fault {
            Fault::GenerateSetupFails => {
                return Err(EngineError::invalid_argument(
                    "sampling backend is not ready",
                ))
            }
            Fault::EmptyStream => return Ok(stream::empty().boxed()),
            Fault::EmptyWhenBusy if self.in_flight.load(Ordering::SeqCst) > 0 => {
                return Ok(stream::empty().boxed())
            }
            Fault::RejectsConcurrent if self.in_flight.load(Ordering::SeqCst) > 0 => {
                return Err(EngineError::new(
                    "Unavailable",
                    "engine busy: one request at a time",
                ))
            }
            _ => {}
        }
        // An engine that ignores cancellation never looks at the caller's context.
        let ctx = match self.fault {
            Fault::IgnoresCancel => Context::new(ctx.id()),
            _ => ctx,
        };
        let inner = self.inner.generate(request, ctx).await?;
        let out: ChunkStream = match self.fault {
            Fault::ErrorItem => inner
                .take(2)
                .chain(stream::once(async {
                    Err(EngineError::unknown("CUDA error: out of memory"))
                }))
                .boxed(),
            Fault::StreamHangs => inner.take(1).chain(stream::pending()).boxed(),
            Fault::TokenAfterTerminal => inner
                .chain(stream::once(async { Ok(EngineOutput::token(99)) }))
                .boxed(),
            Fault::NoTerminal => inner
                .map(|item| {
                    item.map(|mut chunk| {
                        chunk.finish_reason = None;
                        chunk
                    })
                })
                .boxed(),
            Fault::UsageOverCounts => inner
                .map(|item| {
                    item.map(|mut chunk| {
                        if let Some(usage) = chunk.completion_usage.as_mut() {
                            usage.completion_tokens += 1;
                        }
                        chunk
                    })
                })
                .boxed(),
            Fault::RejectsConcurrent | Fault::EmptyWhenBusy => {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                let guard = InFlight(self.in_flight.clone());
                inner
                    .map(move |item| {
                        let _held_until_the_stream_drops = &guard;
                        item
                    })
                    .boxed()
            }
            Fault::CancelEndsWithLength => inner
                .map(|item| {
                    if is_cancelled_terminal(&item) {
                        Ok(EngineOutput::terminal(FinishReason::Length))
                    } else {
                        item
                    }
                })
                .boxed(),
            Fault::CancelEndsWithoutTerminal => inner
                .map(|item| {
                    if is_cancelled_terminal(&item) {
                        Ok(EngineOutput::default().with_tokens(vec![]))
                    } else {
                        item
                    }
                })
                .boxed(),
            Fault::CancelYieldsError => inner
                .map(|item| {
                    if is_cancelled_terminal(&item) {
                        Err(EngineError::unknown("request was cancelled"))
                    } else {
                        item
                    }
                })
                .boxed(),
            Fault::CancelYieldsNothing => inner
                .filter(|item| std::future::ready(!is_cancelled_terminal(item)))
                .boxed(),
            _ => inner,
        };
        Ok(out)
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        match self.fault {
            Fault::CleanupFails => {
                self.inner.cleanup().await?;
                Err(EngineError::unknown("failed to release the KV cache"))
            }
            Fault::SecondCleanupFails => {
                let was_started = self.inner.is_started();
                self.inner.cleanup().await?;
                if was_started {
                    Ok(())
                } else {
                    Err(EngineError::unknown("engine handle already released"))
                }
            }
            Fault::CleanupRequiresStart if !self.ever_started.load(Ordering::SeqCst) => Err(
                EngineError::unknown("cleanup before start: engine handle is None"),
            ),
            _ => self.inner.cleanup().await,
        }
    }

    async fn kv_event_sources(&self) -> Result<Vec<KvEventSource>, EngineError> {
        match self.fault {
            Fault::KvSourcesFail => Err(EngineError::unknown("ZMQ bind failed: address in use")),
            Fault::KvRanksDrift => {
                let call = self.kv_calls.fetch_add(1, Ordering::SeqCst);
                Ok(vec![
                    KvEventSource::zmq("tcp://127.0.0.1:5557", "", 0),
                    KvEventSource::zmq("tcp://127.0.0.1:5558", "", 1 + call),
                ])
            }
            _ => self.inner.kv_event_sources().await,
        }
    }

    async fn component_metrics_dp_ranks(&self) -> Result<Vec<u32>, EngineError> {
        match self.fault {
            Fault::MetricsSetupFails => Err(EngineError::unknown("metrics registry is closed")),
            // One more rank on every call, as an engine that registers its gauges again would.
            Fault::MetricsRanksDrift => {
                let call = self.kv_calls.fetch_add(1, Ordering::SeqCst);
                Ok((0..=call).collect())
            }
            _ => self.inner.component_metrics_dp_ranks().await,
        }
    }
}
