//! The rules an engine can break, one variant each, named as in Dynamo's kit so
//! a failure reads the same whichever language the engine is written in.

use std::time::Duration;

/// The first contract violation the kit found. Messages say what was observed.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConformanceFailure {
    /// `start(0)` returned an error.
    #[error("start: start(0) failed: {0}")]
    StartFailed(String),

    /// `start(0)` succeeded but named no model, so nothing could be registered.
    #[error("start: start(0) returned an EngineConfig whose `model` is empty")]
    EmptyModelInConfig,

    /// `generate` failed before handing back a stream.
    #[error("{check}: generate() failed before returning a stream: {message}")]
    GenerateFailed {
        /// The check that issued the request (`generate` or `cancellation`).
        check: &'static str,
        /// The engine's error.
        message: String,
    },

    /// The stream ended without yielding anything, not even a terminal.
    #[error("{check}: the generate stream ended without yielding a single chunk")]
    NoChunksYielded {
        /// The check that issued the request (`generate` or `cancellation`).
        check: &'static str,
    },

    /// Something followed the terminal chunk (a chunk with `finish_reason`, or an error).
    #[error(
        "generate: the stream yielded a chunk after the terminal chunk (chunk {position} of {total})"
    )]
    ChunkAfterTerminal {
        /// 1-based position of the first chunk after the terminal.
        position: usize,
        /// Chunks in the stream.
        total: usize,
    },

    /// The stream ended without a chunk carrying `finish_reason`.
    #[error(
        "generate: the stream ended after {chunks} chunk(s) without a terminal chunk (none set finish_reason)"
    )]
    NoTerminalChunk {
        /// Chunks in the stream.
        chunks: usize,
    },

    /// The stream yielded an `Err` item.
    #[error("{check}: the generate stream yielded an error: {message}")]
    StreamYieldedError {
        /// The check that issued the request (`generate` or `cancellation`).
        check: &'static str,
        /// The engine's error.
        message: String,
    },

    /// The terminal's `completion_usage.completion_tokens` disagrees with the tokens streamed.
    #[error(
        "generate: completion_usage.completion_tokens is {reported} but the chunks carried {chunked} token id(s)"
    )]
    CompletionTokensMismatch {
        /// Token ids summed over all chunks.
        chunked: usize,
        /// What the terminal reported.
        reported: u32,
    },

    /// One of the interleaved requests failed to set up or yielded nothing.
    #[error("concurrent_generate: {0}")]
    ConcurrentGenerateFailed(String),

    /// The stream was still running `after` the request was stopped.
    #[error(
        "cancellation: the stream had not ended {after:?} after stop_generating() was called before its first poll"
    )]
    CancellationNotObserved {
        /// The deadline that passed.
        after: Duration,
    },

    /// The stream ended promptly but not with a `cancelled` terminal.
    #[error("cancellation: expected the stream to end with a `cancelled` terminal after stop_generating(), but {observed}")]
    CancellationIgnored {
        /// What the stream ended with instead.
        observed: String,
    },

    /// The first `cleanup()` failed.
    #[error("cleanup: cleanup() after a successful start failed: {0}")]
    CleanupFailed(String),

    /// A second `cleanup()` in a row failed; cleanup must be idempotent.
    #[error("cleanup: a second cleanup() in a row failed (cleanup must be idempotent): {0}")]
    SecondCleanupFailed(String),

    /// `cleanup()` on a never-started engine failed; cleanup must be null-safe.
    #[error("cleanup_without_start: cleanup() on a never-started engine failed: {0}")]
    CleanupWithoutStartFailed(String),

    /// `kv_event_sources()` returned an error.
    #[error("kv_event_sources: kv_event_sources() failed: {0}")]
    KvEventSourcesFailed(String),

    /// Two calls to `kv_event_sources()` reported different rank sequences.
    #[error(
        "kv_event_sources: two calls returned different dp_rank sequences: first {first:?}, second {second:?}"
    )]
    KvEventSourcesNotIdempotent {
        /// Ranks from the first call, in order.
        first: Vec<u32>,
        /// Ranks from the second call, in order.
        second: Vec<u32>,
    },

    /// `component_metrics_dp_ranks()` returned an error (stock's name: the metrics setup failed).
    #[error("component_metrics: component_metrics_dp_ranks() failed: {0}")]
    SetupMetricsFailed(String),

    /// Two calls to `component_metrics_dp_ranks()` reported different rank sets.
    #[error(
        "component_metrics: two calls returned different dp_ranks (the set must stay the same for the engine's lifetime): first {first:?}, second {second:?}"
    )]
    ComponentMetricsNotIdempotent {
        /// Ranks from the first call, in order.
        first: Vec<u32>,
        /// Ranks from the second call, in order.
        second: Vec<u32>,
    },

    /// A raw engine's `start` returned a config with `llm` set.
    #[error("start: the raw engine's EngineConfig sets `llm`; a raw media engine has no token pipeline to register, so it must leave `llm` unset")]
    RawEngineAdvertisedLlmRegistration,

    /// An encode request yielded other than exactly one item.
    #[error("{check}: an encode request must yield exactly one chunk (the terminal handoff), but it yielded {count}")]
    EncodeChunkCount {
        /// The check that issued the request.
        check: &'static str,
        /// Items in the stream.
        count: usize,
    },

    /// The encode handoff did not end with `finish_reason` `stop`.
    #[error("{check}: the encode handoff chunk must have finish_reason \"stop\", but {observed}")]
    EncodeTerminalExpected {
        /// The check that issued the request.
        check: &'static str,
        /// What the chunk carried instead.
        observed: String,
    },

    /// The encode handoff carried generated tokens.
    #[error("{check}: the encode handoff chunk must carry no token_ids (an encoder generates none), but it carried {count}")]
    EncodeTokensNotEmpty {
        /// The check that issued the request.
        check: &'static str,
        /// Token ids in the chunk.
        count: usize,
    },

    /// The encode handoff's `encoder_result` is missing or not a JSON object.
    #[error(
        "{check}: the encode handoff chunk must carry an object `encoder_result`, but {observed}"
    )]
    EncoderResultExpectedObject {
        /// The check that issued the request.
        check: &'static str,
        /// What was there instead.
        observed: String,
    },

    /// The encode handoff's usage does not describe a prompt-only response.
    #[error("{check}: the encode handoff's completion_usage must be prompt {expected_prompt}, completion 0, total {expected_prompt}, but it was prompt {prompt}, completion {completion}, total {total}")]
    EncodeUsageMismatch {
        /// The check that issued the request.
        check: &'static str,
        /// Prompt tokens the request carried.
        expected_prompt: u32,
        /// Reported prompt tokens.
        prompt: u32,
        /// Reported completion tokens.
        completion: u32,
        /// Reported total tokens.
        total: u32,
    },

    /// A check did not finish within `ConformanceOptions::check_timeout`.
    #[error("{check}: the check did not finish within {after:?}; the engine hung or is slower than the check timeout allows (raise it)")]
    CheckTimedOut {
        /// The check that was running.
        check: &'static str,
        /// The timeout that passed.
        after: Duration,
    },
}

