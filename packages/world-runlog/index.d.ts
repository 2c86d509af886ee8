// world-runlog: a Workflow SDK World on runlog.
import type { Hook, Step, Wait, World, WorkflowRun } from '@workflow/world';

import type { StoreOptions, Store, RunlogNativeWorld, RunlogError, RunlogErrorCode, RetentionOptions, RetentionStats } from './store.js';

export * from './store.js';

export interface RunlogWorldOptions {
  /**
   * A PostgreSQL store: a `postgres://` or `postgresql://` URL (`?schema=NAME` picks the
   * schema). Default WORKFLOW_RUNLOG_URL when neither `url` nor `dataDir` is given; not with
   * `dataDir`.
   */
  url?: string;
  /** File store directory; default WORKFLOW_RUNLOG_DATA_DIR, `${WORKFLOW_LOCAL_DATA_DIR}/runlog`, `.workflow-data/runlog`. */
  dataDir?: string;
  /** Re-enqueue pending and running runs on start(); default WORKFLOW_RUNLOG_RECOVER_ACTIVE_RUNS, WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS, true. */
  recoverActiveRuns?: boolean;
  /**
   * `true`: open the store read-only (reads work, writes reject with READ_ONLY 403, start()
   * re-enqueues nothing); `false`: for writing only (a file store this process cannot write
   * fails start()); unset: read-only when this process cannot write the file store. Default
   * WORKFLOW_RUNLOG_READ_ONLY (0/false, 1/true).
   */
  readOnly?: boolean;
  /** Queue delivery port (world-local's; default PORT or the detected port). */
  port?: number;
  /** Queue delivery base URL (world-local's; default WORKFLOW_LOCAL_BASE_URL). */
  baseUrl?: string;
  streamFlushIntervalMs?: number;
  /** runlog limits for Store.open. */
  store?: StoreOptions;
  /**
   * A PostgreSQL store's queue: `postgres` (default; graphile-worker jobs in the same
   * database, taken by any server of the app, src/queue-postgres.js) or `local`
   * (world-local's in-process queue). Default WORKFLOW_RUNLOG_QUEUE. A file store has only `local`.
   */
  queue?: 'postgres' | 'local';
  /** graphile-worker's schema for the PostgreSQL queue; default WORKFLOW_RUNLOG_QUEUE_SCHEMA, `runlog_queue`. */
  queueSchema?: string;
  /** Jobs this server runs at once (1..1000); default WORKFLOW_RUNLOG_QUEUE_CONCURRENCY, 25. */
  queueConcurrency?: number;
  /** Collect finished runs in the background into per-run archives; off when omitted. */
  retention?: RunlogRetentionOptions;
}

/**
 * createWorld's `retention`: every `intervalMs`, each run finished more than
 * `finishedOlderThan` ms ago (with no available hook, no waiting wait, no running step) is
 * archived into `archiveDir/<runId>.rla` and removed from the store, as `runlog gc` does
 * (`runlog restore RUN --archive DIR` puts it back). `finishedOlderThan` is whole ms (at
 * least 1) or a duration as `runlog gc` takes it (`'30d'`, `'12h'`, `'90m'`, `'45s'`,
 * `'500ms'`); `intervalMs` whole ms. Without the option, WORKFLOW_RUNLOG_RETENTION (and
 * WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR) give it. Not with `readOnly: true`; a store opened
 * read-only collects nothing.
 */
