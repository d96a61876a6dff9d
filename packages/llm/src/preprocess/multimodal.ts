import { InvalidArgument } from '@dynamo/runtime';

/** Stock Dynamo's default limit on a `data:` URL in a media part (`DYN_MM_MAX_DATA_URL_MB`), in bytes. */
export const DEFAULT_MAX_DATA_URL_BYTES = 16 * 1024 * 1024;

/** The media part types whose URLs go to the worker, keyed by part type as stock keys them. */
const MEDIA_TYPES = ['image_url', 'video_url', 'audio_url'] as const;
type MediaType = (typeof MEDIA_TYPES)[number];

/** One media item as stock's `MultimodalData` serializes it: a URL, or only a cache uuid (images). */
type MediaItem = { Url: string } | { UuidOnly: string };

/** What a chat request's media parts add to its `PreprocessedRequest`. */
export interface MediaData {
  /** Per part type, the items in message order (`multi_modal_data`). */
  data: Partial<Record<MediaType, MediaItem[]>>;
  /** Per part type, each item's uuid or null, when any part had one (`multi_modal_uuids`). */
  uuids?: Partial<Record<MediaType, Array<string | null>>>;
  /** The messages with every `data:` URL blanked, for `extra_args.messages`. */
  messages: unknown[];
}

type Part = Record<string, unknown> & { type?: unknown };

const isMedia = (type: unknown): type is MediaType => (MEDIA_TYPES as readonly unknown[]).includes(type);

/**
 * The media of a chat request's messages (user and tool messages whose content is a list of
 * parts), as stock Dynamo 1.6.1 hands them to the worker: `image_url`, `video_url` and
 * `audio_url` parts become `{"Url": ...}` items (an image with only a `uuid` becomes
 * `{"UuidOnly": ...}`), in message order; `input_audio` parts are not collected (stock leaves
 * them to `extra_args.messages`). Undefined when there are none. A part that is not a URL or a
 * `data:` URL longer than `maxDataUrlBytes` is a 400 naming the part.
 */
export function gatherMedia(messages: readonly unknown[], maxDataUrlBytes = DEFAULT_MAX_DATA_URL_BYTES): MediaData | undefined {
  const data: MediaData['data'] = {};
  const uuids: NonNullable<MediaData['uuids']> = {};
  let anyUuid = false;
  let found = false;
  const stripped = messages.map((message, i) => {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) return message;
    return {
      ...(message as object),
      content: content.map((raw, j) => {
        const part = raw as Part;
        if (!isMedia(part?.type)) return part;
        found = true;
        const where = `messages[${i}].content[${j}]`;
        const { item, uuid, blanked } = mediaItem(part, part.type, where, maxDataUrlBytes);
        (data[part.type] ??= []).push(item);
        (uuids[part.type] ??= []).push(uuid);
        anyUuid ||= uuid !== null;
        return blanked;
      }),
    };
  });
  if (!found) return undefined;
  return { data, ...(anyUuid ? { uuids } : {}), messages: stripped };
}

function mediaItem(part: Part, type: MediaType, where: string, maxDataUrlBytes: number): { item: MediaItem; uuid: string | null; blanked: Part } {
  const media = part[type] as { url?: unknown; uuid?: unknown } | null | undefined;
  const uuid = part.uuid ?? media?.uuid;
  if (uuid !== undefined && uuid !== null && (typeof uuid !== 'string' || uuid === ''))
    throw new InvalidArgument(`${where}: ${type} uuid must be a non-empty string`);
  const url = media?.url;
  if (url === undefined || url === null || url === '') {
    if (typeof uuid !== 'string') throw new InvalidArgument(`${where}: ${type} part has neither \`url\` nor \`uuid\`; at least one is required`);
    if (type !== 'image_url') throw new InvalidArgument(`${where}: UUID-only cache reuse is not supported for media modality \`${type}\`; provide a media URL`);
    return { item: { UuidOnly: uuid }, uuid, blanked: part };
  }
  if (typeof url !== 'string') throw new InvalidArgument(`${where}: ${type}.url must be a string`);
  if (url.startsWith('data:')) {
    const size = Buffer.byteLength(url);
    if (size > maxDataUrlBytes) {
      throw new InvalidArgument(
        `${where}: ${type} data: URL is ${size} bytes, exceeds the ${maxDataUrlBytes}-byte limit. To raise the limit, set DYN_MM_MAX_DATA_URL_MB (in megabytes) on both the frontend and the workers.`,
      );
    }
    return { item: { Url: url }, uuid: typeof uuid === 'string' ? uuid : null, blanked: { ...part, [type]: { ...(media as object), url: '' } } };
  }
  let href: string;
  try {
    href = new URL(url).href;
  } catch {
    throw new InvalidArgument(`${where}: ${type}.url is not an absolute URL: ${JSON.stringify(url.slice(0, 200))}`);
  }
  return { item: { Url: href }, uuid: typeof uuid === 'string' ? uuid : null, blanked: part };
}
