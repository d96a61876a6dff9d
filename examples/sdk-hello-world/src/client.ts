// A client in a process of its own: getRuntime() joins the same deployment (the environment
// picks file or etcd discovery), and serviceClient() gives TextProcessor's endpoints, typed.
import { getRuntime, serviceClient } from '@dynamo/sdk';

import { TextProcessor } from './text-processor.js';

const text = process.argv.slice(2).join(' ') || 'hello from a client';
const runtime = await getRuntime();
try {
  for await (const record of serviceClient(TextProcessor, runtime).process({ text })) console.log(JSON.stringify(record));
} finally {
  await runtime.shutdown();
}
