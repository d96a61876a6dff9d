//! An exact fast path for encoding ASCII text with the byte-level BPE tokenizers of the Qwen2 and
//! Llama 3 families. `tokenizers` spends most of an encode on work the ids never need: alignment
//! tracking through normalization, the Oniguruma pre-tokenizer regex, a string per token. On ASCII
//! text NFC is the identity and the pre-tokenizer regex reduces to a few byte classes, so the split
//! is scanned by hand here; each piece's ids still come from the tokenizer's own BPE model, and are
//! cached. Other text, and any other pipeline, goes through `tokenizers` unchanged. No library
//! offers this: the fast BPE crates implement OpenAI's encodings, not `tokenizer.json` pipelines.

use std::collections::HashMap;
use std::sync::RwLock;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::{json, Value};
use tokenizers::{Model, ModelWrapper, Tokenizer as HfTokenizer};

use crate::byte_level::byte_chars;
use crate::error::{LlmError, Result};

/// The Qwen2 split pattern, and Llama 3's, which differs only in taking up to three digits.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Pieces longer than this are not cached (long runs of spaces or symbols are rare and unbounded).
const MAX_CACHED_PIECE: usize = 64;
/// The cache starts over when it holds this many pieces.
const CACHE_CAPACITY: usize = 100_000;

/// Added tokens matched as a whole, leftmost-longest, as `tokenizers` matches them.
struct AddedTokens {
    matcher: AhoCorasick,
    ids: Vec<u32>,
}

impl AddedTokens {
    /// `Ok(None)` when there are none; an error when they cannot be matched (then no fast path:
    /// dropping them would change the ids).
    fn new(
        tokens: Vec<(String, u32)>,
    ) -> std::result::Result<Option<Self>, aho_corasick::BuildError> {
        if tokens.is_empty() {
            return Ok(None);
        }
        let (contents, ids): (Vec<String>, Vec<u32>) = tokens.into_iter().unzip();
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(contents)?;
        Ok(Some(Self { matcher, ids }))
    }
}

/// Token ids of pre-tokenized pieces already encoded, by the piece's bytes.
type PieceCache = HashMap<Box<[u8]>, Box<[u32]>>;

/// Encodes a stretch of text between added tokens, appending its ids.
type EncodeStretch<'a> = dyn FnMut(&[u8], &mut Vec<u32>) -> Result<()> + 'a;

/// The ASCII fast path of one tokenizer.
pub(crate) struct AsciiBpe {
    /// Added tokens that are matched before normalization, then those matched after it.
    raw: Option<AddedTokens>,
    normalized: Option<AddedTokens>,
    max_digits: usize,
    /// The byte-level alphabet: the character each byte stands for in the vocabulary.
    byte_chars: [char; 256],
    cache: RwLock<PieceCache>,
}

impl AsciiBpe {
    /// The fast path for `tokenizer`, or `None` when its pipeline is not one this reproduces
    /// exactly: NFC or no normalizer, the Qwen2 or Llama 3 split followed by a plain byte-level
    /// mapping, a BPE model without dropout, and added tokens with no stripping or word rules.
    pub(crate) fn of(tokenizer: &HfTokenizer) -> Option<Self> {
        let normalizer = serde_json::to_value(tokenizer.get_normalizer()).ok()?;
        if !(normalizer.is_null() || normalizer == json!({ "type": "NFC" })) {
            return None;
        }
        let max_digits = split_digits(&serde_json::to_value(tokenizer.get_pre_tokenizer()).ok()?)?;
        let ModelWrapper::BPE(bpe) = tokenizer.get_model() else {
            return None;
        };
        if bpe.dropout.is_some_and(|p| p > 0.0) || tokenizer.get_encode_special_tokens() {
            return None;
        }
        let (mut raw, mut normalized) = (Vec::new(), Vec::new());
        for (id, token) in tokenizer.get_added_tokens_decoder() {
            if token.single_word || token.lstrip || token.rstrip {
                return None;
            }
            if !token.normalized {
                raw.push((token.content, id));
            } else if token.content.is_ascii() || normalizer.is_null() {
                // NFC leaves ASCII as it is, so the token matches as written.
                normalized.push((token.content, id));
            } else {
                return None;
            }
        }
        Some(Self {
            raw: AddedTokens::new(raw).ok()?,
            normalized: AddedTokens::new(normalized).ok()?,
            max_digits,
            byte_chars: byte_chars(),
            cache: RwLock::new(HashMap::new()),
        })
    }

