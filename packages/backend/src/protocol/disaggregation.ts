import { z } from 'zod';
import { InvalidArgument } from '@dynamo/runtime';

/** The role a worker plays in (dis)aggregated serving. */
export const DisaggregationMode = {
  Aggregated: 'agg',
  Prefill: 'prefill',
  Decode: 'decode',
  Encode: 'encode',
} as const;

/** `agg` (default), `prefill`, `decode` or `encode`. */
export type DisaggregationMode = (typeof DisaggregationMode)[keyof typeof DisaggregationMode];

const modes: readonly string[] = Object.values(DisaggregationMode);

/**
 * Parses a mode name as Dynamo's CLI does: trimmed, case-insensitive, `aggregated` is an alias of
 * `agg`. Throws {@link InvalidArgument} naming the value otherwise.
 */
export function parseDisaggregationMode(value: string): DisaggregationMode {
  const v = value.trim().toLowerCase();
  const mode = v === 'aggregated' ? 'agg' : v;
  if (modes.includes(mode)) return mode as DisaggregationMode;
  throw new InvalidArgument(`unknown disaggregation mode '${value}' (expected one of: ${modes.join(', ')})`);
}

/** zod form of {@link parseDisaggregationMode}, for config schemas. */
export const DisaggregationModeSchema = z.string().transform((value, ctx): DisaggregationMode => {
  try {
    return parseDisaggregationMode(value);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});
