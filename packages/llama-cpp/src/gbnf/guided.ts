import { InvalidArgument } from '@dynamo/backend';

import { jsonSchemaToGbnf } from './json-schema.js';
import { regexToGbnf } from './regex.js';
import { literal } from './text.js';

/**
 * The GBNF grammar for a request's `sampling_options.guided_decoding` (as Dynamo fills it: one of
 * `json`, `regex`, `choice` or `grammar`, which is GBNF already), or undefined when there is none.
 * Throws `InvalidArgument` naming what cannot be turned into a llama.cpp grammar.
 */
export function guidedGrammar(guided: unknown): string | undefined {
  if (guided === undefined || guided === null) return undefined;
  if (typeof guided !== 'object' || Array.isArray(guided))
    throw new InvalidArgument(`sampling_options.guided_decoding: expected an object, got ${JSON.stringify(guided)}`);
  const g = guided as Record<string, unknown>;
  const set = ['json', 'regex', 'choice', 'grammar', 'structural_tag'].filter((k) => g[k] !== undefined && g[k] !== null);
  if (set.length === 0) return undefined;
  if (set.length > 1) throw new InvalidArgument(`sampling_options.guided_decoding: only one constraint may be set; got ${set.join(', ')}`);
  const kind = set[0]!;
  const value = g[kind];
  switch (kind) {
    case 'json':
      return jsonSchemaToGbnf(typeof value === 'string' ? parseSchema(value) : value);
    case 'regex':
      if (typeof value !== 'string') throw new InvalidArgument('sampling_options.guided_decoding.regex: expected a string');
      return `root ::= ${regexToGbnf(value)}`;
    case 'choice':
      if (!Array.isArray(value) || value.length === 0 || !value.every((c) => typeof c === 'string')) {
        throw new InvalidArgument('sampling_options.guided_decoding.choice: expected a non-empty array of strings');
      }
      return `root ::= ${value.map((c) => literal(c)).join(' | ')}`;
    case 'grammar':
      if (typeof value !== 'string') throw new InvalidArgument('sampling_options.guided_decoding.grammar: expected a GBNF grammar as a string');
      return value;
    default:
      throw new InvalidArgument(
        'sampling_options.guided_decoding.structural_tag is not supported by the llama.cpp engine: turn structural tags off in the model card, or use a json schema',
      );
  }
}

function parseSchema(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new InvalidArgument(`sampling_options.guided_decoding.json: not a JSON schema: ${(err as Error).message}`);
  }
}
