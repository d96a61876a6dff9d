//! The frontend's per-token path for one streamed choice, sans I/O: the bytes each read of the
//! worker's call-home socket delivers go in; the server-sent events they add come out. In
//! between: the two-part frames, the call-home protocol, the `Annotated` items, incremental
//! detokenization with stop strings and stop tokens, finish reasons, and the OpenAI chunks.
//!
//! It keeps what the caller needs to decide the rest (migration, errors, metrics): the protocol
//! events of each read as [`flags`], the generated ids, the token count and the engine's usage.

use std::sync::Arc;

use super::call_home::{CallHome, Event, ItemOf, Phase};
use super::chunks::{ChunkWriter, Surface};
use super::engine_output::{read_item, AnnotatedOutput, FinishReason, Item};
use super::frames::{Flow, FrameReader};
use crate::detokenizer::{Detokenizer, StopConfig};
use crate::tokenizer::Tokenizer;

/// What a read brought, as bits of the value [`StreamProcessor::read`] returns.
pub mod flags {
    /// The worker's prologue: its handler started.
    pub const STARTED: u32 = 1;
    /// Output items arrived (the events they add, if any, are in the output).
    pub const OUTPUT: u32 = 1 << 1;
    /// The `complete_final` marker.
    pub const END: u32 = 1 << 2;
    /// The sentinel: the worker is done with the socket.
    pub const SENTINEL: u32 = 1 << 3;
    /// The worker broke the protocol ([`super::StreamProcessor::problem`] says how).
    pub const VIOLATION: u32 = 1 << 4;
    /// An error prologue: the worker could not start (the problem is its message).
    pub const REFUSED: u32 = 1 << 5;
    /// An error item: the problem is its message, the problem kind Dynamo's error kind.
    pub const WORKER_ERROR: u32 = 1 << 6;
    /// The choice finished (a finish reason, a stop string or token); later output is ignored.
    pub const FINISHED: u32 = 1 << 7;
    /// The engine finished with an error, or sent a malformed chunk (the problem says which).
    pub const ENGINE_ERROR: u32 = 1 << 8;
    /// The worker sent a control word only the caller may send; it was ignored.
    pub const STRAY_CONTROL: u32 = 1 << 9;
    // Bits 10 to 15 are never set by a read: they are left to the caller's socket I/O (the
    // napi glue that reads the socket and writes the client's events natively).
    /// The bits from here up count the tokens the read brought (at most [`MAX_TOKENS`]).
    pub const TOKENS_SHIFT: u32 = 16;
    /// The most tokens one result can count.
    pub const MAX_TOKENS: u32 = u32::MAX >> TOKENS_SHIFT;
}

/// How a [`StreamProcessor`] writes its choice.
#[derive(Debug, Clone)]
pub struct ProcessorConfig {
    pub stop: StopConfig,
    pub surface: Surface,
    /// The response id (`chatcmpl-…`), creation time and model name the chunks carry.
    pub id: String,
    pub created: u64,
    pub model: String,
    /// Largest accepted frame (`header_len + body_len`).
    pub max_frame_bytes: u64,
}

/// One streamed choice's output, from socket bytes to SSE bytes.
pub struct StreamProcessor {
    frames: FrameReader,
    state: State,
}

/// Everything but the frame reader, so frames can be handled while the reader holds the bytes.
struct State {
    call_home: CallHome,
    detokenizer: Detokenizer,
    chunks: ChunkWriter,
    /// Server-sent events not yet taken.
    out: Vec<u8>,
    /// Every generated id so far, over every worker the request went to.
    generated: Vec<u32>,
    /// Items read, for naming a malformed one.
    items: u64,
    /// Tokens fed to the detokenizer (a chunk counts whole, as the engine generated it).
    completion_tokens: u64,
    /// Events written.
    sent: u64,
    finished: bool,
    engine_usage: Option<String>,
    problem: String,
    problem_kind: String,
    /// Why the output failed: the engine's error, or a malformed chunk.
    output_error: Option<OutputError>,
}

/// How a choice's output failed (after [`flags::ENGINE_ERROR`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputError {
    /// The engine finished with `{"error": message}`.
    Engine(String),
    /// A chunk the engine sent is malformed; the message names it.
    Invalid(String),
}

/// The text one read adds, before it becomes an event.
#[derive(Default)]
struct Draft {
    text: String,
    tokens: usize,
}

impl StreamProcessor {
    pub fn new(tokenizer: Arc<Tokenizer>, config: ProcessorConfig) -> Self {
        Self {
            frames: FrameReader::new(config.max_frame_bytes),
            state: State {
                call_home: CallHome::new(),
                detokenizer: Detokenizer::new(tokenizer, config.stop),
                chunks: ChunkWriter::new(
                    config.surface,
                    &config.id,
                    config.created,
                    &config.model,
                    0,
                ),
                out: Vec::new(),
                generated: Vec::new(),
                items: 0,
                completion_tokens: 0,
                sent: 0,
                finished: false,
                engine_usage: None,
                problem: String::new(),
                problem_kind: String::new(),
                output_error: None,
            },
        }
    }

