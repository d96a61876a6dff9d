/**
 * GBNF spelling of literals and character ranges. Everything outside printable ASCII letters,
 * digits and a few safe symbols is written as an escape, so no input can break the grammar's syntax.
 */

const SAFE_IN_LITERAL = /[A-Za-z0-9 !#$%&'()*+,./:;<=>?@^_`{|}~[\]-]/;
const SAFE_IN_CLASS = /[A-Za-z0-9]/;

/** A code point as a GBNF escape (`\x41`, `\u00e9`, `\U0001f600`). */
function escapeCodePoint(cp: number): string {
  if (cp <= 0xff) return `\\x${cp.toString(16).padStart(2, '0')}`;
  if (cp <= 0xffff) return `\\u${cp.toString(16).padStart(4, '0')}`;
  return `\\U${cp.toString(16).padStart(8, '0')}`;
}

/** `text` as a GBNF string literal. */
export function literal(text: string): string {
  let out = '"';
  for (const ch of text) out += SAFE_IN_LITERAL.test(ch) ? ch : escapeCodePoint(ch.codePointAt(0)!);
  return `${out}"`;
}

/** One code point, or an inclusive range of them. */
export type CharRange = readonly [number, number];

/** A GBNF character class of `ranges` (or, `negated`, of everything else). */
export function charClass(ranges: readonly CharRange[], negated = false): string {
  const one = (cp: number) => {
    const ch = String.fromCodePoint(cp);
    return SAFE_IN_CLASS.test(ch) ? ch : escapeCodePoint(cp);
  };
  const body = ranges.map(([lo, hi]) => (lo === hi ? one(lo) : `${one(lo)}-${one(hi)}`)).join('');
  return `[${negated ? '^' : ''}${body}]`;
}

/** A repetition suffix for `min`..`max` occurrences (`max` undefined: unbounded). */
export function repeat(min: number, max: number | undefined): string {
  if (min === 0 && max === undefined) return '*';
  if (min === 1 && max === undefined) return '+';
  if (min === 0 && max === 1) return '?';
  if (max === undefined) return `{${min},}`;
  return min === max ? `{${min}}` : `{${min},${max}}`;
}
