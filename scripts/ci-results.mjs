#!/usr/bin/env node
// What CI ran, one JSON line per result, for the compatibility table of
// packages/world-runlog/README.md (scripts/compat-table.mjs renders it).
//
// When RUNLOG_CI_RESULTS names a directory (.ci/run sets a fresh one), the CI drivers
// (examples/run.mjs, examples/next.mjs, examples/sdk-cli.mjs,
// packages/world-runlog/conformance-beta55/run.mjs, packages/world-runlog/scripts/storm.mjs)
// call record() for each result, and the bash steps call the CLI form after a step passed:
//
//   node scripts/ci-results.mjs record '{"source":".ci/examples.sh","line":"4.8.9",...}'
//
// The vitest steps (.ci/node.sh, .ci/node-pg.sh) add the reporter
// scripts/ci-results-vitest.mjs, which records the pass count of the run.
//
// A result: { source, line, world, feature, mode?, install?, ok, detail?, pass?, tests? }
//   source   the driver that ran it (a repository path: "examples/run.mjs")
//   line     an SDK line of LINES; world "local" (the line's own world-local) or "runlog"
//   feature  one of FEATURES' labels (a row of the table)
//   mode     "dev" | "prod" (the app's server); install "tarball" | "directory" (runlog's)
//   ok       whether it passed; detail: why not, or what was counted; pass/tests: counts
// Without RUNLOG_CI_RESULTS record() writes nothing and returns false. A malformed result
// throws a TypeError with code ERR_CI_RESULT naming the field (a driver's typo fails loudly).
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const LINES = ['4.8.9', '5.0.0-beta.35', '5.0.0-beta.55'];
export const WORLDS = ['runlog', 'local'];
export const RESULTS_FILE = 'results.jsonl';

const ALL = LINES;
const BETA35 = ['5.0.0-beta.35'];
const BETA55 = ['5.0.0-beta.55'];
const BOTH = ['runlog', 'local'];
const RUNLOG = ['runlog'];

/**
 * The table's rows, in order: each feature's label, the lines and Worlds on which .ci/run
 * runs it (a cell CI should have and has no result for fails `compat-table.mjs --check`),
 * and who records it.
 */
export const FEATURES = [
  { label: 'steps+sleep+hook+stream+retry+FatalError', lines: ALL, worlds: BOTH, by: 'examples/run.mjs' },
  { label: 'dev server', lines: ALL, worlds: BOTH, by: 'examples/run.mjs --mode dev' },
  { label: 'production build', lines: ALL, worlds: BOTH, by: 'examples/run.mjs --mode prod' },
  { label: 'tarball install', lines: ALL, worlds: RUNLOG, by: 'examples/run.mjs --pack' },
  { label: "stream bytes equal the local World's", lines: ALL, worlds: RUNLOG, by: '.ci/examples.sh' },
  { label: 'runlog verify clean', lines: ALL, worlds: RUNLOG, by: '.ci/examples.sh' },
  { label: 'restart mid-sleep', lines: ALL, worlds: BOTH, by: 'examples/run.mjs --restart-mid-sleep' },
  { label: 'storm: 0 runs with two terminal events', lines: BETA55, worlds: BOTH, by: 'scripts/storm.mjs --app' },
  { label: 'storm: dense slot ids', lines: BETA55, worlds: BOTH, by: 'scripts/storm.mjs --app' },
  { label: 'SDK conformance suite (passed/tests)', lines: [...BETA35, ...BETA55], worlds: RUNLOG, by: '.ci/node.sh, conformance-beta55/run.mjs' },
  { label: 'slot ids from seq (8 concurrent runs)', lines: BETA55, worlds: BOTH, by: 'conformance-beta55/run.mjs' },
  { label: 'eventCount bump-and-report, sinceCursor delta', lines: BETA55, worlds: BOTH, by: 'conformance-beta55/run.mjs' },
  { label: "createBatch (a suspension's events together)", lines: BETA55, worlds: BOTH, by: 'conformance-beta55/run.mjs' },
  { label: 'spec 7, sealed log', lines: BETA55, worlds: BOTH, by: 'conformance-beta55/run.mjs' },
  { label: 'hook retention (experimental_minRetention)', lines: BETA55, worlds: BOTH, by: 'conformance-beta55/run.mjs' },
  { label: 'Next.js (next dev; next build + next start)', lines: BETA55, worlds: BOTH, by: 'examples/next.mjs' },
  { label: 'workflow inspect', lines: ALL, worlds: BOTH, by: 'examples/sdk-cli.mjs' },
  { label: 'workflow web (Chromium)', lines: ALL, worlds: BOTH, by: 'examples/sdk-cli.mjs' },
  { label: 'PostgreSQL: package tests', lines: BETA35, worlds: RUNLOG, by: '.ci/node-pg.sh' },
  { label: 'PostgreSQL: SDK conformance suite', lines: BETA35, worlds: RUNLOG, by: '.ci/node-pg.sh' },
];
const LABELS = new Set(FEATURES.map((f) => f.label));

