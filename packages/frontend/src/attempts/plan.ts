import type { PreprocessedRequest } from '@dynamo/llm';

/** One request sent to a worker on behalf of a client request, and the choices it answers. */
export interface Attempt {
  request: PreprocessedRequest;
  /** The response's index of the attempt's first choice. */
  firstIndex: number;
  /** How many choices its output holds (tagged 0.. by the engine). */
  choices: number;
  /** Whether its prompt counts in the usage (once per prompt, not per choice). */
  countsPrompt: boolean;
  promptTokens: number;
}

/**
 * The worker requests for a client request's prompts (one, or a batch on `/v1/completions`) and
 * its `n` choices each. Choice indices run prompt by prompt: prompt `i`'s choices are
 * `i * n` to `i * n + n - 1`, as stock numbers them. A worker that makes `n` choices itself (its
 * card says so, as ours do) gets one request per prompt; others get `n`, each for one choice
 * and, when the request has a seed, with its own (seed + choice), so the choices differ.
 */
export function planAttempts(prompts: readonly PreprocessedRequest[], n: number, workerMakesChoices: boolean): Attempt[] {
  const attempts: Attempt[] = [];
  prompts.forEach((request, i) => {
    const promptTokens = request.token_ids.length;
    if (n === 1 || workerMakesChoices) {
      attempts.push({ request, firstIndex: i * n, choices: n, countsPrompt: true, promptTokens });
      return;
    }
    const sampling = request.sampling_options ?? {};
    for (let j = 0; j < n; j++) {
      const seed = sampling.seed == null ? sampling.seed : sampling.seed + j;
      attempts.push({
        request: { ...request, sampling_options: { ...sampling, n: 1, seed } },
        firstIndex: i * n + j,
        choices: 1,
        countsPrompt: j === 0,
        promptTokens,
      });
    }
  });
  return attempts;
}
