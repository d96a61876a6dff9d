//! Tool-call and reasoning parsers: split a model's streamed text into reasoning, content and
//! tool calls, the way stock Dynamo's frontend does for the parsers a worker names in its card.

mod deepseek;
pub mod forced_choice;
mod json_calls;
mod marker;
mod pythonic;
pub mod reasoning;
pub mod tool_calls;
mod xml_calls;

use std::collections::HashMap;

use serde_json::Value;

use crate::{LlmError, Result};
use forced_choice::{ForcedChoice, ForcedToolCall};
use reasoning::{reasoning_format, ReasoningParser, REASONING_PARSERS};
use tool_calls::{tool_format, ToolCallParser, TOOL_CALL_PARSERS};

pub use reasoning::ReasoningFormat;
pub use tool_calls::ToolFormat;

/// One tool call: the function's name and its arguments as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// The JSON-schema type of each parameter of each tool in a request, for formats that write
/// values as bare text.
#[derive(Debug, Clone, Default)]
pub struct ParamTypes(HashMap<String, HashMap<String, String>>);

impl ParamTypes {
    /// Reads an OpenAI `tools` array; entries it does not understand are skipped.
    pub fn from_tools(tools: &Value) -> Self {
        let mut types = HashMap::new();
        for tool in tools.as_array().into_iter().flatten() {
            let function = &tool["function"];
            let Some(name) = function["name"].as_str() else {
                continue;
            };
            let params = function["parameters"]["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(key, schema)| {
                    schema["type"]
                        .as_str()
                        .map(|t| (key.clone(), t.to_string()))
                })
                .collect();
            types.insert(name.to_string(), params);
        }
        Self(types)
    }

    fn get(&self, tool: &str, param: &str) -> Option<&str> {
        self.0.get(tool)?.get(param).map(String::as_str)
    }
}

/// What a piece of output turned into.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParsedText {
    pub reasoning: String,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
}

/// What one request's output is parsed with.
#[derive(Debug, Default, Clone)]
pub struct ParserOptions {
    /// The card's `tool_call_parser`; applied only when `tools` is set.
    pub tool_call_parser: Option<String>,
    pub reasoning_parser: Option<String>,
    /// The request's `tools` (absent, or `tool_choice` `none`: no tool-call parsing).
    pub tools: Option<Value>,
    /// `enable_thinking: false` in the request's template arguments: a parser that assumes
    /// reasoning without a start marker is off.
    pub thinking_disabled: bool,
    /// The request's `tool_choice` forces a call (`required` or a named function).
    pub forced: Option<ForcedChoice>,
}

/// How tool calls are found in a request's output.
#[derive(Debug)]
enum Tools {
    Streamed(ToolCallParser),
    Forced(ForcedToolCall),
}

/// One request's output parser: reasoning first, then tool calls in what is not reasoning.
#[derive(Debug)]
pub struct OutputParser {
    reasoning: Option<ReasoningParser>,
    tools: Option<Tools>,
}

/// The names of the tool-call parsers, sorted.
pub fn tool_call_parser_names() -> &'static [&'static str] {
    TOOL_CALL_PARSERS
}

/// The names of the reasoning parsers, sorted.
pub fn reasoning_parser_names() -> &'static [&'static str] {
    REASONING_PARSERS
}

/// Fails naming the parser when `tool_call_parser` or `reasoning_parser` is not one we have.
pub fn check_parser_names(
    tool_call_parser: Option<&str>,
    reasoning_parser: Option<&str>,
) -> Result<()> {
    if let Some(name) = tool_call_parser.filter(|n| tool_format(n).is_none()) {
        return Err(LlmError::InvalidArgument(format!(
            "unknown tool_call_parser {name:?}; known: {}",
            TOOL_CALL_PARSERS.join(", ")
        )));
    }
    if let Some(name) = reasoning_parser.filter(|n| reasoning_format(n).is_none()) {
        return Err(LlmError::InvalidArgument(format!(
            "unknown reasoning_parser {name:?}; known: {}",
            REASONING_PARSERS.join(", ")
        )));
    }
    Ok(())
}

