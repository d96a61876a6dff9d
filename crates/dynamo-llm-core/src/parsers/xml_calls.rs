//! Qwen3-Coder's XML tool calls: `<function=NAME><parameter=KEY>\nVALUE\n</parameter></function>`,
//! values typed by the JSON schema of the request's tool.

use serde_json::{Map, Value};

use super::{ParamTypes, ToolCall};

/// The calls in one `<tool_call>…</tool_call>` segment. A missing `</function>` or
/// `</parameter>` ends at the next tag or at the end of the segment, as a truncated model
/// output would.
pub(crate) fn xml_calls(segment: &str, types: &ParamTypes) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = segment;
    while let Some(at) = rest.find("<function=") {
        let after = &rest[at + "<function=".len()..];
        let close = after.find('>')?;
        let name = after[..close].trim().to_string();
        let body_and_more = &after[close + 1..];
        let (body, next) = match body_and_more.find("</function>") {
            Some(end) => (
                &body_and_more[..end],
                &body_and_more[end + "</function>".len()..],
            ),
            None => (body_and_more, ""),
        };
        let mut arguments = Map::new();
        let mut params = body;
        while let Some(at) = params.find("<parameter=") {
            let after = &params[at + "<parameter=".len()..];
            let close = after.find('>')?;
            let key = after[..close].trim().to_string();
            let value_and_more = &after[close + 1..];
            let end = ["</parameter>", "<parameter="]
                .iter()
                .filter_map(|m| value_and_more.find(m))
                .min()
                .unwrap_or(value_and_more.len());
            let raw = value_and_more[..end]
                .strip_prefix('\n')
                .unwrap_or(&value_and_more[..end]);
            let raw = raw.strip_suffix('\n').unwrap_or(raw);
            let value = typed(raw, types.get(&name, &key));
            arguments.insert(key, value);
            params = value_and_more[end..]
                .strip_prefix("</parameter>")
                .unwrap_or(&value_and_more[end..]);
        }
        if name.is_empty() {
            return None;
        }
        calls.push(ToolCall {
            name,
            arguments: Value::Object(arguments).to_string(),
        });
        rest = next;
    }
    (!calls.is_empty()).then_some(calls)
}

/// A parameter's text as the type its schema gives; text that does not fit stays a string.
fn typed(raw: &str, schema_type: Option<&str>) -> Value {
    let text = raw.trim();
    let parsed = match schema_type {
        Some("integer") => text.parse::<i64>().ok().map(Value::from),
        Some("number") => text.parse::<i64>().ok().map(Value::from).or_else(|| {
            text.parse::<f64>()
                .ok()
                .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
        }),
        Some("boolean") => match text.to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        Some("object" | "array") => serde_json::from_str(text).ok(),
        _ => None,
    };
    parsed.unwrap_or_else(|| Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> ParamTypes {
        ParamTypes::from_tools(
            &serde_json::json!([{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}, "o": {"type": "object"}}}}}]),
        )
    }

    #[test]
    fn types_values_by_the_schema() {
        let seg = "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n<parameter=ok>\ntrue\n</parameter>\n<parameter=o>\n{\"a\": 1}\n</parameter>\n<parameter=s>\n5\n</parameter>\n</function>\n</tool_call>";
        assert_eq!(
            xml_calls(seg, &types()).unwrap(),
            vec![ToolCall {
                name: "f".into(),
                arguments: r#"{"n":3,"ok":true,"o":{"a":1},"s":"5"}"#.into()
            }]
        );
    }

    #[test]
    fn a_truncated_call_runs_to_the_end() {
        let seg = "<tool_call>\n<function=f>\n<parameter=city>\nParis\n</tool_call>";
        assert_eq!(
            xml_calls(seg, &types()).unwrap()[0].arguments,
            r#"{"city":"Paris\n</tool_call>"}"#
        );
        assert!(xml_calls("<tool_call>\nno function\n</tool_call>", &types()).is_none());
    }
}
