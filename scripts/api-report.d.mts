/** The repository's root folder. */
export const ROOT: string;

/** A published package and the entry points of its `exports` map. */
export interface PublicPackage {
  name: string;
  dir: string;
  entries: Array<{ entry: string; types: string; report: string }>;
}

/** One entry point's report as the built package has it. */
export interface ApiReport {
  name: string;
  entry: string;
  report: string;
  text: string;
  count: number;
}

export function publicPackages(root?: string): PublicPackage[];
export function currentReports(root?: string): ApiReport[];
