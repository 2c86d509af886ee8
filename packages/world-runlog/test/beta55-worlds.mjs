// The two Worlds of the 5.0.0-beta.55 line side by side, for the parity tests: world-local
// 5.0.0-beta.46 (from examples/sdk-5.0.0-beta.55) and runlog's World as that line, each in a
// directory of its own under a test's temp dir, closed together after the test.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { createWorld } from '../index.js';
import { extendForBeta55 } from '../src/line-beta55.js';
import { detectLine } from '../src/line.js';

export const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../examples');
export const BETA55_APP = path.join(EXAMPLES, 'sdk-5.0.0-beta.55');
/** world-local 5.0.0-beta.46, as the beta.55 example app installs it. */
export const beta55Local = createRequire(path.join(BETA55_APP, 'package.json'))('@workflow/world-local');

/** `keep(world)` remembers a World; `closeAll()` (in afterEach) closes every one kept. */
export function worldKeeper() {
  const opened = [];
  return {
    keep(w) {
      opened.push(w);
      return w;
    },
    async closeAll() {
      for (const w of opened.splice(0)) await w.close?.();
    },
  };
}

/** runlog's World as the beta.55 line (detected from the example app's directory), on `dataDir`. */
export function runlogBeta55(dataDir, keep) {
  const w = keep(createWorld({ dataDir }));
  return extendForBeta55(w, { line: detectLine(BETA55_APP), openWorld: w.runlog.world });
}

/** world-local 5.0.0-beta.46 on `dataDir`, without recovery. */
export const localBeta55 = (dataDir, keep) => keep(beta55Local.createWorld({ dataDir, recoverActiveRuns: false }));

export const bytes = (s) => new TextEncoder().encode(s);

/** A run created and started on `w` (deployment `deploymentId`); its id. */
export async function runningRun(w, deploymentId = 'dpl_parity') {
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: w.specVersion,
    eventData: { deploymentId, workflowName: 'wf', input: bytes('[]') },
  });
  await w.events.create(run.runId, { eventType: 'run_started', specVersion: w.specVersion });
  return run.runId;
}
