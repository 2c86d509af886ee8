// GET ?id=<runId> → {events: [{eventType, correlationId, createdAt}]}, the run's whole event log in
// order, read through the World (`events.list`, following cursors).
import { getWorld } from "workflow/runtime";
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(async ({ req }) => {
  const runId = new URL(req.url).searchParams.get("id")!;
  const world = await getWorld();
  const events: { eventType: string; correlationId?: string; createdAt?: Date }[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await world.events.list({ runId, resolveData: "none", pagination: { limit: 1000, cursor, sortOrder: "asc" } });
    for (const e of page.data) events.push({ eventType: e.eventType, correlationId: e.correlationId, createdAt: e.createdAt });
    if (!page.hasMore) return { events };
    cursor = page.cursor ?? undefined;
  }
});
