import { type EmbedRequest, type Embeddings, InvalidArgument } from '@dynamo/backend';
import type { LlamaEmbeddingContext, Token } from 'node-llama-cpp';

/** What an {@link Embedder} checks inputs against. */
export interface EmbedderLimits {
  modelName: string;
  /** Token ids at or above this are not the model's. */
  vocab: number;
  contextSize: number;
}

/** The model's embeddings through llama.cpp's one embedding context, one input at a time. */
export class Embedder {
  readonly context: LlamaEmbeddingContext;
  readonly #limits: EmbedderLimits;
  /** Requests run one after another on the one context. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(context: LlamaEmbeddingContext, limits: EmbedderLimits) {
    this.context = context;
    this.#limits = limits;
  }

  /** Each input's embedding, cut to the first `dimensions` values when the request asks for fewer. */
  async embed(request: EmbedRequest): Promise<Embeddings> {
    const { modelName, vocab, contextSize } = this.#limits;
    request.token_ids.forEach((ids, i) => {
      const bad = ids.find((id) => id >= vocab);
      if (bad !== undefined) throw new InvalidArgument(`token_ids.${i}: token id ${bad} is outside the model's vocabulary of ${vocab}`);
      if (ids.length > contextSize) throw new InvalidArgument(`token_ids.${i}: ${ids.length} tokens; the context holds ${contextSize} (--context-size)`);
    });
    const run = this.#queue.then(async () => {
      const vectors: number[][] = [];
      for (const ids of request.token_ids) vectors.push([...(await this.context.getEmbeddingFor(ids as Token[])).vector]);
      return vectors;
    });
    this.#queue = run.catch(() => {});
    const vectors = await run;
    const dims = request.dimensions;
    const size = vectors[0]?.length ?? 0;
    if (dims != null && dims > size) throw new InvalidArgument(`dimensions: ${modelName}'s embeddings have ${size} values, fewer than the ${dims} asked for`);
    const embeddings = dims == null ? vectors : vectors.map((v) => v.slice(0, dims));
    return { embeddings, prompt_tokens: request.token_ids.reduce((sum, ids) => sum + ids.length, 0) };
  }
}
