//! One deliberately broken engine per failure kind; the kit must name exactly that kind.

mod common;

use std::time::Duration;

use common::media::{EncodeFault, Encoder, RawFault, RawSteps};
use common::{Counters, Fault, Faulty};
use dynamo_conformance::{
    run_conformance, run_conformance_report, run_conformance_with, run_raw_conformance_report,
    CheckStatus, ConformanceFailure, ConformanceMode, ConformanceOptions, ALL_KINDS,
    DEFAULT_CANCEL_DEADLINE,
};

/// Short deadlines so engines that fail late do not slow the suite.
fn fast() -> ConformanceOptions {
    ConformanceOptions {
        cancel_deadline: Duration::from_millis(200),
        check_timeout: Some(Duration::from_secs(1)),
        ..ConformanceOptions::default()
    }
}

async fn failure_for(fault: Fault) -> ConformanceFailure {
    run_conformance_with(move || Faulty::new(fault), &fast())
        .await
        .expect_err("a broken engine must fail the kit")
}

async fn assert_kind(fault: Fault, kind: &str) -> ConformanceFailure {
    let failure = failure_for(fault).await;
    assert_eq!(failure.kind(), kind, "{fault:?} produced: {failure}");
    assert!(ALL_KINDS.contains(&failure.kind()));
    failure
}

#[tokio::test]
async fn start_error_is_start_failed() {
    let failure = assert_kind(Fault::StartFails, "StartFailed").await;
    assert_eq!(
        failure.to_string(),
        "start: start(0) failed: Unknown: model weights not found at /nowhere"
    );
}

#[tokio::test]
async fn empty_model_name_is_empty_model_in_config() {
    assert_kind(Fault::EmptyModel, "EmptyModelInConfig").await;
}

#[tokio::test]
async fn kv_event_sources_error_is_kv_event_sources_failed() {
    let failure = assert_kind(Fault::KvSourcesFail, "KvEventSourcesFailed").await;
    assert!(failure.to_string().contains("ZMQ bind failed"), "{failure}");
}

#[tokio::test]
async fn drifting_ranks_are_kv_event_sources_not_idempotent() {
    let failure = assert_kind(Fault::KvRanksDrift, "KvEventSourcesNotIdempotent").await;
    assert_eq!(
        failure,
        ConformanceFailure::KvEventSourcesNotIdempotent {
            first: vec![0, 1],
            second: vec![0, 2]
        }
    );
}

#[tokio::test]
async fn component_metrics_error_is_setup_metrics_failed() {
    let failure = assert_kind(Fault::MetricsSetupFails, "SetupMetricsFailed").await;
    assert!(
        failure.to_string().contains("metrics registry is closed"),
        "{failure}"
    );
}

#[tokio::test]
async fn drifting_metric_ranks_are_component_metrics_not_idempotent() {
    let failure = assert_kind(Fault::MetricsRanksDrift, "ComponentMetricsNotIdempotent").await;
    assert_eq!(
        failure,
        ConformanceFailure::ComponentMetricsNotIdempotent {
            first: vec![0],
            second: vec![0, 1]
        }
    );
}

#[tokio::test]
async fn generate_setup_error_is_generate_failed() {
    let failure = assert_kind(Fault::GenerateSetupFails, "GenerateFailed").await;
    assert_eq!(
        failure,
        ConformanceFailure::GenerateFailed {
            check: "generate",
            message: "InvalidArgument: sampling backend is not ready".into()
        }
    );
}

#[tokio::test]
async fn empty_stream_is_no_chunks_yielded() {
    let failure = assert_kind(Fault::EmptyStream, "NoChunksYielded").await;
    assert_eq!(
        failure,
        ConformanceFailure::NoChunksYielded { check: "generate" }
    );
}

#[tokio::test]
async fn error_item_is_stream_yielded_error() {
    let failure = assert_kind(Fault::ErrorItem, "StreamYieldedError").await;
    assert_eq!(
        failure.to_string(),
        "generate: the generate stream yielded an error: Unknown: CUDA error: out of memory"
    );
}

