//! `PromptFormatter`: a model's chat template applied to OpenAI chat requests.

use std::sync::Arc;

use dynamo_llm_core::prompt::{PromptFormatter as Core, RenderOptions, TemplateSources};
use dynamo_llm_core::tokenizer::Tokenizer as TokenizerCore;
use napi::bindgen_prelude::{AsyncTask, Uint32Array};
use napi_derive::napi;
use serde_json::Value;

use crate::convert::{invalid, js_error};
use crate::tokenizer::Tokenizer;
use crate::work::Work;

/// Where the chat template comes from, as file contents (the first one present wins, in this order).
#[napi(object)]
pub struct ChatTemplateSources {
    /// A template given at registration.
    pub custom: Option<String>,
    /// `chat_template.jinja`.
    pub chat_template_jinja: Option<String>,
    /// `chat_template.json`, as text.
    pub chat_template_json: Option<String>,
    /// `tokenizer_config.json`, as text: its `chat_template` and special tokens.
    pub tokenizer_config: Option<String>,
}

/// Model options that change rendering.
#[napi(object)]
pub struct PromptFormatterOptions {
    /// Leave `tools` out when `tool_choice` is `"none"` (default true).
    pub exclude_tools_when_tool_choice_none: Option<bool>,
}

fn parse(name: &str, text: Option<String>) -> napi::Result<Option<Value>> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| invalid(format!("{name} is not valid JSON: {e}")))
    })
    .transpose()
}

/// A chat request's prompt and its token ids.
#[napi(object)]
pub struct EncodedPrompt {
    pub prompt: String,
    pub token_ids: Uint32Array,
}

/// Renders prompts from OpenAI chat-completions bodies with the model's chat template.
#[napi]
pub struct PromptFormatter {
    inner: Arc<Core>,
}

#[napi]
impl PromptFormatter {
    /// Picks and compiles the template; throws naming the source when it is missing or broken.
    #[napi(constructor)]
    pub fn new(
        sources: ChatTemplateSources,
        options: Option<PromptFormatterOptions>,
    ) -> napi::Result<Self> {
        let sources = TemplateSources {
            custom: sources.custom,
            chat_template_jinja: sources.chat_template_jinja,
            chat_template_json: parse("chat_template.json", sources.chat_template_json)?,
            tokenizer_config: parse("tokenizer_config.json", sources.tokenizer_config)?,
        };
        let options = RenderOptions {
            exclude_tools_when_tool_choice_none: options
                .and_then(|o| o.exclude_tools_when_tool_choice_none)
                .unwrap_or(true),
        };
        Ok(Self {
            inner: Arc::new(Core::new(&sources, options).map_err(js_error)?),
        })
    }

    /// The prompt for a chat request given as JSON text, off the JS thread.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn render(&self, request_json: String) -> AsyncTask<Work<String, String>> {
        let inner = self.inner.clone();
        AsyncTask::new(Work::new(
            move || inner.render(&parse_request(&request_json)?),
            |s| s,
        ))
    }

    /// The prompt for a chat request given as JSON text and its token ids under `tokenizer`
    /// (no special tokens added, NUL characters left out), off the JS thread: rendering and
    /// tokenizing are most of a request's preprocessing, and one hop serves both.
    #[napi(ts_return_type = "Promise<EncodedPrompt>")]
    pub fn render_and_encode(
        &self,
        request_json: String,
        tokenizer: &Tokenizer,
    ) -> AsyncTask<Work<(String, Vec<u32>), EncodedPrompt>> {
        let inner = self.inner.clone();
        let tokenizer = tokenizer.inner.clone();
        AsyncTask::new(Work::new(
            move || render_and_encode(&inner, &tokenizer, &request_json),
            encoded,
        ))
    }

    /// `renderAndEncode` on the calling thread: no thread hop, for when nothing else is waiting
    /// for the JS thread.
    #[napi]
    pub fn render_and_encode_sync(
        &self,
        request_json: String,
        tokenizer: &Tokenizer,
    ) -> napi::Result<EncodedPrompt> {
        render_and_encode(&self.inner, &tokenizer.inner, &request_json)
            .map(encoded)
            .map_err(js_error)
    }

    /// The prompt for a chat request given as JSON text, on the calling thread.
    #[napi]
    pub fn render_sync(&self, request_json: String) -> napi::Result<String> {
        parse_request(&request_json)
            .and_then(|r| self.inner.render(&r))
            .map_err(js_error)
    }
}

fn render_and_encode(
    formatter: &Core,
    tokenizer: &TokenizerCore,
    request_json: &str,
) -> dynamo_llm_core::Result<(String, Vec<u32>)> {
    let prompt = formatter.render(&parse_request(request_json)?)?;
    let ids = if prompt.contains('\0') {
        tokenizer.encode(&prompt.replace('\0', ""), false)?
    } else {
        tokenizer.encode(&prompt, false)?
    };
    Ok((prompt, ids))
}

fn encoded((prompt, ids): (String, Vec<u32>)) -> EncodedPrompt {
    EncodedPrompt {
        prompt,
        token_ids: Uint32Array::new(ids),
    }
}

fn parse_request(text: &str) -> dynamo_llm_core::Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        dynamo_llm_core::LlmError::InvalidArgument(format!("request is not valid JSON: {e}"))
    })
}
