import { testConfig } from '@dynamo/testing/vitest-config';

export default testConfig();
