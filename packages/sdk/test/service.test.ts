// Services served in one process on the in-memory discovery backend: typed endpoints, depends()
// clients between services, request and response checks, lifecycle hooks and config.
import { type Context, DistributedRuntime, InvalidArgument, loadRuntimeConfig, MemKvSpace } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

import { depends, endpoint, onShutdown, onStart, serveService, type ServedService, service, serviceClient, serviceConfig } from '../src/index.js';
import { serviceSpec } from '../src/clients.js';

const Request = z.object({ text: z.string().min(1), times: z.number().int().positive().default(1) });
const events: string[] = [];

@service({ dynamo: { namespace: 'sdk-test' }, config: { suffix: '!', greeting: 'hi' } })
class Backend {
  @endpoint({ request: Request, response: z.string() })
  async *generate(request: z.output<typeof Request>) {
    const { suffix } = serviceConfig<{ suffix: string }>(this);
    for (let i = 0; i < request.times; i++) yield `${request.text}${suffix}`;
  }

  @endpoint({ name: 'count', request: z.object({ text: z.string() }) })
  async length(request: { text: string }) {
    return request.text.length;
  }

  @endpoint({ request: z.object({ bad: z.boolean() }), response: z.string() })
  async *broken(request: { bad: boolean }) {
    yield (request.bad ? 42 : 'fine') as unknown as string;
  }

  @onStart
  async started() {
    events.push('backend start');
  }

  @onShutdown
  stopped() {
    events.push('backend stop');
  }
}

@service({ dynamo: { namespace: 'sdk-test' } })
class Middle {
  backend = depends(Backend);
  greeting = '';

  @onStart
  async started() {
    // Clients work from @onStart on.
    for await (const text of this.backend.generate({ text: 'warm', times: 1 })) this.greeting = text;
  }

  @endpoint({ request: z.object({ text: z.string() }) })
  async *generate(request: { text: string }, context: Context) {
    yield `middle saw ${context.id().length > 0 ? 'a request id' : 'nothing'}; warmed with ${this.greeting}`;
    for await (const text of this.backend.generate({ text: request.text.toUpperCase(), times: 2 })) yield `middle: ${text}`;
  }
}

describe('@service classes served in one process', () => {
  const space = new MemKvSpace();
  const config = loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' });
  let backend: ServedService<Backend>;
  let middle: ServedService<Middle>;
  let caller: DistributedRuntime;

  beforeAll(async () => {
    backend = await serveService(Backend, { runtimeOptions: { config, memSpace: space }, config: { suffix: '?' } });
    middle = await serveService(Middle, { runtimeOptions: { config, memSpace: space } });
    caller = await DistributedRuntime.create({ config, memSpace: space });
  });
  afterAll(async () => {
    await middle?.stop();
    await backend?.stop();
    await caller?.shutdown();
  });

  const collect = async <T>(stream: AsyncIterable<T>): Promise<T[]> => {
    const out: T[] = [];
    for await (const item of stream) out.push(item);
    return out;
  };

  it('records names: namespace from the decorator, component = class name lowercased, endpoint = method or name', () => {
    const { spec, endpoints } = serviceSpec(Backend);
    expect(spec).toMatchObject({ namespace: 'sdk-test', component: 'backend', workers: 1, resources: { cpu: '1', memory: '500Mi', gpu: '0' } });
    expect(endpoints.map((e) => [e.method, e.name])).toEqual([
      ['generate', 'generate'],
      ['length', 'count'],
      ['broken', 'broken'],
    ]);
  });

  it('a dependency client calls the other service, and config layers over the decorator defaults', async () => {
    const client = serviceClient(Middle, caller);
    const out = await collect(client.generate({ text: 'abc' }));
    expect(out).toEqual(['middle saw a request id; warmed with warm?', 'middle: ABC?', 'middle: ABC?']);
    expect(serviceConfig(backend.instance)).toEqual({ suffix: '?', greeting: 'hi' });
  });

  it('an async method answers with one response', async () => {
    expect(await collect(serviceClient(Backend, caller).length({ text: 'four' }))).toEqual([4]);
  });

  it('a bad request fails naming the field, and the service keeps serving', async () => {
    const client = serviceClient(Backend, caller);
    const err = await collect(client.generate({ text: '', times: 1 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/Backend\.generate request.*text/);
    const wrongType = await collect(client.generate({ text: 'x', times: 'two' } as never)).catch((e: unknown) => e);
    expect((wrongType as Error).message).toMatch(/times/);
    expect(await collect(client.generate({ text: 'ok', times: 1 }))).toEqual(['ok?']);
  });

  it('a response that breaks its schema fails the request, naming the endpoint', async () => {
    const client = serviceClient(Backend, caller);
    const err = await collect(client.broken({ bad: true })).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/Backend\.broken response/);
    expect(await collect(client.broken({ bad: false }))).toEqual(['fine']);
  });

  it('runs @onStart before serving and @onShutdown on stop', async () => {
    expect(events).toContain('backend start');
    const extra = await serveService(Backend, { runtimeOptions: { config, memSpace: space } });
    await extra.stop();
    expect(events.filter((e) => e === 'backend stop')).toHaveLength(1);
  });
});

describe('mistakes are named', () => {
  it('serving a class that is not a service', async () => {
    class Plain {}
    await expect(serveService(Plain)).rejects.toThrow(/Plain is not a Dynamo service: decorate it with @service/);
  });

  it('bad @service options', () => {
    expect(() => {
      @service({ dynamo: { namespace: 'has space' } })
      class Bad {}
      return Bad;
    }).toThrow(/@service on Bad: dynamo\.namespace: must match/);
  });

  it('calling a dependency before the service is served', () => {
    const middle = new Middle();
    expect(() => middle.backend.generate({ text: 'x', times: 1 })).toThrow(/depends\(Backend\)\.generate: not connected yet/);
  });
});
