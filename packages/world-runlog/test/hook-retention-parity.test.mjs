// `capabilities.hookRetention` (the SDK's `experimental_minRetention` for hooks),
// differentially: the same calls against world-local 5.0.0-beta.46 (the 5.0.0-beta.55 line's
// own, from examples/sdk-5.0.0-beta.55) and runlog's World as that line give the same hook
// entities, listings, event types and error classes. A hook created with
// `eventData.tokenRetentionUntil` stays readable past its run's end (by token, by id, in
// both listings), keeps its token (another run's hook_created is a hook_conflict), cannot be
// resumed (RunExpiredError), and is gone with its token free once the time passes; a
// retention past 30 days is refused with a 400 and nothing held. Both Worlds run the script
// at once on the real clock, so one wait covers the expiry of both.
import path from 'node:path';

import { afterEach, beforeEach, expect, test } from 'vitest';

import { bytes, localBeta55 as localOn, runlogBeta55 as runlogOn, runningRun as runningRunOn, worldKeeper } from './beta55-worlds.mjs';
import { normalizeAcrossWorlds, tempDir } from './helpers.mjs';

const DAY_MS = 24 * 60 * 60 * 1000;
/** How long the retained hook outlives its run: long enough for the checks before it ends. */
const RETAIN_MS = 2500;

let tmp;
const { keep, closeAll } = worldKeeper();

beforeEach(() => {
  tmp = tempDir('hook-retention-');
});

afterEach(async () => {
  await closeAll();
  tmp.cleanup();
});

const runlogBeta55 = () => runlogOn(path.join(tmp.dir, 'runlog'), keep);
const localBeta55 = () => localOn(path.join(tmp.dir, 'local'), keep);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const runningRun = (w) => runningRunOn(w, 'dpl_retention');

const hookCreated = (w, runId, hookId, token, tokenRetentionUntil) =>
  w.events.create(runId, {
    eventType: 'hook_created',
    specVersion: w.specVersion,
    correlationId: hookId,
    eventData: { token, metadata: bytes('meta'), ...(tokenRetentionUntil && { tokenRetentionUntil }) },
  });

/**
 * The error's class (and a WorkflowWorldError's status), or what the call returned when it
 * did not fail. Other classes' `status` is left out: runlog builds them from the
 * `@workflow/errors` it resolves, here this package's own (5.0.0-beta.35 line, whose
 * RunExpiredError has none), in an app the app's.
 */
async function outcome(promise) {
  try {
    const value = await promise;
    return { ok: value?.event?.eventType ?? true };
  } catch (err) {
    return err.name === 'WorkflowWorldError' ? { error: err.name, status: err.status } : { error: err.name };
  }
}

async function retentionScript(w) {
  const out = {};
  const until = new Date(Date.now() + RETAIN_MS);
  const a = await runningRun(w);
  const created = await hookCreated(w, a, 'hook_kept', 'tok-kept', until);
  out.created = { event: created.event.eventData.tokenRetentionUntil, hook: created.hook.tokenRetentionUntil };
  out.createdSame = created.hook.tokenRetentionUntil.getTime() === until.getTime();
  await hookCreated(w, a, 'hook_plain', 'tok-plain');
  await w.events.create(a, { eventType: 'run_completed', specVersion: w.specVersion, eventData: { output: bytes('done') } });

  const byToken = await w.hooks.getByToken('tok-kept');
  out.byToken = byToken;
  out.byTokenUntil = byToken.tokenRetentionUntil instanceof Date && byToken.tokenRetentionUntil.getTime() === until.getTime();
  out.byId = await w.hooks.get('hook_kept');
  out.runList = (await w.hooks.list({ runId: a })).data.map((h) => h.hookId);
  out.storeList = (await w.hooks.list({})).data.map((h) => h.hookId);
  out.plainGone = await outcome(w.hooks.getByToken('tok-plain'));
  out.resume = await outcome(
    w.events.create(a, {
      eventType: 'hook_received',
      specVersion: w.specVersion,
      correlationId: 'hook_kept',
      eventData: { token: 'tok-kept', payload: bytes('late') },
    }),
  );
  const b = await runningRun(w);
  const conflict = await hookCreated(w, b, 'hook_b', 'tok-kept');
  out.conflict = { type: conflict.event.eventType, holder: conflict.event.eventData.conflictingRunId === a };
  out.tooFar = await outcome(hookCreated(w, b, 'hook_far', 'tok-far', new Date(Date.now() + 31 * DAY_MS)));
  out.farTokenFree = await outcome(hookCreated(w, b, 'hook_far2', 'tok-far'));
  out.retainedBeforeEnd = Date.now() < until.getTime();

  await sleep(until.getTime() - Date.now() + 100);
  out.afterByToken = await outcome(w.hooks.getByToken('tok-kept'));
  out.afterById = await outcome(w.hooks.get('hook_kept'));
  out.afterRunList = (await w.hooks.list({ runId: a })).data.map((h) => h.hookId);
  const c = await runningRun(w);
  out.takeOver = await outcome(hookCreated(w, c, 'hook_c', 'tok-kept'));
  out.newHolder = (await w.hooks.getByToken('tok-kept')).runId === c;
  return normalizeAcrossWorlds(out);
}

test('the beta.55 line declares hookRetention, as world-local 5.0.0-beta.46 does', () => {
  expect(runlogBeta55().capabilities).toEqual(localBeta55().capabilities);
  expect(runlogBeta55().capabilities.hookRetention).toEqual({ active: true });
});

test('a retained hook behaves as world-local 5.0.0-beta.46 has it, before and after its retention ends', async () => {
  const [local, runlog] = await Promise.all([retentionScript(localBeta55()), retentionScript(runlogBeta55())]);
  // The script's own checks held on the reference (it was run before its retention ended).
  expect(local.retainedBeforeEnd).toBe(true);
  expect(runlog.retainedBeforeEnd).toBe(true);
  expect(local.runList).toEqual(['hook_kept']);
  expect(local.resume).toEqual({ error: 'RunExpiredError' });
  expect(local.tooFar).toEqual({ error: 'WorkflowWorldError', status: 400 });
  expect(local.takeOver).toEqual({ ok: 'hook_created' });
  expect(runlog).toEqual(local);
  expect(runlog.byTokenUntil).toBe(true);
  expect(runlog.createdSame).toBe(true);
}, 30_000);
