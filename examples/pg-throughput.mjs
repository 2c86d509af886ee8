// Throughput of one app on one PostgreSQL with 1, 2 and 3 app servers: runlog's World
// (store and queue in PostgreSQL) side by side with the SDK's own PostgreSQL World
// (@workflow/world-postgres), same app, same line, same server, one sitting (issue 23).
// Each cell is one `examples/multi-server.mjs --scenario none` (its runs and checks, nothing
// struck), the two Worlds alternating at each server count; prints each summary as it comes,
// then a Markdown table (runs/s from the first start to the last end, the steps' latency
// step_created → step_completed p50/p95, whether every check passed) and the load average.
//
//   node examples/pg-throughput.mjs [--runs 100] [--servers 1,2,3] [--line 5.0.0-beta.35]
//                                   [--app-dir DIR] [--no-install] [--runlog-bin PATH]
//
// The line must have a published @workflow/world-postgres (examples/multi-server.mjs,
// POSTGRES_WORLD): 5.0.0-beta.35. PostgreSQL: RUNLOG_PG_URL, else multi-server.mjs starts a
// throwaway one per cell. Not run in CI (about 6 minutes here for --runs 100).
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parseArgs } from './lib/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const { has, values } = parseArgs(process.argv.slice(2), ['--runs', '--servers', '--line', '--app-dir', '--runlog-bin']);
const runs = values('--runs').at(-1) ?? '100';
const serverCounts = (values('--servers').at(-1) ?? '1,2,3').split(',').map(Number);
const line = values('--line').at(-1) ?? '5.0.0-beta.35';
const app = path.resolve(values('--app-dir').at(-1) ?? `/tmp/runlog-pg-throughput/sdk-${line}`);
const worlds = ['runlog', 'postgres'];

const cells = [];
let installed = has('--no-install');
const load = [loadavg()[0]];
for (const servers of serverCounts) {
  for (const world of worlds) {
    const args = [path.join(here, 'multi-server.mjs'), '--scenario', 'none', '--servers', String(servers), '--runs', runs, '--line', line, '--world', world, '--app-dir', app];
    if (installed) args.push('--no-install');
    for (const k of ['--runlog-bin']) if (values(k).length) args.push(k, values(k).at(-1));
    const r = spawnSync(process.execPath, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 });
    installed = true;
    const objs = r.stdout.trim().split(/\n(?=\{)/).map((t) => JSON.parse(t));
    const summary = objs.find((o) => o.scenario === 'none');
    if (!summary) throw new Error(`multi-server.mjs (${world}, ${servers} servers) exited ${r.status} without a summary:\n${r.stdout.slice(-2000)}`);
    console.log(JSON.stringify(summary));
    cells.push(summary);
    load.push(loadavg()[0]);
  }
}

const fmt = (c) => (c ? `${c.runsPerS.toFixed(2)} runs/s, steps p50 ${c.stepLatencyMs?.p50} ms / p95 ${c.stepLatencyMs?.p95} ms${c.ok ? '' : ' (checks FAILED)'}` : '–');
const names = worlds.map((w) => cells.find((c) => c.world.includes(w === 'runlog' ? 'runlog' : 'postgres'))?.world ?? w);
console.log(`\n${Number(runs) * 2} runs (${runs} demo + ${runs} doomed), line ${line}, load average (1 min) ${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)}\n`);
console.log(`| servers | ${names.join(' | ')} | ratio (runs/s) |`);
console.log(`|---|${names.map(() => '---|').join('')}---|`);
for (const n of serverCounts) {
  const [a, b] = worlds.map((w) => cells.find((c) => c.servers === n && (w === 'runlog' ? c.world === 'world-runlog' : c.world !== 'world-runlog')));
  const ratio = a && b ? `${(a.runsPerS / b.runsPerS).toFixed(2)}×` : '–';
  console.log(`| ${n} | ${fmt(a)} | ${fmt(b)} | ${ratio} |`);
}
process.exit(cells.every((c) => c.ok) ? 0 : 1);
