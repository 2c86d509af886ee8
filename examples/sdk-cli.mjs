#!/usr/bin/env node
// The Workflow SDK's own CLI (`workflow inspect`, `workflow web`, package @workflow/cli and
// @workflow/web of each line) on a runlog store, against the same commands on the line's
// own local World. Prints one JSON summary per line and world, then one per line with the
// two worlds compared, and exits 0 when every check passed.
//
//   node examples/sdk-cli.mjs [--line L]... [--work DIR] [--web-node PATH] [--playwright DIR]
//                             [--chromium PATH] [--no-web] [--reuse]
//     --line        4.8.9 | 5.0.0-beta.35 | 5.0.0-beta.55 (repeatable; default: all three)
//     --work        where the apps go: DIR/sdk-<line>, one per line for both worlds;
//                   default /tmp/sdk-cli
//     --web-node    a Node >= 22.5 for `workflow web` (its server needs node:sqlite);
//                   default $SDK_CLI_WEB_NODE; without one the web checks fail, naming it
//     --playwright  a directory with playwright-core installed (default $SDK_CLI_PLAYWRIGHT)
//     --chromium    the browser (default $CHROMIUM or /usr/bin/chromium)
//     --no-web      the CLI checks only
//     --reuse       keep the apps' runs from an earlier call (no examples/run.mjs)
//     --postgres    URL: instead of the lines above, the shared PostgreSQL case (below)
//     --runlog-bin  the `runlog` CLI for --postgres (multi-server.mjs's verify)
//
// --postgres (issue 23, "the SDK's CLI and web UI on the shared store, from any machine"):
// examples/multi-server.mjs makes the runs: the 5.0.0-beta.55 app as 3 servers on that
// PostgreSQL (store and queue), one demo run and one doomed run, each delivered by whichever
// server took its messages. Then the same CLI and web checks as below run from another
// working directory (DIR/pg-inspector: a package.json and the app's node_modules, no store,
// no build), the World picked by WORKFLOW_TARGET_WORLD=world-runlog and found by the
// servers' WORKFLOW_RUNLOG_URL alone; that directory must still hold no `.workflow-data`.
// The app is DIR/sdk-5.0.0-beta.55 (installed by a file-store call before, else installed).
//
// Per line and world: `node examples/run.mjs <line> <world> --mode prod --keep-data
// --app-dir DIR/sdk-<line>` (the demo run and the doomed one, real runs of the app's
// production build; local first, on an emptied data directory, then runlog, whose store is
// DIR/sdk-<line>/.workflow-data/runlog); then, in the app directory, the line's CLI as a user runs
// it (`node_modules/@workflow/cli/bin/run.js`, i.e. `npx workflow`): runlog is picked by
// WORKFLOW_TARGET_WORLD=world-runlog (the CLI's `--backend` flag reads that variable), the
// local World by nothing (the CLI's default backend). What the CLI prints (`--json`) is
// checked against the app's run summary and against the World itself (its `runs.list`,
// `steps.list`, `events.list`, read by a child process in the app directory): runs and their
// statuses, steps with attempts, every event (count and order), hooks, streams, sleeps.
// Then `workflow web --noBrowser` is started with the web Node and driven in headless
// Chromium through playwright-core: the runs list shows both runs with their statuses, the
// demo run's page its trace, its Events tab every event of the World's list, its Streams
// tab the run's stream, the doomed run's page its failure; screenshots are kept in
// <app>/.logs/web-<world>-*.png (paths in the summary). Last, the two worlds are compared:
// the same steps, statuses and attempts, the same run output, as many events of each type
// (not their order: a 4.x local World lists by event id, where run_started's sorts before
// run_created's), the same hooks, streams, stream bytes and sleeps, the same web Events
// tab, the same error shapes (a failed step's and a failed run's `error`).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { freePort, ms, now, sleep } from './lib/harness.mjs';
import { record } from '../scripts/ci-results.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const LINES = ['4.8.9', '5.0.0-beta.35', '5.0.0-beta.55'];
// Local first: its run empties the app's data directory (runApp).
const WORLDS = ['local', 'runlog'];
const RUNLOG_PACKAGE_NAME = 'world-runlog';

function usage(msg) {
  if (msg) console.error(msg);
  console.error(
    'usage: node examples/sdk-cli.mjs [--line L]... [--work DIR] [--web-node PATH] [--playwright DIR] [--chromium PATH] [--no-web] [--reuse]',
  );
  process.exit(2);
}

