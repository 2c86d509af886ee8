// Counts the queue's deliveries to the flow handler per run (the body carries runId), so
// the tests can check how many invocations a run took. The request body is read from a
// clone; the handler gets the original.
import { defineMiddleware } from "nitro/h3";
import { flowInvocations } from "../lib/registry";

export default defineMiddleware(async (event) => {
  const req = event.req;
  if (req.method !== "POST" || !new URL(req.url).pathname.endsWith("/.well-known/workflow/v1/flow")) return;
  try {
    const body = (await req.clone().json()) as { runId?: unknown };
    if (typeof body?.runId === "string") {
      const counts = flowInvocations();
      counts.set(body.runId, (counts.get(body.runId) ?? 0) + 1);
    }
  } catch {
    // Not JSON: not a run's delivery.
  }
});
