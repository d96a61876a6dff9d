import { fileURLToPath } from 'node:url';

/** The setup file every package's vitest config lists: failure reports of processes and waits. */
export const reportOnFailure = fileURLToPath(new URL('./report-on-failure.js', import.meta.url));
