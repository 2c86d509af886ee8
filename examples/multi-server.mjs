// Several app servers on one PostgreSQL (issue 23): the example app (examples/app) on the
// 5.0.0-beta.55 line with the runlog World, its store and its queue in one PostgreSQL
// database, started as `--servers` servers (separate processes, ports and working
// directories). `--runs` demo runs (steps writing a stream, sleep, a hook resumed from
// outside, a retried step, a caught FatalError) plus as many `doomed` runs (they fail) are
// started round-robin over the servers and their hooks resumed through any server; mid-way
// (once a third of the demo runs completed) the scenario strikes:
//   kill        SIGKILL to one server's process group (it is not restarted), at a moment
//               its queue workers hold jobs (then every one of them must be redelivered)
//   pg-restart  `pg_ctl restart` of the PostgreSQL server (needs RUNLOG_PG_DIR)
//   none        nothing (the same runs and checks undisturbed: a timing of N servers)
// Then every run must end: each demo run completed with its result, each doomed run failed,
// no run with two terminal events, no step with two step_completed, every demo stream whole
// (read through another server than the one that started it), and `runlog verify` clean on
// the store. It prints one JSON summary per scenario (runs, completed, redelivered messages,
// concurrent replays seen: two deliveries of one run's workflow message overlapping in time,
// on two servers or one, from the queue's delivery trace, WORKFLOW_RUNLOG_QUEUE_TRACE).
//
//   node examples/multi-server.mjs [--scenario kill|pg-restart|both|none] [--runs 100] [--servers 3]
//                                  [--sequential] [--app-dir DIR] [--no-install] [--runlog-bin PATH]
//                                  [--line 5.0.0-beta.55|5.0.0-beta.35] [--world runlog|postgres]
//
// --line: the SDK line of the app (examples/sdk-<line>). --world postgres runs the same app
// on the SDK's own PostgreSQL World (@workflow/world-postgres, the version published for the
// line: POSTGRES_WORLD; only 5.0.0-beta.35 has one), each scenario in a fresh database set up
// by that package's own setup (dist/cli.js); the checks are the same but `runlog verify`
// and the replay counts (runlog's queue trace) are runlog's only. The summary has `runsPerS`
// (the runs over the time from the first start to the last end, polled each second) and the
// steps' latency (`stepLatencyMs`: from a step's step_created to its step_completed event,
// p50/p95 over the demo runs). examples/pg-throughput.mjs runs it for 1, 2 and 3 servers on
// both Worlds and prints the table.
//
// --sequential sets WORKFLOW_SEQUENTIAL_REPLAYS=1 on the servers: one run's workflow messages
// are then delivered one at a time across the servers (src/queue-postgres.js), and no two
// replays of one run may overlap (checked). Without it two servers may replay one run at
// once (counted): the log stays correct (the checks on events and `runlog verify` are the
// same). Either way a step body may run twice, as steps are at least once (two replays at
// once, or a step in flight on the killed server run again), so a stream may hold a line
// twice and the retried step may report attempt 3: a stream must hold only whole expected
// lines, every one of them, ending with the last; the runs with a repeated line or a later
// attempt are counted.
//
// PostgreSQL: RUNLOG_PG_URL (and RUNLOG_PG_DIR for pg-restart), else a throwaway server of
// .ci/pg-server.sh started and stopped here. Each scenario gets fresh schemas. The app is
// installed into --app-dir (default /tmp/runlog-multi-server/sdk-5.0.0-beta.55: never
// examples/sdk-*) and built once (nitro build); each server runs in a directory of its own
// (its package.json, a link to the app's node_modules and .output). Exit 0 when every
// scenario passed.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { RUNLOG_PACKAGE, RUNLOG_PACKAGE_NAME, commandRunner, freePort, httpClient, ms, now, parseArgs, repo, sleep, until } from './lib/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The published @workflow/world-postgres that installs with each line's runtime. */
const POSTGRES_WORLD = { '5.0.0-beta.35': '5.0.0-beta.27' };
const TERMINAL = ['completed', 'failed', 'cancelled'];
const TERMINAL_EVENTS = ['run_completed', 'run_failed', 'run_cancelled'];
const NOTE = 'from-outside';

