// A client in its own process: waits for `demo.echo.generate` workers, sends a few requests round
// robin, and prints which instance answered each.
//
//   tsx src/client.ts [requests=4]
import { DistributedRuntime, runtimeOverridesFromArgv } from '@dynamo/runtime';

const requests = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 4);
const runtime = await DistributedRuntime.create({ overrides: runtimeOverridesFromArgv(process.argv.slice(2)) });
try {
  const client = await runtime.endpoint('demo.echo.generate').client();
  const instances = await client.waitForInstances({ timeoutMs: 30_000 });
  console.log(`found ${instances.length} instance(s): ${instances.map((id) => id.toString(16)).join(', ')}`);
  for (let n = 0; n < requests; n++) {
    const words: string[] = [];
    let served = '';
    for await (const item of client.roundRobin<{ word: string; instance: string }>({ prompt: `request ${n} says hello`, delayMs: 5 })) {
      words.push(item.word);
      served = item.instance;
    }
    console.log(`request ${n} served by ${served}: ${words.join(' ')}`);
  }
} finally {
  await runtime.shutdown();
}
