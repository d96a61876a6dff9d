import { blake3HexDigest } from '@dynamo/core';

import type { ModelDeploymentCard } from './schema.js';

/** mdcsum's byte for each worker type. */
const WORKER_TYPE_CODE: Record<string, number> = { '': 0, prefill: 1, decode: 2, encode: 3, aggregated: 4 };

/**
 * The card's checksum (`mdcsum`): BLAKE3 over what makes two workers interchangeable (name,
 * source, file checksums, context length, block size, worker type, needs), byte for byte as
 * stock Dynamo 1.6.1 computes it for aggregated workers. Frontends group workers of a model by
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
  parts.push(Uint8Array.of(WORKER_TYPE_CODE[card.worker_type] ?? 0));
  u32(card.needs.length);
  for (const alternative of card.needs) {
    const names = Buffer.from(alternative.join(','), 'utf8');
    u32(names.length);
    parts.push(names);
  }
  return blake3HexDigest(Buffer.concat(parts));
}
