// `world.runlog.runAt` and `world.runlog.runDiff`: a run as of any seq of its log, and which of
// its entities changed between two seqs (crates/runlog-world src/at.rs, through the addon's
// `runAt`/`runDiff`). Not part of the SDK's World: debugging a replay ("what did the run look
// like when this step was decided?"). A point is a seq (a non-negative integer), an ISO-8601
// time string or a `Date` (the last seq whose event's `createdAt` is at or before it).
// Results come back as the World's entities do (`Uint8Array`s, `Date`s); rejections are the
// SDK's classes (`toWorkflowError`): seq 0, a seq past the log's end or a time before its first
// event is WorkflowWorldError 400 `INVALID_INPUT` (with `runId` and `lastSeq` on its cause).
import { fromJson, SHAPE } from './codec.js';
import { toWorkflowError } from './errors.js';
import { invalidInput } from './validate.js';

/** A point as the addon takes it: a number or a string (a `Date` as its ISO string). */
function point(v, field) {
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) throw invalidInput(field, 'must be a valid Date');
    return v.toISOString();
  }
  if (typeof v === 'number' || typeof v === 'string') return v;
  throw invalidInput(field, 'must be a seq (a non-negative integer), an ISO-8601 time string or a Date');
}

/** `{ runAt, runDiff }` on the addon World `openWorld()` resolves to. */
export function createHistory(openWorld) {
  const call = async (f, shape) => {
    try {
      return fromJson(await f(await openWorld()), shape);
    } catch (err) {
      throw toWorkflowError(err);
    }
  };
  const runId = (v) => {
    if (typeof v !== 'string') throw invalidInput('runId', 'must be a string');
    return v;
  };
  return {
    runAt: (id, at) => call((w) => w.runAt(runId(id), point(at, 'at')), SHAPE.runAt),
    runDiff: (id, from, to) => call((w) => w.runDiff(runId(id), point(from, 'from'), point(to, 'to')), SHAPE.runDiff),
  };
}
