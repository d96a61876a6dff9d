import { z } from 'zod';
import { hexId, parseJson, stringifyJson } from '../json.js';

/** Bucket of endpoint instance records. */
export const INSTANCES_BUCKET = 'v1/instances';
/** Bucket of model deployment cards. */
export const MDC_BUCKET = 'v1/mdc';

const u64 = z.union([z.bigint(), z.number().int().nonnegative()]).transform((v) => BigInt(v));

/** Where an instance takes requests: `{tcp: "host:port/{id:x}/{endpoint}"}` or `{nats_tcp: subject}`. */
export const TransportSchema = z.union([z.strictObject({ tcp: z.string().min(1) }), z.strictObject({ nats_tcp: z.string().min(1) })]);

/** Dynamo's `{"type":"Endpoint", ...}` discovery record. Unknown fields are kept. */
export const EndpointRecordSchema = z.looseObject({
  type: z.literal('Endpoint'),
  namespace: z.string(),
  component: z.string(),
  endpoint: z.string(),
  instance_id: u64,
  transport: TransportSchema,
  request_plane_codec: z.enum(['json', 'msgpack']).optional(),
});

/** Dynamo's `{"type":"Model", ...}` record carrying a model deployment card. */
export const ModelRecordSchema = z.looseObject({
  type: z.literal('Model'),
  namespace: z.string(),
  component: z.string(),
  endpoint: z.string(),
  instance_id: u64,
  card_json: z.record(z.string(), z.unknown()),
  model_suffix: z.string().optional(),
});

/** An endpoint instance as discovered. */
export type EndpointRecord = z.output<typeof EndpointRecordSchema>;
/** A model card record as discovered. */
export type ModelRecord = z.output<typeof ModelRecordSchema>;

/** Key of an instance's record inside its bucket: `{ns}/{comp}/{ep}/{id:x}`. */
export function instanceKey(namespace: string, component: string, endpoint: string, instanceId: bigint): string {
  return `${namespace}/${component}/${endpoint}/${hexId(instanceId)}`;
}

/** Prefix of every instance key of one endpoint. */
export function endpointPrefix(namespace: string, component: string, endpoint: string): string {
  return `${namespace}/${component}/${endpoint}/`;
}

/** Encodes a record as the JSON text stored in discovery (ids as bare integers). */
export function encodeRecord(record: EndpointRecord | ModelRecord): string {
  return stringifyJson(record);
}

/** Decodes an endpoint record; throws naming what is wrong. */
export function decodeEndpointRecord(text: string): EndpointRecord {
  return decodeRecord(EndpointRecordSchema, 'endpoint', text);
}

/** Decodes a model record; throws naming what is wrong. */
export function decodeModelRecord(text: string): ModelRecord {
  return decodeRecord(ModelRecordSchema, 'model', text);
}

function decodeRecord<S extends z.ZodType>(schema: S, what: string, text: string): z.output<S> {
  const result = schema.safeParse(parseJson(text));
  if (!result.success) throw new TypeError(`invalid ${what} record: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return result.data;
}
