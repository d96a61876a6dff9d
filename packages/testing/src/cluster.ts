// Several hosts on one machine, for tests of what crosses a network: each host is a network
// namespace with one interface (eth0) on a bridge, an address of its own in 198.18.N.0/24 (the
// benchmarking range, RFC 2544) and no route but that subnet's, so nothing sent to a host's address
// can leave the machine. This machine joins the bridge as the subnet's .1 (the tests' own host, and
// where Toxiproxy listens). Faults are functions: a host's link down and up, kill -9 of everything
// on a host, and per link latency, bandwidth, a cut or a reset (Toxiproxy) and packet loss (an
// nftables drop rule: Toxiproxy works on streams, loss is a packet's fate).
import { ip, nft, run, sweepStaleClusters } from './netns.js';
import type { Placement } from './placement.js';
import { Toxiproxy, type ToxicAttributes } from './toxiproxy.js';

/** The first address of a cluster's hosts in its /24; .1 is this machine. */
const FIRST_HOST = 10;

/** One host of a {@link Cluster}: a place to start processes, and the faults of its link. */
export class ClusterHost implements Placement {
  readonly name: string;
  readonly address: string;
  /** Its network namespace. */
  readonly ns: string;
  /** This machine's end of its link (a veth port on the bridge). */
  readonly #port: string;

  /** @internal Made by {@link Cluster.create}. */
  constructor(name: string, address: string, ns: string, port: string) {
    this.name = name;
    this.address = address;
    this.ns = ns;
    this.#port = port;
  }

  command(command: string, args: readonly string[]): { command: string; args: string[] } {
    return { command: 'ip', args: ['netns', 'exec', this.ns, command, ...args] };
  }

