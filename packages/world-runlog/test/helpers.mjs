import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(prefix = 'world-runlog-') {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The rejection of `promise` (fails if it resolves). */
export async function rejection(promise) {
  try {
    const value = await promise;
    throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
  } catch (err) {
    return err;
  }
}

/** `n` facts of kind `k` with small JSON payloads. */
export function facts(n, kind = 'step_completed') {
  return Array.from({ length: n }, (_, i) => ({ kind, payload: Buffer.from(JSON.stringify({ i })) }));
}