export interface RunlogRetentionOptions {
  finishedOlderThan: number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`;
  /** Default `finishedOlderThan`, at most 60000 (a pass a minute). */
  intervalMs?: number;
  /** Default `<dataDir>/archive` (as `runlog gc`); required on PostgreSQL. */
  archiveDir?: string;
}

/** Where the store is: a file store directory or a PostgreSQL URL. */
export type ResolvedTarget =
  | { backend: 'file'; /** Absolute. */ dataDir: string; url?: undefined }
  | { backend: 'postgres'; url: string; dataDir?: undefined };

export type ResolvedConfig = ResolvedTarget & {
  /** What Store.open is given: `dataDir` or `url`. */
  target: string;
  recoverActiveRuns: boolean;
  readOnly?: boolean;
  port?: number;
  baseUrl?: string;
  streamFlushIntervalMs?: number;
  store?: StoreOptions;
  /** The addon's `retention` option of Store.open (`archiveDir` absolute); undefined: off. */
  retention?: RetentionOptions;
  /** PostgreSQL stores only. */
  queue?: 'postgres' | 'local';
  queueSchema?: string;
  queueConcurrency?: number;
};

/** The SDK line a World serves (src/line.js): whose `@workflow/world` and `@workflow/world-local` it uses. */
export interface RunlogWorldLine {
  /** The SDK line (src/line.js, the one line detection): 4.x, 5.0.0-beta.35-like (spec 5), 5.0.0-beta.55-like (spec 6-7). */
  name: '4.x' | '5.0.0-beta.35' | '5.0.0-beta.55';
  /** `app`: resolved from the process's cwd; `package`: this package's own. */
  source: 'app' | 'package';
  /** Their versions (null when this package is bundled and cannot read its own). */
  worldVersion: string | null;
  worldLocalVersion: string | null;
  /** What the World declares: 3 on workflow 4.x, 5 on 5.0.0-beta.35, the line's `mintedSpecVersion()` on 5.0.0-beta.55 (7, or 6 with `WORKFLOW_SEALED_LOG=0`). */
  specVersion: number;
}

/**
 * The Streamer of `@workflow/world` 4.x, flat on the World and name first (src/streams-v4.js),
 * over the same streams as `streams`. A name is one stream, whatever run id is given.
 */
export interface RunlogStreamerV4 {
  writeToStream(name: string, runId: string | Promise<string>, chunk: string | Uint8Array): Promise<void>;
  writeToStreamMulti(name: string, runId: string | Promise<string>, chunks: (string | Uint8Array)[]): Promise<void>;
  closeStream(name: string, runId: string | Promise<string>): Promise<void>;
  /** A live reader of stream `name` from `startIndex` (negative: from the end); waits for a stream not yet written. */
  readFromStream(name: string, startIndex?: number): Promise<ReadableStream<Uint8Array>>;
  listStreamsByRunId(runId: string): Promise<string[]>;
  getStreamChunks(
    name: string,
    runId: string,
    options?: { limit?: number; cursor?: string },
  ): Promise<{ data: { index: number; data: Uint8Array }[]; cursor: string | null; hasMore: boolean; done: boolean }>;
  getStreamInfo(name: string, runId: string): Promise<{ tailIndex: number; done: boolean }>;
}

export interface RunlogWorld extends World, RunlogStreamerV4 {
  /**
   * This World's runlog side: the resolved config, the SDK line it serves and its store
   * (opened on first use).
   */
  runlog: {
    config: ResolvedConfig;
    line: RunlogWorldLine;
    /** What the last `start()` could not recover (undefined before, or with recovery off). */
    readonly recovery: RunlogRecovery | undefined;
    /**
     * After `start()`: false (the store takes writes) or how it is read-only: `requested`
     * (readOnly: true), else `cause`, the refused open for writing. Undefined before.
     */
    readonly readOnly: false | { path: string; requested: boolean; cause: RunlogError | null } | undefined;
    store(): Promise<Store>;
    world(): Promise<RunlogNativeWorld>;
    /**
     * With `retention`: the retention thread's `{ passes, collected }` since the store was
     * opened (final after `close()`); null when off, before the store is open (`start()` or
     * the first storage call opens it), or on a read-only store.
     */
    retentionStats(): RetentionStats | null;
    /**
     * The run as of `at`: a seq of its log (1 to its last), or a time (ISO string or `Date`:
     * the last seq whose event's `createdAt` is at or before it). What the World's reads
     * return on the log truncated there; cost: the events up to that seq. Rejects with
     * WorkflowWorldError 400 `INVALID_INPUT` for seq 0, a seq past the end or a time before
     * the first event, WorkflowRunNotFoundError for an unknown run.
     */
    runAt(runId: string, at: RunlogPoint): Promise<RunlogRunAt>;
    /** Which entities changed from `from` (0: the empty log) to `to`, and by which events. */
    runDiff(runId: string, from: RunlogPoint, to: RunlogPoint): Promise<RunlogRunDiff>;
    /** With the PostgreSQL queue: its counters since this World was made; else undefined. */
    queue: { stats: RunlogQueueStats; start(): Promise<void> } | undefined;
  };
}

/** A point of a run's log: a seq, or a time (ISO-8601 string or `Date`). */
export type RunlogPoint = number | string | Date;

/** A run as of one seq of its log (`world.runlog.runAt`; crates/runlog-world `RunAt`). */
export interface RunlogRunAt {
  /** The seq the state is of. */
  seq: number;
  /** The log's last seq when it was read. */
  lastSeq: number;
  /** Null until the log's `run_created` is applied. */
  run: WorkflowRun | null;
  /** In creation order. */
  steps: Step[];
  /** Live hooks (not disposed, their run not ended), in creation order. */
  hooks: Hook[];
  /** In creation order. */
  waits: Wait[];
}

/** An event of a `RunlogRunDiff`. */
export interface RunlogDiffEvent {
  seq: number;
  eventType: string;
}

/** One entity that changed between the two seqs of a `RunlogRunDiff`. */
export interface RunlogEntityChange {
  entity: 'run' | 'step' | 'hook' | 'wait';
  /** `runId`, `stepId`, `hookId` or `waitId`. */
  id: string;
  change: 'created' | 'changed' | 'removed';
  /** The events that changed it when applied, ascending. */
  events: RunlogDiffEvent[];
  before: WorkflowRun | Step | Hook | Wait | null;
  after: WorkflowRun | Step | Hook | Wait | null;
}

/** Which entities of a run changed from seq `from` to seq `to` (`world.runlog.runDiff`). */
export interface RunlogRunDiff {
  runId: string;
  from: number;
  to: number;
  /** The run, then steps, hooks and waits, each by id. */
  changes: RunlogEntityChange[];
  /** Events that changed no entity when applied (a `hook_received`, a start stored before its step). */
  unchanged: RunlogDiffEvent[];
}

/** Counters of the PostgreSQL queue of one server (src/queue-postgres.js). */
export interface RunlogQueueStats {
  /** Deliveries answered with a plain 2xx (the job completed). */
  delivered: number;
  /** Deliveries answered `{ timeoutSeconds }` (a follow-up job added). */
  rescheduled: number;
  /** Deliveries that failed (HTTP error, transport) and were re-added 5 s later. */
  retried: number;
  /** Jobs of dead workers this server's sweeper released for redelivery. */
  redelivered: number;
  /** Enqueues of an idempotency key whose message was still waiting or running. */
  deduped: number;
}

/**
 * Why a run's log cannot be read to its end: `storageError` of a run listed by `runs.list`
 * (and of a hook listed by the store-wide `hooks.list`), whose other fields are what its
 * readable part holds (crates/runlog-world `StorageFault`). Not in the SDK's schemas.
 */
export interface RunlogStorageFault {
  runId: string;
  /** The store's code: `CORRUPT`, `UNSUPPORTED_VERSION`, `IO`, `BUSY`, `POISONED`, ... */
  code: RunlogErrorCode;
  /** The store's message (run, segment file and byte offset for corruption). */
  message: string;
  /** The last seq read before the fault (0: nothing could be read). */
  readableSeq: number;
  segment?: string;
  offset?: number;
}

/** The active runs `start()` did not re-enqueue because their logs cannot be read to their end. */
export interface RunlogRecovery {
  unrecovered: { runId: string; code: RunlogErrorCode; message: string; readableSeq: number }[];
  /** `'read-only'`: the store is read-only, nothing was re-enqueued. */
  skipped?: 'read-only';
}

/** One run's outcome of `runs.cancelMany` (`BulkCancelWorkflowRunResult` of @workflow/world 5.0.0-beta.37). */
export type RunlogBulkCancelRunResult =
  | { runId: string; outcome: 'cancelled' | 'already_cancelled' | 'not_found' }
  | { runId: string; outcome: 'not_cancellable'; status: 'completed' | 'failed' }
  | { runId: string; outcome: 'failed'; code: string; retryable: boolean };

/** `runs.cancelMany`'s result: one outcome per requested id, in request order, and their counts. */
export interface RunlogBulkCancelResult {
  summary: { requested: number; cancelled: number; alreadyCancelled: number; notCancellable: number; notFound: number; failed: number };
  results: RunlogBulkCancelRunResult[];
}

/**
 * A stream write session (`StreamWriteSession` of @workflow/world 5.0.0-beta.37,
 * src/write-session.js): groups applied in call order, each one atomic append; `chunkSeq`
 * checked (a non-negative integer) and observed, not enforced; a failed request fails every
 * later one with its error.
 */
export interface RunlogStreamWriteSession {
  readonly writerId: `wrtr_${string}`;
  write(chunkSeq: number, chunks: (string | Uint8Array)[]): Promise<void>;
  close(): Promise<void>;
  dispose(): void;
}

/**
 * What a World of both 5.x lines (5.0.0-beta.35, 5.0.0-beta.55) has beyond `RunlogWorld`
 * (src/attributes.js); absent on the 4.x line, whose `@workflow/world` declares none.
 */
export interface RunlogV5Members {
  runs: {
    /**
     * The run's attributes changed outside its event log (no event, no slot moves; also on a
     * terminal run); resolves with the attributes after the change. Rejects with
     * `WorkflowRunNotFoundError` for an unknown run, `AttributeValidationError` for changes
     * breaking the SDK's rules (at most 64 per run, keys ≤ 256 characters, values ≤ 256
     * bytes, no `$` key unless `allowReservedAttributes`), WorkflowWorldError 400
     * `INVALID_INPUT` for arguments of the wrong type.
     */
    experimentalSetAttributes(
      runId: string,
      changes: { key: string; value: string | null }[],
      options?: { allowReservedAttributes?: boolean },
    ): Promise<{ attributes: Record<string, string> }>;
  };
}

/**
 * What a World of the 5.0.0-beta.55 line has beyond `RunlogWorld` (src/line-beta55.js); its
 * `createBatch`, `getMany` and `waitForTerminalStatus` are the line's `World`'s.
 */
export interface RunlogBeta55Members {
  runs: RunlogV5Members['runs'] & {
    /** 1–500 unique run ids, `cancelReason` ≤ 512 characters; else WorkflowWorldError 400 `INVALID_INPUT`. */
    cancelMany(request: { runIds: string[]; cancelReason?: string }): Promise<RunlogBulkCancelResult>;
  };
  streams: {
    /** Throws WorkflowWorldError 400 `INVALID_INPUT` for a bad run id, name or `writerId` (`wrtr_` + ULID). */
    createWriteSession(runId: string, name: string, options: { writerId: `wrtr_${string}` }): RunlogStreamWriteSession;
  };
}

/** The World; `createWorldFromModule` calls it with no arguments. */
export declare function createWorld(options?: RunlogWorldOptions): RunlogWorld;
export declare function resolveConfig(options?: RunlogWorldOptions, env?: NodeJS.ProcessEnv, cwd?: string): ResolvedConfig;
export declare const DEFAULT_DATA_DIR: string;
/** Whether `s` names a PostgreSQL store (`postgres://` or `postgresql://`, any case). */
export declare function isPostgresUrl(s: string): boolean;
/** The storage and streamer methods the World layer provides, by namespace. */
export declare const STORAGE_METHODS: Readonly<Record<'runs' | 'steps' | 'events' | 'hooks' | 'streams', readonly string[]>>;
/** The storage methods the 5.0.0-beta.55 line adds or reshapes (on a World of that line only). */
export declare const BETA55_METHODS: Readonly<Record<'runs' | 'events', readonly string[]>>;
/** The Workflow SDK error class for a rejection of the addon (its className, else its code's status; docs/ERRORS.md). */
export declare function toWorkflowError(err: unknown): unknown;
