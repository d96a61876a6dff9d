//! File checksums as model deployment cards carry them: `blake3:` and the lowercase hex digest.

use std::io::Read;
use std::path::Path;

use crate::error::{LlmError, Result};

/// The `blake3:<hex>` checksum of a file's bytes, read in 1 MiB pieces.
pub fn file_checksum(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| LlmError::io(path, e))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| LlmError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("blake3:{}", hasher.finalize().to_hex()))
}

/// The lowercase hex BLAKE3 digest of `bytes`.
pub fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_a_file_is_blake3_of_its_bytes() {
        let dir = std::env::temp_dir().join(format!("llm-core-checksum-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.json");
        std::fs::write(&path, b"{}").unwrap();
        assert_eq!(
            file_checksum(&path).unwrap(),
            format!("blake3:{}", blake3_hex(b"{}"))
        );
        let missing = file_checksum(&dir.join("nope.json"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("nope.json"), "{missing}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
