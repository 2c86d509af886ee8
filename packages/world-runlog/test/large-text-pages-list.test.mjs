// A run whose events carry large text payloads lists whole, page by page: 37 `step_created`
// events with 15 MiB string inputs (each under the store's 16 MiB payload limit) are ~555
// MiB of text, inside the default page of 100. A page goes to JavaScript as one string,
// which V8 caps at 2^29 - 24 characters (~512 MiB): such a page made `events.list` and
// `steps.list` reject with napi's bare `Error` (code `GenericFailure`, empty message), so the
// run could never be replayed. A page now ends once its JSON reaches 64 MiB
// (`WorldConfig::page_text_budget_bytes`), with `hasMore` and its cursor, as the SDK's replay
// loop follows; and a result JavaScript cannot hold rejects typed (`INTERNAL`).
// Heavy: ~560 MiB on disk for a few seconds (found by a breaker, branch break-list).
import { afterAll, beforeAll, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { tempDir } from './helpers.mjs';

const MIB = 1 << 20;
const STEPS = 37;
let tmp;
let w;
let runId;

beforeAll(async () => {
  tmp = tempDir('large-pages-');
  w = createWorld({ dataDir: `${tmp.dir}/runlog`, recoverActiveRuns: false });
  ({
    run: { runId },
  } = await w.events.create(null, { eventType: 'run_created', specVersion: 5, eventData: { deploymentId: 'd', workflowName: 'wf', input: new Uint8Array([1]) } }));
  for (let i = 0; i < STEPS; i++) {
    const input = String.fromCharCode(97 + (i % 26)).repeat(15 * MIB);
    await w.events.create(runId, { eventType: 'step_created', specVersion: 5, correlationId: `step_${i}`, eventData: { stepName: 's', input } });
  }
}, 300_000);

afterAll(async () => {
  await w?.close();
  tmp?.cleanup();
});

/** Every page of `list(pagination)` from the start, following cursors. */
async function walk(list, limit) {
  const pages = [];
  let cursor;
  for (;;) {
    const page = await list({ ...(limit && { limit }), ...(cursor && { cursor }) });
    pages.push(page);
    if (!page.hasMore) return pages;
    expect(page.cursor).not.toBe(cursor);
    cursor = page.cursor;
  }
}

test('events.list at the default page lists all 38 events over pages of at most ~64 MiB, each input whole', async () => {
  const pages = await walk((pagination) => w.events.list({ runId, pagination }));
  const events = pages.flatMap((p) => p.data);
  expect(events.map((e) => e.eventType)).toEqual(['run_created', ...Array(STEPS).fill('step_created')]);
  expect(events.slice(1).map((e) => e.correlationId)).toEqual(Array.from({ length: STEPS }, (_, i) => `step_${i}`));
  for (const [i, e] of events.slice(1).entries()) {
    expect(e.eventData.input.length).toBe(15 * MIB);
    expect(e.eventData.input.at(-1)).toBe(String.fromCharCode(97 + (i % 26)));
  }
  // Several pages, none holding more than the budget plus one input.
  expect(pages.length).toBeGreaterThanOrEqual(6);
  for (const p of pages) expect(p.data.length).toBeLessThanOrEqual(6);
}, 300_000);

test('steps.list with a limit of 100 lists the 37 steps over pages', async () => {
  const pages = await walk((pagination) => w.steps.list({ runId, pagination }), 100);
  const steps = pages.flatMap((p) => p.data);
  expect(steps).toHaveLength(STEPS);
  expect(new Set(steps.map((s) => s.stepId)).size).toBe(STEPS);
  expect(steps.every((s) => s.input.length === 15 * MIB)).toBe(true);
  expect(pages.length).toBeGreaterThan(1);
}, 300_000);
