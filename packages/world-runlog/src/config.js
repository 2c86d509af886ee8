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
// | queue                  | WORKFLOW_RUNLOG_QUEUE (`postgres` or `local`)           | `postgres` with a URL,   |
// |                        |                                                         | else `local`             |
// | queueSchema            | WORKFLOW_RUNLOG_QUEUE_SCHEMA                            | runlog_queue             |
// | queueConcurrency       | WORKFLOW_RUNLOG_QUEUE_CONCURRENCY                       | 25                       |
// | retention              | WORKFLOW_RUNLOG_RETENTION (finishedOlderThan), with     | off                      |
// |                        | WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR (archiveDir)      |                          |
//
// `retention: { finishedOlderThan, intervalMs?, archiveDir? }` collects finished runs in the
// background (the addon's `retention` option of Store.open, runlog_world's retention thread):
// `finishedOlderThan` is whole ms (at least 1) or a duration as `runlog gc` takes it (`30d`,
// `12h`, `90m`, `45s`, `500ms`), `intervalMs` whole ms; `archiveDir` defaults to `<dataDir>/archive`, as `runlog
// gc` does, and is required on PostgreSQL; `intervalMs` is the addon's default
// (`finishedOlderThan`, at most a minute) when omitted. Not with `readOnly: true`.
//
// With a PostgreSQL store the queue is in PostgreSQL too (src/queue-postgres.js,
// graphile-worker's tables in `queueSchema` of the same database): any server of the app
// takes any message. `queue: 'local'` keeps world-local's in-process queue (one server);
// a file store has only that one.
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

const OPTION_KEYS = [
  'url',
  'dataDir',
  'recoverActiveRuns',
  'readOnly',
  'port',
  'baseUrl',
  'streamFlushIntervalMs',
  'store',
  'queue',
  'queueSchema',
  'queueConcurrency',
  'retention',
];
const RETENTION_KEYS = ['finishedOlderThan', 'intervalMs', 'archiveDir'];

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
  if (store?.retention !== undefined) throw invalid('give `retention` as an option of its own, not in `store`');
  checkQueue(options, 'queue', 'queueSchema', 'queueConcurrency');
  if (options.retention !== undefined) checkRetention(options.retention);
}

/** `retention`'s shape: its keys, whole ms of at least 1, a non-empty `archiveDir`. */
function checkRetention(retention) {
  if (retention === null || typeof retention !== 'object' || Array.isArray(retention)) {
    throw invalid('`retention` must be an object: { finishedOlderThan, intervalMs?, archiveDir? }');
  }
  for (const key of Object.keys(retention)) {
    if (!RETENTION_KEYS.includes(key)) throw invalid(`unknown option \`retention.${key}\` (known: ${RETENTION_KEYS.join(', ')})`);
  }
  const { finishedOlderThan, intervalMs, archiveDir } = retention;
  const ms = (v) => Number.isSafeInteger(v) && v >= 1;
  if (durationMs(finishedOlderThan) === undefined) {
    throw invalid('`retention.finishedOlderThan` must be a whole number of ms (at least 1) or a duration: 30d, 12h, 90m, 45s, 500ms');
  }
  if (intervalMs !== undefined && !ms(intervalMs)) throw invalid('`retention.intervalMs` must be a whole number of ms, at least 1');
  if (archiveDir !== undefined && (typeof archiveDir !== 'string' || archiveDir === '')) {
    throw invalid('`retention.archiveDir` must be a non-empty string');
  }
}

const DURATION_UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Whole ms of at least 1 from a number or a duration string (`30d`, `12h`, `90m`, `45s`,
 * `500ms`, the units of `runlog gc --finished-before`); undefined for anything else.
 */
export function durationMs(value) {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 1 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /^([0-9]+)(ms|s|m|h|d)$/.exec(value);
  if (!m) return undefined;
  const n = Number(m[1]) * DURATION_UNIT_MS[m[2]];
  return Number.isSafeInteger(n) && n >= 1 ? n : undefined;
}

/**
 * `retention` from WORKFLOW_RUNLOG_RETENTION (finishedOlderThan: a duration or whole ms) and
 * WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR, for apps whose World the SDK creates with no options
 * (WORKFLOW_TARGET_WORLD); undefined when the first is unset or empty.
 */
