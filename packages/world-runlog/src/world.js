// createWorld(): a Workflow SDK World whose storage and streams are runlog's and whose
// queue is @workflow/world-local's (the published local queue: HTTP delivery to the app's
// /.well-known/workflow/v1/flow, delaySeconds, idempotency keys, redelivery), that of the
// SDK line the app runs (src/line.js): on workflow 4.x it declares spec 3 and borrows
// world-local 4.x's queue, on 5.0.0-beta.35 spec 5 and world-local 5.0.0-beta.29's, on
// 5.0.0-beta.55 spec 7 (6 with WORKFLOW_SEALED_LOG=0), world-local 5.0.0-beta.46's queue and
// the line's own members (src/line-beta55.js); both 5.x lines have
// `runs.experimentalSetAttributes` (src/attributes.js). Both
// stream surfaces are on it: the 5.x `streams` and the flat 4.x names (src/streams-v4.js),
// over the same Rust streams. With a PostgreSQL store the queue is in PostgreSQL too
// (src/queue-postgres.js: graphile-worker jobs, delivered to world-local's queue handler by
// whichever server of the app takes them); `queue: 'local'` keeps world-local's.
import { setAttributesMember } from './attributes.js';
import { CLI_DEFAULT_BASE_URL, withBaseUrlFallback } from './base-url.js';
import { resolveConfig } from './config.js';
import { createHistory } from './history.js';
import { extendForBeta55 } from './line-beta55.js';
import { reportMaxEvents } from './max-events.js';
import { detectLine, LINES } from './line.js';
import { Store } from './native.js';
import { recoverActiveRuns } from './recovery.js';
import { createStorage } from './storage.js';
import { createStreamerV4 } from './streams-v4.js';

/** The members of world-local's World that this World takes: its queue, nothing stored. */
const QUEUE_MEMBERS = ['queue', 'createQueueHandler', 'getDeploymentId', 'registerHandler'];

/**
 * A World on runlog. `createWorldFromModule` calls it with no arguments; options (and
 * their environment fallbacks) are in src/config.js. Nothing is opened or created until
 * `start()` or the first storage call; `close()` closes the store and the queue.
 */
