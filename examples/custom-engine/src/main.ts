import { run } from '@dynamo/backend';
import { EchoEngine } from './echo-engine.js';
await run(EchoEngine);
