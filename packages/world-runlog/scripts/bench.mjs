#!/usr/bin/env node
// The runlog World against @workflow/world-local, side by side in one process run. Prints JSON
// with each figure for both worlds and the ratios (runlog faster = ratio > 1).
//
//   node packages/world-runlog/scripts/bench.mjs [--writers 16] [--perWriter 20] [--rounds 3] [--reps 11]
//                                                [--world both|runlog|local] [--app <dir>]
//
// --app <dir> benchmarks through the SDK line of the app in <dir> (its @workflow/world
// decides, as for scripts/storm.mjs; examples/sdk-<line> once `node examples/run.mjs <line>
// local` installed it): both worlds are created with <dir> as cwd, `local` is the app's own
// @workflow/world-local, every event is stamped with the World's specVersion, and on a 4.x
// line the stream figures go through the 4.x flat names (writeToStreamMulti, readFromStream)
// instead of `streams`. Without it: this package's own @workflow/world-local, spec 5.
//
// The worlds take turns on every figure (the order flips each turn), and each figure is the
// median of its samples: creates, `rounds` turns each, one sample per turn; reads, turns of
// 3 samples, about 2 × `reps` samples in all (streams twice that), so that few samples pay
// for garbage the other world left (a world-local list leaves ~20 ms of it) and both worlds
// meet the machine's slower and faster spells alike. Beside each median, `ranges` has its
// samples' [min, max] and `samples` their count.
//
// - create.oneRun:   W concurrent writers × N step_created each on one run (events/s).
//                    runlog durable (fdatasync per group commit); world-local not (no fsync).
// - create.eightRuns: the same on each of 8 runs at once (8 × W writers).
// - create.sequentialOneRun / sequentialEightRuns: one writer per run (1 run, 8 runs at once),
//                    `sequential` step_created each, each awaited before the next (events/s):
//                    the latency of one durable create, where the writers above measure the
//                    group commit's throughput.
// - floor.createSequentialOneRun / createSequentialEightRuns: no World, the device alone: 1
//                    (8) threads at once, each `sequential` times a 160-byte write and its
//                    fdatasync into a file of its own, preallocated and synced beforehand (no
//                    size change). What a durable create cannot beat; `ratios.ceiling*` is
//                    this floor over world-local's figure: the most any durable World can
//                    reach against world-local (which does not fsync) on this machine.
// - list.oneCall:    events.list of a 900-event run, one page ({limit: 1000}), median ms.
// - list.runtimePaged: the same listed as the runtime does (default page size, following
//                    cursors until hasMore is false), median ms. Both on the store the create
//                    figures filled (~8,600 other events in other runs).
// - list.aloneOneCall: list.oneCall on a store of its own holding only that run (for
//                    runlog every sample after the first uses the page the addon kept).
// - list.aloneUnkeptOneCall: runlog alone, the same on a store opened with
//                    RUNLOG_NODE_PAGE_CACHE_BYTES=0 (no page kept: every listing writes its
//                    page), sampled in turns with world-local's list.aloneOneCall.
// - floor.listJsMs:  no World, the JavaScript a page of those 900 events costs at least in
//                    any World whose pages cross as text: one JSON.parse of the page's
//                    payloads (binary values as small integers, as runlog's page has them),
//                    and the 900 SDK event objects built with their Date and a Uint8Array copy
//                    of each binary value (median ms). What runlog's list.aloneOneCall cannot
//                    beat on the JavaScript thread; `ratios.ceilingListAloneOneCall` is
//                    world-local's figure over it.
// - floor.listCallMs: runlog alone, events.list of one event (`limit: 1`), median ms: the
//                    round trip every listing waits for before JavaScript has an event to
//                    build (the addon's thread and back). `ratios.boundListAloneOneCall` is
//                    world-local's list.aloneOneCall over floor.listJsMs + this, and
//                    `ratios.boundSequentialOneRun` / `boundSequentialEightRuns` are the
//                    device floors of the sequential creates with this round trip added to
//                    each write (a durable create waits for both: the write on a thread
//                    that is not JavaScript's, and the way there and back), over world-local.
// - stream:          streams.get(run, name, i) and its first chunk, on a 10,000-chunk stream,
//                    for i = 10 and i = 9,999 (median ms); flat = tail/10 within 2×.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function args() {
  const out = { writers: 16, perWriter: 20, sequential: 200, rounds: 3, reps: 11, listEvents: 900, chunks: 10_000, world: 'both' };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    const k = a[i].replace(/^--/, '');
    out[k] = ['world', 'app'].includes(k) ? a[i + 1] : Number(a[i + 1]);
  }
  if (out.app) out.app = path.resolve(out.app);
  return out;
}

