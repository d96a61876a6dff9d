//! The checks, their order, and the report they produce.
//!
//! There is one implementation of the checks, [`run_conformance_report`]; the
//! `Result`-returning entry points fold its report into the first failure.

use std::time::Duration;

use futures::future::join_all;
use futures::StreamExt;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tokio::time::Instant;

use crate::context::Context;
use crate::engine::{Engine, EngineError};
use crate::failure::ConformanceFailure;
use crate::types::{EngineOutput, GenerateRequest, KvEventSource};

/// How long a stopped request may keep streaming before the kit gives up on it.
pub const DEFAULT_CANCEL_DEADLINE: Duration = Duration::from_secs(2);
/// Requests issued at once by the `concurrent_generate` check.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Token budget of the cancellation request: large enough that only a cancel ends it in time.
pub const DEFAULT_LONG_MAX_TOKENS: u32 = 10_000;

/// Check names, in the order they run. Later checks need the engine the earlier
/// ones started, so after a failure the rest are skipped.
pub const CHECKS: &[&str] = &[
    "start",
    "kv_event_sources",
    "component_metrics",
    "generate",
    "concurrent_generate",
    "cancellation",
    "cleanup",
    "cleanup_without_start",
];

/// Prompt of every request the kit sends.
const STANDARD_PROMPT: [u32; 3] = [1, 2, 3];
/// Token budget of the ordinary (non-cancellation) requests.
const STANDARD_MAX_TOKENS: u32 = 8;

/// Knobs for running the kit faster in tests or more strictly in CI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceOptions {
    /// How long a stopped request may keep streaming.
    pub cancel_deadline: Duration,
    /// Requests issued at once by `concurrent_generate`.
    pub concurrency: usize,
    /// `max_tokens` of the cancellation request.
    pub long_max_tokens: u32,
    /// How long any one check may take before it fails with `CheckTimedOut` (default none:
    /// unbounded). The best-effort cleanup after a failure gets the same bound, so a hung
    /// engine still gives a report that names the check it hung in.
    pub check_timeout: Option<Duration>,
}

impl Default for ConformanceOptions {
    fn default() -> Self {
        ConformanceOptions {
            cancel_deadline: DEFAULT_CANCEL_DEADLINE,
            concurrency: DEFAULT_CONCURRENCY,
            long_max_tokens: DEFAULT_LONG_MAX_TOKENS,
            check_timeout: None,
        }
    }
}

/// How one check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// The engine satisfied the check.
    Passed,
    /// The engine broke the rule; see [`CheckOutcome::failure`].
    Failed,
    /// Not run because an earlier check failed.
    Skipped,
}

/// One row of the report.
///
/// JSON: `{"name":"start","status":"passed","elapsed_ms":1.2}`; a failed row adds
/// `"kind"` and `"message"`; a skipped row has neither `elapsed_ms` nor those.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutcome {
    /// One of [`CHECKS`].
    pub name: &'static str,
    /// Passed, failed or skipped.
    pub status: CheckStatus,
    /// Set exactly when `status` is [`CheckStatus::Failed`].
    pub failure: Option<ConformanceFailure>,
    /// Time spent in the check; zero when skipped.
    pub elapsed: Duration,
}

impl Serialize for CheckOutcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("name", self.name)?;
        map.serialize_entry("status", &self.status)?;
        if self.status != CheckStatus::Skipped {
            // Microsecond precision: enough to read, short enough to print.
            let elapsed_ms = self.elapsed.as_micros() as f64 / 1000.0;
            map.serialize_entry("elapsed_ms", &elapsed_ms)?;
        }
        if let Some(failure) = &self.failure {
            map.serialize_entry("kind", failure.kind())?;
            map.serialize_entry("message", &failure.to_string())?;
        }
        map.end()
    }
}

/// Every check with its outcome, in [`CHECKS`] order.
///
/// JSON: `{"passed":true,"checks":[{"name":"start","status":"passed","elapsed_ms":1.2}, ...]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceReport {
    /// One entry per name in [`CHECKS`], same order.
    pub checks: Vec<CheckOutcome>,
}

impl ConformanceReport {
    /// True when no check failed.
    pub fn passed(&self) -> bool {
        self.failure().is_none()
    }

