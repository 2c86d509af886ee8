#!/usr/bin/env node
// A storm of concurrent events.create on the same runs, through a World, from P processes
// × W writers each; then the logs are counted. Prints JSON.
//
//   node packages/world-runlog/scripts/storm.mjs                 # runlog and world-local, side by side
//   node packages/world-runlog/scripts/storm.mjs --world runlog --processes 2 --writers 8 --runs 30
//
// Every writer visits every run (in its own random order) and tries, in random order: one
// terminal event (run_completed, run_failed or run_cancelled, picked at random), the
// creation of the same two steps (step_created), the same hook (hook_created) and the same
// wait (wait_created), and a lazy start of a third step (step_started with stepName+input).
// All writers race for the same entities. A correct World accepts exactly one terminal
// event per run and creates each entity once, refusing the rest (409/410).
//
// Counted from the stored events afterwards (events.list of every run):
//   runsWithExtraTerminal   runs holding more than one terminal event
//   entitiesCreatedTwice    steps, hooks and waits whose creation event is stored more than once
//   runsWithoutTerminal     runs left without a terminal event (should be 0: every writer tries one)
//   runsWithSlotGaps        runs whose event ids are not the slots 1…n in order (spec ≥ 6 only)
//
// --url <postgres://…> runs it on PostgreSQL (runlog World only): every process opens the
// World with that URL and `?schema=` a fresh `storm_…` schema of its own (dropped
// afterwards), as app servers sharing one database do; the processes race on the same runs
// through the server, not through a shared directory. .ci/multi-server.sh runs it with
// --processes 3 (the three servers' worth) on its throwaway PostgreSQL.
//
// --app <dir> runs the storm through the line of the app in <dir> (its @workflow/world
// decides; examples/sdk-5.0.0-beta.55 after `node examples/run.mjs 5.0.0-beta.55 local`):
// the World is created with that directory as cwd, runs are stamped with its specVersion,
// and `--world local` is the app's own world-local.
//
// Exit status 1 when the runlog World's counts are not all 0 (runsWithExtraTerminal,
// entitiesCreatedTwice, runsWithoutTerminal, and runsWithSlotGaps on spec ≥ 6); the local
// World's counts never fail it (it is expected to keep extra terminal events). .ci/examples.sh
// runs it with --app examples/sdk-5.0.0-beta.55.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { appLine, record } from '../../../scripts/ci-results.mjs';

const self = fileURLToPath(import.meta.url);
const packageDir = path.resolve(path.dirname(self), '..');

function args() {
  const out = { world: 'both', processes: 2, writers: 8, runs: 30, child: false, dataDir: undefined, url: undefined, at: 0, seed: 1, app: undefined };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    const k = a[i].replace(/^--/, '');
    if (k === 'child') out.child = true;
    else out[k] = ['processes', 'writers', 'runs', 'at', 'seed'].includes(k) ? Number(a[++i]) : a[++i];
  }
  if (out.app) out.app = path.resolve(out.app);
  if (out.url !== undefined && !/^postgres(ql)?:\/\//i.test(out.url)) throw new Error(`--url must be a postgres:// URL, not ${out.url}`);
  if (out.url !== undefined && out.world !== 'runlog') {
    if (out.world !== 'both') throw new Error('--url: the storm on PostgreSQL is the runlog World only (--world runlog)');
    out.world = 'runlog';
  }
  return out;
}

/** `where`: a data directory, or a PostgreSQL URL (runlog only). */
async function openWorld(kind, where, app) {
  if (app) process.chdir(app);
  if (kind === 'runlog') {
    const { createWorld } = await import(path.join(packageDir, 'index.js'));
    return createWorld({ ...(/^postgres(ql)?:/i.test(where) ? { url: where } : { dataDir: where }), recoverActiveRuns: false });
  }
  const dataDir = where;
  const { createWorld } = app
    ? createRequire(path.join(process.cwd(), 'package.json'))('@workflow/world-local')
    : await import('@workflow/world-local');
  const w = createWorld({ dataDir, recoverActiveRuns: false });
  await w.start?.();
  return w;
}