const args = process.argv.slice(2);
const VALUE_FLAGS = ['--line', '--work', '--web-node', '--playwright', '--chromium', '--postgres', '--runlog-bin'];
const BOOL_FLAGS = ['--no-web', '--reuse'];
for (let i = 0; i < args.length; i++) {
  if (VALUE_FLAGS.includes(args[i])) {
    if (i + 1 >= args.length) usage(`${args[i]} wants a value`);
    i++;
  } else if (!BOOL_FLAGS.includes(args[i])) usage(`unknown argument: ${args[i]}`);
}
const values = (flag) => args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
const lines = values('--line').length ? values('--line') : LINES;
for (const l of lines) if (!LINES.includes(l)) usage(`unknown line: ${l}`);
const work = path.resolve(values('--work').at(-1) ?? '/tmp/sdk-cli');
const webNode = values('--web-node').at(-1) ?? process.env.SDK_CLI_WEB_NODE;
const playwrightDir = values('--playwright').at(-1) ?? process.env.SDK_CLI_PLAYWRIGHT;
const chromiumPath = values('--chromium').at(-1) ?? process.env.CHROMIUM ?? '/usr/bin/chromium';
const web = !args.includes('--no-web');
const reuse = args.includes('--reuse');
const pgUrl = values('--postgres').at(-1);
const runlogBin = values('--runlog-bin').at(-1);
/** With --postgres: the servers' store settings (multi-server.mjs's summary `store`). */
let pgStore;


/** The environment a world's CLI runs with: runlog by WORKFLOW_TARGET_WORLD, local by nothing. */
function worldEnv(world) {
  const env = { ...process.env };
  for (const k of ['WORKFLOW_TARGET_WORLD', 'RUNLOG_NODE_ADDON', 'WORKFLOW_LOCAL_DATA_DIR', 'WORKFLOW_RUNLOG_DATA_DIR', 'PORT']) delete env[k];
  // The CLI's update check keeps one cache file per user for every CLI version; lines
  // alternating on it would make each call ask the registry again.
  env.XDG_DATA_HOME = path.join(work, '.xdg');
  for (const k of ['WORKFLOW_RUNLOG_URL', 'WORKFLOW_RUNLOG_QUEUE_SCHEMA', 'RUNLOG_PG_URL', 'RUNLOG_PG_DIR']) delete env[k];
  if (world === 'runlog' || world === 'runlog-pg') env.WORKFLOW_TARGET_WORLD = RUNLOG_PACKAGE_NAME;
  if (world === 'runlog-pg') Object.assign(env, pgStore);
  return env;
}

/**
 * The app's run on `world`: examples/run.mjs in prod mode, its summary. Both worlds run in
 * the line's one app directory, local first on an emptied data directory (its files in
 * `.workflow-data/`), then runlog (its store in `.workflow-data/runlog/`, the World
 * installed into the app's node_modules as `world-runlog`): one `npm install` per line.
 */
function runApp(line, world, app) {
  const saved = path.join(app, '.logs', `sdk-cli-run-${world}.json`);
  if (reuse && existsSync(saved)) return JSON.parse(readFileSync(saved, 'utf8'));
  if (world === WORLDS[0]) rmSync(path.join(app, '.workflow-data'), { recursive: true, force: true });
  const r = spawnSync(
    process.execPath,
    [path.join(here, 'run.mjs'), line, world, '--mode', 'prod', '--keep-data', '--app-dir', app],
    // Its results are this script's (recordLineWorld), not run.mjs's: RUNLOG_CI_RESULTS dropped.
    { encoding: 'utf8', env: { ...worldEnv('local'), RUNLOG_CI_RESULTS: '' }, maxBuffer: 64 << 20 },
  );
  let summary;
  try {
    summary = JSON.parse(r.stdout);
  } catch {
    throw new Error(`examples/run.mjs ${line} ${world} printed no summary (exit ${r.status}): ${(r.stdout + r.stderr).slice(-1500)}`);
  }
  if (r.status !== 0 || !summary.ok) throw new Error(`examples/run.mjs ${line} ${world} failed: ${JSON.stringify(summary).slice(0, 1500)}`);
  mkdirSync(path.dirname(saved), { recursive: true });
  writeFileSync(saved, JSON.stringify(summary, null, 2));
  return summary;
}

/**
 * `workflow <args>` of the app's own @workflow/cli, with `node`, in the app directory;
 * resolves to its stdout parsed as JSON (NDJSON: an array of values); rejects naming the
 * command on a non-zero exit or output that is not JSON.
 */
function cli(app, world, cliArgs, { ndjson = false } = {}) {
  const bin = path.join(app, 'node_modules', '@workflow', 'cli', 'bin', 'run.js');
  const what = `workflow ${cliArgs.join(' ')} (${world})`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...cliArgs], { cwd: app, env: worldEnv(world), stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stdout = Buffer.concat(out).toString('utf8');
      const stderr = Buffer.concat(err).toString('utf8');
      if (code !== 0) {
        reject(new Error(`${what} exited ${code ?? signal}: ${(stderr || stdout).trim().split('\n').slice(-8).join('\n')}`));
        return;
      }
      try {
        resolve(ndjson ? stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)) : JSON.parse(stdout));
      } catch (e) {
        reject(new Error(`${what}: stdout is not JSON (${e.message}): ${stdout.slice(0, 400)}`));
      }
    });
  });
}

