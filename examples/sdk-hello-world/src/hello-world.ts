// Three services in a chain: Frontend answers POST /generate over plain HTTP and calls Middle,
// which calls Backend, each adding its part. Run it with:
//   dynamo-serve src/hello-world.ts#Frontend -f config.yaml
//   curl -N localhost:8000/generate -H 'content-type: application/json' -d '{"text": "hello"}'
import { api, depends, endpoint, onShutdown, onStart, service, serviceConfig } from '@dynamo/sdk';
import { z } from 'zod';

export const TextRequest = z.object({ text: z.string().min(1) });
export type TextRequest = z.infer<typeof TextRequest>;

@service({ dynamo: { namespace: 'inference' }, workers: 2, resources: { cpu: 1, memory: '500Mi' }, config: { message: 'back' } })
export class Backend {
  @endpoint({ request: TextRequest, response: z.string() })
  async *generate(request: TextRequest): AsyncGenerator<string> {
    const { message } = serviceConfig<{ message: string }>(this);
    for (const token of `${request.text}-${message}`.split(/\s+/)) yield `Backend: ${token}`;
  }
}

@service({ dynamo: { namespace: 'inference' }, config: { message: 'mid' } })
export class Middle {
  backend = depends(Backend);

  @endpoint({ request: TextRequest, response: z.string() })
  async *generate(request: TextRequest): AsyncGenerator<string> {
    const { message } = serviceConfig<{ message: string }>(this);
    for await (const item of this.backend.generate({ text: `${request.text}-${message}` })) yield `Middle: ${item}`;
  }
}

@service({ dynamo: { namespace: 'inference' }, config: { port: 8000 } })
export class Frontend {
  middle = depends(Middle);

  @onStart
  started(): void {
    console.log(`Frontend listening on port ${serviceConfig<{ port: number }>(this).port}`);
  }

  @api({ request: TextRequest })
  async *generate(request: TextRequest): AsyncGenerator<string> {
    for await (const item of this.middle.generate(request)) yield `Frontend: ${item}`;
  }

  @onShutdown
  stopped(): void {
    console.log('Frontend stopped');
  }
}
