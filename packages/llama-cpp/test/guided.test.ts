// guided_decoding on a real model: each constraint becomes a llama.cpp grammar, and what SmolLM2
// samples under it (at a temperature where it wanders) is held to the regex or validates against
// the schema.
import { Context, type GenerateChunk } from '@dynamo/backend';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { smolLm2 } from '../../../scripts/test-model.mjs';
import { LlamaCppEngine } from '../src/index.js';

const modelPath = await smolLm2();

async function collect(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const chunks: GenerateChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

const tokensOf = (chunks: GenerateChunk[]) => chunks.flatMap((c) => c.token_ids ?? []);

/** Schemas as structured-output users write them, each a feature of the converter. */
const SCHEMAS: Record<string, object> = {
  'an object of required and optional properties': {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 30 }, age: { type: 'integer' }, city: { type: 'string', maxLength: 20 } },
    required: ['name', 'age'],
    additionalProperties: false,
  },
  'any JSON object (json_object mode)': { type: 'object' },
  'an array with bounds and an enum': { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 2, maxItems: 4 },
  'nested objects and arrays': {
    type: 'object',
    properties: {
      user: {
        type: 'object',
        properties: { id: { type: 'integer' }, tags: { type: 'array', items: { type: 'string', maxLength: 10 }, maxItems: 3 } },
        required: ['id', 'tags'],
      },
    },
    required: ['user'],
  },
  'anyOf and type lists': {
    type: 'object',
    properties: { value: { anyOf: [{ type: 'number' }, { type: 'boolean' }] }, note: { type: ['string', 'null'], maxLength: 20 } },
    required: ['value', 'note'],
  },
  '$ref into $defs': {
    $defs: { point: { type: 'object', properties: { x: { type: 'integer' }, y: { type: 'integer' } }, required: ['x', 'y'] } },
    type: 'object',
    properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
    required: ['from', 'to'],
  },
  'a string pattern and a const': {
    type: 'object',
    properties: { code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' }, kind: { const: 'ticket' } },
    required: ['code', 'kind'],
  },
  'allOf of two object schemas': {
    allOf: [
      { type: 'object', properties: { a: { type: 'boolean' } }, required: ['a'] },
      { properties: { b: { type: 'null' } }, required: ['b'] },
    ],
  },
};

/** Patterns as guided_regex users write them (Python syntax where it differs). */
// Bounded, so that a wandering sample still reaches the end of the pattern within max_tokens.
const PATTERNS = [
  '\\(\\d{3}\\) \\d{3}-\\d{4}',
  '(?P<year>\\d{4})-(0[1-9]|1[0-2])',
  '[A-Za-z]{1,10}@[a-z]{1,8}\\.(com|org)',
  '^(yes|no)$',
  '[^\\s]{3,6}',
  '\\w{1,8}( \\w{1,8}){2}\\.',
  'x{0,4}y?z{1,4}',
];

