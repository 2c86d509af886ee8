// `Store.deleteRun` on the store under a World (`w.runlog.store()`) makes the World of that
// handle forget the run (`World::forget_run`): the run is gone from the World at once, and
// can be created again under its id. Before, the World went on folding the run from its
// cache: `run_created` of the same id was refused as a conflict (409), `runs.get` still said
// `pending`, and the listing was an empty page.
import { afterEach, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { rejection, tempDir } from './helpers.mjs';

let tmp;
let w;
afterEach(async () => {
  await w?.close();
  tmp?.cleanup();
});

test('a run deleted through the store is gone from the World, and can be created again', async () => {
  tmp = tempDir();
  w = createWorld({ dataDir: tmp.dir, recoverActiveRuns: false });
  const store = await w.runlog.store();
  const created = (input) =>
    w.events.create(null, { eventType: 'run_created', specVersion: 5, eventData: { deploymentId: 'd', workflowName: 'wf', input: new Uint8Array([input]) } });
  const { run } = await created(1);
  await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
  await w.events.create(run.runId, { eventType: 'step_created', correlationId: 's1', specVersion: 5, eventData: { stepName: 's', input: new Uint8Array([2]) } });
  expect((await w.events.list({ runId: run.runId })).data).toHaveLength(3);
  expect((await w.runs.get(run.runId)).status).toBe('running');

  await store.deleteRun(run.runId);
  expect((await rejection(w.runs.get(run.runId))).name).toBe('WorkflowRunNotFoundError');
  expect((await rejection(w.events.list({ runId: run.runId }))).name).toBe('WorkflowRunNotFoundError');
  expect((await rejection(w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 }))).name).toBe('WorkflowRunNotFoundError');

  // The same id again: a new run with its own first event.
  const again = await w.events.create(run.runId, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'd', workflowName: 'wf', input: new Uint8Array([9]) },
  });
  expect([again.run.runId, again.run.status]).toStrictEqual([run.runId, 'pending']);
  const page = await w.events.list({ runId: run.runId });
  expect(page.data.map((e) => e.eventType)).toStrictEqual(['run_created']);
  expect(page.data[0].eventData.input).toStrictEqual(new Uint8Array([9]));
  expect((await w.runs.get(run.runId)).status).toBe('pending');
});