    /// The ids of ASCII `text`, without special tokens added: what `tokenizers` gives for it.
    pub(crate) fn encode(&self, model: &ModelWrapper, text: &str) -> Result<Vec<u32>> {
        debug_assert!(text.is_ascii());
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        split_added(
            self.raw.as_ref(),
            text.as_bytes(),
            &mut ids,
            &mut |segment, ids| {
                split_added(self.normalized.as_ref(), segment, ids, &mut |plain, ids| {
                    self.encode_plain(model, plain, ids)
                })
            },
        )?;
        Ok(ids)
    }

    /// Pre-tokenizes `text` (no added tokens in it) and appends each piece's BPE ids.
    fn encode_plain(&self, model: &ModelWrapper, text: &[u8], ids: &mut Vec<u32>) -> Result<()> {
        let mut start = 0;
        while start < text.len() {
            let end = piece_end(text, start, self.max_digits);
            self.encode_piece(model, &text[start..end], ids)?;
            start = end;
        }
        Ok(())
    }

    fn encode_piece(&self, model: &ModelWrapper, piece: &[u8], ids: &mut Vec<u32>) -> Result<()> {
        let cacheable = piece.len() <= MAX_CACHED_PIECE;
        if cacheable {
            if let Some(hit) = self
                .cache
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(piece)
            {
                ids.extend_from_slice(hit);
                return Ok(());
            }
        }
        let mapped: String = piece
            .iter()
            .map(|&b| self.byte_chars[usize::from(b)])
            .collect();
        let tokens = model
            .tokenize(&mapped)
            .map_err(|e| LlmError::Tokenizer(e.to_string()))?;
        let start = ids.len();
        ids.extend(tokens.iter().map(|t| t.id));
        if cacheable {
            let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
            cache.insert(piece.into(), ids[start..].into());
        }
        Ok(())
    }
}

/// How many digits one piece takes under this pre-tokenizer, or `None` if it is not one of the
/// two pipelines the fast path reproduces.
fn split_digits(pre_tokenizer: &Value) -> Option<usize> {
    let steps = pre_tokenizer.get("pretokenizers")?.as_array()?;
    let [split, byte_level] = steps.as_slice() else {
        return None;
    };
    let plain_byte_level = byte_level.get("type")? == "ByteLevel"
        && byte_level.get("add_prefix_space")? == false
        && byte_level.get("use_regex")? == false;
    let isolated_split = split.get("type")? == "Split"
        && split.get("behavior")? == "Isolated"
        && split.get("invert")? == false;
    if pre_tokenizer.get("type")? != "Sequence" || !plain_byte_level || !isolated_split {
        return None;
    }
    match split.get("pattern")?.get("Regex")?.as_str()? {
        QWEN2_SPLIT => Some(1),
        LLAMA3_SPLIT => Some(3),
        _ => None,
    }
}

/// Splits `text` around the added tokens of `added`, appending their ids and handing each
/// stretch between them to `rest`.
fn split_added(
    added: Option<&AddedTokens>,
    text: &[u8],
    ids: &mut Vec<u32>,
    rest: &mut EncodeStretch<'_>,
) -> Result<()> {
    let Some(added) = added else {
        return rest(text, ids);
    };
    let mut start = 0;
    for m in added.matcher.find_iter(text) {
        if m.start() > start {
            rest(&text[start..m.start()], ids)?;
        }
        ids.push(added.ids[m.pattern().as_usize()]);
        start = m.end();
    }
    if start < text.len() {
        rest(&text[start..], ids)?;
    }
    Ok(())
}

