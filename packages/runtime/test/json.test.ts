import { describe, expect, it } from 'vitest';
import { hexId, parseHexId, parseJson, stringifyJson } from '../src/json.js';

describe('bigint-safe JSON', () => {
  it('round-trips an instance id above 2^53 exactly', () => {
    const text = '{"type":"Endpoint","instance_id":7587890531256969735,"transport":{"tcp":"h:1/694d9a3c5e1f2a07/generate"}}';
    const value = parseJson(text) as { instance_id: bigint };
    expect(value.instance_id).toBe(7587890531256969735n);
    expect(stringifyJson(value)).toBe(text);
  });

  it('keeps safe integers as numbers and leaves digits inside strings alone', () => {
    expect(parseJson('{"a":12,"b":"12345678901234567890","c":[1,18446744073709551615]}')).toEqual({
      a: 12,
      b: '12345678901234567890',
      c: [1, 18446744073709551615n],
    });
  });

  it('handles strings with escaped quotes before a big number', () => {
    expect(parseJson('{"s":"a\\"b","id": 9007199254740993}')).toEqual({ s: 'a"b', id: 9007199254740993n });
  });

  it('writes hex ids the way Dynamo keys them', () => {
    expect(hexId(7587890531256969735n)).toBe('694d9a3c5e1f2a07');
    expect(parseHexId('694d9a3c5e1f2a07')).toBe(7587890531256969735n);
    expect(() => parseHexId('0x12')).toThrow(/not a u64 hex id/);
  });
});