// The World read directly, in a child process in the app directory (where the World, its
// data directory and the line's packages are found as the CLI finds them): every run,
// the steps and every event (all pages of `events.list`, ascending) of the given runs.
const WORLD_VIEW = `
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
const [world, ...runIds] = process.argv.slice(1);
const req = createRequire(path.join(process.cwd(), 'package.json'));
const load = async (name) => import(pathToFileURL(req.resolve(name)).href);
let w;
if (world === 'runlog' || world === 'runlog-pg') w = (await load('${RUNLOG_PACKAGE_NAME}')).createWorld();
else {
  const m = await load('@workflow/world-local');
  w = (m.createLocalWorld ?? m.createWorld)({ dataDir: path.resolve('.workflow-data') });
}
async function all(list, params) {
  const out = [];
  let cursor;
  for (;;) {
    const page = await list({ ...params, pagination: { limit: 100, sortOrder: 'asc', ...(cursor && { cursor }) } });
    out.push(...page.data);
    if (!page.hasMore) return out;
    cursor = page.cursor;
  }
}
const runs = (await all((p) => w.runs.list(p), { resolveData: 'none' })).map((r) => ({ runId: r.runId, status: r.status, workflowName: r.workflowName, specVersion: r.specVersion }));
const per = {};
for (const runId of runIds) {
  const events = await all((p) => w.events.list(p), { runId, resolveData: 'none' });
  const steps = await all((p) => w.steps.list(p), { runId, resolveData: 'none' });
  per[runId] = {
    events: events.map((e) => ({ eventId: e.eventId, eventType: e.eventType, correlationId: e.correlationId ?? null })),
    steps: steps.map((s) => ({ stepId: s.stepId, stepName: s.stepName, status: s.status, attempt: s.attempt })),
  };
}
process.stdout.write(JSON.stringify({ runs, per }));
await w.close?.();
process.exit(0);
`;

function worldView(app, world, runIds) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', WORLD_VIEW, world, ...runIds], {
    cwd: app,
    env: worldEnv(world),
    encoding: 'utf8',
    timeout: 60_000,
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`reading the ${world} World directly exited ${r.status}: ${r.stderr.slice(-1500)}`);
  return JSON.parse(r.stdout);
}

/** The run's default stream (`getWritable()`): `strm_<the run id's ULID>_user`. */
const streamIdOf = (runId) => `strm_${runId.replace(/^wrun_/, '')}_user`;

/** `step//./workflows/demo//flaky` → `flaky` (the name the web UI shows). */
const shortName = (name) => name?.split('//').at(-1) ?? name;

/** Records `name: ok` into `checks`, and the failing value into `failures` when not ok. */
function check(checks, failures, name, ok, got) {
  checks[name] = Boolean(ok);
  if (!ok) failures[name] = got;
}

async function cliChecks(app, world, run, view, checks, failures) {
  const out = {};
  const { runId } = run;
  const t0 = now();
  const streamId = streamIdOf(runId);
  // Every command at once (each is a process of its own: the store is read by up to
  // eight processes together), then checked in turn.
  const [runs, shown, steps, events, hooks, streams, read, sleeps] = await Promise.all([
    cli(app, world, ['inspect', 'runs', '--json', '--limit', '100']),
    cli(app, world, ['inspect', 'run', runId, '--json']),
    cli(app, world, ['inspect', 'steps', '--runId', runId, '--json', '--limit', '100', '--sort', 'asc']),
    cli(app, world, ['inspect', 'events', '--runId', runId, '--json', '--limit', '100', '--sort', 'asc']),
    cli(app, world, ['inspect', 'hooks', '--runId', runId, '--json']),
    cli(app, world, ['inspect', 'streams', '--runId', runId, '--json']),
    // The stream read through the CLI (4.x: `readFromStream`), its values as NDJSON.
    cli(app, world, ['inspect', 'stream', streamId, '--runId', runId, '--json'], { ndjson: true }),
    cli(app, world, ['inspect', 'sleeps', '--runId', runId, '--json']),
  ]);

  const ctx = { out, check: (name, ok, got) => check(checks, failures, name, ok, got) };
  const doomed = cliRuns(ctx, run, view, runs, shown);
  cliSteps(ctx, run, view, steps, doomed);
  const hookEvents = cliEvents(ctx, run, view, events);
  cliHooksStreamsSleeps(ctx, run, { hooks, hookEvents, streams, read, sleeps });
  out.ms = ms(t0);
  return out;
}

