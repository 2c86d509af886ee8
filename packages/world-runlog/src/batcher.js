// `events.create` calls batched per run and per turn of the event loop.
import { toWorkflowError } from './errors.js';
import { fromJson, SHAPE, toJson } from './codec.js';

/**
 * `events.create` calls made in the same turn of the event loop, gathered per run and sent
 * to the addon as one `createEvents` call each (the calls of a new run, `runId` null, each
 * on its own): one promise, one worker thread and one wake-up per run instead of one per
 * call, and the run's calls queued together, in call order, for one group commit. Each call
 * still settles on its own, with the same value or error class as one `createEvent` call.
 */
export function createBatcher(openWorld) {
  let queued = null;
  const send = async (calls) => {
    let outs;
    try {
      const w = await openWorld();
      outs = await w.createEvents(calls.map((c) => c.args));
    } catch (err) {
      for (const c of calls) c.reject(toWorkflowError(err));
      return;
    }
    for (let i = 0; i < calls.length; i++) {
      const out = outs[i];
      if (typeof out !== 'string') {
        calls[i].reject(toWorkflowError(out));
        continue;
      }
      try {
        calls[i].resolve(fromJson(out, SHAPE.eventResult));
      } catch (err) {
        calls[i].reject(toWorkflowError(err));
      }
    }
  };
  const flush = () => {
    const groups = queued;
    queued = null;
    for (const calls of groups.values()) void send(calls);
  };
  return (runId, request, params) =>
    new Promise((resolve, reject) => {
      let args;
      try {
        args = [runId ?? null, toJson(request, 'request'), toJson(params)];
      } catch (err) {
        reject(toWorkflowError(err));
        return;
      }
      if (queued === null) {
        queued = new Map();
        process.nextTick(flush);
      }
      // A new run's calls (runId null) each go alone: they are different runs.
      const key = args[0] ?? Symbol('new run');
      let calls = queued.get(key);
      if (calls === undefined) queued.set(key, (calls = []));
      calls.push({ args, resolve, reject });
    });
}
