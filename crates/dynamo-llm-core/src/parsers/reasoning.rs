//! Reasoning parsers: split `<think>…</think>`-style output into reasoning and content.

use super::marker::partial_tail;

/// The markers of a reasoning parser and whether output starts inside reasoning.
#[derive(Debug, Clone, Copy)]
pub struct ReasoningFormat {
    pub start: &'static str,
    pub end: &'static str,
    /// The model starts reasoning without writing the start marker (the prompt opened it).
    pub forced: bool,
}

/// The reasoning format of a parser name, as stock Dynamo names them.
pub fn reasoning_format(name: &str) -> Option<ReasoningFormat> {
    let think = |forced| ReasoningFormat {
        start: "<think>",
        end: "</think>",
        forced,
    };
    Some(match name {
        "basic" | "qwen3" | "qwen3_coder" | "glm45" | "step3" | "nemotron_deci"
        | "nemotron_nano" | "nemotron3" | "nemotron_v3" => think(false),
        "deepseek_r1" | "minimax_append_think" => think(true),
        "mistral" => ReasoningFormat {
            start: "[THINK]",
            end: "[/THINK]",
            forced: false,
        },
        "kimi" => ReasoningFormat {
            start: "◁think▷",
            end: "◁/think▷",
            forced: false,
        },
        _ => return None,
    })
}

/// Names [`reasoning_format`] knows.
pub const REASONING_PARSERS: &[&str] = &[
    "basic",
    "deepseek_r1",
    "glm45",
    "kimi",
    "minimax_append_think",
    "mistral",
    "nemotron3",
    "nemotron_deci",
    "nemotron_nano",
    "nemotron_v3",
    "qwen3",
    "qwen3_coder",
    "step3",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not reasoning yet: a start marker opens reasoning; a stray end marker is dropped.
    Before,
    Reasoning,
    /// Reasoning is over: everything is content.
    After,
}

/// One request's reasoning split, fed piece by piece.
#[derive(Debug)]
pub struct ReasoningParser {
    format: ReasoningFormat,
    state: State,
    /// Text held back because it may be the start of a marker.
    pending: String,
    /// Nothing was emitted yet: a forced parser drops a leading start marker.
    at_start: bool,
}

/// Text split into reasoning and content.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReasoningSplit {
    pub reasoning: String,
    pub content: String,
}

impl ReasoningParser {
    pub fn new(format: ReasoningFormat) -> Self {
        let state = if format.forced {
            State::Reasoning
        } else {
            State::Before
        };
        Self {
            format,
            state,
            pending: String::new(),
            at_start: true,
        }
    }

    /// Splits the next piece of output; a marker split across pieces is held back until whole.
    pub fn push(&mut self, text: &str) -> ReasoningSplit {
        self.pending.push_str(text);
        let mut out = ReasoningSplit::default();
        let mut rest = std::mem::take(&mut self.pending);
        loop {
            let ReasoningFormat { start, end, .. } = self.format;
            match self.state {
                State::After => {
                    out.content.push_str(&rest);
                    return out;
                }
                State::Before => {
                    let hit = [start, end]
                        .iter()
                        .filter_map(|m| rest.find(m).map(|at| (at, *m)))
                        .min();
                    match hit {
                        Some((at, marker)) => {
                            out.content.push_str(&rest[..at]);
                            if marker == start {
                                self.state = State::Reasoning;
                            }
                            rest = rest[at + marker.len()..].to_string();
                            self.at_start = false;
                        }
                        None => return self.hold(rest, &[start, end], out, false),
                    }
                }
                State::Reasoning => {
                    if self.at_start && self.format.forced {
                        let trimmed = rest.trim_start_matches(char::is_whitespace);
                        if trimmed.len() < start.len()
                            && start.starts_with(trimmed)
                            && !trimmed.is_empty()
                        {
                            self.pending = rest;
                            return out;
                        }
                        if let Some(after) = trimmed.strip_prefix(start) {
                            rest = after.to_string();
                        }
                        if !rest.is_empty() {
                            self.at_start = false;
                        }
                    }
                    match rest.find(end) {
                        Some(at) => {
                            out.reasoning.push_str(&rest[..at]);
                            self.state = State::After;
                            rest = rest[at + end.len()..].to_string();
                        }
                        None => return self.hold(rest, &[end], out, true),
                    }
                }
            }
        }
    }

    /// Emits `rest` but for a tail that may become one of `markers`.
    fn hold(
        &mut self,
        mut rest: String,
        markers: &[&str],
        mut out: ReasoningSplit,
        reasoning: bool,
    ) -> ReasoningSplit {
        let keep = partial_tail(&rest, markers);
        self.pending = rest.split_off(rest.len() - keep);
        if !rest.is_empty() {
            self.at_start = false;
        }
        if reasoning {
            out.reasoning.push_str(&rest)
        } else {
            out.content.push_str(&rest)
        }
        out
    }

    /// The output ended: whatever was held back, where it belongs.
    pub fn finish(&mut self) -> ReasoningSplit {
        let rest = std::mem::take(&mut self.pending);
        match self.state {
            State::Reasoning => ReasoningSplit {
                reasoning: rest,
                content: String::new(),
            },
            _ => ReasoningSplit {
                reasoning: String::new(),
                content: rest,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, pieces: &[&str]) -> (String, String) {
        let mut p = ReasoningParser::new(reasoning_format(name).unwrap());
        let (mut r, mut c) = (String::new(), String::new());
        let mut splits: Vec<ReasoningSplit> = pieces.iter().map(|s| p.push(s)).collect();
        splits.push(p.finish());
        for piece in splits {
            r.push_str(&piece.reasoning);
            c.push_str(&piece.content);
        }
        (r, c)
    }

    #[test]
    fn splits_a_think_block_in_any_pieces() {
        let text = "<think>\nAdd.\n</think>\n\nIt is 4.";
        let whole = run("qwen3", &[text]);
        assert_eq!(whole, ("\nAdd.\n".into(), "\n\nIt is 4.".into()));
        let chars: Vec<String> = text.chars().map(String::from).collect();
        assert_eq!(
            run(
                "qwen3",
                &chars.iter().map(String::as_str).collect::<Vec<_>>()
            ),
            whole
        );
    }

    #[test]
    fn a_stray_end_marker_is_dropped_when_not_forced() {
        assert_eq!(
            run("basic", &["Adding.\n</th", "ink>\n\nIt is 4."]),
            ("".into(), "Adding.\n\n\nIt is 4.".into())
        );
    }

    #[test]
    fn forced_reasoning_needs_no_start_marker() {
        assert_eq!(
            run("deepseek_r1", &["Adding.\n</think>\n\nIt is 4."]),
            ("Adding.\n".into(), "\n\nIt is 4.".into())
        );
        assert_eq!(
            run("deepseek_r1", &["<th", "ink>\nA</think>B"]),
            ("\nA".into(), "B".into())
        );
        assert_eq!(
            run("deepseek_r1", &["No end"]),
            ("No end".into(), "".into())
        );
    }

    #[test]
    fn an_unfinished_block_is_all_reasoning() {
        assert_eq!(
            run("qwen3", &["<think>\nStill <"]),
            ("\nStill <".into(), "".into())
        );
    }
}