    /// The failure that stopped the run, if any.
    pub fn failure(&self) -> Option<&ConformanceFailure> {
        self.checks.iter().find_map(|check| check.failure.as_ref())
    }

    /// The report as `run_conformance` returns it.
    pub fn into_result(self) -> Result<(), ConformanceFailure> {
        match self.checks.into_iter().find_map(|check| check.failure) {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }
}

impl Serialize for ConformanceReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("passed", &self.passed())?;
        map.serialize_entry("checks", &self.checks)?;
        map.end()
    }
}

/// Runs every check with default options and returns the first failure.
///
/// `factory` is called twice: once for the engine under test and once for a
/// never-started engine whose `cleanup` must still succeed.
pub async fn run_conformance<E, F>(factory: F) -> Result<(), ConformanceFailure>
where
    E: Engine,
    F: FnMut() -> E,
{
    run_conformance_with(factory, &ConformanceOptions::default()).await
}

/// [`run_conformance`] with explicit options (e.g. a shorter cancel deadline in tests).
pub async fn run_conformance_with<E, F>(
    factory: F,
    options: &ConformanceOptions,
) -> Result<(), ConformanceFailure>
where
    E: Engine,
    F: FnMut() -> E,
{
    run_conformance_report(factory, options).await.into_result()
}

/// Runs the checks in [`CHECKS`] order and reports each one.
///
/// The cancellation drain is bounded by `options.cancel_deadline`; each whole check
/// by `options.check_timeout` when set (otherwise a hung engine hangs the run). If a
/// check fails after `start` was called, the kit still calls `cleanup()` once (result
/// ignored, same bound) so the engine's resources are released; the report shows the
/// `cleanup` check as skipped.
pub async fn run_conformance_report<E, F>(
    mut factory: F,
    options: &ConformanceOptions,
) -> ConformanceReport
where
    E: Engine,
    F: FnMut() -> E,
{
    let engine = factory();
    let mut model = String::new();
    let mut needs_cleanup = false;
    let mut checks = Vec::with_capacity(Check::ORDER.len());
    let mut failed = false;

    for check in Check::ORDER {
        if failed {
            checks.push(CheckOutcome {
                name: check.name(),
                status: CheckStatus::Skipped,
                failure: None,
                elapsed: Duration::ZERO,
            });
            continue;
        }
        match check {
            Check::Start => needs_cleanup = true,
            Check::Cleanup => needs_cleanup = false,
            _ => {}
        }
        let began = Instant::now();
        let run = async {
            match check {
                Check::Start => check_start(&engine).await.map(|name| model = name),
                Check::KvEventSources => check_kv_event_sources(&engine).await,
                Check::ComponentMetrics => check_component_metrics(&engine).await,
                Check::Generate => check_generate(&engine, &model).await,
                Check::ConcurrentGenerate => {
                    check_concurrent_generate(&engine, &model, options.concurrency).await
                }
                Check::Cancellation => check_cancellation(&engine, &model, options).await,
                Check::Cleanup => check_cleanup(&engine).await,
                Check::CleanupWithoutStart => check_cleanup_without_start(factory()).await,
            }
        };
        let result = within(options.check_timeout, run)
            .await
            .unwrap_or_else(|after| {
                Err(ConformanceFailure::CheckTimedOut {
                    check: check.name(),
                    after,
                })
            });
        let elapsed = began.elapsed();
        let (status, failure) = match result {
            Ok(()) => (CheckStatus::Passed, None),
            Err(failure) => {
                failed = true;
                (CheckStatus::Failed, Some(failure))
            }
        };
        checks.push(CheckOutcome {
            name: check.name(),
            status,
            failure,
            elapsed,
        });
    }

    if needs_cleanup {
        // Best effort: the run already failed, the engine just must not leak.
        let _ = within(options.check_timeout, engine.cleanup()).await;
    }
    ConformanceReport { checks }
}

/// Awaits `work`, or gives up after `limit` (returned as the error) when one is set.
async fn within<T>(
    limit: Option<Duration>,
    work: impl std::future::Future<Output = T>,
) -> Result<T, Duration> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, work).await.map_err(|_| limit),
        None => Ok(work.await),
    }
}

