import { describe, expect, it } from 'vitest';
import { KvRouter } from '@dynamo/core';

const prompt = (n: number) => Uint32Array.from({ length: n }, (_, i) => i + 1);
const worker = { workerId: 7n, totalBlocks: 100 };

describe('KvRouter through the binding', () => {
  it('routes again once a lower busy threshold is lifted at run time', () => {
    const router = new KvRouter({ blockSize: 4 });
    expect(router.route('a', prompt(20), [worker], 0, 0)).not.toBeNull();
    router.setBusyThresholds({ activePrefillTokensThreshold: 10 });
    expect(router.route('b', prompt(20), [worker], 0, 0)).toBeNull();
    router.setBusyThresholds({ activeDecodeBlocksThreshold: null, activePrefillTokensThreshold: null });
    expect(router.route('b', prompt(20), [worker], 0, 0)?.workerId).toBe(7n);
    expect(() => router.setBusyThresholds({ activeDecodeBlocksThreshold: 2 })).toThrow(/activeDecodeBlocksThreshold must be at most 1, got 2/);
    expect(() => router.setBusyThresholds({ activePrefillTokensThreshold: 1.5 })).toThrow(/activePrefillTokensThreshold must be a non-negative integer/);
  });

  it("reports each worker rank's predicted load after route and free", () => {
    const router = new KvRouter({ blockSize: 4 });
    expect(router.workerLoads()).toEqual([]);
    router.route('a', prompt(8), [{ workerId: 7n, dpRank: 1 }], 0, 0);
    expect(router.workerLoads()).toEqual([{ workerId: 7n, dpRank: 1, decodeBlocks: 2, prefillTokens: 8, requests: 1 }]);
    router.prefillDone('a');
    expect(router.workerLoads()[0]?.prefillTokens).toBe(0);
    router.free('a');
    expect(router.workerLoads()).toEqual([{ workerId: 7n, dpRank: 1, decodeBlocks: 0, prefillTokens: 0, requests: 0 }]);
  });

  it("counts a peer router's bookings from its replica-sync envelopes", () => {
    const mine = new KvRouter({ blockSize: 4 });
    const peer = new KvRouter({ blockSize: 4 });
    const [myId, peerId] = [1n, 2n];
    mine.route('r', prompt(12), [worker], 0, 0, 'sql');
    for (const batch of [false, true]) {
      const add = mine.replicaEventEnvelope(10n, 0n, Date.now(), myId, 'r', 'add', batch)!;
      expect(peer.applyReplicaEnvelope(add, peerId, true)).toEqual({ applied: 1, ignored: 0 });
      expect(peer.workerLoads()).toEqual([{ workerId: 7n, dpRank: 0, decodeBlocks: 3, prefillTokens: 12, requests: 1 }]);
      // Its own echo, and anything but a prefill mark with sync off, are ignored.
      expect(mine.applyReplicaEnvelope(add, myId, true)).toEqual({ applied: 0, ignored: 1 });
      const free = mine.replicaEventEnvelope(10n, 1n, Date.now(), myId, 'r', 'free', batch)!;
      expect(peer.applyReplicaEnvelope(free, peerId, false)).toEqual({ applied: 0, ignored: 1 });
      expect(peer.applyReplicaEnvelope(free, peerId, true)).toEqual({ applied: 1, ignored: 0 });
      expect(peer.workerLoads()[0]?.requests).toBe(0);
    }
    expect(mine.replicaEventEnvelope(10n, 2n, 0, myId, 'unknown', 'add', false)).toBeNull();
    expect(() => mine.replicaEventEnvelope(10n, 2n, 0, myId, 'r', 'evict' as 'add', false)).toThrow(/kind must be/);
    expect(() => peer.applyReplicaEnvelope(Uint8Array.of(0xc1), peerId, true)).toThrow(/not an event-plane envelope/);
  });
});
