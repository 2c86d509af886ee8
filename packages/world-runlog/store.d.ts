// Types of the runlog addon (crates/runlog-node) as loaded by world-runlog.
//
// Seqs, counts, byte lengths and times (ms since the Unix epoch) are JavaScript numbers.
// Inputs must be non-negative integers ≤ Number.MAX_SAFE_INTEGER (BigInt is refused with
// INVALID_INPUT); an output beyond it rejects with OUT_OF_RANGE instead of losing precision.
// Every method but `commitStats` returns a Promise; every failure rejects it with a
// RunlogError (never a synchronous throw). `commitStats`, the one synchronous method with a
// failure, throws UNSUPPORTED on a PostgreSQL store.

// The codes and class names are generated from the error table (src/error-codes.d.ts,
// docs/ERRORS.md).
import type { RunlogErrorClassName, RunlogErrorCode } from './src/error-codes.js';

export type { RunlogErrorClassName, RunlogErrorCode };

/** A rejection of the addon: `code`, `className`, `status`, message, and the fields of the failure. */
export interface RunlogError extends Error {
  code: RunlogErrorCode;
  /** INVALID_INPUT: the argument (`runId`, `events[2].payload`, `options.lockTimeoutMs`). */
  field?: string;
  runId?: string;
  /** FENCED: the seq the decision was derived from, and the run's seq at the check. */
  expected?: number;
  actual?: number;
  /** DUPLICATE: the repeated key and where the original lives. */
  key?: string;
  seq?: number;
  /** BUSY */
  holder?: string;
  waitedMs?: number;
  /** CORRUPT: segment file and byte offset; PANICKED: the panic message. */
  segment?: string;
  offset?: number;
  detail?: string;
  /** IO, DISK_FULL, READ_ONLY, NOT_A_STORE, UNSUPPORTED_VERSION */
  op?: string;
  path?: string;
  errno?: number;
  reason?: string;
  /** The `@workflow/errors` class the rejection stands for (every rejection of the addon carries one). */
  className?: RunlogErrorClassName;
  /** The code's HTTP-like status (docs/ERRORS.md); absent for CLOSED. */
  status?: number;
  /** TOO_EARLY: whole seconds to wait. */
  retryAfter?: number;
  stepId?: string;
  hook?: string;
  eventId?: string;
  found?: number;
  supported?: number;
  cause?: unknown;
}

export { ERROR_CODES } from './src/error-codes.js';
export declare function isRunlogError(err: unknown, code?: RunlogErrorCode): err is RunlogError;

/** Payload bytes: a Buffer or Uint8Array (copied), or a string (UTF-8). */
export type Bytes = Buffer | Uint8Array | string;

/** An event to append. Unknown fields are refused (INVALID_INPUT). */
export interface NewEvent {
  /** 1–64 bytes. */
  kind: string;
  /** At most StoreOptions.payloadLenBytesMax (16 MiB); empty when omitted. */
  payload?: Bytes | null;
  /** ≤ 256 bytes. */
  correlationId?: string | null;
  /** Idempotency key, ≤ 256 bytes: a fact whose key exists appends nothing. */
  key?: string | null;
  /** Caller-supplied ULID (26 characters); idempotent like `key`. */
  eventId?: string | null;
  /** Caller-supplied creation time, ms since the Unix epoch; else commit time. */
  createdAt?: number | null;
}

/** A committed event. */
export interface Event {
  seq: number;
  /** ULID, 26 characters. */
  eventId: string;
  kind: string;
  correlationId: string | null;
  key: string | null;
  /** ms since the Unix epoch. */
  createdAt: number;
  payload: Buffer;
}

export interface ReadPage {
  events: Event[];
  /** Cursor for the next read: the last seq returned, or `after` when empty. */
  next: number;
  /** Whether events past `next` were committed when the read started. */
  hasMore: boolean;
}

export interface Appended {
  seq: number;
  /** True when the key (or event id) existed: nothing appended, `seq` is the original. */
  duplicate: boolean;
}

export interface RunInfo {
  runId: string;
  lastSeq: number;
  committedBytes: number;
  createdAt: number;
  updatedAt: number;
  segmentCount: number;
}

export interface RunPage {
  runs: RunInfo[];
  /** Pass as `after` to continue; null when nothing was returned. */
  next: string | null;
  hasMore: boolean;
  /** Runs of this page whose files could not be read. */
  damaged: Array<{ runId: string; error: string; corrupt: boolean }>;
}

export interface Problem {
  segment: string;
  offset: number;
  detail: string;
}

export interface VerifyReport {
  runId: string;
  /** No problem found. */
  ok: boolean;
  segments: number;
  events: number;
  problems: Problem[];
  notes: Problem[];
}

export interface CommitStats {
  /** Group commits (each at most one write + one fdatasync). */
  groups: number;
  /** Append requests handled. */
  requests: number;
  /** Events written. */
  events: number;
  /** groupSizes[i]: groups of (2^(i-1), 2^i] requests; groupSizes[0]: groups of one. */
  groupSizes: number[];
}

