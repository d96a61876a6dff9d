//! Turns an OpenAI chat request into a prompt with the model's chat template, the way Dynamo's
//! preprocessor does: the template is chosen (custom file, `chat_template.jinja`,
//! `chat_template.json`, then `tokenizer_config.json`), the messages are normalized, and the
//! request's `chat_template_args` are passed to the template last.

use serde_json::{json, Map, Value as Json};

use crate::error::{LlmError, Result};
use crate::template::ChatTemplate;

/// Where the chat template may come from, as file contents.
#[derive(Debug, Default, Clone)]
pub struct TemplateSources {
    /// A template given at registration; wins over everything else.
    pub custom: Option<String>,
    /// `chat_template.jinja`.
    pub chat_template_jinja: Option<String>,
    /// `chat_template.json` (an object with a `chat_template` key).
    pub chat_template_json: Option<Json>,
    /// `tokenizer_config.json`: its `chat_template` and its special tokens.
    pub tokenizer_config: Option<Json>,
}

/// Options a worker can set on its model.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// Leave `tools` out of the template when `tool_choice` is `"none"`.
    pub exclude_tools_when_tool_choice_none: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            exclude_tools_when_tool_choice_none: true,
        }
    }
}

/// A model's chat templates plus the special tokens the templates see.
pub struct PromptFormatter {
    default: ChatTemplate,
    tool_use: Option<ChatTemplate>,
    specials: Map<String, Json>,
    /// Tool-call arguments reach the template as objects unless it handles strings itself.
    parse_tool_arguments: bool,
    /// `reasoning_content` is folded into `content` unless the template reads it itself.
    inline_reasoning: bool,
    options: RenderOptions,
}

impl PromptFormatter {
    /// Picks and compiles the template. Errors when no source has one.
    pub fn new(sources: &TemplateSources, options: RenderOptions) -> Result<Self> {
        let (origin, value) = Self::pick(sources)?;
        let mut default = None;
        let mut tool_use = None;
        let mut all_sources = String::new();
        let mut compile = |name: &str, src: &str| -> Result<ChatTemplate> {
            all_sources.push_str(src);
            ChatTemplate::new(src)
                .map_err(|e| LlmError::InvalidArgument(format!("{origin}: template '{name}': {e}")))
        };
        match &value {
            Json::String(src) => default = Some(compile("default", src)?),
            Json::Array(named) => {
                for entry in named {
                    let name = entry.get("name").and_then(Json::as_str);
                    let src = entry.get("template").and_then(Json::as_str);
                    let (Some(name), Some(src)) = (name, src) else {
                        return Err(LlmError::InvalidArgument(format!(
                            "{origin}: each named chat template needs string 'name' and 'template'"
                        )));
                    };
                    match name {
                        "default" => default = Some(compile(name, src)?),
                        "tool_use" => tool_use = Some(compile(name, src)?),
                        _ => {}
                    }
                }
            }
            _ => {
                return Err(LlmError::InvalidArgument(format!(
                    "{origin}: chat_template must be a string or a list of named templates"
                )))
            }
        }
        let default = match (default, tool_use.take()) {
            (Some(d), t) => {
                tool_use = t;
                d
            }
            (None, Some(t)) => t,
            (None, None) => {
                return Err(LlmError::InvalidArgument(format!(
                    "{origin}: no 'default' chat template in the list"
                )))
            }
        };
        let mut specials = Map::new();
        if let Some(config) = &sources.tokenizer_config {
            for key in ["bos_token", "eos_token", "unk_token", "pad_token"] {
                if let Some(token) = special_token(config.get(key)) {
                    specials.insert(key.to_owned(), Json::String(token));
                }
            }
        }
        Ok(Self {
            default,
            tool_use,
            specials,
            parse_tool_arguments: !all_sources.contains("arguments is string"),
            inline_reasoning: !all_sources.contains("reasoning_content"),
            options,
        })
    }

    fn pick(sources: &TemplateSources) -> Result<(&'static str, Json)> {
        if let Some(src) = &sources.custom {
            return Ok(("custom chat template", Json::String(src.clone())));
        }
        if let Some(src) = &sources.chat_template_jinja {
            return Ok(("chat_template.jinja", Json::String(src.clone())));
        }
        if let Some(doc) = &sources.chat_template_json {
            let value = doc
                .get("chat_template")
                .cloned()
                .unwrap_or_else(|| doc.clone());
            return Ok(("chat_template.json", value));
        }
        if let Some(value) = sources
            .tokenizer_config
            .as_ref()
            .and_then(|c| c.get("chat_template"))
        {
            return Ok(("tokenizer_config.json", value.clone()));
        }
        Err(LlmError::InvalidArgument(
            "the model has no chat template (none in tokenizer_config.json, chat_template.jinja or chat_template.json, and no custom template)".into(),
        ))
    }

