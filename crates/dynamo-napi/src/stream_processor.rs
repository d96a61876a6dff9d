//! `StreamProcessor`: one streamed choice's call-home bytes in, its server-sent events out, one
//! call per socket read (see llm-core's `response` module).

use dynamo_llm_core::response::{
    flags, OutputError, ProcessorConfig, StreamProcessor as Core, Surface,
};
use napi::bindgen_prelude::Uint32Array;
use napi_derive::napi;

use crate::detokenizer::DetokenizerOptions;
use crate::tokenizer::Tokenizer;

// What a `StreamProcessor.read` brought, as bits of its result.
/// The worker's prologue: its handler started.
#[napi]
pub const STREAM_STARTED: u32 = flags::STARTED;
/// Output items arrived (their events, if any, wait in `take()`).
#[napi]
pub const STREAM_OUTPUT: u32 = flags::OUTPUT;
/// The `complete_final` marker.
#[napi]
pub const STREAM_END: u32 = flags::END;
/// The sentinel: the worker is done with the socket.
#[napi]
pub const STREAM_SENTINEL: u32 = flags::SENTINEL;
/// The worker broke the protocol (`problem` says how).
#[napi]
pub const STREAM_VIOLATION: u32 = flags::VIOLATION;
/// An error prologue: the worker could not start (`problem` is its message).
#[napi]
pub const STREAM_REFUSED: u32 = flags::REFUSED;
/// An error item (`problem` is its message, `problemKind` Dynamo's error kind).
#[napi]
pub const STREAM_WORKER_ERROR: u32 = flags::WORKER_ERROR;
/// The choice finished; later output is ignored.
#[napi]
pub const STREAM_FINISHED: u32 = flags::FINISHED;
/// The engine finished with an error or sent a malformed chunk (`problem` says which).
#[napi]
pub const STREAM_ENGINE_ERROR: u32 = flags::ENGINE_ERROR;
/// The worker sent a control word only the caller may send (`problem` names it); ignored.
#[napi]
pub const STREAM_STRAY_CONTROL: u32 = flags::STRAY_CONTROL;
/// A read's result shifted right by this many bits is the number of tokens it brought.
#[napi]
pub const STREAM_TOKENS_SHIFT: u32 = flags::TOKENS_SHIFT;

/// How a choice is read and written.
#[napi(object)]
pub struct StreamProcessorOptions {
    /// How the output stops (as for `Detokenizer`).
    pub stop: DetokenizerOptions,
    /// `chat` (chat.completion.chunk events) or `completions` (text_completion events).
    #[napi(ts_type = "'chat' | 'completions'")]
    pub surface: String,
    /// The response id the events carry (`chatcmpl-…`).
    pub id: String,
    /// The response's creation time, Unix seconds.
    pub created: u32,
    pub model: String,
    /// Largest accepted frame (`header_len + body_len`); default 32 MiB.
    pub max_frame_bytes: Option<u32>,
}

/// The frontend's per-token path for one streamed choice: takes each read of the worker's
/// call-home socket after the handshake and returns what it brought as `STREAM_*` flag bits;
/// the events it wrote wait in {@link take}.
#[napi]
pub struct StreamProcessor {
    inner: Core,
}

#[napi]
impl StreamProcessor {
    #[napi(constructor)]
    pub fn new(tokenizer: &Tokenizer, options: StreamProcessorOptions) -> napi::Result<Self> {
        let surface = match options.surface.as_str() {
            "chat" => Surface::Chat,
            "completions" => Surface::Completions,
            other => {
                return Err(napi::Error::new(
                    napi::Status::InvalidArg,
                    format!("surface must be 'chat' or 'completions', not {other:?}"),
                ))
            }
        };
        Ok(Self {
            inner: Core::new(
                tokenizer.inner.clone(),
                ProcessorConfig {
                    stop: options.stop.into(),
                    surface,
                    id: options.id,
                    created: u64::from(options.created),
                    model: options.model,
                    max_frame_bytes: options.max_frame_bytes.map_or(32 << 20, u64::from),
                },
            ),
        })
    }

    /// A new call-home connection was handed over (its handshake read): its prologue is next.
    #[napi]
    pub fn connect(&mut self) {
        self.inner.connect();
    }

    /// Takes one socket read; returns its flags, with the tokens it brought from bit
    /// `STREAM_TOKENS_SHIFT` up.
    #[napi]
    pub fn read(&mut self, piece: &[u8]) -> u32 {
        self.inner.read(piece)
    }

    /// The events written since the last take, as text (empty when none); with `chunked`, framed
    /// as one HTTP/1.1 chunk, ready for the response's socket. A string rather than a Buffer: it
    /// costs a fifth as much to hand over, and sockets write strings without a copy in between.
    #[napi]
    pub fn take(&mut self, chunked: Option<bool>) -> napi::Result<String> {
        let bytes = if chunked == Some(true) {
            self.inner.take_chunk()
        } else {
            self.inner.take()
        };
        String::from_utf8(bytes).map_err(|e| napi::Error::from_reason(e.to_string()))
    }

    /// The output ended without a finish reason: writes what was held back and the last event.
    #[napi]
    pub fn end(&mut self) {
        self.inner.end();
    }

    /// Finishes the choice with `length` (a migration found no tokens left to generate).
    #[napi]
    pub fn finish_length(&mut self) {
        self.inner.finish_length();
    }

    /// The engine's error message, once it finished with one.
    #[napi(getter)]
    pub fn engine_error(&self) -> Option<String> {
        match self.inner.output_error() {
            Some(OutputError::Engine(message)) => Some(message.clone()),
            _ => None,
        }
    }

    /// What is wrong with the output, once a malformed chunk (or an undecodable token) ended it.
    #[napi(getter)]
    pub fn invalid_output(&self) -> Option<String> {
        match self.inner.output_error() {
            Some(OutputError::Invalid(message)) => Some(message.clone()),
            _ => None,
        }
    }

    /// Bytes of an unfinished frame.
    #[napi(getter)]
    pub fn buffered(&self) -> u32 {
        self.inner.buffered() as u32
    }

    /// Every token id generated so far, over every worker.
    #[napi(getter)]
    pub fn generated(&self) -> Uint32Array {
        Uint32Array::new(self.inner.generated().to_vec())
    }

    /// Tokens generated so far.
    #[napi(getter)]
    pub fn completion_tokens(&self) -> u32 {
        self.inner.completion_tokens() as u32
    }

    /// The choice has finished.
    #[napi(getter)]
    pub fn finished(&self) -> bool {
        self.inner.finished()
    }

    /// The usage the engine last reported, as JSON text.
    #[napi(getter)]
    pub fn engine_usage(&self) -> Option<String> {
        self.inner.engine_usage().map(str::to_owned)
    }

    /// What went wrong, after a read flagged a problem.
    #[napi(getter)]
    pub fn problem(&self) -> String {
        self.inner.problem().to_owned()
    }

    /// Dynamo's error kind of a worker's error item.
    #[napi(getter)]
    pub fn problem_kind(&self) -> String {
        self.inner.problem_kind().to_owned()
    }
}
