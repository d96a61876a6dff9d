//! The reference engine behaves like Dynamo's rotating-tokens sample and passes the kit.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::{Counters, RotatingTokens};
use dynamo_conformance::{
    run_conformance, run_conformance_report, CheckStatus, ConformanceOptions, Context, Engine,
    EngineOutput, FinishReason, GenerateRequest, CHECKS,
};
use futures::StreamExt;

async fn collect(
    engine: &RotatingTokens,
    request: GenerateRequest,
    ctx: Context,
) -> Vec<EngineOutput> {
    let stream = engine
        .generate(request, ctx)
        .await
        .expect("generate sets up");
    stream
        .map(|item| item.expect("no error items"))
        .collect()
        .await
}

#[tokio::test]
async fn reference_engine_passes_the_kit() {
    run_conformance(RotatingTokens::default)
        .await
        .expect("reference engine conforms");
}

#[tokio::test]
async fn reference_engine_passes_with_a_per_token_delay() {
    let options = ConformanceOptions::default();
    let report = run_conformance_report(
        || RotatingTokens::default().with_delay(Duration::from_millis(2)),
        &options,
    )
    .await;
    assert!(report.passed(), "{report:?}");
}

#[tokio::test]
async fn report_lists_every_check_as_passed_in_order() {
    let report =
        run_conformance_report(RotatingTokens::default, &ConformanceOptions::default()).await;
    let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
    assert_eq!(names, CHECKS);
    assert!(report
        .checks
        .iter()
        .all(|c| c.status == CheckStatus::Passed && c.failure.is_none()));
    assert!(report.passed());
    assert_eq!(report.into_result(), Ok(()));
}

#[tokio::test]
async fn kit_cleans_up_the_started_engine_once_and_builds_a_second_engine() {
    let counters = Counters::default();
    let factory = {
        let counters = counters.clone();
        move || counters.engine()
    };
    run_conformance(factory).await.unwrap();
    // Engine under test + never-started engine; cleanup twice then once on the fresh engine;
    // only the first cleanup tears down.
    assert_eq!(counters.get(), (2, 3, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_future_can_be_spawned_on_a_multi_threaded_runtime() {
    // The napi binding spawns the run on its runtime, which needs a Send future.
    let handle = tokio::spawn(run_conformance(RotatingTokens::default));
    handle
        .await
        .expect("task completes")
        .expect("engine conforms");
}

#[tokio::test]
async fn boxed_trait_objects_are_engines_too() {
    run_conformance(|| Box::new(RotatingTokens::default()) as Box<dyn Engine>)
        .await
        .expect("boxed reference engine conforms");
    run_conformance(|| Arc::new(RotatingTokens::default()))
        .await
        .expect("shared reference engine conforms");
}

#[tokio::test]
async fn streams_rotating_tokens_one_per_chunk_and_ends_with_length() {
    let engine = RotatingTokens::default();
    engine.start(7).await.unwrap();
    let chunks = collect(
        &engine,
        GenerateRequest::new("sample-model", vec![5, 6], Some(3)),
        Context::new("r"),
    )
    .await;
    let tokens: Vec<Vec<u32>> = chunks.iter().map(|c| c.token_ids.clone()).collect();
    assert_eq!(tokens, vec![vec![1], vec![2], vec![3]]);
    assert!(chunks[..2]
        .iter()
        .all(|c| c.finish_reason.is_none() && c.completion_usage.is_none()));
    let last = chunks.last().unwrap();
    assert_eq!(last.finish_reason, Some(FinishReason::Length));
    let usage = last.completion_usage.as_ref().unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (2, 3, 5)
    );
}

#[tokio::test]
async fn falls_back_to_the_engine_max_tokens_when_the_request_sets_none_or_zero() {
    let engine = RotatingTokens::default();
    engine.start(0).await.unwrap();
    for max_tokens in [None, Some(0)] {
        let chunks = collect(
            &engine,
            GenerateRequest::new("m", vec![1], max_tokens),
            Context::new("r"),
        )
        .await;
        assert_eq!(chunks.len(), 16, "max_tokens {max_tokens:?}");
        assert_eq!(chunks[15].token_ids, vec![16]);
    }
}

#[tokio::test]
async fn a_request_stopped_before_the_first_poll_yields_one_empty_cancelled_terminal() {
    let engine = RotatingTokens::default();
    engine.start(0).await.unwrap();
    let ctx = Context::new("r");
    let stream = engine
        .generate(
            GenerateRequest::new("m", vec![1, 2, 3], Some(100)),
            ctx.clone(),
        )
        .await
        .unwrap();
    ctx.stop_generating();
    let chunks: Vec<_> = stream.map(Result::unwrap).collect().await;
    assert_eq!(chunks.len(), 1);
    assert!(chunks[0].token_ids.is_empty());
    assert_eq!(chunks[0].finish_reason, Some(FinishReason::Cancelled));
    let usage = chunks[0].completion_usage.as_ref().unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (3, 0, 3)
    );
}

#[tokio::test]
async fn a_request_stopped_mid_stream_reports_the_tokens_already_sent() {
    let engine = RotatingTokens::default();
    engine.start(0).await.unwrap();
    let ctx = Context::new("r");
    let mut stream = engine
        .generate(GenerateRequest::new("m", vec![1], Some(100)), ctx.clone())
        .await
        .unwrap();
    for expected in 1..=4u32 {
        assert_eq!(
            stream.next().await.unwrap().unwrap().token_ids,
            vec![expected]
        );
    }
    ctx.stop_generating();
    let terminal = stream.next().await.unwrap().unwrap();
    assert_eq!(
        terminal,
        EngineOutput::cancelled().with_usage(dynamo_conformance::CompletionUsage::new(1, 4))
    );
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn start_advertises_the_sample_limits_and_cleanup_is_idempotent() {
    let engine = RotatingTokens::default();
    let config = engine.start(0).await.unwrap();
    assert_eq!(config.model, "sample-model");
    assert_eq!(config.served_model_name.as_deref(), Some("sample-model"));
    let llm = config.llm.unwrap();
    assert_eq!(llm.context_length, Some(2048));
    assert_eq!(llm.kv_cache_block_size, Some(16));
    assert_eq!(llm.total_kv_blocks, Some(1000));
    engine.cleanup().await.unwrap();
    engine.cleanup().await.unwrap();
    assert_eq!(engine.teardowns.load(Ordering::SeqCst), 1);
}
