import { loraId } from '@dynamo/llm';
import { type LoraSourceOptions, resolveLoraSource } from '@dynamo/llm/internal';
import type { Log } from '@dynamo/runtime';
import type { HttpRouteRequest, SystemStatusServer } from '@dynamo/runtime/internal';
import { z } from 'zod';

import type { LLMEngine } from '../engine.js';

type Reply = Record<string, unknown>;

/** How the worker publishes and withdraws an adapter's model card. */
export interface AdapterCards {
  register(name: string): Promise<void>;
  unregister(name: string): Promise<void>;
}

const LoadSchema = z.object({
  lora_name: z.string({ error: "'lora_name' is required and must be a string" }).min(1, "'lora_name' is required and must be a string"),
  source: z.object(
    { uri: z.string({ error: "'source.uri' is required and must be a string" }).min(1, "'source.uri' is required and must be a string") },
    { error: "'source' object is required in request" },
  ),
});
const UnloadSchema = z.object({
  lora_name: z.string({ error: "Request is required with 'lora_name' field" }).min(1, "Request is required with 'lora_name' field"),
});

const firstIssue = (error: z.ZodError) => error.issues[0]?.message ?? 'invalid request';
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * LoRA adapters on the worker's system port, as stock Dynamo 1.6.1's workers serve them:
 * `/engine/update/load_lora` (`{"lora_name", "source": {"uri"}}`), `/engine/update/unload_lora`
 * (`{"lora_name"}`) and `/engine/update/list_loras`, with stock's reply shapes (`status`,
 * `message`, `lora_name`, `lora_id`; `loras` and `count` for the list) and refusals as 200
 * replies; with `DYN_LORA_ENABLED` also `GET`/`POST /v1/loras` and `DELETE /v1/loras/<name>`,
 * where a refusal answers 500. Sources are resolved to local files first (`hf://` downloaded into
 * the worker's `DYN_LORA_PATH`). A loaded adapter's card is published so frontends serve it by name.
 */
export class LoraRoutes {
  readonly #engine: LLMEngine;
  readonly #status: SystemStatusServer;
  readonly #cards: AdapterCards;
  readonly #log: Log;
  readonly #loaded = new Map<string, number>();
  readonly #v1: boolean;
  readonly #sources: Pick<LoraSourceOptions, 'env' | 'cacheDir'>;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(
    engine: LLMEngine,
    status: SystemStatusServer,
    cards: AdapterCards,
    log: Log,
    v1Routes: boolean,
    sources: Pick<LoraSourceOptions, 'env' | 'cacheDir'>,
  ) {
    this.#engine = engine;
    this.#sources = sources;
    this.#status = status;
    this.#cards = cards;
    this.#log = log;
    this.#v1 = v1Routes;
    status.setEngineRoute('update/load_lora', (body) => this.#serial(() => this.#load(body)));
    status.setEngineRoute('update/unload_lora', (body) => this.#serial(() => this.#unload(body)));
    status.setEngineRoute('update/list_loras', async () => this.#list());
    if (v1Routes) status.setRoute('/v1/loras', (request) => this.#v1Route(request));
    log.info({ v1_loras: v1Routes }, 'serving LoRA adapter routes at /engine/update/{load,unload,list}_lora');
  }

  /** Removes the routes. */
  close(): void {
    for (const name of ['load_lora', 'unload_lora', 'list_loras']) this.#status.setEngineRoute(`update/${name}`, undefined);
    if (this.#v1) this.#status.setRoute('/v1/loras', undefined);
  }

  #serial(action: () => Promise<Reply>): Promise<Reply> {
    const next = this.#queue.then(action);
    this.#queue = next.catch(() => {});
    return next;
  }

  async #load(body: unknown): Promise<Reply> {
    if (typeof body !== 'object' || body === null) return { status: 'error', message: "Request is required with 'lora_name' and 'source.uri'" };
    const parsed = LoadSchema.safeParse(body);
    if (!parsed.success) return { status: 'error', message: firstIssue(parsed.error) };
    const { lora_name: name, source } = parsed.data;
    const id = loraId(name);
    if (this.#loaded.has(name)) return { status: 'success', message: `LoRA adapter '${name}' already loaded`, lora_name: name, lora_id: id };
    try {
      const uri = await resolveLoraSource(source.uri, { ...this.#sources, log: this.#log });
      await this.#engine.loadLora(name, { uri });
    } catch (err) {
      this.#log.warn({ lora: name, uri: source.uri, err: message(err) }, 'loading a LoRA adapter failed');
      return { status: 'error', message: `failed to load LoRA adapter '${name}': ${message(err)}`, lora_name: name };
    }
    try {
      await this.#cards.register(name);
    } catch (err) {
      await this.#engine.unloadLora(name).catch(() => {});
      return { status: 'error', message: `LoRA adapter '${name}' loaded but its model card could not be registered: ${message(err)}`, lora_name: name };
    }
    this.#loaded.set(name, id);
    this.#log.info({ lora: name, lora_id: id, uri: source.uri }, 'LoRA adapter loaded');
    return { status: 'success', message: `LoRA adapter '${name}' loaded successfully`, lora_name: name, lora_id: id };
  }

  async #unload(body: unknown): Promise<Reply> {
    const parsed = UnloadSchema.safeParse(body);
    if (!parsed.success) return { status: 'error', message: firstIssue(parsed.error) };
    const name = parsed.data.lora_name;
    const id = this.#loaded.get(name);
    if (id === undefined) return { status: 'error', message: `LoRA adapter '${name}' not found. Available LoRAs: ${JSON.stringify([...this.#loaded.keys()])}` };
    // Routers stop sending the adapter's requests before the engine lets it go.
    await this.#cards.unregister(name);
    this.#loaded.delete(name);
    try {
      await this.#engine.unloadLora(name);
    } catch (err) {
      this.#log.warn({ lora: name, err: message(err) }, 'the engine failed to unload a LoRA adapter');
      return { status: 'error', message: `failed to unload LoRA adapter '${name}': ${message(err)}`, lora_name: name, lora_id: id };
    }
    this.#log.info({ lora: name, lora_id: id }, 'LoRA adapter unloaded');
    return { status: 'success', message: `LoRA adapter '${name}' unloaded successfully`, lora_name: name, lora_id: id };
  }

  #list(): Reply {
    return { status: 'success', loras: Object.fromEntries(this.#loaded), count: this.#loaded.size };
  }

  async #v1Route({ method, path, body }: HttpRouteRequest): Promise<{ status: number; body: unknown }> {
    const rest = path.slice('/v1/loras'.length).replace(/^\//, '');
    let reply: Reply;
    if (method === 'GET' && rest === '') reply = this.#list();
    else if (method === 'POST' && rest === '') reply = await this.#serial(() => this.#load(body));
    else if (method === 'DELETE' && rest !== '') reply = await this.#serial(() => this.#unload({ lora_name: decodeURIComponent(rest) }));
    else return { status: 404, body: { error: 'Route not found', message: `Route ${method} ${path} not found` } };
    return { status: reply.status === 'error' ? 500 : 200, body: reply };
  }
}