/** The version of package `name` installed in the app `app` (null when absent). */
function appVersion(app, name) {
  try {
    return JSON.parse(readFileSync(path.join(app, 'node_modules', ...name.split('/'), 'package.json'), 'utf8')).version;
  } catch {
    return null;
  }
}

/** The spec version each world stamps its events with (its own `specVersion`). */
const specOf = new WeakMap();

async function openWorld(kind, dataDir, app) {
  if (app) process.chdir(app);
  let w;
  if (kind === 'runlog') {
    const { createWorld } = await import(path.join(packageDir, 'index.js'));
    w = createWorld({ dataDir, recoverActiveRuns: false });
  } else {
    const local = app ? createRequire(path.join(app, 'package.json'))('@workflow/world-local') : await import('@workflow/world-local');
    w = (local.createWorld ?? local.createLocalWorld)({ dataDir, recoverActiveRuns: false });
    await w.start?.();
  }
  specOf.set(w, app ? (w.specVersion ?? 5) : 5);
  return w;
}

/** The stream calls of the line: `streams.writeMulti`/`streams.get` on 5.x, the flat 4.x names on 4.x. */
function streamCalls(flat) {
  return flat
    ? {
        writeMulti: (w, runId, name, chunks) => w.writeToStreamMulti(name, runId, chunks),
        get: (w, runId, name, index) => w.readFromStream(name, index),
      }
    : {
        writeMulti: (w, runId, name, chunks) => w.streams.writeMulti(runId, name, chunks),
        get: (w, runId, name, index) => w.streams.get(runId, name, index),
      };
}
let streamsOf = streamCalls(false);

const bytes = (s) => new TextEncoder().encode(s);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

async function newRun(w, i = 0) {
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: specOf.get(w),
    eventData: { deploymentId: 'dpl_bench', workflowName: 'workflow//bench//wf', input: bytes(`run ${i}`) },
  });
  await w.events.create(run.runId, { eventType: 'run_started', specVersion: specOf.get(w) });
  return run.runId;
}

/** W writers × N step_created on each run, all at once; events per second. */
async function createStorm(w, runIds, o) {
  const t0 = performance.now();
  await Promise.all(
    runIds.flatMap((runId) =>
      Array.from({ length: o.writers }, async (_, wi) => {
        for (let i = 0; i < o.perWriter; i++) {
          await w.events.create(runId, {
            eventType: 'step_created',
            correlationId: `step_${wi}_${i}`,
            specVersion: specOf.get(w),
            eventData: { stepName: 'step//bench//s', input: bytes(`input ${wi} ${i}`) },
          });
        }
      }),
    ),
  );
  const s = (performance.now() - t0) / 1000;
  return round((runIds.length * o.writers * o.perWriter) / s, 0);
}

/** The device's floor (`floor.*` above): `files` threads, each `n` durable 160-byte writes. */
const FLOOR_THREAD = `
const { parentPort, workerData: { file, n } } = require('node:worker_threads');
const fs = require('node:fs');
const fd = fs.openSync(file, 'w+');
fs.writeSync(fd, Buffer.alloc(n * 160 + 4096));
fs.fsyncSync(fd);
const record = Buffer.alloc(160, 120);
parentPort.once('message', () => {
  for (let i = 0; i < n; i++) {
    fs.writeSync(fd, record, 0, 160, i * 160);
    fs.fdatasyncSync(fd);
  }
  fs.closeSync(fd);
  parentPort.postMessage('done');
});
parentPort.postMessage('ready');
`;

async function durableFloor(files, n) {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-floor-'));
  try {
    const threads = Array.from({ length: files }, (_, i) => new Worker(FLOOR_THREAD, { eval: true, workerData: { file: path.join(dir, `f${i}`), n } }));
    const next = (t) => new Promise((resolve, reject) => {
      t.once('message', resolve);
      t.once('error', reject);
    });
    await Promise.all(threads.map(next));
    const t0 = performance.now();
    const done = Promise.all(threads.map(next));
    for (const t of threads) t.postMessage('go');
    await done;
    const s = (performance.now() - t0) / 1000;
    await Promise.all(threads.map((t) => t.terminate()));
    return round((files * n) / s, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function fill(w, runId, n, prefix) {
  const batch = 16;
  for (let i = 0; i < n; i += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, n - i) }, (_, j) =>
        w.events.create(runId, {
          eventType: 'step_created',
          correlationId: `${prefix}_${i + j}`,
          specVersion: specOf.get(w),
          eventData: { stepName: 'step//bench//s', input: bytes(`x${i + j}`) },
        }),
      ),
    );
  }
}

