import { readmeSuite } from '../../runtime/test/harness/readme.js';

readmeSuite(import.meta.url, 1);
