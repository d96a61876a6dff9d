import { basename } from 'node:path';

/**
 * Files a model deployment card reads: config, tokenizer (HF `tokenizers`, SentencePiece, tiktoken
 * or BPE vocab/merges), chat template, generation defaults, preprocessor config.
 */
const CARD_FILES = new Set([
  'config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'generation_config.json',
  'chat_template.jinja',
  'chat_template.json',
  'special_tokens_map.json',
  'tokenizer.model',
  'tiktoken.model',
  'preprocessor_config.json',
  'added_tokens.json',
  'vocab.json',
  'merges.txt',
]);

const WEIGHTS = /\.(safetensors|bin|h5|msgpack|ckpt\.index|pt|pth|gguf|onnx)$/i;
const IMAGES = /\.(png|jpe?g|gif|svg|webp|bmp|ico|tiff?)$/i;

/** True for a weights file (`.safetensors`, `.bin`, `.gguf`, ...). */
export function isWeightFile(file: string): boolean {
  return WEIGHTS.test(file);
}

/** Files stock Dynamo never downloads: repo metadata, licences, READMEs and images. */
function isSkipped(file: string): boolean {
  const name = basename(file);
  return name === '.gitattributes' || name === 'README.md' || name === 'USE_POLICY.md' || name.startsWith('LICENSE') || IMAGES.test(name);
}

function isCardFile(file: string): boolean {
  return !file.includes('/') && (CARD_FILES.has(file) || file.endsWith('.tiktoken'));
}

/**
 * Picks the files of a Hub repo listing to download. With `ignoreWeights`, only the top-level
 * files a model card needs; otherwise everything but licences, READMEs and images (stock Dynamo's
 * rule). `config.json` comes last: a snapshot holding it was downloaded completely, which is how
 * a later call recognises a usable cache entry.
 */
export function selectFiles(listing: readonly string[], ignoreWeights: boolean): string[] {
  const picked = listing.filter((f) => !isSkipped(f) && (ignoreWeights ? isCardFile(f) : true));
  return [...picked.filter((f) => f !== 'config.json'), ...picked.filter((f) => f === 'config.json')];
}