async function listAll(w, runId, limit) {
  let cursor;
  let n = 0;
  for (;;) {
    const page = await w.events.list({ runId, pagination: { sortOrder: 'asc', cursor, ...(limit && { limit }) } });
    n += page.data.length;
    if (!page.hasMore) return n;
    cursor = page.cursor;
  }
}

async function firstChunk(w, runId, name, index) {
  const stream = await streamsOf.get(w, runId, name, index);
  const reader = stream.getReader();
  const { value } = await reader.read();
  await reader.cancel();
  return value;
}

/** Each figure for every world, the worlds taking turns (the order flips every round), so
 * that both meet the same machine: other processes' load moves these figures by 2-5x. */
async function bench(kinds, o) {
  const open = {};
  for (const kind of kinds) {
    const dataDir = mkdtempSync(path.join(tmpdir(), `bench-${kind}-`));
    open[kind] = { dataDir, w: await openWorld(kind, dataDir, o.app) };
  }
  const figures = Object.fromEntries(kinds.map((k) => [k, {}]));
  const floor = {};
  const push = (kind, key, value) => (figures[kind][key] ??= []).push(value);
  const turns = async (rounds, f) => {
    for (let r = 0; r < rounds; r++) {
      for (const kind of r % 2 ? [...kinds].reverse() : kinds) await f(kind, open[kind].w);
    }
  };
  try {
    await turns(o.rounds, async (kind, w) => push(kind, 'createOneRunEventsPerS', await createStorm(w, [await newRun(w)], o)));
    await turns(o.rounds, async (kind, w) => {
      const runs = await Promise.all(Array.from({ length: 8 }, (_, i) => newRun(w, i + 1)));
      push(kind, 'createEightRunsEventsPerS', await createStorm(w, runs, o));
    });
    const sequential = { ...o, writers: 1, perWriter: o.sequential };
    await turns(o.rounds, async (kind, w) => push(kind, 'createSequentialOneRunEventsPerS', await createStorm(w, [await newRun(w)], sequential)));
    await turns(o.rounds, async (kind, w) => {
      const runs = await Promise.all(Array.from({ length: 8 }, (_, i) => newRun(w, i + 1)));
      push(kind, 'createSequentialEightRunsEventsPerS', await createStorm(w, runs, sequential));
    });
    for (let r = 0; r < o.rounds; r++) {
      (floor.createSequentialOneRunEventsPerS ??= []).push(await durableFloor(1, o.sequential));
      (floor.createSequentialEightRunsEventsPerS ??= []).push(await durableFloor(8, o.sequential));
    }

    const name = 'strm_01ARZ3NDEKTSV4RRFFQ69G5FAV_bench';
    const tail = o.chunks - 1;
    const head = 10;
    for (const kind of kinds) {
      const { w } = open[kind];
      const listRun = await newRun(w, 100);
      await fill(w, listRun, o.listEvents - 2, 'l');
      figures[kind].listEvents = await listAll(w, listRun, 1000);
      const streamRun = await newRun(w, 200);
      for (let i = 0; i < o.chunks; i += 500) {
        await streamsOf.writeMulti(
          w,
          streamRun,
          name,
          Array.from({ length: Math.min(500, o.chunks - i) }, (_, j) => bytes(`chunk ${i + j}`)),
        );
      }
      if (new TextDecoder().decode(await firstChunk(w, streamRun, name, tail)) !== `chunk ${tail}`) throw new Error('wrong tail chunk');
      open[kind].listRun = listRun;
      open[kind].streamRun = streamRun;
      const aloneDir = mkdtempSync(path.join(tmpdir(), `bench-${kind}-alone-`));
      const alone = await openWorld(kind, aloneDir, o.app);
      const aloneRun = await newRun(alone, 100);
      await fill(alone, aloneRun, o.listEvents - 2, 'l');
      open[`${kind}-alone`] = { dataDir: aloneDir, w: alone, listRun: aloneRun };
      if (kind === 'runlog') {
        // The store reads the bound when it opens (at its first call, `newRun`).
        const unkeptDir = mkdtempSync(path.join(tmpdir(), 'bench-runlog-unkept-'));
        const unkept = await openWorld(kind, unkeptDir, o.app);
        process.env.RUNLOG_NODE_PAGE_CACHE_BYTES = '0';
        const unkeptRun = await newRun(unkept, 100).finally(() => delete process.env.RUNLOG_NODE_PAGE_CACHE_BYTES);
        await fill(unkept, unkeptRun, o.listEvents - 2, 'l');
        open['runlog-unkept'] = { dataDir: unkeptDir, w: unkept, listRun: unkeptRun };
      }
    }
    const timed = async (kind, key, f) => {
      const t0 = performance.now();
      await f();
      push(kind, key, performance.now() - t0);
    };
    const samples = (n, f) => async (kind, w) => {
      for (let i = 0; i < n; i++) await f(kind, w);
    };
    // Turns of 3 samples: the first may pay for the other world's garbage, the median not.
    const blocks = (n) => Math.max(2, Math.ceil(n / 3));
    await turns(blocks(o.reps * 2), samples(3, (kind, w) => timed(kind, 'listOneCallMs', () => listAll(w, open[kind].listRun, 1000))));
    await turns(blocks(o.reps * 2), samples(3, (kind, w) => timed(kind, 'listRuntimePagedMs', () => listAll(w, open[kind].listRun))));
    await turns(blocks(o.reps * 2), samples(3, (kind) => timed(kind, 'listAloneOneCallMs', () => listAll(open[`${kind}-alone`].w, open[`${kind}-alone`].listRun, 1000))));
    if (open['runlog-unkept']) {
      const { w, listRun } = open['runlog-unkept'];
      const stats = (await w.runlog.world()).pageCacheStats();
      if (stats.bytesMax !== 0) throw new Error('the unkept store keeps pages');
      await turns(
        blocks(o.reps * 2),
        samples(3, (kind) =>
          kind === 'runlog'
            ? timed(kind, 'listAloneUnkeptOneCallMs', () => listAll(w, listRun, 1000))
            : timed(kind, 'listAloneOneCallMs', () => listAll(open[`${kind}-alone`].w, open[`${kind}-alone`].listRun, 1000)),
        ),
      );
    }
    // The JavaScript floor of a listing (floor.listJsMs above), from runlog's own page.
    if (open['runlog-alone']) {
      const { w, listRun } = open['runlog-alone'];
      const { data } = await w.events.list({ runId: listRun, pagination: { sortOrder: 'asc', limit: 1000 } });
      const payloads = JSON.stringify(data.map((e) => e.eventData), (key, v) => (v instanceof Uint8Array ? 0 : v));
      const bins = data.map((e) => e.eventData?.input);
      const rows = data.map((e) => [e.runId, e.eventId, e.eventType, e.correlationId, e.createdAt.getTime(), e.specVersion]);
      const build = () => {
        const parsed = JSON.parse(payloads);
        const out = new Array(rows.length);
        for (let i = 0; i < rows.length; i++) {
          const [runId, eventId, eventType, correlationId, at, specVersion] = rows[i];
          const eventData = parsed[i];
          if (bins[i] instanceof Uint8Array) eventData.input = bins[i].slice();
          out[i] = { runId, eventId, eventType, correlationId, eventData, createdAt: new Date(at), specVersion };
        }
        return out;
      };
      for (let i = 0; i < blocks(o.reps * 2) * 3; i++) {
        const t0 = performance.now();
        build();
        (floor.listJsMs ??= []).push(performance.now() - t0);
      }
      for (let i = 0; i < blocks(o.reps * 2) * 3; i++) {
        const t0 = performance.now();
        await w.events.list({ runId: listRun, pagination: { sortOrder: 'asc', limit: 1 } });
        (floor.listCallMs ??= []).push(performance.now() - t0);
      }
    }
    await turns(blocks(o.reps * 4), samples(3, (kind, w) => timed(kind, 'streamChunk10Ms', () => firstChunk(w, open[kind].streamRun, name, head))));
    await turns(blocks(o.reps * 4), samples(3, (kind, w) => timed(kind, 'streamChunkLastMs', () => firstChunk(w, open[kind].streamRun, name, tail))));
  } finally {
    for (const { w, dataDir } of Object.values(open)) {
      await w.close?.();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const out = {
    floor: {
      createSequentialOneRunEventsPerS: median(floor.createSequentialOneRunEventsPerS),
      createSequentialEightRunsEventsPerS: median(floor.createSequentialEightRunsEventsPerS),
      ...(floor.listJsMs && { listJsMs: round(median(floor.listJsMs), 3), listCallMs: round(median(floor.listCallMs), 3) }),
      ranges: Object.fromEntries(Object.entries(floor).map(([key, xs]) => [key, [round(Math.min(...xs), 3), round(Math.max(...xs), 3)]])),
    },
  };
  for (const kind of kinds) {
    const f = figures[kind];
    const ms = (xs) => round(median(xs));
    out[kind] = {
      specVersion: specOf.get(open[kind].w),
      createOneRunEventsPerS: median(f.createOneRunEventsPerS),
      createEightRunsEventsPerS: median(f.createEightRunsEventsPerS),
      createSequentialOneRunEventsPerS: median(f.createSequentialOneRunEventsPerS),
      createSequentialEightRunsEventsPerS: median(f.createSequentialEightRunsEventsPerS),
      listEvents: f.listEvents,
      listOneCallMs: ms(f.listOneCallMs),
      listRuntimePagedMs: ms(f.listRuntimePagedMs),
      listAloneOneCallMs: ms(f.listAloneOneCallMs),
      ...(f.listAloneUnkeptOneCallMs && { listAloneUnkeptOneCallMs: ms(f.listAloneUnkeptOneCallMs) }),
      streamChunk10Ms: ms(f.streamChunk10Ms),
      streamChunkLastMs: ms(f.streamChunkLastMs),
    };
    out[kind].streamTailOverHead = round(out[kind].streamChunkLastMs / out[kind].streamChunk10Ms);
    // Each figure's samples' [min, max], beside the median above.
    out[kind].ranges = Object.fromEntries(
      Object.entries(f)
        .filter(([, xs]) => Array.isArray(xs))
        .map(([key, xs]) => [key, [round(Math.min(...xs)), round(Math.max(...xs))]]),
    );
    out[kind].samples = Object.fromEntries(Object.entries(f).filter(([, xs]) => Array.isArray(xs)).map(([key, xs]) => [key, xs.length]));
  }
  return out;
}

const o = args();
const out = { config: o, node: process.version };
if (o.app) {
  const world = appVersion(o.app, '@workflow/world');
  out.line = { app: o.app, workflow: appVersion(o.app, 'workflow'), world, worldLocal: appVersion(o.app, '@workflow/world-local') };
  streamsOf = streamCalls(/^4\./.test(world ?? ''));
  out.line.streamSurface = /^4\./.test(world ?? '') ? 'flat 4.x names' : 'streams';
}
Object.assign(out, await bench(o.world === 'both' ? ['runlog', 'local'] : [o.world], o));
if (out.runlog && out.local) {
  const r = out.runlog;
  const l = out.local;
  out.ratios = {
    createOneRun: round(r.createOneRunEventsPerS / l.createOneRunEventsPerS, 1),
    createEightRuns: round(r.createEightRunsEventsPerS / l.createEightRunsEventsPerS, 1),
    createSequentialOneRun: round(r.createSequentialOneRunEventsPerS / l.createSequentialOneRunEventsPerS, 1),
    createSequentialEightRuns: round(r.createSequentialEightRunsEventsPerS / l.createSequentialEightRunsEventsPerS, 1),
    listOneCall: round(l.listOneCallMs / r.listOneCallMs, 1),
    listRuntimePaged: round(l.listRuntimePagedMs / r.listRuntimePagedMs, 1),
    listAloneOneCall: round(l.listAloneOneCallMs / r.listAloneOneCallMs, 1),
    ...(r.listAloneUnkeptOneCallMs && { listAloneUnkeptOneCall: round(l.listAloneOneCallMs / r.listAloneUnkeptOneCallMs, 1) }),
    streamChunkLast: round(l.streamChunkLastMs / r.streamChunkLastMs, 1),
    runlogStreamTailFlat: r.streamTailOverHead <= 2,
    ceilingSequentialOneRun: round(out.floor.createSequentialOneRunEventsPerS / l.createSequentialOneRunEventsPerS, 1),
    ceilingSequentialEightRuns: round(out.floor.createSequentialEightRunsEventsPerS / l.createSequentialEightRunsEventsPerS, 1),
    ceilingListAloneOneCall: round(l.listAloneOneCallMs / out.floor.listJsMs, 1),
    boundListAloneOneCall: round(l.listAloneOneCallMs / (out.floor.listJsMs + out.floor.listCallMs), 1),
    // Per writer: a write of the floor plus a round trip; one writer, then eight at once.
    boundSequentialOneRun: round(1000 / l.createSequentialOneRunEventsPerS / (1000 / out.floor.createSequentialOneRunEventsPerS + out.floor.listCallMs), 1),
    boundSequentialEightRuns: round(8000 / l.createSequentialEightRunsEventsPerS / (8000 / out.floor.createSequentialEightRunsEventsPerS + out.floor.listCallMs), 1),
  };
}
console.log(JSON.stringify(out, null, 2));
