// world-runlog: a Workflow SDK World on runlog.
import type { World } from '@workflow/world';

import type { StoreOptions, Store, RunlogNativeWorld } from './store.js';

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
  /** Queue delivery port (world-local's; default PORT or the detected port). */
  port?: number;
  /** Queue delivery base URL (world-local's; default WORKFLOW_LOCAL_BASE_URL). */
  baseUrl?: string;
  streamFlushIntervalMs?: number;
  /** runlog limits for Store.open. */
  store?: StoreOptions;
}

/** Where the store is: a file store directory or a PostgreSQL URL. */
export type ResolvedTarget =
  | { backend: 'file'; /** Absolute. */ dataDir: string; url?: undefined }
  | { backend: 'postgres'; url: string; dataDir?: undefined };

export type ResolvedConfig = ResolvedTarget & {
  /** What Store.open is given: `dataDir` or `url`. */
  target: string;
  recoverActiveRuns: boolean;
  port?: number;
  baseUrl?: string;
  streamFlushIntervalMs?: number;
  store?: StoreOptions;
};

export interface RunlogWorld extends World {
  /** This World's runlog side: the resolved config and its store (opened on first use). */
  runlog: { config: ResolvedConfig; store(): Promise<Store>; world(): Promise<RunlogNativeWorld> };
}

/** The World; `createWorldFromModule` calls it with no arguments. */
export declare function createWorld(options?: RunlogWorldOptions): RunlogWorld;
export declare function resolveConfig(options?: RunlogWorldOptions, env?: NodeJS.ProcessEnv, cwd?: string): ResolvedConfig;
export declare const DEFAULT_DATA_DIR: string;
/** Whether `s` names a PostgreSQL store (`postgres://` or `postgresql://`, any case). */
export declare function isPostgresUrl(s: string): boolean;
/** The storage and streamer methods the World layer provides, by namespace. */
export declare const STORAGE_METHODS: Readonly<Record<'runs' | 'steps' | 'events' | 'hooks' | 'streams', readonly string[]>>;
/** The Workflow SDK error class for a rejection of the addon (store codes, World classNames). */
export declare function toWorkflowError(err: unknown): unknown;
