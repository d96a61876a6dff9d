//! The encode suite (`--disaggregation-mode encode` engines) and the raw-engine suite: a
//! conforming engine passes each, and each broken engine is named by its own failure kind.

mod common;

use std::time::Duration;

use common::media::{EncodeFault, Encoder, RawFault, RawSteps};
use common::RotatingTokens;
use dynamo_conformance::{
    run_conformance_report, run_encode_conformance, run_raw_conformance,
    run_raw_conformance_report, CheckStatus, ConformanceFailure, ConformanceMode,
    ConformanceOptions, CHECKS, RAW_CHECKS,
};

fn encode_options() -> ConformanceOptions {
    ConformanceOptions {
        cancel_deadline: Duration::from_millis(200),
        check_timeout: Some(Duration::from_secs(1)),
        mode: ConformanceMode::Encode,
        ..ConformanceOptions::default()
    }
}

async fn encode_failure(fault: EncodeFault) -> ConformanceFailure {
    run_conformance_report(move || Encoder(fault), &encode_options())
        .await
        .into_result()
        .expect_err("a broken encoder must fail the kit")
}

#[tokio::test]
async fn a_conforming_encoder_passes_every_check() {
    run_encode_conformance(|| Encoder(EncodeFault::None))
        .await
        .expect("the encoder conforms");
}

#[tokio::test]
async fn each_broken_encoder_is_named_by_its_kind() {
    let cases = [
        (
            EncodeFault::TwoChunks,
            "generate: an encode request must yield exactly one chunk (the terminal handoff), but it yielded 2",
        ),
        (
            EncodeFault::EndsWithLength,
            "generate: the encode handoff chunk must have finish_reason \"stop\", but it had \"length\"",
        ),
        (
            EncodeFault::CarriesTokens,
            "generate: the encode handoff chunk must carry no token_ids (an encoder generates none), but it carried 1",
        ),
        (
            EncodeFault::NoEncoderResult,
            "generate: the encode handoff chunk must carry an object `encoder_result`, but it had none",
        ),
        (
            EncodeFault::EncoderResultIsString,
            "generate: the encode handoff chunk must carry an object `encoder_result`, but it was a string",
        ),
        (
            EncodeFault::UsageCountsCompletion,
            "generate: the encode handoff's completion_usage must be prompt 3, completion 0, total 3, but it was prompt 3, completion 1, total 4",
        ),
    ];
    let mut kinds = vec![];
    for (fault, message) in cases {
        let failure = encode_failure(fault).await;
        assert_eq!(failure.to_string(), message, "{fault:?}");
        kinds.push(failure.kind());
    }
    assert_eq!(
        kinds,
        [
            "EncodeChunkCount",
            "EncodeTerminalExpected",
            "EncodeTokensNotEmpty",
            "EncoderResultExpectedObject",
            "EncoderResultExpectedObject",
            "EncodeUsageMismatch",
        ]
    );
}

#[tokio::test]
async fn a_token_engine_fails_the_encode_rules_and_an_encoder_the_token_rules() {
    // A generator answers an image request with tokens: not a handoff.
    let failure = run_conformance_report(RotatingTokens::default, &encode_options())
        .await
        .into_result()
        .expect_err("tokens are not a handoff");
    assert_eq!(failure.kind(), "EncodeChunkCount");
    // The handoff ends with `stop` and usage 3/0: a valid, if empty, token stream.
    let report = run_conformance_report(
        || Encoder(EncodeFault::None),
        &ConformanceOptions::default(),
    )
    .await;
    assert!(report.passed(), "{:?}", report.failure());
}

#[tokio::test]
async fn a_conforming_raw_engine_passes_the_raw_checks() {
    run_raw_conformance(|| RawSteps(RawFault::None))
        .await
        .expect("the raw engine conforms");
    let report =
        run_raw_conformance_report(|| RawSteps(RawFault::None), &ConformanceOptions::default())
            .await;
    let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
    assert_eq!(names, RAW_CHECKS);
    assert!(report
        .checks
        .iter()
        .all(|c| c.status == CheckStatus::Passed));
    assert_ne!(RAW_CHECKS.len(), CHECKS.len());
}

#[tokio::test]
async fn a_raw_engine_with_an_llm_registration_fails_at_start() {
    let report = run_raw_conformance_report(
        || RawSteps(RawFault::AdvertisesLlm),
        &ConformanceOptions::default(),
    )
    .await;
    let failure = report.failure().expect("llm is not for raw engines");
    assert_eq!(failure.kind(), "RawEngineAdvertisedLlmRegistration");
    assert_eq!(report.checks[0].name, "start");
    assert_eq!(report.checks[0].status, CheckStatus::Failed);
    assert!(report.checks[1..]
        .iter()
        .all(|c| c.status == CheckStatus::Skipped));
}

#[tokio::test]
async fn a_raw_engine_that_ignores_cancel_is_cancellation_not_observed() {
    let options = ConformanceOptions {
        cancel_deadline: Duration::from_millis(200),
        ..ConformanceOptions::default()
    };
    let failure = run_raw_conformance_report(|| RawSteps(RawFault::IgnoresCancel), &options)
        .await
        .into_result()
        .expect_err("cancel ignored");
    assert_eq!(failure.kind(), "CancellationNotObserved");
}
