/**
 * `@dynamo/frontend`: the OpenAI-compatible HTTP frontend of a Dynamo deployment, in TypeScript.
 * It follows discovery for the models workers register, preprocesses requests for Tokens-input
 * models with `@dynamo/llm`, routes them over the model's workers, migrates a request to another
 * worker when its worker fails mid-stream, and serves stock Dynamo 1.6 workers and ours alike.
 *
 * @packageDocumentation
 */
export { startFrontend, type Frontend } from './start.js';
export { FrontendSettingsSchema, type FrontendOptions, type FrontendSettings } from './options.js';
export { frontendFlags, frontendHelp, frontendOptionsFromFlags, type FrontendFlagValues } from './flags.js';
export { ROUTER_MODES, type Candidate, type RouteRequest, type Router, type RouterFactory, type RouterMode } from './routing/router.js';
export { RoundRobinRouter, RandomRouter, DirectRouter } from './routing/basic-routers.js';
export { routerFactory } from './routing/router-factory.js';
export { FrontendMetrics } from './metrics.js';
export { HttpError, errorBody } from './http/errors.js';
export { continuation, isMigratable } from './pipeline/migration.js';
