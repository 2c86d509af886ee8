import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(prefix = 'world-runlog-') {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The rejection of `promise`; throws (failing the test) if it resolves. The throw is outside
 * the `try`: caught there, it would be returned as if it were the rejection.
 */
export async function rejection(promise) {
  let value;
  try {
    value = await promise;
  } catch (err) {
    return err;
  }
  throw new Error(`expected a rejection, got ${inspect(value, { depth: 2 })}`);
}

/** `n` facts of kind `k` with small JSON payloads. */
export function facts(n, kind = 'step_completed') {
  return Array.from({ length: n }, (_, i) => ({ kind, payload: Buffer.from(JSON.stringify({ i })) }));
}

/**
 * The PostgreSQL server of this run: RUNLOG_PG_URL (`.ci/pg-server.sh start` exports it), or
 * undefined (the tests that need it skip). With RUNLOG_REQUIRE_PG=1 or RUNLOG_NO_SKIP=1 (set by
 * .ci/run) a missing URL is an error, so CI never skips silently.
 */
export function pgUrl() {
  const url = process.env.RUNLOG_PG_URL;
  if (url) return url;
  for (const flag of ['RUNLOG_REQUIRE_PG', 'RUNLOG_NO_SKIP']) {
    if (process.env[flag] === '1') {
      throw new Error(`${flag}=1 but RUNLOG_PG_URL is not set: start a server with .ci/pg-server.sh`);
    }
  }
  return undefined;
}

/** `url` with runlog's `schema=` parameter of a fresh schema `t_<random>`. */
export function withFreshSchema(url) {
  const schema = `t_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;
  return `${url}${url.includes('?') ? '&' : '?'}schema=${schema}`;
}

/**
 * The backend the backend-neutral World tests run on: PostgreSQL when
 * RUNLOG_TEST_BACKEND=postgres (then RUNLOG_PG_URL is required), else the file store.
 */
export const testBackend = process.env.RUNLOG_TEST_BACKEND === 'postgres' ? 'postgres' : 'file';

/**
 * createWorld's store option for one test: `{ dataDir }` under `dir`, or `{ url }` of a fresh
 * schema on the PostgreSQL backend (the same for every call with the same `dir`).
 */
export function storeTarget(dir) {
  if (testBackend === 'file') return { dataDir: `${dir}/data/runlog` };
  const url = pgUrl();
  if (!url) throw new Error('RUNLOG_TEST_BACKEND=postgres needs RUNLOG_PG_URL');
  schemaUrls[dir] ??= withFreshSchema(url);
  return { url: schemaUrls[dir] };
}
const schemaUrls = {};
