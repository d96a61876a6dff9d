import { describe, expect, it } from 'vitest';
import { DistributedRuntime, InvalidArgument, loadRuntimeConfig, MemKvSpace, parseEndpointPath } from '../src/index.js';
import { validateName } from '../src/internal.js';

describe('names', () => {
  it('accepts lowercase letters, digits, _ and -', () => {
    expect(validateName('component', 'vllm_worker-2')).toBe('vllm_worker-2');
  });

  it.each(['Backend', 'a.b', 'has space', '', 'ü'])('rejects %j with an error naming the kind and value', (name) => {
    expect(() => validateName('namespace', name)).toThrow(InvalidArgument);
    expect(() => validateName('namespace', name)).toThrow(`invalid namespace name '${name}'`);
  });

  it('parses ns.comp.ep and dyn://ns.comp.ep', () => {
    expect(parseEndpointPath('dyn://dynamo.backend.generate')).toEqual({ namespace: 'dynamo', component: 'backend', endpoint: 'generate' });
    expect(() => parseEndpointPath('dynamo.backend')).toThrow(/expected namespace.component.endpoint/);
  });

  it('validates names on the runtime handles, and every endpoint of a process shares its instance id', async () => {
    const runtime = await DistributedRuntime.create({
      config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' }),
      memSpace: new MemKvSpace(),
    });
    try {
      expect(() => runtime.namespace('Bad')).toThrow(/invalid namespace name 'Bad'/);
      expect(() => runtime.namespace('ok').component('no.dots')).toThrow(/invalid component name/);
      const a = await runtime.endpoint('ns.one.generate').serveEndpoint(async function* () {});
      const b = await runtime.endpoint('ns.two.health').serveEndpoint(async function* () {});
      expect(a.instanceId).toBe(runtime.instanceId);
      expect(b.instanceId).toBe(runtime.instanceId);
      const records = [...(await runtime.discovery.listInstances('ns', 'one', 'generate')), ...(await runtime.discovery.listInstances('ns', 'two', 'health'))];
      expect(records.map((r) => r.instance_id)).toEqual([runtime.instanceId, runtime.instanceId]);
    } finally {
      await runtime.shutdown();
    }
  });
});
