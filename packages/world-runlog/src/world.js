// createWorld(): a Workflow SDK World (spec 5) whose storage and streams are runlog's and
// whose queue is @workflow/world-local's (the published local queue: HTTP delivery to the
// app's /.well-known/workflow/v1/flow, delaySeconds, idempotency keys, redelivery).
import { reenqueueActiveRuns, SPEC_VERSION_CURRENT } from '@workflow/world';
import { createWorld as createLocalWorld } from '@workflow/world-local';

import { resolveConfig } from './config.js';
import { beta55Modules, detectBeta55Line, extendForBeta55 } from './line-beta55.js';
import { Store } from './native.js';
import { createStorage } from './storage.js';

/** The members of world-local's World that this World takes: its queue, nothing stored. */
const QUEUE_MEMBERS = ['queue', 'createQueueHandler', 'getDeploymentId', 'registerHandler'];

/**
 * A World on runlog. `createWorldFromModule` calls it with no arguments; options (and
 * their environment fallbacks) are in src/config.js. Nothing is opened or created until
 * `start()` or the first storage call; `close()` closes the store and the queue.
 */
export function createWorld(options = {}) {
  const config = resolveConfig(options);
  // world-local creates no file until its own start() or storage are used; this World
  // calls neither, so its data directory is never touched.
  // The app's runtime line decides the queue (each line's world-local speaks its own
  // payloads) and the surface (src/line-beta55.js).
  const line = detectBeta55Line();
  const lineModules = line && beta55Modules(line);
  const createQueueWorld = lineModules?.createLocalWorld ?? createLocalWorld;
  const reenqueue = lineModules?.reenqueueActiveRuns ?? reenqueueActiveRuns;
  const local = createQueueWorld({ recoverActiveRuns: false, port: config.port, baseUrl: config.baseUrl });
  const queue = Object.fromEntries(QUEUE_MEMBERS.filter((k) => k in local).map((k) => [k, local[k]]));

  // A failed open (an unreachable PostgreSQL server, say) is not kept: the next call tries
  // again, so a World created before its server came up recovers on its own.
  let opening;
  const openStore = () => {
    opening ??= Store.open(config.target, config.store).catch((err) => {
      opening = undefined;
      throw err;
    });
    return opening;
  };
  let world;
  const openWorld = () => {
    world ??= openStore().then(
      (store) => store.world(),
      (err) => {
        world = undefined;
        throw err;
      },
    );
    return world;
  };
  const storage = createStorage(openWorld);
  let closed = false;

  const self = {
    specVersion: SPEC_VERSION_CURRENT,
    ...queue,
    runs: storage.runs,
    steps: storage.steps,
    events: storage.events,
    hooks: storage.hooks,
    streams: storage.streams,
    ...(config.streamFlushIntervalMs !== undefined && { streamFlushIntervalMs: config.streamFlushIntervalMs }),

    /**
     * Opens the store (creating `dataDir`, or runlog's tables on PostgreSQL), then
     * re-enqueues the runs it holds as active. An unreachable server rejects with the
     * addon's IO error (path `postgres`).
     */
    async start() {
      await openStore();
      if (config.recoverActiveRuns && storage.available) {
        // Through the World's own `queue` member, so that a wrapper (or a test) replacing it
        // is used.
        await reenqueue(self.runs, (name, payload, opts) => self.queue(name, payload, opts), 'world-runlog');
      }
    },

    /** Closes the queue and the store; idempotent. */
    async close() {
      if (closed) return;
      closed = true;
      storage.close();
      await local.close();
      const store = await opening?.catch(() => undefined);
      await store?.close();
    },

    /** This World's runlog side: the resolved config and the store (opened on first use). */
    runlog: { config, store: openStore, world: openWorld },
  };
  if (line) extendForBeta55(self, { line, openWorld });
  return self;
}
