//! DeepSeek-V3's tool calls: special-token-delimited, each call's arguments in a ```json fence.

use serde_json::Value;

use super::ToolCall;

pub(crate) const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
pub(crate) const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";
const SEP: &str = "<｜tool▁sep｜>";

/// The calls of one `<｜tool▁calls▁begin｜>…` block (its end marker may be missing).
pub(crate) fn deepseek_calls(block: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = block;
    while let Some(at) = rest.find(CALL_BEGIN) {
        let after = &rest[at + CALL_BEGIN.len()..];
        let (call, next) = after.split_once(CALL_END).unwrap_or((after, ""));
        let (_kind, body) = call.split_once(SEP)?;
        let (name, args) = body.split_once('\n').unwrap_or((body, ""));
        let args = args.trim();
        let args = args
            .strip_prefix("```json")
            .or_else(|| args.strip_prefix("```"))
            .unwrap_or(args);
        let args = args.trim_end().strip_suffix("```").unwrap_or(args).trim();
        let value: Value = if args.is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(args).ok()?
        };
        calls.push(ToolCall {
            name: name.trim().to_string(),
            arguments: value.to_string(),
        });
        rest = next;
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> String {
        format!("{CALL_BEGIN}function{SEP}{name}\n```json\n{args}\n```{CALL_END}")
    }

    #[test]
    fn reads_each_call_and_compacts_arguments() {
        let block = format!(
            "{CALLS_BEGIN}{}\n{}{CALLS_END}",
            call("a", "{\"x\": 1}"),
            call("b", "{}")
        );
        let calls = deepseek_calls(&block).unwrap();
        assert_eq!(
            calls,
            vec![
                ToolCall {
                    name: "a".into(),
                    arguments: r#"{"x":1}"#.into()
                },
                ToolCall {
                    name: "b".into(),
                    arguments: "{}".into()
                }
            ]
        );
    }

    #[test]
    fn malformed_arguments_fail_the_block() {
        assert!(deepseek_calls(&format!(
            "{CALLS_BEGIN}{}{CALLS_END}",
            call("a", "{\"x\": ")
        ))
        .is_none());
    }
}
