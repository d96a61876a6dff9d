import { blake3HexDigest } from '@dynamo/core';

import type { ModelDeploymentCard } from './schema.js';

/**
 * The card's checksum (`mdcsum`): BLAKE3 over what makes two workers interchangeable (name,
 * source, file checksums, context length, block size). Frontends group workers of a model by
 * it and copy it into each request as `mdc_sum`.
 */
export function mdcsum(card: ModelDeploymentCard): string {
  const parts: Uint8Array[] = [];
  const text = (s: string) => parts.push(Buffer.from(s, 'utf8'));
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n >>> 0);
    parts.push(b);
  };
  text(card.display_name);
  if (card.source_path) text(card.source_path);
  for (const file of [
    card.model_info?.hf_config_json,
    card.tokenizer && Object.values(card.tokenizer)[0],
    card.prompt_formatter?.hf_tokenizer_config_json,
    card.chat_template_file && (Object.values(card.chat_template_file)[0] as { file?: { checksum: string } } | undefined)?.file,
    card.gen_config?.hf_generation_config_json,
  ]) {
    const checksum = (file as { checksum?: unknown } | undefined)?.checksum;
    if (typeof checksum === 'string') text(checksum);
  }
  u32(card.context_length);
  u32(card.kv_cache_block_size);
  return blake3HexDigest(Buffer.concat(parts));
}
