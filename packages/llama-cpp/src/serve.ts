import { run } from '@dynamo/backend';

import { LlamaCppEngine } from './engine.js';

process.exitCode = await run(LlamaCppEngine, process.argv.slice(2));
