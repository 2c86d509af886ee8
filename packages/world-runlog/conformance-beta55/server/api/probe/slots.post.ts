// POST → drives the World's events API directly on a run no workflow executes (spec 6/7
// writes as the runtime makes them) and answers what each write returned:
//   1 run_created, 2 run_started, 3 step_created A (eventCount 2: nothing skipped),
//   4 step_created B with the stale eventCount 1 (bumped past slots 2-3, which it reports),
//   5 step_started A with sinceCursor at slot 2 (the delta: slots 3-5), 6 run_cancelled.
import { getWorld } from "workflow/runtime";
import { defineEventHandler } from "nitro/h3";
import { describeError, json } from "../../lib/registry";

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A ULID: 10 characters of millisecond time, 16 random, Crockford base32. */
function ulid(): string {
  let t = Date.now();
  let time = "";
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const rand = crypto.getRandomValues(new Uint8Array(16));
  return time + Array.from(rand, (b) => CROCKFORD[b % 32]).join("");
}

type Slim = { eventId: string; eventType: string; correlationId: string | null };
const slim = (events: any[] | undefined): Slim[] | null =>
  events ? events.map((e) => ({ eventId: e.eventId, eventType: e.eventType, correlationId: e.correlationId ?? null })) : null;
const report = (r: any) => ({
  eventId: r.event?.eventId ?? null,
  eventType: r.event?.eventType ?? null,
  events: slim(r.events),
  cursor: r.cursor ?? null,
  hasMore: r.hasMore ?? null,
});

export default defineEventHandler(async () => {
  const world = await getWorld();
  const runId = `wrun_${ulid()}`;
  const stepA = `step_${ulid()}`;
  const stepB = `step_${ulid()}`;
  const input = new Uint8Array([1, 2, 3]);
  const steps: Record<string, unknown> = {};
  try {
    steps.runCreated = report(
      await world.events.create(runId, {
        eventType: "run_created",
        specVersion: 7,
        eventData: { deploymentId: "dpl_probe", workflowName: "probe", input },
      } as any),
    );
    steps.runStarted = report(await world.events.create(runId, { eventType: "run_started", specVersion: 7 } as any));
    steps.createdA = report(
      await world.events.create(
        runId,
        { eventType: "step_created", specVersion: 7, correlationId: stepA, eventData: { stepName: "probeA", input } } as any,
        { eventCount: 2 } as any,
      ),
    );
    steps.createdBStale = report(
      await world.events.create(
        runId,
        { eventType: "step_created", specVersion: 7, correlationId: stepB, eventData: { stepName: "probeB", input } } as any,
        { eventCount: 1 } as any,
      ),
    );
    const head = await world.events.list({ runId, pagination: { sortOrder: "asc", limit: 2 } });
    steps.cursorAfter = slim(head.data);
    steps.startedA = report(
      await world.events.create(
        runId,
        { eventType: "step_started", specVersion: 7, correlationId: stepA, eventData: { attempt: 1 } } as any,
        { sinceCursor: head.cursor } as any,
      ),
    );
    steps.cancelled = report(await world.events.create(runId, { eventType: "run_cancelled", specVersion: 7 } as any));
    const run = await world.runs.get(runId);
    const all = await world.events.list({ runId, pagination: { sortOrder: "asc", limit: 100 } });
    return { runId, stepA, stepB, steps, status: run.status, specVersion: run.specVersion, log: slim(all.data) };
  } catch (err) {
    return json({ runId, steps, error: describeError(err) }, 500);
  }
});
