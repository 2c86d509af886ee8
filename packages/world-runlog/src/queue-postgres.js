// The World's queue in PostgreSQL (issue 23): with a PostgreSQL store, every message is a
// graphile-worker job in the same database (schema `queueSchema`, default `runlog_queue`),
// so any server of the app may take any run's next message and a message outlives the
// server that enqueued it. graphile-worker is the queue; this module only says what a job
// is and how it reaches the app:
//
// - `queue(name, payload, { idempotencyKey, delaySeconds, headers })` adds one job (task
//   `runlog_deliver`): `delaySeconds` is the job's `runAt`; an idempotency key is the job's
//   key in `unsafe_dedupe` mode, so while a message of that key waits or runs, another
//   enqueue of it adds nothing and returns the first one's message id (world-local's
//   in-flight dedupe, across servers).
// - A worker that takes a job POSTs it to this server's own workflow route, as world-local's
//   queue does (its `createQueueHandler` answers; the body is world-local's JSON with
//   tagged Uint8Arrays, the `x-vqs-*` headers carry queue name, message id and the
//   delivery attempt). The answer decides: `{ timeoutSeconds }` adds the follow-up job
//   (due then, same key) before this one completes, so a crash cannot lose the wake-up; an
//   HTTP error or a transport failure adds the retry 5 s later (world-local's linear
//   backoff), up to `MAX_DELIVERIES`; a 2xx otherwise completes the job.
// - A server that dies holding jobs (kill -9, a lost machine): graphile-worker alone frees
//   them after 4 hours. Here each worker of this process holds a session advisory lock
//   (`pg_advisory_lock`) on a connection of its own; PostgreSQL drops it when that
//   process's connection goes. Every server's sweeper looks at the locked jobs' workers
//   every `sweepIntervalMs`; one whose lock is free on two sweeps in a row is dead, and
//   graphile's `forceUnlockWorkers` makes its jobs available again, to any server
//   (`redelivered` counts them). Two sweeps, so that after a PostgreSQL restart the live
//   servers have re-taken their locks before anyone judges them.
//
// - WORKFLOW_SEQUENTIAL_REPLAYS=1 (the SDK's per-run `maxConcurrency: 1`, read at each
//   enqueue): a run's workflow messages (a `runId` and no `stepId`) go to graphile's named
//   queue `run:<runId>`, whose jobs run one at a time across every server, so one run's
//   orchestrator is replayed by at most one server at a time. Without it, two servers may
//   replay one run at once (world-local does the same within one process); runlog's fenced
//   appends then keep the log correct, and a step body may run twice (a step is at least
//   once).
//
// Delivery is at least once, as world-local's and every queue's: a message can reach the
// app twice (a server killed after its delivery was answered but before the job
// completed). runlog's fenced appends keep the run's log correct then.
import { EventEmitter } from 'node:events';
import { appendFileSync } from 'node:fs';

import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import pg from 'pg';

import { listeningBaseUrl } from './base-url.js';

/** graphile-worker's task identifier of a World message. */
export const TASK = 'runlog_deliver';

/** Default schema of graphile-worker's tables (not graphile's own default, so that a
 * `@workflow/world-postgres` in the same database keeps its `graphile_worker`). */
export const DEFAULT_QUEUE_SCHEMA = 'runlog_queue';

/** Deliveries of one message before it is dropped (world-local's safety limit). */
export const MAX_DELIVERIES = 256;

/** Delay before an unanswered or failed delivery is retried (world-local's). */
const RETRY_DELAY_MS = 5_000;

/** How long one delivery may take before it counts as failed (world-local's 30 s headers deadline, doubled). */
const DELIVERY_TIMEOUT_MS = 60_000;

/**
 * WORKFLOW_RUNLOG_QUEUE_TRACE=<file>: every delivery appends one JSON line `{ pid, runId,
 * stepId?, messageId, attempt, startMs, endMs, outcome }` (a diagnostic: examples/multi-server.mjs
 * counts concurrent replays of one run across servers from it).
 */