/// Every value [`ConformanceFailure::kind`] can return, for bindings that
/// re-export the kinds as constants.
pub const ALL_KINDS: &[&str] = &[
    "StartFailed",
    "EmptyModelInConfig",
    "GenerateFailed",
    "NoChunksYielded",
    "ChunkAfterTerminal",
    "NoTerminalChunk",
    "StreamYieldedError",
    "CompletionTokensMismatch",
    "ConcurrentGenerateFailed",
    "CancellationNotObserved",
    "CancellationIgnored",
    "CleanupFailed",
    "SecondCleanupFailed",
    "CleanupWithoutStartFailed",
    "KvEventSourcesFailed",
    "KvEventSourcesNotIdempotent",
    "SetupMetricsFailed",
    "ComponentMetricsNotIdempotent",
    "RawEngineAdvertisedLlmRegistration",
    "EncodeChunkCount",
    "EncodeTerminalExpected",
    "EncodeTokensNotEmpty",
    "EncoderResultExpectedObject",
    "EncodeUsageMismatch",
    "CheckTimedOut",
];

impl ConformanceFailure {
    /// The variant name, stable across releases, for matching without parsing messages.
    pub fn kind(&self) -> &'static str {
        match self {
            ConformanceFailure::StartFailed(_) => "StartFailed",
            ConformanceFailure::EmptyModelInConfig => "EmptyModelInConfig",
            ConformanceFailure::GenerateFailed { .. } => "GenerateFailed",
            ConformanceFailure::NoChunksYielded { .. } => "NoChunksYielded",
            ConformanceFailure::ChunkAfterTerminal { .. } => "ChunkAfterTerminal",
            ConformanceFailure::NoTerminalChunk { .. } => "NoTerminalChunk",
            ConformanceFailure::StreamYieldedError { .. } => "StreamYieldedError",
            ConformanceFailure::CompletionTokensMismatch { .. } => "CompletionTokensMismatch",
            ConformanceFailure::ConcurrentGenerateFailed(_) => "ConcurrentGenerateFailed",
            ConformanceFailure::CancellationNotObserved { .. } => "CancellationNotObserved",
            ConformanceFailure::CancellationIgnored { .. } => "CancellationIgnored",
            ConformanceFailure::CleanupFailed(_) => "CleanupFailed",
            ConformanceFailure::SecondCleanupFailed(_) => "SecondCleanupFailed",
            ConformanceFailure::CleanupWithoutStartFailed(_) => "CleanupWithoutStartFailed",
            ConformanceFailure::CheckTimedOut { .. } => "CheckTimedOut",
            ConformanceFailure::KvEventSourcesFailed(_) => "KvEventSourcesFailed",
            ConformanceFailure::KvEventSourcesNotIdempotent { .. } => "KvEventSourcesNotIdempotent",
            ConformanceFailure::SetupMetricsFailed(_) => "SetupMetricsFailed",
            ConformanceFailure::ComponentMetricsNotIdempotent { .. } => {
                "ComponentMetricsNotIdempotent"
            }
            ConformanceFailure::RawEngineAdvertisedLlmRegistration => {
                "RawEngineAdvertisedLlmRegistration"
            }
            ConformanceFailure::EncodeChunkCount { .. } => "EncodeChunkCount",
            ConformanceFailure::EncodeTerminalExpected { .. } => "EncodeTerminalExpected",
            ConformanceFailure::EncodeTokensNotEmpty { .. } => "EncodeTokensNotEmpty",
            ConformanceFailure::EncoderResultExpectedObject { .. } => "EncoderResultExpectedObject",
            ConformanceFailure::EncodeUsageMismatch { .. } => "EncodeUsageMismatch",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of_each() -> Vec<ConformanceFailure> {
        use ConformanceFailure::*;
        vec![
            StartFailed("x".into()),
            EmptyModelInConfig,
            GenerateFailed {
                check: "generate",
                message: "x".into(),
            },
            NoChunksYielded { check: "generate" },
            ChunkAfterTerminal {
                position: 5,
                total: 9,
            },
            NoTerminalChunk { chunks: 3 },
            StreamYieldedError {
                check: "cancellation",
                message: "x".into(),
            },
            CompletionTokensMismatch {
                chunked: 8,
                reported: 9,
            },
            ConcurrentGenerateFailed("x".into()),
            CancellationNotObserved {
                after: Duration::from_secs(2),
            },
            CancellationIgnored {
                observed: "x".into(),
            },
            CleanupFailed("x".into()),
            SecondCleanupFailed("x".into()),
            CleanupWithoutStartFailed("x".into()),
            KvEventSourcesFailed("x".into()),
            KvEventSourcesNotIdempotent {
                first: vec![0],
                second: vec![1],
            },
            SetupMetricsFailed("x".into()),
            ComponentMetricsNotIdempotent {
                first: vec![0, 1],
                second: vec![0],
            },
            RawEngineAdvertisedLlmRegistration,
            EncodeChunkCount {
                check: "generate",
                count: 2,
            },
            EncodeTerminalExpected {
                check: "generate",
                observed: "x".into(),
            },
            EncodeTokensNotEmpty {
                check: "generate",
                count: 1,
            },
            EncoderResultExpectedObject {
                check: "generate",
                observed: "x".into(),
            },
            EncodeUsageMismatch {
                check: "concurrent_generate",
                expected_prompt: 3,
                prompt: 3,
                completion: 1,
                total: 4,
            },
            CheckTimedOut {
                check: "generate",
                after: Duration::from_secs(30),
            },
        ]
    }

    #[test]
    fn all_kinds_lists_each_variant_once_in_declaration_order() {
        let kinds: Vec<&str> = one_of_each().iter().map(ConformanceFailure::kind).collect();
        assert_eq!(kinds, ALL_KINDS);
    }

    #[test]
    fn messages_name_the_check_and_what_was_seen() {
        let failures = one_of_each();
        assert_eq!(
            failures[4].to_string(),
            "generate: the stream yielded a chunk after the terminal chunk (chunk 5 of 9)"
        );
        assert_eq!(
            failures[9].to_string(),
            "cancellation: the stream had not ended 2s after stop_generating() was called before its first poll"
        );
        assert!(failures[6].to_string().starts_with("cancellation: "));
        assert_eq!(
            failures[15].to_string(),
            "kv_event_sources: two calls returned different dp_rank sequences: first [0], second [1]"
        );
        assert_eq!(
            failures[17].to_string(),
            "component_metrics: two calls returned different dp_ranks (the set must stay the same for the engine's lifetime): first [0, 1], second [0]"
        );
        assert_eq!(
            failures[23].to_string(),
            "concurrent_generate: the encode handoff's completion_usage must be prompt 3, completion 0, total 3, but it was prompt 3, completion 1, total 4"
        );
        assert_eq!(
            failures[24].to_string(),
            "generate: the check did not finish within 30s; the engine hung or is slower than the check timeout allows (raise it)"
        );
    }
}
