/**
 * Dynamo's service SDK for TypeScript: a class decorated with `@service` is a Dynamo component,
 * its `@endpoint` methods are endpoints with zod-typed requests, and `depends()` fields are typed
 * clients of other services.
 */
export { service, endpoint, api, onStart, onShutdown, type ServiceOptions, type EndpointOptions, type ApiOptions } from './decorators.js';
export { getRuntime } from './runtime-handle.js';
export { depends } from './depends.js';
export { serviceClient, type ServiceClient } from './clients.js';
export { serveService, serviceConfig, serviceEndpoint, type ServeServiceOptions, type ServedService } from './serve.js';
export { DynamoGraphDeploymentSchema, type DynamoGraphDeployment } from './deploy/schema.js';
export type { EndpointSpec, RouteSpec, ServiceSpec } from './metadata.js';
