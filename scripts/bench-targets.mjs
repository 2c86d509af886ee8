#!/usr/bin/env node
// Issue 24's table from one sitting of scripts/bench-targets.sh: reads the raw outputs in OUT
// and prints one markdown row per figure, each run's value in the order run, the target and
// whether every run, some or none met it. Nothing here measures; a missing file is an error.
//
//   node scripts/bench-targets.mjs OUT
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const out = process.argv[2];
if (!out) {
  console.error('usage: node scripts/bench-targets.mjs OUT (the directory scripts/bench-targets.sh wrote)');
  process.exit(2);
}

const files = (re) => readdirSync(out).filter((f) => re.test(f)).sort().map((f) => path.join(out, f));
const jsonLines = (f) => readFileSync(f, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const must = (xs, what) => {
  if (xs.length === 0 || xs.some((x) => x === undefined || Number.isNaN(x))) throw new Error(`${out}: no value for ${what}`);
  return xs;
};

const peers = files(/^peers-\d+\.json$/).map((f) => JSON.parse(readFileSync(f, 'utf8')));
const peer = (workload, metric, against) =>
  must(peers.map((p) => p.rows.find((r) => r.workload === workload && r.metric === metric)?.runlog_advantage?.[against]), `${workload} ${metric} vs ${against}`);
/** Peer `a`'s value over peer `b`'s in a row where higher is better (a ceiling's ratio). */
const between = (workload, metric, a, b) =>
  must(peers.map((p) => { const v = p.rows.find((r) => r.workload === workload && r.metric === metric)?.values; return v?.[a] / v?.[b]; }), `${workload} ${metric} ${a} ÷ ${b}`);
const randomLines = files(/^random-\d+\.jsonl$/).map((f) => jsonLines(f).find((l) => l.bench === 'random_appends'));
const random = must(randomLines.map((l) => l?.random_vs_warm), 'random_appends');
const rawRandom = must(randomLines.map((l) => l?.raw_random_vs_warm), 'random_appends raw');
const randomVsRaw = must(randomLines.map((l) => l?.random_vs_raw_random), 'random_appends vs raw');
const worlds = files(/^world-\d+\.json$/).map((f) => JSON.parse(readFileSync(f, 'utf8')));
const world = (k) => must(worlds.map((w) => w.ratios?.[k]), `World ${k}`);
const scale = jsonLines(path.join(out, 'scale.jsonl'));
const disk = jsonLines(path.join(out, 'disk.jsonl'));
const one = (xs, what) => {
  if (!xs) throw new Error(`${out}: no value for ${what}`);
  return xs;
};
const listing = (shape) => one(scale.find((l) => l.bench === 'runs_listing' && l.cli === 'now' && l.shape === shape), `runs_listing ${shape}`);
const rss = (shape) => one(scale.find((l) => l.bench === 'rss_per_open_run' && l.shape === shape), `rss_per_open_run ${shape}`).per_run_kib;
const first = one(scale.find((l) => l.bench === 'fresh_first_op'), 'fresh_first_op');
const bytes = (shape) => one(disk.find((l) => l.bench === 'disk_bytes' && l.shape === shape), `disk_bytes ${shape}`);

const fmt = (x, d = 2) => (x >= 100 ? x.toFixed(0) : x.toFixed(d));
const verdict = (xs, ok) => {
  if (ok === CEILING) return 'a peer, no target';
  const n = xs.filter(ok).length;
  return n === xs.length ? 'met' : n === 0 ? '**not met**' : `met in ${n} of ${xs.length}`;
};
/** A row that names a bound (a peer's ceiling), with no target of its own. */
const CEILING = () => true;
const rows = [];
const row = (figure, shape, xs, unit, target, ok) =>
  rows.push(`| ${figure} | ${shape} | ${xs.map((x) => fmt(x) + unit).join(', ')} | ${target} | ${verdict(xs, ok)} |`);

row('W1, 1 durable writer, vs `raw-pre`', '1 run, one corpus event (~404 B) per append', peer('w1 facts 1 writer', 'events/s', 'raw-pre'), '×', '≥ 0.9×', (x) => x >= 0.9);
row('W3, 64 runs × 1 writer, vs `raw`', '64 runs, one writer thread each', peer('w3 64 runs × 1 writer', 'events/s', 'raw'), '×', '≥ 0.9×', (x) => x >= 0.9);
row('W3 vs `raw-pre` (64 files written into preallocated space, as W1\'s peer)', 'the same', peer('w3 64 runs × 1 writer', 'events/s', 'raw-pre'), '×', '(the device with preallocated files)', CEILING);
row('W3, CPU per event (process, user + system): `raw` ÷ runlog', 'the same', between('w3 64 runs × 1 writer', 'cpu us/event', 'raw', 'runlog'), '×', '(what W3 tends to when the CPU is short)', CEILING);
row('W5 full read, owned (`read`), vs SQLite', '1 run × 10,000 corpus events in one-event batches', peer('w5 read 10k-event run', 'full reads/s', 'sqlite-mutex'), '×', '≥ 5×', (x) => x >= 5);
row('the raw reader handing out owned events (kind `String`, payload view, pages of 1,024), vs SQLite owned', 'the same events as raw frames in one file', between('w5 read 10k-event run', 'full reads/s', 'raw', 'sqlite-mutex'), '×', 'ceiling of the 5× above', CEILING);
row('W5 full read, borrowed (`read_each`), vs SQLite', 'the same', peer('w5 read 10k-event run, borrowed', 'full reads/s', 'sqlite-mutex'), '×', '≥ 10×', (x) => x >= 10);
row('the raw reader checking frames in place, vs SQLite borrowed', 'the same events as raw frames in one file', between('w5 read 10k-event run, borrowed', 'full reads/s', 'raw', 'sqlite-mutex'), '×', 'ceiling of the 10× above', CEILING);
const l1 = listing('1000 runs x 1 event');
const l1k = listing('1000 runs x 1000 events');
const l1m = listing('1 run x 1000000 events');
row('`runlog runs --json`, 1,000 runs: 1M events in all ÷ 1k in all', `${fmt(l1.median_ms, 1)} ms → ${fmt(l1k.median_ms, 1)} ms`, [l1k.median_ms / l1.median_ms], '×', '≤ 1.5×', (x) => x <= 1.5);
row('`runlog runs --json` on one 1M-event run, wall', '1 run × 1,000,000 keyed facts, 1,000 per batch', [l1m.median_ms], ' ms', '≤ 10 ms', (x) => x <= 10);
row('the same, peak RSS', 'the same', [l1m.max_rss_mib], ' MiB', '≤ 20 MiB', (x) => x <= 20);
row('fresh `Store`, first read of 10 events at seq 500,000', 'the same', [first.read_10_us / 1000], ' ms', '≤ 2 ms', (x) => x <= 2);
row('fresh `Store`, first append (one keyed fact)', 'the same', [first.append_1_us / 1000], ' ms', '≤ 2 ms', (x) => x <= 2);
const small = rss('1000 runs x 1000 events');
const big = rss('1 run x 1000000 events');
row('memory per open run (live heap + resident pages of its maps), 1M-event run ÷ 1k-event runs', `${fmt(small, 1)} KiB → ${fmt(big, 1)} KiB`, [big / small], '×', 'independent of length (≤ 1.5×)', (x) => x <= 1.5);
row('random appends ÷ warm appends', '1,000 runs × 1,000 events, `open_runs_max` 256', random, '×', '≤ 1.5×', (x) => x <= 1.5);
row('the device alone: a durable write to a random one of 1,000 files ÷ to one file', '1,000 files of 8 KiB, synced beforehand', rawRandom, '×', 'ceiling of the row above', CEILING);
row('random appends ÷ the device\'s random durable write', 'the same runs and files', randomVsRaw, '×', '(what reopening a run costs)', CEILING);
for (const shape of ['batch1000', 'batch1000-key', 'single', 'single-1']) {
  const b = bytes(shape);
  // `single` commits from 8 threads: the appends of one group commit share a batch.
  const per = b.events_per_group > 1 ? `, ${fmt(b.events_per_group)} events per group` : '';
  row(`bytes per event, frame + index (total ${fmt(b.total)})`, `\`${shape}\`, 17-byte payload${per}`, [b.frame + b.index], ' B', '≤ 49 B', (x) => x <= 49);
}
row('World `events.create`, 1 sequential writer, 1 run, vs world-local', "the package's bench, 200 `step_created`", world('createSequentialOneRun'), '×', '≥ 10×', (x) => x >= 10);
row('World `events.create`, 1 sequential writer per run, 8 runs', 'the same', world('createSequentialEightRuns'), '×', '≥ 20×', (x) => x >= 20);
// The device floor over world-local, from the same runs (bench.mjs `floor`): no durable World can go past it.
row('the device floor (write + fdatasync, no World), 1 thread, vs world-local', 'a preallocated file, 160 B per write', world('ceilingSequentialOneRun'), '×', 'ceiling of the 10× above', CEILING);
row('the same, 8 threads at once (a file each)', 'the same', world('ceilingSequentialEightRuns'), '×', 'ceiling of the 20× above', CEILING);
row('the device floor plus a one-event listing\'s round trip per write, 1 thread, vs world-local', 'the same', world('boundSequentialOneRun'), '×', 'ceiling of the 10× above', CEILING);
row('the same, 8 threads at once', 'the same', world('boundSequentialEightRuns'), '×', 'ceiling of the 20× above', CEILING);
row('World `events.list` of a 900-event run, one call', 'a store holding only that run', world('listAloneOneCall'), '×', '≥ 10×', (x) => x >= 10);
row('the same, no page kept (`RUNLOG_NODE_PAGE_CACHE_BYTES=0`: each page as at its first listing)', 'the same', world('listAloneUnkeptOneCall'), '×', '(the row above, first listings)', CEILING);
row('the JavaScript floor (the 900 events built from one parsed text), vs world-local', 'the same events', world('ceilingListAloneOneCall'), '×', 'ceiling of the 10× above', CEILING);
row('the JavaScript floor plus a one-event listing\'s round trip, vs world-local', 'the same', world('boundListAloneOneCall'), '×', 'ceiling of the 10× above', CEILING);

const sitting = readFileSync(path.join(out, 'sitting.txt'), 'utf8').trim().split('\n');
console.log(`Sitting: ${sitting[0]} … ${sitting.at(-1)}\n`);
console.log('| figure | store shape | each run | target | verdict |');
console.log('|---|---|---|---|---|');
for (const r of rows) console.log(r);
