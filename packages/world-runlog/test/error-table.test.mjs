// The one error table (crates/runlog-world/src/error_table.rs, docs/ERRORS.md; issue 21):
// the built addon rejects with what the generated src/error-codes.js says, every rejection
// carries its class and its code's status whichever surface raised it (a bare store call,
// the addon's World, the World the SDK gets), and toWorkflowError builds every class the
// table names.
import { createRequire } from 'node:module';

import { WorkflowWorldError } from '@workflow/errors';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { createWorld, Store, toWorkflowError } from '../index.js';
import { ERROR_CODES, ERROR_RETRYABLE, ERROR_STATUS } from '../src/error-codes.js';
import { addonPath } from '../src/native.js';
import { rejection, storeTarget, tempDir, testBackend } from './helpers.mjs';

const table = JSON.parse(createRequire(import.meta.url)(addonPath).errorTable());

let tmp;
const opened = [];

beforeEach(() => {
  tmp = tempDir();
});

afterEach(async () => {
  for (const x of opened.splice(0)) await x.close();
  tmp.cleanup();
});

/** The class and status a rejection of `code` must carry, from the generated constants. */
function expected(code, className) {
  const out = { code, className };
  if (ERROR_STATUS[code] !== null) out.status = ERROR_STATUS[code];
  return out;
}

describe('the generated constants', () => {
  test('are what the built addon rejects with: every code, status and retry flag, in order', () => {
    expect(table.codes.map((c) => c.code)).toEqual(Object.keys(ERROR_CODES));
    for (const c of table.codes) {
      expect([c.code, c.meaning, c.status, c.retryable]).toEqual([c.code, ERROR_CODES[c.code], ERROR_STATUS[c.code], ERROR_RETRYABLE[c.code]]);
    }
  });

  test('every class the table names becomes that SDK class, with the code and status of a WorkflowWorldError', () => {
    const classes = [...new Set(table.kinds.map((k) => k.className))];
    expect(classes.length).toBeGreaterThanOrEqual(9);
    for (const className of classes) {
      const raw = Object.assign(new Error('m'), { code: 'NOT_FOUND', className, status: 404, runId: 'wrun_1', hook: 'h' });
      const err = toWorkflowError(raw);
      expect(err.name, className).toBe(className);
      expect(err.cause).toBe(raw);
    }
    const busy = toWorkflowError(Object.assign(new Error('m'), { code: 'BUSY', className: 'WorkflowWorldError', status: 503 }));
    expect(busy).toMatchObject({ name: 'WorkflowWorldError', code: 'BUSY', status: 503 });
  });

  test('an error made in JavaScript with only a code gets its status from the table', () => {
    for (const code of Object.keys(ERROR_CODES)) {
      const err = toWorkflowError(Object.assign(new Error('m'), { code }));
      expect(WorkflowWorldError.is(err), code).toBe(true);
      expect([err.code, err.status], code).toEqual([code, ERROR_STATUS[code] ?? undefined]);
    }
  });
});

describe('a bare store call', () => {
  test('rejects with the class and status of its row (store errors had neither before)', async () => {
    const target = storeTarget(tmp.dir);
    const store = await Store.open(target.dataDir ?? target.url);
    opened.push(store);
    await store.createRun('r');
    expect(await rejection(store.read('missing', 0, 1))).toMatchObject(expected('NOT_FOUND', 'WorkflowRunNotFoundError'));
    expect(await rejection(store.createRun('r'))).toMatchObject(expected('EXISTS', 'EntityConflictError'));
    expect(await rejection(store.createRun('a/b'))).toMatchObject(expected('INVALID_INPUT', 'WorkflowWorldError'));
    await store.appendFacts('r', [{ kind: 'k' }]);
    expect(await rejection(store.appendDecisions('r', 0, [{ kind: 'k' }]))).toMatchObject(expected('FENCED', 'WorkflowWorldError'));
    expect(await rejection(store.lastSeq(42))).toMatchObject(expected('INVALID_INPUT', 'WorkflowWorldError'));
    await store.close();
    const closed = await rejection(store.lastSeq('r'));
    expect(closed).toMatchObject(expected('CLOSED', 'WorkflowWorldError'));
    expect(closed.status).toBeUndefined();
  });
});

describe('the World', () => {
  function world(options) {
    const w = createWorld({ ...storeTarget(tmp.dir), recoverActiveRuns: false, ...options });
    opened.push(w);
    return w;
  }

  async function runningRun(w) {
    const { run } = await w.events.create(null, {
      eventType: 'run_created',
      specVersion: 5,
      eventData: { deploymentId: 'dpl_test', workflowName: 'workflow//./t//wf', input: new Uint8Array([1]) },
    });
    await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
    return run.runId;
  }

  test('the addon World and the SDK World carry the same code, class and status for each failure', async () => {
    const w = world();
    const native = await w.runlog.world();
    const runId = await runningRun(w);
    await w.streams.write(runId, 'strm_1', 'a');
    await w.streams.close(runId, 'strm_1');
    const missing = 'wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV';
    const cases = [
      [() => native.runsGet(missing), () => w.runs.get(missing), 'NOT_FOUND', 'WorkflowRunNotFoundError'],
      [() => native.stepsGet(runId, 'step_x'), () => w.steps.get(runId, 'step_x'), 'NOT_FOUND', 'WorkflowWorldError'],
      [
        () => native.streamsWrite(runId, 'strm_1', Buffer.from('b')),
        () => w.streams.write(runId, 'strm_1', 'b'),
        'STREAM_CLOSED',
        'WorkflowWorldError',
      ],
      [() => native.streamsWrite('a/b', 'strm_1', Buffer.from('b')), () => w.streams.write('a/b', 'strm_1', 'b'), 'INVALID_INPUT', 'WorkflowWorldError'],
    ];
    for (const [raw, sdk, code, className] of cases) {
      const r = await rejection(raw());
      expect(r, code).toMatchObject(expected(code, className));
      const e = await rejection(sdk());
      expect(e.name, code).toBe(className);
      if (className === 'WorkflowWorldError') expect([e.code, e.status], code).toEqual([code, ERROR_STATUS[code]]);
      expect(e.cause, code).toMatchObject(expected(code, className));
    }
  });

  test.runIf(testBackend === 'file')('a payload above the store limit is 400 through events and streams alike', async () => {
    const w = world({ store: { payloadLenBytesMax: 512 } });
    const runId = await runningRun(w);
    const big = 'x'.repeat(600);
    const viaEvents = await rejection(
      w.events.create(runId, { eventType: 'step_created', specVersion: 5, correlationId: 'step_1', eventData: { stepName: 'step//./t//s', input: big } }),
    );
    const viaStreams = await rejection(w.streams.write(runId, 'strm_1', big));
    for (const e of [viaEvents, viaStreams]) {
      expect(e).toMatchObject({ name: 'WorkflowWorldError', code: 'INVALID_INPUT', status: 400 });
      expect(e.cause).toMatchObject(expected('INVALID_INPUT', 'WorkflowWorldError'));
    }
  });
});
