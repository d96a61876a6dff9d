// The seeds' LLM worker, in TypeScript: register a model for an endpoint, then serve it. A
// Dynamo frontend (stock `python -m dynamo.frontend` or ours) discovers the model card, renders
// chat templates, tokenizes, and sends this worker preprocessed requests (`token_ids`, ...).
//
// There is no model here: the worker streams back the prompt's own ordinary (non-special)
// tokens, one per chunk, up to `max_tokens`, so what a client reads is checkable.
//
//   tsx src/worker.ts <model-path> [--model-name NAME] [--delay-ms N] [--print-requests]
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { ModelInput, ModelType, PreprocessedRequestSchema, registerLlm } from '@dynamo/llm';
import { type Context, dynamoWorker, InvalidArgument, parseOrThrow } from '@dynamo/runtime';

const usage = `usage: worker.ts <model-path> [options]

  <model-path>          a Hugging Face model directory, a .gguf file, or a repo id (Org/Name)
  --model-name NAME     the name clients use (default: derived from the model path)
  --namespace NS        (default dynamo)   --component NAME (default backend)   --endpoint NAME (default generate)
  --delay-ms N          pause between tokens (default 0)
  --print-requests      print each request as "REQUEST <json>" on stdout
  -h, --help

Discovery and request plane come from Dynamo's env vars (DYN_DISCOVERY_BACKEND, DYN_FILE_KV,
DYN_REQUEST_PLANE, ...); the default is file discovery + tcp on this machine.`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'model-name': { type: 'string' },
    namespace: { type: 'string', default: 'dynamo' },
    component: { type: 'string', default: 'backend' },
    endpoint: { type: 'string', default: 'generate' },
    'delay-ms': { type: 'string', default: '0' },
    'print-requests': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(usage);
  process.exit(0);
}
const modelPath = positionals[0];
const delayMs = Number(values['delay-ms']);
if (!modelPath || !Number.isFinite(delayMs) || delayMs < 0) {
  console.error(!modelPath ? 'worker.ts: a model path is required' : `worker.ts: --delay-ms must be a number >= 0, got ${values['delay-ms']}`);
  console.error(usage);
  process.exit(2);
}

await dynamoWorker(async (runtime) => {
  const component = runtime.namespace(values.namespace).component(values.component);
  await component.createService();
  const endpoint = component.endpoint(values.endpoint);
  const { card, model } = await registerLlm(ModelInput.Tokens, ModelType.Chat | ModelType.Completions, endpoint, modelPath, {
    ...(values['model-name'] ? { modelName: values['model-name'] } : {}),
  });
  const tokenizer = await model.tokenizer();
  const ordinary = (id: number) => tokenizer.idToToken(id) !== null && tokenizer.decode(Uint32Array.of(id), true) !== '';

  const served = await endpoint.serveEndpoint(async function* (body: unknown, context: Context) {
    const request = parseOrThrow(PreprocessedRequestSchema, body, 'request');
    if (values['print-requests']) console.log(`REQUEST ${JSON.stringify(body)}`);
    const reply = request.token_ids.filter(ordinary);
    const max = request.stop_conditions.max_tokens ?? reply.length;
    if (max < 1) throw new InvalidArgument('stop_conditions.max_tokens must be at least 1');
    const count = Math.min(max, reply.length);
    const usage = (n: number) => ({ prompt_tokens: request.token_ids.length, completion_tokens: n, total_tokens: request.token_ids.length + n });
    for (let i = 0; i < count; i++) {
      if (context.isStopped()) {
        yield { token_ids: [], finish_reason: 'cancelled', completion_usage: usage(i) };
        return;
      }
      if (delayMs > 0) await sleep(delayMs);
      yield i === count - 1
        ? { token_ids: [reply[i]!], finish_reason: count === max ? 'length' : 'stop', completion_usage: usage(count) }
        : { token_ids: [reply[i]!] };
    }
    if (count === 0) yield { token_ids: [], finish_reason: 'stop', completion_usage: usage(0) };
  });

  console.log(`READY ${card.display_name} ${runtime.instanceId.toString(16)}`);
  await served.closed;
});
