//! Why a generation stream ended, in the wire form Dynamo's frontends expect.
//!
//! Engines written in other languages emit loosely spelled reasons (`"abort"`,
//! `"error: boom"`); this module is the single place where those spellings are
//! normalized, so the rest of the stack only ever sees [`FinishReason`].

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// Every spelling accepted on input, listed in error messages so a caller can fix the value.
const ACCEPTED: &str =
    "eos, length, stop, cancelled, abort, content_filter, \"error: <msg>\", {\"error\": \"<msg>\"}";

/// The reason a stream finished.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// The model produced its end-of-sequence token.
    Eos,
    /// `max_tokens` (or the context window) was reached.
    Length,
    /// A stop string or stop token id matched.
    Stop,
    /// The engine failed mid-stream; the message is shown to the client.
    Error(String),
    /// The request was cancelled (client went away, or the engine aborted it).
    Cancelled,
    /// Output was withheld by a content filter.
    ContentFilter,
}

/// A value that is not a recognized finish reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FinishReasonError {
    /// A string that matches no accepted spelling.
    #[error("unknown finish reason {value:?}; expected one of: {ACCEPTED}")]
    Unknown {
        /// The offending input, verbatim.
        value: String,
    },
    /// A JSON value of the wrong shape (not a string, not `{"error": "<msg>"}`).
    #[error("invalid finish reason {value}; expected one of: {ACCEPTED}")]
    InvalidShape {
        /// The offending JSON, re-serialized.
        value: String,
    },
}

impl FinishReason {
    /// The OpenAI `finish_reason` this maps to. OpenAI has no error or cancel
    /// reason, so those (and EOS) collapse to `"stop"`.
    pub fn as_openai(&self) -> &'static str {
        match self {
            FinishReason::Eos | FinishReason::Stop | FinishReason::Cancelled => "stop",
            FinishReason::Error(_) => "stop",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
        }
    }

    /// True for [`FinishReason::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, FinishReason::Cancelled)
    }

    /// True for [`FinishReason::Error`].
    pub fn is_error(&self) -> bool {
        matches!(self, FinishReason::Error(_))
    }

    /// The wire name of a unit variant; `None` for `Error`, which is an object on the wire.
    fn unit_name(&self) -> Option<&'static str> {
        match self {
            FinishReason::Eos => Some("eos"),
            FinishReason::Length => Some("length"),
            FinishReason::Stop => Some("stop"),
            FinishReason::Cancelled => Some("cancelled"),
            FinishReason::ContentFilter => Some("content_filter"),
            FinishReason::Error(_) => None,
        }
    }

    /// Exact wire strings only (plus the `abort` alias) — what serde accepts.
    fn from_wire_str(s: &str) -> Option<FinishReason> {
        Some(match s {
            "eos" => FinishReason::Eos,
            "length" => FinishReason::Length,
            "stop" => FinishReason::Stop,
            "cancelled" | "abort" => FinishReason::Cancelled,
            "content_filter" => FinishReason::ContentFilter,
            _ => return None,
        })
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FinishReason::Error(msg) => write!(f, "error: {msg}"),
            other => f.write_str(other.unit_name().unwrap_or_default()),
        }
    }
}

impl FromStr for FinishReason {
    type Err = FinishReasonError;

    /// Accepts the wire strings, `"abort"`, and the human form `"error: <msg>"`
    /// (also `"error:<msg>"` and a bare `"error"`; the message is trimmed).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        if let Some(r) = FinishReason::from_wire_str(trimmed) {
            return Ok(r);
        }
        if let Some(rest) = trimmed.strip_prefix("error") {
            if rest.is_empty() {
                return Ok(FinishReason::Error(String::new()));
            }
            if let Some(msg) = rest.strip_prefix(':') {
                return Ok(FinishReason::Error(msg.trim().to_string()));
            }
        }
        Err(FinishReasonError::Unknown {
            value: s.to_string(),
        })
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            FinishReason::Error(msg) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("error", msg)?;
                map.end()
            }
            other => serializer.serialize_str(other.unit_name().unwrap_or_default()),
        }
    }
}

struct FinishReasonVisitor;

