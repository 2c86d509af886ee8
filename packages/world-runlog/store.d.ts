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
  /**
   * Collect finished runs in the background (the World's retention thread); off when
   * omitted. `Store.openReadOnly` refuses it; `Store.openOrReadOnly` on a store this process
   * cannot write leaves it off (`retentionStats()` is null). `close()` stops it.
   */
  retention?: RetentionOptions | null;
}

/**
 * The `retention` option of `Store.open`: every `intervalMs`, a gc (as `runlog gc`) archives
 * each run finished longer than `finishedOlderThanMs` ago, with no available hook, no
 * waiting wait and no running step, into `archiveDir/<runId>.rla` and removes it from the
 * store (`runlog restore RUN --archive DIR` puts it back). Times are whole ms, at least 1.
 */
export interface RetentionOptions {
  finishedOlderThanMs: number;
  /** Default `finishedOlderThanMs`, at most 60000 (a pass a minute). */
  intervalMs?: number;
  /** Default `<store directory>/archive` (the CLI's); required on PostgreSQL. */
  archiveDir?: string;
}

/** JSON text, or a value the addon passes through `JSON.stringify`. */
export type JsonArg = string | object;

export interface StreamChunkOut {
  index: number;
  data: Buffer;
}

/** `streamsRead`: the chunks from `startIndex` on. */
export interface StreamRead {
  chunks: StreamChunkOut[];
  nextIndex: number;
  hasMore: boolean;
  done: boolean;
}

/** `streamsGetChunks`: one page of chunks and the cursor of the next. */
export interface StreamChunkPage {
  data: StreamChunkOut[];
  cursor: string | null;
  hasMore: boolean;
  done: boolean;
}

/**
 * An event page in the wire form of docs/EVENT-PAGE.md (`eventsList`,
 * `eventsListByCorrelationId`): its JSON text (the payloads, the ids, the event types, the
 * revive paths), its binary part (`createdAt`, `specVersion`, id lengths, revive places and
 * the bytes of binary values; `null` in the fallback form), and its cursor and `hasMore`
 * (also in the text).
 */
export type EventPageWire = [text: string, part: Buffer | null, cursor: string | null, hasMore: boolean];

/**
 * The addon's classes and functions, generated from the Rust source (`native.d.ts`, by
 * crates/runlog-node/dts.sh; CI checks it is current). `RunlogNativeWorld` is the addon's
 * `World` class (`runlog_world::World` and its streams): requests, params and results are
 * JSON text in the SDK's shapes; every call runs on the addon's `io` lane (`streamsWait` on
 * the `wait` lane) and rejects with a `RunlogError`.
 */
export { Store, threadPoolStats, version } from './native.js';
/**
 * The addon's `World` class (a type only: `store.world()` makes one), and the results the addon
 * builds as #[napi(object)] structs, declared in native.d.ts.
 */
export type {
  World as RunlogNativeWorld,
  Appended,
  CommitStats,
  DamagedRun,
  LaneStats,
  PageCacheCounts,
  Problem,
  RetentionStats,
  RunInfo,
  RunPage,
  StreamInfo,
  StreamRange,
  ThreadPoolStats,
  VerifyReport,
} from './native.js';

/**
 * The addon file loaded: RUNLOG_NODE_ADDON, else the platform package
 * `@runlog/world-runlog-<platform>` by name, else its directory `npm/<platform>/` beside this
 * package (src/native.js).
 */
export declare const addonPath: string;
/** How `addonPath` was found. */
export declare const addonSource: 'RUNLOG_NODE_ADDON' | 'package' | 'directory';