#[tokio::test]
async fn token_after_the_terminal_is_chunk_after_terminal() {
    let failure = assert_kind(Fault::TokenAfterTerminal, "ChunkAfterTerminal").await;
    assert_eq!(
        failure,
        ConformanceFailure::ChunkAfterTerminal {
            position: 9,
            total: 9
        }
    );
    assert!(failure.to_string().contains("(chunk 9 of 9)"), "{failure}");
}

#[tokio::test]
async fn stream_without_finish_reason_is_no_terminal_chunk() {
    let failure = assert_kind(Fault::NoTerminal, "NoTerminalChunk").await;
    assert_eq!(failure, ConformanceFailure::NoTerminalChunk { chunks: 8 });
}

#[tokio::test]
async fn overcounted_usage_is_completion_tokens_mismatch() {
    let failure = assert_kind(Fault::UsageOverCounts, "CompletionTokensMismatch").await;
    assert_eq!(
        failure,
        ConformanceFailure::CompletionTokensMismatch {
            chunked: 8,
            reported: 9
        }
    );
}

#[tokio::test]
async fn rejecting_a_second_request_is_concurrent_generate_failed() {
    let failure = assert_kind(Fault::RejectsConcurrent, "ConcurrentGenerateFailed").await;
    assert_eq!(
        failure.to_string(),
        "concurrent_generate: request 2 of 8: generate() failed: Unavailable: engine busy: one request at a time"
    );
}

#[tokio::test]
async fn empty_streams_under_load_are_concurrent_generate_failed() {
    let failure = assert_kind(Fault::EmptyWhenBusy, "ConcurrentGenerateFailed").await;
    assert_eq!(
        failure.to_string(),
        "concurrent_generate: request 2 of 8: stream was empty"
    );
}

#[tokio::test]
async fn a_hung_check_fails_at_the_check_timeout_naming_it_and_the_engine_is_still_cleaned_up() {
    let options = ConformanceOptions {
        check_timeout: Some(Duration::from_millis(200)),
        ..fast()
    };
    let counters = Counters::default();
    let report = run_conformance_report(
        || Faulty::wrap(counters.engine(), Fault::StreamHangs),
        &options,
    )
    .await;
    let statuses: Vec<(&str, CheckStatus)> =
        report.checks.iter().map(|c| (c.name, c.status)).collect();
    assert_eq!(
        statuses,
        [
            ("start", CheckStatus::Passed),
            ("kv_event_sources", CheckStatus::Passed),
            ("component_metrics", CheckStatus::Passed),
            ("generate", CheckStatus::Failed),
            ("concurrent_generate", CheckStatus::Skipped),
            ("cancellation", CheckStatus::Skipped),
            ("cleanup", CheckStatus::Skipped),
            ("cleanup_without_start", CheckStatus::Skipped),
        ]
    );
    assert_eq!(
        report.failure(),
        Some(&ConformanceFailure::CheckTimedOut {
            check: "generate",
            after: Duration::from_millis(200)
        })
    );
    // The failed run still released the engine it started.
    assert_eq!(counters.get(), (1, 1, 1));
}

#[tokio::test]
async fn ignoring_cancellation_is_reported_at_the_deadline() {
    let options = ConformanceOptions {
        cancel_deadline: Duration::from_millis(100),
        ..fast()
    };
    let report = run_conformance_report(|| Faulty::new(Fault::IgnoresCancel), &options).await;
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "cancellation")
        .unwrap();
    assert_eq!(
        check.failure,
        Some(ConformanceFailure::CancellationNotObserved {
            after: Duration::from_millis(100)
        })
    );
    assert!(
        check.elapsed >= Duration::from_millis(100) && check.elapsed < Duration::from_millis(1000),
        "took {:?}",
        check.elapsed
    );
}

#[tokio::test]
async fn ignoring_cancellation_is_reported_after_the_default_two_seconds() {
    let started = std::time::Instant::now();
    let failure = run_conformance(|| Faulty::new(Fault::IgnoresCancel))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(
        failure,
        ConformanceFailure::CancellationNotObserved {
            after: DEFAULT_CANCEL_DEADLINE
        }
    );
    assert_eq!(failure.kind(), "CancellationNotObserved");
    assert!(
        took >= DEFAULT_CANCEL_DEADLINE && took < Duration::from_millis(3500),
        "took {took:?}"
    );
}

