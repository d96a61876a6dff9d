//! Server-sent events of an OpenAI streaming response (`/v1/chat/completions` chunks or
//! `/v1/completions` text pieces) for one choice, written straight into an output buffer: the
//! fixed parts are built once per response, so a token costs only its text's escaping.

/// The API a response is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Chat,
    Completions,
}

/// Writes the `data:` events of one choice.
#[derive(Debug)]
pub struct ChunkWriter {
    /// `data: {"id":…,"choices":[{"index":N,` up to where the text's field begins.
    head: String,
    /// The same for the choice's first chat chunk, which also names the role.
    first_head: String,
    /// Chat deltas are objects: the text's field is closed with a brace.
    chat: bool,
}

impl ChunkWriter {
    /// The events of choice `index` of response `id`, created at `created` (Unix seconds), for `model`.
    pub fn new(surface: Surface, id: &str, created: u64, model: &str, index: u32) -> Self {
        let (object, field, first_field) = match surface {
            Surface::Chat => (
                "chat.completion.chunk",
                r#""delta":{"content":"#,
                r#""delta":{"role":"assistant","content":"#,
            ),
            Surface::Completions => ("text_completion", r#""text":"#, r#""text":"#),
        };
        let start = format!(
            r#"data: {{"id":{},"object":"{object}","created":{created},"model":{},"choices":[{{"index":{index},"#,
            json_string(id),
            json_string(model),
        );
        Self {
            head: format!("{start}{field}"),
            first_head: format!("{start}{first_field}"),
            chat: surface == Surface::Chat,
        }
    }

    /// Appends one event: `text`, and `finish_reason` when the choice ends with it. `first`
    /// marks the choice's first chunk.
    pub fn write(&self, out: &mut Vec<u8>, text: &str, first: bool, finish_reason: Option<&str>) {
        out.extend_from_slice(if first { &self.first_head } else { &self.head }.as_bytes());
        write_json_string(out, text);
        if self.chat {
            out.push(b'}');
        }
        match finish_reason {
            None => out.extend_from_slice(br#","finish_reason":null"#),
            Some(reason) => {
                out.extend_from_slice(br#","finish_reason":""#);
                out.extend_from_slice(reason.as_bytes());
                out.push(b'"');
            }
        }
        out.extend_from_slice(b",\"logprobs\":null}]}\n\n");
    }
}

fn json_string(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len() + 2);
    write_json_string(&mut out, text);
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// Appends `text` as a JSON string, escaped exactly as `JSON.stringify` escapes it.
pub fn write_json_string(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => br#"\""#,
            b'\\' => br"\\",
            b'\n' => br"\n",
            b'\r' => br"\r",
            b'\t' => br"\t",
            0x08 => br"\b",
            0x0c => br"\f",
            0..=0x1f => &[],
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}
