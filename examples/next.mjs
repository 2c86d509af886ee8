#!/usr/bin/env node
// Drives the examples' Next.js app (examples/next-app, on the SDK line locked in
// examples/next-sdk-<line>) end to end on one World and prints a JSON summary per mode, as
// examples/run.mjs does for the Nitro app:
//
//   node examples/next.mjs <line> <local|runlog> [--mode dev|prod|both] [--no-install]
//                          [--keep-data] [--app-dir DIR]
//     line:  5.0.0-beta.55 | 4.8.9   (the directory examples/next-sdk-<line>)
//     world: local  (the line's own @workflow/world-local: WORKFLOW_TARGET_WORLD unset, so
//                    withWorkflow() picks it, its data in .next/workflow-data)
//            runlog (world-runlog and its addon's platform package installed into the app
//                    from tarballs, `npm pack` of packages/world-runlog and of
//                    packages/world-runlog/npm/<platform>, `npm install --no-save`, as a user
//                    installs the published pair; WORKFLOW_TARGET_WORLD=world-runlog, its
//                    data in .workflow-data/runlog)
//
// RUNLOG_NODE_ADDON is removed from every child's environment: the World must find its
// addon itself under Next's bundler. --app-dir builds and runs the app in DIR instead of
// examples/next-sdk-<line> (its package.json and package-lock.json copied in when DIR has
// none), so that several runs can go on at once.
//
// The app's code is copied into the app directory before each install: examples/next-app
// (next.config.ts with withWorkflow(), tsconfig.json, the route handlers app/api/*/route.ts)
// and examples/app/workflows (the same demo.ts the Nitro app runs).
//
// Per mode: the server on a free loopback port (dev: `next dev`; prod: `next build` +
// `next start`), then the run as run.mjs drives it: POST /api/start (`demo` and `doomed`),
// POST /api/hook until the hook takes the payload, GET /api/run until both runs end, GET
// /api/stream (the demo run's stream, read to its close). Checks: the run completed, the
// step retried once, the FatalError caught, the hook's payload, the doomed run failed, three
// stream lines, the World's data directory holding the runs, and (runlog) GET /api/addon:
// a route whose code imports world-runlog/store, so that Next bundles the loader, says the
// addon was found as the platform package. The server's log is in
// <app>/.logs/<world>-<mode>.log. Exit status 0 when every mode passed.
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, cpSync, createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  PLATFORM,
  RUNLOG_PACKAGE,
  RUNLOG_PACKAGE_NAME,
  RUNLOG_PLATFORM_PACKAGE,
  commandRunner,
  errorLines,
  freePort,
  httpClient,
  ms,
  now,
  parseArgs,
  repo,
  sleep,
  until,
} from './lib/harness.mjs';
import { record } from '../scripts/ci-results.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

const LINES = ['5.0.0-beta.55', '4.8.9'];
const WORLDS = ['local', 'runlog'];
/** Where each World keeps its data, relative to the app (withWorkflow() sets the local one). */
const DATA_DIRS = { local: path.join('.next', 'workflow-data'), runlog: path.join('.workflow-data', 'runlog') };

function usage(msg) {
  if (msg) console.error(msg);
  console.error('usage: node examples/next.mjs <line> <local|runlog> [--mode dev|prod|both] [--no-install] [--keep-data] [--app-dir DIR]');
  console.error(`  lines: ${LINES.join(', ')}`);
  process.exit(2);
}

const args = process.argv.slice(2);
const VALUE_FLAGS = ['--mode', '--app-dir'];
const { positional, values } = parseArgs(args, VALUE_FLAGS);
const value = (flag) => values(flag).at(-1);
const [line, world] = positional;
if (!LINES.includes(line)) usage(`unknown line: ${line ?? '(none)'}`);
if (!WORLDS.includes(world)) usage(`unknown world: ${world ?? '(none)'}`);
const modeArg = value('--mode') ?? 'both';
if (!['dev', 'prod', 'both'].includes(modeArg)) usage(`unknown mode: ${modeArg}`);
const modes = modeArg === 'both' ? ['dev', 'prod'] : [modeArg];
const install = !args.includes('--no-install');
const keepData = args.includes('--keep-data');