describe('guided decoding on SmolLM2-135M', () => {
  const engine = new LlamaCppEngine({ modelPath, parallel: 4, contextSize: 1024 });
  let pre: Preprocessor;
  const ask = async (content: string) =>
    (
      await pre.preprocessChat({
        model: 'x',
        messages: [
          { role: 'system', content: 'You are a helpful assistant.' },
          { role: 'user', content },
        ],
      })
    ).request.token_ids;
  const textOf = (chunks: GenerateChunk[]) => pre.tokenizer.decode(Uint32Array.from(tokensOf(chunks)), true);

  beforeAll(async () => {
    await engine.start(1n);
    const model = await LocalModel.load(modelPath);
    pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
  }, 120_000);
  afterAll(() => engine.cleanup());

  it.each(Object.entries(SCHEMAS))(
    'a JSON schema: %s, sampled at temperature 1, validates',
    async (_name, schema) => {
      const validate = new Ajv().compile(schema);
      const prompt = await ask('Answer in JSON.');
      const runs = await Promise.all(
        [1, 2].map((seed) =>
          collect(
            engine.generate(
              { token_ids: prompt, sampling_options: { temperature: 1, seed, guided_decoding: { json: schema } }, stop_conditions: { max_tokens: 300 } },
              new Context(),
            ),
          ),
        ),
      );
      for (const chunks of runs) {
        expect(chunks.at(-1)!.finish_reason, textOf(chunks)).toBe('eos');
        const value: unknown = JSON.parse(textOf(chunks));
        expect(validate(value), `${textOf(chunks)}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    },
    120_000,
  );

  it.each(PATTERNS)(
    'a regex: %s, sampled at temperature 1, matches in full',
    async (pattern) => {
      const js = new RegExp(`^(?:${pattern.replaceAll('(?P<', '(?<').replace(/^\^|\$$/g, '')})$`);
      const prompt = await ask('Say something.');
      const runs = await Promise.all(
        [1, 2].map((seed) =>
          collect(
            engine.generate(
              { token_ids: prompt, sampling_options: { temperature: 1, seed, guided_decoding: { regex: pattern } }, stop_conditions: { max_tokens: 60 } },
              new Context(),
            ),
          ),
        ),
      );
      for (const chunks of runs) {
        expect(chunks.at(-1)!.finish_reason, textOf(chunks)).toBe('eos');
        expect(textOf(chunks)).toMatch(js);
      }
    },
    60_000,
  );

  it('picks one of the choices', async () => {
    const chunks = await collect(
      engine.generate(
        {
          token_ids: await ask('Is the sea wet?'),
          sampling_options: { temperature: 1, seed: 1, guided_decoding: { choice: ['yes', 'no', 'maybe not'] } },
          stop_conditions: { max_tokens: 10 },
        },
        new Context(),
      ),
    );
    expect(['yes', 'no', 'maybe not']).toContain(textOf(chunks));
  });

  it('takes GBNF as it is, and refuses what llama.cpp cannot follow, naming why, before taking a sequence', async () => {
    const ids = await ask('Count.');
    const counted = await collect(
      engine.generate(
        { token_ids: ids, sampling_options: { temperature: 1, seed: 2, guided_decoding: { grammar: 'root ::= [1-9] ( "," [0-9] ){2}' } } },
        new Context(),
      ),
    );
    expect(textOf(counted)).toMatch(/^[1-9](,[0-9]){2}$/);
    // A recursive schema is a grammar too (how deep the model goes is up to it and max_tokens).
    const tree = {
      $defs: { node: { type: 'object', properties: { children: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['children'] } },
      $ref: '#/$defs/node',
    };
    const nested = await collect(
      engine.generate(
        { token_ids: ids, sampling_options: { temperature: 0, guided_decoding: { json: tree } }, stop_conditions: { max_tokens: 40 } },
        new Context(),
      ),
    );
    expect(textOf(nested)).toMatch(/^\{\s*"children"\s*:\s*\[/);
    const refused = (guided: object) => collect(engine.generate({ token_ids: ids, sampling_options: { guided_decoding: guided } }, new Context()));
    await expect(refused({ regex: '(a)\\1' })).rejects.toThrow('guided regex "(a)\\\\1": a back reference cannot be expressed as a llama.cpp grammar');
    await expect(refused({ regex: 'a(?=b)' })).rejects.toThrow(/lookahead cannot be expressed/);
    await expect(refused({ grammar: 'root ::= (' })).rejects.toThrow(/guided_decoding: llama.cpp cannot use the grammar \(.*\): root ::= \(/);
    await expect(refused({ json: { $ref: '#/$defs/nope' } })).rejects.toThrow(
      'json schema at root: $ref "#/$defs/nope" does not name an entry of $defs or definitions',
    );
    await expect(refused({ json: { type: 'array', minItems: 3, maxItems: 1 } })).rejects.toThrow('json schema at root: maxItems 1 is below minItems 3');
    await expect(refused({ json: '{not json' })).rejects.toThrow(/guided_decoding.json: not a JSON schema/);
    await expect(refused({ regex: 'a', choice: ['b'] })).rejects.toThrow('only one constraint may be set; got regex, choice');
    expect(engine.load()).toEqual({ queued: 0, active: 0 });
  });
});