function retentionFromEnv(env) {
  const text = env.WORKFLOW_RUNLOG_RETENTION?.trim();
  const archiveDir = env.WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR?.trim() || undefined;
  if (!text) {
    if (archiveDir !== undefined) throw invalid('WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR is set without WORKFLOW_RUNLOG_RETENTION');
    return undefined;
  }
  const finishedOlderThan = /^[0-9]+$/.test(text) ? Number(text) : text;
  if (durationMs(finishedOlderThan) === undefined) {
    throw invalid(`WORKFLOW_RUNLOG_RETENTION=${JSON.stringify(text)} must be whole ms (at least 1) or a duration: 30d, 12h, 90m, 45s, 500ms`);
  }
  return { finishedOlderThan, ...(archiveDir !== undefined && { archiveDir }) };
}

/**
 * The addon's `retention` option (`{ finishedOlderThanMs, intervalMs?, archiveDir }`, the
 * directory absolute), or undefined when off.
 */
function resolveRetention(retention, target, readOnly, cwd) {
  if (retention === undefined) return undefined;
  if (readOnly === true) throw invalid('`retention` needs a writable store, and `readOnly` is true');
  if (target.backend === 'postgres' && retention.archiveDir === undefined) {
    throw invalid('`retention.archiveDir` (or WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR) is required on a PostgreSQL store (it has no directory of its own)');
  }
  return {
    finishedOlderThanMs: durationMs(retention.finishedOlderThan),
    ...(retention.intervalMs !== undefined && { intervalMs: retention.intervalMs }),
    archiveDir: retention.archiveDir !== undefined ? path.resolve(cwd, retention.archiveDir) : path.join(target.dataDir, 'archive'),
  };
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The queue options (or their variables, named by `names`) are well formed. */
function checkQueue(values, queueName, schemaName, concurrencyName) {
  const queue = values[queueName];
  const schema = values[schemaName];
  const concurrency = values[concurrencyName];
  if (queue !== undefined && queue !== 'postgres' && queue !== 'local') throw invalid(`\`${queueName}\` must be 'postgres' or 'local'`);
  if (schema !== undefined && (typeof schema !== 'string' || !SCHEMA_NAME.test(schema))) {
    throw invalid(`\`${schemaName}\` must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63)`);
  }
  if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency >= 1 && concurrency <= 1000)) {
    throw invalid(`\`${concurrencyName}\` must be an integer in 1..1000`);
  }
}

/** A file store has world-local's queue only: nothing to resolve (the variables are not read). */
function fileQueue(defined) {
  if (defined.queue === 'postgres') throw invalid("`queue: 'postgres'` needs a PostgreSQL store (`url`)");
  return {};
}

/** `{ queue, queueSchema, queueConcurrency }` of a PostgreSQL store: options, then variables. */
function resolveQueue(defined, env) {
  const fromEnv = {
    WORKFLOW_RUNLOG_QUEUE: env.WORKFLOW_RUNLOG_QUEUE?.trim() || undefined,
    WORKFLOW_RUNLOG_QUEUE_SCHEMA: env.WORKFLOW_RUNLOG_QUEUE_SCHEMA?.trim() || undefined,
    WORKFLOW_RUNLOG_QUEUE_CONCURRENCY:
      env.WORKFLOW_RUNLOG_QUEUE_CONCURRENCY?.trim() ? Number(env.WORKFLOW_RUNLOG_QUEUE_CONCURRENCY) : undefined,
  };
  checkQueue(fromEnv, 'WORKFLOW_RUNLOG_QUEUE', 'WORKFLOW_RUNLOG_QUEUE_SCHEMA', 'WORKFLOW_RUNLOG_QUEUE_CONCURRENCY');
  const queue = defined.queue ?? fromEnv.WORKFLOW_RUNLOG_QUEUE ?? 'postgres';
  return {
    queue,
    queueSchema: defined.queueSchema ?? fromEnv.WORKFLOW_RUNLOG_QUEUE_SCHEMA ?? 'runlog_queue',
    queueConcurrency: defined.queueConcurrency ?? fromEnv.WORKFLOW_RUNLOG_QUEUE_CONCURRENCY ?? 25,
  };
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
 * `recoverActiveRuns, readOnly?, port?, baseUrl?, streamFlushIntervalMs?, store?, retention?`. `readOnly`:
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
  const retention = resolveRetention(defined.retention ?? retentionFromEnv(env), target, readOnly, cwd);
  return {
    ...target,
    target: target.dataDir ?? target.url,
    recoverActiveRuns,
    readOnly,
    port: defined.port,
    baseUrl: defined.baseUrl,
    streamFlushIntervalMs: defined.streamFlushIntervalMs,
    store: defined.store,
    retention,
    ...(target.backend === 'postgres' ? resolveQueue(defined, env) : fileQueue(defined)),
  };
}
