import type { ChoiceDelta } from '@dynamo/llm';
import type { ChatParts } from '@dynamo/llm/internal';
import type { StreamProcessor } from '@dynamo/core';
import { type Context, InvalidArgument, type Log } from '@dynamo/runtime';
import type { FastifyReply } from 'fastify';

import type { RequestTracker } from '../metrics.js';
import type { GenerationSurface } from '../models/served-model.js';
import type { UsageCounter } from './usage.js';
import { ChoiceOutput, type ChoiceSettings } from './choice-output.js';
import type { EventOutput } from './event-output.js';
import { HttpError, streamErrorJson, toHttpError } from '../http/errors.js';
import { chunkJson, plainChunkJson, type ResponseIds, usageChunkJson, wholeResponse } from './shapes.js';
import { SseWriter } from '../http/sse.js';

/**
 * A streamed one-choice answer on the Rust path: the worker's bytes read by `output`'s
 * processor, which writes the choice's events (detokenized, stopped, as OpenAI chunks); the
 * batches hold the events `output` did not write itself (see {@link EventOutput}).
 */
export interface EventsAnswer extends Omit<Answer, 'deltas'> {
  events: AsyncIterator<string[]>;
  output: EventOutput;
}

/** One request's output on its way to the client. */
export interface Answer extends ChoiceSettings {
  surface: GenerationSurface;
  ids: ResponseIds;
  context: Context;
  /** Choices the response has (prompts × n). */
  choices: number;
  deltas: AsyncIterator<ChoiceDelta>;
  usage: UsageCounter;
  includeUsage: boolean;
  /** `stream_options.continuous_usage_stats` (with `include_usage`): running usage on every chunk. */
  continuousUsage: boolean;
  tracker: RequestTracker;
  /** Prompt tokens sent to workers, for the request metrics. */
  promptTokens: number;
  reasoningField: 'reasoning_content' | 'reasoning';
  overloadStatus: number;
  keepAliveMs: number;
}

const isEmpty = (parts: ChatParts): boolean => parts.content === '' && parts.reasoning === '' && parts.toolCalls.length === 0;

/** The choices of an answer, made as their first delta arrives. */
function choiceTable(a: Answer): { get(index: number): ChoiceOutput; all(): ChoiceOutput[] } {
  const table = new Map<number, ChoiceOutput>();
  const get = (index: number) => {
    let choice = table.get(index);
    if (!choice) table.set(index, (choice = new ChoiceOutput(index, a)));
    return choice;
  };
  return { get, all: () => Array.from({ length: Math.max(a.choices, ...[...table.keys()].map((i) => i + 1)) }, (_, i) => get(i)) };
}

function reasoningTokens(choices: ChoiceOutput[]): number | undefined {
  const counts = choices.map((c) => c.reasoningTokens).filter((n) => n !== undefined);
  return counts.length === 0 ? undefined : counts.reduce((sum, n) => sum + n, 0);
}

/**
 * Takes a delta into the answer's accounting (the request metrics, the usage); throws the
 * engine's error as the request's when the engine finished with one.
 */
export function account(a: Answer, delta: ChoiceDelta): void {
  a.tracker.tokens(delta.tokenIds.length, a.promptTokens);
  if (delta.finishReason === 'error') throw new HttpError(500, `the engine failed: ${delta.error ?? 'unknown error'}`);
  a.usage.add(delta);
}

/**
 * The whole output of a one-choice answer (the Responses and Messages APIs), gathered into its
 * choice; `seen` looks at each delta too.
 */
export async function gatherChoice(a: Answer, seen: (delta: ChoiceDelta) => void = () => {}): Promise<ChoiceOutput> {
  const choice = new ChoiceOutput(0, a);
  for (let r = await a.deltas.next(); !r.done; r = await a.deltas.next()) {
    const delta = r.value;
    account(a, delta);
    seen(delta);
    choice.gather(choice.parts(delta), delta, undefined);
    if (delta.openaiFinishReason !== undefined) choice.finish(delta.openaiFinishReason);
  }
  if (a.context.isKilled()) throw new HttpError(499, 'client closed the request');
  if (choice.finishReason === null) {
    choice.gather(choice.rest(), { index: 0, text: '', tokenIds: [], completionTokens: 0 }, undefined);
    choice.finish(undefined);
  }
  return choice;
}

/** Collects the whole output into one response; an engine error becomes the HTTP error. */
export async function wholeAnswer(a: Answer): Promise<Record<string, unknown>> {
  const choices = choiceTable(a);
  for (let r = await a.deltas.next(); !r.done; r = await a.deltas.next()) {
    const delta = r.value;
    account(a, delta);
    const choice = choices.get(delta.index);
    const parts = choice.parts(delta);
    choice.gather(parts, delta, choice.logprobs(delta, parts));
    if (delta.openaiFinishReason !== undefined) choice.finish(delta.openaiFinishReason);
  }
  if (a.context.isKilled()) throw new HttpError(499, 'client closed the request');
  const all = choices.all();
  for (const choice of all) {
    if (choice.finishReason !== null) continue;
    choice.gather(choice.rest(), { index: choice.index, text: '', tokenIds: [], completionTokens: 0 }, undefined);
    choice.finish(undefined);
  }
  const out = all.map((c) => ({ index: c.index, parts: c.whole.parts, finishReason: c.finishReason, logprobs: c.wholeLogprobs() }));
  return wholeResponse(
    a.surface,
    a.ids,
    out,
    a.usage.usage(reasoningTokens(all)),
    all.some((c) => c.parsed),
    a.reasoningField,
  );
}