function bad(message) {
  const err = new TypeError(`ci result: ${message}`);
  err.code = 'ERR_CI_RESULT';
  return err;
}

const optional = (v, test) => v === undefined || test(v);
const count = (v) => Number.isInteger(v) && v >= 0;

/** Throws ERR_CI_RESULT naming the first field of `r` that is not a result's; returns `r`. */
export function validate(r) {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) throw bad(`not an object: ${JSON.stringify(r)}`);
  if (typeof r.source !== 'string' || r.source === '') throw bad(`source: ${JSON.stringify(r.source)}`);
  if (!LINES.includes(r.line)) throw bad(`line ${JSON.stringify(r.line)} is not one of ${LINES.join(', ')}`);
  if (!WORLDS.includes(r.world)) throw bad(`world ${JSON.stringify(r.world)} is not one of ${WORLDS.join(', ')}`);
  if (!LABELS.has(r.feature)) throw bad(`feature ${JSON.stringify(r.feature)} is not one of FEATURES (scripts/ci-results.mjs)`);
  if (!optional(r.mode, (m) => m === 'dev' || m === 'prod')) throw bad(`mode ${JSON.stringify(r.mode)}`);
  if (!optional(r.install, (m) => m === 'tarball' || m === 'directory')) throw bad(`install ${JSON.stringify(r.install)}`);
  if (typeof r.ok !== 'boolean') throw bad(`ok ${JSON.stringify(r.ok)} is not a boolean`);
  if (!optional(r.detail, (d) => typeof d === 'string')) throw bad(`detail ${JSON.stringify(r.detail)}`);
  if (!optional(r.pass, count) || !optional(r.tests, count)) throw bad(`pass/tests ${r.pass}/${r.tests}`);
  return r;
}

/** `$RUNLOG_CI_RESULTS/results.jsonl`, or null when the variable is unset or empty. */
export function resultsPath(env = process.env) {
  return env.RUNLOG_CI_RESULTS ? path.join(env.RUNLOG_CI_RESULTS, RESULTS_FILE) : null;
}

/** Appends one result (validated) when RUNLOG_CI_RESULTS is set; true when it was written. */
export function record(result, env = process.env) {
  validate(result);
  const file = resultsPath(env);
  if (!file) return false;
  mkdirSync(path.dirname(file), { recursive: true });
  // One write of one line: appends from several processes do not interleave within it.
  appendFileSync(file, `${JSON.stringify(result)}\n`);
  return true;
}

/** Every result of a results.jsonl file; ERR_CI_RESULT names the line number of a bad one. */
export function readResults(file) {
  const out = [];
  for (const [i, text] of readFileSync(file, 'utf8').split('\n').entries()) {
    if (text.trim() === '') continue;
    let r;
    try {
      r = JSON.parse(text);
    } catch (err) {
      throw bad(`${file}:${i + 1}: not JSON (${err.message})`);
    }
    try {
      out.push(validate(r));
    } catch (err) {
      err.message = `${file}:${i + 1}: ${err.message}`;
      throw err;
    }
  }
  return out;
}

/** The version of `workflow` installed in an app directory (its SDK line), or null. */
export function appLine(appDir) {
  try {
    const v = JSON.parse(readFileSync(path.join(appDir, 'node_modules', 'workflow', 'package.json'), 'utf8')).version;
    return LINES.includes(v) ? v : null;
  } catch {
    return null;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [cmd, json, ...rest] = process.argv.slice(2);
  if (cmd !== 'record' || json === undefined || rest.length) {
    console.error("usage: node scripts/ci-results.mjs record '<json result>'   (appends when RUNLOG_CI_RESULTS is set)");
    process.exit(2);
  }
  try {
    record(JSON.parse(json));
  } catch (err) {
    console.error(`ci-results: ${err.message}`);
    process.exit(1);
  }
}