// The split pattern's classes on ASCII: \p{L}, \p{N}, and \s (Unicode White_Space: TAB to CR, space).
fn letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}
fn digit(b: u8) -> bool {
    b.is_ascii_digit()
}
fn space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}
fn newline(b: u8) -> bool {
    matches!(b, b'\r' | b'\n')
}
fn symbol(b: u8) -> bool {
    !letter(b) && !digit(b) && !space(b)
}

/// The end of the run of bytes in `class` from `i`.
fn run_end(text: &[u8], i: usize, class: fn(u8) -> bool) -> usize {
    text[i..]
        .iter()
        .position(|&b| !class(b))
        .map_or(text.len(), |n| i + n)
}

/// Where the split pattern's match at `i` ends: its alternatives tried in order, as the regex does.
fn piece_end(text: &[u8], i: usize, max_digits: usize) -> usize {
    let b = text[i];
    let at = |k: usize| text.get(k).map(u8::to_ascii_lowercase);
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if b == b'\'' {
        match (at(i + 1), at(i + 2)) {
            (Some(b's' | b't' | b'm' | b'd'), _) => return i + 2,
            (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => return i + 3,
            _ => {}
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if letter(b) {
        return run_end(text, i, letter);
    }
    if !newline(b) && !digit(b) && text.get(i + 1).is_some_and(|&n| letter(n)) {
        return run_end(text, i + 1, letter);
    }
    // \p{N} (Qwen2) or \p{N}{1,3} (Llama 3)
    if digit(b) {
        return run_end(text, i, digit).min(i + max_digits);
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    let first = if b == b' ' { i + 1 } else { i };
    if text.get(first).is_some_and(|&s| symbol(s)) {
        return run_end(text, run_end(text, first, symbol), newline);
    }
    // Whitespace: \s*[\r\n]+ ends after the run's last newline; else \s+(?!\S) leaves the run's
    // last space to the next piece when a non-space follows; else \s+.
    let end = run_end(text, i, space);
    if let Some(last) = text[i..end].iter().rposition(|&s| newline(s)) {
        return i + last + 1;
    }
    if end < text.len() && end - i >= 2 {
        return end - 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str, max_digits: usize) -> Vec<&str> {
        let mut out = Vec::new();
        let mut start = 0;
        while start < text.len() {
            let end = piece_end(text.as_bytes(), start, max_digits);
            out.push(&text[start..end]);
            start = end;
        }
        out
    }

    #[test]
    fn splits_like_the_pattern() {
        assert_eq!(
            pieces("Hello, world! It's 2024.", 1),
            ["Hello", ",", " world", "!", " It", "'s", " ", "2", "0", "2", "4", "."]
        );
        assert_eq!(
            pieces("x  = 12345\n\n  y", 3),
            ["x", " ", " =", " ", "123", "45", "\n\n", " ", " y"]
        );
        assert_eq!(pieces("a \t\n b", 1), ["a", " \t\n", " b"]);
        assert_eq!(pieces("end   ", 1), ["end", "   "]);
        assert_eq!(pieces("'LL 'Re 'x", 1), ["'LL", " '", "Re", " '", "x"]);
        assert_eq!(pieces(" {}\n\nfoo", 1), [" {}\n\n", "foo"]);
    }

    #[test]
    fn maps_ascii_bytes_as_gpt2_does() {
        let chars = byte_chars();
        assert_eq!(chars[usize::from(b' ')], 'Ġ');
        assert_eq!(chars[usize::from(b'\n')], 'Ċ');
        assert_eq!(chars[0x7f], 'ġ');
        assert_eq!(chars[usize::from(b'a')], 'a');
    }
}
