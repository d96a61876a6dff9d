//! Reads a GGUF file's header and metadata key/values (never the tensor data), checking every
//! length against the file size so a corrupt file fails with a clear error instead of a huge
//! allocation.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use serde_json::{json, Map, Value as Json};

use crate::error::{LlmError, Result};

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<GgufValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl GgufValue {
    /// The value as an unsigned integer, when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            GgufValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    fn to_json(&self) -> Json {
        match self {
            GgufValue::U8(v) => json!(v),
            GgufValue::I8(v) => json!(v),
            GgufValue::U16(v) => json!(v),
            GgufValue::I16(v) => json!(v),
            GgufValue::U32(v) => json!(v),
            GgufValue::I32(v) => json!(v),
            GgufValue::F32(v) => json!(v),
            GgufValue::Bool(v) => json!(v),
            GgufValue::String(v) => json!(v),
            GgufValue::Array(v) => Json::Array(v.iter().map(GgufValue::to_json).collect()),
            GgufValue::U64(v) => json!(v),
            GgufValue::I64(v) => json!(v),
            GgufValue::F64(v) => json!(v),
        }
    }
}

/// A GGUF file's header and metadata, in file order.
#[derive(Debug, Clone)]
pub struct GgufMetadata {
    pub version: u32,
    pub tensor_count: u64,
    pub entries: Vec<(String, GgufValue)>,
}

impl GgufMetadata {
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `general.architecture` (e.g. `llama`, `qwen3`).
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(GgufValue::as_str)
    }

    /// `<arch>.context_length`.
    pub fn context_length(&self) -> Option<u64> {
        self.get(&format!("{}.context_length", self.architecture()?))
            .and_then(GgufValue::as_u64)
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.get("tokenizer.chat_template")
            .and_then(GgufValue::as_str)
    }

    pub fn bos_token_id(&self) -> Option<u64> {
        self.get("tokenizer.ggml.bos_token_id")
            .and_then(GgufValue::as_u64)
    }

    pub fn eos_token_id(&self) -> Option<u64> {
        self.get("tokenizer.ggml.eos_token_id")
            .and_then(GgufValue::as_u64)
    }

    /// A JSON summary; arrays longer than `max_array` (the vocabulary) are left out, with
    /// their length under `array_lengths`.
    pub fn summary(&self, max_array: usize) -> Json {
        let mut metadata = Map::new();
        let mut lengths = Map::new();
        for (key, value) in &self.entries {
            match value.as_array() {
                Some(items) if items.len() > max_array => {
                    lengths.insert(key.clone(), json!(items.len()));
                }
                _ => {
                    metadata.insert(key.clone(), value.to_json());
                }
            }
        }
        json!({
            "version": self.version,
            "tensor_count": self.tensor_count,
            "architecture": self.architecture(),
            "context_length": self.context_length(),
            "chat_template": self.chat_template(),
            "bos_token_id": self.bos_token_id(),
            "eos_token_id": self.eos_token_id(),
            "name": self.get("general.name").and_then(GgufValue::as_str),
            "metadata": metadata,
            "array_lengths": lengths,
        })
    }
}

const MAGIC: &[u8; 4] = b"GGUF";

/// Reads the header and metadata of the GGUF file at `path`.
pub fn read_metadata(path: &Path) -> Result<GgufMetadata> {
    let file = File::open(path).map_err(|e| LlmError::io(path, e))?;
    let size = file.metadata().map_err(|e| LlmError::io(path, e))?.len();
    let mut r = Reader {
        inner: BufReader::with_capacity(1 << 16, file),
        path,
        size,
        pos: 0,
        key: String::new(),
    };
    r.header()
}

struct Reader<'p> {
    inner: BufReader<File>,
    path: &'p Path,
    size: u64,
    pos: u64,
    /// The key being read, for error messages.
    key: String,
}