export function createWorld(options = {}) {
  const config = resolveConfig(options);
  const line = detectLine();
  // world-local creates no file until its own start() or storage are used; this World
  // calls neither, so its data directory is never touched.
  // The app's runtime line (src/line.js) decides the queue (each line's world-local speaks
  // its own payloads), the spec version and, on 5.0.0-beta.55, the surface
  // (src/line-beta55.js).
  const local = line.createLocalWorld({ recoverActiveRuns: false, port: config.port, baseUrl: config.baseUrl });
  const queue = Object.fromEntries(QUEUE_MEMBERS.filter((k) => k in local).map((k) => [k, local[k]]));
  // Where nothing says where the app is, the CLI's default for the local World (src/base-url.js).
  let fallbackLocal;
  let starting = false;
  queue.queue = withBaseUrlFallback({
    queue: local.queue,
    config,
    fallbackWorld: () => (fallbackLocal ??= line.createLocalWorld({ recoverActiveRuns: false, baseUrl: CLI_DEFAULT_BASE_URL })),
    inStart: () => starting,
  });
  // A PostgreSQL store's queue is in PostgreSQL too (src/queue-postgres.js): any server of
  // the app delivers any message; world-local's createQueueHandler still answers them. Its
  // module (graphile-worker, pg) is loaded on first use: a file store never loads it.
  let pgQueue;
  const loadPgQueue =
    config.queue === 'postgres'
      ? () =>
          (pgQueue ??= import('./queue-postgres.js').then(({ createPostgresQueue }) => {
            const q = createPostgresQueue({
              url: config.url,
              schema: config.queueSchema,
              concurrency: config.queueConcurrency,
              target: { baseUrl: config.baseUrl, port: config.port },
              combinedRoute: line.name === LINES.BETA55,
              local,
            });
            pgStats = q.stats;
            return q;
          }))
      : undefined;
  let pgStats;
  if (loadPgQueue) {
    queue.queue = async (queueName, message, opts) => (await loadPgQueue()).queue(queueName, message, opts);
  }

  // A failed open (an unreachable PostgreSQL server, say) is not kept: the next call tries
  // again, so a World created before its server came up recovers on its own.
  let opening;
  // The store once opened (for `runlog.retentionStats()`, synchronous).
  let opened;
  const openStore = () => {
    opening ??= openConfigured(config).then(
      (store) => (opened = store),
      (err) => {
        opening = undefined;
        throw err;
      },
    );
    return opening;
  };
  let readOnly;
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
  const streamerV4 = createStreamerV4(storage.streams, openStore);
  let closed = false;
  let recovery;

  const self = {
    specVersion: line.specVersion,
    ...queue,
    runs: storage.runs,
    steps: storage.steps,
    events: storage.events,
    hooks: storage.hooks,
    streams: storage.streams,
    ...streamerV4.methods,
    ...(config.streamFlushIntervalMs !== undefined && { streamFlushIntervalMs: config.streamFlushIntervalMs }),

    /**
     * Opens the store (creating `dataDir`, or runlog's tables on PostgreSQL), then
     * re-enqueues the runs it holds as active. A store this process cannot write (another
     * user's, a read-only mount) or `readOnly: true` opens read-only: every read works, every
     * write rejects with `READ_ONLY` (WorkflowWorldError 403), and start() warns once and
     * re-enqueues nothing (`runlog.readOnly`, `runlog.recovery.skipped`). A missing `dataDir`
     * that cannot be created, or a directory of other files (`NOT_A_STORE`), rejects naming
     * the path; an active run whose log cannot be read to its
     * end is not re-enqueued but reported (a warning naming it, and `runlog.recovery`,
     * src/recovery.js). An unreachable server rejects with the addon's IO error (path
     * `postgres`).
     */
    async start() {
      const store = await openStore();
      // This server takes messages from now on, whether or not it enqueues any.
      if (loadPgQueue && !store.readOnly) {
        await (await loadPgQueue()).start();
      }
      if (store.readOnly) {
        // Recovery re-enqueues runs for writes that cannot happen here: skipped, said once.
        if (readOnly === undefined) {
          readOnly = { path: config.dataDir ?? 'postgres', requested: config.readOnly === true, cause: store.readOnlyCause };
          console.warn(readOnlyWarning(readOnly, config.retention !== undefined));
        }
        recovery = { unrecovered: [], skipped: 'read-only' };
        return;
      }
      readOnly = false;
      if (config.recoverActiveRuns && storage.available) {
        // Through the World's own `queue` member, so that a wrapper (or a test) replacing it
        // is used.
        // `self.runs`: on the beta.55 line its `list` takes the status array that line's
        // reenqueueActiveRuns asks for.
        const enqueue = (name, payload, opts) => self.queue(name, payload, opts);
        starting = true;
        try {
          recovery = await recoverActiveRuns(self.runs, enqueue, line.reenqueueActiveRuns, 'world-runlog');
        } finally {
          starting = false;
        }
      }
    },

    /**
     * Closes the queue and the store; idempotent. With `retention`, the retention thread is
     * stopped and joined first (a pass under way ends; none starts after).
     */
    async close() {
      if (closed) return;
      closed = true;
      streamerV4.close();
      storage.close();
      const q = await pgQueue?.catch(() => undefined);
      await q?.close();
      await local.close();
      await fallbackLocal?.close();
      const store = await opening?.catch(() => undefined);
      await store?.close();
    },

    /**
     * This World's runlog side: the resolved config, the SDK line it serves (whose packages,
     * their versions, the spec version declared) and the store (opened on first use).
     */
    runlog: {
      config,
      /** After `start()` recovered active runs: `{ unrecovered: [{ runId, code, message, readableSeq }] }`. */
      get recovery() {
        return recovery;
      },
      /**
       * After `start()`: `false` (the store takes writes), or `{ path, requested, cause }`
       * for a read-only store: `requested` when `readOnly: true` asked for it, else `cause`,
       * the refused open for writing (`IO`, `errno` EACCES/EPERM/EROFS, `path`).
       */
      get readOnly() {
        return readOnly;
      },
      /**
       * With `retention`: `{ passes, collected }` of the retention thread since the store
       * was opened (it starts with the store: `start()` or the first storage call; final
       * after `close()`); null when off, before the store is open, or on a read-only store.
       */
      retentionStats: () => opened?.retentionStats() ?? null,
      line: { name: line.name, source: line.source, worldVersion: line.worldVersion, worldLocalVersion: line.worldLocalVersion, specVersion: line.specVersion },
      store: openStore,
      world: openWorld,
      /** The run as of a seq (or time) of its log, and what changed between two (src/history.js). */
      ...createHistory(openWorld),
      /** With the PostgreSQL queue: its counters (`delivered, rescheduled, retried, redelivered, deduped`), else undefined. */
      queue: loadPgQueue && {
        /** Zeros until the queue is first used. */
        get stats() {
          return pgStats ?? { delivered: 0, rescheduled: 0, retried: 0, redelivered: 0, deduped: 0 };
        },
        start: async () => (await loadPgQueue()).start(),
      },
    },
  };
  // Declared by @workflow/world 5.x (beta.21 and beta.37), not by 4.x (src/attributes.js).
  if (line.name !== LINES.V4) self.runs = { ...self.runs, experimentalSetAttributes: setAttributesMember(openWorld) };
  if (line.name === LINES.BETA55) extendForBeta55(self, { line, openWorld });
  if (line.name === LINES.V4) reportMaxEvents(self, line);
  return self;
}

/**
 * Opens the store as `config.readOnly` says: `true` read-only; `false` for writing, and a
 * file store this process cannot write rejects (the refused open's error, code `IO`);
 * unset: a file store for writing when this process can write it, else read-only
 * (`Store.openOrReadOnly` asks the kernel: it opens `FORMAT` for writing). PostgreSQL: as
 * asked, never read-only by itself (the server's grants decide). File store failures name
 * the data directory.
 */
async function openConfigured(config) {
  try {
    // `retention` is the addon's option of the same name (src/config.js resolved it).
    const options = config.retention ? { ...config.store, retention: config.retention } : config.store;
    if (config.readOnly === true) return await Store.openReadOnly(config.target, options);
    if (config.backend === 'postgres') return await Store.open(config.target, options);
    const store = await Store.openOrReadOnly(config.target, options);
    if (config.readOnly === false && store.readOnly) {
      const cause = store.readOnlyCause;
      await store.close();
      throw cause;
    }
    return store;
  } catch (err) {
    if (config.backend === 'file' && err instanceof Error && typeof err.code === 'string') {
      err.message = `world-runlog: cannot open the store at ${config.dataDir}: ${err.message}`;
      err.dataDir = config.dataDir;
    }
    throw err;
  }
}

function readOnlyWarning({ path, requested, cause }, retention) {
  const why = requested ? 'readOnly: true' : `this process cannot write it: ${cause?.message}`;
  return (
    `[world-runlog] the store at ${path} is open read-only (${why}): every read works, every write ` +
    `rejects with READ_ONLY (403), and active runs are not re-enqueued${retention ? '; retention collects nothing' : ''}`
  );
}