/** `inspect runs` and `inspect run`: both runs with their statuses, the demo's output; the doomed run. */
function cliRuns(ctx, run, view, runs, shown) {
  const { runId, doomedRunId } = run;
  const list = runs.data ?? runs;
  const demo = list.find((r) => r.runId === runId);
  const doomed = list.find((r) => r.runId === doomedRunId);
  ctx.out.runs = list.map((r) => ({ runId: r.runId, workflow: shortName(r.workflowName), status: r.status, specVersion: r.specVersion }));
  ctx.check('cliRunsBoth', list.length === 2 && demo && doomed, ctx.out.runs);
  ctx.check('cliDemoCompleted', demo?.status === 'completed' && shortName(demo?.workflowName) === 'demo', demo);
  ctx.check(
    'cliDoomedFailed',
    doomed?.status === 'failed' && shortName(doomed?.workflowName) === 'doomed' && new RegExp(`refused: uncaught in ${run.name ?? 'example'}$`).test(doomed?.error?.message ?? ''),
    doomed,
  );
  ctx.check('cliRunsMatchWorld', JSON.stringify(ctx.out.runs.map((r) => [r.runId, r.status]).sort()) === JSON.stringify(view.runs.map((r) => [r.runId, r.status]).sort()), view.runs);

  ctx.out.runOutput = shown.output ?? null;
  ctx.check(
    'cliRunShowsOutput',
    shown.runId === runId && shown.status === 'completed' && shown.output?.attempt === 2 && shown.output?.approval?.note === 'from-outside',
    { status: shown.status, output: shown.output },
  );

  return doomed;
}

/** `inspect steps`: the four steps in order with statuses and attempts, as the World lists them. */
function cliSteps(ctx, run, view, steps, doomed) {
  const { runId } = run;
  ctx.out.steps = steps.map((s) => ({ name: shortName(s.stepName), status: s.status, attempt: s.attempt }));
  const expectSteps = [
    { name: 'prepare', status: 'completed', attempt: 1 },
    { name: 'flaky', status: 'completed', attempt: 2 },
    { name: 'refuse', status: 'failed', attempt: 1 },
    { name: 'finish', status: 'completed', attempt: 1 },
  ];
  ctx.check('cliSteps', JSON.stringify(ctx.out.steps) === JSON.stringify(expectSteps), ctx.out.steps);
  // The shapes of the failed step's `error` and the failed run's error code, as the CLI
  // prints them: compared across worlds (4.x: StructuredErrors, test/world-v4-error-shapes).
  const shape = (v) => (v !== null && typeof v === 'object' ? `object{${Object.keys(v).sort().join(',')}}` : typeof v);
  ctx.out.shapes = {
    failedStepError: shape(steps.find((s) => shortName(s.stepName) === 'refuse')?.error),
    failedRunError: shape(doomed?.error),
    // 4.x has the code in the error; 5.x beside it (runlog has it beside it on 4.x too,
    // a field 4.x's schema ignores).
    runErrorCode: doomed?.error?.code ?? doomed?.errorCode ?? null,
  };
  const worldSteps = view.per[runId].steps.map((s) => s.stepId).sort();
  ctx.check('cliStepsMatchWorld', JSON.stringify(steps.map((s) => s.stepId).sort()) === JSON.stringify(worldSteps), worldSteps);

}

/** `inspect events`: every event of the World's `events.list`, in its order; the hook's events. */
function cliEvents(ctx, run, view, events) {
  const { runId } = run;
  const worldEvents = view.per[runId].events;
  ctx.out.eventCount = events.length;
  ctx.out.worldEventCount = worldEvents.length;
  ctx.out.eventTypes = events.map((e) => e.eventType);
  ctx.out.eventIds = { first: events[0]?.eventId, last: events.at(-1)?.eventId };
  ctx.check('cliEventCountIsWorlds', events.length === worldEvents.length && events.length > 0, { cli: events.length, world: worldEvents.length });
  ctx.check(
    'cliEventsAreWorlds',
    JSON.stringify(events.map((e) => [e.eventId, e.eventType])) === JSON.stringify(worldEvents.map((e) => [e.eventId, e.eventType])),
    { cli: events.map((e) => e.eventId), world: worldEvents.map((e) => e.eventId) },
  );
  const types = new Set(ctx.out.eventTypes);
  const needTypes = ['run_created', 'run_started', 'step_retrying', 'step_failed', 'wait_created', 'wait_completed', 'hook_created', 'hook_received', 'run_completed'];
  ctx.check('cliEventTypes', needTypes.every((t) => types.has(t)) && ctx.out.eventTypes.at(-1) === 'run_completed', ctx.out.eventTypes);
  const hookEvents = events.filter((e) => e.eventType.startsWith('hook_'));
  ctx.out.hookEvents = hookEvents.map((e) => [e.eventType, e.correlationId]);

  return hookEvents;
}

