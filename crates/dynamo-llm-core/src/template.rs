//! Hugging Face chat templates on minijinja, with what `transformers` gives a template: block
//! trimming, Python string/dict/list methods, `tojson` as Python's `json.dumps`,
//! `raise_exception` and `strftime_now`.

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind};
use serde_json::Value as Json;

use crate::error::{LlmError, Result};

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles a template source; a syntax error names the line.
    pub fn new(source: &str) -> Result<Self> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(NAME, strip_generation_markers(source))
            .map_err(|e| LlmError::Template(describe(&e)))?;
        Ok(Self { env })
    }

    /// Renders the template with `context` (an object: `messages`, `tools`,
    /// `add_generation_prompt`, ...). `raise_exception` in the template becomes an error
    /// carrying its message.
    pub fn render(&self, context: &Json) -> Result<String> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| LlmError::Template(describe(&e)))?;
        template
            .render(Value::from_serialize(context))
            .map_err(|e| LlmError::Template(describe(&e)))
    }
}

/// `{% generation %}` markers (training-only, from some HF templates) are not Jinja.
fn strip_generation_markers(source: &str) -> String {
    let mut out = source.to_owned();
    for marker in [
        "{% generation %}",
        "{% endgeneration %}",
        "{%- generation %}",
        "{%- endgeneration %}",
        "{% generation -%}",
        "{% endgeneration -%}",
    ] {
        out = out.replace(marker, "");
    }
    out
}

fn describe(e: &Error) -> String {
    if e.kind() == ErrorKind::InvalidOperation {
        if let Some(detail) = e.detail() {
            return detail.to_owned();
        }
    }
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        msg.push_str(": ");
        msg.push_str(&inner.to_string());
        source = inner.source();
    }
    msg
}

fn raise_exception(message: String) -> std::result::Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// Local time as Python's `time.strftime` gives it: the offset comes from the C library (which
/// reads `TZ` and `/etc/localtime`). Asking libc rather than a timezone crate keeps macOS builds
/// free of the CoreFoundation framework, which cross-builds cannot link.
fn strftime_now(format: String) -> String {
    let now = chrono::Utc::now();
    let offset = chrono::FixedOffset::east_opt(local_offset_secs(now.timestamp()))
        .unwrap_or(chrono::FixedOffset::east_opt(0).expect("zero offset"));
    now.with_timezone(&offset).format(&format).to_string()
}

/// Seconds east of UTC at `timestamp` in the process's local time zone (0 where unknown).
fn local_offset_secs(timestamp: i64) -> i32 {
    #[cfg(unix)]
    {
        // `as _`: naming libc::time_t warns on musl, where its width changed in musl 1.2.
        let t = timestamp as _;
        // SAFETY: `tm` is plain data, fully written by localtime_r before it is read.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        if !unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
            return tm.tm_gmtoff as i32;
        }
    }
    let _ = timestamp;
    0
}

/// `tojson` as `transformers` defines it: `json.dumps(value, ensure_ascii=False,
/// indent=indent, separators=separators, sort_keys=sort_keys)`.
fn tojson(value: Value, kwargs: Kwargs) -> std::result::Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() || v.is_undefined() => None,
        Some(v) => match v.as_i64() {
            Some(n) => Some(" ".repeat(n.max(0) as usize)),
            None => Some(v.as_str().map(str::to_owned).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: indent must be an integer or a string",
                )
            })?),
        },
    };
    let (item_sep, key_sep) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        Some(_) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: separators must be a pair",
            ))
        }
        None if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        None => (", ".to_owned(), ": ".to_owned()),
    };
    let json = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let style = PyJson {
        indent,
        item_sep,
        key_sep,
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    style.write(&json, 0, &mut out);
    Ok(Value::from_safe_string(out))
}

