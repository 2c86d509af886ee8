// The 4.x Streamer on the World (src/streams-v4.js): the flat, name-first methods the
// workflow 4.x runtime calls, `readFromStream` without a run id through the durable
// name → owner index, across a World restart; and the SDK line the World detects
// (src/line.js): the spec version it declares and whose queue it borrows.
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { WorkflowWorldError } from '@workflow/errors';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { createWorld, Store } from '../index.js';
import { detectLine } from '../src/line.js';
import { ownerLogId } from '../src/streams-v4.js';
import { pgUrl, rejection, tempDir, withFreshSchema } from './helpers.mjs';

const pkgRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const server = pgUrl();

let tmp;
const worlds = [];

function world() {
  const w = createWorld({ dataDir: `${tmp.dir}/data/runlog`, recoverActiveRuns: false });
  worlds.push(w);
  return w;
}

beforeEach(() => {
  tmp = tempDir('world-runlog-v4-');
});

afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
  tmp.cleanup();
});

const RUN = 'wrun_01KA6Z3T0000000000000000AA';
const OTHER_RUN = 'wrun_01KA6Z3T0000000000000000BB';
/** A getWritable() name (it embeds the run's ULID) and a serialization one (a random ULID). */
const USER_NAME = 'strm_01KA6Z3T0000000000000000AA_user';
const PASSED_NAME = 'strm_01KA6Z3V9QW8E7R6T5Y4U3I2O1';

const text = (chunks) => chunks.map((c) => Buffer.from(c).toString('utf8'));

