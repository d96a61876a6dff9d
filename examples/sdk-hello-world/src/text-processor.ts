// A single service with a typed endpoint: `text/textprocessor/process` takes some text and
// streams one record per word. Serve it with:
//   dynamo-serve src/text-processor.ts#TextProcessor
// and call it from another process with `tsx src/client.ts some words`.
import { endpoint, service } from '@dynamo/sdk';
import { z } from 'zod';

export const ProcessRequest = z.object({ text: z.string().min(1) });
export const WordRecord = z.object({ index: z.number().int(), word: z.string(), length: z.number().int() });

@service({ dynamo: { namespace: 'text' } })
export class TextProcessor {
  @endpoint({ request: ProcessRequest, response: WordRecord })
  async *process(request: z.infer<typeof ProcessRequest>): AsyncGenerator<z.infer<typeof WordRecord>> {
    const words = request.text.split(/\s+/).filter(Boolean);
    for (const [index, word] of words.entries()) yield { index, word: word.toUpperCase(), length: word.length };
  }
}
