//! `Detokenizer`: one request's incremental detokenization and stop handling, one call per chunk.

use dynamo_llm_core::detokenizer::{Detokenizer as Core, Step, StopConfig, StopHit};
use napi::Either;
use napi_derive::napi;

use crate::convert::js_error;
use crate::tokenizer::Tokenizer;

/// How a request's output stops (wire names of Dynamo's `stop_conditions`, camelCased).
#[napi(object)]
pub struct DetokenizerOptions {
    /// Stop strings.
    pub stop: Option<Vec<String>>,
    /// Keep a matched stop string in the text.
    pub include_stop_str_in_output: Option<bool>,
    /// Stop ids that end the output unrendered (EOS ids go here unless `ignore_eos`).
    pub stop_token_ids_hidden: Option<Vec<u32>>,
    /// Stop ids that end the output after being rendered.
    pub stop_token_ids_visible: Option<Vec<u32>>,
    /// The model's EOS ids; a hidden stop on one finishes as `eos`.
    pub eos_token_ids: Option<Vec<u32>>,
    /// Stop tokens are ignored until this many tokens were generated.
    pub min_tokens: Option<u32>,
    /// Leave special tokens out of the text.
    pub skip_special_tokens: Option<bool>,
}

/// What one chunk added: its text, and on the last one why the output stopped.
#[napi(object)]
pub struct DetokenizerStep {
    pub text: String,
    /// `eos`, `stop_token` or `stop_string` on the chunk that ended the output.
    #[napi(ts_type = "'eos' | 'stop_token' | 'stop_string'")]
    pub stop: Option<String>,
    /// The matched stop string, or the stop token id.
    #[napi(ts_type = "string | number")]
    pub stop_reason: Option<serde_json::Value>,
}

impl From<DetokenizerOptions> for StopConfig {
    fn from(o: DetokenizerOptions) -> Self {
        StopConfig {
            stop: o.stop.unwrap_or_default(),
            include_stop_str: o.include_stop_str_in_output.unwrap_or(false),
            hidden_stop_ids: o.stop_token_ids_hidden.unwrap_or_default(),
            visible_stop_ids: o.stop_token_ids_visible.unwrap_or_default(),
            eos_ids: o.eos_token_ids.unwrap_or_default(),
            min_tokens: o.min_tokens.unwrap_or(0),
            skip_special_tokens: o.skip_special_tokens.unwrap_or(false),
        }
    }
}

fn to_js(step: Step) -> DetokenizerStep {
    let (stop, stop_reason) = match step.stop {
        None => (None, None),
        Some(StopHit::Eos(id)) => (Some("eos".into()), Some(id.into())),
        Some(StopHit::StopToken(id)) => (Some("stop_token".into()), Some(id.into())),
        Some(StopHit::StopString(s)) => (Some("stop_string".into()), Some(s.into())),
    };
    DetokenizerStep {
        text: step.text,
        stop,
        stop_reason,
    }
}

/// Turns a request's generated token ids into text deltas, holding back split characters and
/// text that could still become a stop string.
#[napi]
pub struct Detokenizer {
    inner: Core,
}

#[napi]
impl Detokenizer {
    #[napi(constructor)]
    pub fn new(tokenizer: &Tokenizer, options: Option<DetokenizerOptions>) -> Self {
        let config = options.map(StopConfig::from).unwrap_or_default();
        Self {
            inner: Core::new(tokenizer.inner.clone(), config),
        }
    }

    /// Feeds one chunk's token ids (and its text, when the engine produced text itself).
    /// Returns the text the chunk adds, or, on the chunk that ended the output, a step saying why
    /// (a plain string in the common case keeps the per-chunk crossing cheap).
    #[napi(ts_return_type = "string | DetokenizerStep")]
    pub fn push(
        &mut self,
        token_ids: &[u32],
        text: Option<String>,
    ) -> napi::Result<Either<String, DetokenizerStep>> {
        let step = self
            .inner
            .push(token_ids, text.as_deref())
            .map_err(js_error)?;
        Ok(if step.stop.is_none() {
            Either::A(step.text)
        } else {
            Either::B(to_js(step))
        })
    }

    /// Ends the output: releases everything held back.
    #[napi]
    pub fn finish(&mut self) -> napi::Result<DetokenizerStep> {
        self.inner.finish().map(to_js).map_err(js_error)
    }

    /// Whether the output has stopped.
    #[napi(getter)]
    pub fn stopped(&self) -> bool {
        self.inner.is_stopped()
    }
}