const { has, values } = parseArgs(process.argv.slice(2), ['--scenario', '--runs', '--servers', '--app-dir', '--runlog-bin', '--line', '--world']);
const LINE = values('--line').at(-1) ?? '5.0.0-beta.55';
if (!existsSync(path.join(here, `sdk-${LINE}`, 'package.json'))) throw new Error(`--line: no examples/sdk-${LINE}`);
const WORLD = values('--world').at(-1) ?? 'runlog';
if (!['runlog', 'postgres'].includes(WORLD)) throw new Error(`--world: runlog or postgres, not ${WORLD}`);
if (WORLD === 'postgres' && !POSTGRES_WORLD[LINE]) throw new Error(`--world postgres: no published @workflow/world-postgres for the ${LINE} line (${Object.keys(POSTGRES_WORLD).join(', ')})`);
const WORLD_PACKAGE = WORLD === 'runlog' ? RUNLOG_PACKAGE_NAME : '@workflow/world-postgres';
const scenarioArg = values('--scenario').at(-1) ?? 'both';
const scenarios = scenarioArg === 'both' ? ['kill', 'pg-restart'] : [scenarioArg];
if (!scenarios.every((s) => ['kill', 'pg-restart', 'none'].includes(s))) throw new Error(`--scenario: kill, pg-restart, both or none, not ${scenarioArg}`);
const runCount = Number(values('--runs').at(-1) ?? 100);
const serverCount = Number(values('--servers').at(-1) ?? 3);
if (scenarios.includes('kill') && serverCount < 2) throw new Error('kill needs --servers 2 or more');
const app = path.resolve(values('--app-dir').at(-1) ?? `/tmp/runlog-multi-server/sdk-${LINE}`);
const install = !has('--no-install');
const sequential = has('--sequential');
const runlogBin = values('--runlog-bin').at(-1) ?? process.env.RUNLOG_BIN ?? path.join(repo, 'target', 'release', 'runlog');
const http = httpClient(30_000);

function prepareApp() {
  mkdirSync(app, { recursive: true });
  const lineDir = path.join(here, `sdk-${LINE}`);
  for (const f of ['package.json', 'package-lock.json']) cpSync(path.join(lineDir, f), path.join(app, f));
  for (const entry of ['workflows', 'server', 'nitro.config.ts']) {
    rmSync(path.join(app, entry), { recursive: true, force: true });
    cpSync(path.join(here, 'app', entry), path.join(app, entry), { recursive: true });
  }
  const logs = path.join(app, '.logs');
  mkdirSync(logs, { recursive: true });
  const log = createWriteStream(path.join(logs, 'install-build.log'), { flags: 'a' });
  const run = commandRunner(app, 15);
  const t0 = now();
  if (install) {
    run('npm', ['install', '--no-audit', '--no-fund'], log);
    const extra = POSTGRES_WORLD[LINE] ? [`@workflow/world-postgres@${POSTGRES_WORLD[LINE]}`] : [];
    run('npm', ['install', '--no-audit', '--no-fund', '--no-save', RUNLOG_PACKAGE, ...extra], log);
  }
  // The World's package may be bundled by the build: one build per World, kept where the
  // workflow builder does not look for sources (under node_modules) and modules still resolve.
  rmSync(path.join(app, '.output'), { recursive: true, force: true });
  rmSync(buildDir(), { recursive: true, force: true });
  run('npx', ['nitro', 'build'], log, { ...process.env, WORKFLOW_TARGET_WORLD: WORLD_PACKAGE });
  cpSync(path.join(app, '.output'), buildDir(), { recursive: true });
  log.end();
  return ms(t0);
}

/** The app's build for this World. */
const buildDir = () => path.join(app, 'node_modules', '.runlog-builds', WORLD);

