import { hexId } from '../json.js';

/** The endpoint an event stream belongs to (stock publishes KV events and load at endpoint scope). */
export interface EventScope {
  namespace: string;
  component: string;
  endpoint: string;
}

/** Stock's segment escaping: ASCII letters, digits, `-` and `_` stay; every other byte is `%XX`. */
function escapeSegment(segment: string): string {
  let out = '';
  for (const byte of new TextEncoder().encode(segment)) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9_-]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The NATS subject of `topic` in `scope`: `namespace.{ns}.component.{c}.endpoint.{ep}.{topic}`. */
export function eventSubject(scope: EventScope, topic: string): string {
  return [
    'namespace',
    escapeSegment(scope.namespace),
    'component',
    escapeSegment(scope.component),
    'endpoint',
    escapeSegment(scope.endpoint),
    escapeSegment(topic),
  ].join('.');
}

/** The prefix of every publisher's record of `topic` in `scope`, inside `v1/event_channels` or `v1/event_sources`. */
export function eventRecordPrefix(scope: EventScope, topic: string): string {
  return `namespace/${scope.namespace}/component/${scope.component}/endpoint/${scope.endpoint}/topic/${topic}/`;
}

/** One publisher's record key: the prefix and its id in lower-case hex. */
export function eventRecordKey(scope: EventScope, topic: string, publisherId: bigint): string {
  return eventRecordPrefix(scope, topic) + hexId(publisherId);
}
