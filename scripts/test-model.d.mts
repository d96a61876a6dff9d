// Types of scripts/test-model.mjs, for the TypeScript tests and benches that import it.
export declare const SMOLLM2: Readonly<{ wheel: string; member: string; file: string; sha256: string }>;
export declare function modelsDir(env?: NodeJS.ProcessEnv): string;
export declare function smolLm2(options?: { log?: (line: string) => void }): Promise<string>;
