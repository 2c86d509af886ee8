// The Workflow SDK's published conformance suite (@workflow/world-testing 5.0.0-beta.35,
// 12 tests) against a World module. Run from packages/world-runlog:
//
//   npm run conformance              # this package (12/12, in .ci/node.sh)
//   npm run conformance:local        # @workflow/world-local, to check the harness itself
//   RUNLOG_CONFORMANCE_WORLD=./path/to/world.mjs npm run conformance
//
// RUNLOG_CONFORMANCE_WORLD is `local`, a package name, or a path (relative to this
// package, or absolute). Each test spawns the suite's server with WORKFLOW_TARGET_WORLD set
// to it; the servers inherit this process's environment, which points every data
// directory at one fresh temporary directory (removed at the end), so no run of an
// earlier suite run is recovered into this one.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { createTestSuite } from '@workflow/world-testing';
import { afterAll } from 'vitest';

const packageDir = path.resolve(new URL('..', import.meta.url).pathname);

/** The specifier world-testing's server understands: `./x` relative to the cwd, or a name. */
function worldSpecifier(target) {
  if (!target.startsWith('.') && !path.isAbsolute(target)) return target;
  const rel = path.relative(process.cwd(), path.resolve(packageDir, target));
  return rel.startsWith('.') ? rel : `./${rel}`;
}

const target = process.env.RUNLOG_CONFORMANCE_WORLD || './index.js';
const dataDir = mkdtempSync(path.join(tmpdir(), 'world-conformance-'));
process.env.WORKFLOW_LOCAL_DATA_DIR = dataDir;
process.env.WORKFLOW_RUNLOG_DATA_DIR = path.join(dataDir, 'runlog');
console.log(`[conformance] world ${worldSpecifier(target)}, data ${dataDir}`);

createTestSuite(worldSpecifier(target));

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
