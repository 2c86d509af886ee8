// The per-run event ceiling (`maxEvents`) on events.create results: the 4.8.9 and
// 5.0.0-beta.55 runtimes take it from a result carrying the run (run_started) and stop a
// replay that reaches it (MaxEventsExceededError). world-local 4.4.1 and 5.0.0-beta.46 report
// it on every result that carries the run; 5.0.0-beta.29 (the 5.0.0-beta.35 line) reports
// none. runlog reports the same number, read per call from the line's own @workflow/world
// (`getMaxEventsPerRun`, src/line.js) so that `WORKFLOW_MAX_EVENTS` is honoured.
import { LINES } from './line.js';

/** The lines whose local World reports `maxEvents`. */
const REPORTING = new Set([LINES.V4, LINES.BETA55]);

/** `result` with `maxEvents` set where `line` reports it and `result` carries the run. */
export function withMaxEvents(line, result) {
  const ceiling = line.getMaxEventsPerRun;
  if (REPORTING.has(line.name) && ceiling !== undefined && result?.run) result.maxEvents = ceiling();
  return result;
}

/** `world.events.create` reporting `maxEvents` as the line does (see above). */
export function reportMaxEvents(world, line) {
  if (!REPORTING.has(line.name)) return;
  const create = world.events.create;
  world.events = { ...world.events, create: async (...args) => withMaxEvents(line, await create(...args)) };
}
