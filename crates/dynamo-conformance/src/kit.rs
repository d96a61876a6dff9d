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
use serde_json::{json, Map, Value};

use crate::engine::{Engine, EngineError, RawEngine};
use crate::failure::ConformanceFailure;
use crate::types::{EngineConfig, EngineOutput, GenerateRequest, KvEventSource};
use dynamo_lifecycle::FinishReason;

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

/// Check names of the raw-engine suite, in the order they run. Raw engines have no KV events
/// and no component metrics, so those checks do not apply.
pub const RAW_CHECKS: &[&str] = &[
    "start",
    "generate",
    "concurrent_generate",
    "cancellation",
    "cleanup",
    "cleanup_without_start",
];

/// `steps` of the raw cancellation request: a stream only a cancel ends in time.
pub const RAW_LONG_STEPS: u64 = 100_000;

/// Prompt of every request the kit sends.
const STANDARD_PROMPT: [u32; 3] = [1, 2, 3];
/// Token budget of the ordinary (non-cancellation) requests.
const STANDARD_MAX_TOKENS: u32 = 8;

/// Which rules the token-engine suite applies to every response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConformanceMode {
    /// A token generator (aggregated, prefill or decode worker).
    #[default]
    Token,
    /// An encode worker: each request carries an image and is answered by exactly one `stop`
    /// chunk with no tokens and an object `encoder_result` (the handoff to the next worker).
    Encode,
}

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
    /// Token or encode rules (default token); the raw suite ignores it.
    pub mode: ConformanceMode,
}

