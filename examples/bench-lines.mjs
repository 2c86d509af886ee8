#!/usr/bin/env node
// Per SDK line, runlog beside the line's own local World, measured in one run: the example
// app's timings (examples/run.mjs summaries, production build) and World-level throughput
// through the line's `@workflow/world` shape (packages/world-runlog/scripts/bench.mjs --app).
// Prints one JSON object; BENCHMARKS.md "Per SDK line" is written from it.
//
//   node examples/bench-lines.mjs --app-root DIR [--pairs 3] [--lines 4.8.9,5.0.0-beta.35,5.0.0-beta.55]
//                                 [--no-world-bench] [--bench-args "--rounds 3 --reps 11"]
//
// DIR/sdk-<line> must hold the line's app installed by run.mjs (`node examples/run.mjs <line>
// runlog --app-dir DIR/sdk-<line>` once). Per line: `pairs` pairs of prod runs, the worlds
// alternating (local runlog, runlog local, ...), each `run.mjs <line> <world> --mode prod
// --no-install --app-dir DIR/sdk-<line>` on a fresh data directory (every run builds the app:
// the World is bundled into it), then one bench.mjs run (its worlds take turns on every
// figure). Each app figure: median and [min, max] over the pairs; ratio = runlog ÷ local of
// the medians (times: below 1 means runlog is faster). Fails when a run fails its checks.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');
const LINES = ['4.8.9', '5.0.0-beta.35', '5.0.0-beta.55'];
/** The run.mjs timings compared (ms), in the order printed. */
const APP_FIGURES = ['buildMs', 'serverReadyMs', 'hookResumedMs', 'runMs', 'streamMs'];

function options() {
  const a = process.argv.slice(2);
  const value = (flag, dflt) => (a.includes(flag) ? a[a.indexOf(flag) + 1] : dflt);
  const o = {
    appRoot: value('--app-root'),
    pairs: Number(value('--pairs', '3')),
    lines: value('--lines', LINES.join(',')).split(','),
    worldBench: !a.includes('--no-world-bench'),
    benchArgs: value('--bench-args', '').split(' ').filter(Boolean),
  };
  if (!o.appRoot) throw new Error('--app-root DIR is required (DIR/sdk-<line> holds each installed app)');
  for (const line of o.lines) if (!LINES.includes(line)) throw new Error(`unknown line ${line}`);
  if (!(o.pairs >= 1)) throw new Error('--pairs wants a number ≥ 1');
  o.appRoot = path.resolve(o.appRoot);
  return o;
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

function runApp(line, world, app) {
  const r = spawnSync(
    process.execPath,
    [path.join(here, 'run.mjs'), line, world, '--mode', 'prod', '--no-install', '--app-dir', app],
    { cwd: repo, encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  const summary = JSON.parse(r.stdout);
  if (!summary.ok) throw new Error(`${line} ${world}: run.mjs failed: ${summary.failure ?? JSON.stringify(summary.checks)}`);
  return summary.timings;
}

function appFigures(line, app, pairs) {
  const samples = { local: [], runlog: [] };
  for (let i = 0; i < pairs; i++) {
    for (const world of i % 2 ? ['runlog', 'local'] : ['local', 'runlog']) samples[world].push(runApp(line, world, app));
  }
  const out = {};
  for (const key of APP_FIGURES) {
    const fig = {};
    for (const world of ['local', 'runlog']) {
      const xs = samples[world].map((t) => t[key]);
      fig[world] = { median: median(xs), range: [Math.min(...xs), Math.max(...xs)] };
    }
    fig.ratio = round(fig.runlog.median / fig.local.median);
    out[key] = fig;
  }
  return out;
}

function worldBench(app, args) {
  const r = spawnSync(process.execPath, [path.join(repo, 'packages/world-runlog/scripts/bench.mjs'), '--app', app, ...args], {
    cwd: repo,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`bench.mjs --app ${app} exited ${r.status}: ${r.stderr.slice(-600)}`);
  return JSON.parse(r.stdout);
}

const o = options();
const out = { startedAt: new Date().toISOString(), pairs: o.pairs, loadAverageAtStart: loadavg().map((x) => round(x)), lines: {} };
for (const line of o.lines) {
  const app = path.join(o.appRoot, `sdk-${line}`);
  if (!existsSync(path.join(app, 'node_modules', 'world-runlog'))) {
    throw new Error(`${app} has no installed world-runlog: run \`node examples/run.mjs ${line} runlog --app-dir ${app}\` first`);
  }
  const t0 = Date.now();
  out.lines[line] = { app: appFigures(line, app, o.pairs) };
  if (o.worldBench) out.lines[line].world = worldBench(app, o.benchArgs);
  out.lines[line].seconds = Math.round((Date.now() - t0) / 1000);
  out.lines[line].loadAverageAfter = loadavg().map((x) => round(x));
}
out.finishedAt = new Date().toISOString();
console.log(JSON.stringify(out, null, 2));
