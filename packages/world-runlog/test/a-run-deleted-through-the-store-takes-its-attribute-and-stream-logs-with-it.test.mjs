// `Store.deleteRun` on a World's store (`w.runlog.store()`) deletes the workflow run with
// every log of it: its attribute log (`attrs-<runId>`) and its stream logs, not only its
// own log (`World::delete_run`). Before, those stayed: a run created again under the id
// came back with the deleted run's attributes and streams. Another run's logs are untouched,
// a hook token of the deleted run is free for another run, and the id of one of the World's
// own logs (another run's attribute log) is refused, not deleted.
import { afterEach, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { tempDir } from './helpers.mjs';

let tmp;
let w;
afterEach(async () => {
  await w?.close();
  tmp?.cleanup();
});

const ev = (runId, eventType, extra = {}) => w.events.create(runId, { eventType, specVersion: 5, ...extra });

async function runWithLogs(runId, tag) {
  const { run } = await ev(runId, 'run_created', { eventData: { deploymentId: 'd', workflowName: 'wf', input: new Uint8Array([1]) } });
  await ev(run.runId, 'run_started');
  await w.runs.experimentalSetAttributes(run.runId, [{ key: 'tag', value: tag }]);
  await w.streams.write(run.runId, 'strm_out', `chunk of ${tag}`);
  await w.streams.close(run.runId, 'strm_out');
  return run.runId;
}

const chunks = async (runId) => (await w.streams.getChunks(runId, 'strm_out')).data.map((c) => Buffer.from(c.data).toString());

test('a run deleted through the store takes its attribute and stream logs with it; a run created again under its id has none', async () => {
  tmp = tempDir();
  w = createWorld({ dataDir: tmp.dir, recoverActiveRuns: false });
  const store = await w.runlog.store();
  const R = await runWithLogs(null, 'old');
  await ev(R, 'hook_created', { correlationId: 'hook_1', eventData: { token: 'tok-deleted', metadata: new Uint8Array([1]) } });
  const S = await runWithLogs(null, 'other');
  const logsOf = async (id) => (await store.listRuns(null, 1000)).runs.map((r) => r.runId).filter((l) => l.includes(id));
  expect((await logsOf(R)).length).toBeGreaterThanOrEqual(3);

  // One of the World's own logs is no run: refused, nothing deleted.
  const before = await logsOf(S);
  await expect(store.deleteRun(`attrs-${S}`)).rejects.toMatchObject({ code: 'INVALID_INPUT', runId: `attrs-${S}` });
  expect(await logsOf(S)).toStrictEqual(before);

  await store.deleteRun(R);
  expect(await logsOf(R)).toStrictEqual([]);
  await expect(store.deleteRun(R)).rejects.toMatchObject({ code: 'NOT_FOUND', runId: R });

  // The id again: a new run, with no attribute or stream of the deleted one.
  await ev(R, 'run_created', { eventData: { deploymentId: 'd', workflowName: 'wf', input: new Uint8Array([2]) } });
  expect((await w.runs.get(R)).attributes ?? {}).toStrictEqual({});
  expect(await w.streams.list(R)).toStrictEqual([]);
  // The deleted run's hook token is free.
  const { event } = await ev(S, 'hook_created', { correlationId: 'hook_2', eventData: { token: 'tok-deleted', metadata: new Uint8Array([2]) } });
  expect(event.eventType).toBe('hook_created');

  // The other run keeps everything.
  expect((await w.runs.get(S)).attributes).toStrictEqual({ tag: 'other' });
  expect(await chunks(S)).toStrictEqual(['chunk of other']);
});
