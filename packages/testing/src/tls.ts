import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * PEM files for a TLS test: a CA, a server certificate it signed for 127.0.0.1/localhost, and a
 * client certificate it signed (for servers that require one).
 */
export interface TestTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  /** Deletes the files. */
  remove(): void;
}

const scratchDirs = new Set<string>();
let exitHookInstalled = false;

/** Makes a throwaway CA, server and client certificate with `openssl` (EC P-256, one day). */
export function makeTestTlsFiles(): TestTlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'dynamo-test-tls-'));
  scratchDirs.add(dir);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const d of scratchDirs) rmSync(d, { recursive: true, force: true });
    });
  }
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=dynamo-ts test CA',
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
  );
  const signed = (name: string, subject: string, extensions: string) => {
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', subject, '-keyout', at(`${name}.key`), '-out', at(`${name}.csr`));
    writeFileSync(at(`${name}.cnf`), extensions);
    openssl(
      'x509',
      '-req',
      '-in',
      at(`${name}.csr`),
      '-CA',
      at('ca.pem'),
      '-CAkey',
      at('ca.key'),
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      at(`${name}.cnf`),
      '-out',
      at(`${name}.pem`),
    );
  };
  signed('server', '/CN=127.0.0.1', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  signed('client', '/CN=root', 'extendedKeyUsage=clientAuth\n');
  return {
    caFile: at('ca.pem'),
    certFile: at('server.pem'),
    keyFile: at('server.key'),
    clientCertFile: at('client.pem'),
    clientKeyFile: at('client.key'),
    remove() {
      rmSync(dir, { recursive: true, force: true });
      scratchDirs.delete(dir);
    },
  };
}
