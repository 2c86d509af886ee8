// Options of createWorld() and the environment variables they fall back to.
//
// | option                 | env fallback                                            | default                  |
// |------------------------|---------------------------------------------------------|--------------------------|
// | url (PostgreSQL)       | WORKFLOW_RUNLOG_URL                                     | unset: the file store    |
// | dataDir                | WORKFLOW_RUNLOG_DATA_DIR, then                          | .workflow-data/runlog    |
// |                        | `${WORKFLOW_LOCAL_DATA_DIR}/runlog`                     | (from the process cwd)   |
// | recoverActiveRuns      | WORKFLOW_RUNLOG_RECOVER_ACTIVE_RUNS, then               | true                     |
// |                        | WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS (0/false, 1/true)    |                          |
// | port, baseUrl          | PORT, WORKFLOW_LOCAL_BASE_URL (read by the local queue) | the detected port        |
// | readOnly               | WORKFLOW_RUNLOG_READ_ONLY (0/false, 1/true)             | unset: read-only when    |
// |                        |                                                         | the store is not writable|
// | streamFlushIntervalMs  | –                                                       | unset (core: 10 ms)      |
// | store                  | –                                                       | runlog's limits          |
//
// The queue of @workflow/world-local reads its own variables as usual
// (WORKFLOW_LOCAL_QUEUE_CONCURRENCY, WORKFLOW_LOCAL_QUEUE_MAX_VISIBILITY,
// WORKFLOW_QUEUE_NAMESPACE). world-local's `tag` (file-name scoping inside a shared data
// directory) has no runlog equivalent and is refused: give each world its own dataDir.
//
// The store is a file store directory unless a PostgreSQL URL is given: `url` (or, with
// neither `url` nor `dataDir` given, WORKFLOW_RUNLOG_URL), a `postgres://` or
// `postgresql://` URL; `?schema=NAME` puts runlog's tables in that schema (created if
// missing), otherwise they go to the connection's default (normally `public`). An explicit
// option wins over every variable; `url` and `dataDir` together are refused. The SDK's own
// WORKFLOW_POSTGRES_URL (@workflow/world-postgres) is deliberately not read: that World's
// tables and runlog's are different, so one variable must not point both at one schema.
import path from 'node:path';

/** Default data directory, relative to the process's working directory. */
export const DEFAULT_DATA_DIR = path.join('.workflow-data', 'runlog');

const OPTION_KEYS = ['url', 'dataDir', 'recoverActiveRuns', 'readOnly', 'port', 'baseUrl', 'streamFlushIntervalMs', 'store'];

function invalid(message) {
  const err = new TypeError(`world-runlog createWorld(): ${message}`);
  err.code = 'INVALID_INPUT';
  return err;
}

/** `0`/`false` → false, `1`/`true` → true, anything else → undefined. */
function envFlag(value) {
  const v = value?.trim().toLowerCase();
  if (v === '0' || v === 'false') return false;
  if (v === '1' || v === 'true') return true;
  return undefined;
}

/** Whether `s` is a PostgreSQL URL (the addon's rule: the scheme, in any case). */
export function isPostgresUrl(s) {
  return /^postgres(ql)?:\/\//i.test(s);
}

