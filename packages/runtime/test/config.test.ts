import { describe, expect, it } from 'vitest';
import { loadRuntimeConfig } from '../src/config.js';
import { InvalidArgument } from '../src/errors.js';

describe('loadRuntimeConfig', () => {
  it('defaults to the embedded setup: file discovery, tcp, no status server', () => {
    const config = loadRuntimeConfig({});
    expect(config.discoveryBackend).toBe('file');
    expect(config.requestPlane).toBe('tcp');
    expect(config.system).toBeNull();
    expect(config.etcd.endpoints).toEqual(['http://localhost:2379']);
    expect(config.etcd.leaseTtlSecs).toBe(10);
    expect(config.nats.server).toBe('nats://localhost:4222');
    expect(config.tcp.maxMessageSize).toBe(32 * 1024 * 1024);
    expect(Object.isFrozen(config.tcp)).toBe(true);
  });

  it("reads Dynamo's variables", () => {
    const config = loadRuntimeConfig({
      DYN_DISCOVERY_BACKEND: 'etcd',
      DYN_REQUEST_PLANE: 'nats',
      ETCD_ENDPOINTS: 'http://a:2379, http://b:2379',
      DYN_SYSTEM_PORT: '0',
      DYN_LOG: 'debug',
      DYN_LOGGING_JSONL: '1',
    });
    expect(config).toMatchObject({
      discoveryBackend: 'etcd',
      requestPlane: 'nats',
      etcd: { endpoints: ['http://a:2379', 'http://b:2379'] },
      log: { filter: 'debug', jsonl: true },
    });
    expect(config.system).toMatchObject({ port: 0, host: '0.0.0.0', healthPath: '/health', livePath: '/live', startingStatus: 'notready' });
  });

  it('lets flags and code beat the environment', () => {
    const config = loadRuntimeConfig({ DYN_REQUEST_PLANE: 'nats' }, { requestPlane: 'tcp', systemPort: 9090 });
    expect(config.requestPlane).toBe('tcp');
    expect(config.system?.port).toBe(9090);
  });

  it('names every bad variable and never echoes secrets', () => {
    let error: unknown;
    try {
      loadRuntimeConfig({ DYN_REQUEST_PLANE: 'udp', NATS_SERVER: 'http://secret-host', DYN_TCP_RPC_PORT: '70000', NATS_AUTH_PASSWORD: 'hunter2' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InvalidArgument);
    const message = (error as Error).message;
    expect(message).toContain('DYN_REQUEST_PLANE');
    expect(message).toContain('NATS_SERVER');
    expect(message).toContain('DYN_TCP_RPC_PORT');
    expect(message).not.toContain('hunter2');
  });
});