/**
 * runlog's Config of a file store; every field optional, unknown fields refused. They are the
 * file store's limits: a PostgreSQL store accepts them and uses its own (16 MiB payloads,
 * 100,000 events per append).
 */
export interface StoreOptions {
  payloadLenBytesMax?: number;
  batchLenBytesMax?: number;
  batchEventsMax?: number;
  segmentLenBytesMax?: number;
  lockTimeoutMs?: number;
  waitPollIntervalMs?: number;
  openRunsMax?: number;
  /** null turns preallocation off. */
  preallocateFromBytes?: number | null;
}

export declare class Store {
  private constructor();
  /**
   * Opens (creating if missing or empty) the file store at directory `dir`, or, when `dir` is
   * a `postgres://` / `postgresql://` URL, the PostgreSQL store there (tables created if
   * missing; `?schema=NAME` picks the schema). An unreachable server rejects with IO.
   */
  static open(dir: string, options?: StoreOptions): Promise<Store>;
  /**
   * Opens an existing store without lock, write or recovery; writes reject with READ_ONLY
   * (file store) or IO (PostgreSQL: the server refuses the read-only transaction's write).
   */
  static openReadOnly(dir: string, options?: StoreOptions): Promise<Store>;
  /**
   * A file store for writing when this process can write it (asked of the kernel: `FORMAT`
   * opened for writing, nothing written), else read-only with `readOnlyCause` the refusal
   * (IO, errno EACCES/EPERM/EROFS). A missing directory is created; one that cannot be
   * rejects with that error; foreign files reject with NOT_A_STORE. PostgreSQL: as `open`.
   */
  static openOrReadOnly(dir: string, options?: StoreOptions): Promise<Store>;
  /** The directory or URL given to open. */
  readonly path: string;
  /** The backend the target named. */
  readonly backend: 'file' | 'postgres';
  /** openReadOnly, or openOrReadOnly on a store this process cannot write. */
  readonly readOnly: boolean;
  /** Why openOrReadOnly opened the store read-only (the refused open for writing); else null. */
  readonly readOnlyCause: RunlogError | null;
  readonly closed: boolean;
  /** `meta` ≤ 2 KiB, returned by runMeta. */
  createRun(runId: string, meta?: Bytes): Promise<void>;
  appendFacts(runId: string, events: NewEvent[]): Promise<Appended[]>;
  /** Rejects with FENCED (expected, actual) unless the run's last seq is `expectedSeq`. */
  appendDecisions(runId: string, expectedSeq: number, events: NewEvent[]): Promise<number[]>;
  /** Events after seq `after` (default 0), at most `limit` (default 1000, max 100000). */
  read(runId: string, after?: number, limit?: number): Promise<ReadPage>;
  lastSeq(runId: string): Promise<number>;
  /** The last seq once it exceeds `after`, or at the timeout (then ≤ after). */
  wait(runId: string, after: number, timeoutMs: number): Promise<number>;
  runInfo(runId: string): Promise<RunInfo>;
  runMeta(runId: string): Promise<Buffer>;
  /** Runs in id order after `after` (exclusive), at most `limit` (default 1000). */
  listRuns(after?: string | null, limit?: number): Promise<RunPage>;
  deleteRun(runId: string): Promise<void>;
  verifyRun(runId: string): Promise<VerifyReport>;
  /**
   * Synchronous: group-commit counters of this handle since it was opened (a file store's;
   * throws a RunlogError with code UNSUPPORTED on PostgreSQL).
   */
  commitStats(): CommitStats;
  /** New calls reject with CLOSED; resolves once earlier calls settled. Idempotent. */
  close(): Promise<void>;
  /** The World layer on this store (synchronous; one per store handle, shared). */
  world(): RunlogNativeWorld;
}

/** JSON text, or a value the addon passes through `JSON.stringify`. */
export type JsonArg = string | object;

export interface StreamChunkOut {
  index: number;
  data: Buffer;
}

/**
 * The addon's World (`runlog_world::World` and its streams). Requests, params and results
 * are JSON text in the SDK's shapes; every call runs on the addon's `io` lane
 * (`streamsWait` on the `wait` lane) and rejects with a `RunlogError`.
 */
