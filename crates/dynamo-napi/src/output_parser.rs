//! `OutputParser`: one request's tool-call and reasoning parsing, one call per delta.

use dynamo_llm_core::parsers::forced_choice::ForcedChoice;
use dynamo_llm_core::parsers::{self, OutputParser as Core, ParsedText, ParserOptions};
use napi::Result;
use napi_derive::napi;

use crate::convert::js_error;

/// Which parsers apply to one request.
#[napi(object)]
pub struct OutputParserOptions {
    /// The card's `tool_call_parser`.
    pub tool_call_parser: Option<String>,
    /// The card's `reasoning_parser`.
    pub reasoning_parser: Option<String>,
    /// The request's `tools`; without them (or with `tool_choice: "none"`) no tool calls are parsed.
    pub tools: Option<serde_json::Value>,
    /// The request turned thinking off (`enable_thinking: false` in its template arguments).
    pub thinking_disabled: Option<bool>,
    /// `tool_choice: "required"`: the output is read as calls once it ends.
    pub tool_choice_required: Option<bool>,
    /// `tool_choice` names this function: the output is read as its call once it ends.
    pub tool_choice_function: Option<String>,
}

/// A parsed tool call: the function and its arguments as JSON text.
#[napi(object)]
pub struct ParsedToolCall {
    pub name: String,
    pub arguments: String,
}

/// What a delta of text turned into.
#[napi(object)]
pub struct ParsedDelta {
    pub reasoning: String,
    pub content: String,
    pub tool_calls: Vec<ParsedToolCall>,
}

fn to_js(parsed: ParsedText) -> ParsedDelta {
    ParsedDelta {
        reasoning: parsed.reasoning,
        content: parsed.content,
        tool_calls: parsed
            .tool_calls
            .into_iter()
            .map(|c| ParsedToolCall {
                name: c.name,
                arguments: c.arguments,
            })
            .collect(),
    }
}

/// Splits one request's streamed text into reasoning, content and tool calls.
#[napi]
pub struct OutputParser {
    inner: Core,
}

#[napi]
impl OutputParser {
    /// Throws naming an unknown parser.
    #[napi(constructor)]
    pub fn new(options: OutputParserOptions) -> Result<Self> {
        let forced = match (
            options.tool_choice_function,
            options.tool_choice_required.unwrap_or(false),
        ) {
            (Some(name), _) => Some(ForcedChoice::Named(name)),
            (None, true) => Some(ForcedChoice::Required),
            (None, false) => None,
        };
        let options = ParserOptions {
            forced,
            tool_call_parser: options.tool_call_parser,
            reasoning_parser: options.reasoning_parser,
            tools: options.tools,
            thinking_disabled: options.thinking_disabled.unwrap_or(false),
        };
        Ok(Self {
            inner: Core::new(&options).map_err(js_error)?,
        })
    }

    /// True when no parser applies to this request: its text can go out as it is.
    #[napi(getter)]
    pub fn passthrough(&self) -> bool {
        self.inner.is_passthrough()
    }

    /// Parses the next delta of text.
    #[napi]
    pub fn push(&mut self, text: String) -> ParsedDelta {
        to_js(self.inner.push(&text))
    }

    /// The output ended: what was held back.
    #[napi]
    pub fn finish(&mut self) -> ParsedDelta {
        to_js(self.inner.finish())
    }
}

/// Throws naming the parser when a card's `tool_call_parser` or `reasoning_parser` is unknown.
#[napi]
pub fn check_parser_names(
    tool_call_parser: Option<String>,
    reasoning_parser: Option<String>,
) -> Result<()> {
    parsers::check_parser_names(tool_call_parser.as_deref(), reasoning_parser.as_deref())
        .map_err(js_error)
}

/// The tool-call parsers frontends know.
#[napi]
pub fn tool_call_parser_names() -> Vec<&'static str> {
    parsers::tool_call_parser_names().to_vec()
}

/// The reasoning parsers frontends know.
#[napi]
pub fn reasoning_parser_names() -> Vec<&'static str> {
    parsers::reasoning_parser_names().to_vec()
}

/// The markers of a reasoning parser: what opens and closes reasoning, and whether output starts inside it.
#[napi(object)]
pub struct ReasoningMarkers {
    pub start: String,
    pub end: String,
    pub forced: bool,
}

/// The markers of the reasoning parser `name`, or null for a name frontends do not know.
#[napi]
pub fn reasoning_parser_markers(name: String) -> Option<ReasoningMarkers> {
    parsers::reasoning::reasoning_format(&name).map(|f| ReasoningMarkers {
        start: f.start.into(),
        end: f.end.into(),
        forced: f.forced,
    })
}