/** A server's own working directory: its package.json, links to the app's node_modules and build. */
function serverDir(i) {
  const dir = path.join(app, 'servers', `s${i}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  cpSync(path.join(app, 'package.json'), path.join(dir, 'package.json'));
  symlinkSync(path.join(app, 'node_modules'), path.join(dir, 'node_modules'));
  symlinkSync(buildDir(), path.join(dir, '.output'));
  return dir;
}

// Servers are process-group leaders (detached): this script's exit, however it comes, takes them.
const children = new Set();
process.on('exit', () => {
  for (const pid of children) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
  }
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

async function startServer(i, env) {
  const dir = serverDir(i);
  const port = await freePort();
  const logFile = path.join(app, '.logs', `server-${i}.log`);
  const out = createWriteStream(logFile, { flags: 'w' });
  await new Promise((r) => out.once('open', r));
  const child = spawn('node', ['.output/server/index.mjs'], {
    cwd: dir,
    // PGAPPNAME names the server's PostgreSQL sessions (its queue's liveness locks among them).
    env: { ...env, PORT: String(port), HOST: '127.0.0.1', NITRO_PORT: String(port), NITRO_HOST: '127.0.0.1', PGAPPNAME: appName(i) },
    detached: true,
    stdio: ['ignore', out, out],
  });
  const server = { i, base: `http://127.0.0.1:${port}`, logFile, alive: true, exited: null, pid: child.pid };
  children.add(child.pid);
  child.on('exit', (code, signal) => {
    children.delete(child.pid);
    server.exited = { code, signal };
    server.alive = false;
  });
  server.kill = async (signal = 'SIGKILL') => {
    try {
      process.kill(-child.pid, signal);
    } catch {}
    for (let k = 0; k < 100 && !server.exited; k++) await sleep(50);
    server.alive = false;
  };
  return server;
}

const appName = (i) => `runlog-multi-server-${process.pid}-${i}`;

/**
 * The queue rows locked by server `s`'s graphile workers: a row's `locked_by` is a worker
 * whose liveness advisory lock (src/queue-postgres.js, key text `runlog-queue:<schema>:<id>`)
 * is held by a session of that server (PGAPPNAME). A bigint advisory key shows in pg_locks
 * as classid (high half) and objid (low half) with objsubid 1.
 */
function jobsLockedBy(s, pgUrl, queueSchema) {
  const lit = (t) => `'${String(t).replaceAll("'", "''")}'`;
  const q = `select count(*) from "${queueSchema.replaceAll('"', '""')}"._private_jobs j
    cross join lateral (select hashtextextended('runlog-queue:' || ${lit(queueSchema)} || ':' || j.locked_by, 0) as k) h
    where j.locked_by is not null and exists (
      select 1 from pg_locks l join pg_stat_activity a on a.pid = l.pid
      where l.locktype = 'advisory' and l.granted and l.objsubid = 1 and a.application_name = ${lit(appName(s.i))}
        and l.classid::bigint = ((h.k >> 32) & 4294967295) and l.objid::bigint = (h.k & 4294967295))`;
  const r = spawnSync('psql', [pgUrl, '-XAtq', '-c', q], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`psql (jobs locked by server ${s.i}): ${r.stderr}`);
  return Number(r.stdout.trim());
}

/**
 * SIGKILL to server `s` at a moment it holds queue jobs, so that the kill tests their
 * redelivery: the server is stopped (SIGSTOP: it cannot finish or take a job), its locked
 * rows counted, and killed when there are some, else continued and tried again (60 s at
 * most, then killed anyway). Returns the rows it held (undefined without runlog's queue).
 */
async function strikeHoldingJobs(s, pgUrl, queueSchema) {
  if (WORLD !== 'runlog') return void (await s.kill('SIGKILL'));
  const deadline = Date.now() + 60_000;
  for (;;) {
    process.kill(-s.pid, 'SIGSTOP');
    let held;
    try {
      held = jobsLockedBy(s, pgUrl, queueSchema);
    } catch (err) {
      process.kill(-s.pid, 'SIGCONT');
      throw err;
    }
    if (held > 0 || Date.now() > deadline) {
      await s.kill('SIGKILL');
      return held;
    }
    process.kill(-s.pid, 'SIGCONT');
    await sleep(100);
  }
}

function pgServer() {
  if (process.env.RUNLOG_PG_URL) return { url: process.env.RUNLOG_PG_URL, dir: process.env.RUNLOG_PG_DIR, ours: false };
  const r = spawnSync('bash', [path.join(repo, '.ci', 'pg-server.sh'), 'start'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`.ci/pg-server.sh start: ${r.stderr}`);
  const url = /RUNLOG_PG_URL='([^']+)'/.exec(r.stdout)[1];
  const dir = /RUNLOG_PG_DIR='([^']+)'/.exec(r.stdout)[1];
  return { url, dir, ours: true };
}

