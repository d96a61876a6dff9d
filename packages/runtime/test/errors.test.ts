import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CannotConnect,
  Cancelled,
  ConnectionTimeout,
  Disconnected,
  DynamoException,
  dynamoExceptionOf,
  EngineShutdown,
  InvalidArgument,
  StreamIncomplete,
  toDynamoException,
  Unknown,
  WorkerOverloaded,
} from '../src/index.js';
import { annotatedErrorJson, unwrapAnnotated } from '../src/endpoint/annotated.js';

function sysError(code: string): Error {
  return Object.assign(new Error(`${code} happened`), { code });
}

describe('toDynamoException', () => {
  it('passes Dynamo errors through unchanged', () => {
    const err = new StreamIncomplete('cut short');
    expect(toDynamoException(err)).toBe(err);
    expect(err).toBeInstanceOf(DynamoException);
    expect(err.kind).toBe('StreamIncomplete');
    expect(err.name).toBe('StreamIncomplete');
  });

  it.each([
    [new TypeError('bad type'), InvalidArgument],
    [new RangeError('too long'), InvalidArgument],
    [new SyntaxError('bad json'), InvalidArgument],
    [Object.assign(new Error('stop'), { name: 'AbortError' }), Cancelled],
    [Object.assign(new Error('late'), { name: 'TimeoutError' }), ConnectionTimeout],
    [sysError('ETIMEDOUT'), ConnectionTimeout],
    [sysError('ECONNREFUSED'), CannotConnect],
    [sysError('ECONNRESET'), Disconnected],
    [sysError('EPIPE'), Disconnected],
    [new Error('plain'), Unknown],
  ])('maps %s to the matching kind', (input, expected) => {
    const mapped = toDynamoException(input);
    expect(mapped).toBeInstanceOf(expected);
    expect(mapped.cause).toBe(input);
    expect(mapped.message).toBe(input.message);
  });

  it('maps zod validation errors to InvalidArgument', () => {
    const result = z.object({ a: z.number() }).safeParse({ a: 'x' });
    expect(toDynamoException(result.error)).toBeInstanceOf(InvalidArgument);
  });

  it('maps HTTP-like errors by status with a JSON message', () => {
    const clientError = toDynamoException(Object.assign(new Error('bad prompt'), { status: 422 }));
    expect(clientError).toBeInstanceOf(InvalidArgument);
    expect(JSON.parse(clientError.message)).toEqual({ message: 'bad prompt', code: 422 });
    expect(toDynamoException(Object.assign(new Error('oops'), { statusCode: 503 }))).toBeInstanceOf(Unknown);
  });

  it('describes non-Error throws', () => {
    expect(toDynamoException('just a string').message).toBe('just a string');
    expect(toDynamoException({ n: 1n }).message).toContain('1n');
  });
});

describe('dynamoExceptionOf', () => {
  it('rebuilds the class named on the wire, Unknown otherwise', () => {
    expect(dynamoExceptionOf('EngineShutdown', 'bye')).toBeInstanceOf(EngineShutdown);
    expect(dynamoExceptionOf('NoSuchKind', 'x')).toBeInstanceOf(Unknown);
  });
});

describe('error items on the wire', () => {
  it('names engine kinds under Backend and WorkerOverloaded at the top level, as stock reads them', () => {
    const shutdown = JSON.parse(annotatedErrorJson(new EngineShutdown('bye'))) as { error: { error_type: unknown } };
    expect(shutdown.error.error_type).toEqual({ Backend: 'EngineShutdown' });
    const full = JSON.parse(annotatedErrorJson(new WorkerOverloaded('queue full'))) as { error: { error_type: unknown } };
    expect(full.error.error_type).toBe('WorkerOverloaded');
  });

  it('reads each kind back as its class', () => {
    for (const err of [new WorkerOverloaded('queue full'), new InvalidArgument('too long'), new StreamIncomplete('cut')]) {
      const read = unwrapAnnotated(JSON.parse(annotatedErrorJson(err)));
      expect(read.kind === 'error' && read.error).toBeInstanceOf(err.constructor);
      expect(read.kind === 'error' && read.error.message).toBe(err.message);
    }
  });
});
