//! The streaming tool-call parser: passes content through until a call may be starting, holds
//! ("jails") the text from there, and turns it into calls once it is complete. Held text that
//! is not a valid call is released as content.

use super::marker::{find_first, partial_tail};
use super::{deepseek, json_calls, pythonic, xml_calls, ParamTypes, ToolCall};

/// A tool-call format: the markers that open a call, the one that closes it (formats without one
/// are parsed when the output ends), and how the held text becomes calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    Hermes,
    Qwen3Coder,
    Llama3Json,
    Mistral,
    Pythonic,
    DeepseekV3,
}

/// Names [`tool_format`] knows.
pub const TOOL_CALL_PARSERS: &[&str] = &[
    "deepseek_v3",
    "hermes",
    "llama3_json",
    "mistral",
    "pythonic",
    "qwen3_coder",
];

/// The format of a tool-call parser name, as stock Dynamo names them.
pub fn tool_format(name: &str) -> Option<ToolFormat> {
    Some(match name {
        "hermes" => ToolFormat::Hermes,
        "qwen3_coder" => ToolFormat::Qwen3Coder,
        "llama3_json" => ToolFormat::Llama3Json,
        "mistral" => ToolFormat::Mistral,
        "pythonic" => ToolFormat::Pythonic,
        "deepseek_v3" => ToolFormat::DeepseekV3,
        _ => return None,
    })
}

impl ToolFormat {
    fn starts(self) -> &'static [&'static str] {
        match self {
            Self::Hermes | Self::Qwen3Coder => &["<tool_call>"],
            Self::Llama3Json => &["<|python_tag|>", "{"],
            Self::Mistral => &["[TOOL_CALLS]"],
            Self::Pythonic => &["["],
            Self::DeepseekV3 => &[deepseek::CALLS_BEGIN],
        }
    }

    fn end(self) -> Option<&'static str> {
        match self {
            Self::Hermes | Self::Qwen3Coder => Some("</tool_call>"),
            Self::DeepseekV3 => Some(deepseek::CALLS_END),
            Self::Llama3Json | Self::Mistral | Self::Pythonic => None,
        }
    }

    /// The calls in `held` (from a start marker on, its end marker included when it came), and
    /// the text after them that is content.
    fn parse<'a>(self, held: &'a str, types: &ParamTypes) -> Option<(Vec<ToolCall>, &'a str)> {
        let after_start = |held: &'a str| {
            self.starts()
                .iter()
                .find_map(|m| held.strip_prefix(m))
                .unwrap_or(held)
        };
        match self {
            Self::Hermes => {
                let inner = after_start(held);
                match inner.strip_suffix("</tool_call>") {
                    Some(body) => json_calls::only_calls(body).map(|calls| (calls, "")),
                    // Cut off before its end marker (e.g. by max_tokens): a complete JSON call still counts.
                    None => {
                        json_calls::leading_calls(inner).map(|(calls, end)| (calls, &inner[end..]))
                    }
                }
            }
            Self::Qwen3Coder => xml_calls::xml_calls(held, types).map(|calls| (calls, "")),
            Self::DeepseekV3 => deepseek::deepseek_calls(held).map(|calls| (calls, "")),
            Self::Mistral => json_calls::leading_calls(after_start(held))
                .map(|(calls, end)| (calls, &after_start(held)[end..])),
            Self::Llama3Json => {
                // `<|python_tag|>` is a marker; a bare `{` is part of the JSON.
                let body = held.strip_prefix("<|python_tag|>").unwrap_or(held);
                let (mut calls, mut end) = json_calls::leading_calls(body)?;
                // Several calls are separated by `;`.
                while let Some(next) = body[end..].trim_start().strip_prefix(';') {
                    let offset = body.len() - next.len();
                    let Some((more, more_end)) = json_calls::leading_calls(next) else {
                        break;
                    };
                    calls.extend(more);
                    end = offset + more_end;
                }
                Some((calls, &body[end..]))
            }
            Self::Pythonic => {
                pythonic::leading_calls(held).map(|(calls, end)| (calls, &held[end..]))
            }
        }
    }
}

/// What a piece of content turned into.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ToolSplit {
    pub content: String,
    pub calls: Vec<ToolCall>,
}

/// One request's tool-call parsing, fed piece by piece.
#[derive(Debug)]
pub struct ToolCallParser {
    format: ToolFormat,
    types: ParamTypes,
    /// Text not emitted yet: a possible marker start, or the held call.
    pending: String,
    held: bool,
}

impl ToolCallParser {
    pub fn new(format: ToolFormat, types: ParamTypes) -> Self {
        Self {
            format,
            types,
            pending: String::new(),
            held: false,
        }
    }

