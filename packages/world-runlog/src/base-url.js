// Where the borrowed local queue delivers when nothing says where the app is. world-local's
// queue resolves the app's base URL at delivery: its `baseUrl`, WORKFLOW_LOCAL_BASE_URL, its
// `port`, PORT, then the port this process listens on, else it fails ("Unable to resolve
// base URL for workflow queue"). In the app's server that last step finds the server. In the
// SDK's CLI (`npx workflow health`, `workflow start`...), which listens on nothing, the local
// World works only because the CLI sets WORKFLOW_LOCAL_BASE_URL=http://localhost:3000 for
// it, and for no other World (@workflow/cli `inferLocalWorldEnvVars`, `health`). So this
// World's queue falls back to that same default where world-local's chain finds nothing:
// a message enqueued while nothing is configured and this process listens on no port goes
// to http://localhost:3000, as the CLI's local World's does. `start()`'s re-enqueues are
// left to world-local's own resolution at delivery (a server may start listening after it).

/** The CLI's default queue target for the local World. */
export const CLI_DEFAULT_BASE_URL = 'http://localhost:3000';

/** Whether anything in `config` or `env` gives the queue its target. */
export function baseUrlConfigured(config, env = process.env) {
  return Boolean(config.baseUrl || config.port || env.WORKFLOW_LOCAL_BASE_URL || env.PORT);
}

/**
 * Whether this process listens on a port, by the SDK's own detection
 * (`@workflow/utils/get-port`'s `getAllPorts`, the first step of world-local's), loaded from
 * world-local's dependencies; `null` when it cannot be loaded (this package inlined into a
 * bundle, say), in which case there is no fallback.
 */
async function loadDetector() {
  const getPort = await loadGetPort();
  if (typeof getPort?.getAllPorts !== 'function') return null;
  return async () => (await getPort.getAllPorts()).length > 0;
}

/** `@workflow/utils/get-port` as world-local's dependencies have it, or `null`. */
async function loadGetPort() {
  try {
    const { createRequire } = await import('node:module');
    const { fileURLToPath, pathToFileURL } = await import('node:url');
    const local = fileURLToPath(import.meta.resolve('@workflow/world-local'));
    const getPort = createRequire(local).resolve('@workflow/utils/get-port');
    return await import(pathToFileURL(getPort).href);
  } catch {
    return null;
  }
}

let getPortModule;
/**
 * The workflow routes of the port this process listens on, by the SDK's own detection
 * (`@workflow/utils/get-port`: `getWorkflowPort`, which probes each listening port's
 * workflow health route, where the line has it, else `getPort`; world-local's last step
 * when nothing is configured): `http://localhost:<port>/.well-known/workflow/v1`, or
 * `undefined` when it listens on none or the detection cannot be loaded.
 */
export async function listeningBaseUrl() {
  getPortModule ??= loadGetPort();
  const mod = await getPortModule;
  const find = mod?.getWorkflowPort ?? mod?.getPort;
  if (typeof find !== 'function') return undefined;
  const port = await find().catch(() => undefined);
  return port ? `http://localhost:${port}/.well-known/workflow/v1` : undefined;
}

/**
 * `queue` (world-local's) that sends to the queue of `fallbackWorld()` (a local World with
 * `baseUrl: CLI_DEFAULT_BASE_URL`, made once) a message enqueued while `baseUrlConfigured`
 * is false, `inStart()` is false and `listens()` says this process listens on no port.
 * `listens` defaults to the SDK's detection; a port once found is kept (a server keeps
 * listening).
 */
export function withBaseUrlFallback({ queue, config, fallbackWorld, inStart, listens }) {
  let detector = listens === undefined ? undefined : Promise.resolve(listens);
  let listening = false;
  const needsFallback = async () => {
    if (listening || inStart() || baseUrlConfigured(config)) return false;
    detector ??= loadDetector();
    const detect = await detector;
    if (detect === null) return false;
    listening = await detect().catch(() => true);
    return !listening;
  };
  return async (queueName, message, opts) => {
    if (await needsFallback()) return fallbackWorld().queue(queueName, message, opts);
    return queue(queueName, message, opts);
  };
}
