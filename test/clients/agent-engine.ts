// A Tokens-input worker on the Qwen3 tokenizer that plays a coding agent's model by script
// (agent-script.ts): it decodes the prompt the frontend rendered and answers with the scripted
// reply's tokens, ending with EOS. Register it with `--dyn-tool-call-parser hermes` so the frontend
// turns its `<tool_call>` into each API's tool call. Prints "PROMPT <request id> <token count>
// <sha256 of the token ids>" per request, so a test can compare what two frontends rendered, and
// with --prompts-dir writes each prompt's token ids there (`<n>.json`, in arrival order).
// Usage: node --import tsx agent-engine.ts --model-path DIR [--model-name NAME] [--prompts-dir DIR] [worker flags]
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  type Context,
  type EngineConfig,
  type GenerateChunk,
  type GenerateRequest,
  LLMEngine,
  parseFlags,
  run,
  usage,
  workerConfigFromFlags,
  workerFlags,
} from '@dynamo/backend';
import { LocalModel, type Tokenizer } from '@dynamo/llm';
import { z } from 'zod';

import { scriptedReply } from './agent-script.js';

const flags = {
  ...workerFlags,
  modelName: { schema: z.string().default('qwen3-agent'), description: 'served model name' },
  modelPath: { schema: z.string(), description: 'the Qwen3 model folder (tokenizer and chat template)' },
  promptsDir: { schema: z.string().optional(), description: "write each prompt's token ids into this folder" },
};

class AgentEngine extends LLMEngine {
  #prompts = 0;

  constructor(
    readonly name: string,
    readonly tokenizer: Tokenizer,
    readonly promptsDir: string | undefined,
  ) {
    super();
  }

  static override async fromArgs(argv: string[] = process.argv.slice(2)): Promise<[LLMEngine, ReturnType<typeof workerConfigFromFlags>]> {
    const parsed = parseFlags(flags, argv, process.env);
    if (parsed.help) throw new Error('agent-engine.ts takes no --help');
    const { modelName, modelPath, promptsDir, ...common } = parsed.values;
    const tokenizer = await (await LocalModel.load(modelPath)).tokenizer();
    return [new AgentEngine(modelName, tokenizer, promptsDir), workerConfigFromFlags(common, { modelName: modelPath, servedModelName: modelName })];
  }

  override async start(): Promise<EngineConfig> {
    return { model: this.name, servedModelName: this.name, llm: { contextLength: 40_960, kvCacheBlockSize: 16 } };
  }

  override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    const prompt = request.token_ids;
    const digest = createHash('sha256').update(JSON.stringify(prompt)).digest('hex');
    process.stdout.write(`PROMPT ${context.id()} ${prompt.length} ${digest}\n`);
    if (this.promptsDir !== undefined) writeFileSync(join(this.promptsDir, `${this.#prompts++}.json`), JSON.stringify({ id: context.id(), token_ids: prompt }));
    const reply = Array.from(this.tokenizer.encodeSync(scriptedReply(this.tokenizer.decode(Uint32Array.from(prompt), false)), false));
    const max = request.stop_conditions?.max_tokens ?? reply.length;
    const tokens = reply.slice(0, max);
    for (const [i, token] of tokens.entries()) {
      if (context.isStopped()) return;
      const last = i === tokens.length - 1;
      yield last
        ? { token_ids: [token], finish_reason: tokens.length < reply.length ? 'length' : 'stop', completion_usage: usage(prompt.length, tokens.length) }
        : { token_ids: [token] };
    }
  }

  override async cleanup(): Promise<void> {}
}

await run(AgentEngine);
