import { InvalidArgument } from './errors.js';

const valid = /^[a-z0-9_-]+$/;

/**
 * Checks a namespace, component or endpoint name. Names end up in discovery keys, NATS subjects and
 * TCP routing paths, so they are limited to lowercase letters, digits, `_` and `-`.
 */
export function validateName(kind: 'namespace' | 'component' | 'endpoint', name: string): string {
  if (typeof name !== 'string' || !valid.test(name)) {
    throw new InvalidArgument(`invalid ${kind} name '${String(name)}': use lowercase letters, digits, '_' and '-' only`);
  }
  return name;
}

/** A fully named endpoint. */
export interface EndpointPath {
  namespace: string;
  component: string;
  endpoint: string;
}

/**
 * Parses `ns.comp.ep` or `dyn://ns.comp.ep` (Dynamo's textual endpoint form); each part is
 * validated with {@link validateName}.
 */
export function parseEndpointPath(path: string): EndpointPath {
  const bare = path.startsWith('dyn://') ? path.slice('dyn://'.length) : path;
  const parts = bare.split('.');
  if (parts.length !== 3) throw new InvalidArgument(`invalid endpoint path '${path}': expected namespace.component.endpoint`);
  const [namespace, component, endpoint] = parts as [string, string, string];
  return {
    namespace: validateName('namespace', namespace),
    component: validateName('component', component),
    endpoint: validateName('endpoint', endpoint),
  };
}
