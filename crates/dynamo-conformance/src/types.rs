//! Wire shapes exchanged with an engine, spelled with Dynamo's field names so the
//! JSON an engine sees (and emits) is the same whichever language it is written in.
//!
//! Unknown keys are kept, never rejected: the preprocessor and engines add fields
//! faster than this crate learns about them, and they must flow through untouched.

use dynamo_lifecycle::FinishReason;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Reads `null` as the type's default, because JS and Python callers send
/// `"sampling_options": null` where Rust callers would leave the key out.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// When a request must stop; every field is optional because the frontend sets
/// only what the client asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StopConditions {
    /// Upper bound on generated tokens; `None` lets the engine use its own default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Token ids that end generation and are returned to the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_token_ids: Option<Vec<u32>>,
    /// Token ids that end generation and are withheld from the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_token_ids_hidden: Option<Vec<u32>>,
    /// Tokens to generate before any stop condition may fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// Keep generating past the end-of-sequence token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// Budget for reasoning ("thinking") tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_thinking_tokens: Option<u32>,
    /// Keys this crate does not know, passed through verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tokenized request as the preprocessor hands it to an engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerateRequest {
    /// Requested model name; engines serving LoRA adapters route on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The prompt, already tokenized. The only required key.
    pub token_ids: Vec<u32>,
    /// See [`StopConditions`].
    #[serde(default, deserialize_with = "null_as_default")]
    pub stop_conditions: StopConditions,
    /// Sampling knobs (`temperature`, `top_p`, `seed`, ...), kept as JSON so engines
    /// read the ones they support without this crate tracking every addition.
    #[serde(default, deserialize_with = "null_as_default")]
    pub sampling_options: Map<String, Value>,
    /// Output knobs (`logprobs`, `prompt_logprobs`, ...), kept as JSON like the above.
    #[serde(default, deserialize_with = "null_as_default")]
    pub output_options: Map<String, Value>,
    /// Every other key (`routing`, `prefill_result`, `_HEALTH_CHECK`, ...), untouched.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl GenerateRequest {
    /// A request for `model` with the given prompt and token budget, as the kit sends it.
    pub fn new(model: impl Into<String>, token_ids: Vec<u32>, max_tokens: Option<u32>) -> Self {
        GenerateRequest {
            model: Some(model.into()),
            token_ids,
            stop_conditions: StopConditions {
                max_tokens,
                ..StopConditions::default()
            },
            ..GenerateRequest::default()
        }
    }
}

/// OpenAI-style token accounting, reported on the terminal chunk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionUsage {
    /// Tokens in the prompt.
    pub prompt_tokens: u32,
    /// Tokens generated; the kit checks it against the token ids actually streamed.
    pub completion_tokens: u32,
    /// `prompt_tokens + completion_tokens`.
    pub total_tokens: u32,
    /// Engine-specific prompt breakdown (e.g. cached tokens), forwarded as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<Value>,
    /// Engine-specific completion breakdown (e.g. reasoning tokens), forwarded as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<Value>,
}

impl CompletionUsage {
    /// Usage with `total_tokens` derived (saturating, so a bogus count cannot panic).
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        CompletionUsage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            prompt_tokens_details: None,
            completion_tokens_details: None,
        }
    }
}

/// One streamed chunk. A chunk with `finish_reason` set is the stream's terminal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineOutput {
    /// Newly generated token ids; may be empty (e.g. on a cancelled terminal).
    pub token_ids: Vec<u32>,
    /// Choice index; engines without `n > 1` use 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// Set on the terminal chunk only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Token accounting; optional but recommended on the terminal chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_usage: Option<CompletionUsage>,
    /// Every other key (`log_probs`, `disaggregated_params`, `engine_data`, ...), kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl EngineOutput {
    /// A non-terminal chunk carrying one token.
    pub fn token(token_id: u32) -> Self {
        EngineOutput::default().with_tokens(vec![token_id])
    }

    /// A terminal chunk with no tokens.
    pub fn terminal(reason: FinishReason) -> Self {
        EngineOutput::default().with_finish_reason(reason)
    }

    /// The terminal an engine yields once it notices the request was stopped.
    pub fn cancelled() -> Self {
        EngineOutput::terminal(FinishReason::Cancelled)
    }

    /// Replaces the token ids and sets `index` to 0 if it was unset.
    pub fn with_tokens(mut self, token_ids: Vec<u32>) -> Self {
        self.token_ids = token_ids;
        self.index.get_or_insert(0);
        self
    }

    /// Marks the chunk terminal.
    pub fn with_finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish_reason = Some(reason);
        self.index.get_or_insert(0);
        self
    }

    /// Attaches usage (normally to the terminal).
    pub fn with_usage(mut self, usage: CompletionUsage) -> Self {
        self.completion_usage = Some(usage);
        self
    }

    /// Whether this chunk ends the stream.
    pub fn is_terminal(&self) -> bool {
        self.finish_reason.is_some()
    }
}