function tracer(env = process.env) {
  const file = env.WORKFLOW_RUNLOG_QUEUE_TRACE;
  if (!file) return undefined;
  return (record) => {
    try {
      appendFileSync(file, `${JSON.stringify({ pid: process.pid, ...record })}\n`);
    } catch {
      // A diagnostic never fails a delivery.
    }
  };
}

/** `{ runId, stepId }` of a message body (world-local's JSON), for the trace. */
function idsOf(body) {
  try {
    const { runId, stepId } = JSON.parse(body);
    return { runId, ...(stepId !== undefined && { stepId }) };
  } catch {
    return {};
  }
}

/** graphile's attempts per job: each counts a worker that took it (a dead one's included). */
const JOB_MAX_ATTEMPTS = 25;

/**
 * pg's connection config for a runlog PostgreSQL URL: `postgres[ql]://user:pw@host:port/db`,
 * a host given percent-encoded (`%2Ftmp%2Fdir`, a socket directory) or as `?host=`; runlog's
 * own `schema=` parameter is not pg's and is dropped.
 */
export function pgConfig(url) {
  const u = new URL(url);
  const host = u.searchParams.get('host') ?? decodeURIComponent(u.hostname);
  return {
    host: host || undefined,
    port: u.port ? Number(u.port) : undefined,
    user: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    database: decodeURIComponent(u.pathname.replace(/^\//, '')) || undefined,
  };
}

/** The advisory-lock key text of graphile worker `workerId` in `schema`. */
const lockText = (schema, workerId) => `runlog-queue:${schema}:${workerId}`;

/** world-local's JSON body: Uint8Arrays as `{ __type: 'Uint8Array', data: base64 }`. */
function encodeBody(message) {
  return JSON.stringify(message, (_k, v) => (v instanceof Uint8Array ? { __type: 'Uint8Array', data: Buffer.from(v).toString('base64') } : v));
}

/** Where a message of `queueName` goes: `step` for a 4.x/beta.35 step queue, else `flow`. */
function routeOf(queueName, combined) {
  return !combined && /^__(?:[a-z][a-z0-9]*_)?wkf_step_/.test(queueName) ? 'step' : 'flow';
}

/** The app's origin: `baseUrl`, WORKFLOW_LOCAL_BASE_URL, `port`, PORT (world-local's order; then `listeningBaseUrl`). */
function baseUrlOf(target, env = process.env) {
  const base = target.baseUrl ?? env.WORKFLOW_LOCAL_BASE_URL;
  if (base) return base.replace(/\/+$/, '');
  const port = target.port ?? (env.PORT ? Number(env.PORT) : undefined);
  if (port) return `http://localhost:${port}/.well-known/workflow/v1`;
  return undefined;
}

function quiet() {
  return new Logger(() => (level, message) => {
    if (level === 'error' || level === 'warning' || process.env.WORKFLOW_RUNLOG_QUEUE_DEBUG) process.stderr.write(`[world-runlog queue] ${message}\n`);
  });
}

/**
 * A queue in PostgreSQL. `url`: the store's URL; `schema`: graphile's schema;
 * `concurrency`: jobs this server runs at once (default 25); `target`: `{ baseUrl?, port? }`
 * of this server's app; `combinedRoute`: the line posts every message to `flow`
 * (5.0.0-beta.55); `local`: the line's local World, whose `createQueueHandler` answers;
 * `sweepIntervalMs` (default 2000). Returns the World's queue members plus `start()`,
 * `close()` and `stats` (`{ delivered, rescheduled, retried, redelivered, deduped }`).
 */
export function createPostgresQueue({ url, schema = DEFAULT_QUEUE_SCHEMA, concurrency = 25, target = {}, combinedRoute = false, local, sweepIntervalMs = 2_000 }) {
  const connection = pgConfig(url);
  const pool = new pg.Pool({ ...connection, max: concurrency + 4 });
  // An idle client's error (the server restarted) must not kill the process; the next
  // checkout reconnects.
  pool.on('error', () => {});
  const stats = { delivered: 0, rescheduled: 0, retried: 0, redelivered: 0, deduped: 0 };
  const trace = tracer();
  const events = new EventEmitter();
  const ownWorkers = new Set();
  const liveness = createLiveness({ connection, schema, ownWorkers });
  events.on('worker:create', ({ worker }) => {
    ownWorkers.add(worker.workerId);
    liveness.hold(worker.workerId);
  });
  // A worker that stops (the pool shutting down, or an error graphile does not survive: a
  // job that could not be completed because PostgreSQL went away) gives up its lock, so the
  // sweepers, this server's included, release whatever it still holds. graphile does not
  // replace a worker that died of an error: the runner is restarted (superviseRunner).
  let restarting;
  events.on('worker:stop', ({ worker, error }) => {
    ownWorkers.delete(worker.workerId);
    liveness.drop(worker.workerId);
    if (error === undefined || closed || restarting) return;
    console.warn(`[world-runlog queue] a worker died (${error?.message ?? error}): restarting the workers`);
    const r = runner;
    restarting = setTimeout(() => {
      restarting = undefined;
      if (!closed && runner === r) r?.stop().catch(() => {});
    }, 1_000);
    restarting.unref();
  });
  let utils;
  let runner;
  let sweeper;
  let starting;
  let closed = false;
  let detectedBase;

  const addJob = (payload, { runAt, key, mode }) =>
    utils.addJob(TASK, payload, {
      runAt,
      maxAttempts: JOB_MAX_ATTEMPTS,
      ...(payload.serial !== undefined && { queueName: payload.serial }),
      ...(key !== undefined && { jobKey: key, jobKeyMode: mode }),
    });

  async function deliver(payload, attempt) {
    // Nothing configured: the port this process listens on (the app's server), found once.
    const base = baseUrlOf(target) ?? (detectedBase ??= await listeningBaseUrl());
    if (base === undefined) {
      throw new Error('world-runlog queue: no base URL (this process listens on no port; set PORT, WORKFLOW_LOCAL_BASE_URL, or the port/baseUrl option)');
    }
    const res = await fetch(`${base}/${routeOf(payload.queueName, combinedRoute)}`, {
      method: 'POST',
      headers: {
        ...payload.headers,
        'content-type': 'application/json',
        'x-vqs-queue-name': payload.queueName,
        'x-vqs-message-id': payload.messageId,
        'x-vqs-message-attempt': String(attempt),
      },
      body: payload.body,
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
    try {
      const timeoutSeconds = Number(JSON.parse(text).timeoutSeconds);
      if (Number.isFinite(timeoutSeconds) && timeoutSeconds >= 0) return timeoutSeconds;
    } catch {
      // Not JSON: a plain acknowledgement.
    }
    return undefined;
  }

  /** One job: deliver, then complete, or add the follow-up (wake-up or retry) first. */
  async function task(payload, helpers) {
    // graphile counts the workers that took this job (a dead one's included).
    const attempt = payload.deliveries + (helpers.job?.attempts ?? 1);
    const startMs = Date.now();
    const traced = (outcome) => trace?.({ ...idsOf(payload.body), messageId: payload.messageId, attempt, startMs, endMs: Date.now(), outcome });
    let next;
    try {
      const timeoutSeconds = await deliver(payload, attempt);
      if (timeoutSeconds === undefined) {
        stats.delivered++;
        traced('ok');
        return;
      }
      stats.rescheduled++;
      traced('timeout');
      next = Date.now() + timeoutSeconds * 1000;
    } catch (err) {
      traced('error');
      if (attempt >= MAX_DELIVERIES) {
        console.error(`[world-runlog queue] ${payload.queueName} ${payload.messageId}: dropped after ${attempt} deliveries: ${err?.message ?? err}`);
        return;
      }
      stats.retried++;
      if (process.env.DEBUG) console.error(`[world-runlog queue] ${payload.messageId} delivery ${attempt} failed, retrying: ${err?.message ?? err}`);
      next = Date.now() + RETRY_DELAY_MS;
    }
    // Same key, replace mode: graphile moves the key from this (locked) job to the new one.
    await addJob({ ...payload, deliveries: attempt }, { runAt: new Date(next), key: payload.idempotencyKey, mode: 'replace' });
  }

  let sweeps = 0;
  async function sweep() {
    // Named queues (one per run with sequential replays) are rows of their own: gone once empty.
    if (++sweeps % 150 === 0) await utils.cleanup({ tasks: ['GC_JOB_QUEUES'] });
    const candidates = await pool.query(
      `select distinct locked_by from ${pg.escapeIdentifier(schema)}._private_jobs where locked_by is not null and locked_at < now() - interval '2 seconds'`,
    );
    const ids = candidates.rows.map((r) => r.locked_by).filter((id) => !ownWorkers.has(id));
    const dead = await liveness.judge(pool, ids);
    if (dead.length === 0) return;
    // Every server sweeps: the count and graphile's force_unlock_workers run in one
    // transaction under the schema's sweep lock, so a job released by one server is counted
    // by that one only (the others find it unlocked and count 0).
    const c = await pool.connect();
    let n = 0;
    let failed;
    try {
      await c.query('begin');
      await c.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`runlog-queue-sweep:${schema}`]);
      const q = pg.escapeIdentifier(schema);
      n = (await c.query(`select count(*)::int as n from ${q}._private_jobs where locked_by = any($1::text[])`, [dead])).rows[0].n;
      await c.query(`select ${q}.force_unlock_workers($1::text[])`, [dead]);
      await c.query('commit');
    } catch (err) {
      failed = err;
      await c.query('rollback').catch(() => {});
      throw err;
    } finally {
      // A client that failed (PostgreSQL went away) is dropped, not pooled again.
      c.release(failed);
    }
    stats.redelivered += n;
    // Said once per release: an operator sees a server's death and what it cost.
    if (n > 0) console.warn(`[world-runlog queue] released ${n} job(s) of ${dead.length} dead worker(s) for redelivery`);
  }

  const runnerOptions = () => ({
    pgPool: pool,
    schema,
    concurrency,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: quiet(),
    events,
    taskList: { [TASK]: task },
  });

  // graphile-worker's runners stop when any schema of the database gets a breaking
  // migration (its `worker:migrate` NOTIFY is database-wide, and it sets process.exitCode
  // 57): another app's fresh graphile schema must not stop this server's queue, so a
  // runner that stops by itself is started again (run() migrates first, and refuses a
  // schema newer than this graphile: then it retries, logging why).
  // A runner being started (`supervising`) is awaited by close(), which then stops it: a
  // close() during a restart must not end the pool under run() and leave its runner going.
  let supervising;
  function superviseRunner() {
    supervising = (async () => {
      const r = await run(runnerOptions());
      runner = r;
      if (closed) return;
      const restart = () => {
        if (closed || runner !== r) return;
        if (process.exitCode === 57) process.exitCode = undefined;
        setTimeout(function again() {
          if (closed) return;
          superviseRunner().catch((err) => {
            if (closed) return;
            console.error(`[world-runlog queue] restarting the worker failed, retrying in 5 s: ${err?.message ?? err}`);
            setTimeout(again, 5_000).unref();
          });
        }, 1_000).unref();
      };
      r.promise.then(restart, restart);
    })();
    return supervising;
  }

  async function start() {
    if (closed) return;
    starting ??= (async () => {
      utils = await makeWorkerUtils({ pgPool: pool, schema, logger: quiet() });
      await utils.migrate();
      await liveness.start();
      await superviseRunner();
      const tick = () => {
        sweeper = setTimeout(() => {
          sweep()
            .catch(() => {})
            .finally(() => {
              if (!closed) tick();
            });
        }, sweepIntervalMs);
        sweeper.unref();
      };
      tick();
    })().catch((err) => {
      starting = undefined;
      throw err;
    });
    return starting;
  }

  let nextMessage = 0;
  const messageId = () => `msg_${Date.now().toString(36)}${process.pid.toString(36)}${(nextMessage++).toString(36)}${Math.random().toString(36).slice(2, 8)}`;

  async function queue(queueName, message, opts = {}) {
    await start();
    const payload = { queueName, messageId: messageId(), body: encodeBody(message), deliveries: 0 };
    if (opts.headers) payload.headers = opts.headers;
    if (opts.idempotencyKey !== undefined) payload.idempotencyKey = opts.idempotencyKey;
    if (process.env.WORKFLOW_SEQUENTIAL_REPLAYS === '1' && typeof message?.runId === 'string' && message.stepId === undefined) {
      payload.serial = `run:${message.runId}`;
    }
    const runAt = opts.delaySeconds > 0 ? new Date(Date.now() + opts.delaySeconds * 1000) : undefined;
    const job = await addJob(payload, { runAt, key: opts.idempotencyKey, mode: 'unsafe_dedupe' });
    if (job.revision > 0) stats.deduped++;
    return { messageId: job.payload?.messageId ?? payload.messageId };
  }

  return {
    queue,
    createQueueHandler: local.createQueueHandler,
    getDeploymentId: local.getDeploymentId,
    ...('registerHandler' in local && { registerHandler: local.registerHandler }),
    start,
    stats,
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(sweeper);
      clearTimeout(restarting);
      await starting?.catch(() => {});
      await supervising?.catch(() => {});
      await runner?.stop().catch(() => {});
      await utils?.release();
      await liveness.close();
      await pool.end();
    },
  };
}

/**
 * The liveness of graphile workers: `hold(id)` takes this process's advisory lock for a
 * worker on one connection of its own (re-taken after that connection is lost), and
 * `judge(pool, ids)` returns the workers whose locks are free now and were free at the
 * previous judgement (dead).
 */
function createLiveness({ connection, schema, ownWorkers }) {
  let client;
  let connecting;
  let closed = false;
  let suspects = new Set();
  // One query at a time on the holding connection (pg queues them, but warns).
  let chain = Promise.resolve();
  const lock = (c, id) => {
    chain = chain.catch(() => {}).then(() => c.query('select pg_advisory_lock(hashtextextended($1, 0))', [lockText(schema, id)]));
    return chain;
  };

  async function connect() {
    while (!closed) {
      const c = new pg.Client(connection);
      c.on('error', () => {});
      try {
        await c.connect();
        chain = Promise.resolve();
        for (const id of ownWorkers) await lock(c, id);
        c.on('end', () => {
          if (client === c) client = undefined;
          if (!closed) connecting = connect();
        });
        client = c;
        return;
      } catch {
        await c.end().catch(() => {});
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  return {
    async start() {
      connecting ??= connect();
      await connecting;
    },
    hold(id) {
      if (client) lock(client, id).catch(() => {});
    },
    /** Gives up worker `id`'s lock (its connection may be gone already: nothing to give up then). */
    drop(id) {
      const c = client;
      if (!c) return;
      chain = chain
        .catch(() => {})
        .then(() => c.query('select pg_advisory_unlock(hashtextextended($1, 0))', [lockText(schema, id)]))
        .catch(() => {});
    },
    async judge(pool, ids) {
      const free = new Set();
      if (ids.length > 0) {
        const c = await pool.connect();
        try {
          for (const id of ids) {
            const key = lockText(schema, id);
            const { rows } = await c.query('select pg_try_advisory_lock(hashtextextended($1, 0)) as got', [key]);
            if (rows[0].got) {
              await c.query('select pg_advisory_unlock(hashtextextended($1, 0))', [key]);
              free.add(id);
            }
          }
        } finally {
          c.release();
        }
      }
      const dead = [...free].filter((id) => suspects.has(id));
      suspects = free;
      return dead;
    },
    async close() {
      closed = true;
      await client?.end().catch(() => {});
    },
  };
}
