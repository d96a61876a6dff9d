// The platforms @dynamo/core publishes a native binary for, named as napi-rs names them
// (`linux-arm64-musl`, `darwin-x64`, ...). The list is package.json's napi.targets.
import { createRequire } from 'node:module';

const { napi } = createRequire(import.meta.url)('./package.json');
const ARCH = { x86_64: 'x64', aarch64: 'arm64' };

/** napi-rs's platform name for a Rust target triple (`aarch64-unknown-linux-musl` → `linux-arm64-musl`). */
export function platformOf(triple) {
  const [arch, , os, abi] = triple.split('-');
  const cpu = ARCH[arch] ?? arch;
  return os === 'darwin' ? `darwin-${cpu}` : `${os}-${cpu}${abi ? `-${abi}` : ''}`;
}

/** This process's platform name; on Linux, musl when Node reports no glibc. */
export function currentPlatform() {
  const { platform, arch } = process;
  if (platform !== 'linux') return `${platform}-${arch}`;
  process.report.excludeNetwork = true;
  return `linux-${arch}-${process.report.getReport().header.glibcVersionRuntime ? 'gnu' : 'musl'}`;
}

/** Every released target: its Rust triple and platform name. */
export const targets = napi.targets.map((triple) => ({ triple, platform: platformOf(triple) }));
