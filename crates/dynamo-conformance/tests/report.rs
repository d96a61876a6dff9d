//! The report: skipping after a failure, best-effort cleanup, and the JSON handed to JS.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{Counters, Fault, Faulty, RotatingTokens};
use dynamo_conformance::{
    run_conformance_report, run_conformance_with, CheckOutcome, CheckStatus, ConformanceFailure,
    ConformanceOptions, ConformanceReport, CHECKS,
};
use serde_json::json;

#[tokio::test]
async fn checks_after_the_first_failure_are_skipped() {
    let report = run_conformance_report(
        || Faulty::new(Fault::GenerateSetupFails),
        &ConformanceOptions::default(),
    )
    .await;
    let statuses: Vec<(&str, CheckStatus)> =
        report.checks.iter().map(|c| (c.name, c.status)).collect();
    assert_eq!(
        statuses,
        vec![
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
    assert!(report.checks[4..]
        .iter()
        .all(|c| c.failure.is_none() && c.elapsed == Duration::ZERO));
    assert!(!report.passed());
    assert_eq!(
        report.failure().map(ConformanceFailure::kind),
        Some("GenerateFailed")
    );
}

#[tokio::test]
async fn run_conformance_returns_the_failure_the_report_names() {
    let options = ConformanceOptions::default();
    let report = run_conformance_report(|| Faulty::new(Fault::NoTerminal), &options).await;
    let result = run_conformance_with(|| Faulty::new(Fault::NoTerminal), &options).await;
    assert_eq!(report.into_result(), result);
    assert_eq!(result.unwrap_err().kind(), "NoTerminalChunk");
}

#[tokio::test]
async fn a_failed_run_still_cleans_up_the_started_engine_once() {
    let counters = Counters::default();
    let factory = {
        let counters = counters.clone();
        move || Faulty::wrap(counters.engine(), Fault::ErrorItem)
    };
    let report = run_conformance_report(factory, &ConformanceOptions::default()).await;
    assert_eq!(report.failure().unwrap().kind(), "StreamYieldedError");
    // No fresh engine once a check failed; the started one is cleaned up once.
    assert_eq!(counters.get(), (1, 1, 1));
}

#[tokio::test]
async fn a_failed_start_is_still_followed_by_cleanup() {
    let cleanup_calls = Arc::new(AtomicUsize::new(0));
    let factory = {
        let cleanup_calls = cleanup_calls.clone();
        move || {
            Faulty::wrap(
                RotatingTokens::default().counting(&cleanup_calls, &Arc::default()),
                Fault::StartFails,
            )
        }
    };
    run_conformance_with(factory, &ConformanceOptions::default())
        .await
        .unwrap_err();
    assert_eq!(cleanup_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_passing_report_serializes_every_check_with_its_time() {
    let report =
        run_conformance_report(RotatingTokens::default, &ConformanceOptions::default()).await;
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(value["passed"], json!(true));
    let checks = value["checks"].as_array().unwrap();
    assert_eq!(checks.len(), CHECKS.len());
    for (check, name) in checks.iter().zip(CHECKS) {
        let object = check.as_object().unwrap();
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["elapsed_ms", "name", "status"]);
        assert_eq!(check["name"], json!(name));
        assert_eq!(check["status"], json!("passed"));
        assert!(check["elapsed_ms"].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn a_failing_report_serializes_kind_and_message_and_bare_skipped_rows() {
    let failure = ConformanceFailure::NoTerminalChunk { chunks: 8 };
    let report = ConformanceReport {
        checks: vec![
            CheckOutcome {
                name: "start",
                status: CheckStatus::Passed,
                failure: None,
                elapsed: Duration::from_micros(1_250),
            },
            CheckOutcome {
                name: "generate",
                status: CheckStatus::Failed,
                failure: Some(failure.clone()),
                elapsed: Duration::from_millis(3),
            },
            CheckOutcome {
                name: "cleanup",
                status: CheckStatus::Skipped,
                failure: None,
                elapsed: Duration::ZERO,
            },
        ],
    };
    assert_eq!(
        serde_json::to_value(&report).unwrap(),
        json!({
            "passed": false,
            "checks": [
                {"name": "start", "status": "passed", "elapsed_ms": 1.25},
                {
                    "name": "generate",
                    "status": "failed",
                    "elapsed_ms": 3.0,
                    "kind": "NoTerminalChunk",
                    "message": failure.to_string()
                },
                {"name": "cleanup", "status": "skipped"}
            ]
        })
    );
}