/** `pg_ctl restart` of the throwaway server (as its owner, like .ci/pg-server.sh). */
function restartPostgres(dir) {
  const pgBin = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
  // -l: the new postmaster logs to the file, not to a pipe of ours (spawnSync would wait on it).
  const args = ['--reuid=postgres', '--regid=postgres', '--init-groups', `${pgBin}/pg_ctl`, '-D', `${dir}/data`, '-l', `${dir}/server.log`, '-m', 'fast', '-w', 'restart'];
  const r = spawnSync('setpriv', args, { stdio: 'ignore', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`pg_ctl restart exited ${r.status ?? r.error}`);
}

const live = (servers) => servers.filter((s) => s.alive);
let rr = 0;
/** A live server other than `not` when there is one, round-robin. */
function pick(servers, not) {
  const l = live(servers);
  const others = l.filter((s) => s !== not);
  const from = others.length > 0 ? others : l;
  return from[rr++ % from.length];
}

/** Runs `f` over `items`, `width` at a time. */
async function pool(items, width, f) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const k = next++;
        await f(items[k], k);
      }
    }),
  );
}

/** HTTP through any live server: retried on another one when a server is down or answers 5xx. */
async function anyServer(servers, method, route, body, timeoutMs = 30_000, not) {
  let last;
  for (let k = 0; k < 20; k++) {
    const s = pick(servers, not);
    try {
      const r = await http(s.base, method, route, body, timeoutMs);
      if (r.status < 500) return { ...r, server: s };
      last = new Error(`${method} ${route} on server ${s.i}: HTTP ${r.status} ${r.bytes.toString().slice(0, 200)}`);
    } catch (err) {
      last = err;
    }
    await sleep(500);
  }
  throw last;
}

/** The demo run's stream lines (the retried step's attempt: 2, or more when a step body ran twice). */
function expectedLines(name, attempt = 2) {
  return [`prepare ${name}`, `flaky ${name}:prepared attempt ${attempt}`, `finish ${name}:prepared:flaky approved=true note=${NOTE}`];
}

/** `exact` (the three lines), `repeated` (only whole expected lines, each present, one twice or more) or `broken`. */
function streamShape(name, text, attempt) {
  if (text === `${expectedLines(name, attempt).join('\n')}\n`) return 'exact';
  if (!text.endsWith('\n')) return 'broken';
  const lines = text.slice(0, -1).split('\n');
  const flaky = new RegExp(`^flaky ${name}:prepared attempt \\d+$`);
  const [prepare, , finish] = expectedLines(name, attempt);
  const known = (l) => l === prepare || l === finish || flaky.test(l);
  const has = (p) => lines.some((l) => (typeof p === 'string' ? l === p : p.test(l)));
  return lines.every(known) && has(prepare) && has(flaky) && has(finish) && lines.at(-1) === finish ? 'repeated' : 'broken';
}