/**
 * Streams the output as SSE after `first`. A failure mid-stream ends the stream with stock's
 * error frame (`data: {"error": ...}` then `data: [DONE]`): the status line is already sent.
 * Returns whether the response was complete.
 */
export async function streamAnswer(a: Answer, reply: FastifyReply, first: IteratorResult<ChoiceDelta>, log: Log): Promise<boolean> {
  const sse = new SseWriter(reply.raw, { 'x-request-id': a.context.id() }, a.keepAliveMs);
  const choices = choiceTable(a);
  const plain = new Map<number, (text: string) => string>();
  const plainOf = (index: number) => {
    let write = plain.get(index);
    if (!write) plain.set(index, (write = plainChunkJson(a.surface, a.ids, index)));
    return write;
  };
  try {
    for (let r = first; !r.done; r = await a.deltas.next()) {
      const delta = r.value;
      account(a, delta);
      const choice = choices.get(delta.index);
      const parts = choice.parts(delta);
      const logprobs = choice.logprobs(delta, parts);
      const finishing = delta.openaiFinishReason !== undefined;
      if (!finishing && choice.sent > 0 && isEmpty(parts) && logprobs === undefined) continue;
      const usage = a.continuousUsage ? a.usage.usage(reasoningTokens(choices.all())) : undefined;
      const finishReason = finishing ? choice.finish(delta.openaiFinishReason) : null;
      const simple = !finishing && choice.sent > 0 && logprobs === undefined && !usage && parts.reasoning === '' && parts.toolCalls.length === 0;
      const json = simple
        ? plainOf(delta.index)(parts.content)
        : chunkJson(a.surface, a.ids, delta.index, { parts, finishReason, first: choice.sent === 0, logprobs, ...(usage && { usage }) }, a.reasoningField);
      const wait = sse.data(json);
      choice.sent += 1;
      if (wait) await wait;
      if (sse.closed) return false;
    }
    if (a.context.isKilled() || sse.closed) return false;
    for (const choice of choices.all()) {
      if (choice.finishReason !== null) continue;
      const parts = choice.rest();
      sse.data(chunkJson(a.surface, a.ids, choice.index, { parts, finishReason: choice.finish(undefined), first: choice.sent === 0 }, a.reasoningField));
    }
    if (a.includeUsage) sse.data(usageChunkJson(a.surface, a.ids, a.usage.usage(reasoningTokens(choices.all()))));
    sse.done();
    return true;
  } catch (err) {
    failStream(a, sse, err, log);
    return false;
  }
}

/**
 * Streams an {@link EventsAnswer} after `first`: the events its output queued, a batch a write
 * (the rest its output writes itself), then the usage chunk and `[DONE]`. Returns whether the
 * response was complete.
 */
export async function streamEvents(a: EventsAnswer, reply: FastifyReply, first: IteratorResult<string[]>, log: Log): Promise<boolean> {
  const sse = new SseWriter(reply.raw, { 'x-request-id': a.context.id() }, a.keepAliveMs);
  const { output } = a;
  const processor = output.processor;
  try {
    for (let r = first; !r.done; r = await a.events.next()) {
      const batch = r.value;
      output.taken(batch.length);
      const wait = sse.events(batch.length === 1 ? batch[0]! : batch.join(''));
      output.start(sse);
      // Finished, and every read's events written: a read that came while this batch was on its
      // way (the worker's last frames right behind its first) is still queued, so read on.
      if (processor.finished && output.queuedReads === 0) {
        failedOutput(processor);
        // Nothing more is wanted: the worker is told to stop.
        await a.events.return?.();
        break;
      }
      if (wait) await wait;
      if (sse.closed) return false;
    }
    if (a.context.isKilled() || sse.closed) return false;
    processor.end();
    failedOutput(processor);
    sse.events(processor.take());
    if (a.includeUsage) {
      const engineUsage = processor.engineUsage;
      a.usage.add({
        index: 0,
        text: '',
        tokenIds: [],
        completionTokens: processor.completionTokens,
        ...(engineUsage !== null && { usage: JSON.parse(engineUsage) as NonNullable<ChoiceDelta['usage']> }),
      });
      sse.data(usageChunkJson(a.surface, a.ids, a.usage.usage()));
    }
    sse.done();
    return true;
  } catch (err) {
    failStream(a, sse, err, log);
    return false;
  } finally {
    output.finish();
  }
}

/**
 * Ends a stream that failed after it started as stock Dynamo does: the status line is sent, so
 * the error goes out as its error frame, then `[DONE]`.
 */
function failStream(a: Pick<Answer, 'context' | 'overloadStatus'>, sse: SseWriter, err: unknown, log: Log): void {
  const error = toHttpError(err, a.overloadStatus);
  log.warn({ request_id: a.context.id(), status: error.status, err: error.message }, 'stream failed after it started');
  sse.fail(streamErrorJson(error, a.overloadStatus));
}

/** Throws what ended a choice's output badly: the engine's error, or a malformed chunk. */
function failedOutput(processor: StreamProcessor): void {
  const engineError = processor.engineError;
  if (engineError !== null) throw new HttpError(500, `the engine failed: ${engineError}`);
  const invalid = processor.invalidOutput;
  if (invalid !== null) throw new InvalidArgument(invalid);
}