/// Writes JSON exactly as Python's `json.dumps(ensure_ascii=False)` does.
struct PyJson {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

impl PyJson {
    fn write(&self, value: &Json, depth: usize, out: &mut String) {
        match value {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(&py_number(n)),
            Json::String(s) => write_str(s, out),
            Json::Array(items) => {
                if items.is_empty() {
                    return out.push_str("[]");
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    self.separate(i, depth + 1, out);
                    self.write(item, depth + 1, out);
                }
                self.close(depth, out);
                out.push(']');
            }
            Json::Object(map) => {
                if map.is_empty() {
                    return out.push_str("{}");
                }
                let mut entries: Vec<(&String, &Json)> = map.iter().collect();
                if self.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    self.separate(i, depth + 1, out);
                    write_str(key, out);
                    out.push_str(&self.key_sep);
                    self.write(item, depth + 1, out);
                }
                self.close(depth, out);
                out.push('}');
            }
        }
    }

    fn separate(&self, index: usize, depth: usize, out: &mut String) {
        if index > 0 {
            out.push_str(&self.item_sep);
        }
        if let Some(indent) = &self.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth));
        }
    }

    fn close(&self, depth: usize, out: &mut String) {
        if let Some(indent) = &self.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth));
        }
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr` of a number: integers as is, floats with the shortest round-trip digits, a
/// `.0` on integral values and a two-digit signed exponent.
fn py_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    let debug = format!("{f:?}");
    match debug.split_once('e') {
        None => debug,
        Some((mantissa, exp)) => {
            let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
            format!("{mantissa}e{sign}{digits:0>2}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(source: &str, context: Json) -> String {
        ChatTemplate::new(source).unwrap().render(&context).unwrap()
    }

    #[test]
    fn tojson_writes_python_json() {
        let out = render(
            "{{ v | tojson }}",
            json!({"v": {"b": 1, "a": [1.5, "é\n", null, true], "c": 1e-5}}),
        );
        assert_eq!(
            out,
            r#"{"b": 1, "a": [1.5, "é\n", null, true], "c": 1e-05}"#
        );
        let out = render(
            "{{ v | tojson(indent=2) }}",
            json!({"v": {"a": [1, 2], "b": {}}}),
        );
        assert_eq!(out, "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
    }

    #[test]
    fn python_string_methods_work() {
        assert_eq!(
            render(
                "{{ s.split('</think>')[0].rstrip('\\n') }}",
                json!({"s": "a\n</think>b"})
            ),
            "a"
        );
        assert_eq!(
            render("{{ s.startswith('x') }}", json!({"s": "xy"})),
            "True"
        );
    }

    #[test]
    fn blocks_are_trimmed_like_transformers() {
        assert_eq!(
            render("  {% if true %}\nA\n  {% endif %}\nB", json!({})),
            "A\nB"
        );
    }

    #[test]
    fn raise_exception_becomes_an_error_with_its_message() {
        let t = ChatTemplate::new("{{ raise_exception('roles must alternate') }}").unwrap();
        let err = t.render(&json!({})).unwrap_err().to_string();
        assert!(err.contains("roles must alternate"), "{err}");
    }

    #[test]
    fn a_syntax_error_is_reported_when_compiling() {
        let err = ChatTemplate::new("{% if %}")
            .err()
            .expect("must fail")
            .to_string();
        assert!(err.starts_with("chat template:"), "{err}");
    }

    #[test]
    fn generation_markers_are_ignored() {
        assert_eq!(
            render("{% generation %}x{% endgeneration %}", json!({})),
            "x"
        );
    }

    #[test]
    fn strftime_now_formats_the_current_date() {
        let year = render("{{ strftime_now('%Y') }}", json!({}));
        assert_eq!(year.len(), 4);
        assert!(year.starts_with("20"));
    }

    #[test]
    fn strftime_now_is_in_the_local_time_zone_as_the_c_library_sees_it() {
        // The offset `date +%z` prints for this process's zone.
        let out = std::process::Command::new("date")
            .arg("+%z")
            .output()
            .expect("date runs");
        let expected = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert_eq!(render("{{ strftime_now('%z') }}", json!({})), expected);
    }
}
