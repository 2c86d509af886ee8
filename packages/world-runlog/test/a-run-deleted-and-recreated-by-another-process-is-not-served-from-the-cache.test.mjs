// A World's cached fold of a run is never served once another process (here: another store
// handle and World on the same dataDir, which is what another process is to this one) has
// deleted the run and created it again under the same id. Before the fix (found by trying to
// break the World) this World folded the new log onto the deleted run's state from its old
// seq: runs.get served the deleted run, its steps were listed, and writes were decided
// against it (a step_started acknowledged after the new log's run_completed).
import { afterEach, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { tempDir } from './helpers.mjs';

let tmp;
const worlds = [];
afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
  tmp?.cleanup();
});

test('a run deleted and created again by another process is read from its new log', async () => {
  tmp = tempDir();
  const a = createWorld({ dataDir: tmp.dir, recoverActiveRuns: false });
  worlds.push(a);
  const ev = (w, runId, eventType, extra = {}) => w.events.create(runId, { eventType, specVersion: 5, ...extra });
  const { run } = await ev(a, null, 'run_created', { eventData: { deploymentId: 'dA', workflowName: 'wf-A', input: 1 } });
  const R = run.runId;
  await ev(a, R, 'run_started');
  await ev(a, R, 'step_created', { correlationId: 'A1', eventData: { stepName: 's', input: 1 } });
  expect((await a.runs.get(R)).workflowName).toBe('wf-A');

  // "another process"
  const b = createWorld({ dataDir: tmp.dir, recoverActiveRuns: false });
  worlds.push(b);
  await (await b.runlog.store()).deleteRun(R);
  await ev(b, R, 'run_created', { eventData: { deploymentId: 'dB', workflowName: 'wf-B', input: 2 } });
  await ev(b, R, 'run_started');
  await ev(b, R, 'run_completed', { eventData: { output: 3 } });

  const got = await a.runs.get(R);
  expect([got.workflowName, got.status]).toStrictEqual(['wf-B', 'completed']);
  expect((await a.steps.list({ runId: R })).data).toStrictEqual([]);
  const late = await a.events.create(R, { eventType: 'step_started', correlationId: 'A1', specVersion: 5 }).then(
    () => 'acknowledged',
    (e) => e.name,
  );
  expect(late).not.toBe('acknowledged');
});
