import { z } from 'zod';

import { type EndpointSpec, type RouteSpec, type ServiceSpec, sdkMetadata } from './metadata.js';

const name = z.string().regex(/^[a-zA-Z0-9_-]+$/, 'must match [a-zA-Z0-9_-]+');
const quantity = z.union([z.string().min(1), z.number().nonnegative()]).transform(String);

/** Options of {@link service}, checked when the class is defined. */
export const ServiceOptionsSchema = z.strictObject({
  dynamo: z.strictObject({ namespace: name }),
  /** Processes (locally) or replicas (Kubernetes) of the service. */
  workers: z.number().int().min(1).default(1),
  resources: z
    .strictObject({ cpu: quantity.default('1'), memory: quantity.default('500Mi'), gpu: quantity.default('0') })
    .default({ cpu: '1', memory: '500Mi', gpu: '0' }),
  /** The DynamoGraphDeployment component type `dynamo-deploy` writes for it. */
  componentType: z.enum(['frontend', 'worker', 'prefill', 'decode', 'planner']).default('worker'),
  /** The container image `dynamo-deploy` runs it in (else `--image` / `DYNAMO_IMAGE`). */
  image: z.string().min(1).optional(),
  /** Environment variables of the service's processes (and its Kubernetes pods). */
  envs: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'), z.string()).default({}),
  /** Config defaults; YAML and `--Class.key=value` flags override them. */
  config: z.record(z.string(), z.unknown()).default({}),
});
export type ServiceOptions = z.input<typeof ServiceOptionsSchema>;

type Class = abstract new (...args: never[]) => unknown;

/**
 * Marks a class as a Dynamo service: component = the class name lowercased (Dynamo's runtime
 * takes lowercase names only), in `dynamo.namespace`. Its
 * `@endpoint` methods are served by `serveService` and `dynamo-serve`. Throws naming a bad option.
 */
export function service(options: ServiceOptions) {
  const parsed = ServiceOptionsSchema.safeParse(options);
  return <C extends Class>(_cls: C, context: ClassDecoratorContext<C>): void => {
    const where = `@service on ${String(context.name)}`;
    if (!parsed.success) throw new TypeError(`${where}: ${parsed.error.issues.map((i: z.core.$ZodIssue) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    const component = String(context.name).toLowerCase();
    if (!/^[a-z0-9_-]+$/.test(component))
      throw new TypeError(`${where}: the class name must be letters, digits and '_' (it becomes the component name ${component})`);
    const spec: ServiceSpec = {
      namespace: parsed.data.dynamo.namespace,
      component,
      workers: parsed.data.workers,
      resources: parsed.data.resources,
      componentType: parsed.data.componentType,
      image: parsed.data.image,
      envs: parsed.data.envs,
      config: parsed.data.config,
    };
    sdkMetadata(context.metadata, where).service = spec;
  };
}

/** Options of {@link endpoint}. */
export interface EndpointOptions<Req extends z.ZodType, Res extends z.ZodType | undefined> {
  /** The endpoint's name in Dynamo; default the method's name. */
  name?: string;
  /** Every request is checked against it before the method runs. */
  request: Req;
  /** When given, every response is checked against it before it is sent. */
  response?: Res;
}

// biome-ignore lint/suspicious/noExplicitAny: a method may take (request, context) and use its own class.
type EndpointMethod<Req, Res> = (this: any, request: Req, ...rest: any[]) => AsyncIterable<Res> | Promise<Res>;

/**
 * Serves a method (an async generator, or an async method for one response) as a Dynamo
 * endpoint. The request is validated with `request` first: a bad one fails with `InvalidArgument`
 * naming the field, and the service keeps serving.
 */
export function endpoint<Req extends z.ZodType, Res extends z.ZodType | undefined = undefined>(options: EndpointOptions<Req, Res>) {
  return <M extends EndpointMethod<z.output<Req>, Res extends z.ZodType ? z.input<Res> : unknown>>(
    method: M,
    context: ClassMethodDecoratorContext<unknown, M>,
  ): void => {
    const where = `@endpoint on ${String(context.name)}`;
    if (context.static || context.private) throw new TypeError(`${where}: endpoints are public instance methods`);
    const endpointName = name.safeParse(options.name ?? String(context.name));
    if (!endpointName.success) throw new TypeError(`${where}: name ${endpointName.error.issues[0]!.message}`);
    const spec: EndpointSpec = { method: String(context.name), name: endpointName.data, request: options.request, response: options.response };
    const meta = sdkMetadata(context.metadata, where);
    meta.endpoints = [...(meta.endpoints ?? []).filter((e) => e.method !== spec.method), spec];
    void method;
  };
}

/** Options of {@link api}. */
export interface ApiOptions<Req extends z.ZodType | undefined> {
  /** The route's path; default `/` + the method's name. */
  path?: string;
  /** Default `POST`. */
  method?: 'GET' | 'POST';
  /** A POST body is checked against it before the method runs; a bad one gets a 400 naming the field. */
  request?: Req;
}

/**
 * Serves a method as a plain HTTP route on the service's own port (config `port`, else
 * `DYNAMO_PORT`, default 8000). An async generator streams its items as server-sent events
 * (`data: <json>`); an async method answers with its JSON result.
 */
export function api<Req extends z.ZodType | undefined = undefined>(options: ApiOptions<Req> = {}) {
  return <M extends EndpointMethod<Req extends z.ZodType ? z.output<Req> : unknown, unknown>>(
    method: M,
    context: ClassMethodDecoratorContext<unknown, M>,
  ): void => {
    const where = `@api on ${String(context.name)}`;
    if (context.static || context.private) throw new TypeError(`${where}: routes are public instance methods`);
    const path = options.path ?? `/${String(context.name)}`;
    if (!/^\/[A-Za-z0-9_\-./]*$/.test(path))
      throw new TypeError(`${where}: path must start with / and hold only letters, digits, '_', '-', '.' and '/' (got ${JSON.stringify(path)})`);
    const httpMethod = options.method ?? 'POST';
    if (httpMethod === 'GET' && options.request) throw new TypeError(`${where}: a GET route has no body to check; drop request or use POST`);
    const spec: RouteSpec = { method: String(context.name), httpMethod, path, request: options.request };
    const meta = sdkMetadata(context.metadata, where);
    meta.routes = [...(meta.routes ?? []).filter((r) => r.method !== spec.method), spec];
    void method;
  };
}

// biome-ignore lint/suspicious/noExplicitAny: the hook is a method of the service class.
type Hook = (this: any) => unknown;

/** Runs the method once the service's clients are connected, before its endpoints serve. */
export function onStart<M extends Hook>(_method: M, context: ClassMethodDecoratorContext<unknown, M>): void {
  const meta = sdkMetadata(context.metadata, `@onStart on ${String(context.name)}`);
  meta.onStart = [...(meta.onStart ?? []), String(context.name)];
}

/** Runs the method when the service stops, after its endpoints stopped taking requests. */
export function onShutdown<M extends Hook>(_method: M, context: ClassMethodDecoratorContext<unknown, M>): void {
  const meta = sdkMetadata(context.metadata, `@onShutdown on ${String(context.name)}`);
  meta.onShutdown = [...(meta.onShutdown ?? []), String(context.name)];
}
