//! GGUF metadata and embedded vocabularies against fixtures made by
//! scripts/goldens/make-gguf-fixtures.py: the expected ids are what `transformers` produces when
//! it loads the same GGUF file.

use std::path::{Path, PathBuf};

use dynamo_llm_core::gguf::{hf_files_from_file, read_metadata, tokenizer_from_file};
use dynamo_llm_core::tokenizer::Tokenizer;
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(fixtures().join("gguf-expected.json")).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn metadata_is_read_from_both_fixtures() {
    let all = expected();
    for (name, fixture) in all["fixtures"].as_object().unwrap() {
        let meta = read_metadata(&fixtures().join(name)).unwrap();
        let want = &fixture["metadata"];
        assert_eq!(meta.version, 3, "{name}");
        assert_eq!(
            meta.architecture(),
            want["general.architecture"].as_str(),
            "{name}"
        );
        let arch = meta.architecture().unwrap().to_owned();
        assert_eq!(
            meta.context_length(),
            want[format!("{arch}.context_length")].as_u64(),
            "{name}"
        );
        assert_eq!(
            meta.bos_token_id(),
            want["tokenizer.ggml.bos_token_id"].as_u64(),
            "{name}"
        );
        assert_eq!(
            meta.eos_token_id(),
            want["tokenizer.ggml.eos_token_id"].as_u64(),
            "{name}"
        );
        let template = meta.chat_template().unwrap();
        assert_eq!(
            template.chars().count() as u64,
            want["chat_template_len_chars"].as_u64().unwrap(),
            "{name}"
        );
        let summary = meta.summary(64);
        assert_eq!(
            summary["array_lengths"]["tokenizer.ggml.tokens"], want["vocab_size"],
            "{name}"
        );
        assert_eq!(
            summary["metadata"]["general.name"], want["general.name"],
            "{name}"
        );
    }
}

#[test]
fn embedded_vocabularies_encode_and_decode_like_transformers() {
    let all = expected();
    for (name, fixture) in all["fixtures"].as_object().unwrap() {
        let tok = tokenizer_from_file(&fixtures().join(name)).unwrap();
        assert_eq!(
            tok.vocab_size() as u64,
            fixture["metadata"]["vocab_size"].as_u64().unwrap(),
            "{name}"
        );
        for case in fixture["cases"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let label = format!("{name} / {}", case["name"].as_str().unwrap());
            assert_eq!(
                tok.encode(text, true).unwrap(),
                ids(&case["ids_with_special"]),
                "{label}: with special tokens"
            );
            let plain = ids(&case["ids_no_special"]);
            assert_eq!(
                tok.encode(text, false).unwrap(),
                plain,
                "{label}: without special tokens"
            );
            let with = ids(&case["ids_with_special"]);
            assert_eq!(
                tok.decode(&with, false).unwrap(),
                case["decode_with_special"].as_str().unwrap(),
                "{label}: decode"
            );
            assert_eq!(
                tok.decode(&with, true).unwrap(),
                case["decode_with_special_skip"].as_str().unwrap(),
                "{label}: decode skipping specials"
            );
            assert_eq!(
                tok.decode(&plain, false).unwrap(),
                case["decode_no_special"].as_str().unwrap(),
                "{label}: decode plain"
            );
        }
    }
}

#[test]
fn the_hugging_face_files_describe_the_same_model() {
    let all = expected();
    for (name, fixture) in all["fixtures"].as_object().unwrap() {
        let path = fixtures().join(name);
        let meta = read_metadata(&path).unwrap();
        let files = hf_files_from_file(&path).unwrap();
        let want = &fixture["metadata"];
        let arch = meta.architecture().unwrap();

        // tokenizer.json encodes every case as transformers does with the GGUF itself.
        let tok = Tokenizer::from_bytes(files.tokenizer_json.as_bytes()).unwrap();
        for case in fixture["cases"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            assert_eq!(
                tok.encode(text, true).unwrap(),
                ids(&case["ids_with_special"]),
                "{name}: {text:?}"
            );
        }

        let config: Value = serde_json::from_str(&files.config_json).unwrap();
        assert_eq!(config["model_type"], arch, "{name}");
        assert!(
            config["architectures"][0]
                .as_str()
                .unwrap()
                .ends_with("ForCausalLM"),
            "{name}"
        );
        assert_eq!(config["vocab_size"], want["vocab_size"], "{name}");
        assert_eq!(
            config["max_position_embeddings"],
            want[format!("{arch}.context_length")],
            "{name}"
        );
        assert_eq!(
            config["bos_token_id"].as_u64(),
            meta.bos_token_id(),
            "{name}"
        );
        assert_eq!(
            config["eos_token_id"].as_u64(),
            meta.eos_token_id(),
            "{name}"
        );

        let tokenizer_config: Value = serde_json::from_str(&files.tokenizer_config_json).unwrap();
        assert_eq!(
            tokenizer_config["chat_template"].as_str(),
            meta.chat_template(),
            "{name}"
        );
        let token = |id: Option<u64>| tok.decode(&[id.unwrap() as u32], false).unwrap();
        assert_eq!(
            tokenizer_config["eos_token"].as_str().unwrap(),
            token(meta.eos_token_id()),
            "{name}"
        );
        assert_eq!(
            tokenizer_config["bos_token"].as_str().unwrap(),
            token(meta.bos_token_id()),
            "{name}"
        );
    }
}

fn corrupt(name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(fixtures().join("qwen3-tiny.gguf")).unwrap();
    edit(&mut bytes);
    let path = std::env::temp_dir().join(format!("llm-core-{}-{name}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn error_of(path: &Path) -> String {
    let err = read_metadata(path).unwrap_err().to_string();
    std::fs::remove_file(path).unwrap();
    err
}

#[test]
fn a_bad_magic_is_named() {
    let err = error_of(&corrupt("magic", |b| b[..4].copy_from_slice(b"GGUX")));
    assert!(
        err.contains("bad magic \"GGUX\" (expected \"GGUF\")"),
        "{err}"
    );
    assert!(err.contains("llm-core-"), "names the file: {err}");
}

#[test]
fn truncated_metadata_is_named() {
    // Cut inside the vocabulary array.
    let err = error_of(&corrupt("truncated", |b| b.truncate(20_000)));
    assert!(err.contains("tokenizer.ggml.tokens"), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn an_absurd_count_is_refused_before_allocating() {
    // The metadata count (bytes 16..24) claims 2^60 entries.
    let err = error_of(&corrupt("count", |b| {
        b[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes())
    }));
    assert!(
        err.contains("metadata count 1152921504606846976 does not fit"),
        "{err}"
    );
}

#[test]
fn an_unsupported_version_and_a_short_file_are_named() {
    let err = error_of(&corrupt("version", |b| {
        b[4..8].copy_from_slice(&7u32.to_le_bytes())
    }));
    assert!(err.contains("unsupported version 7"), "{err}");
    let err = error_of(&corrupt("short", |b| b.truncate(3)));
    assert!(err.contains("too short for a header"), "{err}");
}

#[test]
fn a_missing_file_is_named() {
    let err = read_metadata(Path::new("/nonexistent/model.gguf"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cannot read /nonexistent/model.gguf"),
        "{err}"
    );
}
