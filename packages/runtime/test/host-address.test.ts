import { describe, expect, it } from 'vitest';
import { loadRuntimeConfig } from '../src/config.js';
import { type HostInterfaces, type InterfaceAddress, resolveHost } from '../src/wire/host-address.js';

/** A host with these interfaces (up, in this order) and, optionally, the default route on one of them. */
function host(addresses: Array<[name: string, address: string]>, defaultRoute?: string): HostInterfaces {
  const list: InterfaceAddress[] = addresses.map(([name, address]) => ({ name, address, family: address.includes(':') ? 'IPv6' : 'IPv4' }));
  return { addresses: () => list, defaultRouteInterface: () => defaultRoute };
}

const twoNics = host(
  [
    ['lo', '127.0.0.1'],
    ['lo', '::1'],
    ['ib0', '10.1.0.7'],
    ['eth0', 'fe80::1'],
    ['eth0', '192.168.5.20'],
    ['eth0', 'fd00::20'],
  ],
  'eth0',
);

describe('the address a server binds and advertises (stock 1.6.1 rule)', () => {
  it('defaults to the IPv4 address of the interface with the default route, bound and advertised alike', () => {
    expect(resolveHost(undefined, 'DYN_TCP_RPC_HOST', twoNics)).toEqual({ bind: '192.168.5.20', advertise: '192.168.5.20', loopbackFallback: false });
  });

  it('without a default route takes the first up interface that has a routable IPv4 address, then IPv6', () => {
    const noRoute = host([
      ['lo', '127.0.0.1'],
      ['veth0', 'fe80::9'],
      ['veth0', '198.18.3.4'],
    ]);
    expect(resolveHost('', 'DYN_TCP_RPC_HOST', noRoute).advertise).toBe('198.18.3.4');
    const v6Only = host([
      ['lo', '127.0.0.1'],
      ['eth0', 'fe80::9'],
      ['eth0', 'fd00::9'],
    ]);
    expect(resolveHost(undefined, 'X', v6Only)).toEqual({ bind: 'fd00::9', advertise: 'fd00::9', loopbackFallback: false });
  });

  it('falls back to loopback, and says so, on a host with nothing else', () => {
    expect(resolveHost(undefined, 'X', host([['lo', '127.0.0.1']]))).toEqual({ bind: '127.0.0.1', advertise: '127.0.0.1', loopbackFallback: true });
  });

  it('takes an IP literal as it is, bracketed IPv6 included', () => {
    expect(resolveHost('127.0.0.1', 'X', twoNics)).toEqual({ bind: '127.0.0.1', advertise: '127.0.0.1', loopbackFallback: false });
    expect(resolveHost(' [fd00::20] ', 'X', twoNics).bind).toBe('fd00::20');
  });

  it('binds a wildcard and advertises a routable address of its family', () => {
    expect(resolveHost('0.0.0.0', 'X', twoNics)).toEqual({ bind: '0.0.0.0', advertise: '192.168.5.20', loopbackFallback: false });
    expect(resolveHost('::', 'X', twoNics)).toEqual({ bind: '::', advertise: 'fd00::20', loopbackFallback: false });
    const v4Only = host([['eth0', '10.0.0.2']]);
    expect(resolveHost('::', 'X', v4Only)).toEqual({ bind: '0.0.0.0', advertise: '10.0.0.2', loopbackFallback: false });
  });

  it('reads a name as an interface of this host', () => {
    expect(resolveHost('ib0', 'X', twoNics).advertise).toBe('10.1.0.7');
    expect(resolveHost('lo', 'X', twoNics).advertise).toBe('127.0.0.1');
  });

  it('names the variable and what was wrong with an unknown interface or an address nobody can dial', () => {
    expect(() => resolveHost('localhost', 'DYN_TCP_RPC_HOST', twoNics)).toThrow(
      /DYN_TCP_RPC_HOST: 'localhost' is neither an IP address nor a network interface of this host \(interfaces that are up: lo, ib0, eth0\)/,
    );
    expect(() => resolveHost('224.0.0.1', 'DYN_TCP_RPC_HOST', twoNics)).toThrow(/DYN_TCP_RPC_HOST: 224.0.0.1 cannot be dialled/);
    expect(() => resolveHost('10.0.0.300', 'DYN_TCP_RPC_HOST', twoNics)).toThrow(/not a valid IP address/);
    expect(() => resolveHost('[fd00::1', 'DYN_TCP_RPC_HOST', twoNics)).toThrow(/not a valid IP address/);
  });

  it('gives the runtime config routable addresses by default, with the advertise overrides on top', () => {
    const config = loadRuntimeConfig({ DYN_TCP_RESPONSE_STREAM_ADVERTISE_HOST: 'frontend-0.example' }, {}, twoNics);
    expect(config.tcp).toMatchObject({
      rpcHost: '192.168.5.20',
      rpcAdvertiseHost: '192.168.5.20',
      responseStreamHost: '192.168.5.20',
      responseStreamAdvertiseHost: 'frontend-0.example',
    });
    expect(config.eventPlane.host).toBe('192.168.5.20');
    expect(loadRuntimeConfig({ DYN_EVENT_PLANE_HOST: 'ib0' }, {}, twoNics).eventPlane.host).toBe('10.1.0.7');
    expect(() => loadRuntimeConfig({ DYN_TCP_RESPONSE_STREAM_HOST: 'eth9' }, {}, twoNics)).toThrow(/DYN_TCP_RESPONSE_STREAM_HOST: 'eth9'/);
  });
});
