//! The caller's side of one call-home response stream after the worker's handshake: the prologue,
//! the data frames up to the `complete_final` marker, and the sentinel. The same rules as the
//! runtime's `ResponseStream`, so both paths fail a misbehaving worker with the same messages.

use serde::Deserialize;
use serde_json::value::RawValue;

/// Where the worker's side of the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the header-only prologue.
    Prologue,
    /// Data frames flowing.
    Streaming,
    /// `complete_final` seen; waiting for the sentinel.
    Complete,
    /// Nothing more is read (a refusal, a protocol error, the sentinel).
    Closed,
}

/// One item (the `data` of a data frame): read into `T` in the same pass as its frame, or, where
/// it does not fit `T`, as its JSON text for the caller to make sense of.
#[derive(Debug, PartialEq)]
pub enum ItemOf<'a, T> {
    Typed(T),
    Raw(&'a str),
}

/// What one frame meant.
#[derive(Debug, PartialEq)]
pub enum Event<'a, T> {
    /// The prologue: the handler started.
    Started,
    /// An error prologue: the worker could not start the handler.
    Refused(String),
    /// One item.
    Item(ItemOf<'a, T>),
    /// The `complete_final` marker.
    End,
    /// The sentinel after the end marker: the stream is over.
    Sentinel,
    /// A control word (`stop` / `kill`) sent by the worker, which only the caller may send.
    StrayControl(&'static str),
    /// The worker broke the protocol; the stream cannot go on.
    Violation(String),
}

/// The protocol state of one stream.
#[derive(Debug)]
pub struct CallHome {
    phase: Phase,
}

impl Default for CallHome {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Deserialize)]
struct Wrapper<'a> {
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    complete_final: Option<serde_json::Value>,
}

/// The common data frame, its item read in the same pass.
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
struct Typed<T> {
    data: Option<T>,
    complete_final: Option<bool>,
}

impl CallHome {
    /// A stream whose handshake was read: the prologue comes next.
    pub fn new() -> Self {
        Self {
            phase: Phase::Prologue,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Nothing more is read from this stream (the caller gave up on it).
    pub fn close(&mut self) {
        self.phase = Phase::Closed;
    }

    /// Interprets the next frame, reading an item as a `T` where it is one.
    pub fn on_frame<'a, T: Deserialize<'a>>(
        &mut self,
        header: &[u8],
        body: &'a [u8],
    ) -> Event<'a, T> {
        let event = self.interpret(header, body);
        match event {
            Event::Started => self.phase = Phase::Streaming,
            Event::End => self.phase = Phase::Complete,
            Event::Refused(_) | Event::Sentinel | Event::Violation(_) => self.phase = Phase::Closed,
            Event::Item(_) | Event::StrayControl(_) => {}
        }
        event
    }

    fn interpret<'a, T: Deserialize<'a>>(&self, header: &[u8], body: &'a [u8]) -> Event<'a, T> {
        match self.phase {
            Phase::Prologue => {
                if !body.is_empty() || header.is_empty() {
                    return violation("expected a header-only prologue frame");
                }
                prologue(header)
            }
            Phase::Streaming if header.is_empty() => data_frame(body),
            Phase::Streaming => match control_word(header, body) {
                Some("sentinel") => violation("sentinel before complete_final"),
                Some(word) => Event::StrayControl(word),
                None => violation("unexpected header frame in the data stream"),
            },
            Phase::Complete => match control_word(header, body) {
                Some("sentinel") => Event::Sentinel,
                _ if header.is_empty() => violation("data frame after complete_final"),
                _ => violation("unexpected frame after complete_final"),
            },
            Phase::Closed => violation("frame after the stream was over"),
        }
    }
}

fn violation<'a, T>(reason: &str) -> Event<'a, T> {
    Event::Violation(reason.to_owned())
}

/// The header-only control word of a frame, if it is one.
fn control_word(header: &[u8], body: &[u8]) -> Option<&'static str> {
    if !body.is_empty() {
        return None;
    }
    match header {
        b"\"sentinel\"" => Some("sentinel"),
        b"\"stop\"" => Some("stop"),
        b"\"kill\"" => Some("kill"),
        _ => None,
    }
}

fn prologue<'a, T>(header: &[u8]) -> Event<'a, T> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(header) else {
        return violation("prologue header is not JSON");
    };
    match value.as_object().and_then(|o| o.get("error")) {
        None => violation("prologue header has no \"error\" field"),
        Some(serde_json::Value::Null) => Event::Started,
        // Newer workers may add a structured `typed_error`; the text in `error` is what we surface.
        Some(serde_json::Value::String(text)) => Event::Refused(text.clone()),
        Some(other) => Event::Refused(other.to_string()),
    }
}

fn data_frame<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Event<'a, T> {
    // One pass for the common frame; anything else is read again below, to say what it is.
    if let Ok(frame) = serde_json::from_slice::<Typed<T>>(body) {
        if frame.complete_final == Some(true) {
            return Event::End;
        }
        if let Some(item) = frame.data {
            return Event::Item(ItemOf::Typed(item));
        }
    }
    let wrapper = match serde_json::from_slice::<Wrapper<'_>>(body) {
        Ok(wrapper) => wrapper,
        Err(err) if err.is_data() => {
            return violation("data frame is not a JSON object");
        }
        Err(_) => {
            return Event::Violation(format!("data frame is not JSON ({} bytes)", body.len()))
        }
    };
    if wrapper.complete_final == Some(serde_json::Value::Bool(true)) {
        return Event::End;
    }
    // Dynamo reads `data` as an Option: null and absent both mean "no item", only legal on the end.
    match wrapper.data.map(RawValue::get) {
        None | Some("null") => violation("data frame has neither data nor complete_final"),
        Some(item) => Event::Item(ItemOf::Raw(item)),
    }
}
