import { DirectRouter, LeastLoadedRouter, PowerOfTwoRouter, RandomRouter, RoundRobinRouter } from './basic-routers.js';
import { KvAwareRouter, type KvRouterDeps, type KvRouterSettings } from './kv-router.js';
import type { RouterFactory, RouterMode } from './router.js';

/** The factory for a built-in mode; `kv` needs what the KV router reads events from. */
export function routerFactory(mode: RouterMode, kv?: { settings: KvRouterSettings; deps: KvRouterDeps }): RouterFactory {
  switch (mode) {
    case 'round-robin':
      return () => new RoundRobinRouter();
    case 'random':
      return () => new RandomRouter();
    case 'power-of-two':
      return () => new PowerOfTwoRouter();
    case 'least-loaded':
      return () => new LeastLoadedRouter();
    case 'direct':
      return () => new DirectRouter();
    case 'kv':
      if (!kv) throw new TypeError('router mode kv needs the KV router settings and runtime');
      return (model, card) => new KvAwareRouter(model, card, kv.settings, kv.deps);
  }
}
