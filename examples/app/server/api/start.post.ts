// POST {name, token} → starts `demo(name, token)` and `doomed(name)`; → {runId, doomedRunId}
import { start } from "workflow/api";
import { defineEventHandler } from "nitro/h3";
import { demo, doomed } from "../../workflows/demo";

export default defineEventHandler(async ({ req }) => {
  const { name, token } = (await req.json()) as { name: string; token: string };
  const run = await start(demo, [name, token]);
  const doomedRun = await start(doomed, [name]);
  return { runId: run.runId, doomedRunId: doomedRun.runId };
});