/** Every chunk of `stream` until it closes. */
async function drain(stream) {
  const out = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

describe('the 4.x Streamer', () => {
  test('write, writeMulti and close by name, then read by name alone: chunks, info, pages, the run list', async () => {
    const w = world();
    await w.writeToStream(USER_NAME, RUN, 'a');
    await w.writeToStreamMulti(USER_NAME, RUN, [new Uint8Array([98]), 'c']);
    await w.closeStream(USER_NAME, RUN);

    expect(text(await drain(await w.readFromStream(USER_NAME)))).toEqual(['a', 'b', 'c']);
    expect(text(await drain(await w.readFromStream(USER_NAME, 1)))).toEqual(['b', 'c']);
    expect(text(await drain(await w.readFromStream(USER_NAME, -1)))).toEqual(['c']);
    expect(await w.getStreamInfo(USER_NAME, RUN)).toEqual({ tailIndex: 2, done: true });
    const page = await w.getStreamChunks(USER_NAME, RUN, { limit: 2 });
    expect([page.data.map((c) => c.index), text(page.data.map((c) => c.data)), page.hasMore, page.done]).toEqual([
      [0, 1],
      ['a', 'b'],
      true,
      false,
    ]);
    const rest = await w.getStreamChunks(USER_NAME, RUN, { cursor: page.cursor });
    expect([rest.data.map((c) => c.index), rest.hasMore, rest.done, rest.cursor]).toEqual([[2], false, true, null]);
    expect(await w.listStreamsByRunId(RUN)).toEqual([USER_NAME]);
  });

  test('the same Rust streams as world.streams: written through 4.x names, read through 5.x ones and back', async () => {
    const w = world();
    await w.writeToStream(PASSED_NAME, RUN, 'one');
    await w.streams.write(RUN, PASSED_NAME, 'two');
    await w.streams.close(RUN, PASSED_NAME);
    expect(text(await drain(await w.streams.get(RUN, PASSED_NAME)))).toEqual(['one', 'two']);
    expect(text(await drain(await w.readFromStream(PASSED_NAME)))).toEqual(['one', 'two']);
    expect(await w.streams.list(RUN)).toEqual([PASSED_NAME]);
  });

  test('a run id given as a promise: writes land in call order', async () => {
    const w = world();
    let resolve;
    const runId = new Promise((r) => (resolve = r));
    const writes = ['0', '1', '2', '3'].map((c) => w.writeToStream(PASSED_NAME, runId, c));
    writes.push(w.writeToStreamMulti(PASSED_NAME, runId, ['4', '5']), w.closeStream(PASSED_NAME, runId));
    resolve(RUN);
    await Promise.all(writes);
    expect(text(await drain(await w.readFromStream(PASSED_NAME)))).toEqual(['0', '1', '2', '3', '4', '5']);
  });

  test('a name whose ULID is no run: read by name after a World restart (the index is in the store)', async () => {
    const first = world();
    await first.writeToStreamMulti(PASSED_NAME, RUN, ['x', 'y']);
    await first.closeStream(PASSED_NAME, RUN);
    await first.close();

    const second = world();
    expect(text(await drain(await second.readFromStream(PASSED_NAME)))).toEqual(['x', 'y']);
    // On 4.x the name is the stream: the run id given to info and chunks does not matter.
    expect(await second.getStreamInfo(PASSED_NAME, OTHER_RUN)).toEqual({ tailIndex: 1, done: true });
    expect(text((await second.getStreamChunks(PASSED_NAME, OTHER_RUN)).data.map((c) => c.data))).toEqual(['x', 'y']);
    expect(await second.listStreamsByRunId(RUN)).toEqual([PASSED_NAME]);
    await second.close();

    const store = await Store.open(`${tmp.dir}/data/runlog`);
    try {
      const meta = Buffer.from(await store.runMeta(ownerLogId(PASSED_NAME)));
      expect(meta.subarray(0, 8).toString('latin1')).toBe('rlsown1\0');
      expect(meta.subarray(9, 9 + meta[8]).toString()).toBe(RUN);
      expect(meta.subarray(9 + meta[8]).toString()).toBe(PASSED_NAME);
    } finally {
      await store.close();
    }
  });

  test('a reader in this process, the writer in another: found through the index, read to the close', async () => {
    const w = world();
    const reading = w.readFromStream(PASSED_NAME).then(drain);
    const script = `
      const { createWorld } = await import(${JSON.stringify(pathToFileURL(path.join(pkgRoot, 'index.js')).href)});
      const w = createWorld({ dataDir: ${JSON.stringify(`${tmp.dir}/data/runlog`)}, recoverActiveRuns: false });
      await w.writeToStream(${JSON.stringify(PASSED_NAME)}, ${JSON.stringify(RUN)}, 'from');
      await new Promise((r) => setTimeout(r, 300));
      await w.writeToStreamMulti(${JSON.stringify(PASSED_NAME)}, ${JSON.stringify(RUN)}, ['another', 'process']);
      await w.closeStream(${JSON.stringify(PASSED_NAME)}, ${JSON.stringify(RUN)});
      await w.close();`;
    // Spawned without blocking this process: its reader follows the other's writes live.
    const child = await new Promise((resolve) =>
      execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: pkgRoot }, (err, stdout, stderr) => resolve({ err, stderr })),
    );
    expect([child.err, child.stderr]).toEqual([null, '']);
    expect(text(await reading)).toEqual(['from', 'another', 'process']);
    expect(await w.getStreamInfo(PASSED_NAME, OTHER_RUN)).toEqual({ tailIndex: 2, done: true });
  });

  test('a reader started before the first write waits for it, then reads to the close', async () => {
    const w = world();
    const reading = w.readFromStream(USER_NAME).then(drain);
    await new Promise((r) => setTimeout(r, 150));
    await w.writeToStream(USER_NAME, RUN, 'late');
    await w.writeToStream(USER_NAME, RUN, 'later');
    await w.closeStream(USER_NAME, RUN);
    expect(text(await reading)).toEqual(['late', 'later']);
  });

  test('a name nobody wrote: empty and open; its reader ends when the World closes', async () => {
    const w = world();
    expect(await w.getStreamInfo('strm_never', RUN)).toEqual({ tailIndex: -1, done: false });
    expect(await w.getStreamChunks('strm_never', RUN)).toEqual({ data: [], cursor: null, hasMore: false, done: false });
    expect(await w.listStreamsByRunId(RUN)).toEqual([]);
    const reading = w.readFromStream('strm_never').then(drain);
    await new Promise((r) => setTimeout(r, 150));
    await w.close();
    expect(await reading).toEqual([]);
  });

  test('a cancelled reader of a name nobody wrote stops waiting', async () => {
    const w = world();
    const stream = await w.readFromStream('strm_never');
    const reader = stream.getReader();
    const read = reader.read();
    await reader.cancel();
    expect(await read).toEqual({ done: true, value: undefined });
  });

  test('a second run writing a name already owned writes the owner\'s stream', async () => {
    const w = world();
    await w.writeToStream(USER_NAME, RUN, 'first');
    await w.writeToStream(USER_NAME, OTHER_RUN, 'second');
    await w.closeStream(USER_NAME, OTHER_RUN);
    expect(text(await drain(await w.readFromStream(USER_NAME)))).toEqual(['first', 'second']);
    expect(await w.listStreamsByRunId(RUN)).toEqual([USER_NAME]);
    expect(await w.listStreamsByRunId(OTHER_RUN)).toEqual([]);
  });

  test('no chunks record nothing; a write after the close is STREAM_CLOSED (409), nothing written', async () => {
    const w = world();
    await w.writeToStreamMulti(USER_NAME, RUN, []);
    expect(await w.listStreamsByRunId(RUN)).toEqual([]);
    await w.writeToStream(USER_NAME, RUN, 'only');
    await w.closeStream(USER_NAME, RUN);
    const err = await rejection(w.writeToStream(USER_NAME, RUN, 'after'));
    expect([err.constructor, err.status, err.cause?.code]).toEqual([WorkflowWorldError, 409, 'STREAM_CLOSED']);
    expect(await w.getStreamInfo(USER_NAME, RUN)).toEqual({ tailIndex: 0, done: true });
  });

  test('bad arguments reject with WorkflowWorldError 400 naming the argument, and record no owner', async () => {
    const w = world();
    const cases = [
      [() => w.writeToStream(42, RUN, 'x'), 'name'],
      [() => w.writeToStream('', RUN, 'x'), 'name'],
      [() => w.writeToStream('n'.repeat(1025), RUN, 'x'), 'name'],
      [() => w.writeToStream(USER_NAME, 7, 'x'), 'runId'],
      [() => w.writeToStream(USER_NAME, 'not a run id', 'x'), 'runId'],
      [() => w.writeToStream(USER_NAME, Promise.resolve(null), 'x'), 'runId'],
      [() => w.writeToStream(USER_NAME, RUN, { a: 1 }), 'chunk'],
      [() => w.writeToStreamMulti(USER_NAME, RUN, ['a', 2]), 'chunks[1]'],
      [() => w.closeStream(USER_NAME, undefined), 'runId'],
      [() => w.readFromStream(USER_NAME, 1.5), 'startIndex'],
      [() => w.readFromStream(null), 'name'],
      [() => w.getStreamInfo(USER_NAME, null), 'runId'],
      [() => w.getStreamChunks(USER_NAME, RUN, 'cursor'), 'options'],
      [() => w.listStreamsByRunId(3), 'runId'],
    ];
    for (const [call, field] of cases) {
      const err = await rejection(call());
      expect([err.constructor, err.status, err.cause?.code, err.cause?.field]).toEqual([WorkflowWorldError, 400, 'INVALID_INPUT', field]);
    }
    await w.close();
    const store = await Store.open(`${tmp.dir}/data/runlog`);
    try {
      const { runs } = await store.listRuns(null, 100);
      expect(runs.map((r) => r.runId)).toEqual([]);
    } finally {
      await store.close();
    }
  });

  test('owner ids: plain names encoded, long ones hashed, both valid store run ids', () => {
    expect(ownerLogId(USER_NAME)).toBe(`stream-owner-n${USER_NAME}`);
    expect(ownerLogId('__health_check__a/b')).toBe('stream-owner-n__health_check__a-2fb');
    const long = ownerLogId('x'.repeat(200));
    expect(long).toMatch(/^stream-owner-h[0-9a-f]{32}$/);
  });
});

