// A workflow 4.x run (spec 3) read back in 4.x's entity shapes, as @workflow/world-local 4.x
// writes them: a step's `error` and a failed run's are StructuredErrors `{ message, stack?,
// code? }` (@workflow/world 4.5.0), which the SDK's 4.x CLI and web UI show. The 4.x
// runtime's step_failed and step_retrying events carry the message as `error` (a string)
// and the stack beside it; its run_failed carries `errorCode` beside the error. Found with
// the 4.8.9 app (examples/sdk-cli.mjs): `workflow inspect steps --json` printed the failed
// step's error as a bare string where the local World prints `{ message, stack }`, and the
// failed run's error had no `code`. A spec-5 run keeps the event's `error` as is.
import { describe, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { SPEC_VERSION_V4_MAX } from '../src/storage.js';
import { storeTarget } from './helpers.mjs';
import { worldsPerTest } from './worlds-per-test.mjs';

const t = worldsPerTest((dir) => createWorld(storeTarget(dir)));
const world = (options) => t.world(options);

const STACK_FLAKY = 'Error: transient failure on the first attempt\n    at flaky (file:///app/.output/server/index.mjs:74:27)';
const STACK_REFUSE = 'FatalError: refused: uncaught\n    at refuse (file:///app/.output/server/index.mjs:83:8)';

/** A run at `spec` with a step retried once and a step failed, then the run failed (as 4.8.9 writes them). */
async function failedRun(w, spec) {
  const ev = (runId, eventType, correlationId, eventData) =>
    w.events.create(runId, { eventType, specVersion: spec, ...(correlationId && { correlationId }), ...(eventData && { eventData }) });
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: spec,
    eventData: { deploymentId: 'dpl_local@4.4.1', workflowName: 'workflow//./workflows/demo//doomed', input: new Uint8Array([1]) },
  });
  const runId = run.runId;
  await ev(runId, 'run_started');
  await ev(runId, 'step_created', 'step_flaky', { stepName: 'step//./workflows/demo//flaky', input: new Uint8Array([2]) });
  await ev(runId, 'step_started', 'step_flaky');
  const retrying = await ev(runId, 'step_retrying', 'step_flaky', { error: 'transient failure on the first attempt', stack: STACK_FLAKY });
  await ev(runId, 'step_started', 'step_flaky');
  await ev(runId, 'step_completed', 'step_flaky', { result: new Uint8Array([3]) });
  await ev(runId, 'step_created', 'step_refuse', { stepName: 'step//./workflows/demo//refuse', input: new Uint8Array([4]) });
  await ev(runId, 'step_started', 'step_refuse');
  const failed = await ev(runId, 'step_failed', 'step_refuse', { error: 'refused: uncaught', stack: STACK_REFUSE });
  const runFailed = await ev(runId, 'run_failed', undefined, { error: { message: 'refused: uncaught', stack: STACK_REFUSE }, errorCode: 'USER_ERROR' });
  return { runId, retrying, failed, runFailed };
}

describe('4.x (spec 3) error shapes', () => {
  test('the 4.x spec version is 3', () => {
    expect(SPEC_VERSION_V4_MAX).toBe(3);
  });

  test("a failed step's error is { message, stack } from its step_failed event, in steps.get, steps.list and the create result", async () => {
    const w = world();
    const { runId, failed } = await failedRun(w, 3);
    const want = { message: 'refused: uncaught', stack: STACK_REFUSE };
    expect(failed.step.error).toEqual(want);
    expect((await w.steps.get(runId, 'step_refuse')).error).toEqual(want);
    const listed = await w.steps.list({ runId, pagination: { sortOrder: 'asc' } });
    expect(listed.data.find((s) => s.stepId === 'step_refuse').error).toEqual(want);
  });

  test("a retried step keeps its retry's error as { message, stack }, also after it completed", async () => {
    const w = world();
    const { runId, retrying } = await failedRun(w, 3);
    const want = { message: 'transient failure on the first attempt', stack: STACK_FLAKY };
    expect(retrying.step.error).toEqual(want);
    const step = await w.steps.get(runId, 'step_flaky', { resolveData: 'none' });
    expect(step.status).toBe('completed');
    expect(step.attempt).toBe(2);
    expect(step.error).toEqual(want);
  });

  test("a failed run's error carries its errorCode as code, in runs.get, runs.list and the create result", async () => {
    const w = world();
    const { runId, runFailed } = await failedRun(w, 3);
    const want = { message: 'refused: uncaught', stack: STACK_REFUSE, code: 'USER_ERROR' };
    expect(runFailed.run.error).toEqual(want);
    expect((await w.runs.get(runId)).error).toEqual(want);
    expect((await w.runs.list({})).data.find((r) => r.runId === runId).error).toEqual(want);
  });

  test("a spec-5 run keeps each event's error as is", async () => {
    const w = world();
    const { runId } = await failedRun(w, 5);
    expect((await w.steps.get(runId, 'step_refuse')).error).toBe('refused: uncaught');
    expect((await w.steps.get(runId, 'step_flaky')).error).toBe('transient failure on the first attempt');
    const run = await w.runs.get(runId);
    expect(run.error).toEqual({ message: 'refused: uncaught', stack: STACK_REFUSE });
    expect(run.errorCode).toBe('USER_ERROR');
  });
});
