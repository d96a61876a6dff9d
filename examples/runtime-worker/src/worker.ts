// A Dynamo worker written with the low-level API: it serves `demo.echo.generate`, streaming the
// words of the prompt back one by one. Start several; they share the load.
//
//   tsx src/worker.ts            # embedded default: file discovery + tcp, no servers needed
//   DYN_DISCOVERY_BACKEND=etcd DYN_REQUEST_PLANE=nats tsx src/worker.ts
import { setTimeout as sleep } from 'node:timers/promises';
import { type Context, dynamoWorker, InvalidArgument } from '@dynamo/runtime';

interface EchoRequest {
  prompt: string;
  delayMs?: number;
}

await dynamoWorker(async (runtime) => {
  const component = runtime.namespace('demo').component('echo');
  await component.createService();
  const instance = runtime.instanceId.toString(16);

  const served = await component.endpoint('generate').serveEndpoint(async function* (request: EchoRequest, context: Context) {
    if (typeof request?.prompt !== 'string') throw new InvalidArgument('request.prompt must be a string');
    for (const word of request.prompt.split(/\s+/).filter(Boolean)) {
      if (context.isStopped()) return;
      yield { word, instance };
      await sleep(request.delayMs ?? 20, undefined, { signal: context.signal }).catch(() => {});
    }
  });

  console.log(`worker ${instance} serving demo.echo.generate (Ctrl-C to stop)`);
  await served.closed;
});