    /// Takes the next piece of content: returns the content that is certainly not a call, and
    /// the calls completed by this piece.
    pub fn push(&mut self, text: &str) -> ToolSplit {
        self.pending.push_str(text);
        let mut out = ToolSplit::default();
        loop {
            if self.held {
                let Some(end) = self.format.end() else {
                    return out;
                };
                let Some(at) = self.pending.find(end) else {
                    return out;
                };
                let rest = self.pending.split_off(at + end.len());
                let held = std::mem::replace(&mut self.pending, rest);
                self.held = false;
                match self.format.parse(&held, &self.types) {
                    Some((calls, after)) => {
                        out.calls.extend(calls);
                        out.content.push_str(after);
                    }
                    None => out.content.push_str(&held),
                }
                continue;
            }
            if let Some((at, _)) = find_first(&self.pending, self.format.starts()) {
                out.content.push_str(&self.pending[..at]);
                self.pending.drain(..at);
                self.held = true;
                continue;
            }
            let keep = partial_tail(&self.pending, self.format.starts());
            let cut = self.pending.len() - keep;
            out.content.push_str(&self.pending[..cut]);
            self.pending.drain(..cut);
            return out;
        }
    }

    /// The output ended: held text becomes calls if it is valid, and content otherwise.
    pub fn finish(&mut self) -> ToolSplit {
        let pending = std::mem::take(&mut self.pending);
        if !std::mem::take(&mut self.held) {
            return ToolSplit {
                content: pending,
                calls: Vec::new(),
            };
        }
        match self.format.parse(&pending, &self.types) {
            Some((calls, after)) => ToolSplit {
                content: after.to_string(),
                calls,
            },
            None => ToolSplit {
                content: pending,
                calls: Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, text: &str, piece: usize) -> (String, Vec<(String, String)>) {
        let mut p = ToolCallParser::new(tool_format(name).unwrap(), ParamTypes::default());
        let chars: Vec<char> = text.chars().collect();
        let mut out = ToolSplit::default();
        let mut splits: Vec<ToolSplit> = chars
            .chunks(piece)
            .map(|c| p.push(&c.iter().collect::<String>()))
            .collect();
        splits.push(p.finish());
        for chunk in splits {
            out.content.push_str(&chunk.content);
            out.calls.extend(chunk.calls);
        }
        (
            out.content,
            out.calls
                .into_iter()
                .map(|c| (c.name, c.arguments))
                .collect(),
        )
    }

    fn call(name: &str, args: &str) -> (String, String) {
        (name.into(), args.into())
    }

    #[test]
    fn hermes_calls_between_text_in_any_pieces() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\"}\n</tool_call> done";
        for piece in [1, 3, 1000] {
            assert_eq!(
                run("hermes", text, piece),
                (
                    "Let me check.\n\n done".into(),
                    vec![call("a", "{\"x\": 1}"), call("b", "{}")]
                )
            );
        }
    }

    #[test]
    fn malformed_or_unfinished_calls_come_back_as_content() {
        let bad = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \n</tool_call>";
        assert_eq!(run("hermes", bad, 2), (bad.into(), vec![]));
        assert_eq!(
            run("mistral", "[TOOL_CALLS][{\"name\": ", 2),
            ("[TOOL_CALLS][{\"name\": ".into(), vec![])
        );
        assert_eq!(
            run("pythonic", "See [1] and [2]", 1),
            ("See [1] and [2]".into(), vec![])
        );
    }

    #[test]
    fn a_call_cut_before_its_end_marker_still_counts() {
        assert_eq!(
            run(
                "hermes",
                "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}",
                4
            ),
            ("".into(), vec![call("a", "{}")])
        );
    }

    #[test]
    fn formats_parsed_at_the_end() {
        assert_eq!(
            run(
                "mistral",
                "Calling.[TOOL_CALLS][{\"name\":\"t\",\"arguments\":{\"z\":\"CET\"}}]",
                2
            ),
            ("Calling.".into(), vec![call("t", "{\"z\":\"CET\"}")])
        );
        assert_eq!(run("llama3_json", "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}", 3), ("".into(), vec![call("a", "{\"x\": 1}"), call("b", "{}")]));
        assert_eq!(
            run("llama3_json", "{\"name\": \"a\", \"parameters\": {}}", 1),
            ("".into(), vec![call("a", "{}")])
        );
        assert_eq!(
            run("pythonic", "[f(a=1), g()]", 2),
            ("".into(), vec![call("f", "{\"a\":1}"), call("g", "{}")])
        );
    }
}
