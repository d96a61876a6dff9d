import { embeddingFromBase64, EmbeddingRequestSchema, EmbeddingsOutputSchema, embeddingToBase64, float32Json } from '@dynamo/llm/internal';
import { Cancelled, parseOrThrow } from '@dynamo/runtime';
import type { FastifyReply, FastifyRequest } from 'fastify';

import { ClientRequest, type RouteDeps } from './client-request.js';
import { HttpError } from '../http/errors.js';

/** One embedding vector of the answer, as the worker sent it (base64 float32) or as floats. */
type Vector = string | Float32Array | number[];

/**
 * The handler of `/v1/embeddings`. A Tokens-input model's inputs are tokenized here and sent to
 * one worker in one request (stock's `PreprocessedEmbeddingRequest`), which answers base64
 * float32 vectors; a Text-input model's worker gets the body as it is and answers in OpenAI's
 * shape. The client gets floats, or base64 with `encoding_format: "base64"`.
 */
export function embeddingsHandler(deps: RouteDeps) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const request = ClientRequest.open('embeddings', req, reply, deps, { check: (fields) => parseOrThrow(EmbeddingRequestSchema, fields, 'request') });
    try {
      const base64 = request.fields.encoding_format === 'base64';
      const { vectors, usage } = request.model.input === 'Tokens' ? await tokensEmbeddings(request) : await textEmbeddings(request);
      const data = vectors.map((vector, index) => ({ index, object: 'embedding', embedding: encode(vector, base64) }));
      request.done(true);
      return { object: 'list', model: request.model.name, data, usage };
    } catch (err) {
      request.done(false);
      throw err;
    }
  };
}

function encode(vector: Vector, base64: boolean): string | Array<number | null> {
  if (typeof vector === 'string') return base64 ? vector : Array.from(embeddingFromBase64(vector), float32Json);
  if (base64) return embeddingToBase64(vector);
  return Array.from(vector, float32Json);
}

type Usage = { prompt_tokens: number; total_tokens: number };

/** A worker's answer that is not what the wire says: the worker's fault, a 500 naming what was wrong. */
function workerFault(what: string, cause?: unknown): HttpError {
  return new HttpError(500, `the embedding worker's answer is malformed: ${what}`, cause === undefined ? {} : { cause });
}

/** Runs a check of worker output, its `InvalidArgument` becoming the worker's fault. */
function checked<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw workerFault((err as Error).message, err);
  }
}

async function tokensEmbeddings(request: ClientRequest<'embeddings'>): Promise<{ vectors: Vector[]; usage: Usage }> {
  const payload = await (await request.preprocessor()).preprocessEmbeddings(request.fields);
  if (request.context.isKilled()) throw new Cancelled('client closed the request while it was preprocessed');
  const target = await request.route(new Set(), payload.token_ids.flat(), request.requestId);
  const vectors: Vector[] = [];
  const usage: Usage = { prompt_tokens: 0, total_tokens: 0 };
  for await (const item of target.client.direct(payload, target.instanceId, { context: request.context })) {
    const output = checked(() => parseOrThrow(EmbeddingsOutputSchema, item, 'output'));
    for (const [i, vector] of output.embeddings.entries()) vectors.push(checked(() => embeddingFromBase64(vector, `output.embeddings.${i}`)));
    usage.prompt_tokens += output.prompt_tokens;
    usage.total_tokens += output.total_tokens;
  }
  if (vectors.length !== payload.token_ids.length) {
    throw workerFault(`${vectors.length} vectors for ${payload.token_ids.length} inputs`);
  }
  return { vectors, usage };
}

type OpenAiEmbeddings = { data?: Array<{ index?: unknown; embedding?: unknown }>; usage?: { prompt_tokens?: unknown; total_tokens?: unknown } };

async function textEmbeddings(request: ClientRequest<'embeddings'>): Promise<{ vectors: Vector[]; usage: Usage }> {
  const target = await request.route(new Set(), undefined, request.requestId);
  const vectors: Vector[] = [];
  const usage: Usage = { prompt_tokens: 0, total_tokens: 0 };
  for await (const raw of target.client.direct(request.fields, target.instanceId, { context: request.context })) {
    const item = (raw ?? {}) as OpenAiEmbeddings;
    if (!Array.isArray(item.data)) throw workerFault('data must be a list');
    for (const entry of item.data) {
      const vector = entry.embedding;
      if (typeof vector !== 'string' && !(Array.isArray(vector) && vector.every((v) => typeof v === 'number'))) {
        throw workerFault('data[].embedding must be base64 or a list of numbers');
      }
      vectors[typeof entry.index === 'number' ? entry.index : vectors.length] = vector as Vector;
    }
    usage.prompt_tokens += typeof item.usage?.prompt_tokens === 'number' ? item.usage.prompt_tokens : 0;
    usage.total_tokens += typeof item.usage?.total_tokens === 'number' ? item.usage.total_tokens : 0;
  }
  return { vectors, usage };
}