/** `inspect hooks`, `streams`, `stream` (its bytes) and `sleeps`. */
function cliHooksStreamsSleeps(ctx, run, { hooks, hookEvents, streams, read, sleeps }) {
  const streamId = streamIdOf(run.runId);
  // The hook is disposed when the run ends (on both worlds): the run's hooks list is empty,
  // and its two events name one hook.
  ctx.out.hooks = (hooks.data ?? hooks).map((h) => ({ hookId: h.hookId, token: h.token }));
  ctx.check(
    'cliHooks',
    ctx.out.hooks.length === 0 && hookEvents.length === 2 && hookEvents[0].correlationId === hookEvents[1].correlationId && /^hook_/.test(hookEvents[0].correlationId),
    { hooks: ctx.out.hooks, hookEvents: ctx.out.hookEvents },
  );

  ctx.out.streams = streams.map((s) => s.streamId);
  ctx.check('cliStreams', ctx.out.streams.length === 1 && ctx.out.streams[0] === streamId, ctx.out.streams);
  // The stream's chunks as the CLI prints them (a Uint8Array as JSON: an object of byte
  // values by index), decoded: the app's three lines, as the app's /api/stream read them.
  ctx.out.streamRead = read.map((v) => (v !== null && typeof v === 'object' ? Buffer.from(Object.values(v)).toString('utf8') : v));
  const lines = run.streamLines ?? [];
  // Runs of several servers may run a step body twice (multi-server.mjs): a line repeated, as the app reads it too.
  const lineCount = run.linesMayRepeat ? lines.length >= 3 : lines.length === 3;
  ctx.check('cliStreamRead', lineCount && ctx.out.streamRead.join('') === lines.map((l) => `${l}\n`).join(''), { cli: ctx.out.streamRead, app: lines });

  ctx.out.sleeps = sleeps.map((s) => ({ correlationId: s.correlationId, completed: Boolean(s.completedAt) }));
  ctx.check('cliSleeps', sleeps.length === 1 && Boolean(sleeps[0].completedAt) && Boolean(sleeps[0].resumeAt), sleeps);
}

