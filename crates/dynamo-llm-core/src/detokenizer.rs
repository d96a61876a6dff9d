//! Incremental detokenization with stop handling: the frontend's "backend" stage for one
//! request. Token ids arrive in chunks; each chunk yields the text it adds. Text is held back
//! while it ends inside a multi-byte character (so U+FFFD never appears for a split character)
//! or while it could still grow into a stop string.
//!
//! Decoding keeps two offsets into the generated ids, as Hugging Face's streaming decoders do:
//! the text of `ids[prefix..]` minus the text of `ids[prefix..read]` is what the new ids add.
//! Decoding from a few ids back keeps tokenizer decoders that treat the first token specially
//! (SentencePiece's leading space) consistent with decoding the whole sequence at once.

use std::collections::HashSet;
use std::sync::Arc;

use crate::byte_level::incomplete_tail;
use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// How one request's output stops.
#[derive(Debug, Clone, Default)]
pub struct StopConfig {
    /// Stop strings; generation ends where the first of them appears in the text.
    pub stop: Vec<String>,
    /// Keep the matched stop string at the end of the text instead of hiding it.
    pub include_stop_str: bool,
    /// Stop token ids that end generation without being rendered (the EOS ids belong here).
    pub hidden_stop_ids: Vec<u32>,
    /// Stop token ids that end generation after being rendered.
    pub visible_stop_ids: Vec<u32>,
    /// The model's EOS ids: a hidden stop on one of them finishes as `eos`, not `stop`.
    pub eos_ids: Vec<u32>,
    /// Stop tokens are ignored until this many tokens have been generated.
    pub min_tokens: u32,
    /// Leave special tokens out of the text.
    pub skip_special_tokens: bool,
}

/// Why the output stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopHit {
    /// An EOS token id (hidden).
    Eos(u32),
    /// A stop token id, hidden or rendered.
    StopToken(u32),
    /// A stop string, matched in the text.
    StopString(String),
}

/// What one chunk adds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    /// Text released by this chunk (possibly empty).
    pub text: String,
    /// Set on the chunk that ended the output; later chunks are ignored.
    pub stop: Option<StopHit>,
}

/// The per-request detokenizer.
pub struct Detokenizer {
    tokenizer: Arc<Tokenizer>,
    config: StopConfig,
    hidden: HashSet<u32>,
    visible: HashSet<u32>,
    /// Byte-level vocabularies: decoded bytes not yet released (an incomplete character).
    pending: Vec<u8>,
    ids: Vec<u32>,
    prefix_offset: usize,
    read_offset: usize,
    /// Text of `ids[prefix_offset..read_offset]`, when known.
    prefix_text: Option<String>,
    /// Decoded text not yet released because a stop string could still begin in it.
    jail: String,
    generated: u64,
    stopped: bool,
}

/// Decoded ids kept in front of the read offset once they are no longer needed.
const TRIM_AFTER: usize = 256;

impl Detokenizer {
    pub fn new(tokenizer: Arc<Tokenizer>, config: StopConfig) -> Self {
        let hidden = config.hidden_stop_ids.iter().copied().collect();
        let visible = config.visible_stop_ids.iter().copied().collect();
        Self {
            tokenizer,
            config,
            hidden,
            visible,
            pending: Vec::new(),
            ids: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
            prefix_text: None,
            jail: String::new(),
            generated: 0,
            stopped: false,
        }
    }

    /// Whether a stop has been hit; later pushes return nothing.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Number of token ids seen so far (including a rendered or hidden stop token).
    pub fn generated_tokens(&self) -> u64 {
        self.generated
    }

    /// Feeds the next chunk's token ids. When the engine already produced the chunk's text,
    /// pass it as `text`: it is used as is (stop tokens still end the output; stop strings are
    /// still matched).
    pub fn push(&mut self, ids: &[u32], text: Option<&str>) -> Result<Step> {
        if self.stopped {
            return Ok(Step::default());
        }
        let mut token_stop = None;
        let mut render = ids.len();
        for (i, &id) in ids.iter().enumerate() {
            self.generated += 1;
            if self.generated < u64::from(self.config.min_tokens) {
                continue;
            }
            if self.hidden.contains(&id) {
                render = i;
                token_stop = Some(if self.config.eos_ids.contains(&id) {
                    StopHit::Eos(id)
                } else {
                    StopHit::StopToken(id)
                });
                break;
            }
            if self.visible.contains(&id) {
                render = i + 1;
                token_stop = Some(StopHit::StopToken(id));
                break;
            }
        }
        match text {
            Some(text) => self.jail.push_str(text),
            None => self.decode_ids(&ids[..render], false)?,
        }
        if token_stop.is_some() {
            // The output ends here: whatever is still held back is released (or cut at a stop
            // string that completes inside it).
            if text.is_none() {
                self.decode_ids(&[], true)?;
            }
            let mut step = self.release(true);
            if step.stop.is_none() {
                step.stop = token_stop;
            }
            self.stopped = true;
            return Ok(step);
        }
        Ok(self.release(false))
    }

