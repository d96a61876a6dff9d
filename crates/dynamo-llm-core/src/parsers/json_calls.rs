//! Tool calls written as JSON: `{"name": …, "arguments": {…}}` objects, alone or in an array
//! (hermes, llama3_json, mistral). Arguments are kept as the model wrote them.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::ToolCall;

#[derive(Deserialize)]
struct Call<'a> {
    name: String,
    #[serde(borrow, alias = "parameters")]
    arguments: Option<&'a RawValue>,
}

/// The calls of the first JSON value of `text` (after whitespace), and the byte offset where it
/// ends; `None` when `text` does not start with a call or an array of calls.
pub(crate) fn leading_calls(text: &str) -> Option<(Vec<ToolCall>, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
    let raw = values.next()?.ok()?.get();
    let end = values.byte_offset();
    // serde's untagged enums cannot hold borrowed raw values: look at the first byte instead.
    let calls: Vec<Call> = if raw.starts_with('[') {
        serde_json::from_str(raw).ok()?
    } else {
        vec![serde_json::from_str(raw).ok()?]
    };
    if calls.is_empty() {
        return None;
    }
    let calls = calls
        .into_iter()
        .map(|c| ToolCall {
            name: c.name,
            arguments: c
                .arguments
                .map_or_else(|| "{}".to_string(), |raw| raw.get().to_string()),
        })
        .collect();
    Some((calls, end))
}

/// The raw text of the JSON object `text` starts with, and the byte offset where it ends.
pub(crate) fn leading_object(text: &str) -> Option<(&str, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
    let raw = values.next()?.ok()?.get();
    raw.starts_with('{').then(|| (raw, values.byte_offset()))
}

/// The calls when `text` is exactly JSON calls (surrounding whitespace aside).
pub(crate) fn only_calls(text: &str) -> Option<Vec<ToolCall>> {
    let (calls, end) = leading_calls(text)?;
    text[end..].trim().is_empty().then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_arguments_as_written() {
        let text = " {\"name\": \"f\", \"arguments\": {\"a\": 1,  \"b\": [2]}} tail";
        let (calls, end) = leading_calls(text).unwrap();
        assert_eq!(
            calls,
            vec![ToolCall {
                name: "f".into(),
                arguments: "{\"a\": 1,  \"b\": [2]}".into()
            }]
        );
        assert_eq!(&text[end..], " tail");
    }

    #[test]
    fn reads_arrays_parameters_and_missing_arguments() {
        let calls = only_calls("[{\"name\":\"f\",\"parameters\":{}}, {\"name\":\"g\"}]").unwrap();
        assert_eq!(calls[0].arguments, "{}");
        assert_eq!(
            calls[1],
            ToolCall {
                name: "g".into(),
                arguments: "{}".into()
            }
        );
    }

    #[test]
    fn rejects_what_is_not_a_call() {
        assert!(leading_calls("{\"name\": \"f\", \"arguments\": {\"a\": ").is_none());
        assert!(leading_calls("{\"tool\": 1}").is_none());
        assert!(leading_calls("[]").is_none());
        assert!(only_calls("{\"name\": \"f\"} more").is_none());
    }
}
