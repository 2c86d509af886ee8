// What start() does about active runs it cannot recover. The SDK's `reenqueueActiveRuns`
// lists the pending and running runs through `runs.list` and re-enqueues each; a run whose
// log cannot be read to its end is listed by runlog with `storageError` (its readable part
// as the run, crates/runlog-world `StorageFault`), under every status its unreadable part
// could still have. Re-enqueuing such a run would only fail again at its first read (its
// writes are refused), so it is left out of the listing the SDK sees and reported instead:
// a warning per run naming it and its fault, and `world.runlog.recovery` after start().

/**
 * `runs` (the World's storage `runs`) whose `list` leaves out runs with `storageError` and
 * records them in `unrecovered` (a Map runId → `{ runId, code, message, readableSeq }`).
 */
export function recoverableRuns(runs, unrecovered) {
  return {
    ...runs,
    async list(params) {
      const page = await runs.list(params);
      const data = [];
      for (const run of page.data) {
        if (run.storageError === undefined) {
          data.push(run);
          continue;
        }
        const { code, message, readableSeq } = run.storageError;
        unrecovered.set(run.runId, { runId: run.runId, code, message, readableSeq });
      }
      return { ...page, data };
    },
  };
}

/**
 * Re-enqueues the active runs with `reenqueue` (the line's `reenqueueActiveRuns`, called as
 * `reenqueue(runs, enqueue, label)`), and reports every active run it could not recover:
 * one `console.warn` each, and the returned `{ unrecovered: [...] }` (by run id).
 */
export async function recoverActiveRuns(runs, enqueue, reenqueue, label) {
  const unrecovered = new Map();
  await reenqueue(recoverableRuns(runs, unrecovered), enqueue, label);
  const report = { unrecovered: [...unrecovered.values()].sort((a, b) => (a.runId < b.runId ? -1 : 1)) };
  for (const r of report.unrecovered) {
    console.warn(
      `[${label}] run ${r.runId} not recovered: its log cannot be read past seq ${r.readableSeq} ` +
        `(${r.code}: ${r.message}); \`runlog verify ${r.runId}\` shows the damage`,
    );
  }
  return report;
}
