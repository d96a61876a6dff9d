/**
 * `@dynamo/runtime`: NVIDIA Dynamo's distributed runtime for TypeScript, speaking stock Dynamo's
 * wire formats: discovery, request and response planes, clients and the worker API.
 *
 * @packageDocumentation
 */

export { Context, type ContextOptions } from './context.js';
export {
  DynamoException,
  Unknown,
  InvalidArgument,
  CannotConnect,
  Disconnected,
  ConnectionTimeout,
  Cancelled,
  EngineShutdown,
  StreamIncomplete,
  dynamoExceptionOf,
  toDynamoException,
  type DynamoErrorKind,
} from './errors.js';
export { parseOrThrow, describeIssues } from './validate.js';