function shuffle(xs, rnd) {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

function mulberry32(seed) {
  let t = seed >>> 0;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let r = Math.imul(t ^ (t >>> 15), 1 | t);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

const bytes = (s) => new TextEncoder().encode(s);
const TERMINAL = ['run_completed', 'run_failed', 'run_cancelled'];

function requests(runId, rnd, spec) {
  const terminal = TERMINAL[Math.floor(rnd() * 3)];
  const data = {
    run_completed: { output: bytes('done') },
    run_failed: { error: bytes('failed') },
    run_cancelled: undefined,
  }[terminal];
  return [
    { eventType: terminal, specVersion: spec, ...(data && { eventData: data }) },
    { eventType: 'step_created', correlationId: 'step_a', specVersion: spec, eventData: { stepName: 'step//storm//a', input: bytes('a') } },
    { eventType: 'step_created', correlationId: 'step_b', specVersion: spec, eventData: { stepName: 'step//storm//b', input: bytes('b') } },
    { eventType: 'step_started', correlationId: 'step_c', specVersion: spec, eventData: { stepName: 'step//storm//c', input: bytes('c') } },
    { eventType: 'hook_created', correlationId: 'hook_a', specVersion: spec, eventData: { token: `tok_${runId}`, metadata: bytes('m') } },
    { eventType: 'wait_created', correlationId: 'wait_a', specVersion: spec, eventData: { resumeAt: new Date(Date.now() + 3_600_000) } },
  ];
}

async function child(o) {
  const world = await openWorld(o.world, o.dataDir, o.app);
  const spec = world.specVersion ?? 5;
  const runIds = JSON.parse(process.env.STORM_RUN_IDS);
  const outcomes = {};
  let attempts = 0;
  const delay = o.at - Date.now();
  if (delay > 0) await new Promise((r) => setTimeout(r, delay));
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: o.writers }, async (_, wi) => {
      const rnd = mulberry32(o.seed * 1000 + wi + 1);
      for (const runId of shuffle(runIds, rnd)) {
        await Promise.all(
          shuffle(requests(runId, rnd, spec), rnd).map(async (req) => {
            attempts++;
            let k;
            try {
              const r = await world.events.create(runId, req);
              k = `ok:${r.event?.eventType ?? 'none'}`;
            } catch (err) {
              k = `${err?.name ?? 'Error'}${err?.status ? `(${err.status})` : ''}`;
            }
            outcomes[k] = (outcomes[k] ?? 0) + 1;
          }),
        );
      }
    }),
  );
  const ms = performance.now() - t0;
  await world.close?.();
  process.stdout.write(JSON.stringify({ attempts, outcomes, ms }));
}

/** The label of world `kind`: runlog's with the SDK line it serves, world-local's with its version. */
function worldLabel(kind, world, app) {
  if (kind === 'runlog') return `world-runlog (line ${world.runlog?.line?.name ?? '?'})`;
  if (!app) return '@workflow/world-local@5.0.0-beta.29';
  try {
    const pj = path.join(app, 'node_modules', '@workflow', 'world-local', 'package.json');
    return `@workflow/world-local@${JSON.parse(readFileSync(pj, 'utf8')).version}`;
  } catch {
    return "@workflow/world-local (the app's)";
  }
}

/** Whether a storm result of the runlog World kept every rule (all four counts 0). */
function runlogClean(r) {
  const slots = r.specVersion >= 6 ? r.runsWithSlotGaps === 0 : true;
  return r.runsWithExtraTerminal === 0 && r.entitiesCreatedTwice === 0 && r.runsWithoutTerminal === 0 && slots;
}

async function allEvents(world, runId) {
  const out = [];
  let cursor;
  for (;;) {
    const page = await world.events.list({ runId, resolveData: 'none', pagination: { limit: 1000, cursor, sortOrder: 'asc' } });
    out.push(...page.data);
    if (!page.hasMore) return out;
    cursor = page.cursor;
  }
}