    /// Renders the prompt for an OpenAI chat-completions request body.
    pub fn render(&self, request: &Json) -> Result<String> {
        let messages = request
            .get("messages")
            .and_then(Json::as_array)
            .ok_or_else(|| LlmError::InvalidArgument("messages must be an array".into()))?;
        let messages: Vec<Json> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| self.normalize_message(i, m))
            .collect::<Result<_>>()?;

        let tool_choice_none = request.get("tool_choice").and_then(Json::as_str) == Some("none");
        let tools_excluded = tool_choice_none && self.options.exclude_tools_when_tool_choice_none;
        let tools = match request.get("tools").and_then(Json::as_array) {
            Some(tools) if !tools_excluded && !tools.is_empty() => {
                Some(tools.iter().map(normalize_tool).collect::<Vec<_>>())
            }
            _ => None,
        };

        let mut context = Map::new();
        context.insert("messages".into(), Json::Array(messages));
        context.insert(
            "tools".into(),
            tools.clone().map_or(Json::Null, Json::Array),
        );
        if let Some(documents) = request.get("documents") {
            context.insert("documents".into(), documents.clone());
        }
        context.insert("add_generation_prompt".into(), Json::Bool(true));
        for (k, v) in &self.specials {
            context.insert(k.clone(), v.clone());
        }
        // Dynamo's name is chat_template_args; vLLM's (and most clients') chat_template_kwargs.
        for key in ["chat_template_kwargs", "chat_template_args"] {
            if let Some(args) = request.get(key) {
                let args = args
                    .as_object()
                    .ok_or_else(|| LlmError::InvalidArgument(format!("{key} must be an object")))?;
                for (k, v) in args {
                    context.insert(k.clone(), v.clone());
                }
            }
        }
        let template = match (&self.tool_use, &tools) {
            (Some(t), Some(_)) => t,
            _ => &self.default,
        };
        template.render(&Json::Object(context))
    }

    fn normalize_message(&self, index: usize, message: &Json) -> Result<Json> {
        let Some(object) = message.as_object() else {
            return Err(LlmError::InvalidArgument(format!(
                "messages[{index}] must be an object"
            )));
        };
        let mut m = object.clone();
        if let Some(Json::Array(parts)) = m.get("content") {
            let content = content_from_parts(index, parts)?;
            m.insert("content".into(), content);
        }
        if self.parse_tool_arguments {
            if let Some(Json::Array(calls)) = m.get_mut("tool_calls") {
                for call in calls {
                    if let Some(args) = call.pointer_mut("/function/arguments") {
                        if let Some(parsed) = args
                            .as_str()
                            .and_then(|s| serde_json::from_str::<Json>(s).ok())
                        {
                            *args = parsed;
                        }
                    }
                }
            }
        }
        if self.inline_reasoning {
            if let Some(Json::String(reasoning)) = m.remove("reasoning_content") {
                let content = m.get("content").and_then(Json::as_str).unwrap_or("");
                m.insert(
                    "content".into(),
                    Json::String(format!("<think>{reasoning}</think>{content}")),
                );
            }
        }
        Ok(Json::Object(m))
    }
}

/// Text-only part lists become one string (parts joined by a newline); lists with media keep
/// their shape, with each media part reduced to a `{"type": "image"}`-style placeholder.
fn content_from_parts(index: usize, parts: &[Json]) -> Result<Json> {
    let mut texts = Vec::with_capacity(parts.len());
    let mut media = false;
    for (j, part) in parts.iter().enumerate() {
        match part.get("type").and_then(Json::as_str) {
            Some("text") => {
                texts.push(part.get("text").and_then(Json::as_str).ok_or_else(|| {
                    LlmError::InvalidArgument(format!(
                        "messages[{index}].content[{j}].text must be a string"
                    ))
                })?)
            }
            Some(_) => media = true,
            None => {
                return Err(LlmError::InvalidArgument(format!(
                    "messages[{index}].content[{j}].type must be a string"
                )))
            }
        }
    }
    if !media {
        return Ok(Json::String(texts.join("\n")));
    }
    Ok(Json::Array(
        parts
            .iter()
            .map(|part| match part.get("type").and_then(Json::as_str) {
                Some("text") => part.clone(),
                Some("image_url") | Some("image") => json!({"type": "image"}),
                Some("video_url") | Some("video") => json!({"type": "video"}),
                Some("input_audio") | Some("audio_url") | Some("audio") => json!({"type": "audio"}),
                _ => part.clone(),
            })
            .collect(),
    ))
}

