import { InvalidArgument } from '@dynamo/backend';

import { regexToGbnf } from './regex.js';
import { charClass, literal, repeat } from './text.js';

/**
 * A GBNF grammar whose sentences are JSON texts valid against `schema`. It covers the JSON Schema
 * that structured outputs use: `type` (one or several), `properties` / `required` /
 * `additionalProperties`, `items` / `minItems` / `maxItems`, `enum`, `const`, `anyOf` / `oneOf`,
 * `allOf` of object schemas, `$ref` into `$defs` / `definitions`, and for strings `minLength`,
 * `maxLength` and `pattern`. Keywords it cannot enforce (`minimum`, `format`, ...) are left to the
 * model. Where the schema allows more than the grammar, the grammar picks the stricter reading: an
 * object with `properties` gets no others unless `additionalProperties` says so, and required
 * properties come first, in the order given.
 */
export function jsonSchemaToGbnf(schema: unknown): string {
  const grammar = new JsonGrammar(schema);
  grammar.rules.set('root', grammar.value(schema, 'root'));
  return [...grammar.rules].map(([name, body]) => `${name} ::= ${body}`).join('\n');
}

type Schema = Record<string, unknown>;

/** Whitespace between tokens, bounded so a sampler cannot wander in it for the whole budget. */
const WS = '( " " | "\\n" " "{0,8} )?';
const PRIMITIVES: Record<string, string> = {
  ws: WS,
  string: `"\\"" char* "\\""`,
  char: `${charClass(
    [
      [0x00, 0x1f],
      [0x22, 0x22],
      [0x5c, 0x5c],
    ],
    true,
  )} | "\\\\" ( ${charClass([
    [0x22, 0x22],
    [0x5c, 0x5c],
    [0x2f, 0x2f],
    [0x62, 0x62],
    [0x66, 0x66],
    [0x6e, 0x6e],
    [0x72, 0x72],
    [0x74, 0x74],
  ])} | "u" [0-9a-fA-F]{4} )`,
  integer: '"-"? ( [0-9] | [1-9] [0-9]{1,15} )',
  number: '"-"? ( [0-9] | [1-9] [0-9]{1,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?',
  boolean: '"true" | "false"',
  null: '"null"',
  value: 'object | array | string | number | boolean | null',
  object: `"{" ws ( string ws ":" ws value ( "," ws string ws ":" ws value )* )? ws "}"`,
  array: `"[" ws ( value ( "," ws value )* )? ws "]"`,
};
const PRIMITIVE_DEPS: Record<string, string[]> = {
  string: ['char'],
  value: ['object', 'array', 'string', 'number', 'boolean', 'null'],
  object: ['ws', 'string', 'value'],
  array: ['ws', 'value'],
};

class JsonGrammar {
  readonly rules = new Map<string, string>();
  readonly #defining = new Set<string>();

  constructor(readonly root: unknown) {}

  /** The name of a shared primitive rule, added (with what it uses) on first use. */
  primitive(name: string): string {
    if (!this.rules.has(name)) {
      this.rules.set(name, PRIMITIVES[name]!);
      for (const dep of PRIMITIVE_DEPS[name] ?? []) this.primitive(dep);
    }
    return name;
  }

  /** A rule `name ::= body` under a fresh name, returned. */
  rule(hint: string, body: string): string {
    const base = ruleName(hint);
    let name = base;
    for (let n = 2; this.rules.has(name) || name in PRIMITIVES; n++) name = `${base}-${n}`;
    this.rules.set(name, body);
    return name;
  }

