import type { Tokenizer } from '@dynamo/core';

// A loaded tokenizer holds ~40 MiB (vocabulary both ways, merges), and a frontend often serves
// several models of one family, so models whose tokenizer files have the same checksums share one.
// Weak references let a tokenizer go once no model holds it.
const loaded = new Map<string, WeakRef<Tokenizer>>();
const loading = new Map<string, Promise<Tokenizer>>();
const forget = new FinalizationRegistry<string>((key) => {
  if (loaded.get(key)?.deref() === undefined) loaded.delete(key);
});

/**
 * The tokenizer loaded for `key` (the checksums of the files it is made from), or a fresh one from
 * `load` when no live one has that key. Loads for one key at the same time share one load.
 */
export function sharedTokenizer(key: string, load: () => Promise<Tokenizer>): Promise<Tokenizer> {
  const live = loaded.get(key)?.deref();
  if (live) return Promise.resolve(live);
  let pending = loading.get(key);
  if (!pending) {
    pending = load()
      .then((tokenizer) => {
        loaded.set(key, new WeakRef(tokenizer));
        forget.register(tokenizer, key);
        return tokenizer;
      })
      .finally(() => loading.delete(key));
    loading.set(key, pending);
  }
  return pending;
}