function checkTypes(options) {
  for (const key of Object.keys(options)) {
    if (key === 'tag') {
      throw invalid('`tag` is not supported (it scopes world-local files); give this world its own `dataDir`');
    }
    if (!OPTION_KEYS.includes(key)) throw invalid(`unknown option \`${key}\` (known: ${OPTION_KEYS.join(', ')})`);
  }
  const { url, dataDir, recoverActiveRuns, readOnly, port, baseUrl, streamFlushIntervalMs, store } = options;
  if (url !== undefined && (typeof url !== 'string' || !isPostgresUrl(url))) {
    throw invalid('`url` must be a postgres:// or postgresql:// URL');
  }
  if (dataDir !== undefined && (typeof dataDir !== 'string' || dataDir === '')) throw invalid('`dataDir` must be a non-empty string');
  if (dataDir !== undefined && isPostgresUrl(dataDir)) throw invalid('`dataDir` is a directory; pass a PostgreSQL URL as `url`');
  if (url !== undefined && dataDir !== undefined) throw invalid('give `url` (PostgreSQL) or `dataDir` (file store), not both');
  if (recoverActiveRuns !== undefined && typeof recoverActiveRuns !== 'boolean') throw invalid('`recoverActiveRuns` must be a boolean');
  if (readOnly !== undefined && typeof readOnly !== 'boolean') throw invalid('`readOnly` must be a boolean');
  if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) throw invalid('`port` must be an integer in 1..65535');
  if (baseUrl !== undefined && typeof baseUrl !== 'string') throw invalid('`baseUrl` must be a string');
  if (streamFlushIntervalMs !== undefined && !(Number.isFinite(streamFlushIntervalMs) && streamFlushIntervalMs >= 0)) {
    throw invalid('`streamFlushIntervalMs` must be a non-negative number');
  }
  if (store !== undefined && (store === null || typeof store !== 'object')) throw invalid('`store` must be an object of Store.open options');
}

/** The store: `{ backend: 'postgres', url }` or `{ backend: 'file', dataDir }` (not yet absolute). */
function resolveTarget(defined, env) {
  if (defined.url !== undefined) return { backend: 'postgres', url: defined.url };
  if (defined.dataDir !== undefined) return { backend: 'file', dataDir: defined.dataDir };
  const envUrl = env.WORKFLOW_RUNLOG_URL?.trim();
  if (envUrl) {
    if (!isPostgresUrl(envUrl)) throw invalid('WORKFLOW_RUNLOG_URL must be a postgres:// or postgresql:// URL');
    return { backend: 'postgres', url: envUrl };
  }
  const dataDir =
    env.WORKFLOW_RUNLOG_DATA_DIR ||
    (env.WORKFLOW_LOCAL_DATA_DIR ? path.join(env.WORKFLOW_LOCAL_DATA_DIR, 'runlog') : DEFAULT_DATA_DIR);
  if (isPostgresUrl(dataDir)) throw invalid('WORKFLOW_RUNLOG_DATA_DIR is a directory; put a PostgreSQL URL in WORKFLOW_RUNLOG_URL');
  return { backend: 'file', dataDir };
}

/**
 * The resolved configuration: `{ backend: 'file', dataDir (absolute) }` or `{ backend:
 * 'postgres', url }`, then `target` (what Store.open is given: the directory or the URL),
 * `recoverActiveRuns, readOnly?, port?, baseUrl?, streamFlushIntervalMs?, store?`. `readOnly`:
 * `true` opens the store read-only, `false` for writing only (a store this process cannot
 * write fails start()), undefined for writing when it can, else read-only. `env` and `cwd`
 * are parameters for tests.
 */
export function resolveConfig(options = {}, env = process.env, cwd = process.cwd()) {
  if (options === null || typeof options !== 'object') throw invalid('options must be an object');
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  checkTypes(defined);
  const where = resolveTarget(defined, env);
  const target =
    where.backend === 'file'
      ? { backend: 'file', dataDir: path.resolve(cwd, where.dataDir) }
      : { backend: 'postgres', url: where.url };
  const recoverActiveRuns =
    defined.recoverActiveRuns ??
    envFlag(env.WORKFLOW_RUNLOG_RECOVER_ACTIVE_RUNS) ??
    envFlag(env.WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS) ??
    true;
  const readOnly = defined.readOnly ?? envFlag(env.WORKFLOW_RUNLOG_READ_ONLY);
  return {
    ...target,
    target: target.dataDir ?? target.url,
    recoverActiveRuns,
    readOnly,
    port: defined.port,
    baseUrl: defined.baseUrl,
    streamFlushIntervalMs: defined.streamFlushIntervalMs,
    store: defined.store,
  };
}
