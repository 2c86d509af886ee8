// The storage half of the World (runs, steps, events, hooks) and its streams: the place
// where the Rust World layer (crates/runlog-world, issue 12) plugs in.
//
// Until it lands, every method rejects with a WorkflowWorldError (status 501, code
// NOT_IMPLEMENTED) and `available` is false, so that start() does not try to recover runs
// from a storage that cannot list them. The method lists below are the World interface of
// @workflow/world 5.0.0-beta.21 (Storage and Streamer); wiring the World means replacing
// each placeholder with a call into the addon's World object (see README.md, "Wiring the
// World layer") and mapping its rejections with toWorkflowError.
import { WorkflowWorldError } from '@workflow/errors';

/** The World methods, by namespace, that storage provides. */
export const STORAGE_METHODS = Object.freeze({
  runs: ['get', 'list'],
  steps: ['get', 'list'],
  events: ['create', 'get', 'list', 'listByCorrelationId'],
  hooks: ['get', 'getByToken', 'list'],
  streams: ['write', 'writeMulti', 'close', 'get', 'list', 'getChunks', 'getInfo'],
});

function notAvailable(name) {
  return async () => {
    throw new WorkflowWorldError(
      `world-runlog: ${name} is not available yet: the runlog World layer (crates/runlog-world, issue 12) is not wired into this package`,
      { status: 501, code: 'NOT_IMPLEMENTED' },
    );
  };
}

/**
 * `{ available, runs, steps, events, hooks, streams }` for a World whose runlog store is
 * `openStore()` (a memoized `Promise<Store>`).
 */
export function createStorage(_openStore) {
  const storage = { available: false };
  for (const [ns, methods] of Object.entries(STORAGE_METHODS)) {
    storage[ns] = Object.fromEntries(methods.map((m) => [m, notAvailable(`${ns}.${m}`)]));
  }
  return storage;
}