    /// A new call-home connection (a first worker, or the next after a migration): its handshake
    /// was read, its prologue comes next. The output goes on where the last one stopped.
    pub fn connect(&mut self) {
        self.frames.reset();
        self.state.call_home = CallHome::new();
    }

    /// Takes one socket read; returns what it brought as [`flags`], with the number of tokens it
    /// brought above [`flags::TOKENS_SHIFT`]. The events it adds wait in the output ([`Self::take`]).
    pub fn read(&mut self, piece: &[u8]) -> u32 {
        let Self { frames, state } = self;
        if state.call_home.phase() == Phase::Closed {
            return 0;
        }
        let mut result = 0;
        let mut draft = Draft::default();
        let decoded = frames.feed(piece, |header, body| {
            let (flags, flow) = state.on_frame(header, body, &mut draft);
            result |= flags;
            flow
        });
        if let Err(err) = decoded {
            state.call_home.close();
            state.problem = err.0;
            result |= flags::VIOLATION;
        }
        if result & (flags::OUTPUT | flags::FINISHED) == flags::OUTPUT {
            state.emit(&draft.text, None, draft.tokens > 0);
        }
        // The read's token count rides above the flags: the caller's metrics need no second call.
        let tokens = u32::try_from(draft.tokens)
            .unwrap_or(u32::MAX)
            .min(flags::MAX_TOKENS);
        result | (tokens << flags::TOKENS_SHIFT)
    }

    /// The events written since the last take.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.state.out)
    }

    /// [`Self::take`] framed as one HTTP/1.1 chunk (`{size:x}\r\n…\r\n`); empty when there is
    /// nothing (an empty chunk would end the response).
    pub fn take_chunk(&mut self) -> Vec<u8> {
        let out = &self.state.out;
        if out.is_empty() {
            return Vec::new();
        }
        let head = format!("{:x}\r\n", out.len());
        let mut chunk = Vec::with_capacity(head.len() + out.len() + 2);
        chunk.extend_from_slice(head.as_bytes());
        chunk.extend_from_slice(out);
        chunk.extend_from_slice(b"\r\n");
        self.state.out.clear();
        chunk
    }

    /// The output ended without a finish reason (the worker's end marker, or a stop the caller
    /// asked for): what was held back, and the choice's last event with `stop`.
    pub fn end(&mut self) {
        let state = &mut self.state;
        if state.finished {
            return;
        }
        state.finished = true;
        match state.detokenizer.finish() {
            Ok(tail) if !tail.text.is_empty() => state.emit(&tail.text, None, true),
            Ok(_) => {}
            Err(err) => state.output_error = Some(OutputError::Invalid(err.to_string())),
        }
        state.emit("", Some("stop"), true);
    }

    /// Finishes the choice with `length`: every token arrived, only the worker's end marker
    /// was lost (a migration with no tokens left to generate).
    pub fn finish_length(&mut self) {
        let state = &mut self.state;
        if !state.finished {
            if let Err(error) = state.finish(&mut Draft::default(), &FinishReason::Length) {
                state.output_error = Some(error);
            }
        }
    }

    /// Bytes of an unfinished frame (a truncated frame when the socket closes).
    pub fn buffered(&self) -> usize {
        self.frames.buffered()
    }

    /// Every token id generated so far (the continuation's prompt after a migration).
    pub fn generated(&self) -> &[u32] {
        &self.state.generated
    }

    /// Tokens generated so far.
    pub fn completion_tokens(&self) -> u64 {
        self.state.completion_tokens
    }

    /// The choice has finished.
    pub fn finished(&self) -> bool {
        self.state.finished
    }

    /// The usage the engine last reported, as JSON text.
    pub fn engine_usage(&self) -> Option<&str> {
        self.state.engine_usage.as_deref()
    }

    /// What went wrong, after a read that flagged a problem.
    pub fn problem(&self) -> &str {
        &self.state.problem
    }

    /// How the output failed, after [`flags::ENGINE_ERROR`].
    pub fn output_error(&self) -> Option<&OutputError> {
        self.state.output_error.as_ref()
    }

    /// The worker's error kind, after [`flags::WORKER_ERROR`].
    pub fn problem_kind(&self) -> &str {
        &self.state.problem_kind
    }
}