impl Default for ConformanceOptions {
    fn default() -> Self {
        ConformanceOptions {
            cancel_deadline: DEFAULT_CANCEL_DEADLINE,
            concurrency: DEFAULT_CONCURRENCY,
            long_max_tokens: DEFAULT_LONG_MAX_TOKENS,
            check_timeout: None,
            mode: ConformanceMode::Token,
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

/// [`run_conformance`] for an engine serving `--disaggregation-mode encode`: every request
/// carries an image and must be answered by one `stop` chunk holding an object `encoder_result`.
pub async fn run_encode_conformance<E, F>(factory: F) -> Result<(), ConformanceFailure>
where
    E: Engine,
    F: FnMut() -> E,
{
    let options = ConformanceOptions {
        mode: ConformanceMode::Encode,
        ..ConformanceOptions::default()
    };
    run_conformance_with(factory, &options).await
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

/// Runs the checks in [`CHECKS`] order and reports each one; `options.mode` picks the token or
/// the encode rules.
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
    let mode = options.mode;
    run_suite(
        move || LlmSubject {
            engine: factory(),
            mode,
        },
        options,
    )
    .await
}

/// Runs the raw-engine checks ([`RAW_CHECKS`]) with default options and returns the first failure.
pub async fn run_raw_conformance<E, F>(factory: F) -> Result<(), ConformanceFailure>
where
    E: RawEngine,
    F: FnMut() -> E,
{
    run_raw_conformance_report(factory, &ConformanceOptions::default())
        .await
        .into_result()
}

/// Runs the checks in [`RAW_CHECKS`] order against a raw media engine and reports each one
/// (`options.mode` and `long_max_tokens` do not apply; the cancellation request asks for
/// [`RAW_LONG_STEPS`] steps instead).
pub async fn run_raw_conformance_report<E, F>(
    mut factory: F,
    options: &ConformanceOptions,
) -> ConformanceReport
where
    E: RawEngine,
    F: FnMut() -> E,
{
    run_suite(move || RawSubject(factory()), options).await
}

/// The runner shared by every suite: the checks in order, skipping the rest after a failure.
async fn run_suite<S, F>(mut factory: F, options: &ConformanceOptions) -> ConformanceReport
where
    S: Subject,
    F: FnMut() -> S,
{
    let subject = factory();
    let order = subject.order();
    let mut model = String::new();
    let mut needs_cleanup = false;
    let mut checks = Vec::with_capacity(order.len());
    let mut failed = false;

    for &check in order {
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
                Check::CleanupWithoutStart => factory()
                    .cleanup()
                    .await
                    .map_err(|e| ConformanceFailure::CleanupWithoutStartFailed(e.to_string())),
                _ => subject.run(check, &mut model, options).await,
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
        let _ = within(options.check_timeout, subject.cleanup()).await;
    }
    ConformanceReport { checks }
}

/// One engine under test as the runner sees it: which checks apply and how each one runs.
#[async_trait::async_trait]
trait Subject: Send + Sync {
    fn order(&self) -> &'static [Check];
    /// Runs `check` (never `CleanupWithoutStart`, which needs a fresh engine); `Start` sets `model`.
    async fn run(
        &self,
        check: Check,
        model: &mut String,
        options: &ConformanceOptions,
    ) -> Result<(), ConformanceFailure>;
    async fn cleanup(&self) -> Result<(), EngineError>;
}

struct LlmSubject<E> {
    engine: E,
    mode: ConformanceMode,
}

#[async_trait::async_trait]
impl<E: Engine> Subject for LlmSubject<E> {
    fn order(&self) -> &'static [Check] {
        &Check::ORDER
    }

    async fn run(
        &self,
        check: Check,
        model: &mut String,
        options: &ConformanceOptions,
    ) -> Result<(), ConformanceFailure> {
        let (engine, mode) = (&self.engine, self.mode);
        match check {
            Check::Start => {
                *model = check_start(engine.start(0).await)?;
                Ok(())
            }
            Check::KvEventSources => check_kv_event_sources(engine).await,
            Check::ComponentMetrics => check_component_metrics(engine).await,
            Check::Generate => check_generate(engine, model, mode).await,
            Check::ConcurrentGenerate => {
                check_concurrent_generate(engine, model, mode, options.concurrency).await
            }
            Check::Cancellation => check_cancellation(engine, model, mode, options).await,
            Check::Cleanup => check_cleanup(|| engine.cleanup()).await,
            Check::CleanupWithoutStart => unreachable!("the runner checks a fresh engine"),
        }
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        self.engine.cleanup().await
    }
}

struct RawSubject<E>(E);

#[async_trait::async_trait]
impl<E: RawEngine> Subject for RawSubject<E> {
    fn order(&self) -> &'static [Check] {
        &Check::RAW_ORDER
    }

    async fn run(
        &self,
        check: Check,
        model: &mut String,
        options: &ConformanceOptions,
    ) -> Result<(), ConformanceFailure> {
        let engine = &self.0;
        match check {
            Check::Start => {
                let config = engine.start(0).await;
                let advertises_llm = matches!(&config, Ok(c) if c.llm.is_some());
                *model = check_start(config)?;
                if advertises_llm {
                    return Err(ConformanceFailure::RawEngineAdvertisedLlmRegistration);
                }
                Ok(())
            }
            Check::Generate => check_raw_generate(engine).await,
            Check::ConcurrentGenerate => {
                check_raw_concurrent_generate(engine, options.concurrency).await
            }
            Check::Cancellation => check_raw_cancellation(engine, options).await,
            Check::Cleanup => check_cleanup(|| engine.cleanup()).await,
            _ => unreachable!("{} is not a raw-engine check", check.name()),
        }
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        self.0.cleanup().await
    }
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
    const RAW_ORDER: [Check; 6] = [
        Check::Start,
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

/// The request of every check in `mode`; `max_tokens` applies to token requests only (an
/// encoder answers with one chunk whatever the budget).
fn request_for(model: &str, mode: ConformanceMode, max_tokens: u32) -> GenerateRequest {
    match mode {
        ConformanceMode::Token => standard_request(model, max_tokens),
        ConformanceMode::Encode => {
            let mut request = standard_request(model, STANDARD_MAX_TOKENS);
            // One tiny inline image, serialized as Dynamo's `MultimodalData::Url`.
            request.extra.insert(
                "multi_modal_data".into(),
                json!({"image": [{"Url": "data:image/png;base64,AA=="}]}),
            );
            request
                .extra
                .insert("mm_processor_kwargs".into(), json!({"min_pixels": 64}));
            request
        }
    }
}

/// Returns the configured model name, which every later request uses.
fn check_start(started: Result<EngineConfig, EngineError>) -> Result<String, ConformanceFailure> {
    let config = started.map_err(|e| ConformanceFailure::StartFailed(e.to_string()))?;
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

async fn check_generate<E: Engine>(
    engine: &E,
    model: &str,
    mode: ConformanceMode,
) -> Result<(), ConformanceFailure> {
    const CHECK: &str = "generate";
    let stream = engine
        .generate(
            request_for(model, mode, STANDARD_MAX_TOKENS),
            Context::new("conformance-generate"),
        )
        .await
        .map_err(|e| ConformanceFailure::GenerateFailed {
            check: CHECK,
            message: e.to_string(),
        })?;
    let items: Vec<Result<EngineOutput, EngineError>> = stream.collect().await;
    match mode {
        ConformanceMode::Token => validate_stream(&items),
        ConformanceMode::Encode => validate_encode_stream(CHECK, &items),
    }
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

/// The encode handoff rules, in the order Dynamo's kit applies them.
fn validate_encode_stream(
    check: &'static str,
    items: &[Result<EngineOutput, EngineError>],
) -> Result<(), ConformanceFailure> {
    let [item] = items else {
        return Err(ConformanceFailure::EncodeChunkCount {
            check,
            count: items.len(),
        });
    };
    let chunk = item
        .as_ref()
        .map_err(|e| ConformanceFailure::StreamYieldedError {
            check,
            message: e.to_string(),
        })?;
    match &chunk.finish_reason {
        Some(FinishReason::Stop) => {}
        Some(reason) => {
            return Err(ConformanceFailure::EncodeTerminalExpected {
                check,
                observed: format!("it had \"{reason}\""),
            })
        }
        None => {
            return Err(ConformanceFailure::EncodeTerminalExpected {
                check,
                observed: "it had none".into(),
            })
        }
    }
    if !chunk.token_ids.is_empty() {
        return Err(ConformanceFailure::EncodeTokensNotEmpty {
            check,
            count: chunk.token_ids.len(),
        });
    }
    match chunk.extra.get("encoder_result") {
        Some(Value::Object(_)) => {}
        None | Some(Value::Null) => {
            return Err(ConformanceFailure::EncoderResultExpectedObject {
                check,
                observed: "it had none".into(),
            })
        }
        Some(other) => {
            return Err(ConformanceFailure::EncoderResultExpectedObject {
                check,
                observed: format!("it was {}", json_type(other)),
            })
        }
    }
    if let Some(usage) = &chunk.completion_usage {
        let expected_prompt = STANDARD_PROMPT.len() as u32;
        if usage.prompt_tokens != expected_prompt
            || usage.completion_tokens != 0
            || usage.total_tokens != expected_prompt
        {
            return Err(ConformanceFailure::EncodeUsageMismatch {
                check,
                expected_prompt,
                prompt: usage.prompt_tokens,
                completion: usage.completion_tokens,
                total: usage.total_tokens,
            });
        }
    }
    Ok(())
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

async fn check_concurrent_generate<E: Engine>(
    engine: &E,
    model: &str,
    mode: ConformanceMode,
    concurrency: usize,
) -> Result<(), ConformanceFailure> {
    const CHECK: &str = "concurrent_generate";
    let failed = |n: usize, what: String| {
        ConformanceFailure::ConcurrentGenerateFailed(format!(
            "request {n} of {concurrency}: {what}"
        ))
    };
    let requests = (1..=concurrency).map(|n| async move {
        let ctx = Context::new(format!("conformance-concurrent-{n}"));
        let stream = engine
            .generate(request_for(model, mode, STANDARD_MAX_TOKENS), ctx)
            .await
            .map_err(|e| failed(n, format!("generate() failed: {e}")))?;
        match mode {
            ConformanceMode::Token => {
                // Drain like a real client, so engines that free per-request state at the
                // end of the stream are exercised too.
                let count = stream
                    .fold(0usize, |count, _| async move { count + 1 })
                    .await;
                if count == 0 {
                    return Err(failed(n, "stream was empty".into()));
                }
                Ok(())
            }
            ConformanceMode::Encode => {
                let items: Vec<_> = stream.collect().await;
                validate_encode_stream(CHECK, &items)
            }
        }
    });
    join_all(requests).await.into_iter().collect()
}

async fn check_cancellation<E: Engine>(
    engine: &E,
    model: &str,
    mode: ConformanceMode,
    options: &ConformanceOptions,
) -> Result<(), ConformanceFailure> {
    const CHECK: &str = "cancellation";
    let ctx = Context::new("conformance-cancellation");
    let mut stream = engine
        .generate(
            request_for(model, mode, options.long_max_tokens),
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

/// Raw engines read whatever keys they know; `steps` asks for a long stream.
fn raw_request(steps: Option<u64>) -> Map<String, Value> {
    let mut request = Map::new();
    request.insert("prompt".into(), json!("ping"));
    if let Some(steps) = steps {
        request.insert("steps".into(), json!(steps));
    }
    request
}

async fn check_raw_generate<E: RawEngine>(engine: &E) -> Result<(), ConformanceFailure> {
    const CHECK: &str = "generate";
    let stream = engine
        .generate(raw_request(None), Context::new("conformance-generate"))
        .await
        .map_err(|e| ConformanceFailure::GenerateFailed {
            check: CHECK,
            message: e.to_string(),
        })?;
    let items: Vec<_> = stream.collect().await;
    if items.is_empty() {
        return Err(ConformanceFailure::NoChunksYielded { check: CHECK });
    }
    match items.into_iter().find_map(Result::err) {
        Some(e) => Err(ConformanceFailure::StreamYieldedError {
            check: CHECK,
            message: e.to_string(),
        }),
        None => Ok(()),
    }
}

async fn check_raw_concurrent_generate<E: RawEngine>(
    engine: &E,
    concurrency: usize,
) -> Result<(), ConformanceFailure> {
    let requests = (1..=concurrency).map(|n| async move {
        let ctx = Context::new(format!("conformance-concurrent-{n}"));
        let stream = engine
            .generate(raw_request(None), ctx)
            .await
            .map_err(|e| format!("request {n} of {concurrency}: generate() failed: {e}"))?;
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

/// Raw chunks have no finish_reason, so ending within the deadline is the whole rule.
async fn check_raw_cancellation<E: RawEngine>(
    engine: &E,
    options: &ConformanceOptions,
) -> Result<(), ConformanceFailure> {
    let ctx = Context::new("conformance-cancellation");
    let mut stream = engine
        .generate(raw_request(Some(RAW_LONG_STEPS)), ctx.clone())
        .await
        .map_err(|e| ConformanceFailure::GenerateFailed {
            check: "cancellation",
            message: e.to_string(),
        })?;
    ctx.stop_generating();
    tokio::time::timeout(options.cancel_deadline, async {
        while stream.next().await.is_some() {}
    })
    .await
    .map_err(|_| ConformanceFailure::CancellationNotObserved {
        after: options.cancel_deadline,
    })
}

/// `cleanup` must succeed and then succeed again.
async fn check_cleanup<F, Fut>(mut cleanup: F) -> Result<(), ConformanceFailure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), EngineError>>,
{
    cleanup()
        .await
        .map_err(|e| ConformanceFailure::CleanupFailed(e.to_string()))?;
    cleanup()
        .await
        .map_err(|e| ConformanceFailure::SecondCleanupFailed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_match_the_published_order() {
        let names: Vec<&str> = Check::ORDER.iter().map(|check| check.name()).collect();
        assert_eq!(names, CHECKS);
        let raw: Vec<&str> = Check::RAW_ORDER.iter().map(|check| check.name()).collect();
        assert_eq!(raw, RAW_CHECKS);
    }
}
