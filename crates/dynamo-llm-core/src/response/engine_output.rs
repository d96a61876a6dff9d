//! One response item of a Tokens-input worker: Dynamo's `Annotated` wrapper around an
//! `LLMEngineOutput` chunk (new token ids, maybe text, maybe the finish reason), or an error.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// Dynamo's finish reasons as engines send them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Eos,
    Length,
    Stop,
    Cancelled,
    /// An alias of `cancelled`.
    Abort,
    ContentFilter,
    /// `{"error": "message"}`: the engine failed.
    #[serde(untagged)]
    Error {
        error: String,
    },
}

/// The fields of an `LLMEngineOutput` chunk the response needs (log probabilities are not
/// requested on this path).
#[derive(Debug, Deserialize)]
pub struct EngineOutput<'a> {
    #[serde(default)]
    pub token_ids: Vec<u32>,
    pub text: Option<String>,
    pub finish_reason: Option<FinishReason>,
    /// The engine's usage, kept as JSON text (the caller reads its cached-token count).
    #[serde(borrow)]
    pub completion_usage: Option<&'a RawValue>,
}

/// What one item means.
#[derive(Debug)]
pub enum Item<'a> {
    Output(EngineOutput<'a>),
    /// An annotation without data (a comment, an event).
    Skip,
    /// The worker failed the request: Dynamo's error kind and its message.
    Error {
        kind: String,
        message: String,
    },
}

#[derive(Deserialize)]
struct Annotated<'a> {
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    event: Option<Value>,
    comment: Option<Value>,
    error: Option<Value>,
}

/// An `Annotated` item whose data is a well-formed chunk, read with its frame in one pass
/// ([`super::call_home::CallHome::on_frame`]); any other item is read by [`read_item`].
#[derive(Debug, Deserialize)]
pub struct AnnotatedOutput<'a> {
    #[serde(borrow)]
    data: Option<EngineOutput<'a>>,
    event: Option<Value>,
    comment: Option<Value>,
    error: Option<Value>,
}

impl<'a> AnnotatedOutput<'a> {
    /// What the item means.
    pub fn into_item(self) -> Item<'a> {
        if self.event.as_ref().and_then(Value::as_str) == Some("error") {
            return worker_error(self.error.as_ref(), self.comment.as_ref());
        }
        match self.data {
            None => Item::Skip,
            Some(chunk) => Item::Output(chunk),
        }
    }
}

/// Reads an item; `Err` names what is wrong with it.
pub fn read_item(json: &str) -> Result<Item<'_>, String> {
    let annotated = match serde_json::from_str::<Annotated<'_>>(json) {
        Ok(annotated) => annotated,
        // Not an `Annotated` object: the item is the chunk itself (as the JS reader takes it).
        Err(_) => return output(json).map(Item::Output),
    };
    if annotated.event.as_ref().and_then(Value::as_str) == Some("error") {
        return Ok(worker_error(
            annotated.error.as_ref(),
            annotated.comment.as_ref(),
        ));
    }
    match annotated.data.map(RawValue::get) {
        None | Some("null") => Ok(Item::Skip),
        Some(data) => output(data).map(Item::Output),
    }
}

fn output(json: &str) -> Result<EngineOutput<'_>, String> {
    let chunk: EngineOutput<'_> = serde_json::from_str(json).map_err(|err| err.to_string())?;
    if let Some(usage) = chunk.completion_usage.filter(|u| u.get() != "null") {
        let usage: Value = serde_json::from_str(usage.get()).map_err(|err| err.to_string())?;
        let int = |field: &str| usage.get(field).is_some_and(|v| v.is_i64() || v.is_u64());
        if !int("prompt_tokens") || !int("completion_tokens") {
            return Err(
                "completion_usage needs integer prompt_tokens and completion_tokens".into(),
            );
        }
    }
    Ok(chunk)
}

/// The kind and message of an error item, read as the runtime reads them: `error.error_type` is
/// a kind name or `{"Backend": kind}`; the message is `error.message`, else the comments.
fn worker_error(error: Option<&Value>, comment: Option<&Value>) -> Item<'static> {
    let error = error.filter(|e| !e.is_null());
    let comment = comment.filter(|c| !c.is_null());
    let well_formed = error.is_none_or(|e| {
        e.as_object().is_some_and(|o| {
            o.get("message").is_none_or(Value::is_string)
                && o.get("error_type").is_none_or(|t| {
                    t.is_string()
                        || t.as_object()
                            .is_some_and(|m| m.values().all(Value::is_string))
                })
        })
    }) && comment
        .is_none_or(|c| c.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
    if !well_formed {
        return Item::Error {
            kind: "Unknown".into(),
            message: "worker reported a malformed error item".into(),
        };
    }
    let kind = match error.and_then(|e| e.get("error_type")) {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Object(map)) => map
            .values()
            .next()
            .and_then(Value::as_str)
            .unwrap_or("Unknown")
            .to_owned(),
        _ => "Unknown".into(),
    };
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            comment.and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; ")
            })
        })
        .unwrap_or_else(|| "worker reported an error".into());
    Item::Error { kind, message }
}
