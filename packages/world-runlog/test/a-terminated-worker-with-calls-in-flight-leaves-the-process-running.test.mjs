// Promises are settled through one threadsafe function per Node environment (src/raw.rs in
// crates/runlog-node, `Pending`), whose finalizer tells the addon's threads that the
// environment is gone. With napi-rs's per-promise functions, terminating a Worker thread
// while its calls were in flight aborted the whole process (exit 134: a call into a function
// Node had freed). Each case runs in a child process, so that an abort fails the test
// instead of ending the runner.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const index = JSON.stringify(path.join(pkg, 'index.js'));

function child(source, timeout = 60_000) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8', timeout });
  return { status: r.status, signal: r.signal, out: r.stdout.trim().split('\n').filter(Boolean), err: r.stderr };
}

// A Worker that opens a World, makes a run of 1,500 events, says ready, then reads it in a
// loop of 50 calls at a time until it is terminated.
const workerBody = `
import { parentPort } from 'node:worker_threads';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
const { createWorld } = await import(${index});
const w = createWorld({ dataDir: mkdtempSync(path.join(tmpdir(), 'worker-term-')), recoverActiveRuns: false });
const { run } = await w.events.create(null, { eventType: 'run_created', specVersion: 5, eventData: { deploymentId: 'd', workflowName: 'wf', input: new Uint8Array([1]) } });
await Promise.all([...Array(1500)].map((_, i) => w.events.create(run.runId, { eventType: 'step_created', correlationId: 's' + i, specVersion: 5, eventData: { stepName: 's', input: new Uint8Array([i & 255]) } })));
parentPort.postMessage('ready');
for (let round = 0; ; round++) {
  const calls = [];
  for (let k = 0; k < 50; k++) calls.push(w.runs.get(run.runId).catch(() => {}));
  await Promise.all(calls);
}
`;

describe('a Worker terminated with calls in flight', () => {
  test('leaves the process running, and the addon serves it after', () => {
    const r = child(`
      import { Worker } from 'node:worker_threads';
      import { mkdtempSync } from 'node:fs';
      import { tmpdir } from 'node:os';
      import path from 'node:path';
      for (let i = 0; i < 10; i++) {
        const worker = new Worker(${JSON.stringify(workerBody)}, { eval: true, type: 'module' });
        await new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
        await new Promise((resolve) => setTimeout(resolve, 20 + 7 * i));
        console.log('terminated', i, await worker.terminate());
      }
      const { createWorld } = await import(${index});
      const w = createWorld({ dataDir: mkdtempSync(path.join(tmpdir(), 'worker-term-main-')), recoverActiveRuns: false });
      const { run } = await w.events.create(null, { eventType: 'run_created', specVersion: 5, eventData: { deploymentId: 'd', workflowName: 'wf', input: new Uint8Array([1]) } });
      console.log('main calls', (await Promise.all([...Array(20)].map(() => w.runs.get(run.runId)))).length);
      await w.close();
      console.log('main alive');
    `);
    expect([r.status, r.signal, r.err.includes('Aborted')]).toStrictEqual([0, null, false]);
    expect(r.out).toStrictEqual([...Array.from({ length: 10 }, (_, i) => `terminated ${i} 1`), 'main calls 20', 'main alive']);
  });

  test('a pending call keeps the process alive, and none pending lets it end without close()', () => {
    // A wait of 300 ms, awaited at the top level: the event loop must stay alive for it.
    const waited = child(`
      import { mkdtempSync } from 'node:fs';
      import { tmpdir } from 'node:os';
      import path from 'node:path';
      const { Store } = await import(${index});
      const store = await Store.open(path.join(mkdtempSync(path.join(tmpdir(), 'alive-')), 'store'));
      await store.createRun('r');
      const t0 = Date.now();
      await store.wait('r', 0, 300);
      console.log('waited', Date.now() - t0 >= 250);
    `);
    expect([waited.status, waited.out]).toStrictEqual([0, ['waited true']]);
    // No call pending and the store left open: the process ends by itself.
    const ended = child(
      `
      import { mkdtempSync } from 'node:fs';
      import { tmpdir } from 'node:os';
      import path from 'node:path';
      const { Store } = await import(${index});
      const store = await Store.open(path.join(mkdtempSync(path.join(tmpdir(), 'ends-')), 'store'));
      await store.createRun('r');
      await store.appendFacts('r', [{ kind: 'k', payload: Buffer.from('{}') }]);
      console.log('done');
    `,
      20_000,
    );
    expect([ended.status, ended.signal, ended.out]).toStrictEqual([0, null, ['done']]);
  });
});
