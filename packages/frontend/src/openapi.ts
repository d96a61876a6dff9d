import { createRequire } from 'node:module';
import { ChatCompletionRequestSchema, CompletionRequestSchema, EmbeddingRequestSchema } from '@dynamo/llm/internal';
import { z } from 'zod';

import { MessagesRequestSchema } from './anthropic/request.js';
import { ResponsesRequestSchema } from './responses/request.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

/** The body of every error answer (`errorBody`). */
const ErrorSchema = z.object({
  message: z.string(),
  type: z.string(),
  code: z.number().int(),
  details: z.unknown().optional(),
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.number().int() }),
});

/** A route's operation: what it takes and what it answers. */
interface Operation {
  method: 'get' | 'post';
  path: string;
  summary: string;
  /** The request body's schema name in `components.schemas`. */
  body?: string;
}

const ERRORS: Record<string, string> = {
  '400': 'A bad request: the message names the field',
  '404': 'Unknown model or route',
  '503': 'No worker can take the request now (Retry-After)',
  '529': 'Every worker is busy (Retry-After; the status is DYN_HTTP_OVERLOAD_STATUS_CODE)',
};

const json = (schema: z.ZodType) => z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' });

/**
 * The OpenAPI 3.1 document of the frontend's routes, with the request schemas the routes
 * validate with (the same zod schemas, as JSON Schema), served at `/openapi.json`.
 */
export function openApiDocument(options: { anthropicApi: boolean }): Record<string, unknown> {
  const schemas: Record<string, unknown> = {
    CreateChatCompletionRequest: json(ChatCompletionRequestSchema),
    CreateCompletionRequest: json(CompletionRequestSchema),
    CreateEmbeddingRequest: json(EmbeddingRequestSchema),
    CreateResponseRequest: json(ResponsesRequestSchema),
    Error: json(ErrorSchema),
    ...(options.anthropicApi && { CreateMessageRequest: json(MessagesRequestSchema) }),
  };
  const operations: Operation[] = [
    {
      method: 'post',
      path: '/v1/chat/completions',
      summary: 'Create a chat completion (streamed as SSE with stream: true)',
      body: 'CreateChatCompletionRequest',
    },
    { method: 'post', path: '/v1/completions', summary: 'Create a completion (one prompt or a batch)', body: 'CreateCompletionRequest' },
    { method: 'post', path: '/v1/embeddings', summary: 'Create embeddings', body: 'CreateEmbeddingRequest' },
    { method: 'post', path: '/v1/responses', summary: 'Create a response (OpenAI Responses API, stateless)', body: 'CreateResponseRequest' },
    ...(options.anthropicApi
      ? [
          { method: 'post' as const, path: '/v1/messages', summary: 'Create a message (Anthropic Messages API)', body: 'CreateMessageRequest' },
          { method: 'post' as const, path: '/v1/messages/count_tokens', summary: 'Count the tokens of a message request' },
        ]
      : []),
    { method: 'get', path: '/v1/models', summary: 'List the models served' },
    { method: 'get', path: '/v1/models/{model}', summary: 'Describe a model' },
    { method: 'get', path: '/v1/models/{model}/ready', summary: "A model's readiness: 200 when a worker serves it, 503 with the reason when none does" },
    { method: 'get', path: '/health', summary: 'Health, with the endpoints and instances discovered' },
    { method: 'get', path: '/live', summary: 'Liveness' },
    { method: 'get', path: '/metrics', summary: 'Prometheus metrics' },
  ];
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const errorRef = { description: '', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    paths[op.path] = {
      ...paths[op.path],
      [op.method]: {
        operationId: `${op.method}_${op.path.replace(/[/{}]+/g, '_').replace(/^_+|_+$/g, '')}`,
        summary: op.summary,
        ...(op.path.includes('{model}') && { parameters: [{ name: 'model', in: 'path', required: true, schema: { type: 'string' } }] }),
        ...(op.body && { requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${op.body}` } } } } }),
        responses: {
          '200': { description: 'OK' },
          ...Object.fromEntries(Object.entries(ERRORS).map(([status, description]) => [status, { ...errorRef, description }])),
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Dynamo for TypeScript: OpenAI-compatible frontend',
      description: 'The HTTP API of dynamo-frontend (@dynamo/frontend).',
      license: { name: 'Apache-2.0' },
      version,
    },
    servers: [{ url: '/', description: 'This server' }],
    paths,
    components: { schemas },
  };
}