impl<'de> Visitor<'de> for FinishReasonVisitor {
    type Value = FinishReason;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a finish reason ({ACCEPTED})")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<FinishReason, E> {
        FinishReason::from_wire_str(v).ok_or_else(|| {
            E::custom(FinishReasonError::Unknown {
                value: v.to_string(),
            })
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FinishReason, A::Error> {
        let key: String = map
            .next_key()?
            .ok_or_else(|| de::Error::custom("empty object is not a finish reason"))?;
        if key != "error" {
            return Err(de::Error::custom(format!(
                "unexpected key {key:?} in finish reason object; only \"error\" is allowed"
            )));
        }
        let msg: String = map.next_value()?;
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "unexpected extra key {extra:?} in finish reason object"
            )));
        }
        Ok(FinishReason::Error(msg))
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FinishReasonVisitor)
    }
}

/// Lenient parse of a finish reason that arrived as JSON from an engine:
/// a string is read with [`FromStr`] (so `"error: boom"` works), an object must be
/// `{"error": "<msg>"}`; anything else is rejected.
pub fn parse_finish_reason_json(v: &serde_json::Value) -> Result<FinishReason, FinishReasonError> {
    match v {
        serde_json::Value::String(s) => s.parse(),
        serde_json::Value::Object(map) if map.len() == 1 => match map.get("error") {
            Some(serde_json::Value::String(msg)) => Ok(FinishReason::Error(msg.clone())),
            _ => Err(FinishReasonError::InvalidShape {
                value: v.to_string(),
            }),
        },
        _ => Err(FinishReasonError::InvalidShape {
            value: v.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all() -> Vec<FinishReason> {
        vec![
            FinishReason::Eos,
            FinishReason::Length,
            FinishReason::Stop,
            FinishReason::Error("boom".into()),
            FinishReason::Cancelled,
            FinishReason::ContentFilter,
        ]
    }

    #[test]
    fn serializes_to_wire_shapes() {
        assert_eq!(
            serde_json::to_value(FinishReason::Eos).unwrap(),
            json!("eos")
        );
        assert_eq!(
            serde_json::to_value(FinishReason::Length).unwrap(),
            json!("length")
        );
        assert_eq!(
            serde_json::to_value(FinishReason::Stop).unwrap(),
            json!("stop")
        );
        assert_eq!(
            serde_json::to_value(FinishReason::Cancelled).unwrap(),
            json!("cancelled")
        );
        assert_eq!(
            serde_json::to_value(FinishReason::ContentFilter).unwrap(),
            json!("content_filter")
        );
        assert_eq!(
            serde_json::to_value(FinishReason::Error("boom".into())).unwrap(),
            json!({"error": "boom"})
        );
    }

    #[test]
    fn serde_round_trips_every_variant() {
        for r in all() {
            let s = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<FinishReason>(&s).unwrap(), r, "{s}");
        }
    }

    #[test]
    fn deserializes_abort_as_cancelled() {
        assert_eq!(
            serde_json::from_value::<FinishReason>(json!("abort")).unwrap(),
            FinishReason::Cancelled
        );
    }

    #[test]
    fn deserialize_rejects_unknown_and_bad_shapes() {
        let err = serde_json::from_value::<FinishReason>(json!("done")).unwrap_err();
        assert!(err.to_string().contains("\"done\""), "{err}");
        assert!(err.to_string().contains("content_filter"), "{err}");
        // serde is strict: the human "error: x" form is a FromStr convenience only.
        assert!(serde_json::from_value::<FinishReason>(json!("error: x")).is_err());
        assert!(serde_json::from_value::<FinishReason>(json!({})).is_err());
        assert!(serde_json::from_value::<FinishReason>(json!({"oops": "x"})).is_err());
        assert!(serde_json::from_value::<FinishReason>(json!({"error": 3})).is_err());
        assert!(serde_json::from_value::<FinishReason>(json!({"error": "a", "x": 1})).is_err());
        assert!(serde_json::from_value::<FinishReason>(json!(7)).is_err());
        assert!(serde_json::from_value::<FinishReason>(json!(null)).is_err());
    }

    #[test]
    fn from_str_accepts_wire_names_and_alias() {
        assert_eq!("eos".parse::<FinishReason>().unwrap(), FinishReason::Eos);
        assert_eq!(
            "length".parse::<FinishReason>().unwrap(),
            FinishReason::Length
        );
        assert_eq!("stop".parse::<FinishReason>().unwrap(), FinishReason::Stop);
        assert_eq!(
            "cancelled".parse::<FinishReason>().unwrap(),
            FinishReason::Cancelled
        );
        assert_eq!(
            "abort".parse::<FinishReason>().unwrap(),
            FinishReason::Cancelled
        );
        assert_eq!(
            "content_filter".parse::<FinishReason>().unwrap(),
            FinishReason::ContentFilter
        );
        assert_eq!(
            " stop ".parse::<FinishReason>().unwrap(),
            FinishReason::Stop
        );
    }

    #[test]
    fn from_str_accepts_error_forms_with_trimmed_message() {
        assert_eq!(
            "error: out of memory ".parse::<FinishReason>().unwrap(),
            FinishReason::Error("out of memory".into())
        );
        assert_eq!(
            "error:oom".parse::<FinishReason>().unwrap(),
            FinishReason::Error("oom".into())
        );
        assert_eq!(
            "error".parse::<FinishReason>().unwrap(),
            FinishReason::Error(String::new())
        );
        // The message may itself contain colons.
        assert_eq!(
            "error: a: b".parse::<FinishReason>().unwrap(),
            FinishReason::Error("a: b".into())
        );
    }

    #[test]
    fn from_str_rejects_unknown_with_helpful_message() {
        let err = "finished".parse::<FinishReason>().unwrap_err();
        assert_eq!(
            err,
            FinishReasonError::Unknown {
                value: "finished".into()
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("\"finished\""), "{msg}");
        for name in [
            "eos",
            "length",
            "stop",
            "cancelled",
            "abort",
            "content_filter",
            "error",
        ] {
            assert!(msg.contains(name), "{msg} should list {name}");
        }
        assert!("errors".parse::<FinishReason>().is_err());
        assert!("".parse::<FinishReason>().is_err());
        assert!("EOS".parse::<FinishReason>().is_err());
    }

    #[test]
    fn display_matches_wire_string_and_round_trips() {
        assert_eq!(FinishReason::Eos.to_string(), "eos");
        assert_eq!(FinishReason::ContentFilter.to_string(), "content_filter");
        assert_eq!(
            FinishReason::Error("boom".into()).to_string(),
            "error: boom"
        );
        for r in all() {
            assert_eq!(r.to_string().parse::<FinishReason>().unwrap(), r);
        }
    }

    #[test]
    fn maps_to_openai_reasons() {
        assert_eq!(FinishReason::Eos.as_openai(), "stop");
        assert_eq!(FinishReason::Stop.as_openai(), "stop");
        assert_eq!(FinishReason::Cancelled.as_openai(), "stop");
        assert_eq!(FinishReason::Error("x".into()).as_openai(), "stop");
        assert_eq!(FinishReason::Length.as_openai(), "length");
        assert_eq!(FinishReason::ContentFilter.as_openai(), "content_filter");
    }

    #[test]
    fn predicates() {
        assert!(FinishReason::Cancelled.is_cancelled());
        assert!(!FinishReason::Stop.is_cancelled());
        assert!(FinishReason::Error(String::new()).is_error());
        assert!(!FinishReason::Cancelled.is_error());
    }

    #[test]
    fn parse_json_helper_is_lenient_on_strings() {
        assert_eq!(
            parse_finish_reason_json(&json!("abort")).unwrap(),
            FinishReason::Cancelled
        );
        assert_eq!(
            parse_finish_reason_json(&json!("error: x")).unwrap(),
            FinishReason::Error("x".into())
        );
        assert_eq!(
            parse_finish_reason_json(&json!({"error": "y"})).unwrap(),
            FinishReason::Error("y".into())
        );
        assert!(matches!(
            parse_finish_reason_json(&json!("nope")),
            Err(FinishReasonError::Unknown { .. })
        ));
        for bad in [
            json!(1),
            json!(null),
            json!({"error": 1}),
            json!({"stop": "x"}),
            json!([]),
        ] {
            let err = parse_finish_reason_json(&bad).unwrap_err();
            assert!(
                matches!(err, FinishReasonError::InvalidShape { .. }),
                "{bad}"
            );
            assert!(err.to_string().contains("expected one of"));
        }
    }

    #[test]
    fn usable_as_hash_key() {
        let set: std::collections::HashSet<_> = all().into_iter().collect();
        assert_eq!(set.len(), 6);
    }
}
