/**
 * `@dynamo/frontend`: the OpenAI-compatible HTTP frontend of a Dynamo deployment, in TypeScript.
 * It follows discovery for the models workers register, preprocesses requests for Tokens-input
 * models with `@dynamo/llm`, routes them over the model's workers, migrates a request to another
 * worker when its worker fails mid-stream, and serves stock Dynamo 1.6 workers and ours alike.
 *
 * @packageDocumentation
 */
export { startFrontend, type Frontend } from './start.js';
export {
  frontendSettings,
  frontendFlags,
  frontendHelp,
  frontendConfig,
  type FrontendOptions,
  type FrontendSettings,
  type FrontendConfig,
  type FrontendFlagValues,
} from './settings.js';
// The contract a custom router implements (`FrontendOptions.router`).
export { ROUTER_MODES, type Candidate, type RouteRequest, type Router, type RouterFactory, type RouterMode } from './routing/router.js';
