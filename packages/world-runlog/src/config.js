// Options of createWorld() and the environment variables they fall back to.
//
// | option                 | env fallback                                            | default                  |
// |------------------------|---------------------------------------------------------|--------------------------|
// | dataDir                | WORKFLOW_RUNLOG_DATA_DIR, then                          | .workflow-data/runlog    |
// |                        | `${WORKFLOW_LOCAL_DATA_DIR}/runlog`                     | (from the process cwd)   |
// | recoverActiveRuns      | WORKFLOW_RUNLOG_RECOVER_ACTIVE_RUNS, then               | true                     |
// |                        | WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS (0/false, 1/true)    |                          |
// | port, baseUrl          | PORT, WORKFLOW_LOCAL_BASE_URL (read by the local queue) | the detected port        |
// | streamFlushIntervalMs  | –                                                       | unset (core: 10 ms)      |
// | store                  | –                                                       | runlog's limits          |
//
// The queue of @workflow/world-local reads its own variables as usual
// (WORKFLOW_LOCAL_QUEUE_CONCURRENCY, WORKFLOW_LOCAL_QUEUE_MAX_VISIBILITY,
// WORKFLOW_QUEUE_NAMESPACE). world-local's `tag` (file-name scoping inside a shared data
// directory) has no runlog equivalent and is refused: give each world its own dataDir.
import path from 'node:path';

/** Default data directory, relative to the process's working directory. */
export const DEFAULT_DATA_DIR = path.join('.workflow-data', 'runlog');

const OPTION_KEYS = ['dataDir', 'recoverActiveRuns', 'port', 'baseUrl', 'streamFlushIntervalMs', 'store'];

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

function checkTypes(options) {
  for (const key of Object.keys(options)) {
    if (key === 'tag') {
      throw invalid('`tag` is not supported (it scopes world-local files); give this world its own `dataDir`');
    }
    if (!OPTION_KEYS.includes(key)) throw invalid(`unknown option \`${key}\` (known: ${OPTION_KEYS.join(', ')})`);
  }
  const { dataDir, recoverActiveRuns, port, baseUrl, streamFlushIntervalMs, store } = options;
  if (dataDir !== undefined && (typeof dataDir !== 'string' || dataDir === '')) throw invalid('`dataDir` must be a non-empty string');
  if (recoverActiveRuns !== undefined && typeof recoverActiveRuns !== 'boolean') throw invalid('`recoverActiveRuns` must be a boolean');
  if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) throw invalid('`port` must be an integer in 1..65535');
  if (baseUrl !== undefined && typeof baseUrl !== 'string') throw invalid('`baseUrl` must be a string');
  if (streamFlushIntervalMs !== undefined && !(Number.isFinite(streamFlushIntervalMs) && streamFlushIntervalMs >= 0)) {
    throw invalid('`streamFlushIntervalMs` must be a non-negative number');
  }
  if (store !== undefined && (store === null || typeof store !== 'object')) throw invalid('`store` must be an object of Store.open options');
}

/**
 * The resolved configuration: `{ dataDir (absolute), recoverActiveRuns, port?, baseUrl?,
 * streamFlushIntervalMs?, store? }`. `env` and `cwd` are parameters for tests.
 */
export function resolveConfig(options = {}, env = process.env, cwd = process.cwd()) {
  if (options === null || typeof options !== 'object') throw invalid('options must be an object');
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  checkTypes(defined);
  const dataDir =
    defined.dataDir ??
    (env.WORKFLOW_RUNLOG_DATA_DIR ||
      (env.WORKFLOW_LOCAL_DATA_DIR ? path.join(env.WORKFLOW_LOCAL_DATA_DIR, 'runlog') : DEFAULT_DATA_DIR));
  const recoverActiveRuns =
    defined.recoverActiveRuns ??
    envFlag(env.WORKFLOW_RUNLOG_RECOVER_ACTIVE_RUNS) ??
    envFlag(env.WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS) ??
    true;
  return {
    dataDir: path.resolve(cwd, dataDir),
    recoverActiveRuns,
    port: defined.port,
    baseUrl: defined.baseUrl,
    streamFlushIntervalMs: defined.streamFlushIntervalMs,
    store: defined.store,
  };
}
