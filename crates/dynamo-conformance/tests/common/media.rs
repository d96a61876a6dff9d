//! Engines for the encode and raw suites: a conforming one of each, and faults that break one
//! encode or raw rule.

use std::time::Duration;

use dynamo_conformance::{
    ChunkStream, CompletionUsage, Context, Engine, EngineConfig, EngineError, EngineOutput,
    FinishReason, GenerateRequest, LlmRegistration, RawChunkStream, RawEngine,
};
use futures::stream::{self, StreamExt};
use serde_json::{json, Map, Value};

/// The one encode rule an [`Encoder`] breaks, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeFault {
    None,
    /// The handoff is followed by a second chunk.
    TwoChunks,
    /// The handoff ends with `length`.
    EndsWithLength,
    /// The handoff carries a generated token.
    CarriesTokens,
    /// No `encoder_result`.
    NoEncoderResult,
    /// `encoder_result` is a string.
    EncoderResultIsString,
    /// Usage counts one completion token.
    UsageCountsCompletion,
}

/// An encode worker's engine: one `stop` chunk per request whose `encoder_result` describes the
/// images it was sent.
pub struct Encoder(pub EncodeFault);

fn handoff(request: &GenerateRequest) -> EngineOutput {
    let images = request
        .extra
        .get("multi_modal_data")
        .and_then(|data| data.get("image"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let prompt = request.token_ids.len() as u32;
    let mut chunk =
        EngineOutput::terminal(FinishReason::Stop).with_usage(CompletionUsage::new(prompt, 0));
    chunk.token_ids.clear();
    chunk.extra.insert(
        "encoder_result".into(),
        json!({"images": images, "embedding_shape": [images, 8]}),
    );
    chunk
}

#[async_trait::async_trait]
impl Engine for Encoder {
    async fn start(&self, _worker_id: u64) -> Result<EngineConfig, EngineError> {
        Ok(EngineConfig::new("sample-encoder"))
    }

    async fn generate(
        &self,
        request: GenerateRequest,
        ctx: Context,
    ) -> Result<ChunkStream, EngineError> {
        let fault = self.0;
        let mut chunk = handoff(&request);
        let mut items = vec![];
        match fault {
            EncodeFault::None => {}
            EncodeFault::TwoChunks => items.push(Ok(EngineOutput::default().with_tokens(vec![]))),
            EncodeFault::EndsWithLength => chunk.finish_reason = Some(FinishReason::Length),
            EncodeFault::CarriesTokens => chunk.token_ids = vec![7],
            EncodeFault::NoEncoderResult => {
                chunk.extra.remove("encoder_result");
            }
            EncodeFault::EncoderResultIsString => {
                chunk.extra.insert("encoder_result".into(), json!("base64"));
            }
            EncodeFault::UsageCountsCompletion => {
                chunk.completion_usage = Some(CompletionUsage::new(3, 1));
            }
        }
        items.push(Ok(chunk));
        // Checked when polled, so a cancel before the first poll ends it as `cancelled`.
        Ok(stream::once(async move { ctx.is_stopped() })
            .flat_map(move |stopped| {
                let items = if stopped {
                    vec![Ok(EngineOutput::cancelled())]
                } else {
                    items.clone()
                };
                stream::iter(items)
            })
            .boxed())
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        Ok(())
    }
}

/// The one raw rule a [`RawSteps`] engine breaks, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawFault {
    None,
    /// `start` returns an `llm` registration.
    AdvertisesLlm,
    /// Streams every requested step, stopped or not.
    IgnoresCancel,
}

/// A raw media engine: `steps` (default 2) JSON objects `{"step": i, "prompt": ..}`, 1 ms apart.
pub struct RawSteps(pub RawFault);

#[async_trait::async_trait]
impl RawEngine for RawSteps {
    async fn start(&self, _worker_id: u64) -> Result<EngineConfig, EngineError> {
        let mut config = EngineConfig::new("sample-diffusion");
        if self.0 == RawFault::AdvertisesLlm {
            config.llm = Some(LlmRegistration::default());
        }
        Ok(config)
    }

    async fn generate(
        &self,
        request: Map<String, Value>,
        ctx: Context,
    ) -> Result<RawChunkStream, EngineError> {
        let steps = request.get("steps").and_then(Value::as_u64).unwrap_or(2);
        let prompt = request.get("prompt").cloned().unwrap_or(Value::Null);
        let ctx = (self.0 != RawFault::IgnoresCancel).then_some(ctx);
        Ok(stream::iter(0..steps)
            .take_while(move |_| std::future::ready(!ctx.as_ref().is_some_and(Context::is_stopped)))
            .then(move |step| {
                let prompt = prompt.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let mut chunk = Map::new();
                    chunk.insert("step".into(), json!(step));
                    chunk.insert("prompt".into(), prompt);
                    Ok(chunk)
                }
            })
            .boxed())
    }

    async fn cleanup(&self) -> Result<(), EngineError> {
        Ok(())
    }
}