/**
 * Overlapping replays of one run in the merged trace (deliveries of its workflow messages,
 * not of step messages): `{ total, acrossServers, deliveries }`. A delivery cut short by the
 * kill is not in the trace (written when it ends).
 */
function concurrentReplays(traceFile) {
  if (!existsSync(traceFile)) return { total: 0, acrossServers: 0, deliveries: 0 };
  const byRun = new Map();
  const lines = readFileSync(traceFile, 'utf8').split('\n').filter(Boolean);
  for (const line of lines) {
    const d = JSON.parse(line);
    // A replay: a delivery of the run's workflow message (a step's own message carries stepId).
    if (!d.runId || d.stepId !== undefined) continue;
    if (!byRun.has(d.runId)) byRun.set(d.runId, []);
    byRun.get(d.runId).push(d);
  }
  let total = 0;
  let acrossServers = 0;
  for (const ds of byRun.values()) {
    ds.sort((a, b) => a.startMs - b.startMs);
    for (let a = 0; a < ds.length; a++) {
      for (let b = a + 1; b < ds.length && ds[b].startMs < ds[a].endMs; b++) {
        total++;
        if (ds[b].pid !== ds[a].pid) acrossServers++;
      }
    }
  }
  return { total, acrossServers, deliveries: lines.length };
}