  /** A GBNF expression for a value valid against `schema`. */
  value(schema: unknown, at: string): string {
    if (schema === true || (isObject(schema) && Object.keys(schema).every((k) => !VALUE_KEYWORDS.has(k)))) return this.primitive('value');
    if (schema === false) throw new InvalidArgument(`json schema at ${at}: false admits no value`);
    if (!isObject(schema)) throw new InvalidArgument(`json schema at ${at}: expected an object or a boolean, got ${JSON.stringify(schema)}`);
    if (typeof schema.$ref === 'string') return this.ref(schema.$ref, at);
    if ('const' in schema) return literal(JSON.stringify(schema.const));
    if (Array.isArray(schema.enum)) {
      if (schema.enum.length === 0) throw new InvalidArgument(`json schema at ${at}: enum is empty`);
      return `( ${schema.enum.map((v) => literal(JSON.stringify(v))).join(' | ')} )`;
    }
    const alternatives = schema.anyOf ?? schema.oneOf;
    if (Array.isArray(alternatives)) {
      if (alternatives.length === 0) throw new InvalidArgument(`json schema at ${at}: anyOf/oneOf is empty`);
      return `( ${alternatives.map((s, i) => this.value(s, `${at}/anyOf/${i}`)).join(' | ')} )`;
    }
    if (Array.isArray(schema.allOf)) return this.value(mergeAllOf(schema, at), at);
    const types = Array.isArray(schema.type) ? schema.type : schema.type === undefined ? [inferType(schema)] : [schema.type];
    return types.length === 1 ? this.typed(schema, String(types[0]), at) : `( ${types.map((t) => this.typed(schema, String(t), at)).join(' | ')} )`;
  }

  typed(schema: Schema, type: string, at: string): string {
    switch (type) {
      case 'string':
        return this.string(schema, at);
      case 'integer':
      case 'number':
      case 'boolean':
      case 'null':
        return this.primitive(type);
      case 'array':
        return this.array(schema, at);
      case 'object':
        return this.object(schema, at);
      case 'any':
        return this.primitive('value');
      default:
        throw new InvalidArgument(`json schema at ${at}: unknown type ${JSON.stringify(type)}`);
    }
  }

  string(schema: Schema, at: string): string {
    if (typeof schema.pattern === 'string') {
      const body = regexToGbnf(schema.pattern, { jsonString: true });
      return this.rule(`${at}-string`, `"\\"" ( ${body} ) "\\""`);
    }
    const min = nonNegative(schema.minLength, 0, `${at}/minLength`);
    const max = schema.maxLength === undefined ? undefined : nonNegative(schema.maxLength, 0, `${at}/maxLength`);
    if (min === 0 && max === undefined) return this.primitive('string');
    this.primitive('string');
    return this.rule(`${at}-string`, `"\\"" char${repeat(min, max)} "\\""`);
  }

  array(schema: Schema, at: string): string {
    this.primitive('ws');
    const item = this.value(schema.items ?? true, `${at}/items`);
    const min = nonNegative(schema.minItems, 0, `${at}/minItems`);
    const max = schema.maxItems === undefined ? undefined : nonNegative(schema.maxItems, 0, `${at}/maxItems`);
    if (max !== undefined && max < min) throw new InvalidArgument(`json schema at ${at}: maxItems ${max} is below minItems ${min}`);
    if (max === 0) return literal('[]');
    const more = `( "," ws ${item} )${repeat(Math.max(0, min - 1), max === undefined ? undefined : max - 1)}`;
    const items = `${item} ${more}`;
    return this.rule(`${at}-array`, `"[" ws ${min === 0 ? `( ${items} )?` : items} ws "]"`);
  }