const lineDir = path.join(here, `next-sdk-${line}`);
const app = value('--app-dir') ? path.resolve(value('--app-dir')) : lineDir;
if (app !== lineDir) {
  mkdirSync(app, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) {
    if (!existsSync(path.join(app, f))) cpSync(path.join(lineDir, f), path.join(app, f));
  }
}
const logs = path.join(app, '.logs');
mkdirSync(logs, { recursive: true });
const APP_CODE = [
  [path.join(here, 'next-app', 'app'), 'app'],
  [path.join(here, 'next-app', 'next.config.ts'), 'next.config.ts'],
  [path.join(here, 'next-app', 'tsconfig.json'), 'tsconfig.json'],
  [path.join(here, 'app', 'workflows'), 'workflows'],
];
for (const [from, to] of APP_CODE) {
  rmSync(path.join(app, to), { recursive: true, force: true });
  cpSync(from, path.join(app, to), { recursive: true });
}
// On runlog, a route that imports world-runlog itself (bundled, unlike the World the SDK loads).
if (world === 'runlog') cpSync(path.join(here, 'next-app', 'runlog-only', 'api'), path.join(app, 'app', 'api'), { recursive: true });

const run = commandRunner(app, 20);
const http = httpClient(60_000);

/** The environment of the build and the server: the World chosen, nothing pointing at the addon. */
function worldEnv() {
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: '1' };
  for (const name of ['WORKFLOW_TARGET_WORLD', 'RUNLOG_NODE_ADDON', 'WORKFLOW_LOCAL_DATA_DIR', 'WORKFLOW_RUNLOG_DATA_DIR', 'WORKFLOW_RUNLOG_URL']) {
    delete env[name];
  }
  if (world === 'runlog') env.WORKFLOW_TARGET_WORLD = RUNLOG_PACKAGE_NAME;
  return env;
}

