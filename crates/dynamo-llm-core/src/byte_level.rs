//! The raw bytes of every token of a byte-level BPE vocabulary (GPT-2, Llama 3, Qwen), so text
//! can be decoded incrementally by concatenating bytes instead of re-decoding a window of ids.
//! This mirrors what `tokenizers`' ByteLevel decoder does: each token's characters map back to
//! bytes through the GPT-2 byte/character table, a token with a character outside the table
//! (an added token such as `<|im_end|>` written outside it) contributes its UTF-8 bytes, and the
//! result is read as UTF-8 with invalid sequences replaced.

use std::collections::HashMap;

use tokenizers::{DecoderWrapper, Tokenizer as HfTokenizer};

/// Per-id bytes and special flags of a byte-level vocabulary.
pub struct ByteLevelVocab {
    bytes: Vec<Box<[u8]>>,
    special: Vec<bool>,
}

impl ByteLevelVocab {
    /// Built when the tokenizer's decoder is exactly ByteLevel; `None` otherwise.
    pub fn of(tokenizer: &HfTokenizer) -> Option<Self> {
        if !matches!(tokenizer.get_decoder(), Some(DecoderWrapper::ByteLevel(_))) {
            return None;
        }
        let char_bytes = char_to_byte();
        let size = tokenizer.get_vocab_size(true);
        let added = tokenizer.get_added_tokens_decoder();
        let max_id = added
            .keys()
            .copied()
            .max()
            .map_or(0, |m| m as usize + 1)
            .max(size);
        let mut bytes = Vec::with_capacity(max_id);
        let mut special = vec![false; max_id];
        for id in 0..max_id {
            let token = tokenizer.id_to_token(id as u32).unwrap_or_default();
            let mapped: Option<Vec<u8>> =
                token.chars().map(|c| char_bytes.get(&c).copied()).collect();
            bytes.push(
                mapped
                    .unwrap_or_else(|| token.as_bytes().to_vec())
                    .into_boxed_slice(),
            );
        }
        for (id, token) in added {
            if token.special {
                special[id as usize] = true;
            }
        }
        Some(Self { bytes, special })
    }

    /// Appends the bytes of `id` (nothing for an unknown id, or a special one when skipping).
    pub fn push(&self, id: u32, skip_special: bool, out: &mut Vec<u8>) {
        let id = id as usize;
        if id < self.bytes.len() && !(skip_special && self.special[id]) {
            out.extend_from_slice(&self.bytes[id]);
        }
    }
}

/// GPT-2's byte/character table: the printable bytes stand for themselves, the others for the
/// characters from U+0100 on, in byte order.
pub(crate) fn byte_chars() -> [char; 256] {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut chars = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        chars[usize::from(b)] = if printable(b) {
            char::from(b)
        } else {
            next += 1;
            char::from_u32(next - 1).expect("U+0100..U+0143 are chars")
        };
    }
    chars
}

/// [`byte_chars`], inverted.
fn char_to_byte() -> HashMap<char, u8> {
    (0..=255u8).zip(byte_chars()).map(|(b, c)| (c, b)).collect()
}

/// How many bytes at the end of `bytes` are the start of a character that may still complete.
pub fn incomplete_tail(bytes: &[u8]) -> usize {
    let mut start = 0;
    loop {
        match std::str::from_utf8(&bytes[start..]) {
            Ok(_) => return 0,
            Err(e) => match e.error_len() {
                None => return bytes.len() - start - e.valid_up_to(),
                Some(len) => start += e.valid_up_to() + len,
            },
        }
    }
}
