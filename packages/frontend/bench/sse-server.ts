// A canned streaming chat endpoint on fastify or on plain node:http, for frontend.bench.ts's
// check of what fastify costs: both parse the JSON body and stream the same SSE events through
// the frontend's SseWriter, so the only difference is the framework.
// Each response stands for 256 tokens (its usage chunk says so).
// Usage: tsx bench/sse-server.ts fastify|http PORT EVENTS
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import Fastify from 'fastify';

import { SseWriter } from '../src/http/sse.js';

const [kind, port, events] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const text = 'x'.repeat(16);
const usage = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion.chunk',
  created: 0,
  model: 'qwen3',
  choices: [],
  usage: { prompt_tokens: 136, completion_tokens: 256, total_tokens: 392 },
});
const chunk = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion.chunk',
  created: 0,
  model: 'qwen3',
  choices: [{ index: 0, delta: { content: text }, finish_reason: null, logprobs: null }],
});

/** Streams EVENTS chunks, one per event-loop turn as a worker's batches would arrive. */
function stream(res: ServerResponse, body: unknown): void {
  if (typeof (body as { model?: unknown }).model !== 'string') {
    res.writeHead(400).end();
    return;
  }
  const sse = new SseWriter(res, {});
  let sent = 0;
  const next = () => {
    void sse.data(chunk);
    if (++sent < events) setImmediate(next);
    else {
      void sse.data(usage);
      sse.done();
    }
  };
  next();
}

if (kind === 'fastify') {
  const app = Fastify({ logger: false });
  app.post('/v1/chat/completions', async (req, reply) => {
    void reply.hijack();
    stream(reply.raw, req.body);
  });
  await app.listen({ host: '127.0.0.1', port });
} else if (kind === 'http') {
  const server = createServer({ noDelay: true }, (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404).end();
      return;
    }
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8'));
      } catch {
        res.writeHead(400).end();
        return;
      }
      stream(res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
} else {
  throw new Error(`usage: sse-server.ts fastify|http PORT EVENTS (got ${kind})`);
}
console.log('listening');