/// The checks as a closed set, so the runner's `match` is exhaustive.
#[derive(Debug, Clone, Copy)]
enum Check {
    Start,
    KvEventSources,
    ComponentMetrics,
    Generate,
    ConcurrentGenerate,
    Cancellation,
    Cleanup,
    CleanupWithoutStart,
}

impl Check {
    const ORDER: [Check; 8] = [
        Check::Start,
        Check::KvEventSources,
        Check::ComponentMetrics,
        Check::Generate,
        Check::ConcurrentGenerate,
        Check::Cancellation,
        Check::Cleanup,
        Check::CleanupWithoutStart,
    ];

    fn name(self) -> &'static str {
        match self {
            Check::Start => "start",
            Check::KvEventSources => "kv_event_sources",
            Check::ComponentMetrics => "component_metrics",
            Check::Generate => "generate",
            Check::ConcurrentGenerate => "concurrent_generate",
            Check::Cancellation => "cancellation",
            Check::Cleanup => "cleanup",
            Check::CleanupWithoutStart => "cleanup_without_start",
        }
    }
}

fn standard_request(model: &str, max_tokens: u32) -> GenerateRequest {
    GenerateRequest::new(model, STANDARD_PROMPT.to_vec(), Some(max_tokens))
}

/// Returns the configured model name, which every later request uses.
async fn check_start<E: Engine>(engine: &E) -> Result<String, ConformanceFailure> {
    let config = engine
        .start(0)
        .await
        .map_err(|e| ConformanceFailure::StartFailed(e.to_string()))?;
    if config.model.is_empty() {
        return Err(ConformanceFailure::EmptyModelInConfig);
    }
    Ok(config.model)
}

async fn check_kv_event_sources<E: Engine>(engine: &E) -> Result<(), ConformanceFailure> {
    let failed = |e: EngineError| ConformanceFailure::KvEventSourcesFailed(e.to_string());
    let first = engine.kv_event_sources().await.map_err(failed)?;
    let second = engine.kv_event_sources().await.map_err(failed)?;
    let ranks = |sources: Vec<KvEventSource>| -> Vec<u32> {
        sources.into_iter().map(|source| source.dp_rank).collect()
    };
    let (first, second) = (ranks(first), ranks(second));
    if first != second {
        return Err(ConformanceFailure::KvEventSourcesNotIdempotent { first, second });
    }
    Ok(())
}

/// Stock calls `setup_metrics` twice and compares the rank sets; ours asks for the ranks twice.
async fn check_component_metrics<E: Engine>(engine: &E) -> Result<(), ConformanceFailure> {
    let failed = |e: EngineError| ConformanceFailure::SetupMetricsFailed(e.to_string());
    let first = engine.component_metrics_dp_ranks().await.map_err(failed)?;
    let second = engine.component_metrics_dp_ranks().await.map_err(failed)?;
    if first != second {
        return Err(ConformanceFailure::ComponentMetricsNotIdempotent { first, second });
    }
    Ok(())
}

async fn check_generate<E: Engine>(engine: &E, model: &str) -> Result<(), ConformanceFailure> {
    const CHECK: &str = "generate";
    let stream = engine
        .generate(
            standard_request(model, STANDARD_MAX_TOKENS),
            Context::new("conformance-generate"),
        )
        .await
        .map_err(|e| ConformanceFailure::GenerateFailed {
            check: CHECK,
            message: e.to_string(),
        })?;
    let items: Vec<Result<EngineOutput, EngineError>> = stream.collect().await;
    validate_stream(&items)
}

/// The single-stream rules, in the order Dynamo's kit applies them.
fn validate_stream(items: &[Result<EngineOutput, EngineError>]) -> Result<(), ConformanceFailure> {
    const CHECK: &str = "generate";
    if items.is_empty() {
        return Err(ConformanceFailure::NoChunksYielded { check: CHECK });
    }
    let mut chunks = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Ok(chunk) => chunks.push(chunk),
            Err(e) => {
                return Err(ConformanceFailure::StreamYieldedError {
                    check: CHECK,
                    message: e.to_string(),
                })
            }
        }
    }
    let total = chunks.len();
    let Some(terminal) = chunks.iter().position(|chunk| chunk.is_terminal()) else {
        return Err(ConformanceFailure::NoTerminalChunk { chunks: total });
    };
    if terminal + 1 < total {
        return Err(ConformanceFailure::ChunkAfterTerminal {
            position: terminal + 2,
            total,
        });
    }
    if let Some(usage) = &chunks[terminal].completion_usage {
        let chunked: usize = chunks.iter().map(|chunk| chunk.token_ids.len()).sum();
        if chunked != usage.completion_tokens as usize {
            return Err(ConformanceFailure::CompletionTokensMismatch {
                chunked,
                reported: usage.completion_tokens,
            });
        }
    }
    Ok(())
}

