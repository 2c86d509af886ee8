// A large events.list page of a run is listed as slices asked for two at a time, each slice
// starting at a seq computed from the one before (src/event-page.js, `listAhead`): the
// page must be the page one call lists, also when the log grows between the reads of two
// slices and the later slice was read first.
import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { Store } from '../index.js';
import { threadPoolStats } from '../store.js';
import { EVENTS_SLICE, EVENTS_SLICES_FIRST, fromEventPage, listEventsInSlices, sliceSizes } from '../src/event-page.js';
import { tempDir } from './helpers.mjs';

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

const slices = (list, params) => listEventsInSlices(list, params, { seqCursors: true });

describe('a run’s page in slices asked for ahead', () => {
  test('a page that ends at a slice’s end is the page of one call', async () => {
    expect([...EVENTS_SLICES_FIRST, EVENTS_SLICE]).toStrictEqual([50, 150, 700]);
    expect(sliceSizes(1000)).toStrictEqual([50, 150, 700, 100]);
    expect(sliceSizes(450)).toStrictEqual([50, 150, 250]);
    expect(sliceSizes(30)).toStrictEqual([30]);
    const runId = await runOf(900);
    const jobs = threadPoolStats().io.jobsQueued;
    const page = await slices((text) => w.eventsList(text), { runId, pagination: { limit: 1000 } });
    // Slices 0 and 1 at once, then 2 and 3 as 0 and 1 come back with more after them.
    expect(threadPoolStats().io.jobsQueued - jobs).toBe(4);
    const want = await oneCall(runId, 1000);
    expect(page).toStrictEqual(want);
    expect([page.data.length, page.cursor, page.hasMore]).toStrictEqual([900, 'seq:900', false]);
    // After a cursor, and with a limit that ends mid-slice.
    expect(await slices((text) => w.eventsList(text), { runId, pagination: { limit: 450, cursor: 'seq:100' } })).toStrictEqual(
      await oneCall(runId, 450, 'seq:100'),
    );
  });

  test('a slice read empty before the log grew, after one that had more, is asked for again', async () => {
    const runId = await runOf(200);
    let slice2Read;
    const slice2 = new Promise((resolve) => {
      slice2Read = resolve;
    });
    const asked = [];
    // Slice 1 (after seq:50) is read only after slice 2 (after seq:200) was read empty,
    // and after five more events: it has more after it, slice 2 said there were none.
    const list = async (text) => {
      const { cursor } = JSON.parse(text).pagination;
      asked.push(cursor ?? null);
      if (cursor === 'seq:50') {
        await slice2;
        await append(runId, 10_000, 5);
      }
      const wire = await w.eventsList(text);
      if (cursor === 'seq:200') slice2Read(wire);
      return wire;
    };
    const page = await slices(list, { runId, pagination: { limit: 1000 } });
    const [, , , emptyHasMore] = await slice2;
    expect(emptyHasMore).toBe(false);
    expect(page).toStrictEqual(await oneCall(runId, 1000));
    expect([page.data.length, page.cursor, page.hasMore]).toStrictEqual([205, 'seq:205', false]);
    // Asked again by slice 1's cursor.
    expect(asked.filter((c) => c === 'seq:200')).toHaveLength(2);
  });

  test('a cursor that is not a seq is followed slice by slice, and a bad one rejects as one call does', async () => {
    const runId = await runOf(700);
    const asked = [];
    const list = (text) => {
      asked.push(JSON.parse(text).pagination.cursor ?? null);
      return w.eventsList(text);
    };
    // Not canonical: left to the addon, which reads it, so the slices follow its cursors.
    const page = await slices(list, { runId, pagination: { limit: 1000, cursor: 'seq:+5' } });
    expect(asked).toStrictEqual(['seq:+5', 'seq:55', 'seq:205']);
    expect(page).toStrictEqual(await oneCall(runId, 1000, 'seq:5'));
    const err = await slices(list, { runId, pagination: { limit: 1000, cursor: 'nope' } }).then(
      () => null,
      (e) => e,
    );
    expect(err?.code).toBe('INVALID_INPUT');
  });
});
