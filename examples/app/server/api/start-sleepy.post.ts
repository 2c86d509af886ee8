// POST {name, sleepMs?} → starts `sleepy(name, sleepMs)` (4,000 ms unless given); → {runId}
import { start } from "workflow/api";
import { defineEventHandler } from "nitro/h3";
import { sleepy } from "../../workflows/sleepy";

export default defineEventHandler(async ({ req }) => {
  const { name, sleepMs = 4_000 } = (await req.json()) as { name: string; sleepMs?: number };
  const run = await start(sleepy, [name, sleepMs]);
  return { runId: run.runId };
});
