// The README's TypeScript snippets compile against the package; the walk-through's graph
// snippet is written to `graph.ts` next to the others, so the client and test snippets that
// import it compile too.
import { readmeSuite } from '@dynamo/testing/readme';

readmeSuite(import.meta.url, 3, { 'graph.ts': 0 });
