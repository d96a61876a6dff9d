import { InvalidArgument } from '@dynamo/runtime';

/**
 * An embedding vector as Dynamo's wire and OpenAI's `encoding_format: "base64"` carry it: the
 * vector's float32 values, little-endian, in standard base64 with padding.
 */
export function embeddingToBase64(vector: ArrayLike<number>): string {
  const floats = vector instanceof Float32Array ? vector : Float32Array.from(vector);
  const bytes = Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);
  // Float32Array is host-endian; the wire is little-endian.
  if (BIG_ENDIAN) for (let i = 0; i < bytes.length; i += 4) bytes.subarray(i, i + 4).reverse();
  return bytes.toString('base64');
}

/** The float32 values of a base64 embedding; `what` names it in the error for a malformed one. */
export function embeddingFromBase64(text: string, what = 'embedding'): Float32Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw new InvalidArgument(`${what} is not standard base64`);
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length % 4 !== 0) throw new InvalidArgument(`${what}: base64-decoded byte length ${bytes.length} is not a multiple of 4`);
  const out = new Float32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/**
 * The shortest decimal that reads back as the same float32 (stock writes float embeddings so:
 * `0.1`, not `0.10000000149011612`); non-finite values, which JSON cannot hold, become null.
 */
export function float32Json(value: number): number | null {
  if (!Number.isFinite(value)) return null;
  for (let digits = 1; digits < 9; digits++) {
    const short = Number(value.toPrecision(digits));
    if (Math.fround(short) === value) return short;
  }
  return Number(value.toPrecision(9));
}

const BIG_ENDIAN = new Uint8Array(Uint16Array.of(1).buffer)[0] === 0;
