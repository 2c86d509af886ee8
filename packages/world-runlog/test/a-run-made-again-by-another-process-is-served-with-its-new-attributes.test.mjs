// A World caches each run's attribute log folded (`runs.experimentalSetAttributes`) and reads
// only what was appended since. Another process (here: another World on the same dataDir)
// may delete the run with its logs (`Store.deleteRun`) and create it again under its id; its
// new attribute log can be as long as the old one. This World then serves the new log's
// attributes, not the deleted run's: each World log's cached fold is checked against the
// event it applied last (`crates/runlog-world/src/incremental.rs`). Before, `runs.get` here
// returned the deleted run's `{ tag: 'old' }`, and a change was validated against it.
import { afterEach, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { tempDir } from './helpers.mjs';

let tmp;
const worlds = [];
afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
  tmp?.cleanup();
});

test('a run deleted and made again by another process is served with its new attributes', async () => {
  tmp = tempDir();
  const world = () => {
    const w = createWorld({ dataDir: tmp.dir, recoverActiveRuns: false });
    worlds.push(w);
    return w;
  };
  const ev = (w, runId, eventType, extra = {}) => w.events.create(runId, { eventType, specVersion: 5, ...extra });
  const a = world();
  const { run } = await ev(a, null, 'run_created', { eventData: { deploymentId: 'dA', workflowName: 'wf-A', input: 1 } });
  const R = run.runId;
  await ev(a, R, 'run_started');
  await a.runs.experimentalSetAttributes(R, [{ key: 'tag', value: 'old' }]);
  expect((await a.runs.get(R)).attributes).toStrictEqual({ tag: 'old' });

  // "another process": the run deleted with its logs, made again, one attribute change:
  // an attribute log of the same length (one event) as the one this World folded.
  const b = world();
  await (await b.runlog.store()).deleteRun(R);
  await ev(b, R, 'run_created', { eventData: { deploymentId: 'dB', workflowName: 'wf-B', input: 2 } });
  await ev(b, R, 'run_started');
  await b.runs.experimentalSetAttributes(R, [{ key: 'n', value: '1' }]);

  const got = await a.runs.get(R);
  expect([got.workflowName, got.attributes]).toStrictEqual(['wf-B', { n: '1' }]);
  expect((await a.runs.list({ resolveData: 'none' })).data.find((r) => r.runId === R).attributes).toStrictEqual({ n: '1' });
  // A change through this World goes onto the new log, after B's.
  expect(await a.runs.experimentalSetAttributes(R, [{ key: 'm', value: '2' }])).toMatchObject({ attributes: { n: '1', m: '2' } });
  expect((await b.runs.get(R)).attributes).toStrictEqual({ n: '1', m: '2' });
});
