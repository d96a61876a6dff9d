// Loads this platform's native binary before the napi-rs loader (binding.js) runs, so that a
// platform with no prebuilt binary, a missing platform package or a binary that does not load
// fails with one error naming the platform and what to install. binding.js then requires the
// same file again and gets it from Node's module cache.
import { createRequire } from 'node:module';
import { currentPlatform, targets } from './platforms.js';

const require = createRequire(import.meta.url);
const { name, version, napi } = require('./package.json');
const supportedPlatforms = targets.map((t) => t.platform);

function nativeError(message, cause) {
  const error = new Error(`${name}: ${message}`, cause ? { cause } : undefined);
  error.code = 'DYNAMO_NATIVE_BINARY';
  return error;
}

function load() {
  const platform = currentPlatform();
  const where = `${platform} (Node ${process.version})`;
  if (!supportedPlatforms.includes(platform)) {
    throw nativeError(
      `no prebuilt native binary for ${where}. Prebuilt binaries exist for ${supportedPlatforms.join(', ')}; ` +
        'on another platform, build it from the repository with a Rust toolchain (pnpm --filter @dynamo/core build).',
    );
  }
  const local = `./${napi.binaryName}.${platform}.node`;
  try {
    require(local);
    return;
  } catch (error) {
    // Only a missing file moves on to the platform package; a local build that fails to load is the error.
    if (error?.code !== 'MODULE_NOT_FOUND') throw nativeError(`${local} did not load on ${where}: ${error.message}`, error);
  }
  const pkg = `${name}-${platform}`;
  let installed;
  try {
    installed = require(`${pkg}/package.json`).version;
  } catch (error) {
    throw nativeError(
      `the native binary for ${where} is missing: install ${pkg}@${version}. It is an optional dependency of ` +
        `${name}, left out by --no-optional / --omit=optional, by a lockfile made on another platform, or when ` +
        'node_modules was copied from another machine; reinstalling on this machine brings it.',
      error,
    );
  }
  if (installed !== version) {
    throw nativeError(`${pkg} is ${installed} but ${name} is ${version}; they are released together: install ${pkg}@${version}.`);
  }
  try {
    require(pkg);
  } catch (error) {
    throw nativeError(`${pkg}@${version} is installed but did not load on ${where}: ${error.message}`, error);
  }
}

// NAPI_RS_NATIVE_LIBRARY_PATH points the napi-rs loader at a binary of the user's choosing.
if (!process.env.NAPI_RS_NATIVE_LIBRARY_PATH) load();
