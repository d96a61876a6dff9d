import type { z } from 'zod';

// Standard decorators share per-class metadata through `Symbol.metadata` (TC39 decorator
// metadata). Node 20 does not define it yet; compilers use it when it exists, so define it before
// any service class is evaluated (this module loads first: every service imports the SDK).
(Symbol as { metadata?: symbol }).metadata ??= Symbol.for('Symbol.metadata');

/** What `@endpoint` records about a method. */
export interface EndpointSpec {
  /** The method's name on the class. */
  method: string;
  /** The endpoint's name in Dynamo (the method's, unless given). */
  name: string;
  request: z.ZodType;
  response: z.ZodType | undefined;
}

/** What `@api` records about a method: a plain HTTP route the service serves on its own port. */
export interface RouteSpec {
  /** The method's name on the class. */
  method: string;
  httpMethod: 'GET' | 'POST';
  /** `/` + the method's name, unless given. */
  path: string;
  /** POST bodies are checked against it before the method runs. */
  request: z.ZodType | undefined;
}

/** Everything the decorators record about one service class. */
export interface ServiceSpec {
  namespace: string;
  /** The class name, lowercased: Dynamo's runtime takes lowercase component names only. */
  component: string;
  workers: number;
  resources: { cpu: string; memory: string; gpu: string };
  componentType: 'frontend' | 'worker' | 'prefill' | 'decode' | 'planner';
  image: string | undefined;
  envs: Record<string, string>;
  /** Config the decorator gives; `dynamo-serve` layers YAML and flags over it. */
  config: Record<string, unknown>;
}

/** The metadata object's keys the SDK uses. */
export interface SdkMetadata {
  endpoints?: EndpointSpec[];
  routes?: RouteSpec[];
  onStart?: string[];
  onShutdown?: string[];
  service?: ServiceSpec;
}

// Registered symbols: a graph module loaded through a TS loader may get its own copy of the SDK.
const KEY = Symbol.for('dynamo.sdk');

/** The SDK's part of a decorator context's metadata object, created on first use. */
export function sdkMetadata(metadata: DecoratorMetadataObject | undefined, where: string): SdkMetadata {
  if (!metadata) throw new Error(`${where}: decorator metadata is unavailable; compile with TypeScript 5.2+ standard decorators (no experimentalDecorators)`);
  const own = Object.hasOwn(metadata, KEY) ? (metadata[KEY] as SdkMetadata) : undefined;
  if (own) return own;
  // A subclass starts from a copy of its parent's endpoints and hooks.
  const inherited = metadata[KEY] as SdkMetadata | undefined;
  const fresh: SdkMetadata = {
    endpoints: [...(inherited?.endpoints ?? [])],
    routes: [...(inherited?.routes ?? [])],
    onStart: [...(inherited?.onStart ?? [])],
    onShutdown: [...(inherited?.onShutdown ?? [])],
  };
  metadata[KEY] = fresh;
  return fresh;
}

/** The SDK metadata of a class, if it has any. */
export function classMetadata(cls: abstract new (...args: never[]) => unknown): SdkMetadata | undefined {
  const metadata = (cls as unknown as Record<symbol, DecoratorMetadataObject | undefined>)[Symbol.metadata];
  return metadata?.[KEY] as SdkMetadata | undefined;
}
