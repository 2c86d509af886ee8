#!/usr/bin/env node
// The runlog World against @workflow/world-local, side by side in one process run. Prints JSON
// with each figure for both worlds and the ratios (runlog faster = ratio > 1).
//
//   node packages/world-runlog/scripts/bench.mjs [--writers 16] [--perWriter 20] [--reps 5]
//
// - create.oneRun:   W concurrent writers × N step_created each on one run (events/s).
//                    runlog durable (fdatasync per group commit); world-local not (no fsync).
// - create.eightRuns: the same on each of 8 runs at once (8 × W writers).
// - list.oneCall:    events.list of a 900-event run, one page ({limit: 1000}), median ms.
// - list.runtimePaged: the same listed as the runtime does (default page size, following
//                    cursors until hasMore is false), median ms.
// - stream:          streams.get(run, name, i) and its first chunk, on a 10,000-chunk stream,
//                    for i = 10 and i = 9,999 (median ms); flat = tail/10 within 2×.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function args() {
  const out = { writers: 16, perWriter: 20, reps: 5, listEvents: 900, chunks: 10_000, world: 'both' };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    const k = a[i].replace(/^--/, '');
    out[k] = k === 'world' ? a[i + 1] : Number(a[i + 1]);
  }
  return out;
}

async function openWorld(kind, dataDir) {
  if (kind === 'runlog') {
    const { createWorld } = await import(path.join(packageDir, 'index.js'));
    return createWorld({ dataDir, recoverActiveRuns: false });
  }
  const { createWorld } = await import('@workflow/world-local');
  const w = createWorld({ dataDir, recoverActiveRuns: false });
  await w.start?.();
  return w;
}

const bytes = (s) => new TextEncoder().encode(s);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

async function newRun(w, i = 0) {
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_bench', workflowName: 'workflow//bench//wf', input: bytes(`run ${i}`) },
  });
  await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
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
            specVersion: 5,
            eventData: { stepName: 'step//bench//s', input: bytes(`input ${wi} ${i}`) },
          });
        }
      }),
    ),
  );
  const s = (performance.now() - t0) / 1000;
  return round((runIds.length * o.writers * o.perWriter) / s, 0);
}

async function fill(w, runId, n, prefix) {
  const batch = 16;
  for (let i = 0; i < n; i += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, n - i) }, (_, j) =>
        w.events.create(runId, {
          eventType: 'step_created',
          correlationId: `${prefix}_${i + j}`,
          specVersion: 5,
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

async function timeMs(f, reps) {
  const xs = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await f();
    xs.push(performance.now() - t0);
  }
  return round(median(xs));
}

async function firstChunk(w, runId, name, index) {
  const stream = await w.streams.get(runId, name, index);
  const reader = stream.getReader();
  const { value } = await reader.read();
  await reader.cancel();
  return value;
}

async function bench(kind, o) {
  const dataDir = mkdtempSync(path.join(tmpdir(), `bench-${kind}-`));
  const w = await openWorld(kind, dataDir);
  try {
    const one = await createStorm(w, [await newRun(w)], o);
    const eight = await createStorm(w, await Promise.all(Array.from({ length: 8 }, (_, i) => newRun(w, i + 1))), o);

    const listRun = await newRun(w, 100);
    await fill(w, listRun, o.listEvents - 2, 'l');
    const total = await listAll(w, listRun, 1000);
    const oneCall = await timeMs(() => listAll(w, listRun, 1000), o.reps);
    const paged = await timeMs(() => listAll(w, listRun), o.reps);

    const streamRun = await newRun(w, 200);
    const name = 'strm_01ARZ3NDEKTSV4RRFFQ69G5FAV_bench';
    for (let i = 0; i < o.chunks; i += 500) {
      await w.streams.writeMulti(
        streamRun,
        name,
        Array.from({ length: Math.min(500, o.chunks - i) }, (_, j) => bytes(`chunk ${i + j}`)),
      );
    }
    const tail = o.chunks - 1;
    const head = 10;
    if (new TextDecoder().decode(await firstChunk(w, streamRun, name, tail)) !== `chunk ${tail}`) throw new Error('wrong tail chunk');
    const at10 = await timeMs(() => firstChunk(w, streamRun, name, head), o.reps * 4);
    const atTail = await timeMs(() => firstChunk(w, streamRun, name, tail), o.reps * 4);
    return {
      createOneRunEventsPerS: one,
      createEightRunsEventsPerS: eight,
      listEvents: total,
      listOneCallMs: oneCall,
      listRuntimePagedMs: paged,
      streamChunk10Ms: at10,
      streamChunkLastMs: atTail,
      streamTailOverHead: round(atTail / at10),
    };
  } finally {
    await w.close?.();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const o = args();
const out = { config: o, node: process.version };
if (o.world === 'both' || o.world === 'runlog') out.runlog = await bench('runlog', o);
if (o.world === 'both' || o.world === 'local') out.local = await bench('local', o);
if (out.runlog && out.local) {
  const r = out.runlog;
  const l = out.local;
  out.ratios = {
    createOneRun: round(r.createOneRunEventsPerS / l.createOneRunEventsPerS, 1),
    createEightRuns: round(r.createEightRunsEventsPerS / l.createEightRunsEventsPerS, 1),
    listOneCall: round(l.listOneCallMs / r.listOneCallMs, 1),
    listRuntimePaged: round(l.listRuntimePagedMs / r.listRuntimePagedMs, 1),
    streamChunkLast: round(l.streamChunkLastMs / r.streamChunkLastMs, 1),
    runlogStreamTailFlat: r.streamTailOverHead <= 2,
  };
}
console.log(JSON.stringify(out, null, 2));