  object(schema: Schema, at: string): string {
    this.primitive('ws');
    const properties = isObject(schema.properties) ? schema.properties : {};
    const names = Object.keys(properties);
    const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : []);
    for (const name of required) {
      if (!(name in properties)) throw new InvalidArgument(`json schema at ${at}: required property ${JSON.stringify(name)} has no schema in properties`);
    }
    const pair = (name: string) => `${literal(JSON.stringify(name))} ws ":" ws ${this.value(properties[name], `${at}/properties/${name}`)}`;
    const extra = schema.additionalProperties;
    // Other properties only where the schema asks for them, or declares none at all.
    const extras = extra === true || isObject(extra) || (names.length === 0 && extra !== false);
    const extraPair = extras ? `${this.primitive('string')} ws ":" ws ${this.value(isObject(extra) ? extra : true, `${at}/additionalProperties`)}` : undefined;
    const mandatory = names.filter((n) => required.has(n)).map(pair);
    const optional = names.filter((n) => !required.has(n)).map(pair);
    if (extraPair) optional.push(`${extraPair} ( "," ws ${extraPair} )*`);
    let members: string;
    if (mandatory.length > 0) {
      members = [mandatory.join(' "," ws '), ...optional.map((o) => `( "," ws ${o} )?`)].join(' ');
    } else if (optional.length > 0) {
      // No property has to come first: whichever optional one opens, the later ones may follow.
      const from = (i: number) => [optional[i]!, ...optional.slice(i + 1).map((o) => `( "," ws ${o} )?`)].join(' ');
      members = `( ${optional.map((_, i) => from(i)).join(' | ')} )?`;
    } else {
      members = '';
    }
    return this.rule(`${at}-object`, `"{" ws ${members} ws "}"`.replace(/ {2,}/g, ' '));
  }

  ref(ref: string, at: string): string {
    const match = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
    const defs = match && isObject(this.root) ? (this.root[match[1]!] as unknown) : undefined;
    const target = match && isObject(defs) ? defs[decodeURIComponent(match[2]!).replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
    if (target === undefined) throw new InvalidArgument(`json schema at ${at}: $ref ${JSON.stringify(ref)} does not name an entry of $defs or definitions`);
    const name = ruleName(`ref-${match![2]!}`);
    // A recursive schema refers to its rule by name while the rule is being written.
    if (!this.rules.has(name) && !this.#defining.has(name)) {
      this.#defining.add(name);
      const body = this.value(target, ref);
      this.#defining.delete(name);
      this.rules.set(name, body);
    }
    return name;
  }
}

/** Keywords that constrain a value; a schema with none of them admits any JSON value. */
const VALUE_KEYWORDS = new Set([
  'type',
  'properties',
  'items',
  'enum',
  'const',
  'anyOf',
  'oneOf',
  'allOf',
  '$ref',
  'pattern',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'required',
  'additionalProperties',
]);

/** A GBNF rule name (letters, digits, dashes) from a schema path. */
function ruleName(hint: string): string {
  return hint.replace(/[^A-Za-z0-9-]+/g, '-').replace(/^-+|-+$/g, '') || 'r';
}

function isObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function inferType(schema: Schema): string {
  if ('properties' in schema || 'additionalProperties' in schema || 'required' in schema) return 'object';
  if ('items' in schema || 'minItems' in schema || 'maxItems' in schema) return 'array';
  if ('pattern' in schema || 'minLength' in schema || 'maxLength' in schema) return 'string';
  return 'any';
}

function nonNegative(value: unknown, fallback: number, at: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    throw new InvalidArgument(`json schema at ${at}: expected a non-negative integer, got ${JSON.stringify(value)}`);
  return value;
}

/** `allOf` of object schemas as one: properties and required lists united. */
function mergeAllOf(schema: Schema, at: string): Schema {
  const { allOf, ...rest } = schema;
  const merged: Schema = {
    ...rest,
    type: 'object',
    properties: { ...(isObject(rest.properties) ? rest.properties : {}) },
    required: [...(Array.isArray(rest.required) ? rest.required : [])],
  };
  for (const [i, part] of (allOf as unknown[]).entries()) {
    if (!isObject(part) || (part.type !== undefined && part.type !== 'object') || part.$ref !== undefined) {
      throw new InvalidArgument(`json schema at ${at}/allOf/${i}: only object schemas can be combined with allOf`);
    }
    Object.assign(merged.properties as Schema, isObject(part.properties) ? part.properties : {});
    (merged.required as unknown[]).push(...(Array.isArray(part.required) ? part.required : []));
    if (part.additionalProperties !== undefined) merged.additionalProperties = part.additionalProperties;
  }
  return merged;
}
