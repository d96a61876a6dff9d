//! Output under a forced `tool_choice` (`required`, or a named function): the engine was told to
//! call a tool (usually with guided decoding), so the whole output is held and read as calls at
//! the end: in the model's own format when it has a parser, else as the JSON guided decoding
//! asks for (an array of `{name, parameters}` for `required`, the arguments object for a named
//! function). Output that is neither stays content.

use super::json_calls;
use super::tool_calls::{ToolCallParser, ToolFormat, ToolSplit};
use super::{ParamTypes, ToolCall};

/// Which tool the request forces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForcedChoice {
    /// Any tool, at least one call.
    Required,
    /// This function.
    Named(String),
}

/// One request's forced tool-call parsing.
#[derive(Debug)]
pub struct ForcedToolCall {
    choice: ForcedChoice,
    format: Option<ToolFormat>,
    types: ParamTypes,
    held: String,
}

impl ForcedToolCall {
    pub fn new(choice: ForcedChoice, format: Option<ToolFormat>, types: ParamTypes) -> Self {
        Self {
            choice,
            format,
            types,
            held: String::new(),
        }
    }

    /// Holds the piece: nothing is emitted before the end.
    pub fn push(&mut self, text: &str) -> ToolSplit {
        self.held.push_str(text);
        ToolSplit::default()
    }

    /// The output ended: its calls, or the text as content.
    pub fn finish(&mut self) -> ToolSplit {
        let text = std::mem::take(&mut self.held);
        if let Some(format) = self.format {
            let mut parser = ToolCallParser::new(format, self.types.clone());
            let mut split = parser.push(&text);
            let tail = parser.finish();
            split.content.push_str(&tail.content);
            split.calls.extend(tail.calls);
            if !split.calls.is_empty() {
                return split;
            }
        }
        let json = text.trim_start();
        let parsed = match &self.choice {
            ForcedChoice::Required => json_calls::leading_calls(json),
            ForcedChoice::Named(name) => json_calls::leading_object(json).map(|(raw, end)| {
                (
                    vec![ToolCall {
                        name: name.clone(),
                        arguments: raw.to_string(),
                    }],
                    end,
                )
            }),
        };
        match parsed {
            Some((calls, end)) => ToolSplit {
                content: json[end..].to_string(),
                calls,
            },
            None => ToolSplit {
                content: text,
                calls: Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        choice: ForcedChoice,
        format: Option<ToolFormat>,
        text: &str,
    ) -> (String, Vec<(String, String)>) {
        let mut p = ForcedToolCall::new(choice, format, ParamTypes::default());
        assert_eq!(p.push(text), ToolSplit::default());
        let out = p.finish();
        (
            out.content,
            out.calls
                .into_iter()
                .map(|c| (c.name, c.arguments))
                .collect(),
        )
    }

    #[test]
    fn required_reads_the_guided_json_array() {
        let text = "[{\"name\": \"f\", \"parameters\": {\"a\": 1}}]";
        assert_eq!(
            run(ForcedChoice::Required, None, text),
            ("".into(), vec![("f".into(), "{\"a\": 1}".into())])
        );
        assert_eq!(
            run(ForcedChoice::Required, None, "{\"a\": 1}"),
            ("{\"a\": 1}".into(), vec![])
        );
    }

    #[test]
    fn a_named_function_gets_the_object_as_its_arguments() {
        assert_eq!(
            run(ForcedChoice::Named("f".into()), None, "\n{\"a\": 1} done"),
            (" done".into(), vec![("f".into(), "{\"a\": 1}".into())])
        );
        assert_eq!(
            run(ForcedChoice::Named("f".into()), None, "[1, 2]"),
            ("[1, 2]".into(), vec![])
        );
    }

    #[test]
    fn the_models_own_format_comes_first() {
        let text = "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
        assert_eq!(
            run(
                ForcedChoice::Named("f".into()),
                Some(ToolFormat::Hermes),
                text
            ),
            ("".into(), vec![("g".into(), "{}".into())])
        );
        assert_eq!(
            run(
                ForcedChoice::Named("f".into()),
                Some(ToolFormat::Hermes),
                "{\"a\": 1}"
            ),
            ("".into(), vec![("f".into(), "{\"a\": 1}".into())])
        );
    }
}