describe.skipIf(!server)('the 4.x Streamer on PostgreSQL', () => {
  test('written by one World, read by name by a second on the schema: the index is in the database', async () => {
    const url = withFreshSchema(server);
    const first = createWorld({ url, recoverActiveRuns: false });
    worlds.push(first);
    await first.writeToStream(PASSED_NAME, RUN, 'a');
    await first.writeToStreamMulti(PASSED_NAME, RUN, ['b', 'c']);
    await first.closeStream(PASSED_NAME, RUN);
    const second = createWorld({ url, recoverActiveRuns: false });
    worlds.push(second);
    expect(text(await drain(await second.readFromStream(PASSED_NAME)))).toEqual(['a', 'b', 'c']);
    expect(await second.getStreamInfo(PASSED_NAME, OTHER_RUN)).toEqual({ tailIndex: 2, done: true });
    expect(await second.listStreamsByRunId(RUN)).toEqual([PASSED_NAME]);
  });
});

/** A fake app in `dir` with `@workflow/world` at `version` (declaring `spec`) and a `@workflow/world-local` stub. */
function fakeApp(dir, version, spec) {
  const mod = (name, files, exportsField) => {
    const root = path.join(dir, 'node_modules', ...name.split('/'));
    mkdirSync(path.join(root, 'dist'), { recursive: true });
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name, version, type: 'module', exports: exportsField }));
    for (const [file, body] of Object.entries(files)) writeFileSync(path.join(root, 'dist', file), body);
  };
  // Like @workflow/world 4.5.0: package.json is not exported (`./*` maps to dist/).
  mod('@workflow/world', {
    'index.js': `export const SPEC_VERSION_CURRENT = ${spec};\nexport async function reenqueueActiveRuns() { globalThis.__fakeReenqueued = true; }\n`,
  }, { '.': './dist/index.js', './*': './dist/*' });
  mod('@workflow/world-local', {
    'index.js':
      'export function createLocalWorld(args) {\n' +
      '  return { fake: true, args, queue: async () => ({ messageId: "msg_fake" }), createQueueHandler: () => () => {}, getDeploymentId: async () => "dpl_fake", close: async () => {} };\n' +
      '}\n',
  }, { '.': { default: './dist/index.js' } });
  writeFileSync(path.join(dir, 'package.json'), '{"name":"fake-app","private":true}');
}

