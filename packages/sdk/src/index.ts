/**
 * Dynamo's service SDK for TypeScript: a class decorated with `@service` is a Dynamo component,
 * its `@endpoint` methods are endpoints with zod-typed requests, and `depends()` fields are typed
 * clients of other services.
 */
export { service, endpoint, onStart, onShutdown, ServiceOptionsSchema, type ServiceOptions, type EndpointOptions } from './decorators.js';
export { depends, dependencies, dependencyTarget } from './depends.js';
export { serviceClient, serviceSpec, type ServiceClient } from './clients.js';
export { serveService, serviceConfig, type ServeServiceOptions, type ServedService } from './serve.js';
export type { EndpointSpec, ServiceSpec } from './metadata.js';
