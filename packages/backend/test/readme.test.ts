import { readmeSuite } from '@dynamo/testing/readme';

readmeSuite(import.meta.url, 3);
