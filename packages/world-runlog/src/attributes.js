// `runs.experimentalSetAttributes` of @workflow/world 5.x (5.0.0-beta.21 and 5.0.0-beta.37
// declare it; 4.x does not): the run's attributes changed outside its event log, as
// world-local 5.x does, here in an attribute log of the run's own (crates/runlog-world
// `World::set_run_attributes`: validated against the run's attributes and appended fenced,
// never an event of the run's log). world.js puts it on the 5.x lines' Worlds only.
import { toWorkflowError } from './errors.js';
import { checked } from './validate.js';

/** Its argument types, checked as every storage method's are (src/validate.js). */
const SIGNATURES = Object.freeze({
  runs: { experimentalSetAttributes: [['runId', 'string'], ['changes', 'objects'], ['options', 'optionalObject']] },
});

/**
 * `runs.experimentalSetAttributes(runId, changes, options?)` → `{ attributes }` (the run's
 * attributes after the change), for a World whose addon World is `openWorld()`. Rejects with
 * `WorkflowRunNotFoundError` for an unknown run (looked up first), `AttributeValidationError`
 * for changes breaking the SDK's rules, `WorkflowWorldError` 400 for arguments of the wrong
 * type.
 */
export function setAttributesMember(openWorld) {
  const set = async (runId, changes, options) => {
    try {
      const w = await openWorld();
      // Plain JSON: attribute values are strings as given (no date revival of keys such
      // as `createdAt`).
      return JSON.parse(await w.runsSetAttributes(runId, JSON.stringify(changes), JSON.stringify(options ?? {})));
    } catch (err) {
      throw toWorkflowError(err);
    }
  };
  return checked('runs', 'experimentalSetAttributes', set, SIGNATURES);
}
