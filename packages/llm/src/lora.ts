import { blake3 } from '@noble/hashes/blake3.js';

/**
 * The id stock Dynamo gives a LoRA adapter name (`dynamo.llm.lora_name_to_id`): the first eight
 * bytes of the name's BLAKE3 hash as a big-endian integer, kept to 31 bits, never 0. Engines that
 * number adapters (vLLM's `lora_int_id`) use it, so every worker agrees on an adapter's id.
 */
export function loraId(name: string): number {
  const hash = blake3(new TextEncoder().encode(name));
  const id = Number(new DataView(hash.buffer, hash.byteOffset, 8).getBigUint64(0) & 0x7fff_ffffn);
  return id === 0 ? 1 : id;
}
