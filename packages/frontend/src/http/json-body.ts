import { isUtf8 } from 'node:buffer';
import { parseJson } from '@dynamo/runtime/internal';

import { HttpError } from './errors.js';

/**
 * How deep a request body's arrays and objects may nest. Deeper values would overflow the stack
 * wherever they are walked recursively (validation, templating); below stock's serde_json limit
 * (128), as the request crosses into Rust inside an envelope that adds levels of its own.
 */
export const MAX_JSON_DEPTH = 100;

const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Whether the arrays and objects in a JSON text nest deeper than `max` (bytes in strings do not count). */
function nestsDeeper(body: Buffer, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i]!;
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) inString = true;
    else if (byte === OPEN_BRACKET || byte === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (byte === CLOSE_BRACKET || byte === CLOSE_BRACE) depth--;
  }
  return false;
}

/** A request's JSON body, parsed; an `HttpError` (400) naming what is wrong with it otherwise. */
export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw new HttpError(400, 'request body is empty; expected a JSON object');
  if (!isUtf8(body)) throw new HttpError(400, 'request body is not valid UTF-8');
  if (nestsDeeper(body, MAX_JSON_DEPTH)) throw new HttpError(400, `request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
  try {
    return parseJson(body.toString('utf8'));
  } catch (err) {
    throw new HttpError(400, `Failed to parse the JSON body: ${(err as Error).message}`);
  }
}