/** `npm install` of the app's lock, then (runlog) the World's and its platform package's tarballs. */
function installApp() {
  if (!install) return 0;
  const logFile = path.join(logs, `install-${world}.log`);
  rmSync(logFile, { force: true });
  const log = { write: (s) => appendFileSync(logFile, s) };
  const t0 = now();
  run('npm', ['install', '--no-audit', '--no-fund'], log);
  if (world === 'runlog') {
    const addon = path.join(RUNLOG_PLATFORM_PACKAGE, `runlog_node.${PLATFORM}.node`);
    if (!existsSync(addon)) throw new Error(`runlog addon missing: ${addon} (bash crates/runlog-node/build.sh)`);
    const tarballs = [RUNLOG_PACKAGE, RUNLOG_PLATFORM_PACKAGE].map((dir) => {
      const r = spawnSync('npm', ['pack', '--json', '--pack-destination', logs], { cwd: dir, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`npm pack (${dir}) exited ${r.status}: ${r.stderr}`);
      return path.join(logs, JSON.parse(r.stdout)[0].filename);
    });
    run('npm', ['install', '--no-audit', '--no-fund', '--no-save', ...tarballs], log);
  }
  return ms(t0);
}

async function startServer(mode, env, logFile) {
  const port = await freePort();
  // PORT: the local World's queue posts to the app at http://localhost:$PORT.
  const serverEnv = { ...env, PORT: String(port) };
  const out = createWriteStream(logFile, { flags: 'a' });
  await new Promise((r) => out.once('open', r));
  const nextArgs = [mode === 'dev' ? 'dev' : 'start', '--port', String(port), '--hostname', '127.0.0.1'];
  const child = spawn('npx', ['next', ...nextArgs], { cwd: app, env: serverEnv, detached: true, stdio: ['ignore', out, out] });
  let exited = null;
  child.on('exit', (code, signal) => (exited = { code, signal }));
  // The whole process group, and until all of it is gone: npx exits before Next's server
  // processes, which go on writing .next for a while, and the next mode removes .next.
  // `next dev` is killed outright: on SIGTERM its shutdown spawns a detached telemetry
  // flush (even with NEXT_TELEMETRY_DISABLED) outside the group, which loads next.config
  // (withWorkflow) again and writes .next/cache while the next mode's build starts.
  const groupAlive = () => {
    try {
      process.kill(-child.pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const stop = async () => {
    try {
      process.kill(-child.pid, mode === 'dev' ? 'SIGKILL' : 'SIGTERM');
    } catch {}
    for (let i = 0; i < 100 && groupAlive(); i++) await sleep(100);
    if (groupAlive()) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
      for (let i = 0; i < 50 && groupAlive(); i++) await sleep(100);
    }
  };
  return { base: `http://127.0.0.1:${port}`, stop, exited: () => exited };
}

/** The demo and doomed runs through the app's routes; fills `summary` and `timings`. */
async function exercise(server, mode, summary, timings) {
  const token = `demo-${world}-${mode}-${randomBytes(6).toString('hex')}`;
  const tRun = now();
  summary.phase = 'start';
  // The first request of `next dev` compiles the route (and the workflow bundles): minutes on 2 shared cores.
  const started = await http(server.base, 'POST', '/api/start', { name: 'example', token }, 240_000);
  if (started.status !== 200) throw new Error(`/api/start ${started.status}: ${started.bytes.toString().slice(0, 600)}`);
  const { runId, doomedRunId } = started.json();
  Object.assign(summary, { runId, doomedRunId });
  timings.startMs = ms(tRun);

  summary.phase = 'hook';
  await until('the hook to take the payload', 120_000, async () => {
    const r = await http(server.base, 'POST', '/api/hook', { token, data: { approved: true, note: 'from-outside' } }, 120_000);
    return r.status === 200 ? true : undefined;
  });
  timings.hookResumedMs = ms(tRun);

  summary.phase = 'completion';
  const terminal = (s) => ['completed', 'failed', 'cancelled'].includes(s);
  const final = await until('the demo run to end', 120_000, async () => {
    const r = await http(server.base, 'GET', `/api/run?id=${runId}`);
    const v = r.status === 200 ? r.json() : undefined;
    summary.lastStatus = v?.status ?? `HTTP ${r.status}`;
    return v && terminal(v.status) ? v : undefined;
  });
  timings.runMs = ms(tRun);
  summary.status = final.status;
  summary.returnValue = final.returnValue ?? null;
  if (final.error) summary.error = final.error;
  const doomedFinal = await until('the doomed run to end', 60_000, async () => {
    const r = await http(server.base, 'GET', `/api/run?id=${doomedRunId}`);
    const v = r.status === 200 ? r.json() : undefined;
    return v && terminal(v.status) ? v : undefined;
  });
  summary.doomedStatus = doomedFinal.status;
  summary.doomedError = doomedFinal.error ?? null;
  delete summary.lastStatus;

  summary.phase = 'stream';
  const tStream = now();
  const stream = await http(server.base, 'GET', `/api/stream?id=${runId}`, undefined, 60_000).catch((err) => {
    throw new Error(`reading the stream: ${err.name === 'TimeoutError' ? 'no close within 60 s' : err.message}`);
  });
  timings.streamMs = ms(tStream);
  if (stream.status !== 200) throw new Error(`/api/stream ${stream.status}: ${stream.bytes.toString().slice(0, 600)}`);
  summary.streamBytes = stream.bytes.length;
  summary.streamSha256 = createHash('sha256').update(stream.bytes).digest('hex');
  summary.streamLines = stream.bytes.toString('utf8').split('\n').filter(Boolean);
  delete summary.phase;
}

/**
 * GET /api/addon: the addon as world-runlog found it when Next bundled the package into a
 * route (`{ addonPath, addonSource, version }`), or `{ status, body }` when the route failed.
 */
async function bundledAddon(server) {
  const r = await http(server.base, 'GET', '/api/addon', undefined, 120_000);
  if (r.status !== 200) return { status: r.status, body: r.bytes.toString('utf8').slice(0, 400) };
  return r.json();
}

/** The addon file of the platform package installed in the app (where the loader must find it). */
function installedAddonPath() {
  return path.join(app, 'node_modules', '@runlog', `world-runlog-${PLATFORM}`, `runlog_node.${PLATFORM}.node`);
}

/** The World's data directory and the number of entries in it (runs, for runlog). */
function dataDirEntries() {
  const dir = path.join(app, DATA_DIRS[world]);
  try {
    return { dir, entries: readdirSync(dir).length };
  } catch {
    return { dir, entries: 0 };
  }
}

async function runMode(mode, installMs) {
  const logFile = path.join(logs, `${world}-${mode}.log`);
  rmSync(logFile, { force: true });
  const log = createWriteStream(logFile, { flags: 'a' });
  const summary = { app: 'next', line, world, mode, ok: false };
  if (world === 'runlog') summary.installedFrom = 'tarball';
  const timings = { installMs };
  const t0 = now();
  let server;
  try {
    const env = worldEnv();
    summary.versions = installedVersions();
    if (!keepData) rmSync(path.join(app, DATA_DIRS[world]), { recursive: true, force: true });
    if (mode === 'prod') {
      rmSync(path.join(app, '.next'), { recursive: true, force: true });
      timings.buildMs = run('npx', ['next', 'build'], log, env);
    }
    await new Promise((r) => log.end(r));
    const tServer = now();
    server = await startServer(mode, env, logFile);
    await until(
      'the server to answer /api/health',
      240_000,
      async () => {
        const r = await http(server.base, 'GET', '/api/health', undefined, 120_000);
        return r.status === 200 ? true : undefined;
      },
      500,
      () => (server.exited() ? `the server exited ${JSON.stringify(server.exited())}` : undefined),
    );
    timings.serverReadyMs = ms(tServer);
    await exercise(server, mode, summary, timings);
    if (world === 'runlog') summary.bundledAddon = await bundledAddon(server);
    const data = dataDirEntries();
    summary.dataDir = path.relative(app, data.dir);
    const rv = summary.returnValue ?? {};
    summary.checks = {
      completed: summary.status === 'completed',
      retriedOnce: rv.attempt === 2,
      fatalCaught: typeof rv.fatal === 'string' && rv.fatal.includes('refused: caught by the workflow'),
      hookPayload: rv.approval?.note === 'from-outside',
      doomedFailed: summary.doomedStatus === 'failed' && /refused: uncaught/.test(summary.doomedError ?? ''),
      threeStreamLines: summary.streamLines.length === 3,
      worldDataWritten: data.entries > 0,
      ...(world === 'runlog' && {
        bundledImportFindsAddon:
          summary.bundledAddon?.addonSource === 'package' && summary.bundledAddon?.addonPath === installedAddonPath(),
      }),
    };
    summary.ok = Object.values(summary.checks).every(Boolean);
  } catch (err) {
    summary.failure = String(err?.message ?? err);
  } finally {
    if (!log.closed) await new Promise((r) => log.end(r));
    await server?.stop();
    timings.totalMs = ms(t0);
    summary.timings = timings;
    if (existsSync(logFile)) summary.serverErrors = errorLines(logFile);
    summary.log = path.relative(repo, logFile);
  }
  return summary;
}

function installedVersions() {
  const v = (name) => {
    try {
      return JSON.parse(readFileSync(path.join(app, 'node_modules', name, 'package.json'), 'utf8')).version;
    } catch {
      return null;
    }
  };
  return {
    next: v('next'),
    workflow: v('workflow'),
    next_integration: v('@workflow/next'),
    core: v('@workflow/core'),
    world: v('@workflow/world'),
    worldLocal: v('@workflow/world-local'),
    ...(world === 'runlog' && { worldRunlog: v(RUNLOG_PACKAGE_NAME), addonPackage: v(`@runlog/world-runlog-${PLATFORM}`) }),
  };
}

/** One mode's summary as a result for the compatibility table (scripts/ci-results.mjs). */
function recordSummary(mode, summary) {
  const failed = Object.entries(summary.checks ?? {}).filter(([, v]) => !v).map(([k]) => k);
  const detail = summary.failure ?? (failed.length ? `failed checks: ${failed.join(', ')}` : undefined);
  record({
    source: 'examples/next.mjs',
    line,
    world,
    feature: 'Next.js (next dev; next build + next start)',
    mode,
    ...(world === 'runlog' && { install: 'tarball' }),
    ok: summary.ok,
    ...(!summary.ok && { detail }),
  });
}

let installMs;
try {
  installMs = installApp();
} catch (err) {
  console.log(JSON.stringify({ app: 'next', line, world, ok: false, failure: `install: ${err.message}` }, null, 2));
  for (const mode of modes) recordSummary(mode, { ok: false, failure: `install: ${err.message}` });
  process.exit(1);
}
let allOk = true;
for (const [i, mode] of modes.entries()) {
  const summary = await runMode(mode, i === 0 ? installMs : 0);
  allOk &&= summary.ok;
  console.log(JSON.stringify(summary, null, 2));
  recordSummary(mode, summary);
}
process.exit(allOk ? 0 : 1);
