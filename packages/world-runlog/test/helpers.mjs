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

/** A minted (ULID) event id, as spec-5 Worlds give; slot ids (spec ≥ 6) are decimal positions. */
const MINTED_EVENT_ID = /^evnt_(?![0-9]{26}$)[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * `value` with what legitimately differs between two Worlds replaced, for comparing one
 * script's results on world-local and on runlog: run ids by `<run N>` (in order of first
 * appearance; `ids` shared across the calls of one World), `Date`s by `<date>`, bytes by
 * `<bytes base64>`, page cursors (opaque, each World's own format; a `null` one stays `null`)
 * by `<cursor>`, minted (ULID) event ids by `<minted event id>`; keys whose value is
 * `undefined` dropped. Slot event ids, dense positions, are the same on both and kept, as are
 * the hook/step/wait ids a test chose.
 */
export function normalizeAcrossWorlds(value, ids = new Map()) {
  if (value instanceof Date) return '<date>';
  if (value instanceof Uint8Array) return `<bytes ${Buffer.from(value).toString('base64')}>`;
  if (typeof value === 'string') {
    if (MINTED_EVENT_ID.test(value)) return '<minted event id>';
    return value.replace(/wrun_[0-9A-HJKMNP-TV-Z]{26}/g, (id) => {
      if (!ids.has(id)) ids.set(id, `<run ${ids.size + 1}>`);
      return ids.get(id);
    });
  }
  if (Array.isArray(value)) return value.map((v) => normalizeAcrossWorlds(v, ids));
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const key of Object.keys(value).sort()) {
      const v = value[key];
      if (v === undefined) continue;
      out[key] = key === 'cursor' && v !== null ? '<cursor>' : normalizeAcrossWorlds(v, ids);
    }
    return out;
  }
  return value;
}
