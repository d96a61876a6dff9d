import { InvalidArgument } from '@dynamo/runtime';

/**
 * Which OpenAI surfaces a model serves: bit flags combined with `|`
 * (`ModelType.Chat | ModelType.Completions`). The wire form is the flag names joined by `" | "`.
 */
export const ModelType = {
  Chat: 1,
  Completions: 2,
  Embedding: 4,
  TensorBased: 8,
  Prefill: 16,
  Images: 32,
  Audios: 64,
  Videos: 128,
  /**
   * The first releases' single type for an LLM backend: Tokens input serving chat and
   * completions. {@link normalizeModelType} turns it into those.
   */
  Backend: 1 << 30,
} as const;

/** A combination of {@link ModelType} flags. */
export type ModelTypeFlags = number;

const WIRE_FLAGS = ['Chat', 'Completions', 'Embedding', 'TensorBased', 'Prefill', 'Images', 'Audios', 'Videos'] as const;
const KNOWN = WIRE_FLAGS.reduce((all, name) => all | ModelType[name], ModelType.Backend as number);

/** Checks a flag set, expanding `Backend` to `Chat | Completions`. */
export function normalizeModelType(flags: ModelTypeFlags): { flags: number; legacyBackend: boolean } {
  if (!Number.isInteger(flags) || flags < 0 || (flags & ~KNOWN) !== 0) {
    throw new InvalidArgument(`modelType: ${String(flags)} is not a combination of ModelType flags`);
  }
  const legacyBackend = (flags & ModelType.Backend) !== 0;
  const expanded = legacyBackend ? (flags & ~ModelType.Backend) | ModelType.Chat | ModelType.Completions : flags;
  return { flags: expanded, legacyBackend };
}

/** The wire form of a flag set: `"Chat | Completions"`, `""` when empty. */
export function modelTypeToWire(flags: ModelTypeFlags): string {
  const { flags: expanded } = normalizeModelType(flags);
  return WIRE_FLAGS.filter((name) => (expanded & ModelType[name]) !== 0).join(' | ');
}

/** Parses the wire form back into flags; throws naming an unknown flag. */
export function modelTypeFromWire(wire: string): ModelTypeFlags {
  if (wire.trim() === '') return 0;
  return wire.split('|').reduce((flags, part) => {
    const name = part.trim();
    if (!(WIRE_FLAGS as readonly string[]).includes(name)) throw new InvalidArgument(`model_type: unknown flag '${name}' in '${wire}'`);
    return flags | ModelType[name as (typeof WIRE_FLAGS)[number]];
  }, 0);
}