/// Limits an LLM engine advertises so the router and frontend can plan around it.
/// `None` means "not advertised": consumers fall back to their own defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmRegistration {
    /// Longest prompt + completion the model accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u32>,
    /// Tokens per KV block; the KV router hashes prompts in blocks of this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_block_size: Option<u32>,
    /// KV blocks available on this worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_kv_blocks: Option<u64>,
    /// Maximum concurrent sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u64>,
    /// Maximum tokens in one scheduler batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u64>,
    /// Data-parallel ranks served by this worker (registered default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel_size: Option<u32>,
    /// First data-parallel rank of this worker (registered default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel_start_rank: Option<u32>,
    /// Disaggregation handshake host; published only together with the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_host: Option<String>,
    /// Disaggregation handshake port; published only together with the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_port: Option<u16>,
    /// Whether speculative (EAGLE) decoding is on.
    #[serde(default)]
    pub enable_eagle: bool,
}

/// What `start` returns: the facts the worker needs to register the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// The model actually loaded; must not be empty (the kit checks it).
    pub model: String,
    /// Name clients use; defaults to the worker config's name when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_model_name: Option<String>,
    /// Further names the model answers to.
    #[serde(default, deserialize_with = "null_as_default")]
    pub model_aliases: Vec<String>,
    /// Engine-specific data published with the registration.
    #[serde(default, deserialize_with = "null_as_default")]
    pub runtime_data: Map<String, Value>,
    /// LLM limits; `None` for engines that are not token pipelines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmRegistration>,
}

impl EngineConfig {
    /// A config that only names the model.
    pub fn new(model: impl Into<String>) -> Self {
        EngineConfig {
            model: model.into(),
            ..EngineConfig::default()
        }
    }
}

/// Where the worker should read an engine's KV-cache events from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum KvEventSourceKind {
    /// The engine publishes on a ZMQ socket the worker subscribes to.
    Zmq {
        /// ZMQ endpoint, e.g. `tcp://127.0.0.1:5557`.
        endpoint: String,
        /// Subscription topic; empty subscribes to everything.
        #[serde(default)]
        topic: String,
    },
    /// The engine pushes events through a publisher the worker hands it (the
    /// callback itself lives in the binding; only the declaration crosses the wire).
    Push,
}

/// One KV event source and the data-parallel rank it reports for.
///
/// JSON: `{"kind":"zmq","endpoint":"tcp://..","topic":"","dp_rank":0}` or
/// `{"kind":"push","dp_rank":0}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvEventSource {
    /// Transport of the events.
    #[serde(flatten)]
    pub kind: KvEventSourceKind,
    /// Data-parallel rank; the set of ranks must be stable for the engine's lifetime.
    #[serde(default)]
    pub dp_rank: u32,
}

impl KvEventSource {
    /// A ZMQ source.
    pub fn zmq(endpoint: impl Into<String>, topic: impl Into<String>, dp_rank: u32) -> Self {
        KvEventSource {
            kind: KvEventSourceKind::Zmq {
                endpoint: endpoint.into(),
                topic: topic.into(),
            },
            dp_rank,
        }
    }

    /// A push source.
    pub fn push(dp_rank: u32) -> Self {
        KvEventSource {
            kind: KvEventSourceKind::Push,
            dp_rank,
        }
    }
}
