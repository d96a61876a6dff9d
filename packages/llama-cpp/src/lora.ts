import { stat } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { InvalidArgument } from '@dynamo/backend';
import { type GgufFileInfo, type GgufTensorInfo, readGgufFileInfo } from 'node-llama-cpp';

import { ggufFilesIn } from './gguf-path.js';

/**
 * The adapter file a LoRA source names: a `file://` URI or an absolute path, of a `.gguf` file or
 * of a folder holding exactly one. Throws {@link InvalidArgument} naming the source otherwise.
 */
export async function adapterFile(uri: string): Promise<string> {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri)?.[1];
  if (scheme !== undefined && scheme.toLowerCase() !== 'file') {
    throw new InvalidArgument(
      `LoRA source ${uri}: the ${scheme}:// scheme is not supported; dynamo-llama-cpp loads adapters from file:// URIs or absolute paths`,
    );
  }
  let path = uri;
  if (scheme !== undefined) {
    try {
      path = fileURLToPath(uri);
    } catch (err) {
      throw new InvalidArgument(`LoRA source ${uri}: not a valid file:// URI (${(err as Error).message})`, { cause: err });
    }
  }
  if (!isAbsolute(path)) throw new InvalidArgument(`LoRA source ${uri}: not a file:// URI or an absolute path`);
  path = resolve(path);
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    throw new InvalidArgument(`LoRA source ${uri}: ${err.code === 'ENOENT' ? 'no such file or folder' : err.message}`, { cause: err });
  });
  if (!info.isDirectory()) return path;
  const ggufs = await ggufFilesIn(path);
  if (ggufs.length === 1) return join(path, ggufs[0]!);
  throw new InvalidArgument(
    `LoRA source ${uri}: the folder holds ${ggufs.length === 0 ? 'no .gguf file' : `several .gguf files (${ggufs.join(', ')}); name the adapter's file`}`,
  );
}

/**
 * Checks that `file` is a LoRA adapter GGUF that fits the base model `base`, as llama.cpp will
 * (node-llama-cpp's error then only says that loading failed): `general.type` "adapter", `adapter.type`
 * "lora", the base's architecture, and for each adapted tensor a `.lora_a`/`.lora_b` pair whose
 * shapes fit the base's tensor of that name. Throws {@link InvalidArgument} naming the file and
 * what is wrong.
 */
export async function checkAdapter(file: string, base: GgufFileInfo): Promise<void> {
  // Typed out so that TypeScript narrows after a call, as after a throw.
  const fail: (why: string) => never = (why) => {
    throw new InvalidArgument(`LoRA adapter ${file}: ${why}`);
  };
  let info: GgufFileInfo;
  try {
    info = await readGgufFileInfo(file, { sourceType: 'filesystem', logWarnings: false });
  } catch (err) {
    return fail(`not a readable GGUF file (${(err as Error).message})`);
  }
  // Adapter keys are not in node-llama-cpp's metadata types.
  const meta = info.metadata as unknown as { general?: { type?: unknown; architecture?: unknown }; adapter?: { type?: unknown } };
  const type = meta.general?.type;
  if (type !== 'adapter')
    fail(`general.type is ${JSON.stringify(type ?? null)}, not "adapter"${type === 'model' ? ': this is a model, not a LoRA adapter' : ''}`);
  if (meta.adapter?.type !== 'lora') fail(`adapter.type is ${JSON.stringify(meta.adapter?.type ?? null)}, not "lora"`);
  const arch = meta.general?.architecture;
  const baseArch = base.metadata.general.architecture;
  if (arch !== baseArch) fail(`made for a ${JSON.stringify(arch ?? null)} model; the base model is ${JSON.stringify(baseArch)}`);

  const pairs = new Map<string, { a?: GgufTensorInfo; b?: GgufTensorInfo }>();
  for (const tensor of info.fullTensorInfo ?? info.tensorInfo ?? []) {
    const [, target, half] = /^(.*)\.lora_([ab])$/.exec(tensor.name) ?? [];
    // llama.cpp skips norm vectors in adapters; anything else it cannot apply.
    if (target === undefined) {
      if (tensor.name.endsWith('_norm.weight')) continue;
      fail(`tensor ${tensor.name} is neither a .lora_a nor a .lora_b tensor`);
    }
    const pair = pairs.get(target) ?? {};
    pair[half === 'a' ? 'a' : 'b'] = tensor;
    pairs.set(target, pair);
  }
  if (pairs.size === 0) fail('holds no LoRA tensors (.lora_a/.lora_b)');
  const baseTensors = new Map((base.fullTensorInfo ?? base.tensorInfo ?? []).map((t) => [t.name, t.dimensions.map(Number)]));
  for (const [name, { a, b }] of pairs) {
    if (!a || !b) fail(`tensor ${name} has a .lora_${a ? 'a' : 'b'} but no .lora_${a ? 'b' : 'a'}`);
    const target = baseTensors.get(name);
    if (!target) fail(`adapts ${name}, which the base model does not have (an adapter for another model?)`);
    const [a0, a1] = a.dimensions.map(Number);
    const [b0, b1] = b.dimensions.map(Number);
    const [w0, w1] = target;
    // The token embedding is looked up, not multiplied, so llama.cpp expects its pair the other way round.
    const fits = name === 'token_embd.weight' ? w0 === b1 && w1 === a1 : w0 === a0 && w1 === b1 && a1 === b0;
    if (!fits) fail(`${name}: lora_a [${a0}, ${a1}] and lora_b [${b0}, ${b1}] do not fit the base model's [${w0}, ${w1}] (an adapter for another model?)`);
  }
}
