// Starts the built app (`node .output/server/index.mjs`) on a free loopback port with a
// fresh data directory, for one World, and stops it (its process group) again.
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { freePort, sleep } from '../../../examples/lib/harness.mjs';

export const appDir = path.dirname(fileURLToPath(import.meta.url));

/**
 * The data directory is `keptDataDir` when given (left for the caller to check), else a
 * fresh temporary one removed by stop().
 * world: 'local' (the line's own @workflow/world-local: WORKFLOW_TARGET_WORLD unset) or
 * 'runlog' (WORKFLOW_TARGET_WORLD=world-runlog, the package installed into this app).
 * RUNLOG_NODE_ADDON is never passed on: the World finds its addon itself.
 */
export async function startApp(world, logFile, keptDataDir) {
  const dataDir = keptDataDir ?? mkdtempSync(path.join(tmpdir(), `conformance-beta55-${world}-`));
  const env = { ...process.env };
  delete env.WORKFLOW_TARGET_WORLD;
  delete env.RUNLOG_NODE_ADDON;
  delete env.WORKFLOW_RUNLOG_URL;
  delete env.WORKFLOW_SEALED_LOG;
  delete env.WORKFLOW_BATCH_TRANSITIONS;
  env.WORKFLOW_LOCAL_DATA_DIR = path.join(dataDir, 'local');
  env.WORKFLOW_RUNLOG_DATA_DIR = path.join(dataDir, 'runlog');
  if (world === 'runlog') env.WORKFLOW_TARGET_WORLD = 'world-runlog';
  else if (world !== 'local') throw new Error(`unknown world ${world} (local | runlog)`);
  const port = await freePort();
  Object.assign(env, { PORT: String(port), HOST: '127.0.0.1', NITRO_PORT: String(port), NITRO_HOST: '127.0.0.1' });
  mkdirSync(path.dirname(logFile), { recursive: true });
  const out = createWriteStream(logFile);
  await new Promise((r) => out.once('open', r));
  const child = spawn('node', ['.output/server/index.mjs'], { cwd: appDir, env, detached: true, stdio: ['ignore', out, out] });
  let exited = null;
  child.on('exit', (code, signal) => (exited = { code, signal }));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) throw new Error(`the app exited ${JSON.stringify(exited)} before answering (log: ${logFile})`);
    try {
      const r = await fetch(`${base}/api/health`, { signal: AbortSignal.timeout(2_000) });
      if (r.ok && (await r.json()).ok === true) break;
    } catch {}
    if (Date.now() > deadline) throw new Error(`the app did not answer /api/health within 60 s (log: ${logFile})`);
    await sleep(200);
  }
  const stop = async () => {
    if (!exited) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {}
      for (let i = 0; i < 50 && !exited; i++) await sleep(100);
      if (!exited) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {}
      }
    }
    if (!keptDataDir) rmSync(dataDir, { recursive: true, force: true });
  };
  return { base, dataDir, stop };
}
