// events.list pages are kept by the addon for their next listing (src/event_page/cache.rs in
// crates/runlog-node): a kept page is used only when the events read now are those it was
// written from, so a World's listings are the log's whether a page was kept or not: after
// appends (a page that ended at the tail, a full page now with more after it), in slices,
// descending, and with keeping turned off (RUNLOG_NODE_PAGE_CACHE_BYTES=0).
import { afterEach, describe, expect, test } from 'vitest';

import { createWorld, Store } from '../index.js';
import { rejection, tempDir } from './helpers.mjs';

const opened = [];
afterEach(async () => {
  for (const { w, tmp } of opened.splice(0)) {
    await w.close();
    tmp.cleanup();
  }
  delete process.env.RUNLOG_NODE_PAGE_CACHE_BYTES;
});

function open() {
  const tmp = tempDir();
  const w = createWorld({ dataDir: tmp.dir, recoverActiveRuns: false });
  opened.push({ w, tmp });
  return w;
}

const bytes = (s) => new TextEncoder().encode(s);

async function steps(w, runId, from, n) {
  for (let i = from; i < from + n; i++) {
    await w.events.create(runId, { eventType: 'step_created', correlationId: `s_${i}`, specVersion: 5, eventData: { stepName: 's', input: bytes(`in ${i}`) } });
  }
}

async function runOf(w, n) {
  const { run } = await w.events.create(null, { eventType: 'run_created', specVersion: 5, eventData: { deploymentId: 'd', workflowName: 'wf', input: bytes('run') } });
  await steps(w, run.runId, 0, n - 1);
  return run.runId;
}

const list = (w, runId, pagination) => w.events.list({ runId, pagination: { sortOrder: 'asc', ...pagination } });
const names = (page) => page.data.map((e) => e.correlationId ?? e.eventType);

describe('kept event pages', () => {
  test('a page listed again is the same page, and a kept page is used for it', async () => {
    const w = open();
    const runId = await runOf(w, 12);
    const native = await w.runlog.world();
    const first = await list(w, runId, { limit: 50 });
    const before = native.pageCacheStats();
    const again = await list(w, runId, { limit: 50 });
    expect(again).toStrictEqual(first);
    expect(again.data[3].eventData.input).toStrictEqual(bytes('in 2'));
    expect(again.data[3].createdAt).toBeInstanceOf(Date);
    const after = native.pageCacheStats();
    expect(after.hits - before.hits).toBe(1);
    expect(after.pages).toBeGreaterThan(0);
    expect(after.bytes).toBeGreaterThan(0);
    expect(after.bytesMax).toBe(32 << 20);
  });

  test('after appends a page lists the log as it is now', async () => {
    const w = open();
    const runId = await runOf(w, 10);
    const native = await w.runlog.world();
    const full = await list(w, runId, { limit: 10 });
    const tail = await list(w, runId, { limit: 50 });
    const desc = await w.events.list({ runId, pagination: { sortOrder: 'desc', limit: 4 } });
    expect([full.hasMore, tail.data.length, names(desc)]).toStrictEqual([false, 10, ['s_8', 's_7', 's_6', 's_5']]);
    await steps(w, runId, 9, 3);
    const stale = native.pageCacheStats().stale;
    const fullNow = await list(w, runId, { limit: 10 });
    // The same ten events, now with more after them.
    expect(fullNow.data).toStrictEqual(full.data);
    expect([fullNow.cursor, fullNow.hasMore]).toStrictEqual([full.cursor, true]);
    const tailNow = await list(w, runId, { limit: 50 });
    expect(names(tailNow).slice(-4)).toStrictEqual(['s_8', 's_9', 's_10', 's_11']);
    expect([tailNow.data.length, tailNow.hasMore]).toStrictEqual([13, false]);
    expect(names(await w.events.list({ runId, pagination: { sortOrder: 'desc', limit: 4 } }))).toStrictEqual(['s_11', 's_10', 's_9', 's_8']);
    // The tail page and the first descending page were kept with other events.
    expect(native.pageCacheStats().stale - stale).toBe(2);
  });

  test('a page of slices is the page of one addon call, kept or not', async () => {
    const w = open();
    const runId = await runOf(w, 700);
    const native = await w.runlog.world();
    const one = async () => {
      const { fromEventPage } = await import('../src/event-page.js');
      return fromEventPage(await native.eventsList(JSON.stringify({ runId, pagination: { limit: 1000 } })));
    };
    const want = await one();
    expect(want.data).toHaveLength(700);
    for (let i = 0; i < 3; i++) expect(await list(w, runId, { limit: 1000 })).toStrictEqual(want);
    await steps(w, runId, 699, 5);
    const grown = await list(w, runId, { limit: 1000 });
    expect(grown).toStrictEqual(await one());
    expect(grown.data).toHaveLength(705);
  });

  test('RUNLOG_NODE_PAGE_CACHE_BYTES=0 keeps no page', async () => {
    process.env.RUNLOG_NODE_PAGE_CACHE_BYTES = '0';
    const w = open();
    const runId = await runOf(w, 5);
    const native = await w.runlog.world();
    const first = await list(w, runId, { limit: 50 });
    expect(await list(w, runId, { limit: 50 })).toStrictEqual(first);
    expect(native.pageCacheStats()).toStrictEqual({ hits: 0, stale: 0, pages: 0, bytes: 0, bytesMax: 0 });
  });

  test('a bound that is not decimal digits rejects the open with INVALID_INPUT naming it', async () => {
    for (const v of ['-1', '1e6', ' 0', 'abc', '9007199254740992']) {
      process.env.RUNLOG_NODE_PAGE_CACHE_BYTES = v;
      const tmp = tempDir();
      try {
        const err = await rejection(Store.open(`${tmp.dir}/store`));
        expect([err.code, err.message.includes('RUNLOG_NODE_PAGE_CACHE_BYTES')]).toStrictEqual(['INVALID_INPUT', true]);
        const w = createWorld({ dataDir: tmp.dir, recoverActiveRuns: false });
        expect((await rejection(w.runs.list({}))).message).toContain('RUNLOG_NODE_PAGE_CACHE_BYTES');
      } finally {
        tmp.cleanup();
      }
    }
    process.env.RUNLOG_NODE_PAGE_CACHE_BYTES = '9007199254740991';
    const w = open();
    await runOf(w, 2);
    expect((await w.runlog.world()).pageCacheStats().bytesMax).toBe(9007199254740991);
  });
});
