// What every driver of an example app needs, in one place: examples/run.mjs (Nitro),
// examples/next.mjs (Next.js), examples/sdk-cli.mjs (the SDK's CLI and web UI) and
// packages/world-runlog/conformance-beta55/lib-server.mjs (the newest line's suite).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const now = () => performance.now();
/** Milliseconds since `t0` (a `now()`), rounded. */
export const ms = (t0) => Math.round(now() - t0);

/**
 * A runner of commands in `cwd`: `run(cmd, args, log, env)` appends the command and its
 * output to `log` (anything with `write(string)`), returns its milliseconds, and throws with
 * the last `tailLines` lines of its output when it exits non-zero.
 */
export function commandRunner(cwd, tailLines = 15) {
  return (cmd, cmdArgs, log, env = process.env) => {
    const t0 = now();
    const r = spawnSync(cmd, cmdArgs, { cwd, env, encoding: 'utf8', maxBuffer: 64 << 20 });
    log.write(`$ ${cmd} ${cmdArgs.join(' ')}\n${r.stdout ?? ''}${r.stderr ?? ''}\n`);
    if (r.status !== 0) {
      const tail = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-tailLines).join('\n');
      throw new Error(`${cmd} ${cmdArgs.join(' ')} exited ${r.status}:\n${tail}`);
    }
    return ms(t0);
  };
}

/** A TCP port free on the loopback interface right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * An HTTP client whose requests time out after `defaultTimeoutMs` unless given their own:
 * `http(base, method, route, body?, timeoutMs?)` → `{ status, bytes, json() }`; a body is
 * sent as JSON.
 */
export function httpClient(defaultTimeoutMs) {
  return async (base, method, route, body, timeoutMs = defaultTimeoutMs) => {
    const res = await fetch(`${base}${route}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    return { status: res.status, bytes, json: () => JSON.parse(bytes.toString('utf8')) };
  };
}

/**
 * Polls `f` until it returns a value other than undefined, or throws after `timeoutMs`;
 * `abort()` returning a string ends the wait at once with that reason.
 */
export async function until(what, timeoutMs, f, everyMs = 250, abort = () => undefined) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    const reason = abort();
    if (reason) throw new Error(`gave up waiting for ${what}: ${reason}`);
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message ?? last}` : ''}`);
    }
    await sleep(everyMs);
  }
}

/** Distinct lines of a server log that look like errors, less the ones the demo app causes on purpose. */
export function errorLines(logFile) {
  // The retried step's first attempt, the FatalError of `refuse` (caught in `demo`, ending
  // `doomed`) and the stack lines of their log records.
  const expected = [
    /transient failure on the first attempt/,
    /refuse|FatalError|USER_ERROR|Error while running workflow|errorStack|stepName:/,
    /^\s*'?\s+at /,
  ];
  const seen = new Set();
  for (const l of readFileSync(logFile, 'utf8').split('\n')) {
    if (!/error|not a function|cannot|failed|refus|ERR_/i.test(l)) continue;
    if (expected.some((re) => re.test(l))) continue;
    const t = l.trim().slice(0, 400);
    if (t) seen.add(t);
    if (seen.size >= 12) break;
  }
  return [...seen];
}

/** The repository's root, the World package's directory and npm name. */
export const repo = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
export const RUNLOG_PACKAGE = path.join(repo, 'packages', 'world-runlog');
export const RUNLOG_PACKAGE_NAME = 'world-runlog';
/** The addon's platform package (napi-rs names, as packages/world-runlog/src/native.js has them). */
export const PLATFORM =
  process.platform === 'linux'
    ? `linux-${process.arch}-${process.report.getReport().header.glibcVersionRuntime ? 'gnu' : 'musl'}`
    : process.platform === 'win32'
      ? `win32-${process.arch}-msvc`
      : `${process.platform}-${process.arch}`;
export const RUNLOG_PLATFORM_PACKAGE = path.join(RUNLOG_PACKAGE, 'npm', PLATFORM);

/**
 * A driver's command line: `positional` (what is neither a flag nor the value of one of
 * `valueFlags`), `values(flag)` (every value given to a value flag, in order) and
 * `has(flag)`.
 */
export function parseArgs(argv, valueFlags) {
  const positional = argv.filter((a, i) => !a.startsWith('--') && !valueFlags.includes(argv[i - 1]));
  const values = (flag) => argv.flatMap((a, i) => (a === flag && i + 1 < argv.length ? [argv[i + 1]] : []));
  return { positional, values, has: (flag) => argv.includes(flag) };
}
