// The cross-build toolchain, installed on first use without root: zig and cargo-zigbuild from
// PyPI (prebuilt wheels, pinned) into .tools/cross/, and each target's Rust standard library
// through rustup. zig links every target from this one Linux machine, with a chosen glibc floor
// and macOS's system library stubs, so no per-target gcc, sysroot or SDK is needed.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, run } from './util.mjs';

const ZIG = '0.17.1';
const CARGO_ZIGBUILD = '0.24.1';
const crossDir = join(repoRoot, '.tools', 'cross');

function version(cmd, args, env) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env });
  return r.status === 0 ? r.stdout.trim() : null;
}

/**
 * The environment that puts zig and cargo-zigbuild on PATH, installing them into .tools/cross/
 * when the pinned versions are not there yet.
 */
export function crossEnv() {
  const env = { ...process.env, PATH: `${join(crossDir, 'bin')}:${join(crossDir, 'ziglang')}:${process.env.PATH}` };
  const ready = () => version('zig', ['version'], env) === ZIG && version('cargo-zigbuild', ['--version'], env) === `cargo-zigbuild ${CARGO_ZIGBUILD}`;
  if (!ready()) {
    console.log(`release: installing zig ${ZIG} and cargo-zigbuild ${CARGO_ZIGBUILD} from PyPI into .tools/cross/`);
    run(
      'python3',
      [
        '-m',
        'pip',
        'install',
        '--quiet',
        '--disable-pip-version-check',
        '--upgrade',
        '--target',
        crossDir,
        `ziglang==${ZIG}`,
        `cargo-zigbuild==${CARGO_ZIGBUILD}`,
      ],
      {
        what: 'pip install of zig and cargo-zigbuild (python3 with pip is needed)',
      },
    );
    if (!ready()) throw new Error(`release: zig ${ZIG} or cargo-zigbuild ${CARGO_ZIGBUILD} still not usable from ${crossDir} after installing them`);
  }
  return env;
}

/** Installs the Rust standard library for `triple` with rustup unless it is there already. */
export function ensureRustTarget(triple) {
  const installed = version('rustup', ['target', 'list', '--installed']);
  if (installed === null) {
    const sysroot = version('rustc', ['--print', 'sysroot']);
    if (sysroot && existsSync(join(sysroot, 'lib', 'rustlib', triple))) return;
    throw new Error(`release: the Rust standard library for ${triple} is not installed and there is no rustup to install it (rustup target add ${triple})`);
  }
  if (installed.split('\n').includes(triple)) return;
  console.log(`release: rustup target add ${triple}`);
  run('rustup', ['target', 'add', triple], { what: `rustup target add ${triple} (downloads the target's standard library)` });
}
