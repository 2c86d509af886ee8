// GET ?id= → every event of the run in log order (id, type, correlation id), paging with
// the World's cursor.
import { getWorld } from "workflow/runtime";
import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(async ({ req }) => {
  const runId = new URL(req.url).searchParams.get("id")!;
  const world = await getWorld();
  const events: { eventId: string; eventType: string; correlationId: string | null; createdAt: string }[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const page = await world.events.list({ runId, pagination: { sortOrder: "asc", cursor, limit: 25 } });
    pages++;
    for (const e of page.data) events.push({ eventId: e.eventId, eventType: e.eventType, correlationId: e.correlationId ?? null, createdAt: new Date(e.createdAt).toISOString() });
    if (!page.hasMore || !page.cursor) break;
    cursor = page.cursor;
  }
  return { events, pages };
});
