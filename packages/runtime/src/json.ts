/**
 * JSON with lossless u64 ids. Dynamo writes instance and lease ids as bare JSON integers that are
 * usually above 2^53; `JSON.parse` would round them. These helpers read integers too large for a
 * double as `bigint` and write `bigint` values as bare integers, so records round-trip exactly.
 * Values that fit in a double stay numbers, so ordinary payloads parse as usual.
 */

// An integer literal of 16+ digits in value position (after ':' or '[' or ','), outside strings.
// Strings are matched first and skipped so digits inside them are never touched.
const bigIntLiteral = /"(?:[^"\\]|\\.)*"|([:[,]\s*)(-?\d{16,})(?=\s*[,}\]])/g;
const marker = '\u0000bigint:';

/** Parses JSON, returning integers beyond `Number.MAX_SAFE_INTEGER` as `bigint`. */
export function parseJson(text: string): unknown {
  // Only a run of 16+ digits can be an unsafe integer: skip the scan when there is none.
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  let sawBig = false;
  const quoted = text.replace(bigIntLiteral, (match, prefix: string | undefined, digits: string | undefined) => {
    if (digits === undefined) return match;
    if (Number.isSafeInteger(Number(digits))) return match;
    sawBig = true;
    return `${prefix}"\\u0000bigint:${digits}"`;
  });
  if (!sawBig) return JSON.parse(text);
  return JSON.parse(quoted, (_key, value: unknown) => (typeof value === 'string' && value.startsWith(marker) ? BigInt(value.slice(marker.length)) : value));
}

/** Serializes to JSON, writing `bigint` values as bare integers. */
export function stringifyJson(value: unknown): string {
  // Fast path: no replacer. JSON.stringify throws a TypeError only for a bigint (or a cycle).
  try {
    const plain = JSON.stringify(value);
    if (plain !== undefined) return plain;
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
  }
  let sawBig = false;
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'bigint') return v;
    sawBig = true;
    return `${marker}${v.toString()}`;
  });
  if (text === undefined) throw new TypeError('value is not JSON-serializable');
  return sawBig ? text.replace(/"\\u0000bigint:(-?\d+)"/g, '$1') : text;
}

/** A u64 id as Dynamo writes it in keys and subjects: lowercase hex, no prefix, no padding. */
export function hexId(id: bigint): string {
  return id.toString(16);
}

/** Reads a `hexId` back. */
export function parseHexId(hex: string): bigint {
  if (!/^[0-9a-f]{1,16}$/.test(hex)) throw new RangeError(`not a u64 hex id: '${hex}'`);
  return BigInt(`0x${hex}`);
}