#[tokio::test]
async fn finishing_with_length_after_a_stop_is_cancellation_ignored() {
    let failure = assert_kind(Fault::CancelEndsWithLength, "CancellationIgnored").await;
    assert_eq!(
        failure,
        ConformanceFailure::CancellationIgnored {
            observed: "it ended with finish_reason \"length\" after 1 chunk(s)".into()
        }
    );
}

#[tokio::test]
async fn ending_without_a_terminal_after_a_stop_is_cancellation_ignored() {
    let failure = assert_kind(Fault::CancelEndsWithoutTerminal, "CancellationIgnored").await;
    assert!(
        failure.to_string().contains("without a terminal chunk"),
        "{failure}"
    );
}

#[tokio::test]
async fn an_error_instead_of_a_cancelled_terminal_is_stream_yielded_error() {
    let failure = assert_kind(Fault::CancelYieldsError, "StreamYieldedError").await;
    assert_eq!(
        failure,
        ConformanceFailure::StreamYieldedError {
            check: "cancellation",
            message: "Unknown: request was cancelled".into()
        }
    );
}

#[tokio::test]
async fn nothing_at_all_after_a_stop_is_no_chunks_yielded() {
    let failure = assert_kind(Fault::CancelYieldsNothing, "NoChunksYielded").await;
    assert_eq!(
        failure,
        ConformanceFailure::NoChunksYielded {
            check: "cancellation"
        }
    );
}

#[tokio::test]
async fn cleanup_error_is_cleanup_failed() {
    assert_kind(Fault::CleanupFails, "CleanupFailed").await;
}

#[tokio::test]
async fn non_idempotent_cleanup_is_second_cleanup_failed() {
    let failure = assert_kind(Fault::SecondCleanupFails, "SecondCleanupFailed").await;
    assert!(
        failure
            .to_string()
            .contains("engine handle already released"),
        "{failure}"
    );
}

#[tokio::test]
async fn cleanup_that_needs_a_start_is_cleanup_without_start_failed() {
    assert_kind(Fault::CleanupRequiresStart, "CleanupWithoutStartFailed").await;
}

#[tokio::test]
async fn every_kind_is_produced_by_some_broken_engine() {
    let faults = [
        Fault::StartFails,
        Fault::EmptyModel,
        Fault::KvSourcesFail,
        Fault::KvRanksDrift,
        Fault::MetricsSetupFails,
        Fault::MetricsRanksDrift,
        Fault::GenerateSetupFails,
        Fault::EmptyStream,
        Fault::ErrorItem,
        Fault::TokenAfterTerminal,
        Fault::NoTerminal,
        Fault::UsageOverCounts,
        Fault::RejectsConcurrent,
        Fault::IgnoresCancel,
        Fault::CancelEndsWithLength,
        Fault::CleanupFails,
        Fault::SecondCleanupFails,
        Fault::CleanupRequiresStart,
        Fault::StreamHangs,
    ];
    let mut seen = vec![];
    for fault in faults {
        seen.push(failure_for(fault).await.kind());
    }
    let encode = ConformanceOptions {
        mode: ConformanceMode::Encode,
        ..fast()
    };
    for fault in [
        EncodeFault::TwoChunks,
        EncodeFault::EndsWithLength,
        EncodeFault::CarriesTokens,
        EncodeFault::NoEncoderResult,
        EncodeFault::UsageCountsCompletion,
    ] {
        let report = run_conformance_report(move || Encoder(fault), &encode).await;
        seen.extend(report.failure().map(ConformanceFailure::kind));
    }
    let raw = run_raw_conformance_report(|| RawSteps(RawFault::AdvertisesLlm), &fast()).await;
    seen.extend(raw.failure().map(ConformanceFailure::kind));
    let mut expected = ALL_KINDS.to_vec();
    expected.sort_unstable();
    seen.sort_unstable();
    assert_eq!(seen, expected);
}