  /** Takes its link down, as a pulled cable or a dead switch port: no FIN, no RST, nothing gets through either way. */
  async partition(): Promise<void> {
    await ip('link', 'set', this.#port, 'down');
  }

  /** Brings its link back up. */
  async heal(): Promise<void> {
    await ip('link', 'set', this.#port, 'up');
  }

  /** SIGKILLs every process on the host (a host that lost power, as its processes see it). */
  async kill9(): Promise<void> {
    const pids = (await ip('netns', 'pids', this.ns)).split(/\s+/).filter(Boolean);
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }

  /** The TCP ports its processes listen on for other hosts (loopback-only listeners left out). */
  async listeningPorts(): Promise<number[]> {
    const out = await run('ip', ['netns', 'exec', this.ns, 'ss', '-tlnH']);
    const ports = new Set<number>();
    for (const line of out.split('\n')) {
      const local = line.trim().split(/\s+/)[3];
      if (!local || local.startsWith('127.') || local.startsWith('[::1]')) continue;
      ports.add(Number(local.slice(local.lastIndexOf(':') + 1)));
    }
    return [...ports].sort((x, y) => x - y);
  }
}

/**
 * The TCP between two hosts, through Toxiproxy: connections either host opens to the other's ports
 * after {@link Cluster.link} go through a proxy of their own, whose toxics these methods set for
 * both directions. Connections opened before it stay direct.
 */
export class Link {
  readonly #proxy: Toxiproxy;
  readonly #proxies: string[];
  readonly #toxics = new Set<string>();

  /** @internal Made by {@link Cluster.link}. */
  constructor(proxy: Toxiproxy, proxies: string[]) {
    this.#proxy = proxy;
    this.#proxies = proxies;
  }

  /** Adds `ms` (± `jitterMs`) to every piece of data each way: the round trip grows by twice that. */
  latency(ms: number, jitterMs = 0): Promise<void> {
    return this.#set('latency', { latency: ms, jitter: jitterMs });
  }

  /** Limits each direction of each connection to `kilobytesPerSecond`. */
  bandwidth(kilobytesPerSecond: number): Promise<void> {
    return this.#set('bandwidth', { rate: kilobytesPerSecond });
  }

  /** Stops all data both ways and keeps the connections open: a link that went silent. */
  cut(): Promise<void> {
    return this.#set('timeout', { timeout: 0 });
  }

  /** Resets every connection on the link, and each new one as it opens. */
  reset(): Promise<void> {
    return this.#set('reset_peer', { timeout: 0 });
  }

  /** Removes every toxic: the link is as fast as the proxy. */
  async heal(): Promise<void> {
    const toxics = [...this.#toxics];
    this.#toxics.clear();
    await Promise.all(this.#proxies.flatMap((p) => toxics.flatMap((t) => [`${t}-up`, `${t}-down`].map((name) => this.#proxy.removeToxic(p, name)))));
  }

  async #set(type: string, attributes: ToxicAttributes): Promise<void> {
    if (this.#toxics.has(type)) {
      await Promise.all(this.#proxies.flatMap((p) => [this.#proxy.removeToxic(p, `${type}-up`), this.#proxy.removeToxic(p, `${type}-down`)]));
    }
    this.#toxics.add(type);
    await Promise.all(
      this.#proxies.flatMap((p) => [
        this.#proxy.addToxic(p, `${type}-up`, type, 'upstream', attributes),
        this.#proxy.addToxic(p, `${type}-down`, type, 'downstream', attributes),
      ]),
    );
  }
}

/** Hosts on one bridge. Create with {@link Cluster.create}; {@link Cluster.destroy} removes everything. */
export class Cluster {
  /** The cluster's number: its subnet is 198.18.`id`.0/24. */
  readonly id: number;
  /** This machine's address on the bridge (where Toxiproxy's proxies listen). */
  readonly gateway: string;
  readonly #bridge: string;
  readonly #hosts = new Map<string, ClusterHost>();
  readonly #toxiproxyBin: string | undefined;
  #toxiproxy: Promise<Toxiproxy> | undefined;
  /** Loss per host, by peer address, in percent: each host's drop rules are rewritten whole. */
  readonly #loss = new Map<ClusterHost, Map<string, number>>();
  #links = 0;

  private constructor(id: number, toxiproxyBin: string | undefined) {
    this.id = id;
    this.gateway = `198.18.${id}.1`;
    this.#bridge = `dyb${id}`;
    this.#toxiproxyBin = toxiproxyBin;
  }

  /**
   * Creates a bridge and one host per name (in parallel). `toxiproxy` is the server binary
   * ({@link toxiproxyBinary}), needed for {@link link}. Check {@link clusterUnsupported} first.
   */
  static async create(names: readonly string[], options: { toxiproxy?: string } = {}): Promise<Cluster> {
    if (new Set(names).size !== names.length) throw new Error(`host names must differ: ${names.join(', ')}`);
    if (names.length > 200) throw new Error('at most 200 hosts');
    await sweepStaleClusters();
    const routes = await ip('-4', 'route', 'show', 'table', 'all');
    for (let attempt = 0; ; attempt++) {
      const id = 1 + Math.floor(Math.random() * 254);
      // A subnet this machine already routes somewhere (its own, say) is never used.
      if (routes.includes(`198.18.${id}.`)) continue;
      try {
        // Taking the bridge's name is the lock on the number: a second creator fails here.
        await ip('link', 'add', `dyb${id}`, 'type', 'bridge', 'nf_call_iptables', '0', 'nf_call_ip6tables', '0', 'nf_call_arptables', '0');
      } catch (err) {
        if (attempt < 20) continue;
        throw err;
      }
      const cluster = new Cluster(id, options.toxiproxy);
      try {
        await cluster.#build(names);
      } catch (err) {
        await cluster.destroy();
        throw err;
      }
      return cluster;
    }
  }

  async #build(names: readonly string[]): Promise<void> {
    await ip('addr', 'add', `${this.gateway}/24`, 'dev', this.#bridge);
    await ip('link', 'set', this.#bridge, 'up');
    for (const name of names) if (!/^[a-z0-9-]{1,20}$/.test(name)) throw new Error(`host name '${name}' must be 1-20 of [a-z0-9-]`);
    // Listed before they exist, so that destroy() after a failure removes whatever was made.
    names.forEach((name, i) => {
      this.#hosts.set(name, new ClusterHost(name, `198.18.${this.id}.${FIRST_HOST + i}`, `dyn-${process.pid}-${this.id}-${name}`, `dy${this.id}v${i}`));
    });
    await Promise.all(this.hosts.map((host, i) => this.#addHost(host, i)));
  }

  async #addHost(host: ClusterHost, index: number): Promise<void> {
    const { ns, address } = host;
    const port = `dy${this.id}v${index}`;
    const inside = `dy${this.id}p${index}`;
    await ip('netns', 'add', ns);
    await ip('link', 'add', port, 'type', 'veth', 'peer', 'name', inside, 'netns', ns);
    await ip('-n', ns, 'link', 'set', inside, 'name', 'eth0');
    await ip('-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
    await ip('-n', ns, 'link', 'set', 'eth0', 'up');
    await ip('-n', ns, 'link', 'set', 'lo', 'up');
    await ip('link', 'set', port, 'master', this.#bridge, 'up');
    await nft(
      ns,
      ['table ip dynamo {', '  chain nat_out { type nat hook output priority -100; }', '  chain loss_out { type filter hook output priority 0; }', '}'].join(
        '\n',
      ),
    );
  }

  /** The host named `name`. */
  host(name: string): ClusterHost {
    const host = this.#hosts.get(name);
    if (!host) throw new Error(`no host '${name}' in this cluster (hosts: ${[...this.#hosts.keys()].join(', ')})`);
    return host;
  }

  /** Every host, in creation order. */
  get hosts(): ClusterHost[] {
    return [...this.#hosts.values()];
  }

  /**
   * Puts Toxiproxy between hosts `a` and `b`: from now on, a connection either opens to a port the
   * other listens on now goes through a proxy of its own (nftables DNAT on the dialling host).
   */
  async link(a: string, b: string): Promise<Link> {
    const [ha, hb] = [this.host(a), this.host(b)];
    const proxy = await this.#proxyServer();
    const n = this.#links++;
    const names: string[] = [];
    for (const [from, to] of [
      [ha, hb],
      [hb, ha],
    ] as const) {
      const rules: string[] = [];
      for (const port of await to.listeningPorts()) {
        const name = `l${n}-${from.name}-${to.name}-${port}`;
        const listen = await proxy.createProxy(name, `${this.gateway}:0`, `${to.address}:${port}`);
        names.push(name);
        rules.push(`add rule ip dynamo nat_out ip daddr ${to.address} tcp dport ${port} dnat to ${listen}`);
      }
      if (rules.length > 0) await nft(from.ns, rules.join('\n'));
    }
    return new Link(proxy, names);
  }

  /** Drops `percent` of the packets each way between `a` and `b` (0 removes the loss); direct connections only, not a {@link link}'s. */
  async loss(a: string, b: string, percent: number): Promise<void> {
    const [ha, hb] = [this.host(a), this.host(b)];
    for (const [from, to] of [
      [ha, hb],
      [hb, ha],
    ] as const) {
      const peers = this.#loss.get(from) ?? new Map<string, number>();
      this.#loss.set(from, peers);
      if (percent > 0) peers.set(to.address, percent);
      else peers.delete(to.address);
      const rules = [...peers].map(([address, p]) =>
        p >= 100
          ? `add rule ip dynamo loss_out ip daddr ${address} drop`
          : `add rule ip dynamo loss_out ip daddr ${address} numgen random mod 1000 < ${Math.round(p * 10)} drop`,
      );
      await nft(from.ns, ['flush chain ip dynamo loss_out', ...rules].join('\n'));
    }
  }

  /**
   * Drops every packet between `a` and `b`, both ways, leaving each host's other links alone (a
   * firewall or a routing fault between two hosts); {@link restore} lifts it. Unlike a
   * {@link Link}'s cut it holds for connections already open.
   */
  cut(a: string, b: string): Promise<void> {
    return this.loss(a, b, 100);
  }

  /** Lifts a {@link cut} (or any {@link loss}) between `a` and `b`. */
  restore(a: string, b: string): Promise<void> {
    return this.loss(a, b, 0);
  }

  #proxyServer(): Promise<Toxiproxy> {
    if (this.#toxiproxyBin === undefined) throw new Error('this cluster was created without a Toxiproxy binary (Cluster.create(names, { toxiproxy }))');
    this.#toxiproxy ??= Toxiproxy.start(this.#toxiproxyBin);
    return this.#toxiproxy;
  }

  /** Kills every process on every host, stops Toxiproxy and removes the hosts and the bridge. */
  async destroy(): Promise<void> {
    const hosts = [...this.#hosts.values()];
    await Promise.all(hosts.map((h) => h.kill9().catch(() => undefined)));
    await (await this.#toxiproxy?.catch(() => undefined))?.stop();
    // A namespace goes once its last process has; deleting it takes its veth pair along.
    await Promise.all(hosts.map((h) => ip('netns', 'del', h.ns).catch(() => undefined)));
    await ip('link', 'del', this.#bridge).catch(() => undefined);
    this.#hosts.clear();
  }
}
