// Which address a server other hosts dial binds and advertises, by stock Dynamo 1.6.1's rule
// (`DYN_TCP_RPC_HOST`, `DYN_TCP_RESPONSE_STREAM_HOST`, `DYN_EVENT_PLANE_HOST`): this host's routable
// address unless told otherwise, so a worker registered in etcd can be reached from another machine.

import { readFileSync } from 'node:fs';
import { isIP, isIPv4 } from 'node:net';
import { networkInterfaces } from 'node:os';
import { InvalidArgument } from '../errors.js';

/** One address of a network interface. */
export interface InterfaceAddress {
  name: string;
  address: string;
  family: 'IPv4' | 'IPv6';
}

/** What the resolver reads of this host; injectable so the rule can be tested on any machine. */
export interface HostInterfaces {
  /** Addresses of the interfaces that are up, in the kernel's order. */
  addresses(): InterfaceAddress[];
  /** The name of the interface that carries the IPv4 default route, if there is one. */
  defaultRouteInterface(): string | undefined;
}

/** Where a server binds, what it advertises, and whether it fell back to loopback for want of anything else. */
export interface ResolvedHost {
  bind: string;
  advertise: string;
  loopbackFallback: boolean;
}

/** This machine's interfaces (Node lists those that are up and running). */
export const systemInterfaces: HostInterfaces = {
  addresses: () => Object.entries(networkInterfaces()).flatMap(([name, addrs]) => (addrs ?? []).map((a) => ({ name, address: a.address, family: a.family }))),
  defaultRouteInterface: () => {
    try {
      // Columns: Iface Destination Gateway Flags ...; the default route's destination is 00000000.
      for (const line of readFileSync('/proc/net/route', 'utf8').split('\n').slice(1)) {
        const [iface, destination] = line.trim().split(/\s+/);
        if (destination === '00000000' && iface) return iface;
      }
    } catch {
      // Not Linux: the interface order alone decides.
    }
    return undefined;
  },
};

const isLoopback = (ip: string) => (isIPv4(ip) ? ip.startsWith('127.') : ip === '::1');
const isUnspecified = (ip: string) => ip === '0.0.0.0' || ip === '::';

/** Addresses nobody can be told to dial: unspecified, multicast, broadcast, IPv6 link-local (as stock). */
function usable(ip: string): boolean {
  if (isUnspecified(ip)) return false;
  if (isIPv4(ip)) {
    const first = Number(ip.split('.')[0]);
    return ip !== '255.255.255.255' && !(first >= 224 && first <= 239);
  }
  const lower = ip.toLowerCase();
  return !lower.startsWith('ff') && !/^fe[89ab]/.test(lower);
}

/** The first usable address of each kind, in the order given. */
function pick(addresses: readonly string[]): { v4?: string; v6?: string; loop4?: string; loop6?: string } {
  const found: { v4?: string; v6?: string; loop4?: string; loop6?: string } = {};
  for (const ip of addresses) {
    if (!usable(ip)) continue;
    const kind = isIPv4(ip) ? (isLoopback(ip) ? 'loop4' : 'v4') : isLoopback(ip) ? 'loop6' : 'v6';
    found[kind] ??= ip;
  }
  return found;
}

/** Every up address, the default route's interface first (stock asks the routing table first, then lists interfaces). */
function localAddresses(sys: HostInterfaces): string[] {
  const all = sys.addresses();
  const routed = sys.defaultRouteInterface();
  return [...all.filter((a) => a.name === routed), ...all.filter((a) => a.name !== routed)].map((a) => a.address);
}

/** Strips `[...]` from an IPv6 literal; throws on a half-bracketed one. */
function unbracket(value: string, variable: string): string {
  const open = value.startsWith('[');
  const close = value.endsWith(']');
  if (open !== close) throw new InvalidArgument(`${variable}: '${value}' is not a valid IP address`);
  return open ? value.slice(1, -1) : value;
}

/**
 * Resolves `value` (an environment variable's text, `undefined` when unset) to a bind and advertise
 * address, the way stock Dynamo 1.6.1 does:
 * - unset: bind and advertise this host's first non-loopback IPv4 address (the default route's
 *   interface first), else IPv6, else loopback (`loopbackFallback`);
 * - an IP literal (`10.0.0.5`, `::1`, `[fd00::2]`): that address, both ways;
 * - a wildcard (`0.0.0.0`, `::`): bind it, advertise the first non-loopback address of its family
 *   (of the other family, bound by that family's wildcard, when the host has none), else loopback;
 * - anything else is an interface name (`eth0`, `ib0`): that interface's address, non-loopback first.
 *
 * Throws `InvalidArgument` naming `variable` for an address nobody can dial or an unknown interface.
 */
export function resolveHost(value: string | undefined, variable: string, sys: HostInterfaces = systemInterfaces): ResolvedHost {
  const text = value?.trim() ?? '';
  if (text === '') {
    const found = pick(localAddresses(sys));
    const routable = found.v4 ?? found.v6;
    if (routable !== undefined) return { bind: routable, advertise: routable, loopbackFallback: false };
    const loopback = found.loop4 ?? found.loop6 ?? '127.0.0.1';
    return { bind: loopback, advertise: loopback, loopbackFallback: true };
  }
  const literal = unbracket(text, variable);
  if (isIP(literal) !== 0) {
    if (isUnspecified(literal)) return resolveWildcard(literal, pick(localAddresses(sys)));
    if (!usable(literal)) throw new InvalidArgument(`${variable}: ${literal} cannot be dialled by other hosts (multicast, broadcast or link-local)`);
    return { bind: literal, advertise: literal, loopbackFallback: false };
  }
  if (/^[\d.]+$/.test(literal) || literal.split(':').length > 2) throw new InvalidArgument(`${variable}: '${text}' is not a valid IP address`);
  const all = sys.addresses();
  const own = all.filter((a) => a.name === literal);
  if (own.length === 0) {
    const names = [...new Set(all.map((a) => a.name))].join(', ');
    throw new InvalidArgument(
      `${variable}: '${text}' is neither an IP address nor a network interface of this host (interfaces that are up: ${names || 'none'})`,
    );
  }
  const found = pick(own.map((a) => a.address));
  const address = found.v4 ?? found.v6 ?? found.loop4 ?? found.loop6;
  if (address === undefined) throw new InvalidArgument(`${variable}: interface ${literal} has no address other hosts can dial`);
  return { bind: address, advertise: address, loopbackFallback: false };
}

function resolveWildcard(wildcard: string, found: ReturnType<typeof pick>): ResolvedHost {
  const v4 = isIPv4(wildcard);
  const same = v4 ? found.v4 : found.v6;
  if (same !== undefined) return { bind: wildcard, advertise: same, loopbackFallback: false };
  const other = v4 ? found.v6 : found.v4;
  if (other !== undefined) return { bind: v4 ? '::' : '0.0.0.0', advertise: other, loopbackFallback: false };
  const loopback = (v4 ? found.loop4 : found.loop6) ?? found.loop4 ?? found.loop6 ?? (v4 ? '127.0.0.1' : '::1');
  return { bind: isIPv4(loopback) ? '0.0.0.0' : '::', advertise: loopback, loopbackFallback: true };
}
