/**
 * A name made safe for keys and paths the way Dynamo does it: lowercase, every character
 * outside `[a-z0-9_-]` replaced by `_`, leading `_` removed (`/tmp/My-Model` → `tmp_my-model`).
 */
export function slugify(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '_')
    .replace(/^_+/, '');
}
