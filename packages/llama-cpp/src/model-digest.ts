import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';

/** Samples of the weights read besides the header: enough to tell fine-tunes of one architecture apart. */
const SAMPLES = 16;
const SAMPLE_BYTES = 4096;

/**
 * A digest of a GGUF file for telling whether two workers run the same model: sha256 over its size,
 * its header (metadata and tensor layout, up to `headerBytes`) and 16 evenly spread 4 KiB samples of
 * the weights. A KV state loads only into the model that made it (llama.cpp's state file does not
 * say which that was), and hashing a multi-GB file whole would add seconds to every start.
 */
export async function modelDigest(file: string, headerBytes: number): Promise<string> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const hash = createHash('sha256').update(`${size}\n`);
    const read = async (position: number, length: number) => {
      const buffer = Buffer.alloc(Math.max(0, Math.min(length, size - position)));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      hash.update(buffer.subarray(0, bytesRead));
    };
    await read(0, headerBytes);
    const weights = size - headerBytes;
    for (let i = 0; i < SAMPLES && weights > 0; i++) await read(headerBytes + Math.floor((weights * i) / SAMPLES), SAMPLE_BYTES);
    return hash.digest('hex');
  } finally {
    await handle.close();
  }
}