impl State {
    fn on_frame(&mut self, header: &[u8], body: &[u8], draft: &mut Draft) -> (u32, Flow) {
        match self.call_home.on_frame(header, body) {
            Event::Started => (flags::STARTED, Flow::Continue),
            Event::Refused(message) => {
                self.problem = message;
                (flags::REFUSED, Flow::Stop)
            }
            Event::Violation(reason) => {
                self.problem = reason;
                (flags::VIOLATION, Flow::Stop)
            }
            Event::End => (flags::END, Flow::Continue),
            Event::Sentinel => (flags::SENTINEL, Flow::Stop),
            Event::StrayControl(word) => {
                self.problem = word.to_owned();
                (flags::STRAY_CONTROL, Flow::Continue)
            }
            Event::Item(ItemOf::Typed(item)) => {
                self.on_item(Ok(AnnotatedOutput::into_item(item)), draft)
            }
            Event::Item(ItemOf::Raw(json)) => self.on_item(read_item(json), draft),
        }
    }

    fn on_item(&mut self, item: Result<Item<'_>, String>, draft: &mut Draft) -> (u32, Flow) {
        let index = self.items;
        self.items += 1;
        if self.finished {
            // Nothing after the finish matters, not even a malformed item or an error.
            return (0, Flow::Continue);
        }
        let chunk = match item {
            Ok(Item::Output(chunk)) => chunk,
            Ok(Item::Skip) => return (0, Flow::Continue),
            Ok(Item::Error { kind, message }) => {
                // What arrived before the error still goes out; nothing after it is read.
                self.problem = message;
                self.problem_kind = kind;
                self.call_home.close();
                let output = if draft.tokens == 0 && draft.text.is_empty() {
                    0
                } else {
                    flags::OUTPUT
                };
                return (flags::WORKER_ERROR | output, Flow::Stop);
            }
            Err(reason) => {
                return self.output_failed(OutputError::Invalid(format!(
                    "engine output chunk {index}: {reason}"
                )));
            }
        };
        self.generated.extend_from_slice(&chunk.token_ids);
        if let Some(usage) = chunk.completion_usage.filter(|u| u.get() != "null") {
            self.engine_usage = Some(usage.get().to_owned());
        }
        // One step per chunk, not per run of chunks: where a stop string ends the output, the
        // token count then does not depend on how the socket reads fell.
        let flags = self.feed(
            draft,
            &chunk.token_ids,
            chunk.text.as_deref(),
            chunk.finish_reason.as_ref(),
        );
        (flags, Flow::Continue)
    }

    /// Feeds ids (and the engine's text) into the draft; finishes the choice on a stop or a
    /// finish reason. Returns the flags of what happened.
    fn feed(
        &mut self,
        draft: &mut Draft,
        ids: &[u32],
        text: Option<&str>,
        reason: Option<&FinishReason>,
    ) -> u32 {
        self.completion_tokens += ids.len() as u64;
        draft.tokens += ids.len();
        let step = match self.detokenizer.push(ids, text) {
            Ok(step) => step,
            Err(err) => return self.output_failed(OutputError::Invalid(err.to_string())).0,
        };
        draft.text.push_str(&step.text);
        if step.stop.is_some() {
            self.finished = true;
            self.emit(&draft.text, Some("stop"), true);
            return flags::OUTPUT | flags::FINISHED;
        }
        match reason {
            None => flags::OUTPUT,
            Some(reason) => match self.finish(draft, reason) {
                Ok(()) => flags::OUTPUT | flags::FINISHED,
                Err(error) => self.output_failed(error).0,
            },
        }
    }

    fn output_failed(&mut self, error: OutputError) -> (u32, Flow) {
        self.finished = true;
        self.output_error = Some(error);
        (
            flags::OUTPUT | flags::ENGINE_ERROR | flags::FINISHED,
            Flow::Continue,
        )
    }

    /// The engine's finish reason ends the choice: what was held back, then the last event.
    /// An engine error writes nothing: the request fails with it.
    fn finish(&mut self, draft: &mut Draft, reason: &FinishReason) -> Result<(), OutputError> {
        self.finished = true;
        let tail = self
            .detokenizer
            .finish()
            .map_err(|err| OutputError::Invalid(err.to_string()))?;
        if let FinishReason::Error { error } = reason {
            return Err(OutputError::Engine(error.clone()));
        }
        draft.text.push_str(&tail.text);
        let openai = match (tail.stop, reason) {
            (Some(_), _) => "stop",
            (None, FinishReason::Length) => "length",
            (None, FinishReason::ContentFilter) => "content_filter",
            _ => "stop",
        };
        self.emit(&draft.text, Some(openai), true);
        Ok(())
    }

    /// Writes one event, unless it would add nothing to a choice that already started.
    fn emit(&mut self, text: &str, finish_reason: Option<&str>, has_tokens: bool) {
        let first = self.sent == 0;
        if finish_reason.is_none() && !first && text.is_empty() {
            return;
        }
        if finish_reason.is_none() && first && text.is_empty() && !has_tokens {
            return;
        }
        self.chunks.write(&mut self.out, text, first, finish_reason);
        self.sent += 1;
    }
}
