// pnpm release:build [--target <platform>]...
// Cross-builds @dynamo/core's native binary for every released platform (or the ones named) with
// cargo-zigbuild, in the `dist` profile (release, stripped), into packages/core/npm/<platform>/.
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { targets } from '../../packages/core/platforms.js';
import { binaryFormat, expectedFormat } from './binary-format.mjs';
import { crossEnv, ensureRustTarget } from './toolchain.mjs';
import { inputsHash, recordVerified, VERIFIED_FILE } from './verified-inputs.mjs';
import { cli, npmDir, readJson, repoRoot, run } from './util.mjs';

/** Node 20's own floors: its Linux builds need glibc 2.28, its macOS builds 11.0 / 10.15. */
const GLIBC_FLOOR = '2.28';
const MACOS_FLOOR = { 'darwin-arm64': '11.0', 'darwin-x64': '10.15' };

const HELP = `Usage: pnpm release:build [--target <platform>]...

Cross-builds @dynamo/core's native binary (release profile, stripped) for each platform into
packages/core/npm/<platform>/, installing zig and cargo-zigbuild (PyPI) and the targets' Rust
standard libraries (rustup) on first use.

  --target, -t <platform>  only this platform (repeatable); default: all of
                           ${targets.map((t) => t.platform).join(', ')}
  --help, -h               this text

Linux glibc builds need glibc >= ${GLIBC_FLOOR} (Node 20's own floor); macOS builds need
${MACOS_FLOOR['darwin-arm64']} (arm64) or ${MACOS_FLOOR['darwin-x64']} (x64). The CUDA kernels are built only natively where nvcc is present; every other build
carries the stubs, and kernels.buildInfo() says why.`;

/** Cargo's per-target RUSTFLAGS variable. */
const rustflagsVar = (triple) => `CARGO_TARGET_${triple.toUpperCase().replaceAll('-', '_')}_RUSTFLAGS`;

/** How cargo-zigbuild is asked for one target: the triple it gets and the extra environment. */
function crossSettings({ triple, platform }, binaryName) {
  if (triple.endsWith('-linux-gnu')) return { zigTarget: `${triple}.${GLIBC_FLOOR}`, env: {} };
  if (triple.endsWith('-linux-musl')) {
    // A .node file is a shared library, so musl is linked dynamically (Rust defaults to static).
    return { zigTarget: triple, env: { [rustflagsVar(triple)]: '-C target-feature=-crt-static' } };
  }
  if (triple.endsWith('-apple-darwin')) {
    // The install name would otherwise be this machine's target/ path.
    const rustflags = `-C link-arg=-Wl,-install_name,@rpath/${binaryName}.${platform}.node`;
    return { zigTarget: triple, env: { MACOSX_DEPLOYMENT_TARGET: MACOS_FLOOR[platform], [rustflagsVar(triple)]: rustflags } };
  }
  throw new Error(`release: no cross-build settings for ${triple}`);
}

function selectTargets(names) {
  if (names.length === 0) return targets;
  return names.map((name) => {
    const target = targets.find((t) => t.platform === name || t.triple === name);
    if (!target) throw new Error(`release: unknown --target ${name}; the platforms are ${targets.map((t) => t.platform).join(', ')}`);
    return target;
  });
}

await cli(async () => {
  const { values } = parseArgs({ options: { target: { type: 'string', short: 't', multiple: true, default: [] }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) return console.log(HELP);
  const selected = selectTargets(values.target);
  // Hashed before building, so an edit made while it builds is not recorded as built.
  const inputs = inputsHash();
  const env = crossEnv();
  const { binaryName } = readJson(join(repoRoot, 'packages', 'core', 'package.json')).napi;
  const built = [];
  for (const target of selected) {
    ensureRustTarget(target.triple);
    const { zigTarget, env: extra } = crossSettings(target, binaryName);
    const started = Date.now();
    console.log(`release: building ${target.platform} (${zigTarget})`);
    run('cargo', ['zigbuild', '--profile', 'dist', '-p', 'dynamo-napi', '--target', zigTarget], {
      env: { ...env, ...extra },
      what: `cargo zigbuild for ${target.platform}`,
    });
    const library = join(repoRoot, 'target', target.triple, 'dist', target.triple.includes('apple') ? 'libdynamo_napi.dylib' : 'libdynamo_napi.so');
    const want = expectedFormat(target.platform);
    const got = binaryFormat(library);
    if (got.format !== want.format || got.arch !== want.arch) {
      throw new Error(`release: ${library} is ${got.format} ${got.arch}, but ${target.platform} needs ${want.format} ${want.arch}`);
    }
    const dir = join(npmDir, target.platform);
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${binaryName}.${target.platform}.node`);
    copyFileSync(library, file);
    built.push({ platform: target.platform, mib: statSync(file).size / 2 ** 20, seconds: (Date.now() - started) / 1000 });
  }
  console.log('\nrelease: built');
  for (const b of built) console.log(`  ${b.platform.padEnd(18)} ${b.mib.toFixed(1).padStart(5)} MiB  ${b.seconds.toFixed(0).padStart(4)} s`);
  if (targets.every((t) => built.some((b) => b.platform === t.platform))) {
    recordVerified(inputs);
    console.log(
      `release: all six platforms built; recorded their inputs in ${relative(repoRoot, VERIFIED_FILE)} (commit it: CI then builds only its own platform until they change)`,
    );
  }
});