/** `url` with its database replaced by `db` (the other parameters kept). */
function withDatabase(url, db) {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/**
 * A fresh database for the SDK's PostgreSQL World (its tables have fixed schema names),
 * set up by that package's own setup (dist/cli.js: its migrations, graphile's schema).
 */
function postgresWorldDatabase(pg, tag) {
  const db = `msw_${tag}`;
  const r = spawnSync('psql', [pg.url, '-q', '-c', `create database ${db}`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`create database ${db}: ${r.stderr}`);
  const url = withDatabase(pg.url, db);
  const setup = path.join(app, 'node_modules', '@workflow', 'world-postgres', 'bin', 'setup.js');
  const s = spawnSync('node', [setup], { cwd: app, encoding: 'utf8', env: { ...process.env, WORKFLOW_POSTGRES_URL: url } });
  if (s.status !== 0) throw new Error(`world-postgres setup: ${s.stdout}${s.stderr}`);
  return url;
}

/** p50 and p95 (ms) of `xs`, rounded; undefined when empty. */
function percentiles(xs) {
  if (xs.length === 0) return undefined;
  const a = [...xs].sort((x, y) => x - y);
  const at = (q) => a[Math.min(a.length - 1, Math.floor(q * a.length))];
  return { p50: Math.round(at(0.5)), p95: Math.round(at(0.95)), steps: a.length };
}

/** How many server processes delivered messages of run `runId` (from the queue's trace; runlog's only). */
function deliveringServers(traceFile, runId) {
  if (!existsSync(traceFile)) return undefined;
  const pids = new Set();
  for (const line of readFileSync(traceFile, 'utf8').split('\n').filter(Boolean)) {
    const d = JSON.parse(line);
    if (d.runId === runId) pids.add(d.pid);
  }
  return pids.size;
}

async function scenario(kind, pg) {
  const tag = `${kind.replace('-', '')}_${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const storeUrl = `${pg.url}${pg.url.includes('?') ? '&' : '?'}schema=ms_${tag}`;
  const traceFile = path.join(app, '.logs', `trace-${tag}.jsonl`);
  const env =
    WORLD === 'runlog'
      ? {
          ...process.env,
          WORKFLOW_TARGET_WORLD: RUNLOG_PACKAGE_NAME,
          WORKFLOW_RUNLOG_URL: storeUrl,
          WORKFLOW_RUNLOG_QUEUE_SCHEMA: `msq_${tag}`,
          WORKFLOW_RUNLOG_QUEUE_TRACE: traceFile,
          WORKFLOW_SEQUENTIAL_REPLAYS: sequential ? '1' : '0',
        }
      : {
          ...process.env,
          WORKFLOW_TARGET_WORLD: WORLD_PACKAGE,
          WORKFLOW_POSTGRES_URL: postgresWorldDatabase(pg, tag),
          WORKFLOW_SEQUENTIAL_REPLAYS: sequential ? '1' : '0',
        };
  delete env.RUNLOG_PG_URL;
  const summary = { scenario: kind, line: LINE, world: WORLD === 'runlog' ? 'world-runlog' : `@workflow/world-postgres@${POSTGRES_WORLD[LINE]}`, servers: serverCount, sequentialReplays: sequential, ok: false };
  const t0 = now();
  const servers = [];
  try {
    for (let i = 0; i < serverCount; i++) servers.push(await startServer(i, env));
    await Promise.all(
      servers.map((s) =>
        until(`server ${s.i} to answer /api/health`, 120_000, async () => ((await http(s.base, 'GET', '/api/health', undefined, 5_000)).status === 200 ? true : undefined), 300, () =>
          s.exited ? `server ${s.i} exited ${JSON.stringify(s.exited)}` : undefined,
        ),
      ),
    );
    summary.serversReadyMs = ms(t0);

    // Half the runs are started (round-robin over the servers) and their hooks resumed from
    // outside through any server, then the scenario strikes while those are in flight, then
    // the other half is started on the servers still up.
    const runs = Array.from({ length: runCount }, (_, k) => ({ name: `n${k}`, token: `tok-${tag}-${k}` }));
    const hooks = [];
    const hookFailures = [];
    let startRetries = 0;
    const startOne = async (r) => {
      for (let attempt = 1; ; attempt++) {
        const s = pick(servers);
        try {
          const res = await http(s.base, 'POST', '/api/start', { name: r.name, token: r.token });
          if (res.status === 200) {
            Object.assign(r, res.json(), { startedOn: s });
            break;
          }
          if (attempt >= 10) throw new Error(`/api/start on server ${s.i}: HTTP ${res.status} ${res.bytes.toString().slice(0, 300)}`);
        } catch (err) {
          if (attempt >= 10) throw err;
        }
        startRetries++;
        await sleep(1000);
      }
      hooks.push(
        until(`the hook of ${r.name}`, 300_000, async () => {
          // Through a server other than the one that started the run (when one is up), so
          // that every run is written by two servers whatever the queue delivers where.
          const res = await anyServer(servers, 'POST', '/api/hook', { token: r.token, data: { approved: true, note: NOTE } }, 30_000, r.startedOn);
          if (res.status !== 200) return undefined;
          r.hookedOn = res.server;
          return true;
        }, 400).catch((err) => hookFailures.push(`${r.name}: ${err.message}`)),
      );
    };
    const status = new Map();
    const completedDemo = () => runs.filter((r) => status.get(r.runId)?.status === 'completed').length;
    const tRuns = now();
    const half = Math.ceil(runCount / 2);
    await pool(runs.slice(0, half), 6, startOne);
    summary.struckAfterMs = ms(tRuns);
    if (kind === 'none') {
      // Undisturbed.
    } else if (kind === 'kill') {
      const victim = servers[servers.length - 1];
      const jobsHeld = await strikeHoldingJobs(victim, pg.url, env.WORKFLOW_RUNLOG_QUEUE_SCHEMA);
      summary.killed = { server: victim.i, exited: victim.exited, ...(jobsHeld !== undefined && { jobsHeld }) };
    } else {
      const tr = now();
      restartPostgres(pg.dir);
      summary.pgRestartMs = ms(tr);
    }
    await pool(runs.slice(half), 6, startOne);
    summary.startRetries = startRetries;
    summary.allStartedMs = ms(tRuns);

    const all = runs.flatMap((r) => [r.runId, r.doomedRunId]);
    const poll = async () => {
      const open = all.filter((id) => !TERMINAL.includes(status.get(id)?.status));
      await pool(open, 6, async (id) => {
        try {
          const res = await anyServer(servers, 'GET', `/api/run?id=${id}`, undefined, 10_000);
          if (res.status === 200) status.set(id, res.json());
        } catch {
          // A server down mid-request: the next round asks again.
        }
      });
      return open.length;
    };
    const deadline = Date.now() + 300_000;
    for (;;) {
      const open = await poll();
      if (open === 0) break;
      if (Date.now() > deadline) {
        summary.openRuns = all.filter((id) => !TERMINAL.includes(status.get(id)?.status)).slice(0, 10);
        throw new Error(`runs still open after 300 s: ${open} (demo completed: ${completedDemo()})`);
      }
      await sleep(1000);
    }
    await Promise.all(hooks);
    summary.runsMs = ms(tRuns);

    // The checks, through the live servers.
    const problems = [];
    let completed = 0;
    let failed = 0;
    let streamsWhole = 0;
    let doubleTerminal = 0;
    let doubleStep = 0;
    let streamsWithARepeatedLine = 0;
    let extraAttempts = 0;
    let wrongReturn = 0;
    const stepLatencies = [];
    await pool(runs, 6, async (r) => {
      const v = status.get(r.runId);
      const d = status.get(r.doomedRunId);
      if (v?.status === 'completed') completed++;
      else problems.push(`${r.name}: demo ${v?.status} ${v?.error ?? ''}`);
      if (d?.status === 'failed') failed++;
      else problems.push(`${r.name}: doomed ${d?.status}`);
      const rv = v?.returnValue ?? {};
      const attemptOk = rv.attempt >= 2;
      if (!attemptOk || rv.approval?.note !== NOTE || rv.finished !== `${r.name}:prepared:flaky:finished`) {
        problems.push(`${r.name}: return value ${JSON.stringify(rv)}`);
        wrongReturn++;
      }
      if (rv.attempt > 2) extraAttempts++;
      for (const id of [r.runId, r.doomedRunId]) {
        const ev = (await anyServer(servers, 'GET', `/api/events?id=${id}`)).json().events;
        if (ev.filter((e) => TERMINAL_EVENTS.includes(e.eventType)).length !== 1) doubleTerminal++;
        const steps = new Map();
        for (const e of ev) if (e.eventType === 'step_completed') steps.set(e.correlationId, (steps.get(e.correlationId) ?? 0) + 1);
        if ([...steps.values()].some((n) => n > 1)) doubleStep++;
        if (id !== r.runId) continue;
        const created = new Map();
        for (const e of ev) {
          const t = Date.parse(e.createdAt);
          if (e.eventType === 'step_created' && !created.has(e.correlationId)) created.set(e.correlationId, t);
          if (e.eventType === 'step_completed' && created.has(e.correlationId)) stepLatencies.push(t - created.get(e.correlationId));
        }
      }
      const s = await anyServer(servers, 'GET', `/api/stream?id=${r.runId}`, undefined, 20_000, r.startedOn);
      const text = s.bytes.toString('utf8');
      r.streamLines = text.split('\n').slice(0, -1);
      const shape = streamShape(r.name, text, rv.attempt);
      if (shape === 'broken') problems.push(`${r.name}: stream ${JSON.stringify(text)}`);
      else streamsWhole++;
      if (shape === 'repeated') streamsWithARepeatedLine++;
    });
    const logs = servers.map((s) => (existsSync(s.logFile) ? readFileSync(s.logFile, 'utf8') : ''));
    const released = logs.reduce((n, text) => n + [...text.matchAll(/\[world-runlog queue\] released (\d+) job/g)].reduce((m, x) => m + Number(x[1]), 0), 0);
    const workerRestarts = logs.reduce((n, text) => n + [...text.matchAll(/\[world-runlog queue\] a worker died/g)].length, 0);
    const replays = concurrentReplays(traceFile);
    const verify = WORLD === 'runlog' ? spawnSync(runlogBin, ['--store', storeUrl, 'verify'], { encoding: 'utf8' }) : undefined;
    Object.assign(summary, {
      runs: runCount * 2,
      demoRuns: runCount,
      completed,
      doomedFailed: failed,
      runsWithTwoTerminalEvents: doubleTerminal,
      runsWithAStepCompletedTwice: doubleStep,
      streamsWhole,
      streamsWithARepeatedLine,
      runsWhoseRetriedStepReportsAttemptAbove2: extraAttempts,
      // From runlog's queue: its log lines and its delivery trace.
      ...(WORLD === 'runlog' && {
        redeliveredMessages: released,
        workerRestarts,
        deliveries: replays.deliveries,
        concurrentReplays: replays.total,
        concurrentReplaysAcrossServers: replays.acrossServers,
      }),
      runsPerS: Math.round(((runCount * 2) / (summary.runsMs / 1000)) * 100) / 100,
      stepLatencyMs: percentiles(stepLatencies.filter(Number.isFinite)),
      // Where the runs are, for a reader on another machine (examples/sdk-cli.mjs --postgres);
      // the schemas are kept. Small runs list their ids and streams too.
      store: WORLD === 'runlog' ? { WORKFLOW_RUNLOG_URL: storeUrl, WORKFLOW_RUNLOG_QUEUE_SCHEMA: env.WORKFLOW_RUNLOG_QUEUE_SCHEMA } : { WORKFLOW_POSTGRES_URL: env.WORKFLOW_POSTGRES_URL },
      ...(runCount <= 10 && {
        runList: runs.map((r) => ({ name: r.name, runId: r.runId, doomedRunId: r.doomedRunId, streamLines: r.streamLines, startedOn: r.startedOn?.i, hookedOn: r.hookedOn?.i, deliveredBy: deliveringServers(traceFile, r.runId) })),
      }),
      ...(verify && { verify: { status: verify.status, output: `${verify.stdout}${verify.stderr}`.trim().split('\n').slice(-3) } }),
      problems: [...hookFailures, ...problems].slice(0, 10),
    });
    summary.checks = {
      everyHookResumed: hookFailures.length === 0,
      everyDemoRunCompleted: completed === runCount,
      everyDoomedRunFailed: failed === runCount,
      returnValuesRight: wrongReturn === 0,
      noRunWithTwoTerminalEvents: doubleTerminal === 0,
      noStepCompletedTwice: doubleStep === 0,
      streamsWhole: streamsWhole === runCount,
      ...(verify && { verifyClean: verify.status === 0 }),
      // The released-jobs log line is runlog's queue's.
      // Every job the killed server held (counted with it stopped) is released, and no more.
      ...(kind === 'kill' && WORLD === 'runlog' && { redeliveredAfterKill: summary.killed.jobsHeld > 0 && released === summary.killed.jobsHeld }),
      ...(sequential && { noConcurrentReplay: replays.total === 0 }),
    };
    summary.ok = Object.values(summary.checks).every(Boolean);
  } catch (err) {
    summary.failure = String(err?.stack ?? err);
  } finally {
    for (const s of servers) await s.kill('SIGTERM');
    for (const s of servers) if (!s.exited) await s.kill('SIGKILL');
    summary.totalMs = ms(t0);
  }
  return summary;
}

const pg = pgServer();
let ok = true;
try {
  if (scenarios.includes('pg-restart') && !pg.dir) throw new Error('pg-restart needs RUNLOG_PG_DIR (the .ci/pg-server.sh server) to restart');
  if (!existsSync(runlogBin)) throw new Error(`${runlogBin} missing (cargo build --release -p runlog-cli, or --runlog-bin)`);
  const buildMs = prepareApp();
  console.log(JSON.stringify({ app, line: LINE, buildMs }));
  for (const kind of scenarios) {
    const summary = await scenario(kind, pg);
    console.log(JSON.stringify(summary, null, 2));
    ok &&= summary.ok;
  }
} finally {
  if (pg.ours) spawnSync('bash', [path.join(repo, '.ci', 'pg-server.sh'), 'stop', pg.dir]);
}
process.exit(ok ? 0 : 1);
