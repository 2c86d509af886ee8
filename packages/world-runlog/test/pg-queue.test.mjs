// The World's queue in PostgreSQL (issue 23, src/queue-postgres.js): graphile-worker jobs
// delivered over HTTP to world-local's queue handler. A message is delivered once, with its
// bytes; `delaySeconds` holds it back; an idempotency key dedupes while its message waits;
// `{ timeoutSeconds }` redelivers it later, an HTTP error 5 s later; a server killed
// (SIGKILL) while holding a job has that job delivered by another process, released and
// counted once however many servers sweep it; PostgreSQL gone
// mid-job (a cut socket proxy) costs a redelivery, not the job nor the queue; with
// WORKFLOW_SEQUENTIAL_REPLAYS=1 one run's messages never overlap across servers; and another
// graphile schema's migration in the database does not stop the queue. Needs RUNLOG_PG_URL (skipped without it,
// unless RUNLOG_NO_SKIP=1 / RUNLOG_REQUIRE_PG=1, as test/postgres.test.mjs).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { afterEach, describe, expect, test, vi } from 'vitest';

import { makeWorkerUtils } from 'graphile-worker';
import pg from 'pg';

import { createWorld } from '../index.js';
import { pgConfig } from '../src/queue-postgres.js';
import { pgUrl } from './helpers.mjs';
import { startQueueServer } from './pg-queue-harness.mjs';

const server = pgUrl();
const closers = [];
// Closing a queue server stops its graphile-worker runner, which waits for its jobs and its
// cron's last pass: in one CI run (2 vCPUs, vitest's workers in parallel) closing the four
// servers of the sequential-replays test took over vitest's default 30 s hook timeout.
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c.close();
}, 90_000);

