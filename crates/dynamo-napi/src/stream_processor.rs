//! `StreamProcessor`: one streamed choice's call-home bytes in, its server-sent events out, one
//! call per socket read (see llm-core's `response` module).

use dynamo_llm_core::response::{
    flags, OutputError, ProcessorConfig, StreamProcessor as Core, Surface,
};
use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::{Buffer, Float64Array, Function, JsValue, Uint32Array};
use napi::Env;
use napi_derive::napi;

use crate::socket_pump::{pump_flags, Output, Pump};

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
/// A direct send was cut short (the client pushes back, or is gone): direct sends are off and
/// the bytes not sent wait in `takeUnsent()`.
#[napi]
pub const STREAM_UNSENT: u32 = pump_flags::UNSENT;
/// The pumped call-home socket reached its end or failed; it is no longer read.
#[napi]
pub const STREAM_CLOSED: u32 = pump_flags::CLOSED;
/// Output sent directly waits to be counted: see `takeGaps()`.
#[napi]
pub const STREAM_ACCOUNT: u32 = pump_flags::ACCOUNT;
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
    inner: Rc<RefCell<Output>>,
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
            inner: Rc::new(RefCell::new(Output::new(Core::new(
                tokenizer.inner.clone(),
                ProcessorConfig {
                    stop: options.stop.into(),
                    surface,
                    id: options.id,
                    created: u64::from(options.created),
                    model: options.model,
                    max_frame_bytes: options.max_frame_bytes.map_or(32 << 20, u64::from),
                },
            )))),
        })
    }

    /// A new call-home connection was handed over (its handshake read): its prologue is next.
    #[napi]
    pub fn connect(&mut self) {
        self.inner.borrow_mut().core.connect();
    }

    /// Takes one socket read; returns its flags, with the tokens it brought from bit
    /// `STREAM_TOKENS_SHIFT` up.
    #[napi]
    pub fn read(&mut self, piece: &[u8]) -> u32 {
        self.inner.borrow_mut().core.read(piece)
    }

    /// The events written since the last take, as text (empty when none); with `chunked`, framed
    /// as one HTTP/1.1 chunk, ready for the response's socket. A string rather than a Buffer: it
    /// costs a fifth as much to hand over, and sockets write strings without a copy in between.
    #[napi]
    pub fn take(&mut self, chunked: Option<bool>) -> napi::Result<String> {
        let bytes = if chunked == Some(true) {
            self.inner.borrow_mut().core.take_chunk()
        } else {
            self.inner.borrow_mut().core.take()
        };
        String::from_utf8(bytes).map_err(|e| napi::Error::from_reason(e.to_string()))
    }

    /// The output ended without a finish reason: writes what was held back and the last event.
    #[napi]
    pub fn end(&mut self) {
        self.inner.borrow_mut().core.end();
    }

    /// Finishes the choice with `length` (a migration found no tokens left to generate).
    #[napi]
    pub fn finish_length(&mut self) {
        self.inner.borrow_mut().core.finish_length();
    }

    /// Reads the call-home socket `fd` natively from now on (a duplicate of it, polled on Node's
    /// loop; Node must not read it any more): each read goes into the processor, and
    /// `onRead(flags)` gets the flags of every read that brings more than output sent directly.
    /// The socket is read until its end (`STREAM_CLOSED`) or {@link unpump}.
    #[napi(ts_args_type = "fd: number, onRead: (flags: number) => void")]
    pub fn pump(&mut self, env: Env, fd: i32, on_read: Function<u32, ()>) -> napi::Result<()> {
        // SAFETY: `env` is this call's environment and `on_read` a function in it.
        unsafe { Pump::start(env.raw(), &self.inner, fd, on_read.raw()) }
    }

    /// Stops reading the pumped socket (and closes the duplicate); nothing when none is.
    #[napi]
    pub fn unpump(&mut self) {
        self.inner.borrow_mut().stop_pump();
    }

    /// Pauses (`true`) or resumes reading the pumped socket, for back-pressure.
    #[napi]
    pub fn pause_pump(&mut self, paused: bool) {
        self.inner.borrow_mut().pause_pump(paused);
    }

    /// Keeps a duplicate of the client's socket `fd` for direct sends, framed as HTTP/1.1 chunks
    /// when `chunked`; direct sends start off ({@link sendDirect}).
    #[napi]
    pub fn set_client(&mut self, fd: i32, chunked: bool) -> napi::Result<()> {
        self.inner
            .borrow_mut()
            .set_client(fd, chunked)
            .map_err(|e| napi::Error::from_reason(format!("cannot write socket {fd}: {e}")))
    }

    /// Closes the duplicate of the client's socket: call it when the response ends, or the
    /// connection stays open after Node closes its own descriptor.
    #[napi]
    pub fn release_client(&mut self) {
        self.inner.borrow_mut().release_client();
    }

    /// Allows (`true`) or stops direct sends of pumped output to the client; only while nothing
    /// of JavaScript's own is queued for the socket. Returns whether they are on.
    #[napi]
    pub fn send_direct(&mut self, on: bool) -> bool {
        self.inner.borrow_mut().set_direct(on)
    }

    /// The bytes a cut-short direct send left (`STREAM_UNSENT`), to be written before anything else.
    #[napi]
    pub fn take_unsent(&mut self) -> Buffer {
        self.inner.borrow_mut().take_unsent().into()
    }

    /// The timings of pumped output since the last take: pairs of seconds per token since the
    /// previous output (negative for the stream's first) and the output's tokens.
    #[napi]
    pub fn take_gaps(&mut self) -> Float64Array {
        Float64Array::new(self.inner.borrow_mut().take_gaps())
    }

    /// Milliseconds since the last pumped output (null before any).
    #[napi(getter)]
    pub fn ms_since_output(&self) -> Option<f64> {
        self.inner.borrow().ms_since_output()
    }

    /// The engine's error message, once it finished with one.
    #[napi(getter)]
    pub fn engine_error(&self) -> Option<String> {
        match self.inner.borrow().core.output_error() {
            Some(OutputError::Engine(message)) => Some(message.clone()),
            _ => None,
        }
    }

    /// What is wrong with the output, once a malformed chunk (or an undecodable token) ended it.
    #[napi(getter)]
    pub fn invalid_output(&self) -> Option<String> {
        match self.inner.borrow().core.output_error() {
            Some(OutputError::Invalid(message)) => Some(message.clone()),
            _ => None,
        }
    }

    /// Bytes of an unfinished frame.
    #[napi(getter)]
    pub fn buffered(&self) -> u32 {
        self.inner.borrow().core.buffered() as u32
    }

    /// Every token id generated so far, over every worker.
    #[napi(getter)]
    pub fn generated(&self) -> Uint32Array {
        Uint32Array::new(self.inner.borrow().core.generated().to_vec())
    }

    /// Tokens generated so far.
    #[napi(getter)]
    pub fn completion_tokens(&self) -> u32 {
        self.inner.borrow().core.completion_tokens() as u32
    }

    /// The choice has finished.
    #[napi(getter)]
    pub fn finished(&self) -> bool {
        self.inner.borrow().core.finished()
    }

    /// The usage the engine last reported, as JSON text.
    #[napi(getter)]
    pub fn engine_usage(&self) -> Option<String> {
        self.inner.borrow().core.engine_usage().map(str::to_owned)
    }

    /// What went wrong, after a read flagged a problem.
    #[napi(getter)]
    pub fn problem(&self) -> String {
        self.inner.borrow().core.problem().to_owned()
    }

    /// Dynamo's error kind of a worker's error item.
    #[napi(getter)]
    pub fn problem_kind(&self) -> String {
        self.inner.borrow().core.problem_kind().to_owned()
    }
}

impl Drop for StreamProcessor {
    fn drop(&mut self) {
        self.inner.borrow_mut().stop_pump();
    }
}
