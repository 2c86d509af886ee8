// A large events.list page of a run is listed as slices by one job of the addon
// (`eventsListSlices`, src/event-page.js `listRunEventsInSlices`), each slice after the
// cursor of the one before and handed to JavaScript as soon as it is written: the page must
// be the page one call lists, dense and in order also while the run grows. A correlation
// id's page is listed slice by slice by cursor (`listEventsInSlices`).
import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { Store } from '../index.js';
import { threadPoolStats } from '../store.js';
import { EVENTS_SLICE, EVENTS_SLICES_FIRST, fromEventPage, listEventsInSlices, listRunEventsInSlices, sliceSizes } from '../src/event-page.js';
import { rejection, tempDir } from './helpers.mjs';

let tmp;
let store;
let w;
beforeEach(async () => {
  tmp = tempDir();
  store = await Store.open(`${tmp.dir}/store`);
  w = store.world();
});
afterEach(async () => {
  await store.close();
  tmp.cleanup();
});

/** A run of `n` events (run_created and n - 1 step_created), its id. */
async function runOf(n) {
  const { run } = JSON.parse(await w.createEvent(null, { eventType: 'run_created', eventData: { deploymentId: 'd', workflowName: 'wf', input: null } }));
  await append(run.runId, 0, n - 1);
  return run.runId;
}

async function append(runId, from, count) {
  for (let i = from; i < from + count; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, from + count - i) }, (_, j) =>
        w.createEvent(runId, { eventType: 'step_created', correlationId: `s_${i + j}`, specVersion: 5, eventData: { stepName: 's', input: { __type: 'Uint8Array', data: 'AQI=' } } }),
      ),
    );
  }
}

/** One addon call's page (the reference), as the package decodes it. */
async function oneCall(runId, limit, cursor) {
  return fromEventPage(await w.eventsList(JSON.stringify({ runId, pagination: { limit, cursor } })));
}

const slices = (params) => listRunEventsInSlices((text, sizes) => w.eventsListSlices(text, sizes), params);

describe('a run’s page in slices listed by one job', () => {
  test('a page of slices is the page of one call, listed by one job of the addon', async () => {
    expect([...EVENTS_SLICES_FIRST, EVENTS_SLICE]).toStrictEqual([50, 150, 700]);
    expect(sliceSizes(1000)).toStrictEqual([50, 150, 700, 100]);
    expect(sliceSizes(450)).toStrictEqual([50, 150, 250]);
    expect(sliceSizes(30)).toStrictEqual([30]);
    const runId = await runOf(900);
    const jobs = threadPoolStats().io.jobsQueued;
    const page = await slices({ runId, pagination: { limit: 1000 } });
    expect(threadPoolStats().io.jobsQueued - jobs).toBe(1);
    const want = await oneCall(runId, 1000);
    expect(page).toStrictEqual(want);
    expect([page.data.length, page.cursor, page.hasMore]).toStrictEqual([900, 'seq:900', false]);
    // After a cursor, and with a limit that ends mid-slice.
    expect(await slices({ runId, pagination: { limit: 450, cursor: 'seq:100' } })).toStrictEqual(await oneCall(runId, 450, 'seq:100'));
  });

  test('the slices after one without more resolve null, and each slice is a page', async () => {
    const runId = await runOf(120);
    const wires = await Promise.all(w.eventsListSlices(JSON.stringify({ runId }), [50, 150, 700]));
    expect(wires[2]).toBeNull();
    const [a, b] = wires.slice(0, 2).map(fromEventPage);
    expect([a.data.length, a.cursor, a.hasMore, b.data.length, b.cursor, b.hasMore]).toStrictEqual([50, 'seq:50', true, 70, 'seq:120', false]);
    expect([...a.data, ...b.data]).toStrictEqual((await oneCall(runId, 1000)).data);
  });

  test('a run growing while its slices are listed gives a dense page in order', async () => {
    const runId = await runOf(300);
    for (let round = 0; round < 5; round++) {
      const growing = append(runId, 10_000 + 100 * round, 100);
      const page = await slices({ runId, pagination: { limit: 1000 } });
      await growing;
      const ids = page.data.map((e) => e.correlationId ?? e.eventType);
      expect(new Set(ids).size).toBe(ids.length);
      expect(page.cursor).toBe(`seq:${page.data.length}`);
      // The log as it was read: the same events as one call lists now (which may see more after them).
      const now = await oneCall(runId, page.data.length);
      expect([page.data, page.cursor]).toStrictEqual([now.data, now.cursor]);
      expect(page.data.length).toBeGreaterThanOrEqual(300 + 100 * round);
    }
  });

  test('bad sizes reject as INVALID_INPUT, in an array of one promise', async () => {
    const runId = await runOf(3);
    const text = JSON.stringify({ runId });
    for (const sizes of [[], [0], [1001], [1.5], ['1'], 'x', null, Array(65).fill(1)]) {
      const wires = w.eventsListSlices(text, sizes);
      expect(wires).toHaveLength(1);
      expect((await rejection(wires[0])).code).toBe('INVALID_INPUT');
    }
    expect((await rejection(w.eventsListSlices('{', [1])[0])).code).toBe('INVALID_INPUT');
    // A run that does not exist: the first slice rejects, and the one after it is not listed.
    const missing = w.eventsListSlices(JSON.stringify({ runId: 'nope' }), [1, 2]);
    expect(missing).toHaveLength(2);
    expect((await rejection(missing[0])).code).toBe('NOT_FOUND');
    expect(await missing[1]).toBeNull();
  });

  test('slices by cursor follow the cursors, and a bad cursor rejects as one call does', async () => {
    const runId = await runOf(700);
    const asked = [];
    const list = (text) => {
      asked.push(JSON.parse(text).pagination.cursor ?? null);
      return w.eventsList(text);
    };
    // Not canonical: left to the addon, which reads it, so the slices follow its cursors.
    const page = await listEventsInSlices(list, { runId, pagination: { limit: 1000, cursor: 'seq:+5' } });
    expect(asked).toStrictEqual(['seq:+5', 'seq:55', 'seq:205']);
    expect(page).toStrictEqual(await oneCall(runId, 1000, 'seq:5'));
    for (const f of [(p) => listEventsInSlices(list, p), slices]) {
      const err = await f({ runId, pagination: { limit: 1000, cursor: 'nope' } }).then(
        () => null,
        (e) => e,
      );
      expect(err?.code).toBe('INVALID_INPUT');
    }
  });
});
