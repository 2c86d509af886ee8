// Workflow 4.x's entity shapes: runs and steps created at spec version 3 or below read back as
// @workflow/world-local 4.x gives them.

/**
 * The last spec version of workflow 4.x (`SPEC_VERSION_CURRENT` of @workflow/world 4.x). A
 * run created at it or below, and its steps, are read back in 4.x's shapes, as
 * @workflow/world-local 4.x writes them (and as every later world-local reads such files
 * back): a failed run's and a step's `error` is a StructuredError `{ message, stack?, code? }`
 * (@workflow/world 4.5.0 `StructuredErrorSchema`). The Rust World keeps, as on 5.x, the
 * event's `error` as is: a 4.x step_failed or step_retrying event's is the message alone
 * (a string, its stack beside it in `stack`), and a run_failed's `errorCode` is beside
 * the error rather than in it.
 */
export const SPEC_VERSION_V4_MAX = 3;

const isV4Entity = (e) => e !== null && typeof e === 'object' && Number.isInteger(e.specVersion) && e.specVersion <= SPEC_VERSION_V4_MAX;

/** A StructuredError from a 4.x event's `error` (a message, or an object with one), `stack`, `code`. */
export function structuredError(error, stack, code) {
  const out = { message: typeof error === 'string' ? error : (error?.message ?? 'Unknown error') };
  const st = stack ?? (typeof error === 'object' ? error?.stack : undefined);
  if (st !== undefined) out.stack = st;
  if (code !== undefined) out.code = code;
  return out;
}

/** A 4.x failed run's `error` with its code in it (in place). */
export function v4Run(run) {
  if (isV4Entity(run) && run.error != null) run.error = structuredError(run.error, undefined, run.error.code ?? run.errorCode);
  return run;
}

export const STEP_ERROR_EVENTS = new Set(['step_failed', 'step_retrying']);
export const needsV4Error = (step) => isV4Entity(step) && step.error != null && typeof step.error !== 'object';

/**
 * The 4.x steps of `steps` (one run's) with their `error` as 4.x has it (in place): the
 * message and `stack` of each one's latest step_failed or step_retrying event, which
 * `eventsOf(runId)` (the run's events, ascending, with data) supplies; read only when a
 * step needs it.
 */
export async function v4Steps(steps, eventsOf) {
  const pending = steps.filter(needsV4Error);
  if (pending.length === 0) return steps;
  const latest = new Map();
  for (const e of await eventsOf(pending[0].runId)) {
    if (STEP_ERROR_EVENTS.has(e.eventType) && e.correlationId) latest.set(e.correlationId, e.eventData);
  }
  for (const step of pending) {
    const d = latest.get(step.stepId);
    step.error = structuredError(d?.error ?? step.error, d?.stack);
  }
  return steps;
}