describe('the SDK line, from the app', () => {
  test("an app on @workflow/world 4.5.0: spec 3 (world-local 4.4.1's) and the app's world-local queue", () => {
    fakeApp(tmp.dir, '4.5.0', 3);
    const line = detectLine(tmp.dir);
    expect([line.source, line.worldVersion, line.worldLocalVersion, line.specVersion]).toEqual(['app', '4.5.0', '4.5.0', 3]);
    expect(line.createLocalWorld({}).fake).toBe(true);
  });

  test('the spec per line: 5.0.0-beta.37 (the beta.55 line) declares 7, a spec runlog serves (no longer capped at 5)', () => {
    fakeApp(tmp.dir, '5.0.0-beta.37', 7);
    expect(detectLine(tmp.dir)).toMatchObject({ name: '5.0.0-beta.55', source: 'app', specVersion: 7 });
  });

  test('a line newer than runlog serves declares at most spec 7', () => {
    fakeApp(tmp.dir, '5.0.0-beta.60', 9);
    expect(detectLine(tmp.dir)).toMatchObject({ name: '5.0.0-beta.55', specVersion: 7 });
  });

  test("an app's @workflow/world that cannot be required (top-level await): this package's own, and why", () => {
    fakeApp(tmp.dir, '4.5.0', 3);
    writeFileSync(path.join(tmp.dir, 'node_modules', '@workflow', 'world', 'dist', 'index.js'), 'await 0;\nexport const SPEC_VERSION_CURRENT = 3;\n');
    const warn = console.warn;
    const warnings = [];
    console.warn = (...args) => warnings.push(args.join(' '));
    let line;
    try {
      line = detectLine(tmp.dir);
    } finally {
      console.warn = warn;
    }
    expect([line.source, line.specVersion, line.failure]).toEqual([
      'package',
      5,
      "the app's @workflow/world 4.5.0 could not be loaded: ERR_REQUIRE_ASYNC_MODULE",
    ]);
    expect(warnings).toEqual([`world-runlog: ${line.failure}; serving this package's own @workflow/world and @workflow/world-local instead`]);
  });

  test("no @workflow/world in the app: this package's own (5.0.0-beta.21, spec 5)", () => {
    const line = detectLine(tmp.dir);
    expect([line.source, line.worldVersion, line.worldLocalVersion, line.specVersion]).toEqual(['package', '5.0.0-beta.21', '5.0.0-beta.29', 5]);
  });

  test("createWorld() in the app's directory declares its line's spec and takes its world-local's queue", () => {
    fakeApp(tmp.dir, '4.5.0', 3);
    const script = `
      const { createWorld } = await import(${JSON.stringify(pathToFileURL(path.join(pkgRoot, 'index.js')).href)});
      const w = createWorld({ dataDir: 'data' });
      const { messageId } = await w.queue('__wkf_workflow_x', { runId: 'wrun_x' });
      console.log(JSON.stringify({ spec: w.specVersion, line: w.runlog.line, messageId, deployment: await w.getDeploymentId() }));
      await w.close();`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: tmp.dir, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      spec: 3,
      line: { name: '4.x', source: 'app', worldVersion: '4.5.0', worldLocalVersion: '4.5.0', specVersion: 3 },
      messageId: 'msg_fake',
      deployment: 'dpl_fake',
    });
  });
});
