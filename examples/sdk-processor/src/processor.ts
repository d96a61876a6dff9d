// The processor pattern: Processor is registered as a Text-input chat model, so a Dynamo frontend
// sends it OpenAI chat requests as they arrived. It turns each into Worker's own request type,
// and Worker's answers back into chat completion chunks. Worker knows nothing of OpenAI.
//   dynamo-serve src/processor.ts#Processor --Processor.modelPath=./model
//   dynamo-frontend &   # then POST /v1/chat/completions with "model": "sdk-processor"
import { randomUUID } from 'node:crypto';
import { ModelInput, ModelType, registerLlm } from '@dynamo/llm';
import { depends, endpoint, onStart, service, serviceConfig, serviceEndpoint } from '@dynamo/sdk';
import { z } from 'zod';

/** Worker's own request: the text to answer and how many words it may use. */
export const WordsRequest = z.object({ text: z.string(), maxWords: z.number().int().min(1) });
/** Worker's own response: one word at a time; `last` when the text has no more. */
export const WordsResponse = z.object({ word: z.string(), last: z.boolean() });

/** A stand-in for a model: answers with the words of the text in reverse order. */
@service({ dynamo: { namespace: 'processor' } })
export class Worker {
  @endpoint({ request: WordsRequest, response: WordsResponse })
  async *generate(request: z.infer<typeof WordsRequest>): AsyncGenerator<z.infer<typeof WordsResponse>> {
    const words = request.text.split(/\s+/).filter(Boolean).reverse();
    for (const [i, word] of words.slice(0, request.maxWords).entries()) yield { word, last: i === words.length - 1 };
  }
}

/** The part of an OpenAI chat request Processor reads; the frontend has validated the rest. */
const ChatRequest = z.looseObject({
  model: z.string(),
  messages: z
    .array(
      z.looseObject({ role: z.string(), content: z.union([z.string(), z.array(z.looseObject({ type: z.string(), text: z.string().optional() }))]).nullish() }),
    )
    .min(1),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
});
type ChatRequest = z.infer<typeof ChatRequest>;

const textOf = (content: ChatRequest['messages'][number]['content']): string =>
  typeof content === 'string' ? content : (content ?? []).map((part) => part.text ?? '').join('');

@service({ dynamo: { namespace: 'processor' }, config: { modelName: 'sdk-processor', modelPath: '', maxWords: 16 } })
export class Processor {
  worker = depends(Worker);

  /** Registers this service as a chat model taking the OpenAI body as text, before it serves. */
  @onStart
  async register(): Promise<void> {
    const { modelName, modelPath } = serviceConfig<{ modelName: string; modelPath: string }>(this);
    if (!modelPath) throw new Error('Processor.modelPath is not set: give the model folder (config.json and tokenizer.json) with --Processor.modelPath=DIR');
    await registerLlm(ModelInput.Text, ModelType.Chat, serviceEndpoint(this, 'generate'), modelPath, { modelName, checkTokenizer: false });
  }

  @endpoint({ request: ChatRequest })
  async *generate(body: ChatRequest): AsyncGenerator<Record<string, unknown>> {
    const text = textOf([...body.messages].reverse().find((m) => m.role === 'user')?.content);
    const maxWords = body.max_completion_tokens ?? body.max_tokens ?? serviceConfig<{ maxWords: number }>(this).maxWords;
    const id = `chatcmpl-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: body.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
      ...extra,
    });
    let words = 0;
    let lastSeen = false;
    for await (const answer of this.worker.generate({ text, maxWords })) {
      yield chunk({ role: 'assistant', content: words === 0 ? answer.word : ` ${answer.word}` }, null);
      words++;
      lastSeen = answer.last;
    }
    const promptWords = text.split(/\s+/).filter(Boolean).length;
    yield chunk({}, lastSeen || words === 0 ? 'stop' : 'length', {
      usage: { prompt_tokens: promptWords, completion_tokens: words, total_tokens: promptWords + words },
    });
  }
}
