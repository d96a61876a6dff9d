/**
 * A reader that takes a response stream's socket bytes whole, in place of the runtime's own frame
 * decoding: the frontend's per-token path in Rust (`@dynamo/core`'s `StreamProcessor`) parses
 * the frames, detokenizes and writes the events in one call per socket read, and tells the
 * stream what the read brought as bits.
 */

/** What a read brought: bits of {@link StreamReader.read}'s result (the values `@dynamo/core`'s `STREAM_*` have). */
export const ReadFlag = {
  /** The worker's prologue: its handler started. */
  STARTED: 1,
  /** Output items arrived; what they add waits in {@link StreamReader.take}. */
  OUTPUT: 2,
  /** The `complete_final` marker. */
  END: 4,
  /** The sentinel: the worker is done with the socket. */
  SENTINEL: 8,
  /** The worker broke the protocol ({@link StreamReader.problem} says how). */
  VIOLATION: 16,
  /** An error prologue: the worker could not start (the problem is its message). */
  REFUSED: 32,
  /** An error item: the problem is its message, {@link StreamReader.problemKind} Dynamo's error kind. */
  WORKER_ERROR: 64,
  /** The output finished (the reader's own business: the stream carries on to the end marker). */
  FINISHED: 128,
  /** The engine's output was bad or an error (the reader's own business, like FINISHED). */
  ENGINE_ERROR: 256,
  /** The worker sent a control word only the caller may send; the problem names it. */
  STRAY_CONTROL: 512,
  /** A native send to the client was cut short (the reader's own business). */
  UNSENT: 1024,
  /** The natively read socket reached its end or failed: it is read no more. */
  CLOSED: 2048,
  /** Native output waits to be counted (the reader's own business). */
  ACCOUNT: 4096,
} as const;

/** Reads a response stream's bytes after the worker's handshake; see the module docs. */
export interface StreamReader {
  /** A worker called home (the first, or the next after a migration): its prologue is next. */
  connect(): void;
  /** Takes one socket read; returns its {@link ReadFlag} bits. */
  read(piece: Buffer): number;
  /** What the reads since the last take produced: the stream's next item. */
  take(): unknown;
  /** What went wrong, after a read flagged a problem. */
  readonly problem: string;
  /** Dynamo's error kind, after {@link ReadFlag.WORKER_ERROR}. */
  readonly problemKind: string;
  /** Bytes of an unfinished frame (a truncated frame when the socket closes). */
  readonly buffered: number;
  /**
   * Reads the socket `fd` natively from now on (optional: readers without it get every read
   * through {@link read}); `onRead` gets each read's flags that the stream must handle, ending
   * with {@link ReadFlag.CLOSED} at the socket's end.
   */
  pump?(fd: number, onRead: (flags: number) => void): PumpControl;
}

/** The native reads of a pumped socket: paused for back-pressure, stopped when the socket closes. */
export interface PumpControl {
  pause(): void;
  resume(): void;
  stop(): void;
}