/** `workflow web --noBrowser` with the web Node, in the app directory; resolves when it answers. */
async function startWeb(app, world, logFile) {
  const port = await freePort();
  const bin = path.join(app, 'node_modules', '@workflow', 'cli', 'bin', 'run.js');
  const out = [];
  const child = spawn(webNode, [bin, 'web', '--noBrowser', '--webPort', String(port)], {
    cwd: app,
    env: { ...worldEnv(world), WORKFLOW_DISABLE_BROWSER_OPEN: '1' },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (d) => out.push(d));
  child.stderr.on('data', (d) => out.push(d));
  let exited = null;
  child.on('exit', (code, signal) => (exited = { code, signal }));
  const stop = async () => {
    writeFileSync(logFile, Buffer.concat(out));
    if (exited) return;
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {}
    for (let i = 0; i < 40 && !exited; i++) await sleep(100);
    if (!exited) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }
  };
  const base = `http://localhost:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`workflow web exited ${JSON.stringify(exited)}: ${Buffer.concat(out).toString().slice(-1500)}`);
    }
    try {
      const r = await fetch(base, { signal: AbortSignal.timeout(5_000) });
      if (r.status === 200) break;
    } catch {}
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`workflow web did not answer on ${base} within 90 s: ${Buffer.concat(out).toString().slice(-1500)}`);
    }
    await sleep(500);
  }
  return { base, stop, log: () => Buffer.concat(out).toString() };
}

/** 'step_retrying' → 'Step Retrying' (the web UI's event type labels). */
const eventLabel = (t) => t.split('_').map((w) => w[0].toUpperCase() + w.slice(1)).join(' ');

/** Occurrences of each of `labels` in `text`, as a sorted `label×n` list. */
function labelCounts(text, labels) {
  const out = [];
  for (const l of [...new Set(labels)].sort()) {
    const n = text.split('\n').filter((line) => line.trim() === l).length;
    out.push(`${l}×${n}`);
  }
  return out;
}

/** The runs list: both runs, each row with its status. */
async function webRunsList(page, base, run, r) {
  const { runId, doomedRunId } = run;
  await page.goto(base, { waitUntil: 'domcontentloaded', timeout: 60_000 });
  await page.getByText(runId, { exact: true }).waitFor({ timeout: 60_000 });
  await page.getByText(doomedRunId, { exact: true }).waitFor({ timeout: 30_000 });
  const row = async (id) => (await page.locator('tr', { hasText: id }).innerText()).replace(/\s+/g, ' ').trim();
  r.out.runsList = { demo: await row(runId), doomed: await row(doomedRunId) };
  await r.shot('runs');
  r.check('webRunsListDemoCompleted', /\bdemo\b/.test(r.out.runsList.demo) && /Completed/.test(r.out.runsList.demo), r.out.runsList.demo);
  r.check('webRunsListDoomedFailed', /\bdoomed\b/.test(r.out.runsList.doomed) && /Failed/.test(r.out.runsList.doomed), r.out.runsList.doomed);
}

/** The demo run's page, opened from the list: its status and its trace. */
async function webRunPage(page, base, run, r) {
  const { runId } = run;
  await page.getByText(runId, { exact: true }).click();
  await page.waitForURL(`**/run/${runId}**`, { timeout: 30_000 });
  // The trace labels a span with its step's name where the span is wide enough: `flaky`'s
  // (over a second: its retry wait) always is; the others' depend on the run's timing.
  // The text is looked for in what the page renders: some lines' traces also keep hidden
  // copies of the labels (for measuring them).
  await page.waitForFunction(() => /\bflaky\b/.test(document.body.innerText), null, { timeout: 30_000 });
  const text = await page.innerText('body');
  r.out.runPage = { url: page.url().replace(base, '') };
  await r.shot('run');
  r.check('webRunPage', text.includes(runId) && /Completed/.test(text) && /\bsleep\b/.test(text), text.slice(0, 600));
}

/**
 * The demo run's Events tab: as many events as the World's `events.list`, each type as
 * often, the first and last event ids, and each step's name on each of its events' rows.
 */
async function webEventsTab(page, run, view, r) {
  const { runId } = run;
  const events = view.per[runId].events;
  await page.getByRole('tab', { name: 'Events' }).click();
  const loaded = page.getByText(/\d+ events? loaded/);
  await loaded.waitFor({ timeout: 30_000 });
  await page.getByText(eventLabel('run_completed'), { exact: true }).first().waitFor({ timeout: 30_000 });
  const loadedCount = Number((await loaded.innerText()).match(/(\d+)/)[1]);
  const text = await page.innerText('body');
  const types = events.map((e) => eventLabel(e.eventType));
  const expected = labelCounts(types.join('\n'), types);
  const shown = labelCounts(text, types);
  const stepName = new Map(view.per[runId].steps.map((st) => [st.stepId, shortName(st.stepName)]));
  const names = events.flatMap((e) => (stepName.has(e.correlationId) ? [stepName.get(e.correlationId)] : []));
  const expectedNames = labelCounts(names.join('\n'), names);
  const shownNames = labelCounts(text, names);
  r.out.events = { loaded: loadedCount, world: types.length, shown, stepNames: shownNames };
  await r.shot('events');
  r.check('webEventsCountIsWorlds', loadedCount === types.length, r.out.events);
  r.check('webEventTypesAreWorlds', JSON.stringify(shown) === JSON.stringify(expected), { shown, expected });
  const [firstId, lastId] = [events[0]?.eventId, events.at(-1)?.eventId];
  r.check('webEventIdsShown', text.includes(firstId) && text.includes(lastId), { firstId, lastId });
  r.check('webEventStepNames', names.length > 0 && JSON.stringify(shownNames) === JSON.stringify(expectedNames), { shownNames, expectedNames });
}

/** The demo run's Streams tab (its one stream), then the doomed run's page (failed). */
async function webStreamsAndDoomed(page, base, run, r) {
  await page.getByRole('tab', { name: 'Streams' }).click();
  await page.getByText(streamIdOf(run.runId)).first().waitFor({ timeout: 30_000 });
  await r.shot('streams');
  r.check('webStreamListed', true, null);
  await page.goto(`${base}/run/${run.doomedRunId}`, { waitUntil: 'domcontentloaded', timeout: 60_000 });
  await page.getByText(run.doomedRunId).first().waitFor({ timeout: 30_000 });
  await page.getByText('Failed').first().waitFor({ timeout: 30_000 });
  const text = await page.innerText('body');
  await r.shot('doomed');
  r.check('webDoomedPage', /Failed/.test(text) && /\bdoomed\b/.test(text), text.slice(0, 600));
}

/**
 * `workflow web` on the app's data, driven in headless Chromium (a fresh profile each
 * time); on a wait that gives up, the page's screenshot and text are added to the error.
 */
async function webChecks(app, world, run, view, checks, failures) {
  if (!webNode) throw new Error('no Node >= 22.5 for `workflow web` (--web-node or SDK_CLI_WEB_NODE)');
  if (!playwrightDir) throw new Error('no playwright-core (--playwright or SDK_CLI_PLAYWRIGHT)');
  const { chromium } = createRequire(path.join(path.resolve(playwrightDir), 'package.json'))('playwright-core');
  const t0 = now();
  const logs = path.join(app, '.logs');
  const out = { screenshots: [] };
  const server = await startWeb(app, world, path.join(logs, `web-server-${world}.log`));
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), 'sdk-cli-chromium-'));
  let context;
  let page;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: chromiumPath,
      headless: true,
      viewport: { width: 1400, height: 2200 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = context.pages()[0] ?? (await context.newPage());
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e.message ?? e).slice(0, 300)));
    const r = {
      out,
      check: (name, ok, got) => check(checks, failures, name, ok, got),
      shot: async (name) => {
        const file = path.join(logs, `web-${world}-${name}.png`);
        await page.screenshot({ path: file, fullPage: true });
        out.screenshots.push(file);
      },
    };
    await webRunsList(page, server.base, run, r);
    await webRunPage(page, server.base, run, r);
    await webEventsTab(page, run, view, r);
    await webStreamsAndDoomed(page, server.base, run, r);
    out.pageErrors = pageErrors;
  } catch (err) {
    if (page) {
      const file = path.join(logs, `web-${world}-failure.png`);
      await page.screenshot({ path: file, fullPage: true }).catch(() => {});
      const shown = await page.innerText('body').catch(() => '');
      err.message += ` (at ${page.url()}; screenshot ${file}; page text: ${shown.replace(/\s+/g, ' ').slice(0, 600)})`;
    }
    throw err;
  } finally {
    await context?.close().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
    await server.stop();
  }
  out.ms = ms(t0);
  return out;
}

/** webChecks, its failure (a wait that gave up) recorded as the check `web`. */
async function webOrFailure(app, world, run, view, checks, failures) {
  try {
    return await webChecks(app, world, run, view, checks, failures);
  } catch (err) {
    check(checks, failures, 'web', false, String(err?.message ?? err));
    return undefined;
  }
}

/** The summary with its checks, failures, `ok` (no failure, every check true) and time. */
function finished(summary, checks, failures, t0) {
  summary.checks = checks;
  if (Object.keys(failures).length) summary.failures = failures;
  summary.ok = summary.failure === undefined && Object.keys(checks).length > 0 && Object.values(checks).every(Boolean);
  summary.ms = ms(t0);
  return summary;
}

async function lineWorld(line, world) {
  const app = path.join(work, `sdk-${line}`);
  const summary = { line, world, app, ok: false };
  const checks = {};
  const failures = {};
  const t0 = now();
  try {
    const run = runApp(line, world, app);
    Object.assign(summary, { runId: run.runId, doomedRunId: run.doomedRunId, appOk: run.ok, versions: run.versions });
    summary.cliVersion = JSON.parse(readFileSync(path.join(app, 'node_modules', '@workflow', 'cli', 'package.json'), 'utf8')).version;
    const view = worldView(app, world, [run.runId, run.doomedRunId]);
    summary.direct = { runs: view.runs, demoEvents: view.per[run.runId].events.length };
    summary.cli = await cliChecks(app, world, run, view, checks, failures);
    summary.view = view;
    if (web) summary.web = await webOrFailure(app, world, run, view, checks, failures);
  } catch (err) {
    summary.failure = String(err?.message ?? err);
  }
  return finished(summary, checks, failures, t0);
}

/** The line's two worlds side by side: the same steps, event types and order, streams. */
function compare(line, local, runlog) {
  const out = { line, compare: 'local vs runlog', ok: false, checks: {} };
  const failures = {};
  if (!local.cli || !runlog.cli) {
    out.failure = 'a world has no CLI results';
    return out;
  }
  const c = (name, a, b) => check(out.checks, failures, name, JSON.stringify(a) === JSON.stringify(b), { local: a, runlog: b });
  c('sameSteps', local.cli.steps, runlog.cli.steps);
  c('sameEventCount', local.cli.eventCount, runlog.cli.eventCount);
  c('sameEventTypes', [...local.cli.eventTypes].sort(), [...runlog.cli.eventTypes].sort());
  c('sameRunStatuses', local.cli.runs.map((r) => [r.workflow, r.status]).sort(), runlog.cli.runs.map((r) => [r.workflow, r.status]).sort());
  c('sameRunOutput', local.cli.runOutput, runlog.cli.runOutput);
  c('sameHooks', local.cli.hooks.length, runlog.cli.hooks.length);
  c('sameStreams', local.cli.streams.length, runlog.cli.streams.length);
  c('sameStreamRead', local.cli.streamRead, runlog.cli.streamRead);
  c('sameSleeps', local.cli.sleeps.length, runlog.cli.sleeps.length);
  if (local.web && runlog.web) {
    c('sameWebEvents', local.web.events.shown, runlog.web.events.shown);
    c('sameWebStepNames', local.web.events.stepNames, runlog.web.events.stepNames);
  }
  out.eventIds = { local: local.cli.eventIds, runlog: runlog.cli.eventIds };
  c('sameErrorShapes', local.cli.shapes, runlog.cli.shapes);
  if (Object.keys(failures).length) out.failures = failures;
  out.ok = Object.values(out.checks).every(Boolean);
  return out;
}

/**
 * A line and world's summary as results for the compatibility table (scripts/ci-results.mjs):
 * `workflow inspect` (the cli* checks) and, when the web UI was driven, `workflow web` (web*).
 */
function recordLineWorld(s) {
  const base = { source: 'examples/sdk-cli.mjs', line: s.line, world: s.world };
  const rec = (feature, prefix) => {
    const checks = Object.entries(s.checks).filter(([k]) => k.startsWith(prefix));
    const failed = checks.filter(([, v]) => !v).map(([k]) => k);
    const ok = s.failure === undefined && checks.length > 0 && failed.length === 0;
    const detail = s.failure ?? (failed.length ? `failed checks: ${failed.join(', ')}` : `no ${prefix}* checks ran`);
    record({ ...base, feature, ok, ...(!ok && { detail }) });
  };
  rec('workflow inspect', 'cli');
  if (web) rec('workflow web (Chromium)', 'web');
}

/**
 * The shared PostgreSQL case (--postgres): runs made by 3 servers of the multi-server app,
 * inspected from another working directory.
 */
async function postgresCase() {
  const line = '5.0.0-beta.55';
  const app = path.join(work, `sdk-${line}`);
  const summary = { line, world: 'runlog-pg', app, ok: false };
  const checks = {};
  const failures = {};
  const t0 = now();
  try {
    const installed = existsSync(path.join(app, 'node_modules', RUNLOG_PACKAGE_NAME));
    const ms3 = spawnSync(
      process.execPath,
      [path.join(here, 'multi-server.mjs'), '--scenario', 'none', '--servers', '3', '--runs', '1', '--app-dir', app, ...(installed ? ['--no-install'] : []), ...(runlogBin ? ['--runlog-bin', runlogBin] : [])],
      { encoding: 'utf8', env: { ...worldEnv('local'), RUNLOG_PG_URL: pgUrl, RUNLOG_CI_RESULTS: '' }, maxBuffer: 64 << 20 },
    );
    const made = ms3.stdout.trim().split(/\n(?=\{)/).map((t) => JSON.parse(t)).find((o) => o.scenario === 'none');
    if (ms3.status !== 0 || !made?.ok) throw new Error(`examples/multi-server.mjs failed (exit ${ms3.status}): ${(made ? JSON.stringify(made) : ms3.stdout + ms3.stderr).slice(-1500)}`);
    pgStore = made.store;
    const run = { ...made.runList[0], linesMayRepeat: true };
    summary.runs = { runId: run.runId, doomedRunId: run.doomedRunId, servers: made.servers, startedOn: run.startedOn, hookedOn: run.hookedOn, deliveredBy: run.deliveredBy, runsMs: made.runsMs };
    // Two servers wrote the run: one started it, another took its hook. Which servers the
    // queue delivered its messages to is the queue's choice (under load one server took all
    // six once), so that is reported, not checked.
    check(checks, failures, 'runWrittenByTwoServers', Number.isInteger(run.startedOn) && Number.isInteger(run.hookedOn) && run.startedOn !== run.hookedOn && run.deliveredBy >= 1, { startedOn: run.startedOn, hookedOn: run.hookedOn, deliveredBy: run.deliveredBy });
    // Another machine's working directory: the line's packages, nothing of the servers'.
    const inspector = path.join(work, 'pg-inspector');
    rmSync(inspector, { recursive: true, force: true });
    mkdirSync(inspector, { recursive: true });
    writeFileSync(path.join(inspector, 'package.json'), readFileSync(path.join(app, 'package.json')));
    symlinkSync(path.join(app, 'node_modules'), path.join(inspector, 'node_modules'));
    mkdirSync(path.join(inspector, '.logs'));
    summary.inspector = inspector;
    summary.cliVersion = JSON.parse(readFileSync(path.join(app, 'node_modules', '@workflow', 'cli', 'package.json'), 'utf8')).version;
    const view = worldView(inspector, 'runlog-pg', [run.runId, run.doomedRunId]);
    summary.direct = { runs: view.runs, demoEvents: view.per[run.runId].events.length };
    summary.cli = await cliChecks(inspector, 'runlog-pg', run, view, checks, failures);
    if (web) summary.web = await webOrFailure(inspector, 'runlog-pg', run, view, checks, failures);
    check(checks, failures, 'inspectorHoldsNoStore', !existsSync(path.join(inspector, '.workflow-data')), null);
  } catch (err) {
    summary.failure = String(err?.message ?? err);
  }
  return finished(summary, checks, failures, t0);
}

let allOk = true;
mkdirSync(work, { recursive: true });
if (pgUrl) {
  const s = await postgresCase();
  console.log(JSON.stringify(s, null, 2));
  process.exit(s.ok ? 0 : 1);
}
for (const line of lines) {
  const results = {};
  for (const world of WORLDS) {
    const s = await lineWorld(line, world);
    results[world] = s;
    allOk &&= s.ok;
    const { view, ...printed } = s;
    console.log(JSON.stringify(printed, null, 2));
    recordLineWorld(s);
  }
  const cmp = compare(line, results.local, results.runlog);
  allOk &&= cmp.ok;
  console.log(JSON.stringify(cmp, null, 2));
}
process.exit(allOk ? 0 : 1);