impl OutputParser {
    /// Fails naming an unknown parser.
    pub fn new(options: &ParserOptions) -> Result<Self> {
        check_parser_names(
            options.tool_call_parser.as_deref(),
            options.reasoning_parser.as_deref(),
        )?;
        let reasoning = options
            .reasoning_parser
            .as_deref()
            .and_then(reasoning_format)
            .filter(|f| !(f.forced && options.thinking_disabled))
            .map(ReasoningParser::new);
        let format = options.tool_call_parser.as_deref().and_then(tool_format);
        let tools = match (&options.tools, format, &options.forced) {
            (Some(tools), _, Some(forced)) => Some(Tools::Forced(ForcedToolCall::new(
                forced.clone(),
                format,
                ParamTypes::from_tools(tools),
            ))),
            (Some(tools), Some(format), None) => Some(Tools::Streamed(ToolCallParser::new(
                format,
                ParamTypes::from_tools(tools),
            ))),
            _ => None,
        };
        Ok(Self { reasoning, tools })
    }

    /// True when the parser changes nothing (no parser applies to this request).
    pub fn is_passthrough(&self) -> bool {
        self.reasoning.is_none() && self.tools.is_none()
    }

    /// Parses the next piece of output text.
    pub fn push(&mut self, text: &str) -> ParsedText {
        let (reasoning, content) = match &mut self.reasoning {
            Some(r) => {
                let split = r.push(text);
                (split.reasoning, split.content)
            }
            None => (String::new(), text.to_string()),
        };
        self.tools_after(reasoning, &content, false)
    }

    /// The output ended: everything held back.
    pub fn finish(&mut self) -> ParsedText {
        let (reasoning, content) = match &mut self.reasoning {
            Some(r) => {
                let split = r.finish();
                (split.reasoning, split.content)
            }
            None => (String::new(), String::new()),
        };
        self.tools_after(reasoning, &content, true)
    }

    fn tools_after(&mut self, reasoning: String, content: &str, finish: bool) -> ParsedText {
        let Some(tools) = &mut self.tools else {
            return ParsedText {
                reasoning,
                content: content.to_string(),
                tool_calls: Vec::new(),
            };
        };
        let (mut split, tail) = match tools {
            Tools::Streamed(p) => (p.push(content), finish.then(|| p.finish())),
            Tools::Forced(p) => (p.push(content), finish.then(|| p.finish())),
        };
        if let Some(tail) = tail {
            split.content.push_str(&tail.content);
            split.calls.extend(tail.calls);
        }
        ParsedText {
            reasoning,
            content: split.content,
            tool_calls: split.calls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(tool: Option<&str>, reasoning: Option<&str>) -> ParserOptions {
        ParserOptions {
            tool_call_parser: tool.map(String::from),
            reasoning_parser: reasoning.map(String::from),
            tools: Some(serde_json::json!([])),
            thinking_disabled: false,
            forced: None,
        }
    }

    #[test]
    fn tool_calls_are_parsed_after_reasoning_only() {
        let mut p = OutputParser::new(&options(Some("hermes"), Some("qwen3"))).unwrap();
        let text = "<think>\n<tool_call>{\"name\": \"no\"}</tool_call>\n</think>\n\n<tool_call>\n{\"name\": \"yes\", \"arguments\": {}}\n</tool_call>";
        let mut all = p.push(text);
        let tail = p.finish();
        all.content.push_str(&tail.content);
        assert_eq!(
            all.reasoning,
            "\n<tool_call>{\"name\": \"no\"}</tool_call>\n"
        );
        assert_eq!(all.content, "\n\n");
        assert_eq!(
            all.tool_calls,
            vec![ToolCall {
                name: "yes".into(),
                arguments: "{}".into()
            }]
        );
    }

    #[test]
    fn no_tools_in_the_request_means_no_tool_parsing() {
        let mut p = OutputParser::new(&ParserOptions {
            tools: None,
            ..options(Some("hermes"), None)
        })
        .unwrap();
        assert!(p.is_passthrough());
        assert_eq!(
            p.push("<tool_call>{\"name\": \"f\"}</tool_call>").content,
            "<tool_call>{\"name\": \"f\"}</tool_call>"
        );
    }

    #[test]
    fn thinking_disabled_turns_off_forced_reasoning() {
        let mut p = OutputParser::new(&ParserOptions {
            thinking_disabled: true,
            ..options(None, Some("deepseek_r1"))
        })
        .unwrap();
        assert_eq!(p.push("<think>a</think>b").content, "<think>a</think>b");
        let mut q = OutputParser::new(&ParserOptions {
            thinking_disabled: true,
            ..options(None, Some("qwen3"))
        })
        .unwrap();
        assert_eq!(q.push("<think>a</think>b").reasoning, "a");
    }

    #[test]
    fn unknown_names_are_errors() {
        let err = OutputParser::new(&options(Some("nope"), None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown tool_call_parser \"nope\""), "{err}");
        assert!(OutputParser::new(&options(None, Some("nope"))).is_err());
    }
}
