//! The frontend's Rust stream processor fed the worker's call-home bytes in arbitrary pieces:
//! frames cut anywhere, UTF-8 cut inside a character, many streams interleaved. Whatever the
//! pieces, each stream says the same as when its bytes arrive in one read.

use std::path::PathBuf;

mod common;
use common::qwen3;

use dynamo_llm_core::detokenizer::StopConfig;
use dynamo_llm_core::response::frames::encode;
use dynamo_llm_core::response::{flags, OutputError, ProcessorConfig, StreamProcessor, Surface};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const EOS: u32 = 151645;

fn config(surface: Surface, stop: &[&str]) -> ProcessorConfig {
    ProcessorConfig {
        stop: StopConfig {
            stop: stop.iter().map(|s| s.to_string()).collect(),
            hidden_stop_ids: vec![EOS],
            eos_ids: vec![EOS],
            ..StopConfig::default()
        },
        surface,
        id: "chatcmpl-7f \"quoted\"".into(),
        created: 1_795_000_000,
        model: "Qwen/Qwen3-0.6B".into(),
        max_frame_bytes: 32 << 20,
    }
}

/// The frames a stock 1.6.1 worker writes after its handshake (see
/// test/interop/fixtures/wire-1.6.1): the prologue, one data frame per chunk, the end marker
/// and the sentinel.
fn worker_bytes(chunks: &[Value], complete: bool) -> Vec<u8> {
    let mut out = encode(br#"{"error":null}"#, b"");
    for chunk in chunks {
        let body = json!({ "data": { "data": chunk }, "complete_final": false });
        out.extend(encode(b"", body.to_string().as_bytes()));
    }
    if complete {
        out.extend(encode(b"", br#"{"complete_final":true}"#));
        out.extend(encode(br#""sentinel""#, b""));
    }
    out
}

/// An engine's chunks for `text`: its tokens in runs of 1 to 3, some with the engine's own text.
fn engine_chunks(
    rng: &mut SmallRng,
    text: &str,
    finish: Option<&str>,
    with_text: bool,
) -> Vec<Value> {
    let tok = qwen3();
    let ids = tok.encode(text, false).unwrap();
    let mut chunks = Vec::new();
    let mut at = 0;
    while at < ids.len() {
        let n = rng.random_range(1..=3).min(ids.len() - at);
        let run = &ids[at..at + n];
        at += n;
        let mut chunk = json!({ "token_ids": run });
        if with_text {
            chunk["text"] = json!(tok.decode(run, false).unwrap());
        }
        chunks.push(chunk);
    }
    if let Some(reason) = finish {
        chunks.push(json!({ "token_ids": [], "finish_reason": reason, "completion_usage": { "prompt_tokens": 9, "completion_tokens": ids.len(), "total_tokens": ids.len() + 9 } }));
    }
    chunks
}

/// What a stream said: its text, finish reason, events, and the flags of its reads together.
#[derive(Debug, PartialEq)]
struct Said {
    content: String,
    finish_reason: Option<String>,
    role_events: usize,
    flags: u32,
    tokens: u64,
    generated: Vec<u32>,
    problem: String,
}

fn said(p: &mut StreamProcessor, sse: &[u8], flags_seen: u32) -> Said {
    let text = std::str::from_utf8(sse).expect("events are UTF-8");
    let mut content = String::new();
    let mut finish_reason = None;
    let mut role_events = 0;
    for event in text.split_terminator("\n\n") {
        let data = event
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("not a data event: {event:?}"));
        let chunk: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"));
        assert_eq!(chunk["id"], "chatcmpl-7f \"quoted\"");
        assert_eq!(chunk["model"], "Qwen/Qwen3-0.6B");
        let choice = &chunk["choices"][0];
        assert!(finish_reason.is_none(), "an event after the finish: {data}");
        if choice["delta"]["role"] == "assistant" {
            role_events += 1;
        }
        let piece = if choice["delta"].is_object() {
            &choice["delta"]["content"]
        } else {
            &choice["text"]
        };
        content.push_str(piece.as_str().unwrap());
        finish_reason = choice["finish_reason"].as_str().map(str::to_owned);
    }
    Said {
        content,
        finish_reason,
        role_events,
        flags: flags_seen,
        tokens: p.completion_tokens(),
        generated: p.generated().to_vec(),
        problem: p.problem().to_owned(),
    }
}

/// One stream under test: its bytes, and the processor reading them.
struct Stream {
    bytes: Vec<u8>,
    cuts: Vec<usize>,
    processor: StreamProcessor,
    sse: Vec<u8>,
    flags: u32,
    /// The tokens each read's result counted, summed.
    read_tokens: u64,
}

impl Stream {
    fn new(bytes: Vec<u8>, cuts: Vec<usize>, surface: Surface, stop: &[&str]) -> Self {
        Self {
            bytes,
            cuts,
            processor: StreamProcessor::new(qwen3(), config(surface, stop)),
            sse: vec![],
            flags: 0,
            read_tokens: 0,
        }
    }

    fn read(&mut self, piece: &[u8]) {
        let result = self.processor.read(piece);
        self.flags |= result & ((1 << flags::TOKENS_SHIFT) - 1);
        self.read_tokens += u64::from(result >> flags::TOKENS_SHIFT);
        self.sse.extend(self.processor.take());
    }

    fn close(mut self) -> Said {
        if self.flags & flags::FINISHED == 0 && self.flags & flags::END != 0 {
            self.processor.end();
            self.sse.extend(self.processor.take());
        }
        assert_eq!(
            self.read_tokens,
            self.processor.completion_tokens(),
            "the reads' token counts add up"
        );
        let sse = std::mem::take(&mut self.sse);
        said(&mut self.processor, &sse, self.flags)
    }
}

fn whole(surface: Surface, stop: &[&str], bytes: &[u8]) -> Said {
    let mut s = Stream::new(bytes.to_vec(), vec![], surface, stop);
    let all = s.bytes.clone();
    s.read(&all);
    s.close()
}

/// Cuts in `len` bytes: mostly random, sometimes every byte.
fn random_cuts(rng: &mut SmallRng, len: usize) -> Vec<usize> {
    if rng.random_bool(0.1) {
        return (1..len).collect();
    }
    let mut cuts: Vec<usize> = (0..rng.random_range(1..=len.max(2)))
        .map(|_| rng.random_range(0..=len))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

const TEXTS: &[&str] = &[
    "Hello! Here is the answer: 42. 你好，世界 🌍🚀 — naïve café, ünïcödé, and 日本語のテキスト.",
    "First line\nSecond\tline with \"quotes\" and \\backslashes\\ and a control \u{1} char. STOP here and never again.",
    "🙂🙃😉😊😇🥰😍🤩 emoji only then a stop word: END and more text after it",
    "def f(x):\n    return x * 2  # 注释\n\nprint(f(21))",
];

#[test]
fn random_splits_of_interleaved_streams_say_what_one_whole_read_says() {
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    for round in 0..40 {
        let mut streams = Vec::new();
        let mut expected = Vec::new();
        for i in 0..8 {
            let surface = if i % 3 == 0 {
                Surface::Completions
            } else {
                Surface::Chat
            };
            let stop: &[&str] = if i % 2 == 0 { &["STOP", "END"] } else { &[] };
            let text = TEXTS[(round + i) % TEXTS.len()];
            let finish = [Some("eos"), Some("length"), None][i % 3];
            let chunks = engine_chunks(&mut rng, text, finish, i % 4 == 1);
            let bytes = worker_bytes(&chunks, true);
            expected.push(whole(surface, stop, &bytes));
            let cuts = random_cuts(&mut rng, bytes.len());
            streams.push(Stream::new(bytes, cuts, surface, stop));
        }
        // Reads of all streams interleave at random, each stream's in order.
        let mut next = vec![0usize; streams.len()];
        let mut from = vec![0usize; streams.len()];
        loop {
            let open: Vec<usize> = (0..streams.len())
                .filter(|&s| from[s] < streams[s].bytes.len())
                .collect();
            if open.is_empty() {
                break;
            }
            let s = open[rng.random_range(0..open.len())];
            let stream = &mut streams[s];
            let to = stream
                .cuts
                .get(next[s])
                .copied()
                .unwrap_or(stream.bytes.len())
                .max(from[s]);
            next[s] += 1;
            let piece = stream.bytes[from[s]..to].to_vec();
            from[s] = to;
            stream.read(&piece);
        }
        for (i, (stream, want)) in streams.into_iter().zip(expected).enumerate() {
            assert_eq!(stream.close(), want, "round {round}, stream {i}");
        }
    }
}

#[test]
fn a_whole_read_says_the_text_once_with_the_role_first_and_the_finish_last() {
    let mut rng = SmallRng::seed_from_u64(7);
    let text = TEXTS[0];
    let bytes = worker_bytes(&engine_chunks(&mut rng, text, Some("length"), false), true);
    let said = whole(Surface::Chat, &[], &bytes);
    assert_eq!(said.content, text);
    assert_eq!(said.finish_reason.as_deref(), Some("length"));
    assert_eq!(said.role_events, 1);
    assert_eq!(
        said.flags & (flags::STARTED | flags::END | flags::SENTINEL | flags::FINISHED),
        flags::STARTED | flags::END | flags::SENTINEL | flags::FINISHED
    );
    assert_eq!(
        said.tokens as usize,
        qwen3().encode(text, false).unwrap().len()
    );
}

#[test]
fn a_stop_string_ends_the_text_before_it_and_later_chunks_are_ignored() {
    let mut rng = SmallRng::seed_from_u64(8);
    let bytes = worker_bytes(&engine_chunks(&mut rng, TEXTS[1], Some("eos"), false), true);
    let said = whole(Surface::Chat, &["STOP"], &bytes);
    assert!(said.content.ends_with("char. "), "{:?}", said.content);
    assert_eq!(said.finish_reason.as_deref(), Some("stop"));
}

#[test]
fn an_eos_token_finishes_with_stop_and_is_not_rendered() {
    let bytes = worker_bytes(&[json!({ "token_ids": [9707, 0, EOS, 1234] })], false);
    let said = whole(Surface::Completions, &[], &bytes);
    assert_eq!(said.content, "Hello!");
    assert_eq!(said.finish_reason.as_deref(), Some("stop"));
    assert_eq!(said.tokens, 4);
}

#[test]
fn a_stream_ended_without_a_finish_reason_gets_a_last_event_with_stop() {
    let bytes = worker_bytes(&[json!({ "token_ids": [9707] })], true);
    let said = whole(Surface::Chat, &[], &bytes);
    assert_eq!(
        (said.content.as_str(), said.finish_reason.as_deref()),
        ("Hello", Some("stop"))
    );
}

#[test]
fn protocol_violations_and_refusals_are_named() {
    let cases: Vec<(Vec<u8>, u32, &str)> = vec![
        (
            encode(b"", b"{}"),
            flags::VIOLATION,
            "expected a header-only prologue frame",
        ),
        (
            encode(br#"{"error":"no room"}"#, b""),
            flags::REFUSED,
            "no room",
        ),
        (
            [encode(br#"{"error":null}"#, b""), encode(b"", b"not json")].concat(),
            flags::VIOLATION,
            "data frame is not JSON (8 bytes)",
        ),
        (
            [encode(br#"{"error":null}"#, b""), encode(b"", b"{}")].concat(),
            flags::VIOLATION,
            "data frame has neither data nor complete_final",
        ),
        (
            [
                encode(br#"{"error":null}"#, b""),
                encode(br#""sentinel""#, b""),
            ]
            .concat(),
            flags::VIOLATION,
            "sentinel before complete_final",
        ),
        (
            [
                encode(br#"{"error":null}"#, b""),
                encode(b"", br#"{"complete_final":true}"#),
                encode(b"", br#"{"complete_final":true}"#),
            ]
            .concat(),
            flags::VIOLATION,
            "data frame after complete_final",
        ),
        (
            [&[0xff; 16][..], &[0; 8]].concat(),
            flags::VIOLATION,
            "(the length fields look like garbage, not a Dynamo frame)",
        ),
    ];
    for (bytes, flag, message) in cases {
        let mut p = StreamProcessor::new(qwen3(), config(Surface::Chat, &[]));
        let got = p.read(&bytes);
        assert_ne!(got & flag, 0, "{message}: flags {got:#b}");
        assert!(
            p.problem().contains(message),
            "{:?} does not name {message:?}",
            p.problem()
        );
    }
}

#[test]
fn a_worker_error_item_keeps_what_came_before_it_and_names_its_kind() {
    // Recorded from a stock 1.6.1 worker (test/interop/fixtures/wire-1.6.1/json-error.jsonl):
    // an item, then an error item.
    let fixture = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../test/interop/fixtures/wire-1.6.1/json-error.jsonl"),
    )
    .unwrap();
    let mut bytes = Vec::new();
    for line in fixture.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        if record["conn"] == "ch2"
            && record["dir"] == "worker->client"
            && record["kind"] != "handshake"
            && record["kind"] != "EOF"
        {
            let hex = record["hex"].as_str().unwrap();
            bytes.extend(
                (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()),
            );
        }
    }
    let mut p = StreamProcessor::new(qwen3(), config(Surface::Chat, &[]));
    let got = p.read(&bytes);
    assert_ne!(got & flags::WORKER_ERROR, 0);
    assert_eq!(p.problem_kind(), "InvalidArgument");
    assert!(!p.problem().is_empty());
}

#[test]
fn a_malformed_chunk_is_named_and_fails_the_choice() {
    let bytes = worker_bytes(
        &[json!({ "token_ids": [1] }), json!({ "token_ids": [-1] })],
        false,
    );
    let mut p = StreamProcessor::new(qwen3(), config(Surface::Chat, &[]));
    let got = p.read(&bytes);
    assert_ne!(got & flags::ENGINE_ERROR, 0);
    let Some(OutputError::Invalid(message)) = p.output_error() else {
        panic!("{:?}", p.output_error())
    };
    assert!(message.starts_with("engine output chunk 1: "), "{message}");
    let bytes = worker_bytes(
        &[json!({ "token_ids": [1], "finish_reason": { "error": "CUDA out of memory" } })],
        false,
    );
    let mut p = StreamProcessor::new(qwen3(), config(Surface::Chat, &[]));
    assert_ne!(p.read(&bytes) & flags::ENGINE_ERROR, 0);
    assert_eq!(
        p.output_error(),
        Some(&OutputError::Engine("CUDA out of memory".into()))
    );
    assert!(p.take().is_empty(), "an engine error writes nothing");
}

#[test]
fn events_framed_as_a_chunk_carry_their_size() {
    let mut p = StreamProcessor::new(qwen3(), config(Surface::Chat, &[]));
    p.read(&worker_bytes(&[json!({ "token_ids": [9707] })], false));
    let chunk = String::from_utf8(p.take_chunk()).unwrap();
    let (size, rest) = chunk.split_once("\r\n").unwrap();
    let events = rest.strip_suffix("\r\n").unwrap();
    assert_eq!(usize::from_str_radix(size, 16).unwrap(), events.len());
    assert!(events.starts_with("data: {"), "{events}");
    assert!(p.take_chunk().is_empty(), "nothing more to take");
}

#[test]
fn a_migration_goes_on_with_the_same_text_on_a_new_connection() {
    let mut rng = SmallRng::seed_from_u64(9);
    let text = TEXTS[2];
    let chunks = engine_chunks(&mut rng, text, Some("eos"), false);
    let (a, b) = chunks.split_at(chunks.len() / 2);
    let mut p = StreamProcessor::new(qwen3(), config(Surface::Chat, &[]));
    let mut sse = Vec::new();
    let mut flags_seen = p.read(&worker_bytes(a, false));
    sse.extend(p.take());
    let done: usize = a
        .iter()
        .map(|c| c["token_ids"].as_array().unwrap().len())
        .sum();
    assert_eq!(p.generated().len(), done);
    p.connect();
    flags_seen |= p.read(&worker_bytes(b, true));
    sse.extend(p.take());
    let said = said(&mut p, &sse, flags_seen);
    assert_eq!(said.content, text);
    assert_eq!(said.role_events, 1);
}