export declare class RunlogNativeWorld {
  private constructor();
  readonly closed: boolean;
  createEvent(runId: string | null, request: JsonArg, params?: JsonArg): Promise<string>;
  /**
   * Several `createEvent` calls at once: one entry per call, in order, the result's JSON text
   * or the `RunlogError` that call alone would reject with. The calls of one run meet in one
   * group commit on one worker thread. Rejects as a whole only for a `calls` that is no array
   * or a closed World.
   */
  createEvents(calls: Array<[runId: string | null, request: JsonArg, params?: JsonArg]>): Promise<Array<string | RunlogError>>;
  /**
   * `events.createBatch` of a slot run (spec ≥ 6): `events` is `[{event, occurredAt?,
   * computeInstanceId?}]`; resolves with `{results}` as JSON text, one `BatchEventItemResult`
   * per event. Rejects as a whole for a batch the reference refuses or a run of spec < 6.
   */
  createBatch(runId: string, events: JsonArg, params?: JsonArg): Promise<string>;
  runsGet(runId: string, params?: JsonArg): Promise<string>;
  /** `(run | null)[]` as JSON text, in the order of `runIds` (a JSON array of run ids). */
  runsGetMany(runIds: JsonArg, params?: JsonArg): Promise<string>;
  /** The run once terminal, or as it is after `timeoutMs`; waits on the run's log. */
  runsWaitForTerminalStatus(runId: string, timeoutMs: number, params?: JsonArg): Promise<string>;
  /**
   * `runs.cancelMany`: `request` is `{runIds, cancelReason?}`; resolves with the
   * `BulkCancelWorkflowRunsResult` as JSON text. Rejects as a whole (`INVALID_INPUT`) for a
   * request the SDK's schema refuses (no id, more than 500, an id twice, a long reason).
   */
  runsCancelMany(request: JsonArg): Promise<string>;
  /**
   * `runs.experimentalSetAttributes`: `changes` is `[{key, value}]` (`value: null` removes
   * the key), `options.allowReservedAttributes` permits `$` keys; resolves with
   * `{"attributes": {...}}` (the run's attributes after the change) as JSON text. Written to
   * the run's attribute log (`attrs-<runId>`), never to its event log; accepted on a
   * terminal run. Rejects with `NOT_FOUND` (`WorkflowRunNotFoundError`) for an unknown run,
   * checked first, and `INVALID_INPUT` (`AttributeValidationError`) for changes breaking the
   * SDK's rules.
   */
  runsSetAttributes(runId: string, changes: JsonArg, options?: JsonArg): Promise<string>;
  runsList(params?: JsonArg): Promise<string>;
  stepsGet(runId: string, stepId: string, params?: JsonArg): Promise<string>;
  stepsList(params: JsonArg): Promise<string>;
  eventsGet(runId: string, eventId: string, params?: JsonArg): Promise<string>;
  /**
   * An event page in the wire form of crates/runlog-node/src/event_page.rs: its JSON text
   * (columns, `createdAt` in ms, `fix`/`fixPaths`, `bins`), the bytes of its binary values,
   * and its cursor and `hasMore` (also in the text).
   */
  eventsList(params: JsonArg): Promise<[text: string, bytes: Buffer | null, cursor: string | null, hasMore: boolean]>;
  /** The same wire form as `eventsList`. */
  eventsListByCorrelationId(params: JsonArg): Promise<[text: string, bytes: Buffer | null, cursor: string | null, hasMore: boolean]>;
  hooksGet(hookId: string, params?: JsonArg): Promise<string>;
  hooksGetByToken(token: string): Promise<string>;
  hooksList(params?: JsonArg): Promise<string>;
  streamsWrite(runId: string, name: string, chunk: Bytes): Promise<number>;
  streamsWriteMulti(runId: string, name: string, chunks: Bytes[]): Promise<{ start: number; end: number }>;
  streamsClose(runId: string, name: string): Promise<void>;
  streamsRead(
    runId: string,
    name: string,
    startIndex?: number,
    limit?: number,
  ): Promise<{ chunks: StreamChunkOut[]; nextIndex: number; hasMore: boolean; done: boolean }>;
  streamsWait(runId: string, name: string, index: number, timeoutMs: number): Promise<{ tailIndex: number; done: boolean }>;
  streamsGetChunks(
    runId: string,
    name: string,
    params?: JsonArg,
  ): Promise<{ data: StreamChunkOut[]; cursor: string | null; hasMore: boolean; done: boolean }>;
  streamsInfo(runId: string, name: string): Promise<{ tailIndex: number; done: boolean }>;
  streamsList(runId: string): Promise<string[]>;
}

export interface LaneStats {
  threads: number;
  idle: number;
  queued: number;
  threadsMax: number;
  threadsStarted: number;
  /** Jobs handed to the lane (counted when queued, synchronously). */
  jobsQueued: number;
  /** Jobs that ended (counted after the job settled its promise). */
  jobsRun: number;
}

/** The addon's worker threads: `io` (every call but wait) and `wait`. */
export declare function threadPoolStats(): { io: LaneStats; wait: LaneStats };
export declare function version(): string;
/**
 * The addon file loaded: RUNLOG_NODE_ADDON, else the platform package
 * `@runlog/world-runlog-<platform>` by name, else its directory `npm/<platform>/` beside this
 * package (src/native.js).
 */
export declare const addonPath: string;
/** How `addonPath` was found. */
export declare const addonSource: 'RUNLOG_NODE_ADDON' | 'package' | 'directory';