impl Reader<'_> {
    fn bad(&self, message: impl Into<String>) -> LlmError {
        let message = message.into();
        if self.key.is_empty() {
            LlmError::bad_file(self.path, format!("not a valid GGUF file: {message}"))
        } else {
            LlmError::bad_file(
                self.path,
                format!(
                    "not a valid GGUF file: metadata key '{}': {message}",
                    self.key
                ),
            )
        }
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    self.bad(format!("truncated at byte {} of {}", self.pos, self.size))
                }
                _ => LlmError::io(self.path, e),
            })?;
        self.pos += N as u64;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    /// A count of items of at least `min_item_size` bytes each, checked against what is left.
    fn count(&mut self, what: &str, min_item_size: u64) -> Result<usize> {
        let n = self.u64()?;
        let left = self.size.saturating_sub(self.pos);
        if n.saturating_mul(min_item_size) > left {
            return Err(self.bad(format!(
                "{what} {n} does not fit in the {left} bytes left (truncated or corrupt)"
            )));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<String> {
        let len = self.count("string length", 1)?;
        let mut buf = vec![0u8; len];
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| LlmError::io(self.path, e))?;
        self.pos += len as u64;
        String::from_utf8(buf).map_err(|_| self.bad("a string is not valid UTF-8"))
    }

    fn header(&mut self) -> Result<GgufMetadata> {
        let magic: [u8; 4] = self.bytes().map_err(|_| {
            self.bad(format!(
                "file is {} bytes, too short for a header",
                self.size
            ))
        })?;
        if &magic != MAGIC {
            return Err(self.bad(format!(
                "bad magic {:?} (expected \"GGUF\")",
                String::from_utf8_lossy(&magic)
            )));
        }
        let version = self.u32()?;
        if version.swap_bytes() <= 3 && version > 3 {
            return Err(self.bad("big-endian GGUF files are not supported"));
        }
        if !(2..=3).contains(&version) {
            return Err(self.bad(format!(
                "unsupported version {version} (2 and 3 are supported)"
            )));
        }
        let tensor_count = self.u64()?;
        let kv_count = self.count("metadata count", 12)?;
        let mut entries = Vec::with_capacity(kv_count);
        for _ in 0..kv_count {
            self.key.clear();
            let key = self.string()?;
            self.key = key.clone();
            let kind = self.u32()?;
            let value = self.value(kind)?;
            entries.push((key, value));
        }
        self.key.clear();
        Ok(GgufMetadata {
            version,
            tensor_count,
            entries,
        })
    }

    fn value(&mut self, kind: u32) -> Result<GgufValue> {
        Ok(match kind {
            0 => GgufValue::U8(u8::from_le_bytes(self.bytes()?)),
            1 => GgufValue::I8(i8::from_le_bytes(self.bytes()?)),
            2 => GgufValue::U16(u16::from_le_bytes(self.bytes()?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.bytes()?)),
            4 => GgufValue::U32(self.u32()?),
            5 => GgufValue::I32(i32::from_le_bytes(self.bytes()?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.bytes()?)),
            7 => match self.bytes::<1>()?[0] {
                0 => GgufValue::Bool(false),
                1 => GgufValue::Bool(true),
                b => return Err(self.bad(format!("bool byte {b} is neither 0 nor 1"))),
            },
            8 => GgufValue::String(self.string()?),
            9 => {
                let item_kind = self.u32()?;
                if item_kind == 9 {
                    return Err(self.bad("nested arrays are not supported"));
                }
                let len = self.count("array length", item_size(item_kind))?;
                let mut items = Vec::with_capacity(len);
                for _ in 0..len {
                    items.push(self.value(item_kind)?);
                }
                GgufValue::Array(items)
            }
            10 => GgufValue::U64(self.u64()?),
            11 => GgufValue::I64(i64::from_le_bytes(self.bytes()?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.bytes()?)),
            other => return Err(self.bad(format!("unknown value type {other}"))),
        })
    }
}

/// The fewest bytes one item of a type takes (a string's length prefix is 8).
fn item_size(kind: u32) -> u64 {
    match kind {
        0 | 1 | 7 => 1, // u8, i8, bool
        2 | 3 => 2,     // u16, i16
        4..=6 => 4,     // u32, i32, f32
        _ => 8,
    }
}
