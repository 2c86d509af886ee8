// Compiled by `npm run typecheck` (tsc, no emit): the declarations describe the API as the
// tests use it, and the World satisfies @workflow/world's World interface.
import type { World } from '@workflow/world';

import { createWorld, Store, type RunlogError, type ReadPage, type RunlogRunAt, type RunlogRunDiff } from 'world-runlog';
import { isRunlogError } from 'world-runlog/store';

async function roundTrip(): Promise<number> {
  const store = await Store.open('/tmp/x.runlog', { payloadLenBytesMax: 1024, preallocateFromBytes: null });
  await store.createRun('wrun_1', Buffer.from('meta'));
  const [first] = await store.appendFacts('wrun_1', [{ kind: 'step_completed', payload: new Uint8Array([0]), key: 'k' }]);
  const seqs: number[] = await store.appendDecisions('wrun_1', first.seq, [{ kind: 'run_completed' }]);
  const page: ReadPage = await store.read('wrun_1', 0, 10);
  const payload: Buffer = page.events[0].payload;
  try {
    await store.appendDecisions('wrun_1', 0, [{ kind: 'x' }]);
  } catch (e) {
    if (isRunlogError(e, 'FENCED')) {
      const err: RunlogError = e;
      return (err.actual ?? 0) + seqs.length + payload.length;
    }
  }
  await store.close();
  return store.commitStats().groups;
}

const world: World = createWorld({ dataDir: '/tmp/w', recoverActiveRuns: false });
void world;
const onPostgres = createWorld({ url: 'postgres://u@localhost/db?schema=wf' });
const backend: 'file' | 'postgres' = onPostgres.runlog.config.backend;
const url: string | undefined = onPostgres.runlog.config.url;
void backend;
void url;
async function storeBackend(): Promise<'file' | 'postgres'> {
  return (await onPostgres.runlog.store()).backend;
}
void storeBackend;
void roundTrip;

async function nativeWorld(): Promise<number> {
  const store = await Store.open('/tmp/y.runlog');
  const w = store.world();
  const created = JSON.parse(await w.createEvent(null, { eventType: 'run_created' }));
  const batch = await w.createEvents([[created.run.runId, { eventType: 'run_started' }], [null, '{}', undefined]]);
  const codes = batch.map((o) => (typeof o === 'string' ? 'ok' : o.code));
  void codes;
  const read = await w.streamsRead(created.run.runId, 'strm_x', -1, 10);
  return read.chunks.length + (await w.streamsInfo(created.run.runId, 'strm_x')).tailIndex;
}
void nativeWorld;

async function history(): Promise<number> {
  const at: RunlogRunAt = await onPostgres.runlog.runAt('wrun_x', 3);
  const byTime = await onPostgres.runlog.runAt('wrun_x', new Date());
  const d: RunlogRunDiff = await onPostgres.runlog.runDiff('wrun_x', 0, '2026-11-30T02:25:44.946Z');
  const kinds: ('run' | 'step' | 'hook' | 'wait')[] = d.changes.map((c) => c.entity);
  void kinds;
  return at.seq + byTime.lastSeq + (at.run?.createdAt.getTime() ?? 0) + at.steps.length + at.waits.length;
}
void history;

async function retention(): Promise<number> {
  const w = createWorld({ dataDir: '/tmp/r', retention: { finishedOlderThan: 30 * 24 * 3600 * 1000, intervalMs: 60_000 } });
  const archiveDir: string | undefined = w.runlog.config.retention?.archiveDir;
  void archiveDir;
  createWorld({ dataDir: '/tmp/r3', retention: { finishedOlderThan: '30d' } });
  // @ts-expect-error not a duration
  createWorld({ dataDir: '/tmp/r3', retention: { finishedOlderThan: '30 days' } });
  const store = await Store.open('/tmp/r2', { retention: { finishedOlderThanMs: 1000, archiveDir: '/tmp/r2-archive' } });
  const stats = store.retentionStats();
  return (stats?.passes ?? 0) + (w.runlog.retentionStats()?.collected ?? 0);
}
void retention;