    /// Ends the output (the engine finished): releases everything held back, including an
    /// incomplete trailing character as U+FFFD, and a stop string completed by the tail.
    pub fn finish(&mut self) -> Result<Step> {
        if self.stopped {
            return Ok(Step::default());
        }
        self.decode_ids(&[], true)?;
        let step = self.release(true);
        self.stopped = true;
        Ok(step)
    }

    /// Decodes `ids` into the jail. Byte-level vocabularies concatenate each token's bytes;
    /// others re-decode a short window of ids (see the module docs).
    fn decode_ids(&mut self, ids: &[u32], flush: bool) -> Result<()> {
        let tokenizer = self.tokenizer.clone();
        let Some(vocab) = tokenizer.byte_level() else {
            self.ids.extend_from_slice(ids);
            return self.decode_step(flush);
        };
        for &id in ids {
            vocab.push(id, self.config.skip_special_tokens, &mut self.pending);
        }
        let ready = self.pending.len()
            - if flush {
                0
            } else {
                incomplete_tail(&self.pending)
            };
        self.jail
            .push_str(&String::from_utf8_lossy(&self.pending[..ready]));
        self.pending.drain(..ready);
        Ok(())
    }

    /// Decodes the ids past the read offset into the jail. Unless `flush`, text that ends in an
    /// incomplete character waits for the next ids.
    fn decode_step(&mut self, flush: bool) -> Result<()> {
        if self.read_offset == self.ids.len() {
            return Ok(());
        }
        // Byte-fallback decoders read a run of byte tokens (`<0xE4>`...) as one piece, all of it
        // replaced if any of it is invalid: wait for the run to end so it is read whole.
        if !flush
            && self
                .ids
                .last()
                .is_some_and(|&id| self.tokenizer.is_byte_fallback_token(id))
        {
            return Ok(());
        }
        let prefix_text = match self.prefix_text.take() {
            Some(text) => text,
            None => self.tokenizer.decode(
                &self.ids[self.prefix_offset..self.read_offset],
                self.config.skip_special_tokens,
            )?,
        };
        let full = self.tokenizer.decode(
            &self.ids[self.prefix_offset..],
            self.config.skip_special_tokens,
        )?;
        let added = full
            .get(prefix_text.len()..)
            .filter(|_| full.starts_with(prefix_text.as_str()));
        match added {
            Some(added) if !added.is_empty() && (flush || !added.ends_with('\u{FFFD}')) => {
                self.jail.push_str(added);
                self.prefix_offset = self.read_offset;
                self.read_offset = self.ids.len();
                self.trim();
            }
            _ => self.prefix_text = Some(prefix_text),
        }
        Ok(())
    }

    /// Drops ids that no later decode will look at.
    fn trim(&mut self) {
        if self.prefix_offset >= TRIM_AFTER {
            self.ids.drain(..self.prefix_offset);
            self.read_offset -= self.prefix_offset;
            self.prefix_offset = 0;
        }
    }

    /// Moves text out of the jail: up to and excluding (or including) a completed stop string,
    /// else all of it but a tail that could still begin a stop string (everything when `all`).
    fn release(&mut self, all: bool) -> Step {
        if let Some((start, stop)) = self.first_stop_string() {
            let end = if self.config.include_stop_str {
                start + stop.len()
            } else {
                start
            };
            let text = self.jail[..end].to_owned();
            self.jail.clear();
            self.stopped = true;
            return Step {
                text,
                stop: Some(StopHit::StopString(stop)),
            };
        }
        let keep = if all { 0 } else { self.stop_prefix_len() };
        let text = self.jail[..self.jail.len() - keep].to_owned();
        self.jail.drain(..self.jail.len() - keep);
        Step { text, stop: None }
    }

    /// The earliest complete stop string in the jail (the longest one when two start together).
    fn first_stop_string(&self) -> Option<(usize, String)> {
        let mut best: Option<(usize, &String)> = None;
        for stop in self.config.stop.iter().filter(|s| !s.is_empty()) {
            if let Some(at) = self.jail.find(stop.as_str()) {
                let better = match best {
                    None => true,
                    Some((b, s)) => at < b || (at == b && stop.len() > s.len()),
                };
                if better {
                    best = Some((at, stop));
                }
            }
        }
        best.map(|(at, s)| (at, s.clone()))
    }

    /// Length of the longest tail of the jail that is a proper prefix of some stop string.
    fn stop_prefix_len(&self) -> usize {
        let mut keep = 0;
        for stop in &self.config.stop {
            let max = stop.len().saturating_sub(1).min(self.jail.len());
            for len in (keep + 1..=max).rev() {
                let start = self.jail.len() - len;
                if self.jail.is_char_boundary(start) && stop.starts_with(&self.jail[start..]) {
                    keep = len;
                    break;
                }
            }
        }
        keep
    }
}