function runChild(o, where, runIds, seed, at) {
  return new Promise((resolve, reject) => {
    const c = spawn(
      process.execPath,
      [self, '--child', '--world', o.world, '--dataDir', where, '--writers', String(o.writers), '--seed', String(seed), '--at', String(at), ...(o.app ? ['--app', o.app] : [])],
      { env: { ...process.env, STORM_RUN_IDS: JSON.stringify(runIds) }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${code}`))));
  });
}

/** A fresh place for one storm: a temp directory, or a schema of `url`; `drop()` removes it. */
async function stormStore(o) {
  if (o.url === undefined) {
    const dir = mkdtempSync(path.join(tmpdir(), `storm-${o.world}-`));
    return { where: dir, shape: 'file store', drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = `storm_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  const u = new URL(o.url);
  u.searchParams.set('schema', schema);
  const { pgConfig } = await import(path.join(packageDir, 'src', 'queue-postgres.js'));
  const drop = async () => {
    const { default: pg } = await import('pg');
    const c = new pg.Client(pgConfig(o.url));
    await c.connect();
    try {
      await c.query(`drop schema if exists ${pg.escapeIdentifier(schema)} cascade`);
    } finally {
      await c.end();
    }
  };
  return { where: u.toString(), shape: `PostgreSQL, schema ${schema}`, drop };
}

async function storm(o) {
  const place = await stormStore(o);
  const dataDir = place.where;
  try {
    const world = await openWorld(o.world, dataDir, o.app);
    const spec = world.specVersion ?? 5;
    const label = worldLabel(o.world, world, o.app);
    const runIds = [];
    for (let i = 0; i < o.runs; i++) {
      const { run } = await world.events.create(null, {
        eventType: 'run_created',
        specVersion: spec,
        eventData: { deploymentId: 'dpl_storm', workflowName: 'workflow//storm//wf', input: bytes(`run ${i}`) },
      });
      await world.events.create(run.runId, { eventType: 'run_started', specVersion: spec });
      runIds.push(run.runId);
    }
    await world.close?.();
    const at = Date.now() + 1500;
    const t0 = performance.now();
    const children = await Promise.all(Array.from({ length: o.processes }, (_, p) => runChild(o, dataDir, runIds, p + 1, at)));
    const wallMs = performance.now() - t0 - 1500;

    const reader = await openWorld(o.world, dataDir, o.app);
    let runsWithSlotGaps = 0;
    let runsWithExtraTerminal = 0;
    let runsWithoutTerminal = 0;
    let extraTerminalEvents = 0;
    let entitiesCreatedTwice = 0;
    let events = 0;
    for (const runId of runIds) {
      const evs = await allEvents(reader, runId);
      events += evs.length;
      if (spec >= 6 && evs.some((e, i) => e.eventId !== `evnt_${String(i + 1).padStart(26, '0')}`)) runsWithSlotGaps++;
      const terminal = evs.filter((e) => TERMINAL.includes(e.eventType)).length;
      if (terminal > 1) runsWithExtraTerminal++;
      if (terminal === 0) runsWithoutTerminal++;
      extraTerminalEvents += Math.max(0, terminal - 1);
      const created = {};
      for (const e of evs) {
        if (['step_created', 'hook_created', 'wait_created'].includes(e.eventType)) {
          const key = `${e.eventType}/${e.correlationId}`;
          created[key] = (created[key] ?? 0) + 1;
        }
      }
      entitiesCreatedTwice += Object.values(created).filter((n) => n > 1).length;
    }
    await reader.close?.();
    const outcomes = {};
    for (const c of children) for (const [k, n] of Object.entries(c.outcomes)) outcomes[k] = (outcomes[k] ?? 0) + n;
    return {
      world: label,
      store: place.shape.replace(/, schema .*/, ''),
      specVersion: spec,
      processes: o.processes,
      writers: o.writers,
      runs: o.runs,
      attempts: children.reduce((s, c) => s + c.attempts, 0),
      storedEvents: events,
      runsWithExtraTerminal,
      extraTerminalEvents,
      entitiesCreatedTwice,
      runsWithoutTerminal,
      ...(spec >= 6 && { runsWithSlotGaps }),
      outcomes,
      stormMs: Math.round(wallMs),
    };
  } finally {
    await place.drop();
  }
}

/**
 * The storm's counts as results for the compatibility table (scripts/ci-results.mjs), when it
 * ran through an app's line (--app) on a file store: one per World for the terminal events and, on spec ≥ 6,
 * for dense slot ids.
 */
function recordStorm(kinds, results) {
  const line = o.app ? appLine(o.app) : null;
  // The table's storm rows are the file store's; the PostgreSQL storm is printed by .ci/multi-server.sh.
  if (!line || o.url !== undefined) return;
  for (const [i, r] of results.entries()) {
    const base = { source: 'packages/world-runlog/scripts/storm.mjs', line, world: kinds[i] };
    const shape = `${r.processes} processes x ${r.writers} writers on ${r.runs} runs`;
    const extra = r.runsWithExtraTerminal;
    record({
      ...base,
      feature: 'storm: 0 runs with two terminal events',
      ok: extra === 0,
      // The count varies from run to run (it is in the JSON above); the table's cell must not.
      detail: extra === 0 ? shape : `runs with extra terminal events, ${shape}`,
    });
    if (r.runsWithSlotGaps === undefined) continue;
    record({
      ...base,
      feature: 'storm: dense slot ids',
      ok: r.runsWithSlotGaps === 0,
      detail: r.runsWithSlotGaps === 0 ? shape : `runs with slot gaps, ${shape}`,
    });
  }
}

const o = args();
if (o.child) {
  await child(o);
} else {
  const kinds = o.world === 'both' ? ['runlog', 'local'] : [o.world];
  const results = [];
  for (const world of kinds) results.push(await storm({ ...o, world }));
  console.log(JSON.stringify({ results }, null, 2));
  if (results.some((r, i) => kinds[i] === 'runlog' && !runlogClean(r))) process.exitCode = 1;
  recordStorm(kinds, results);
}
