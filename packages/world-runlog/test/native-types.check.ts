// Compiled by `npm run typecheck` (tsc, no emit): the generated declarations (native.d.ts,
// from crates/runlog-node's #[napi] items) type each parameter, not `unknown`. Every
// `@ts-expect-error` below fails the type check if the argument it marks stops being an error
// (a parameter generated as `unknown` again), and the typed lines fail if a type is wrong.
import { Store, type RunlogNativeWorld, type StreamRead, type EventPageWire, threadPoolStats } from 'world-runlog/store';

export async function typedParameters(): Promise<number> {
  const store: Store = await Store.open('/tmp/x.runlog', { lockTimeoutMs: 10 });
  // @ts-expect-error the run id is a string
  await store.createRun(42);
  // @ts-expect-error an unknown option
  await Store.open('/tmp/x.runlog', { lockTimeout: 10 });
  // @ts-expect-error events are NewEvent objects
  await store.appendFacts('wrun_1', ['step_completed']);
  // @ts-expect-error expectedSeq is a number
  await store.appendDecisions('wrun_1', '3', []);
  // @ts-expect-error made by Store.open*, not with new (the addon throws: no constructor)
  void new Store();
  const w: RunlogNativeWorld = store.world();
  // @ts-expect-error a chunk is bytes
  await w.streamsWrite('wrun_1', 's', 7);
  // @ts-expect-error a run id is a string
  await w.runsGet(5);
  const read: StreamRead = await w.streamsRead('wrun_1', 's', -1, 10);
  const page: EventPageWire = await w.eventsList({ runId: 'wrun_1' });
  const [text, , cursor, hasMore] = page;
  const stats = threadPoolStats();
  const outcomes = await w.createEvents([[null, { eventType: 'run_created' }]]);
  const codes = outcomes.map((o) => (typeof o === 'string' ? o : o.code));
  return read.chunks.length + text.length + (cursor ?? '').length + Number(hasMore) + stats.io.threads + codes.length;
}
