// The Workflow SDK's published conformance suite (@workflow/world-testing 5.0.0-beta.35,
// 12 tests) against a World module. Run from packages/world-runlog:
//
//   npm run conformance              # this package (12/12, in .ci/node.sh)
//   npm run conformance:pg           # this package on PostgreSQL (RUNLOG_PG_URL; .ci/node-pg.sh)
//   npm run conformance:local        # @workflow/world-local, to check the harness itself
//   RUNLOG_CONFORMANCE_WORLD=./path/to/world.mjs npm run conformance
//
// RUNLOG_CONFORMANCE_WORLD is `local`, a package name, or a path (relative to this
// package, or absolute). Each test spawns the suite's server with WORKFLOW_TARGET_WORLD set
// to it; the servers inherit this process's environment, which points every data
// directory at one fresh temporary directory (removed at the end), so no run of an
// earlier suite run is recovered into this one.
//
// RUNLOG_CONFORMANCE_BACKEND=postgres (what `conformance:pg` sets) puts the runlog World on
// the PostgreSQL server of RUNLOG_PG_URL instead, in a fresh schema `conf_<random>`
// (WORKFLOW_RUNLOG_URL, inherited by the servers); without RUNLOG_PG_URL it fails.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { createTestSuite } from '@workflow/world-testing';
import { afterAll, expect } from 'vitest';

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
delete process.env.WORKFLOW_RUNLOG_URL;
let where = dataDir;
if (process.env.RUNLOG_CONFORMANCE_BACKEND === 'postgres') {
  const server = process.env.RUNLOG_PG_URL;
  if (!server) throw new Error('RUNLOG_CONFORMANCE_BACKEND=postgres needs RUNLOG_PG_URL (.ci/pg-server.sh start)');
  const schema = `conf_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  process.env.WORKFLOW_RUNLOG_URL = `${server}${server.includes('?') ? '&' : '?'}schema=${schema}`;
  where = `PostgreSQL schema ${schema} (queue data ${dataDir})`;
}
console.log(`[conformance] world ${worldSpecifier(target)}, data ${where}`);

createTestSuite(worldSpecifier(target));

afterAll(async () => {
  if (process.env.RUNLOG_CONFORMANCE_BACKEND === 'postgres') {
    // The suite's runs are in the schema, and no file store was created: the servers ran on
    // PostgreSQL, not on a silent fallback.
    const { Store } = await import('../store.js');
    const store = await Store.openReadOnly(process.env.WORKFLOW_RUNLOG_URL);
    try {
      const page = await store.listRuns(null, 1000);
      expect(page.runs.filter((r) => r.runId.startsWith('wrun_')).length).toBeGreaterThanOrEqual(12);
    } finally {
      await store.close();
    }
    expect(existsSync(process.env.WORKFLOW_RUNLOG_DATA_DIR)).toBe(false);
  }
  rmSync(dataDir, { recursive: true, force: true });
});