async fn check_concurrent_generate<E: Engine>(
    engine: &E,
    model: &str,
    concurrency: usize,
) -> Result<(), ConformanceFailure> {
    let requests = (1..=concurrency).map(|n| async move {
        let ctx = Context::new(format!("conformance-concurrent-{n}"));
        let stream = engine
            .generate(standard_request(model, STANDARD_MAX_TOKENS), ctx)
            .await
            .map_err(|e| format!("request {n} of {concurrency}: generate() failed: {e}"))?;
        // Drain like a real client, so engines that free per-request state at the
        // end of the stream are exercised too.
        let count = stream
            .fold(0usize, |count, _| async move { count + 1 })
            .await;
        if count == 0 {
            return Err(format!("request {n} of {concurrency}: stream was empty"));
        }
        Ok(())
    });
    for result in join_all(requests).await {
        result.map_err(ConformanceFailure::ConcurrentGenerateFailed)?;
    }
    Ok(())
}

async fn check_cancellation<E: Engine>(
    engine: &E,
    model: &str,
    options: &ConformanceOptions,
) -> Result<(), ConformanceFailure> {
    const CHECK: &str = "cancellation";
    let ctx = Context::new("conformance-cancellation");
    let mut stream = engine
        .generate(
            standard_request(model, options.long_max_tokens),
            ctx.clone(),
        )
        .await
        .map_err(|e| ConformanceFailure::GenerateFailed {
            check: CHECK,
            message: e.to_string(),
        })?;
    // Stop before the first poll: the engine must notice even a cancel that
    // arrives before it produced anything.
    ctx.stop_generating();

    let mut count = 0usize;
    let mut last = None;
    let drained = tokio::time::timeout(options.cancel_deadline, async {
        while let Some(item) = stream.next().await {
            count += 1;
            last = Some(item);
        }
    })
    .await;
    drop(stream);
    if drained.is_err() {
        return Err(ConformanceFailure::CancellationNotObserved {
            after: options.cancel_deadline,
        });
    }

    match last {
        None => Err(ConformanceFailure::NoChunksYielded { check: CHECK }),
        Some(Err(e)) => Err(ConformanceFailure::StreamYieldedError {
            check: CHECK,
            message: e.to_string(),
        }),
        Some(Ok(chunk)) => match chunk.finish_reason {
            Some(reason) if reason.is_cancelled() => Ok(()),
            Some(reason) => Err(ConformanceFailure::CancellationIgnored {
                observed: format!(
                    "it ended with finish_reason \"{reason}\" after {count} chunk(s)"
                ),
            }),
            None => Err(ConformanceFailure::CancellationIgnored {
                observed: format!(
                    "the stream ended without a terminal chunk after {count} chunk(s)"
                ),
            }),
        },
    }
}

async fn check_cleanup<E: Engine>(engine: &E) -> Result<(), ConformanceFailure> {
    engine
        .cleanup()
        .await
        .map_err(|e| ConformanceFailure::CleanupFailed(e.to_string()))?;
    engine
        .cleanup()
        .await
        .map_err(|e| ConformanceFailure::SecondCleanupFailed(e.to_string()))
}

async fn check_cleanup_without_start<E: Engine>(fresh: E) -> Result<(), ConformanceFailure> {
    fresh
        .cleanup()
        .await
        .map_err(|e| ConformanceFailure::CleanupWithoutStartFailed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_match_the_published_order() {
        let names: Vec<&str> = Check::ORDER.iter().map(|check| check.name()).collect();
        assert_eq!(names, CHECKS);
    }
}