const freshSchema = () => `q_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

async function queueServer(schema, onDelivery = () => undefined, options = {}) {
  const deliveries = [];
  const s = await startQueueServer({
    ...options,
    url: server,
    schema,
    onDelivery: (d) => {
      deliveries.push(d);
      return onDelivery(d, deliveries.length);
    },
  });
  closers.push(s);
  return { ...s, deliveries };
}

describe.skipIf(!server)('the PostgreSQL queue (graphile-worker)', () => {
  test('a message is delivered once, with its bytes, to the route of its queue', async () => {
    const s = await queueServer(freshSchema());
    const { messageId } = await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_1', input: new Uint8Array([0, 1, 255]) });
    expect(messageId).toMatch(/^msg_/);
    await until(() => s.deliveries.length > 0, 10_000, 'the delivery');
    await sleep(1500);
    expect(s.deliveries).toHaveLength(1);
    expect(s.deliveries[0]).toMatchObject({ attempt: 1, messageId, body: { runId: 'wrun_1', input: new Uint8Array([0, 1, 255]) } });
    expect(s.queue.stats).toMatchObject({ delivered: 1, retried: 0, redelivered: 0 });
  });

  test('with no port, base URL or PORT configured, it delivers to the port this process listens on (a dev server)', async () => {
    vi.stubEnv('PORT', '');
    vi.stubEnv('WORKFLOW_LOCAL_BASE_URL', '');
    try {
      const s = await queueServer(freshSchema(), undefined, { detectPort: true });
      const { messageId } = await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_detect' });
      await until(() => s.deliveries.length > 0, 10_000, 'the delivery');
      expect(s.deliveries[0]).toMatchObject({ attempt: 1, messageId, body: { runId: 'wrun_detect' } });
      expect(s.queue.stats).toMatchObject({ retried: 0 });
    } finally {
      vi.unstubAllEnvs();
    }
  });

  test('delaySeconds holds the message back that long', async () => {
    const s = await queueServer(freshSchema());
    const t0 = Date.now();
    await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_delay' }, { delaySeconds: 2 });
    await sleep(1000);
    expect(s.deliveries).toHaveLength(0);
    await until(() => s.deliveries.length > 0, 10_000, 'the delayed delivery');
    expect(s.deliveries[0].at - t0).toBeGreaterThanOrEqual(1950);
  });

  test('an idempotency key dedupes while its message waits: one delivery, one message id', async () => {
    const s = await queueServer(freshSchema());
    const a = await s.queue.queue('__wkf_workflow_demo', { n: 1 }, { idempotencyKey: 'step_1', delaySeconds: 1 });
    const b = await s.queue.queue('__wkf_workflow_demo', { n: 2 }, { idempotencyKey: 'step_1' });
    expect(b.messageId).toBe(a.messageId);
    expect(s.queue.stats.deduped).toBe(1);
    await until(() => s.deliveries.length > 0, 10_000, 'the delivery');
    await sleep(1500);
    expect(s.deliveries.map((d) => d.body)).toEqual([{ n: 1 }]);
    // Delivered and completed: the key is free again.
    await s.queue.queue('__wkf_workflow_demo', { n: 3 }, { idempotencyKey: 'step_1' });
    await until(() => s.deliveries.length > 1, 10_000, 'the second delivery');
    expect(s.deliveries.map((d) => d.body)).toEqual([{ n: 1 }, { n: 3 }]);
  });

  test('{ timeoutSeconds } redelivers the same message that much later, attempt 2', async () => {
    const s = await queueServer(freshSchema(), (_d, n) => (n === 1 ? { timeoutSeconds: 1 } : undefined));
    const { messageId } = await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_sleep' });
    await until(() => s.deliveries.length > 1, 10_000, 'the redelivery');
    const [first, second] = s.deliveries;
    expect(second.at - first.at).toBeGreaterThanOrEqual(950);
    expect([first.attempt, second.attempt, second.messageId]).toEqual([1, 2, messageId]);
    // The counters move once the answer is in, after the handler saw the delivery.
    await until(() => s.queue.stats.delivered === 1, 5_000, 'the second answer');
    expect(s.queue.stats).toMatchObject({ rescheduled: 1, delivered: 1 });
  });

  test('an HTTP error is retried (5 s later), the same message, the next attempt', async () => {
    const s = await queueServer(freshSchema(), (_d, n) => {
      if (n === 1) throw new Error('handler failed');
    });
    await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_err' });
    await until(() => s.deliveries.length > 1, 15_000, 'the retry');
    const [first, second] = s.deliveries;
    expect(second.at - first.at).toBeGreaterThanOrEqual(4900);
    expect([first.attempt, second.attempt, second.messageId]).toEqual([1, 2, first.messageId]);
    await until(() => s.queue.stats.delivered === 1, 5_000, 'the second answer');
    expect(s.queue.stats).toMatchObject({ retried: 1, delivered: 1 });
  });

  test('a server killed (SIGKILL) mid-job: another process gets the job, attempt 2', { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const fixture = fileURLToPath(new URL('./fixtures/pg-queue-server.mjs', import.meta.url));
    const child = spawn(process.execPath, [fixture, server, schema, 'hang', JSON.stringify({ runId: 'wrun_kill' })], { stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push({ close: async () => child.exitCode === null && child.kill('SIGKILL') });
    const lines = [];
    createInterface({ input: child.stdout }).on('line', (l) => lines.push(JSON.parse(l)));
    await until(() => lines.some((l) => l.delivered), 20_000, 'the child to take the job');
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    const s = await queueServer(schema);
    await until(() => s.deliveries.length > 0, 30_000, 'the redelivery to the surviving process');
    expect(lines.find((l) => l.delivered).delivered).toMatchObject({ attempt: 1, body: { runId: 'wrun_kill' } });
    expect(s.deliveries).toHaveLength(1);
    expect(s.deliveries[0]).toMatchObject({ attempt: 2, body: { runId: 'wrun_kill' } });
    expect(s.queue.stats.redelivered).toBe(1);
  });

  // The release of a dead worker's jobs is counted once however many servers sweep it at
  // once: five survivors sweeping every 10 ms (the multi-server example counted 2 released
  // for the 1 job its killed server held).
  test('a killed server\'s jobs swept by five servers at once are released and counted once each', { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const fixture = fileURLToPath(new URL('./fixtures/pg-queue-server.mjs', import.meta.url));
    const held = [1, 2, 3].map((n) => ({ runId: `wrun_swept${n}` }));
    const child = spawn(process.execPath, [fixture, server, schema, 'hang', JSON.stringify(held)], { stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push({ close: async () => child.exitCode === null && child.kill('SIGKILL') });
    const lines = [];
    createInterface({ input: child.stdout }).on('line', (l) => lines.push(JSON.parse(l)));
    await until(() => lines.filter((l) => l.delivered).length === held.length, 20_000, 'the child to take its three jobs');
    const survivors = [];
    for (let k = 0; k < 5; k++) survivors.push(await queueServer(schema, () => undefined, { sweepIntervalMs: 10 }));
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    const delivered = () => survivors.flatMap((s) => s.deliveries);
    await until(() => delivered().length >= held.length, 30_000, 'the three redeliveries');
    await sleep(1_000);
    expect(delivered().map((d) => d.body.runId).sort()).toEqual(held.map((m) => m.runId));
    expect(delivered().every((d) => d.attempt === 2)).toBe(true);
    expect(survivors.map((s) => s.queue.stats.redelivered).reduce((a, b) => a + b)).toBe(held.length);
  });

  // Two servers on one schema, each delivery of `runId` held 800 ms: overlapping or not.
  async function overlapOfOneRun(sequential) {
    const schema = freshSchema();
    const spans = [];
    const hold = async (d) => {
      const startMs = Date.now();
      await sleep(800);
      spans.push({ startMs, endMs: Date.now(), n: d.body.n });
    };
    const a = await queueServer(schema, hold);
    const b = await queueServer(schema, hold);
    const before = process.env.WORKFLOW_SEQUENTIAL_REPLAYS;
    process.env.WORKFLOW_SEQUENTIAL_REPLAYS = sequential ? '1' : '0';
    try {
      for (let n = 0; n < 4; n++) await (n % 2 ? a : b).queue.queue('__wkf_workflow_demo', { runId: 'wrun_serial', n });
    } finally {
      if (before === undefined) delete process.env.WORKFLOW_SEQUENTIAL_REPLAYS;
      else process.env.WORKFLOW_SEQUENTIAL_REPLAYS = before;
    }
    await until(() => spans.length === 4, 20_000, 'four deliveries');
    spans.sort((x, y) => x.startMs - y.startMs);
    const overlaps = spans.slice(1).filter((s, k) => s.startMs < spans[k].endMs).length;
    return { overlaps, servers: [a.deliveries.length, b.deliveries.length] };
  }

  test('WORKFLOW_SEQUENTIAL_REPLAYS=1: one run\'s workflow messages never overlap, across servers', { timeout: 90_000 }, async () => {
    const serial = await overlapOfOneRun(true);
    expect(serial.overlaps).toBe(0);
    // Without it the same four messages do overlap (the check above can fail).
    const parallel = await overlapOfOneRun(false);
    expect(parallel.overlaps).toBeGreaterThan(0);
  });

  // A Unix-socket proxy to the server's socket whose traffic can be held (nothing forwarded
  // either way, new connections accepted and held too) and released; `open()` counts its
  // live connections. Returns a URL through it.
  async function heldServer() {
    const dir = mkdtempSync(path.join(tmpdir(), 'runlog-pghold-'));
    const { host, port = 5432 } = pgConfig(server);
    const target = path.join(host, `.s.PGSQL.${port}`);
    const sockets = new Set();
    let held = false;
    const proxy = createServer((c) => {
      const up = connect(target);
      for (const s of [c, up]) {
        sockets.add(s);
        s.on('error', () => {});
        s.on('close', () => sockets.delete(s));
        if (held) s.pause();
      }
      c.on('close', () => up.destroy());
      up.on('close', () => c.destroy());
      c.pipe(up).pipe(c);
    });
    await new Promise((r) => proxy.listen(path.join(dir, `.s.PGSQL.${port}`), r));
    closers.push({
      close: async () => {
        const closed = new Promise((r) => proxy.close(r));
        for (const s of sockets) s.destroy();
        await closed;
        rmSync(dir, { recursive: true, force: true });
      },
    });
    return {
      url: server.replace(encodeURIComponent(host), encodeURIComponent(dir)),
      hold: () => {
        held = true;
        for (const s of sockets) s.pause();
      },
      release: () => {
        held = false;
        for (const s of sockets) s.resume();
      },
      open: () => sockets.size / 2,
    };
  }

  // A Unix-socket proxy to the server's socket that can be cut (every connection dropped,
  // new ones refused) and restored: PostgreSQL going away, as a restart does, for this
  // queue alone. Returns a URL through it.
  async function cuttableServer() {
    const dir = mkdtempSync(path.join(tmpdir(), 'runlog-pgproxy-'));
    const { host, port = 5432 } = pgConfig(server);
    const target = path.join(host, `.s.PGSQL.${port}`);
    const sockets = new Set();
    let proxy;
    const listen = () =>
      new Promise((r) => {
        proxy = createServer((c) => {
          const up = connect(target);
          for (const s of [c, up]) {
            sockets.add(s);
            s.on('error', () => {});
            s.on('close', () => sockets.delete(s));
          }
          c.pipe(up).pipe(c);
        });
        proxy.listen(path.join(dir, `.s.PGSQL.${port}`), r);
      });
    await listen();
    // close() waits for the open connections, so they are destroyed first.
    const cut = async () => {
      const closed = new Promise((r) => proxy.close(r));
      for (const s of sockets) s.destroy();
      await closed;
    };
    closers.push({ close: async () => (cut(), rmSync(dir, { recursive: true, force: true })) });
    const url = server.replace(encodeURIComponent(host), encodeURIComponent(dir));
    expect(url).not.toBe(server);
    return { url, cut, restore: listen };
  }

  test('PostgreSQL gone mid-job: the job is delivered again (attempt 2) and the queue goes on', { timeout: 60_000 }, async () => {
    const pgProxy = await cuttableServer();
    const deliveries = [];
    let release;
    const s = await startQueueServer({
      url: pgProxy.url,
      schema: freshSchema(),
      onDelivery: (d) => {
        deliveries.push(d);
        if (deliveries.length === 1) return new Promise((r) => (release = r));
        return undefined;
      },
    });
    closers.push(s);
    await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_cut' });
    await until(() => deliveries.length === 1, 10_000, 'the first delivery');
    await pgProxy.cut();
    release();
    await sleep(1500);
    await pgProxy.restore();
    await until(() => deliveries.length > 1, 40_000, 'the redelivery after the cut');
    expect(deliveries[1]).toMatchObject({ attempt: 2, body: { runId: 'wrun_cut' } });
    await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_after_cut' });
    await until(() => deliveries.some((d) => d.body.runId === 'wrun_after_cut'), 20_000, 'a new message after the cut');
  });

  test("another graphile schema's migration in the database does not stop this queue", { timeout: 30_000 }, async () => {
    const s = await queueServer(freshSchema());
    // graphile NOTIFYs a breaking migration database-wide: its runners stop and set exitCode 57.
    const otherPool = new pg.Pool(pgConfig(server));
    const utils = await makeWorkerUtils({ pgPool: otherPool, schema: freshSchema() });
    await utils.migrate();
    await utils.release();
    await otherPool.end();
    await sleep(2500);
    expect(process.exitCode).not.toBe(57);
    await s.queue.queue('__wkf_workflow_demo', { runId: 'wrun_after_migrate' });
    await until(() => s.deliveries.length > 0, 15_000, 'a delivery after the other migration');
    expect(s.deliveries[0].body).toEqual({ runId: 'wrun_after_migrate' });
  });

  // A runner stopped by another schema's migration is restarted 1 s later; a close() that
  // lands while the new runner is being started must wait for it and stop it, not end the
  // pool under it (in CI, on a loaded machine, close() then took over 30 s, with "Cannot use
  // a pool after calling end on the pool" unhandled). The servers reach PostgreSQL through a
  // proxy that holds their traffic from just after the migration's NOTIFY, so their restart
  // is still starting when close() is called.
  test("close() while the runner restarts after another schema's migration settles and leaves no runner", { timeout: 60_000 }, async () => {
    const proxy = await heldServer();
    const servers = [];
    for (let k = 0; k < 3; k++) servers.push(await startQueueServer({ url: proxy.url, schema: freshSchema(), onDelivery: () => undefined }));
    const otherPool = new pg.Pool(pgConfig(server));
    const utils = await makeWorkerUtils({ pgPool: otherPool, schema: freshSchema() });
    await utils.migrate();
    await utils.release();
    await otherPool.end();
    await sleep(400);
    proxy.hold();
    await sleep(1400);
    const closing = servers.map((s) => s.close().then(() => 'closed', (err) => `rejected: ${err?.message ?? err}`));
    await sleep(300);
    proxy.release();
    const settled = await Promise.all(closing.map((c) => Promise.race([c, sleep(10_000).then(() => 'still closing after 10 s')])));
    expect(settled).toEqual(['closed', 'closed', 'closed']);
    // Nothing of these servers keeps polling: no connection through the proxy is left.
    await sleep(1500);
    expect(proxy.open()).toBe(0);
  });

  test('createWorld({ url }) takes the PostgreSQL queue; queue: "local" keeps world-local\'s', async () => {
    const w = createWorld({ url: server, recoverActiveRuns: false, queueSchema: freshSchema() });
    closers.push(w);
    expect(w.runlog.config).toMatchObject({ queue: 'postgres', queueConcurrency: 25 });
    expect(w.runlog.queue.stats).toMatchObject({ delivered: 0 });
    const l = createWorld({ url: server, recoverActiveRuns: false, queue: 'local' });
    closers.push(l);
    expect(l.runlog.queue).toBeUndefined();
    expect(() => createWorld({ dataDir: '/tmp/x', queue: 'postgres' })).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });
});
