import type { z } from 'zod';
import { InvalidArgument } from './errors.js';

/** Renders zod issues as `what.path: message; ...` so an error names the field that was wrong. */
export function describeIssues(what: string, error: z.ZodError): string {
  return error.issues.map((issue) => `${[what, ...issue.path.map(String)].join('.')}: ${issue.message}`).join('; ');
}

/** Parses `value` with `schema`, throwing {@link InvalidArgument} that names each bad field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new InvalidArgument(describeIssues(what, result.error), { cause: result.error });
  return result.data;
}