/// A tool whose parameters lack `type`/`properties` gets an empty object schema, which
/// templates that iterate `properties` need.
fn normalize_tool(tool: &Json) -> Json {
    let mut tool = tool.clone();
    if let Some(Json::Object(params)) = tool.pointer_mut("/function/parameters") {
        params
            .entry("type")
            .or_insert_with(|| Json::String("object".into()));
        params
            .entry("properties")
            .or_insert_with(|| Json::Object(Map::new()));
    }
    tool
}

/// A special token in `tokenizer_config.json`: a string or an AddedToken object.
fn special_token(value: Option<&Json>) -> Option<String> {
    match value? {
        Json::String(s) => Some(s.clone()),
        Json::Object(o) => o.get("content").and_then(Json::as_str).map(str::to_owned),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formatter(template: &str) -> PromptFormatter {
        let sources = TemplateSources {
            tokenizer_config: Some(
                json!({"chat_template": template, "eos_token": {"content": "</s>"}}),
            ),
            ..Default::default()
        };
        PromptFormatter::new(&sources, RenderOptions::default()).unwrap()
    }

    #[test]
    fn text_parts_are_joined_with_newlines() {
        let f = formatter("{% for m in messages %}[{{ m.content }}]{% endfor %}");
        let out = f.render(&json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})).unwrap();
        assert_eq!(out, "[a\nb]");
    }

    #[test]
    fn chat_template_args_override_the_defaults() {
        let f = formatter("{{ add_generation_prompt }} {{ enable_thinking }} {{ eos_token }}");
        let out = f.render(&json!({"messages": [], "chat_template_kwargs": {"enable_thinking": false, "add_generation_prompt": false}})).unwrap();
        // Booleans print as Jinja2 prints them (Python's repr).
        assert_eq!(out, "False False </s>");
    }

    #[test]
    fn tool_arguments_are_parsed_unless_the_template_handles_strings() {
        let body = json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{\"x\": 1}"}}]}]});
        let parsed = formatter("{{ messages[0].tool_calls[0].function.arguments.x }}");
        assert_eq!(parsed.render(&body).unwrap(), "1");
        let raw = formatter("{% set f = messages[0].tool_calls[0].function %}{% if f.arguments is string %}{{ f.arguments }}{% endif %}");
        assert_eq!(raw.render(&body).unwrap(), "{\"x\": 1}");
    }

    #[test]
    fn tools_are_dropped_when_tool_choice_is_none() {
        let f = formatter("{{ tools is none }}");
        let tools = json!([{"type": "function", "function": {"name": "f"}}]);
        assert_eq!(
            f.render(&json!({"messages": [], "tools": tools})).unwrap(),
            "False"
        );
        assert_eq!(
            f.render(&json!({"messages": [], "tools": tools, "tool_choice": "none"}))
                .unwrap(),
            "True"
        );
    }

    #[test]
    fn the_tool_use_template_is_used_when_tools_are_given() {
        let sources = TemplateSources {
            tokenizer_config: Some(
                json!({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}),
            ),
            ..Default::default()
        };
        let f = PromptFormatter::new(&sources, RenderOptions::default()).unwrap();
        assert_eq!(f.render(&json!({"messages": []})).unwrap(), "D");
        assert_eq!(
            f.render(
                &json!({"messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]})
            )
            .unwrap(),
            "T"
        );
    }

    #[test]
    fn a_custom_template_wins() {
        let sources = TemplateSources {
            custom: Some("C".into()),
            chat_template_jinja: Some("J".into()),
            ..Default::default()
        };
        assert_eq!(
            PromptFormatter::new(&sources, RenderOptions::default())
                .unwrap()
                .render(&json!({"messages": []}))
                .unwrap(),
            "C"
        );
    }

    #[test]
    fn no_template_is_an_error_naming_the_places_looked() {
        let err = PromptFormatter::new(&TemplateSources::default(), RenderOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("tokenizer_config.json"), "{err}");
    }
}
